/// \file k_groups_package_test.cpp
/// gles-compute's k_groups (cross-workgroup split-K with scratch buffers) in a model package, on
/// Mesa llvmpipe through headless EGL: a small ONNX model written here (X [8, 256] → Gemm →
/// Relu → Gemm → Relu, both Gemms 256 → 256 with a bias, so that both fuse into the same dense
/// task of weight 2), a records file whose one trial for that task is a valid k_groups = 2
/// config, `webtune build`'s build_package for target gles-compute, and the native model runner
/// (`webtune run`'s ModelRunner) against the graph's reference executor.
///
/// It checks that the task takes the record (k_groups 2 in the manifest's config), that the
/// kernel file carries its scratch needs (scratch_floats = k_groups · M · N, scratch_counters
/// > 0, in the file's JSON), that both nodes' steps run that one kernel (so they share its
/// scratch buffers one dispatch after the other), and that the output matches the reference on
/// several runs and inputs: a counter the kernel failed to reset, or scratch not bound, would
/// make a later run wrong.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "codegen/seeded_random.hpp"
#include "codegen/task.hpp"
#include "deploy/package.hpp"
#include "deploy/planner.hpp"
#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "graph/task_extraction.hpp"
#include "native_agent/egl_context.hpp"
#include "native_agent/model_runner.hpp"
#include "tuner/records.hpp"

namespace webtune {
namespace {

namespace fs = std::filesystem;
namespace bj = boost::json;

constexpr int64_t kRows = 8, kFeatures = 256;

/// A folder of this test process, removed at exit.
const fs::path& temp_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("k_groups_package_test_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

/// Removes temp_dir() at exit. Its constructor makes the folder's static first, so that the
/// path is destroyed after this destructor has used it.
struct TempCleanup {
  TempCleanup() { temp_dir(); }
  ~TempCleanup() {
    std::error_code ec;
    fs::remove_all(temp_dir(), ec);
  }
} cleanup;

/// X [8, 256] → Gemm(W1 [256, 256] transB 1, C1 [256]) → Relu → Gemm(W2, C2) → Relu → Y, opset
/// 13, seeded weights of scale 1/16 (so that activations stay of order one).
std::string two_gemm_model() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.set_producer_name("webtune-test");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("two_gemm");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> shape) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : shape) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "X", {kRows, kFeatures});
  value(g->add_output(), "Y", {kRows, kFeatures});
  auto initializer = [&](const std::string& name, std::vector<int64_t> dims, uint64_t seed) {
    auto* w = g->add_initializer();
    w->set_name(name);
    w->set_data_type(onnx::TensorProto_DataType_FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) w->add_dims(d), n *= d;
    for (float v : seeded_tensor(seed, 0, n)) w->add_float_data(v / 16.0f);
  };
  std::string input = "X";
  for (int layer = 1; layer <= 2; ++layer) {
    const std::string id = std::to_string(layer);
    initializer("W" + id, {kFeatures, kFeatures}, 100 + layer);
    initializer("C" + id, {kFeatures}, 200 + layer);
    auto* gemm = g->add_node();
    gemm->set_op_type("Gemm");
    gemm->set_name("gemm" + id);
    gemm->add_input(input);
    gemm->add_input("W" + id);
    gemm->add_input("C" + id);
    gemm->add_output("G" + id);
    auto* trans_b = gemm->add_attribute();
    trans_b->set_name("transB");
    trans_b->set_type(onnx::AttributeProto_AttributeType_INT);
    trans_b->set_i(1);
    auto* relu = g->add_node();
    relu->set_op_type("Relu");
    relu->set_name("relu" + id);
    relu->add_input("G" + id);
    input = layer == 2 ? "Y" : "H" + id;
    relu->add_output(input);
  }
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

