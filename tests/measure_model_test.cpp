/// \file measure_model_test.cpp
/// `webtune measure-model` (cli/measure_model_command.cpp, deploy/model_measure.hpp) as users run
/// it: the real binary as a child process against a real tracker on loopback that serves a fake
/// package (tests/support/model_packages.hpp), with a fake agent in a thread that declares
/// "model" and answers the job. Checks what the CLI submits (package, manifest hash, seed,
/// reference samples from the CPU reference executor on a small ONNX model written here, the
/// options), what it records, what it prints, and how it ends when the job fails or is refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "codegen/seeded_random.hpp"
#include "support/model_packages.hpp"
#include "support/run_webtune.hpp"
#include "tracker/model_job.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"
#include "tuner/records.hpp"

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing_support::run_webtune;
using testing_support::WebtuneRun;

constexpr int64_t kIn = 12, kOut = 10;

float weight(int64_t i, int64_t j) {
  return 0.01f * static_cast<float>((i * kOut + j) % 17) - 0.05f;
}

/// input [1,12] → MatMul(W [12,10]) → output [1,10], opset 13: the fake package's shapes.
void write_matmul_model(const fs::path& path) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.set_producer_name("webtune-test");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("matmul");
  auto tensor_type = [](onnx::ValueInfoProto* v, std::vector<int64_t> dims) {
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  auto* x = g->add_input();
  x->set_name("input");
  tensor_type(x, {1, kIn});
  auto* y = g->add_output();
  y->set_name("output");
  tensor_type(y, {1, kOut});
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto_DataType_FLOAT);
  w->add_dims(kIn);
  w->add_dims(kOut);
  for (int64_t i = 0; i < kIn; ++i)
    for (int64_t j = 0; j < kOut; ++j) w->add_float_data(weight(i, j));
  auto* n = g->add_node();
  n->set_op_type("MatMul");
  n->set_name("mm");
  n->add_input("input");
  n->add_input("W");
  n->add_output("output");
  std::ofstream out(path, std::ios::binary);
  ASSERT_TRUE(m.SerializeToOstream(&out));
}

/// The model's output on the seeded input, in double.
std::vector<double> expected_output(uint64_t seed) {
  const std::vector<float> x = seeded_tensor(seed, 0, kIn);
  std::vector<double> y(kOut, 0.0);
  for (int64_t j = 0; j < kOut; ++j)
    for (int64_t i = 0; i < kIn; ++i) y[j] += double{x[i]} * double{weight(i, j)};
  return y;
}

/// A fake agent of key webgl2:fake-gpu that runs model jobs: it takes one job, keeps its input
/// and answers `result`.
class FakeModelAgent {
 public:
  FakeModelAgent(const std::string& url, bj::object result) {
    tracker::Hello hello;
    hello.role = tracker::Role::kAgent;
    hello.name = "fake";
    hello.keys = {"webgl2:fake-gpu"};
    hello.job_kinds = {"model"};
    client_ = std::make_unique<tracker::TrackerClient>(url, hello);
    thread_ = std::thread([this, result] {
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      while (std::chrono::steady_clock::now() < deadline && !stop_) {
        auto m = client_->next_message(100ms);
        if (!m || tracker::message_type(*m) != "job") continue;
        input_ = m->at("input");
        client_->send_text(bj::serialize(bj::object{{"type", "result"},
                                                    {"job", m->at("job")},
                                                    {"attempt", m->at("attempt")},
                                                    {"result", result}}));
        return;
      }
    });
  }
  ~FakeModelAgent() {
    stop_ = true;
    thread_.join();
  }
  /// The input of the job it took (null when none); call after the CLI ended.
  const bj::value& input() const { return input_; }

 private:
  std::unique_ptr<tracker::TrackerClient> client_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bj::value input_;
};

class MeasureModelTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("webtune_measure_model_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "models");
    package_ = testing_support::make_model_package(dir_ / "models", "net-web", "webgl2", 64, 2, 5.5,
                                                   kIn, kOut);
    write_matmul_model(dir_ / "matmul.onnx");
    tracker::TrackerConfig config;
    config.port = 0;
    config.models_root = (dir_ / "models").string();
    server_ = std::make_unique<tracker::TrackerServer>(config);
    server_->start_background();
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  WebtuneRun measure(const std::string& key, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"measure-model",
                                     "--tracker",
                                     server_->url(),
                                     "--models",
                                     (dir_ / "models").string(),
                                     "--model",
                                     "net-web",
                                     "--key",
                                     key,
                                     "--db",
                                     db(),
                                     "--runs",
                                     "3",
                                     "--warmup",
                                     "1",
                                     "--timeout",
                                     "60",
                                     "--seed",
                                     "9",
                                     "--wait",
                                     "30"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_webtune(args);
  }
  std::string db() const { return (dir_ / "records.db").string(); }

  fs::path dir_;
  testing_support::FakePackage package_;
  std::unique_ptr<tracker::TrackerServer> server_;
};

bj::object ok_result(bj::array costs) {
  return bj::object{{"error_no", 0},
                    {"message", ""},
                    {"costs", std::move(costs)},
                    {"all_cost", 2.5},
                    {"timestamp", 1.7e9}};
}

