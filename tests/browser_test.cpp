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
#include <algorithm>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"
#include "support/compute_epilogues.hpp"
#include "support/odd_shapes.hpp"
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
              const std::string& targets = "webgl2", const std::string& trust_cert = {}) {
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
    if (!trust_cert.empty()) {
      args.push_back("--trust-cert");
      args.push_back(trust_cert);
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
  /// `tls_dir`: serve https/wss with the cert.pem and key.pem there; the tabs trust that
  /// certificate, and this test's clients verify against it.
  void start(int tabs, const std::string& agent_token = {}, const std::string& family = "webgl2",
             const std::string& tls_dir = {}) {
    family_ = family;
    TrackerConfig config;
    config.port = 0;
    config.tokens.agent = agent_token;
    if (!tls_dir.empty()) {
      config.tls_cert_file = tls_dir + "/cert.pem";
      config.tls_key_file = tls_dir + "/key.pem";
      set_tracker_ca_file(config.tls_cert_file);
    }
    server_ = std::make_unique<TrackerServer>(config);
    server_->start_background();
    farm_ = std::make_unique<FarmProcess>(server_->url(), tabs, agent_token, family,
                                          tls_dir.empty() ? "" : config.tls_cert_file);
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
    set_tracker_ca_file({});
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

  /// Submits a long job (tag 1) on `target`, loses tab 0's context or device while the job
  /// runs, and checks that the job came back once as RUNTIME_DEVICE (4) whose message names
  /// `what` ("context was lost", ...). Returns its result.
  ClientResult lose_tab_mid_job(Target target, const std::string& what) {
    submit({long_input(5, target)}, 1);
    EXPECT_FALSE(busy_agent().empty()) << "no tab took the job";
    std::this_thread::sleep_for(1000ms);
    farm_->command("lose 0");
    auto lost = collect(1, 120s);
    EXPECT_EQ(lost.size(), 1u);
    if (lost.size() != 1u) return {};
    const ClientResult r = lost.begin()->second;
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 4) << boost::json::serialize(r.result);
    EXPECT_NE(std::string(r.result.at("message").as_string()).find(what), std::string::npos)
        << boost::json::serialize(r.result);
    return r;
  }

  /// Submits a small dense job (tag 2) on `target` and checks that it passes: the tab works
  /// again after a loss.
  void expect_next_job_passes(Target target) {
    Task task = Task::create(Workload::dense(32, 32, 32), target, limits());
    submit({input_for(task, task.default_config(), 5)}, 2);
    auto next = collect(1, 120s);
    ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[2].result.at("error_no").to_number<int>(), 0)
        << boost::json::serialize(next[2].result);
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

// Issue 13: a TLS tracker (https:// page, wss:// socket): the tab trusts exactly the tracker's
// self-signed certificate and measures as over plain HTTP.
TEST_F(BrowserFarmTest, TabJoinsATlsTrackerOverHttpsAndWss) {
  const std::string dir = ::testing::TempDir() + "webtune_browser_tls";
  std::filesystem::create_directories(dir);
  const std::string make_cert =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
      "subjectAltName=IP:127.0.0.1 -keyout " +
      dir + "/key.pem -out " + dir + "/cert.pem 2>/dev/null";
  ASSERT_EQ(std::system(make_cert.c_str()), 0);
  start(1, "tab-secret", "webgl2", dir);
  ASSERT_EQ(server_->url().rfind("wss://", 0), 0u);
  EXPECT_EQ(key_.rfind("webgl2:", 0), 0u) << key_;
  EXPECT_TRUE(device_.at("cross_origin_isolated").as_bool()) << boost::json::serialize(device_);
  expect_next_job_passes(Target::kGlesFrag);
}

TEST_F(BrowserFarmTest, TwentyRandomDense64ConfigsMatchTheReference) {
  start(1);
  run_random_configs(Workload::dense(64, 64, 64), 20);
}

TEST_F(BrowserFarmTest, TwentyRandomSmallConv2dConfigsMatchTheReference) {
  start(1);
  run_random_configs(Workload::conv2d(1, 8, 12, 12, 8, 3, 1, 1), 20);
}

// Issue 14: gles-frag kernels with epilogues in a WebGL2 tab (webgl2.mjs binds the bias and
// the residual as samplers in2 / in3), fragment and vertex stage as sampled, on odd shapes.
TEST_F(BrowserFarmTest, RandomFusedFragConfigsMatchTheReference) {
  start(1);
  const std::pair<Workload, std::vector<std::string>> cases[] = {
      {Workload::dense(19, 24, 13), {"bias", "hard_swish", "residual"}},
      {Workload::conv2d(2, 3, 9, 9, 5, 3, 1, 0), {"bias", "residual", "relu"}},
      {Workload::depthwise_conv2d(1, 12, 9, 8, 3, 1, 1), {"bias", "clip(0,6)"}},
  };
  for (const auto& [plain, tokens] : cases) {
    Workload w = plain;
    w.epilogue = Epilogue::parse(tokens);
    SCOPED_TRACE(w.key());
    run_random_configs(w, 8);
  }
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
  lose_tab_mid_job(Target::kGlesFrag, "context was lost");
  // The tab built a fresh context: the next job passes.
  expect_next_job_passes(Target::kGlesFrag);
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

// Non-divisible tiling on webgpu (issue 14): for every odd GEMM shape (prime axes, 7x7 outputs,
// 3 input channels; tests/support/odd_shapes.hpp), 20 random valid configs whose tiles run past
// an axis, all in one browser session, every output element checked: none WRONG_ANSWER.
TEST_F(BrowserFarmTest, OddShapesGuardedWebgpuConfigsMatchTheReferenceEverywhere) {
  start(1, {}, "webgpu");
  std::vector<MeasureInput> inputs;
  std::vector<std::string> names;
  for (const Workload& w : test::odd_gemm_workloads()) {
    Task task = Task::create(w, Target::kWebgpu, limits());
    const std::vector<ConfigEntity> configs = test::inexact_configs(task, 20, 20261124);
    ASSERT_EQ(configs.size(), 20u) << w.name;
    for (const ConfigEntity& config : configs) {
      MeasureInput input = input_for(task, config, 4242);
      input.samples = test::every_output(w, 4242);
      input.options.number = 1;
      input.options.repeat = 1;
      inputs.push_back(std::move(input));
      names.push_back(w.name + " " + config.to_string());
    }
  }
  submit(inputs, 1);
  auto results = collect(inputs.size(), 900s);
  ASSERT_EQ(results.size(), inputs.size());
  for (const auto& [tag, r] : results)
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0)
        << names[tag - 1] << ": " << boost::json::serialize(r.result);
}

// Epilogues in the webgpu GEMM (issue 14): dense and conv2d, each with bias+relu,
// bias+clip(0,6), bias+residual+relu and bias+hard_swish+residual, 10 configs (a fifth with vec4
// columns, half with tiles past an axis: guarded edges) on a regular and 10 on an odd small shape
// (tests/support/compute_epilogues.hpp: vec4-friendly axes and two images; prime axes, 7x7
// outputs from 3 input channels into 13): 160 kernels in one browser session, every output
// element checked in the tab against the reference with every epilogue input.
TEST_F(BrowserFarmTest, WebgpuGemmEpiloguesMatchTheReferenceEverywhere) {
  start(1, {}, "webgpu");
  std::vector<MeasureInput> inputs;
  std::vector<std::string> names;
  std::map<std::string, int> vec4_stores;  // by op: kernels storing vec4s (webtune_epilogue4)
  uint64_t seed = 20261124;
  for (const test::EpilogueShapes& shapes : test::epilogue_gemm_shapes())
    for (const test::NamedEpilogue& e : test::kTestEpilogues)
      for (const Workload& plain : {shapes.regular, shapes.odd}) {
        const Workload w = test::with_epilogue_suffix(plain, e.suffix);
        Task task = Task::create(w, Target::kWebgpu, limits());
        const std::vector<ConfigEntity> configs = test::mixed_configs(task, 10, ++seed);
        ASSERT_EQ(configs.size(), 10u) << w.key();
        for (const ConfigEntity& config : configs) {
          MeasureInput input = input_for(task, config, seed);
          ASSERT_EQ(input.artifact.inputs.size(), static_cast<size_t>(w.input_count()));
          vec4_stores[shapes.op] +=
              input.artifact.source.find("= webtune_epilogue4(acc[") != std::string::npos;
          input.samples = test::every_output_with_epilogue(w, seed);
          input.options.number = 1;
          input.options.repeat = 1;
          inputs.push_back(std::move(input));
          names.push_back(std::string(shapes.op) + "_" + e.label + " " + w.key() + " " +
                          config.to_string());
        }
      }
  ASSERT_EQ(inputs.size(), 2u * std::size(test::kTestEpilogues) * 20u);
  // Both ops' regular shapes allow vec4 columns: four biases (dense) or one splatted (conv2d).
  EXPECT_GE(vec4_stores["Dense"], 4);
  EXPECT_GE(vec4_stores["Conv2d"], 4);
  const auto began = std::chrono::steady_clock::now();
  submit(inputs, 1);
  auto results = collect(inputs.size(), 900s);
  std::printf("%zu of %zu webgpu epilogue kernels ran in %.1f s\n", results.size(), inputs.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
  ASSERT_EQ(results.size(), inputs.size());
  for (const auto& [tag, r] : results)
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0)
        << names[tag - 1] << ": " << boost::json::serialize(r.result);
}

// A tab whose WebGPU adapter is gone after a device loss (the test hook makes requestAdapter()
// return null then, as Chromium does once its GPU process has gone): the job in flight comes
// back once, as RUNTIME_DEVICE naming the gone adapter; the tab reports itself failed and
// leaves, and the farm reloads it, after which it serves jobs again.
TEST_F(BrowserFarmTest, WebgpuTabWhoseAdapterIsGoneFailsItsJobOnceAndIsReloaded) {
  ::setenv("WEBTUNE_AGENT_PARAMS", "test_hook=webgpu-no-adapter-after-loss", 1);
  start(1, {}, "webgpu");
  ::unsetenv("WEBTUNE_AGENT_PARAMS");
  EXPECT_EQ(lose_tab_mid_job(Target::kWebgpu, "adapter is gone").attempt, 1);
  // The failed tab leaves the tracker (its only key is gone) ...
  const auto gone = std::chrono::steady_clock::now() + 30s;
  while (viewer_->summary()["agents"].to_number<int>() != 0 &&
         std::chrono::steady_clock::now() < gone)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(viewer_->summary()["agents"].to_number<int>(), 0);
  // ... and the farm reloads it: the fresh page gets an adapter and passes the next job.
  wait_for_tabs(1);
  expect_next_job_passes(Target::kWebgpu);
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
  lose_tab_mid_job(Target::kWebgpu, "device was lost");
  // The tab requested a fresh device: the next job passes.
  expect_next_job_passes(Target::kWebgpu);
}

}  // namespace
}  // namespace webtune::tracker