/// A records file holding one successful trial of `config` for `workload` on gles:llvmpipe.
std::string records_with(const Workload& workload, const ConfigEntity& config) {
  const std::string path = (temp_dir() / "records.db").string();
  fs::remove(path);
  RecordStore store(path);
  const int64_t job = store.open_job(workload, Target::kGlesCompute, "gles:llvmpipe", "dense");
  TrialRecord t;
  t.config_index = config.index();
  t.config_json = bj::serialize(config.to_json());
  t.result.costs = {0.001, 0.001};
  t.agent = "test";
  EXPECT_EQ(store.add_trials(job, {t}), 1);
  store.set_status(job, "done");
  return path;
}

/// The first valid config of `task` with k_groups = 2 drawn from a seeded generator.
ConfigEntity grouped_config(const Task& task) {
  std::mt19937_64 rng(14);
  std::uniform_int_distribution<int64_t> index(0, task.space->raw_size() - 1);
  for (int tries = 0; tries < 200000; ++tries) {
    const ConfigEntity e = task.space->get(index(rng));
    if (e.get_int("k_groups") == 2 && task.space->is_valid(e)) return e;
  }
  ADD_FAILURE() << "no valid k_groups 2 config of " << task.workload.key();
  return task.default_config();
}

/// The reference executor's Y for `x`.
std::vector<float> reference(const std::string& bytes, const std::vector<float>& x) {
  graph::ImportReport report;
  const graph::Graph graph = graph::import_onnx_bytes(bytes, "two_gemm", {}, &report);
  graph::ExecuteOptions options;
  options.opset = report.opset;
  graph::ValueMap inputs;
  inputs[graph.inputs.at(0)] = graph::Value::floats({kRows, kFeatures}, x);
  return graph::execute(graph, inputs, options).at("Y").data;
}

/// max |a − b| ≤ 1e-4 · max |b| + 1e-6, and no NaN.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  double max_error = 0, max_value = 0;
  size_t worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(double{actual[i]} - double{expected[i]});
    if (!(error <= max_error)) max_error = error, worst = i;  // NaN counts as the worst
    max_value = std::max(max_value, std::fabs(double{expected[i]}));
  }
  EXPECT_LE(max_error, 1e-4 * max_value + 1e-6)
      << "worst at " << worst << ": " << actual[worst] << " vs " << expected[worst];
  EXPECT_GT(max_value, 0.0);
}

