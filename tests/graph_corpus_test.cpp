/// \file graph_corpus_test.cpp
/// The corpus of real exports (tests/data/corpus/, issue 48): torchvision classifiers and a
/// segmentation model exported by PyTorch 2.11 on the device machine (bench/corpus/
/// export_corpus.py), each kept as a skeleton whose large weights are seeded recipes
/// (graph/model_recipe.hpp). CMake unpacks corpus.tar.xz into the build folder.
///
/// tests/data/corpus/cases.txt lists every skeleton, one per line:
///   <file> run             restore, import (simplification included), fuse, and run the CPU
///                          reference fused and unfused on a seeded input: every output finite
///                          and the two within 1e-3 × max |output|
///   <file> skip <reason>   not run; the test checks that it still fails to import (else list
///                          it as run)
/// Plus the recipe restorer's own checks.

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "codegen/seeded_random.hpp"
#include "graph/executor.hpp"
#include "graph/model_recipe.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"

namespace fs = std::filesystem;
using namespace webtune;
using namespace webtune::graph;

namespace {

const fs::path kCorpus = WEBTUNE_CORPUS_DIR;
const fs::path kCases = fs::path(WEBTUNE_SOURCE_DIR) / "tests" / "data" / "corpus" / "cases.txt";

struct CorpusCase {
  std::string file;
  bool run = false;
  std::string reason;
};

void PrintTo(const CorpusCase& c, std::ostream* os) {
  *os << c.file << (c.run ? " run" : " skip");
}

std::vector<CorpusCase> listed_cases() {
  std::vector<CorpusCase> cases;
  std::ifstream in(kCases);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    CorpusCase c;
    std::string verdict;
    words >> c.file >> verdict;
    c.run = verdict == "run";
    std::getline(words, c.reason);
    cases.push_back(c);
  }
  return cases;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

Graph import_skeleton(const CorpusCase& c, ImportReport* report) {
  const std::string bytes = restore_recipes(read_bytes(kCorpus / c.file), c.file);
  return import_onnx_bytes(bytes, c.file, {}, report);
}

ValueMap seeded_inputs(const Graph& g) {
  ValueMap in;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Tensor& t = g.tensor(g.inputs[i]);
    std::vector<float> data = seeded_tensor(7, static_cast<int>(i), t.elements());
    for (float& v : data) v = 0.5f * (v + 1.0f);  // [0, 1), as torch.rand
    in[t.name] = Value::floats(t.shape, std::move(data));
  }
  return in;
}

class Corpus : public ::testing::TestWithParam<CorpusCase> {};

std::string case_name(const ::testing::TestParamInfo<CorpusCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.rfind('.'));
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

}  // namespace

TEST(CorpusList, EverySkeletonIsListedOnce) {
  if (!fs::exists(kCorpus)) GTEST_SKIP() << kCorpus << " is absent (CMake unpacks it)";
  std::set<std::string> listed;
  for (const CorpusCase& c : listed_cases()) {
    EXPECT_TRUE(listed.insert(c.file).second) << c.file << " is listed twice";
    EXPECT_TRUE(fs::exists(kCorpus / c.file)) << c.file << " is listed but not in the corpus";
    if (!c.run) {
      EXPECT_FALSE(c.reason.empty()) << c.file << " is skipped without a reason";
    }
  }
  int files = 0;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    if (entry.path().extension() != ".onnx") continue;
    ++files;
    EXPECT_TRUE(listed.count(entry.path().filename().string()))
        << entry.path().filename() << " is not listed in " << kCases;
  }
  EXPECT_GE(files, 26);
}

