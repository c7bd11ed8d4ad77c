/// \file browser_test.cpp
/// The browser agent (WebGL2 and WebGPU executors) end to end: a real tracker on loopback serving
/// /agent, real headless Chromium tabs started by browser-agent/farm.mjs (node + puppeteer-core),
/// and jobs submitted through a real client. Kernels are the gles-frag (WebGL2) and webgpu (WGSL)
/// templates', built here in C++ and run unchanged by the tabs; inputs are regenerated in
/// JavaScript from the seed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"

extern char** environ;

namespace webtune::tracker {
namespace {

using namespace std::chrono_literals;

/// `node browser-agent/farm.mjs` with a pipe to its stdin for commands ("close N").
class FarmProcess {
 public:
  FarmProcess(const std::string& url, int tabs, const std::string& token = {},
              const std::string& targets = "webgl2") {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    std::vector<std::string> args = {"node",         WEBTUNE_SOURCE_DIR "/browser-agent/farm.mjs",
                                     "--tracker",    url,
                                     "--tabs",       std::to_string(tabs),
                                     "--targets",    targets,
                                     "--name",       "tab",
                                     "--parent-pid", std::to_string(::getpid())};
    if (!token.empty()) {
      args.push_back("--token");
      args.push_back(token);
    }
    if (const char* gl = std::getenv("WEBTUNE_TEST_GL")) {
      args.push_back("--gl");
      args.push_back(gl);
    }
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // sockets of this test stay here
    const int rc = posix_spawnp(&pid_, "node", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[0]);
    stdin_ = fds[1];
    ::fcntl(stdin_, F_SETFD, FD_CLOEXEC);
    if (rc != 0) throw std::runtime_error("cannot start node");
  }
  FarmProcess(const FarmProcess&) = delete;
  FarmProcess& operator=(const FarmProcess&) = delete;
  ~FarmProcess() {
    ::close(stdin_);
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
  void command(const std::string& line) {
    const std::string text = line + "\n";
    ASSERT_EQ(::write(stdin_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
};

Hello hello_as(Role role) {
  Hello h;
  h.role = role;
  h.name = "browser-test";
  return h;
}

/// A tracker, a farm of `tabs` tabs and a client; waits until every tab has joined.
class BrowserFarmTest : public ::testing::Test {
 protected:
  /// `agent_token`: the tracker requires it of agents, and the farm's tabs present it
  /// (`/agent?token=...`).
  /// `family`: the executor family the tabs run ("webgl2" or "webgpu"), and the key jobs go to.
  void start(int tabs, const std::string& agent_token = {}, const std::string& family = "webgl2") {
    family_ = family;
    TrackerConfig config;
    config.port = 0;
    config.tokens.agent = agent_token;
    server_ = std::make_unique<TrackerServer>(config);
    server_->start_background();
    farm_ = std::make_unique<FarmProcess>(server_->url(), tabs, agent_token, family);
    wait_for_tabs(tabs);
  }

  /// Waits until `tabs` agents have joined; remembers their key and device.
  void wait_for_tabs(int tabs) {
    key_.clear();
    viewer_ = std::make_unique<TrackerClient>(server_->url(), hello_as(Role::kViewer));
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < deadline) {
      boost::json::object s = viewer_->summary();
      if (s["agents"].to_number<int>() == tabs) {
        for (const auto& [key, device] : s["devices"].as_object()) {
          key_ = std::string(key);
          device_ = device.as_object();
        }
        break;
      }
      std::this_thread::sleep_for(100ms);
    }
    ASSERT_FALSE(key_.empty()) << "the tabs did not join within 120 s";
    client_ = std::make_unique<TrackerClient>(server_->url(), hello_as(Role::kClient));
  }

  void TearDown() override {
    client_.reset();
    viewer_.reset();
    farm_.reset();
    if (server_) server_->stop();
  }

  DeviceLimits limits() const { return DeviceLimits::from_json(device_.at("limits")); }

  static MeasureInput input_for(const Task& task, const ConfigEntity& config, uint64_t seed) {
    MeasureInput input;
    input.workload = task.workload;
    input.artifact = task.build(config);
    input.seed = seed;
    input.samples = reference_samples(task.workload, seed, 32);
    input.options.number = 2;
    input.options.repeat = 2;
    input.options.timeout_s = 60;
    return input;
  }

  std::vector<std::pair<uint64_t, uint64_t>> submit(const std::vector<MeasureInput>& inputs,
                                                    uint64_t first_tag) {
    std::vector<SubmitItem> items;
    for (size_t i = 0; i < inputs.size(); ++i) {
      SubmitItem item;
      item.tag = first_tag + i;
      item.key = family_;
      item.lease_ms = 120000;
      item.input = inputs[i].to_json();
      items.push_back(std::move(item));
    }
    return client_->submit(items);
  }

  /// Collects `count` results; fails on a duplicate tag or a result beyond `count`.
  std::map<uint64_t, ClientResult> collect(size_t count, std::chrono::seconds timeout) {
    std::map<uint64_t, ClientResult> results;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (results.size() < count && std::chrono::steady_clock::now() < deadline) {
      auto r = client_->next_result(1s);
      if (!r) continue;
      EXPECT_TRUE(results.emplace(r->tag, *r).second) << "tag " << r->tag << " delivered twice";
    }
    if (auto extra = client_->next_result(500ms))
      ADD_FAILURE() << "extra result for tag " << extra->tag;
    return results;
  }

  /// 20 distinct random valid configs of `workload`, each run in a tab: all must pass.
  void run_random_configs(const Workload& workload, int count, Target target = Target::kGlesFrag) {
    Task task = Task::create(workload, target, limits());
    std::mt19937_64 rng(2024);
    std::vector<ConfigEntity> configs = task.space->sample_distinct(rng, count);
    ASSERT_EQ(static_cast<int>(configs.size()), count);
    std::vector<MeasureInput> inputs;
    for (size_t i = 0; i < configs.size(); ++i)
      inputs.push_back(input_for(task, configs[i], 7 + i));
    submit(inputs, 1);
    auto results = collect(inputs.size(), 600s);
    ASSERT_EQ(results.size(), inputs.size());
    for (const auto& [tag, r] : results) {
      const ConfigEntity& config = configs[tag - 1];
      EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0)
          << config.to_string() << ": " << boost::json::serialize(r.result);
      if (r.result.at("error_no").to_number<int>() != 0) continue;
      const auto& costs = r.result.at("costs").as_array();
      ASSERT_EQ(costs.size(), 2u);
      for (const auto& c : costs) EXPECT_GT(c.to_number<double>(), 0.0);
    }
  }

  /// The name of the agent that holds a job, once one does (within 60 s), else "".
  std::string busy_agent() {
    std::string name;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (name.empty() && std::chrono::steady_clock::now() < deadline) {
      server_->inspect([&](const TrackerState& state) {
        for (const auto& [id, peer] : state.peers())
          if (peer.role == Role::kAgent && state.scheduler().job_of(id)) name = peer.name;
      });
      std::this_thread::sleep_for(20ms);
    }
    return name;
  }

  /// A dense 64 job with about `seconds` s of timed runs (min_repeat_ms), to be in flight for a
  /// while.
  MeasureInput long_input(int seconds, Target target = Target::kGlesFrag) {
    Task task = Task::create(Workload::dense(64, 64, 64), target, limits());
    MeasureInput input = input_for(task, task.default_config(), 3);
    input.options.number = 1;
    input.options.repeat = seconds;
    input.options.min_repeat_ms = 1000;
    return input;
  }

  std::unique_ptr<TrackerServer> server_;
  std::unique_ptr<FarmProcess> farm_;
  std::unique_ptr<TrackerClient> viewer_, client_;
  std::string key_;
  std::string family_ = "webgl2";
  boost::json::object device_;
};

TEST_F(BrowserFarmTest, TabJoinsAsWebgl2WithTokenLimitsAndIsolation) {
  start(1, "tab-secret");
  EXPECT_EQ(key_.rfind("webgl2:", 0), 0u) << key_;
  // DeviceLimits' JSON shape, read back by the tuner.
  DeviceLimits l = limits();
  EXPECT_GE(l.max_texture_size, 4096);
  EXPECT_GE(l.max_draw_buffers, 4);
  EXPECT_TRUE(device_.at("color_buffer_float").as_bool());
  // Served with COOP same-origin + COEP require-corp, the page is cross-origin isolated.
  EXPECT_TRUE(device_.at("cross_origin_isolated").as_bool()) << boost::json::serialize(device_);
}

TEST_F(BrowserFarmTest, TwentyRandomDense64ConfigsMatchTheReference) {
  start(1);
  run_random_configs(Workload::dense(64, 64, 64), 20);
}

TEST_F(BrowserFarmTest, TwentyRandomSmallConv2dConfigsMatchTheReference) {
  start(1);
  run_random_configs(Workload::conv2d(1, 8, 12, 12, 8, 3, 1, 1), 20);
}

TEST_F(BrowserFarmTest, ShaderTheBrowserRejectsIsCompileDeviceWithItsLog) {
  start(1);
  Task task = Task::create(Workload::dense(16, 16, 16), Target::kGlesFrag, limits());
  MeasureInput input = input_for(task, task.default_config(), 1);
  input.artifact.source =
      "#version 300 es\nprecision highp float;\nlayout(location = 0) out vec4 out0;\n"
      "void main() { out0 = vec4(no_such_variable); }\n";
  MeasureInput good = input_for(task, task.default_config(), 1);
  submit({input, good}, 1);
  auto results = collect(2, 120s);
  ASSERT_EQ(results.size(), 2u);
  const auto& bad = results[1].result;
  EXPECT_EQ(bad.at("error_no").to_number<int>(), 3) << boost::json::serialize(bad);
  const std::string message(bad.at("message").as_string());
  EXPECT_NE(message.find("fragment shader failed to compile"), std::string::npos) << message;
  EXPECT_NE(message.find("no_such_variable"), std::string::npos) << message;
  // The tab goes on.
  EXPECT_EQ(results[2].result.at("error_no").to_number<int>(), 0)
      << boost::json::serialize(results[2].result);
}

TEST_F(BrowserFarmTest, ClosedTabsJobRunsAgainElsewhereAndArrivesOnce) {
  start(2);
  submit({long_input(3)}, 1);
  const std::string victim = busy_agent();
  ASSERT_EQ(victim.rfind("tab-", 0), 0u) << "no tab took the job";
  std::this_thread::sleep_for(500ms);  // well inside the timed runs
  farm_->command("close " + victim.substr(4));
  auto results = collect(1, 180s);
  ASSERT_EQ(results.size(), 1u);
  const ClientResult& r = results.begin()->second;
  EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0) << boost::json::serialize(r.result);
  EXPECT_EQ(r.attempt, 2);
  EXPECT_NE(r.agent, victim);
  server_->inspect([&](const TrackerState& state) {
    EXPECT_EQ(state.scheduler().counters().agents_lost_jobs, 1u);
  });
}

TEST_F(BrowserFarmTest, LostContextIsRuntimeDeviceAndTheTabGoesOn) {
  start(1);
  submit({long_input(5)}, 1);
  ASSERT_FALSE(busy_agent().empty());
  std::this_thread::sleep_for(1000ms);
  farm_->command("lose 0");
  auto lost = collect(1, 120s);
  ASSERT_EQ(lost.size(), 1u);
  const auto& result = lost[1].result;
  EXPECT_EQ(result.at("error_no").to_number<int>(), 4) << boost::json::serialize(result);
  EXPECT_NE(std::string(result.at("message").as_string()).find("context was lost"),
            std::string::npos)
      << boost::json::serialize(result);
  // The tab built a fresh context: the next job passes.
  Task task = Task::create(Workload::dense(32, 32, 32), Target::kGlesFrag, limits());
  submit({input_for(task, task.default_config(), 5)}, 2);
  auto next = collect(1, 120s);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[2].result.at("error_no").to_number<int>(), 0)
      << boost::json::serialize(next[2].result);
}

TEST_F(BrowserFarmTest, JobPastItsTimeoutIsRunTimeout) {
  start(1);
  MeasureInput input = long_input(30);
  input.options.timeout_s = 2;
  submit({input}, 1);
  auto results = collect(1, 120s);
  ASSERT_EQ(results.size(), 1u);
  const auto& result = results[1].result;
  EXPECT_EQ(result.at("error_no").to_number<int>(), 7) << boost::json::serialize(result);
  EXPECT_NE(std::string(result.at("message").as_string()).find("timeout of 2 s"), std::string::npos)
      << boost::json::serialize(result);
}

TEST_F(BrowserFarmTest, TabReconnectsWhenTheTrackerComesBack) {
  start(1);
  const uint16_t port = server_->port();
  client_.reset();
  viewer_.reset();
  server_->stop();
  server_.reset();
  std::this_thread::sleep_for(2s);  // the tab is backing off now
  TrackerConfig config;
  config.port = port;
  // The old sockets may hold the port for a moment (FIN_WAIT); a restarted tracker retries too.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!server_) {
    try {
      server_ = std::make_unique<TrackerServer>(config);
    } catch (const std::runtime_error& e) {
      if (std::chrono::steady_clock::now() > deadline) throw;
      std::this_thread::sleep_for(200ms);
    }
  }
  server_->start_background();
  wait_for_tabs(1);
  Task task = Task::create(Workload::dense(32, 32, 32), Target::kGlesFrag, limits());
  submit({input_for(task, task.default_config(), 5)}, 1);
  auto results = collect(1, 120s);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[1].result.at("error_no").to_number<int>(), 0);
}