TEST(KGroupsPackage, ATaskWithAKGroupsRecordBuildsAndRunsAgainstTheReference) {
  const std::string bytes = two_gemm_model();
  const fs::path onnx = temp_dir() / "two_gemm.onnx";
  std::ofstream(onnx, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));

  // The model's one task: dense 8 × 256 × 256 with bias and ReLU, run by both Gemms.
  graph::Graph g = graph::import_onnx_bytes(bytes, "two_gemm");
  graph::run_fusion_passes(g);
  const graph::Extraction extraction = graph::extract_tasks(g);
  ASSERT_EQ(extraction.tasks.size(), 1u);
  const graph::ExtractedTask& dense = extraction.tasks[0];
  ASSERT_EQ(dense.weight, 2);
  const Task task = Task::create(dense.workload, Target::kGlesCompute);
  const ConfigEntity config = grouped_config(task);
  ASSERT_EQ(config.get_int("k_groups"), 2);

  deploy::BuildOptions options;
  options.model_path = onnx.string();
  options.db_path = records_with(dense.workload, config);
  options.target = "gles-compute";
  options.device_key = "gles:llvmpipe";
  options.out_dir = (temp_dir() / "package").string();
  const deploy::PlannedPackage package = deploy::build_package(options);

  // The task took the record, and its kernel asks for scratch.
  const deploy::Manifest& m = package.manifest;
  ASSERT_EQ(m.tasks.size(), 1u);
  EXPECT_EQ(m.tasks[0].source, deploy::TaskSource::kRecord);
  EXPECT_EQ(bj::serialize(m.tasks[0].config), bj::serialize(config.to_json()));
  std::vector<std::string> files;
  for (const deploy::PackageStep& s : m.steps)
    if (s.kind == deploy::PackageStep::Kind::kKernel && s.task == m.tasks[0].name)
      files.push_back(s.kernel);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], files[1]) << "both Gemms run the task's one kernel";
  const bj::object kernel =
      bj::parse(std::string(std::istreambuf_iterator<char>(
                                std::ifstream(fs::path(options.out_dir) / files[0]).rdbuf()),
                            {}))
          .as_object();
  ASSERT_TRUE(kernel.contains("scratch_floats")) << bj::serialize(kernel);
  ASSERT_TRUE(kernel.contains("scratch_counters")) << bj::serialize(kernel);
  EXPECT_EQ(kernel.at("scratch_floats").as_int64(), 2 * kRows * kFeatures);
  EXPECT_GT(kernel.at("scratch_counters").as_int64(), 0);
  EXPECT_EQ(kernel.at("dispatch").as_array().at(2).as_int64(), 2);

  // Runs: the first checked step by step, later ones at their end; each against the reference.
  ModelRunner runner(options.out_dir, EglContext::create());
  EXPECT_EQ(runner.kernel_steps(), 2);
  const std::vector<float> x = seeded_tensor(7, 0, kRows * kFeatures);
  const std::vector<float> expected = reference(bytes, x);
  const std::vector<float> first = runner.run(x);
  expect_close(first, expected);
  // Counters back at zero after every dispatch: the next runs give the same floats (the last
  // group sums the partials in group order, so the result is deterministic).
  for (int run = 0; run < 3; ++run) EXPECT_EQ(runner.run(x), first) << "run " << run + 2;
  std::vector<float> other = x;
  for (float& v : other) v = 0.5f - v;
  expect_close(runner.run(other), reference(bytes, other));
  EXPECT_EQ(runner.run(x), first);
  // A profiled run (each step timed on its own) runs the same steps with the same scratch.
  const ModelRunner::RunProfile profile = runner.profile(x);
  EXPECT_EQ(profile.steps.size(), 4u);  // upload, two task steps, download
  EXPECT_EQ(runner.run(x), first);
}

// A kernel file whose scratch fields are malformed is refused at load, naming its step and
// file (not run with wrong buffers).
TEST(KGroupsPackage, NegativeScratchInAKernelFileIsRefusedNamingTheStep) {
  const std::string bytes = two_gemm_model();
  const fs::path onnx = temp_dir() / "two_gemm_bad.onnx";
  std::ofstream(onnx, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  graph::Graph g = graph::import_onnx_bytes(bytes, "two_gemm");
  graph::run_fusion_passes(g);
  const graph::ExtractedTask dense = graph::extract_tasks(g).tasks.at(0);
  const Task task = Task::create(dense.workload, Target::kGlesCompute);
  deploy::BuildOptions options;
  options.model_path = onnx.string();
  options.db_path = records_with(dense.workload, grouped_config(task));
  options.target = "gles-compute";
  options.device_key = "gles:llvmpipe";
  options.out_dir = (temp_dir() / "package_bad").string();
  const deploy::PlannedPackage package = deploy::build_package(options);
  std::string file;
  int step = -1;
  for (size_t i = 0; i < package.manifest.steps.size() && step < 0; ++i)
    if (package.manifest.steps[i].kind == deploy::PackageStep::Kind::kKernel)
      file = package.manifest.steps[i].kernel, step = static_cast<int>(i);
  ASSERT_GE(step, 0);
  const fs::path path = fs::path(options.out_dir) / file;
  bj::value json =
      bj::parse(std::string(std::istreambuf_iterator<char>(std::ifstream(path).rdbuf()), {}));
  json.as_object()["scratch_counters"] = -1;
  std::ofstream(path, std::ios::trunc) << bj::serialize(json);
  try {
    ModelRunner runner(options.out_dir, EglContext::create());
    FAIL() << "a kernel with negative scratch was loaded";
  } catch (const ModelRunError& e) {
    EXPECT_EQ(e.step(), step);
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scratch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace webtune