// ---- WebAssembly (browser-agent/wasm.mjs; docs/wasm_abi.md) ----
// Hand-made modules are WAT assembled here by wabt's wat2wasm (installed with the project's
// packages): kernels the emitter would never produce (traps, endless loops, corrupt bytes) and a
// plain dense kernel that checks inputs, offsets and the thread split independently of it.
// (Includes here, not at the top: this section is appended so that it merges cleanly.)

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace webtune::tracker {
namespace {

/// Runs `command` through the shell; its stdout, or throws when it exits non-zero.
std::string shell_output(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe.get())) out.append(buffer, n);
  if (::pclose(pipe.release()) != 0) throw std::runtime_error("command failed: " + command);
  return out;
}

/// The base64 (standard, padded) of the module that `wat2wasm --enable-threads` makes of `wat`.
std::string wat_module_base64(const std::string& wat) {
  char dir_template[] = "/tmp/webtune-wat-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  const std::string source = std::string(dir) + "/m.wat", binary = std::string(dir) + "/m.wasm";
  {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(source.c_str(), "w"), std::fclose);
    std::fwrite(wat.data(), 1, wat.size(), f.get());
  }
  std::string b64 = shell_output("wat2wasm --enable-threads " + source + " -o " + binary +
                                 " && base64 -w0 " + binary + " && rm -rf " + dir);
  return b64;
}