TEST_F(BrowserFarmTest, CrashedBrowserIsRelaunchedAndItsTabsRejoin) {
  start(1);
  farm_->command("kill-browser");
  // The tab's socket closes with the browser; a relaunched browser's tab joins again.
  const auto gone = std::chrono::steady_clock::now() + 30s;
  while (viewer_->summary()["agents"].to_number<int>() != 0 &&
         std::chrono::steady_clock::now() < gone)
    std::this_thread::sleep_for(50ms);
  wait_for_tabs(1);
  Task task = Task::create(Workload::dense(32, 32, 32), Target::kGlesFrag, limits());
  submit({input_for(task, task.default_config(), 5)}, 1);
  auto results = collect(1, 120s);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[1].result.at("error_no").to_number<int>(), 0);
}

// ---- WebGPU (headless Chromium with --enable-unsafe-webgpu: the SwiftShader adapter) ----

TEST_F(BrowserFarmTest, WebgpuTabJoinsWithItsAdapterLimits) {
  start(1, {}, "webgpu");
  EXPECT_EQ(key_.rfind("webgpu:", 0), 0u) << key_;
  const DeviceLimits l = limits();
  EXPECT_GE(l.max_workgroup_invocations, 256) << boost::json::serialize(device_);
  EXPECT_GE(l.max_workgroup_size_x, 256);
  EXPECT_GE(l.max_shared_memory_bytes, 16384);
}

