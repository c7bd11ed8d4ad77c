/// \file cli_import_test.cpp
/// `webtune import` (cli/import_command.cpp) as users run it: the real binary as a child process
/// (tests/support/run_webtune.hpp) on a small ONNX model written here with ONNX's protobuf
/// classes, and on ../shared/models/resnet18.onnx where present (skipped with a message naming
/// it otherwise). Checks the summary on stdout, the workload file -o writes (read back with
/// load_workload_file), --dim and --no-fusion, and that a bad model or option ends with a
/// non-zero status and the reason on stderr, nothing on stdout.

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "codegen/workload.hpp"
#include "support/run_webtune.hpp"
#include "tuner/records.hpp"

namespace fs = std::filesystem;
using webtune::load_workload_file;
using webtune::WorkloadFileTask;
using webtune::testing_support::run_webtune;
using webtune::testing_support::WebtuneRun;

namespace {

const fs::path kShared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
const fs::path kConfigs = fs::path(WEBTUNE_SOURCE_DIR) / "configs" / "workloads";

/// X [batch,3,4,4] → Conv(W1 [3,3,3,3], B1, pads 1) → Relu → Conv(W2, B2, pads 1) → Relu → Sinh
/// → Y, opset 13. batch is 1, or the symbolic "batch" when `symbolic`. Sinh is an operator the
/// graph layer does not support: counted, while the two convs still make one task of weight 2.
onnx::ModelProto small_model(bool symbolic) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.set_producer_name("webtune-test");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("two_convs");
  auto* x = g->add_input();
  x->set_name("X");
  auto* xt = x->mutable_type()->mutable_tensor_type();
  xt->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  auto* batch = xt->mutable_shape()->add_dim();
  if (symbolic)
    batch->set_dim_param("batch");
  else
    batch->set_dim_value(1);
  for (int64_t d : {3, 4, 4}) xt->mutable_shape()->add_dim()->set_dim_value(d);
  auto* y = g->add_output();
  y->set_name("Y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  // ONNX's checker requires a shape on graph outputs; its dimensions may stay unknown.
  for (int i = 0; i < 4; ++i) y->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  auto constant = [g](const std::string& name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(0.01f * static_cast<float>(i % 17));
  };
  auto node = [g](const std::string& op, const std::string& name, std::vector<std::string> in,
                  const std::string& out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  std::string v = "X";
  for (int i = 1; i <= 2; ++i) {
    const std::string s = std::to_string(i);
    constant("W" + s, {3, 3, 3, 3});
    constant("B" + s, {3});
    auto* conv = node("Conv", "conv" + s, {v, "W" + s, "B" + s}, "c" + s);
    auto* pads = conv->add_attribute();
    pads->set_name("pads");
    pads->set_type(onnx::AttributeProto_AttributeType_INTS);
    for (int k = 0; k < 4; ++k) pads->add_ints(1);
    node("Relu", "relu" + s, {"c" + s}, "r" + s);
    v = "r" + s;
  }
  node("Sinh", "sinh", {v}, "Y");
  return m;
}

class CliImportTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("webtune_cli_import_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_model(const onnx::ModelProto& model, const std::string& name) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    model.SerializeToOstream(&out);
    return path;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(CliImportTest, PrintsTheTasksAndWritesAWorkloadFileThatLoadsBack) {
  const std::string model = write_model(small_model(false), "two_convs.onnx");
  const std::string tasks = path("tasks.json");
  const WebtuneRun run = run_webtune({"import", model, "-o", tasks});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  EXPECT_NE(run.out.find("opset 13, producer webtune-test"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nsimplified: nothing to simplify\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("operators: 5 nodes before fusion, 3 after"), std::string::npos)
      << run.out;
  // The unsupported Sinh is listed with its count; the tasks are still extracted.
  EXPECT_NE(run.out.find("unsupported operators (kept as graph nodes"), std::string::npos);
  EXPECT_NE(run.out.find("  Sinh "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\n1 task (2 nodes,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("conv2d_1"), std::string::npos);
  EXPECT_NE(run.out.find("1x3x4x4 K3 3x3 s1 p1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("bias+relu"), std::string::npos);
  EXPECT_NE(run.err.find("wrote 1 task to " + tasks), std::string::npos) << run.err;

  const std::vector<WorkloadFileTask> loaded = load_workload_file(tasks);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].workload.key(), "conv2d_1_3_4_4_3_3x3_s1_p1+bias+relu");
  EXPECT_EQ(loaded[0].workload.name, "conv2d_1");
  EXPECT_EQ(loaded[0].occurrences, 2);
}

TEST_F(CliImportTest, NoFusionKeepsPlainOperatorsAndDimBindsASymbolicBatch) {
  const std::string model = write_model(small_model(true), "symbolic.onnx");
  // Without a binding the importer names the dimension; exit status 2, nothing on stdout.
  WebtuneRun run = run_webtune({"import", model});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("batch"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");

  const std::string tasks = path("tasks.json");
  run = run_webtune({"import", model, "--dim", "batch=2", "--no-fusion", "-o", tasks});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  EXPECT_NE(run.out.find("operators: 5 nodes (fusion off: --no-fusion)"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("input  X [2,3,4,4] float32"), std::string::npos) << run.out;
  const std::vector<WorkloadFileTask> loaded = load_workload_file(tasks);
  ASSERT_EQ(loaded.size(), 1u);
  // Unfused, each conv still has its own B, but no relu.
  EXPECT_EQ(loaded[0].workload.key(), "conv2d_2_3_4_4_3_3x3_s1_p1+bias");
  EXPECT_EQ(loaded[0].occurrences, 2);
}

TEST_F(CliImportTest, BadModelsAndOptionsAreRefusedOnStderr) {
  const std::string garbage = path("garbage.onnx");
  std::ofstream(garbage) << "this is not a protobuf model at all \x01\x02\x03";
  const std::string truncated = path("truncated.onnx");
  {
    std::string bytes;
    small_model(false).SerializeToString(&bytes);
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  struct Case {
    std::vector<std::string> args;
    int status;  ///< -1: any non-zero
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {{"import", garbage}, 2, {garbage, "not an ONNX model"}},
      {{"import", truncated, "-o", path("never.json")}, 2, {truncated}},
      {{"import", path("missing.onnx")}, 2, {"missing.onnx", "cannot open"}},
      {{"import", garbage, "--dim", "batch"}, -1, {"NAME=VALUE"}},
      {{"import", garbage, "--dim", "batch=0"}, -1, {"integer in [1, 16777216]"}},
      {{"import"}, -1, {"model"}},
  };
  for (const Case& c : cases) {
    std::string command = "webtune";
    for (const std::string& a : c.args) command += " " + a;
    SCOPED_TRACE(command);
    const WebtuneRun run = run_webtune(c.args);
    ASSERT_TRUE(run.exited) << run.describe();
    if (c.status >= 0)
      EXPECT_EQ(run.status, c.status) << run.describe();
    else
      EXPECT_NE(run.status, 0) << run.describe();
    for (const std::string& text : c.expected)
      EXPECT_NE(run.err.find(text), std::string::npos) << "stderr lacks '" << text << "'\n"
                                                       << run.describe();
    EXPECT_EQ(run.out, "");
  }
  EXPECT_FALSE(fs::exists(path("never.json")));
}

TEST_F(CliImportTest, ResNet18GivesSixteenTasks) {
  if (!fs::exists(kShared / "resnet18.onnx"))
    GTEST_SKIP() << "../shared/models is absent (a user's clone has none): `webtune import` on "
                    "the real ResNet-18 export is not tested here";
  const std::string tasks = path("resnet18.json");
  const WebtuneRun run = run_webtune({"import", (kShared / "resnet18.onnx").string(), "-o", tasks});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  EXPECT_NE(run.out.find("\n16 tasks (21 nodes,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("unsupported operators: none"), std::string::npos) << run.out;
  // The 15 convolution tasks of resnet18_fused.json (graph_passes_test says how they arise)
  // and the classifier's dense, by key and occurrence count.
  std::set<std::string> expected, written;
  for (const WorkloadFileTask& t : load_workload_file((kConfigs / "resnet18_fused.json").string()))
    expected.insert(t.workload.key() + " x" + std::to_string(t.occurrences));
  expected.insert("dense_1_1000_512+bias x1");
  for (const WorkloadFileTask& t : load_workload_file(tasks))
    written.insert(t.workload.key() + " x" + std::to_string(t.occurrences));
  EXPECT_EQ(written, expected);
}

}  // namespace

// `webtune tune --model`: the tasks `import` lists, tuned on a real llvmpipe agent of the
// embedded farm with --trials for all of them together, recorded as a model run named after the
// file whose estimated latency (weight 2 × the best cost) is recorded after every batch.
TEST_F(CliImportTest, TuneModelSpendsTheTrialsOnTheModelsTasksAndRecordsAModelRun) {
  const std::string model = write_model(small_model(false), "two_convs.onnx");
  const std::string db = path("tune.db");
  const WebtuneRun run =
      run_webtune({"tune", "--model", model, "--target", "gles-frag", "--trials", "8", "--batch",
                   "4", "--local-agents", "1", "--repeat", "1", "--db", db});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  // Progress goes to stderr (data to stdout).
  EXPECT_NE(run.err.find("model two_convs: 8/8 trials, estimated latency"), std::string::npos)
      << run.err;
  EXPECT_NE(run.out.find("gradient schedule"), std::string::npos) << run.out;
  webtune::RecordStore store(db);
  const std::vector<webtune::ModelRunInfo> runs = store.model_runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].model, "two_convs");
  EXPECT_EQ(runs[0].schedule, "gradient");
  EXPECT_EQ(runs[0].total_trials, 8);
  ASSERT_EQ(runs[0].jobs.size(), 1u);
  const std::vector<webtune::ModelEstimate> estimates = store.model_estimates(runs[0].id);
  ASSERT_EQ(estimates.size(), 2u);  // one per batch of 4
  EXPECT_EQ(estimates.back().trials, 8);
  EXPECT_GT(estimates.back().latency_ms, 0);
  EXPECT_LE(estimates.back().latency_ms, estimates.front().latency_ms);

  // A task name the model does not have, and --model with --workload, are refused up front.
  const WebtuneRun bad =
      run_webtune({"tune", "--model", model, "--tasks", "conv2d_9", "--trials", "8", "--db", db});
  EXPECT_FALSE(bad.exited && bad.status == 0);
  EXPECT_NE(bad.err.find("no task named 'conv2d_9'"), std::string::npos) << bad.err;
  const WebtuneRun both =
      run_webtune({"tune", "--model", model, "--workload", "dense:8,8,8", "--db", db});
  EXPECT_FALSE(both.exited && both.status == 0);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}