TEST_F(MeasureModelTest, SubmitsTheSeededInputWithReferenceSamplesRecordsAndPrints) {
  FakeModelAgent agent(server_->url(), ok_result(bj::array{0.010, 0.012, 0.011}));
  const WebtuneRun run = measure("webgl2", {"--reference", (dir_ / "matmul.onnx").string()});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();

  // What the agent was asked to run.
  ASSERT_TRUE(agent.input().is_object()) << "the fake agent got no job\n" << run.describe();
  const tracker::ModelMeasureInput input = tracker::ModelMeasureInput::from_json(agent.input());
  EXPECT_EQ(agent.input().at("kind").as_string(), "model");
  EXPECT_EQ(input.model, "net-web");
  EXPECT_EQ(input.manifest_sha256, tracker::sha256_hex(package_.manifest_text));
  EXPECT_EQ(input.seed, 9u);
  EXPECT_EQ(input.options.repeat, 3);
  EXPECT_EQ(input.options.number, 1);
  EXPECT_DOUBLE_EQ(input.options.timeout_s, 60);
  EXPECT_EQ(input.warmup, 1);
  // Every output element sampled (10 ≤ 4096), at the reference executor's value on seed 9.
  const std::vector<double> y = expected_output(9);
  ASSERT_EQ(input.samples.size(), static_cast<size_t>(kOut));
  double max_abs = 0;
  for (double v : y) max_abs = std::max(max_abs, std::fabs(v));
  for (int64_t j = 0; j < kOut; ++j) {
    EXPECT_EQ(input.samples[j].index, j);
    EXPECT_NEAR(input.samples[j].value, y[j], 1e-5) << "sample " << j;
    EXPECT_NEAR(input.samples[j].tolerance, std::max(1e-3 * max_abs, 1e-6), 1e-9);
  }

  // What it printed: median, min, max, the estimate and the ratio.
  EXPECT_THAT(run.out, HasSubstr("median 11.000 ms  min 10.000 ms  max 12.000 ms  (3 runs after "
                                 "1 warm-up)"));
  EXPECT_THAT(run.out, HasSubstr("estimate  5.500 ms (sum of weight x best cost)  measured / "
                                 "estimate 2.000"));
  EXPECT_THAT(run.out, HasSubstr("on webgl2:fake-gpu by fake, seed 9, 10 reference samples"));

  // What it recorded.
  RecordStore store(db());
  const auto records = store.model_measurements();
  ASSERT_EQ(records.size(), 1u);
  const ModelMeasurementRecord& r = records[0];
  EXPECT_THAT(run.out, HasSubstr("record    " + std::to_string(r.id) + " in " + db()));
  EXPECT_EQ(r.model, "net-web");
  EXPECT_EQ(r.manifest_sha256, input.manifest_sha256);
  EXPECT_EQ(r.model_sha256, std::string(64, 'a'));
  EXPECT_EQ(r.target, "webgl2");
  EXPECT_EQ(r.device_key, "webgl2:fake-gpu");
  EXPECT_EQ(r.agent, "fake");
  EXPECT_EQ(r.seed, 9u);
  EXPECT_EQ(r.costs, (std::vector<double>{0.010, 0.012, 0.011}));
  ASSERT_TRUE(r.median_ms && r.estimated_ms);
  EXPECT_DOUBLE_EQ(*r.median_ms, 11.0);
  EXPECT_DOUBLE_EQ(*r.estimated_ms, 5.5);
  EXPECT_EQ(r.error, MeasureErrorNo::kNoError);
}

TEST_F(MeasureModelTest, AFailedJobIsRecordedPrintedAndEndsWithStatusOne) {
  FakeModelAgent agent(server_->url(),
                       bj::object{{"error_no", 5},
                                  {"message", "output[3] = 7, expected 0.1 +- 0.001"},
                                  {"costs", bj::array{}},
                                  {"all_cost", 1.0},
                                  {"timestamp", 1.7e9}});
  const WebtuneRun run = measure("webgl2");
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 1) << run.describe();
  EXPECT_THAT(run.out, HasSubstr("error     WRONG_ANSWER: output[3] = 7, expected 0.1 +- 0.001"));
  // Without --reference there are no samples.
  ASSERT_TRUE(agent.input().is_object()) << run.describe();
  EXPECT_TRUE(agent.input().at("samples").as_array().empty());
  RecordStore store(db());
  const auto records = store.model_measurements();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error, MeasureErrorNo::kWrongAnswer);
  EXPECT_FALSE(records[0].median_ms.has_value());
}

TEST_F(MeasureModelTest, ARefusedSubmitSaysWhyAndRecordsNothing) {
  const WebtuneRun run = measure("gles");
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 1) << run.describe();
  EXPECT_EQ(run.out, "");
  EXPECT_THAT(run.err, HasSubstr("is for target webgl2, which agents of key family 'webgl2' run"));
  RecordStore store(db());
  EXPECT_TRUE(store.model_measurements().empty());
}

}  // namespace
}  // namespace webtune
