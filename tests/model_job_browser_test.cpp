/// \file model_job_browser_test.cpp
/// Model jobs on the browser agent (issue 16 item 3, MODEL_JOBS.md) in real headless Chromium:
/// a tracker on loopback serving /agent and, from --models, two small packages built here by
/// the planner (Relu → Conv 3×3 → Relu; wasm, webgl2 and webgpu, default configs), one tab of
/// browser-agent/farm.mjs with the wasm, webgl2 and webgpu (SwiftShader) executors, and a client
/// that submits model jobs. Checked: a measurement has `repeat` positive costs and its seeded
/// output matches reference samples of the graph's reference executor (on the three targets); a
/// wrong sample is WRONG_ANSWER; a package rebuilt after the submit is COMPILE_HOST "package
/// changed: ...".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "codegen/seeded_random.hpp"
#include "deploy/package.hpp"
#include "deploy/planner.hpp"
#include "graph/executor.hpp"
#include "graph/graph.hpp"
#include "native_agent/model_job.hpp"
#include "support/tiny_model.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"

extern char** environ;

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing_support::read_text;
using testing_support::tiny_graph;
using tracker::Hello;
using tracker::ModelMeasureInput;
using tracker::Role;
using tracker::sha256_hex;
using tracker::TrackerClient;

constexpr uint64_t kSeed = 11;

/// `node browser-agent/farm.mjs` (one tab), ended with SIGTERM.
class Farm {
 public:
  Farm(const std::string& url, const std::string& targets) {
    std::vector<std::string> args = {"node",         WEBTUNE_SOURCE_DIR "/browser-agent/farm.mjs",
                                     "--tracker",    url,
                                     "--tabs",       "1",
                                     "--targets",    targets,
                                     "--name",       "tab",
                                     "--parent-pid", std::to_string(::getpid())};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // this test's sockets stay here
    const int rc = posix_spawnp(&pid_, "node", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start node");
  }
  ~Farm() {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
  }
  Farm(const Farm&) = delete;
  Farm& operator=(const Farm&) = delete;

 private:
  pid_t pid_ = -1;
};

Hello hello_as(Role role) {
  Hello h;
  h.role = role;
  h.name = "model-job-browser-test";
  return h;
}

/// One tracker, one tab and the packages for the whole suite (a browser start costs seconds).
class BrowserModelJob : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::path(::testing::TempDir()) /
                         ("webtune_model_job_browser_" + std::to_string(::getpid())));
    fs::remove_all(*root_);
    fs::create_directories(*root_ / "models");
    const graph::Graph g = tiny_graph();
    for (const char* target : {"wasm", "webgl2", "webgpu"}) {
      deploy::PlanOptions options;
      options.target = target;
      options.model = {"tiny", "tiny.onnx", std::string(64, 'a')};
      deploy::write_package(deploy::plan_package(g, options),
                            (*root_ / "models" / (std::string("tiny-") + target)).string());
    }
    fs::copy(*root_ / "models" / "tiny-wasm", *root_ / "models" / "tiny-rebuilt",
             fs::copy_options::recursive);
    graph::ValueMap inputs;
    inputs["x"] = graph::Value::floats({1, 8, 8, 8}, seeded_tensor(kSeed, 0, 512));
    reference_ = new std::vector<float>(graph::execute(g, inputs, {}).at("y").data);

    tracker::TrackerConfig config;
    config.port = 0;
    config.models_root = (*root_ / "models").string();
    server_ = new tracker::TrackerServer(config);
    server_->start_background();
    farm_ = new Farm(server_->url(), "wasm,webgl2,webgpu");
    TrackerClient viewer(server_->url(), hello_as(Role::kViewer));
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (viewer.summary()["agents"].to_number<int>() == 1) {
        joined_ = true;
        break;
      }
      std::this_thread::sleep_for(100ms);
    }
  }
  static void TearDownTestSuite() {
    delete farm_;
    if (server_) server_->stop();
    delete server_;
    delete reference_;
    fs::remove_all(*root_);
    delete root_;
  }
  void SetUp() override { ASSERT_TRUE(joined_) << "the tab did not join within 120 s"; }

  static ModelMeasureInput input_for(const std::string& model, int repeat) {
    return testing_support::model_input_with_samples(
        model, sha256_hex(read_text(*root_ / "models" / model / "manifest.json")), kSeed,
        *reference_, {0, 9, 77, 300, 511}, repeat);
  }

  /// Submits one job for `key` and waits for its MeasureResult JSON; `after_submit` runs once
  /// the tracker accepted it.
  static bj::object measure(const bj::value& input, const std::string& key,
                            const std::function<void()>& after_submit = {}) {
    TrackerClient client(server_->url(), hello_as(Role::kClient));
    tracker::SubmitItem item;
    item.tag = 1;
    item.key = key;
    item.input = input;
    client.submit({item});
    if (after_submit) after_submit();
    std::optional<tracker::ClientResult> r = client.next_result(120s);
    if (!r) {
      ADD_FAILURE() << "no result within 120 s";
      return {};
    }
    return r->result;
  }
  static int error_no(const bj::object& r) {
    return r.contains("error_no") ? r.at("error_no").to_number<int>() : -1;
  }
  static std::string message(const bj::object& r) {
    const bj::value* m = r.if_contains("message");
    return m != nullptr && m->is_string() ? std::string(m->get_string()) : std::string();
  }
  static void expect_costs(const bj::object& result, size_t repeat) {
    ASSERT_EQ(error_no(result), 0) << message(result);
    const bj::array& costs = result.at("costs").as_array();
    ASSERT_EQ(costs.size(), repeat);
    for (const bj::value& cost : costs) {
      EXPECT_GT(cost.to_number<double>(), 0);
      EXPECT_LT(cost.to_number<double>(), 10);
    }
  }

  static fs::path* root_;
  static std::vector<float>* reference_;
  static tracker::TrackerServer* server_;
  static Farm* farm_;
  static bool joined_;
};

