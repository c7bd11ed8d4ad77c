/// \file graph_model_test.cpp
/// Whole models through the graph layer: import → fusion passes → reference executor. The
/// fused graph must compute what the ONNX graph computes (onnxruntime's logits for the real
/// PyTorch exports of ../shared/models, skipped with a message when it is absent), and the
/// model zoo's architectures must import to the same tuning tasks as those exports.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "graph/task_extraction.hpp"
#include "graph/zoo.hpp"

namespace fs = std::filesystem;
using namespace webtune::graph;

namespace {

const fs::path kShared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";

std::vector<float> read_f32(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), values.size() * 4);
  return values;
}

class SharedModel : public ::testing::TestWithParam<std::string> {};

}  // namespace

// The fused graph (FusedConv / FusedGemm with their epilogues) against onnxruntime's output:
// the passes keep the model's numbers. Tolerance: issue 15's 1e-4 × max |logit|.
TEST_P(SharedModel, FusedGraphMatchesOnnxruntime) {
  const std::string model = GetParam();
  if (!fs::exists(kShared / (model + ".onnx")))
    GTEST_SKIP() << "../shared/models is absent (a user's clone has none): " << model
                 << " is not run here";
  ImportReport report;
  Graph graph = import_onnx_file((kShared / (model + ".onnx")).string(), {}, &report);
  const PassReport passes = run_fusion_passes(graph);
  EXPECT_GT(passes.total(), 0);
  int fused = 0;
  for (const Node& n : graph.nodes) fused += n.op_type.rfind("Fused", 0) == 0;
  EXPECT_EQ(fused, model == "resnet18" ? 21 : 53);  // every Conv and the Gemm
  const auto input = read_f32(kShared / (model + ".input.f32"));
  const auto expected = read_f32(kShared / (model + ".logits.f32"));
  ASSERT_EQ(expected.size(), 1000u);
  const ValueMap out =
      execute(graph, {{graph.inputs.at(0), Value::floats({1, 3, 224, 224}, input)}},
              {.opset = report.opset});
  const Value& logits = out.at(graph.outputs.at(0));
  double max_logit = 0, err = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    max_logit = std::max(max_logit, std::fabs(static_cast<double>(expected[i])));
    err = std::max(err, std::fabs(static_cast<double>(logits.data.at(i)) - expected[i]));
  }
  std::cout << model << " fused: max abs error " << err << " (max |logit| " << max_logit << ")\n";
  EXPECT_LE(err, 1e-4 * max_logit);
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedModel, ::testing::Values("resnet18", "mobilenet_v2"),
                         [](const auto& info) { return info.param; });

namespace {

std::map<std::string, int> task_weights(Graph graph) {
  run_fusion_passes(graph);
  std::map<std::string, int> weights;
  for (const ExtractedTask& t : extract_tasks(graph).tasks) weights[t.workload.key()] = t.weight;
  return weights;
}

class ZooModel : public ::testing::TestWithParam<std::string> {};

}  // namespace

// The zoo writes the architectures so that users without a model file (and `make demo`) tune
// exactly the tasks of the PyTorch exports: same keys (shapes + epilogues), same weights.
TEST_P(ZooModel, ImportsToTheTasksOfThePyTorchExport) {
  const std::string model = GetParam();
  const std::map<std::string, int> zoo = task_weights(import_onnx_bytes(zoo_model(model), model));
  // ResNet-18: 15 distinct convolutions + the classifier; MobileNet-v2: 30 + the classifier
  // (configs/workloads/resnet18_fused.json and mobilenet_v2.json, plus dense 1x1000xK + bias).
  EXPECT_EQ(zoo.size(), model == "resnet18" ? 16u : 31u);
  int nodes = 0;
  for (const auto& [key, weight] : zoo) nodes += weight;
  EXPECT_EQ(nodes, model == "resnet18" ? 21 : 53);
  if (!fs::exists(kShared / (model + ".onnx")))
    GTEST_SKIP() << "../shared/models is absent (a user's clone has none): the zoo's " << model
                 << " is not compared with the PyTorch export here";
  EXPECT_EQ(zoo, task_weights(import_onnx_file((kShared / (model + ".onnx")).string())));
}

// Seeded weights keep activations of order 1: the logits are finite, spread, and the fused
// graph computes what the ONNX graph computes (no ../shared needed).
TEST_P(ZooModel, FusedAndUnfusedGraphsAgreeOnFiniteSpreadLogits) {
  const std::string model = GetParam();
  const Graph plain = import_onnx_bytes(zoo_model(model, 7), model);
  Graph fused = plain;
  run_fusion_passes(fused);
  std::vector<float> input(3 * 224 * 224);
  uint64_t state = 12345;
  for (float& x : input) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<int64_t>(state >> 40) % 2001 - 1000) / 1000.0f;
  }
  const ValueMap in = {{plain.inputs.at(0), Value::floats({1, 3, 224, 224}, input)}};
  const std::vector<float> a = execute(plain, in).at(plain.outputs.at(0)).data;
  const std::vector<float> b = execute(fused, in).at(fused.outputs.at(0)).data;
  ASSERT_EQ(a.size(), 1000u);
  ASSERT_EQ(b.size(), 1000u);
  double max_abs = 0, err = 0, lo = a[0], hi = a[0];
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i])) << i;
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(a[i])));
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
    lo = std::min(lo, static_cast<double>(a[i]));
    hi = std::max(hi, static_cast<double>(a[i]));
  }
  std::cout << model << " zoo: logits in [" << lo << ", " << hi << "], fused vs plain " << err
            << "\n";
  EXPECT_LT(max_abs, 100.0);
  EXPECT_GT(hi - lo, 0.1);
  EXPECT_LE(err, 1e-5 * std::max(1.0, max_abs));
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooModel, ::testing::Values("resnet18", "mobilenet_v2"),
                         [](const auto& info) { return info.param; });