/// The ABI's memory import of a module for T threads (shared iff T > 1), `pages` pages.
std::string memory_import(int pages, int threads) {
  return "(import \"env\" \"memory\" (memory " + std::to_string(pages) + " " +
         std::to_string(pages) + (threads > 1 ? " shared" : "") + "))";
}

/// dense C[M,N] = A[M,K]·B[K,N] at byte offsets a, b, c; thread tid writes rows tid, tid+T, ….
std::string dense_wat(int64_t m, int64_t n, int64_t k, int threads, int pages, int64_t a, int64_t b,
                      int64_t c) {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "(module " + memory_import(pages, threads) +
         R"((func (export "run") (param $tid i32)
  (local $i i32) (local $j i32) (local $k i32) (local $acc f32)
  (local.set $i (local.get $tid))
  (block $rows_done (loop $rows
    (br_if $rows_done (i32.ge_u (local.get $i) (i32.const )" +
         s(m) + R"()))
    (local.set $j (i32.const 0))
    (block $cols_done (loop $cols
      (br_if $cols_done (i32.ge_u (local.get $j) (i32.const )" +
         s(n) + R"()))
      (local.set $acc (f32.const 0))
      (local.set $k (i32.const 0))
      (block $k_done (loop $ks
        (br_if $k_done (i32.ge_u (local.get $k) (i32.const )" +
         s(k) + R"()))
        (local.set $acc (f32.add (local.get $acc) (f32.mul
          (f32.load (i32.add (i32.const )" +
         s(a) + R"() (i32.shl (i32.add (i32.mul (local.get $i) (i32.const )" + s(k) +
         R"()) (local.get $k)) (i32.const 2))))
          (f32.load (i32.add (i32.const )" +
         s(b) + R"() (i32.shl (i32.add (i32.mul (local.get $k) (i32.const )" + s(n) +
         R"()) (local.get $j)) (i32.const 2)))))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $ks)))
      (f32.store (i32.add (i32.const )" +
         s(c) + R"() (i32.shl (i32.add (i32.mul (local.get $i) (i32.const )" + s(n) +
         R"()) (local.get $j)) (i32.const 2))) (local.get $acc))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $cols)))
    (local.set $i (i32.add (local.get $i) (i32.const )" +
         s(threads) + R"()))
    (br $rows)))))
)";
}

/// A module whose run(tid) is `body` (WAT instructions; $tid is the parameter).
std::string body_wat(int threads, const std::string& body) {
  return "(module " + memory_import(1, threads) + " (func (export \"run\") (param $tid i32) " +
         body + "))";
}

/// BrowserFarmTest for wasm tabs: configs of the real emitter (Target::kWasm), and hand-made
/// artifacts written as JSON.
class WasmFarmTest : public BrowserFarmTest {
 protected:
  static constexpr int64_t kM = 64, kN = 64, kK = 64;

  /// A dense kM×kN×kK measure input of target wasm running module `source` (base64) with
  /// `threads` threads over one memory of `pages` pages, inputs and output at `offsets`.
  static boost::json::object wasm_input(const std::string& source, int threads, uint64_t seed,
                                        int pages = 1,
                                        std::array<int64_t, 3> offsets = {1024, 17408, 33792}) {
    const Workload w = Workload::dense(kM, kN, kK);
    auto layout = [](int64_t rows, int64_t cols) {
      return boost::json::object{{"shape", boost::json::array{rows, cols}},
                                 {"pack_axis", -1},
                                 {"width", 0},
                                 {"height", 0}};
    };
    boost::json::object artifact{
        {"target", "wasm"},
        {"source", source},
        {"inputs", boost::json::array{layout(kM, kK), layout(kK, kN)}},
        {"output", boost::json::object{{"rows", kM},
                                       {"cols", kN},
                                       {"rows_per_item", 1},
                                       {"channels", 1},
                                       {"width", 0},
                                       {"height", 0}}},
        {"wasm",
         boost::json::object{{"threads", threads},
                             {"memory_pages", pages},
                             {"offsets", boost::json::array{offsets[0], offsets[1], offsets[2]}},
                             {"simd", false}}}};
    return boost::json::object{
        {"workload", w.to_json()},
        {"artifact", artifact},
        {"seed", seed},
        {"samples", samples_to_json(reference_samples(w, seed, 32))},
        {"options", boost::json::object{
                        {"number", 2}, {"repeat", 2}, {"min_repeat_ms", 0}, {"timeout_s", 60}}}};
  }

  /// The hand-made dense kernel for `threads` threads: 64×64×64 at the default offsets, in 1 page
  /// (3 · 16 KiB past byte 1024).
  static boost::json::object dense_input(int threads, uint64_t seed) {
    return wasm_input(wat_module_base64(dense_wat(kM, kN, kK, threads, 1, 1024, 17408, 33792)),
                      threads, seed);
  }

  void submit_json(const std::vector<boost::json::object>& inputs, uint64_t first_tag) {
    std::vector<SubmitItem> items;
    for (size_t i = 0; i < inputs.size(); ++i) {
      SubmitItem item;
      item.tag = first_tag + i;
      item.key = family_;
      item.lease_ms = 120000;
      item.input = inputs[i];
      items.push_back(std::move(item));
    }
    client_->submit(items);
  }

  /// `count` distinct random configs of the real wasm emitter's space for `workload`, every third
  /// forced to 2 threads (where the tab allows 2) so that the threaded path runs; all must match
  /// the reference with positive costs.
  void run_random_wasm_configs(const Workload& workload, int count) {
    Task task = Task::create(workload, Target::kWasm, limits());
    std::mt19937_64 rng(2025);
    std::vector<ConfigEntity> configs = task.space->sample_distinct(rng, count);
    ASSERT_EQ(static_cast<int>(configs.size()), count);
    for (size_t i = 0; i < configs.size(); i += 3) {
      if (limits().max_threads < 2) break;
      boost::json::object json = configs[i].to_json();
      json.erase("index");  // it names the sampled entity
      for (auto& item : json["entity"].as_array())
        if (item.as_array()[0].as_string() == "threads") item.as_array()[2] = 2;
      // Kept as sampled where 2 threads break a rule (threads <= column blocks) or repeat a config.
      ConfigEntity forced = task.space->from_json(json);
      bool repeated = false;
      for (const ConfigEntity& c : configs) repeated |= c.index() == forced.index();
      if (task.space->is_valid(forced) && !repeated) configs[i] = forced;
    }
    std::vector<MeasureInput> inputs;
    int threaded = 0, fused = 0;
    for (size_t i = 0; i < configs.size(); ++i) {
      inputs.push_back(input_for(task, configs[i], 7 + i));
      if (inputs.back().artifact.wasm.threads > 1) ++threaded;
      if (inputs.back().artifact.wasm.relaxed_simd) ++fused;  // the fma knob
    }
    if (limits().max_threads >= 2) {
      EXPECT_GE(threaded, count / 4) << "too few threaded configs";
    }
    if (limits().relaxed_simd) {
      // About a third of the valid configs have fma 1 (it needs simd); rng 2025 gives 2 of 20
      // dense64 configs, 1 of the smaller fused sets.
      EXPECT_GE(fused, std::max(1, count / 10)) << "too few fma (relaxed SIMD) configs";
    }
    // Building 20 modules through LLVM can outlast the tracker's idle timeout (10 s) of a client
    // that reads nothing meanwhile: submit on a fresh connection.
    client_ = std::make_unique<TrackerClient>(server_->url(), hello_as(Role::kClient));
    submit(inputs, 1);
    auto results = collect(inputs.size(), 600s);
    ASSERT_EQ(results.size(), inputs.size());
    for (const auto& [tag, r] : results) {
      const MeasureInput& input = inputs[tag - 1];
      EXPECT_EQ(error_no(r), 0) << configs[tag - 1].to_string() << " ("
                                << input.artifact.wasm.threads
                                << " threads): " << boost::json::serialize(r.result);
      if (error_no(r) != 0) continue;
      const auto& costs = r.result.at("costs").as_array();
      ASSERT_EQ(costs.size(), 2u);
      for (const auto& c : costs) EXPECT_GT(c.to_number<double>(), 0.0);
    }
  }

  static int error_no(const ClientResult& r) { return r.result.at("error_no").to_number<int>(); }
  static std::string message(const ClientResult& r) {
    return std::string(r.result.at("message").as_string());
  }
};

TEST_F(WasmFarmTest, TabJoinsAsWasmThreadsWithMaxThreads) {
  start(1, {}, "wasm");
  // The device class: browser and version, OS and thread count (browser-agent/device_class.mjs).
  EXPECT_EQ(key_.rfind("wasm:threads:chromium-", 0), 0u) << key_;
  EXPECT_EQ(key_.substr(key_.size() - 1), "t") << key_;
  EXPECT_GE(device_.at("cpu_threads").to_number<int>(), 1) << boost::json::serialize(device_);
  // COOP/COEP from the tracker's /agent make the page cross-origin isolated: threads work.
  EXPECT_TRUE(device_.at("cross_origin_isolated").as_bool()) << boost::json::serialize(device_);
  const auto& limits = device_.at("limits").as_object();
  EXPECT_GE(limits.at("max_threads").to_number<int>(), 1) << boost::json::serialize(device_);
  EXPECT_LE(limits.at("max_threads").to_number<int>(), 8);
  // Chromium has relaxed SIMD on by default since 114: the fma knob's configs are offered (the
  // random-config tests below then run some of them in this tab).
  EXPECT_TRUE(limits.at("relaxed_simd").as_bool()) << boost::json::serialize(device_);
  const auto& features = device_.at("features").as_array();
  EXPECT_NE(std::find(features.begin(), features.end(), boost::json::value("relaxed_simd")),
            features.end())
      << boost::json::serialize(device_);
  EXPECT_TRUE(this->limits().relaxed_simd);  // as DeviceLimits reads it
}

TEST_F(WasmFarmTest, TwentyRandomDense64ConfigsMatchTheReference) {
  start(1, {}, "wasm");
  run_random_wasm_configs(Workload::dense(64, 64, 64), 20);
}

TEST_F(WasmFarmTest, TwentyRandomSmallConv2dConfigsMatchTheReference) {
  start(1, {}, "wasm");
  run_random_wasm_configs(Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1), 20);
}

// Issue 14: the epilogue's inputs (bias, residual) at their offsets in a real tab, and the
// depthwise kernel (stride 2, SIMD gathers), all sampled against the reference.
TEST_F(WasmFarmTest, FusedConv2dAndDepthwiseConfigsMatchTheReference) {
  start(1, {}, "wasm");
  Workload conv = Workload::conv2d(1, 4, 9, 9, 8, 3, 1, 1);
  conv.epilogue = Epilogue::parse({"bias", "residual", "relu"});
  run_random_wasm_configs(conv, 8);
  Workload dw = Workload::depthwise_conv2d(1, 8, 11, 11, 3, 2, 1);
  dw.epilogue = Epilogue::parse({"bias", "hard_swish", "residual"});
  run_random_wasm_configs(dw, 8);
}

TEST_F(WasmFarmTest, HandMadeDenseKernelMatchesTheReferenceOnOneToFourThreads) {
  start(1, {}, "wasm");
  std::vector<boost::json::object> inputs;
  for (int threads = 1; threads <= 4; ++threads)
    inputs.push_back(dense_input(threads, 10 + threads));
  submit_json(inputs, 1);
  auto results = collect(inputs.size(), 300s);
  ASSERT_EQ(results.size(), inputs.size());
  for (const auto& [tag, r] : results) {
    EXPECT_EQ(error_no(r), 0) << "threads " << tag << ": " << boost::json::serialize(r.result);
    if (error_no(r) != 0) continue;
    for (const auto& c : r.result.at("costs").as_array()) EXPECT_GT(c.to_number<double>(), 0.0);
  }
}

TEST_F(WasmFarmTest, ModuleTheBrowserRejectsIsCompileDeviceWithItsMessage) {
  start(1, {}, "wasm");
  // The magic number and version, then a type section that claims 0x7f bytes it does not have.
  boost::json::object corrupt = wasm_input("AGFzbQEAAAABfwE=", 1, 1);
  submit_json({corrupt, dense_input(2, 1)}, 1);
  auto results = collect(2, 120s);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(error_no(results[1]), 3) << boost::json::serialize(results[1].result);
  EXPECT_NE(message(results[1]).find("WebAssembly.compile failed: CompileError"), std::string::npos)
      << message(results[1]);
  EXPECT_EQ(error_no(results[2]), 0) << boost::json::serialize(results[2].result);
}

TEST_F(WasmFarmTest, TrapIsRuntimeDeviceAndTheTabGoesOn) {
  start(1, {}, "wasm");
  // unreachable on the page's leader worker (T = 1); an out-of-bounds load on helper 1 (T = 2).
  const boost::json::object unreachable =
      wasm_input(wat_module_base64(body_wat(1, "unreachable")), 1, 1);
  const boost::json::object out_of_bounds =
      wasm_input(wat_module_base64(body_wat(
                     2,
                     "(if (i32.eq (local.get $tid) (i32.const 1)) (then (drop (i32.load (i32.const "
                     "-16)))))")),
                 2, 1);
  submit_json({unreachable, out_of_bounds, dense_input(2, 3)}, 1);
  auto results = collect(3, 180s);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(error_no(results[1]), 4) << boost::json::serialize(results[1].result);
  EXPECT_NE(message(results[1]).find("unreachable"), std::string::npos) << message(results[1]);
  EXPECT_EQ(error_no(results[2]), 4) << boost::json::serialize(results[2].result);
  EXPECT_NE(message(results[2]).find("thread 1"), std::string::npos) << message(results[2]);
  EXPECT_NE(message(results[2]).find("out of bounds"), std::string::npos) << message(results[2]);
  EXPECT_EQ(error_no(results[3]), 0) << boost::json::serialize(results[3].result);
}

TEST_F(WasmFarmTest, OffsetsOutsideTheMemoryAreInstantiation) {
  start(1, {}, "wasm");
  // The output (16 KiB) would end past the module's one page: the host cannot read it there.
  boost::json::object input = dense_input(1, 1);
  input["artifact"].as_object()["wasm"].as_object()["offsets"] =
      boost::json::array{1024, 17408, 65536 - 1024};
  submit_json({input, dense_input(1, 2)}, 1);
  auto results = collect(2, 120s);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(error_no(results[1]), 1) << boost::json::serialize(results[1].result);
  EXPECT_NE(message(results[1]).find("ends past the memory"), std::string::npos)
      << message(results[1]);
  EXPECT_EQ(error_no(results[2]), 0) << boost::json::serialize(results[2].result);
}

TEST_F(WasmFarmTest, EndlessKernelIsRunTimeoutOnOneAndTwoThreadsAndTheTabGoesOn) {
  start(1, {}, "wasm");
  std::vector<boost::json::object> inputs;
  // T = 1 loops on the leader; T = 2 loops on helper 1 only, so the leader waits for it.
  for (auto [threads, body] : {std::pair{1, std::string("(loop $l (br $l))")},
                               std::pair{2, std::string("(if (i32.eq (local.get $tid) (i32.const "
                                                        "1)) (then (loop $l (br $l))))")}}) {
    boost::json::object input = wasm_input(wat_module_base64(body_wat(threads, body)), threads, 1);
    input["options"].as_object()["timeout_s"] = 2;
    inputs.push_back(input);
  }
  inputs.push_back(dense_input(2, 4));
  submit_json(inputs, 1);
  auto results = collect(3, 180s);
  ASSERT_EQ(results.size(), 3u);
  for (uint64_t tag : {1u, 2u}) {
    EXPECT_EQ(error_no(results[tag]), 7) << boost::json::serialize(results[tag].result);
    EXPECT_NE(message(results[tag]).find("timeout of 2 s"), std::string::npos)
        << message(results[tag]);
    // Cut off by the executor at the timeout, not by the agent's watchdog 5 s later.
    EXPECT_LT(results[tag].result.at("all_cost").to_number<double>(), 4.0)
        << boost::json::serialize(results[tag].result);
  }
  EXPECT_EQ(error_no(results[3]), 0) << boost::json::serialize(results[3].result);
}

}  // namespace
}  // namespace webtune::tracker