TEST_F(BrowserFarmTest, TwentyRandomDense64WebgpuConfigsMatchTheReference) {
  start(1, {}, "webgpu");
  run_random_configs(Workload::dense(64, 64, 64), 20, Target::kWebgpu);
}

// The webgpu conv2d template (implicit GEMM, im2col gathered in the shader) on a small conv: 20
// random configs compile in the tab, run on the SwiftShader adapter and match the reference.
TEST_F(BrowserFarmTest, TwentyRandomSmallConv2dWebgpuConfigsMatchTheReference) {
  start(1, {}, "webgpu");
  run_random_configs(Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1), 20, Target::kWebgpu);
}

// Stride 2 with an odd output (5x5: Y stored as floats), fewer configs, same check.
TEST_F(BrowserFarmTest, RandomStride2Conv2dWebgpuConfigsMatchTheReference) {
  start(1, {}, "webgpu");
  run_random_configs(Workload::conv2d(1, 4, 9, 9, 8, 3, 2, 1), 8, Target::kWebgpu);
}

// A 1x1 window without padding over two images (the dispatch's z dimension).
TEST_F(BrowserFarmTest, RandomBatched1x1Conv2dWebgpuConfigsMatchTheReference) {
  start(1, {}, "webgpu");
  run_random_configs(Workload::conv2d(2, 8, 8, 8, 16, 1, 2, 0), 8, Target::kWebgpu);
}