fs::path* BrowserModelJob::root_ = nullptr;
std::vector<float>* BrowserModelJob::reference_ = nullptr;
tracker::TrackerServer* BrowserModelJob::server_ = nullptr;
Farm* BrowserModelJob::farm_ = nullptr;
bool BrowserModelJob::joined_ = false;

TEST_F(BrowserModelJob, WasmPackageIsMeasuredEndToEnd) {
  expect_costs(measure(input_for("tiny-wasm", 4).to_json(), "wasm"), 4);
}

TEST_F(BrowserModelJob, Webgl2PackageIsMeasuredEndToEnd) {
  expect_costs(measure(input_for("tiny-webgl2", 3).to_json(), "webgl2"), 3);
}

TEST_F(BrowserModelJob, WebgpuPackageIsMeasuredEndToEnd) {
  expect_costs(measure(input_for("tiny-webgpu", 3).to_json(), "webgpu"), 3);
}

TEST_F(BrowserModelJob, AWrongSampleIsAWrongAnswer) {
  ModelMeasureInput in = input_for("tiny-wasm", 2);
  in.samples[2].value += 1.0;
  const bj::object result = measure(in.to_json(), "wasm");
  EXPECT_EQ(error_no(result), 5) << message(result);
  EXPECT_NE(message(result).find("output[77]"), std::string::npos) << message(result);
}

TEST_F(BrowserModelJob, APackageRebuiltAfterSubmitIsNotMeasured) {
  // The tab runs one job at a time: while it times a first job (≥ 1 s: 10 measurements of at
  // least 100 ms), a second is submitted with the hash the client read, then the package is
  // "rebuilt" (other manifest bytes under the same name) before the tab gets to fetch it.
  ModelMeasureInput busy = input_for("tiny-wasm", 10);
  busy.options.min_repeat_ms = 100;
  const ModelMeasureInput in = input_for("tiny-rebuilt", 2);
  const fs::path manifest = *root_ / "models" / "tiny-rebuilt" / "manifest.json";
  TrackerClient client(server_->url(), hello_as(Role::kClient));
  tracker::SubmitItem first, second;
  first.tag = 1;
  first.key = second.key = "wasm";
  first.input = busy.to_json();
  second.tag = 2;
  second.input = in.to_json();
  client.submit({first});
  client.submit({second});
  std::ofstream(manifest, std::ios::app) << "\n";
  const std::string got = sha256_hex(read_text(manifest));
  std::map<uint64_t, bj::object> results;
  for (int i = 0; i < 2; ++i) {
    std::optional<tracker::ClientResult> r = client.next_result(120s);
    ASSERT_TRUE(r) << "no result within 120 s";
    results[r->tag] = r->result;
  }
  expect_costs(results[1], 10);
  EXPECT_EQ(error_no(results[2]), 2) << message(results[2]);
  EXPECT_EQ(message(results[2]),
            "package changed: manifest sha256 " + got + " != " + in.manifest_sha256);
}

}  // namespace
}  // namespace webtune