TEST_P(Corpus, ImportsAndRunsOnTheReference) {
  const CorpusCase& c = GetParam();
  if (!c.run) {
    ImportReport report;
    bool refused = false;
    try {
      Graph g = import_skeleton(c, &report);
      refused = !report.unsupported.empty();
      if (!refused) execute(g, seeded_inputs(g), {false, report.opset});
    } catch (const std::exception& e) {
      refused = true;
    }
    EXPECT_TRUE(refused) << c.file << " is listed as skipped (" << c.reason
                         << ") but now imports and runs: list it as run";
    return;
  }
  ImportReport report;
  Graph plain = import_skeleton(c, &report);
  EXPECT_TRUE(report.unsupported.empty()) << c.file << ": unsupported operators remain";
  Graph fused = plain;
  run_fusion_passes(fused);
  const ValueMap inputs = seeded_inputs(plain);
  const ValueMap a = execute(plain, inputs, {false, report.opset});
  const ValueMap b = execute(fused, inputs, {false, report.opset});
  for (const std::string& out : plain.outputs) {
    const Value& x = a.at(out);
    const Value& y = b.at(out);
    ASSERT_EQ(x.shape, y.shape) << out;
    double scale = 0, worst = 0;
    for (size_t i = 0; i < x.data.size(); ++i) {
      ASSERT_TRUE(std::isfinite(x.data[i])) << out << "[" << i << "] is not finite";
      scale = std::max(scale, std::abs(double(x.data[i])));
      worst = std::max(worst, std::abs(double(x.data[i]) - y.data[i]));
    }
    EXPECT_GT(scale, 0.0) << out << " is all zeros: the recipe weights lost the scale";
    EXPECT_LE(worst, 1e-3 * scale) << c.file << " " << out << ": fused and plain differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Exports, Corpus, ::testing::ValuesIn(listed_cases()), case_name);

// ---------------------------------------------------------------------------------------------
// The recipe restorer.

namespace {

std::string skeleton_with(const std::string& doc, int32_t type = onnx::TensorProto_DataType_FLOAT) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(type);
  t->add_dims(1000);
  t->add_dims(3);
  t->set_doc_string(doc);
  std::string s;
  m.SerializeToString(&s);
  return s;
}

std::vector<float> restored_floats(const std::string& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  const std::string& raw = m.graph().initializer(0).raw_data();
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), raw.size());
  EXPECT_TRUE(m.graph().initializer(0).doc_string().empty());
  return v;
}

}  // namespace

TEST(Recipe, FillsTheRangeDeterministically) {
  int n = 0;
  const std::string doc = "webtune-recipe uniform lo=-0.25 hi=0.75 seed=42";
  const std::vector<float> v = restored_floats(restore_recipes(skeleton_with(doc), "s.onnx", &n));
  EXPECT_EQ(n, 1);
  ASSERT_EQ(v.size(), 3000u);
  double sum = 0;
  for (float x : v) {
    EXPECT_GE(x, -0.25f);
    EXPECT_LE(x, 0.75f);
    sum += x;
  }
  EXPECT_NEAR(sum / 3000, 0.25, 0.02);
  EXPECT_EQ(v, restored_floats(restore_recipes(skeleton_with(doc), "s.onnx")));
  const std::vector<float> other = restored_floats(
      restore_recipes(skeleton_with("webtune-recipe uniform lo=-0.25 hi=0.75 seed=43"), "s"));
  EXPECT_NE(v, other);
  // The first value, from splitmix64's first output for state 42.
  uint64_t state = 42;
  const double u = static_cast<double>(splitmix64_next(state) >> 40) * 0x1p-24;
  EXPECT_EQ(v[0], static_cast<float>(-0.25 + 1.0 * u));
}

TEST(Recipe, BadRecipesAreRefusedNamingTheTensor) {
  auto refusal = [](const std::string& bytes) -> std::string {
    try {
      restore_recipes(bytes, "s.onnx");
    } catch (const GraphError& e) {
      return e.what();
    }
    return "(restored)";
  };
  for (const char* doc :
       {"webtune-recipe normal lo=0 hi=1 seed=1", "webtune-recipe uniform lo=0 hi=1",
        "webtune-recipe uniform lo=1 hi=0 seed=1", "webtune-recipe uniform lo=x hi=1 seed=1",
        "webtune-recipe uniform lo=0 hi=inf seed=1", "webtune-recipe uniform lo=0 hi=1 seed=-3x"}) {
    const std::string why = refusal(skeleton_with(doc));
    EXPECT_NE(why.find("s.onnx: initializer 'w'"), std::string::npos) << doc << ": " << why;
  }
  EXPECT_NE(refusal(skeleton_with("webtune-recipe uniform lo=0 hi=1 seed=1",
                                  onnx::TensorProto_DataType_INT64))
                .find("not float32"),
            std::string::npos);
  EXPECT_NE(refusal("\xff\xff").find("not an ONNX model"), std::string::npos);
  // No recipe: unchanged.
  int n = -1;
  restore_recipes(skeleton_with("just a comment"), "s.onnx", &n);
  EXPECT_EQ(n, 0);
}