// A tab whose WebGPU adapter is gone after a device loss (the test hook makes requestAdapter()
// return null then, as Chromium does once its GPU process has gone): the job in flight comes
// back once, as RUNTIME_DEVICE naming the gone adapter; the tab reports itself failed and
// leaves, and the farm reloads it, after which it serves jobs again.
TEST_F(BrowserFarmTest, WebgpuTabWhoseAdapterIsGoneFailsItsJobOnceAndIsReloaded) {
  ::setenv("WEBTUNE_AGENT_PARAMS", "test_hook=webgpu-no-adapter-after-loss", 1);
  start(1, {}, "webgpu");
  ::unsetenv("WEBTUNE_AGENT_PARAMS");
  submit({long_input(5, Target::kWebgpu)}, 1);
  ASSERT_FALSE(busy_agent().empty());
  std::this_thread::sleep_for(1000ms);
  farm_->command("lose 0");
  auto lost = collect(1, 120s);
  ASSERT_EQ(lost.size(), 1u);
  const auto& result = lost[1].result;
  EXPECT_EQ(result.at("error_no").to_number<int>(), 4) << boost::json::serialize(result);
  EXPECT_NE(std::string(result.at("message").as_string()).find("adapter is gone"),
            std::string::npos)
      << boost::json::serialize(result);
  EXPECT_EQ(lost[1].attempt, 1);
  // The failed tab leaves the tracker (its only key is gone) ...
  const auto gone = std::chrono::steady_clock::now() + 30s;
  while (viewer_->summary()["agents"].to_number<int>() != 0 &&
         std::chrono::steady_clock::now() < gone)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(viewer_->summary()["agents"].to_number<int>(), 0);
  // ... and the farm reloads it: the fresh page gets an adapter and passes the next job.
  wait_for_tabs(1);
  Task task = Task::create(Workload::dense(32, 32, 32), Target::kWebgpu, limits());
  submit({input_for(task, task.default_config(), 5)}, 2);
  auto next = collect(1, 120s);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[2].result.at("error_no").to_number<int>(), 0)
      << boost::json::serialize(next[2].result);
}

TEST_F(BrowserFarmTest, WgslTheBrowserRejectsIsCompileDeviceWithItsMessage) {
  start(1, {}, "webgpu");
  Task task = Task::create(Workload::dense(16, 16, 16), Target::kWebgpu, limits());
  MeasureInput input = input_for(task, task.default_config(), 1);
  input.artifact.source =
      "@group(0) @binding(2) var<storage, read_write> C : array<f32>;\n"
      "@compute @workgroup_size(8, 8, 1)\n"
      "fn main(@builtin(global_invocation_id) gid : vec3<u32>) { C[gid.x] = no_such_variable; }\n";
  MeasureInput good = input_for(task, task.default_config(), 1);
  submit({input, good}, 1);
  auto results = collect(2, 120s);
  ASSERT_EQ(results.size(), 2u);
  const auto& bad = results[1].result;
  EXPECT_EQ(bad.at("error_no").to_number<int>(), 3) << boost::json::serialize(bad);
  const std::string message(bad.at("message").as_string());
  EXPECT_NE(message.find("WGSL shader failed to compile"), std::string::npos) << message;
  EXPECT_NE(message.find("no_such_variable"), std::string::npos) << message;
  EXPECT_EQ(results[2].result.at("error_no").to_number<int>(), 0)
      << boost::json::serialize(results[2].result);
}

TEST_F(BrowserFarmTest, LostWebgpuDeviceIsRuntimeDeviceAndTheTabGoesOn) {
  start(1, {}, "webgpu");
  submit({long_input(5, Target::kWebgpu)}, 1);
  ASSERT_FALSE(busy_agent().empty());
  std::this_thread::sleep_for(1000ms);
  farm_->command("lose 0");
  auto lost = collect(1, 120s);
  ASSERT_EQ(lost.size(), 1u);
  const auto& result = lost[1].result;
  EXPECT_EQ(result.at("error_no").to_number<int>(), 4) << boost::json::serialize(result);
  EXPECT_NE(std::string(result.at("message").as_string()).find("device was lost"),
            std::string::npos)
      << boost::json::serialize(result);
  // The tab requested a fresh device: the next job passes.
  Task task = Task::create(Workload::dense(32, 32, 32), Target::kWebgpu, limits());
  submit({input_for(task, task.default_config(), 5)}, 2);
  auto next = collect(1, 120s);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[2].result.at("error_no").to_number<int>(), 0)
      << boost::json::serialize(next[2].result);
}

}  // namespace
}  // namespace webtune::tracker
