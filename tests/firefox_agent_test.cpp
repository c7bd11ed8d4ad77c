/// \file firefox_agent_test.cpp
/// Firefox ESR agents end to end: the real `webtune farm --browser firefox` (its embedded tracker
/// on loopback, browser-agent/farm.mjs driving Debian's firefox-esr over WebDriver BiDi, windowed
/// on a private Xvfb display), jobs submitted through a real client and a real `webtune tune`
/// against that tracker; then `firefox --headless` (farm.mjs --display headless), whose page must
/// name each executor's own reason for being unavailable. Skips, saying why, where firefox-esr
/// or Xvfb is absent.
///
/// One farm serves the whole suite (SetUpTestSuite): a Firefox start costs seconds, so ctest runs
/// this binary as one test.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <thread>

#include "codegen/measure.hpp"
#include "codegen/reference.hpp"
#include "codegen/task.hpp"
#include "support/run_webtune.hpp"
#include "support/webtune_process.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"
#include "tuner/records.hpp"

extern char** environ;

namespace webtune {
namespace {

using namespace std::chrono_literals;
using testing_support::free_port;
using testing_support::run_webtune;
using testing_support::WebtuneProcess;
using tracker::ClientResult;
using tracker::Hello;
using tracker::Role;
using tracker::SubmitItem;
using tracker::TrackerClient;

std::string firefox_path() {
  const char* env = std::getenv("WEBTUNE_FIREFOX");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/firefox-esr";
}

/// The first `name` on $PATH, or "".
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::filesystem::path file =
        std::filesystem::path(dirs.substr(begin, end - begin)) / name;
    if (::access(file.c_str(), X_OK) == 0) return file.string();
    begin = end + 1;
  }
  return {};
}

/// Why this suite cannot run here ("" when it can).
std::string missing_browser() {
  if (!std::filesystem::exists(firefox_path()))
    return "no Firefox at " + firefox_path() +
           " (apt-get install firefox-esr, or set WEBTUNE_FIREFOX): Firefox agent tests skipped";
  return {};
}

Hello hello_as(Role role) {
  Hello h;
  h.role = role;
  h.name = "firefox-test";
  return h;
}

/// The key of `summary` whose family is `family` ("webgl2:..."), or "".
std::string key_of(const boost::json::object& summary, const std::string& family) {
  for (const auto& [key, unused] : summary.at("keys").as_object())
    if (std::string(key).rfind(family + ":", 0) == 0) return std::string(key);
  return {};
}

/// The device of `key` in `summary`: a tab's hello device lists each executor's under "devices".
boost::json::object device_of(const boost::json::object& summary, const std::string& key) {
  const boost::json::object& device = summary.at("devices").at(key).as_object();
  if (const auto* per_key = device.if_contains("devices"))
    if (const auto* own = per_key->as_object().if_contains(key)) return own->as_object();
  return device;
}

/// `webtune farm --browser firefox` and a client of its tracker, shared by the suite.
class FirefoxFarmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = missing_browser();
    if (skip_.empty() && on_path("Xvfb").empty())
      skip_ =
          "no Xvfb on PATH (apt-get install xvfb): headless Firefox has no WebGL, so the Firefox "
          "farm runs on a private Xvfb display; Firefox agent tests skipped";
    if (!skip_.empty()) return;
    const uint16_t port = free_port();
    url_ = "ws://127.0.0.1:" + std::to_string(port) + "/ws";
    log_ = ::testing::TempDir() + "firefox_farm_" + std::to_string(::getpid()) + ".log";
    farm_ = new WebtuneProcess(
        {"farm", "--browser", "firefox", "--targets", "webgl2,webgpu,wasm", "--tabs", "1", "--name",
         "ff", "--listen", "127.0.0.1:" + std::to_string(port)},
        log_);
    // Until the tab has joined with its webgl2 and wasm keys (the tracker may not listen yet).
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        if (!viewer_) viewer_ = new TrackerClient(url_, hello_as(Role::kViewer));
        summary_ = viewer_->summary();
        if (!key_of(summary_, "webgl2").empty() && !key_of(summary_, "wasm").empty()) break;
      } catch (const std::exception&) {
        delete viewer_;
        viewer_ = nullptr;
      }
      std::this_thread::sleep_for(200ms);
    }
  }

  static void TearDownTestSuite() {
    delete viewer_;
    viewer_ = nullptr;
    if (farm_ != nullptr) {
      // SIGTERM: the farm closes Firefox, its profile and its Xvfb.
      farm_->signal(SIGTERM);
      farm_->wait_for_exit(20s);
      delete farm_;
      farm_ = nullptr;
    }
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    webgl2_key_ = key_of(summary_, "webgl2");
    wasm_key_ = key_of(summary_, "wasm");
    ASSERT_FALSE(webgl2_key_.empty() || wasm_key_.empty())
        << "the Firefox tab did not join with webgl2 and wasm keys within 120 s; summary "
        << boost::json::serialize(summary_) << "\nfarm log:\n"
        << farm_->log();
  }

  /// A dense 32³ job of the default config of `target` for `key`, with the reference's samples
  /// (their values shifted by `shift` when non-zero: a wrong reference).
  boost::json::value dense_input(Target target, const std::string& key, double shift = 0) {
    const DeviceLimits limits = DeviceLimits::from_json(device_of(summary_, key).at("limits"));
    Task task = Task::create(Workload::dense(32, 32, 32), target, limits);
    MeasureInput input;
    input.workload = task.workload;
    input.artifact = task.build(task.default_config());
    input.seed = 11;
    input.samples = reference_samples(task.workload, input.seed, 32);
    for (ReferenceSample& s : input.samples) s.value += shift;
    input.options.number = 2;
    input.options.repeat = 3;
    input.options.timeout_s = 60;
    return input.to_json();
  }

  static std::string skip_;
  static std::string url_, log_;
  static WebtuneProcess* farm_;
  static TrackerClient* viewer_;
  static boost::json::object summary_;
  std::string webgl2_key_, wasm_key_;
};

std::string FirefoxFarmTest::skip_;
std::string FirefoxFarmTest::url_;
std::string FirefoxFarmTest::log_;
WebtuneProcess* FirefoxFarmTest::farm_ = nullptr;
TrackerClient* FirefoxFarmTest::viewer_ = nullptr;
boost::json::object FirefoxFarmTest::summary_;

TEST_F(FirefoxFarmTest, TabJoinsWithWebgl2AndWasmKeysThatNameFirefox) {
  // <family>:<device>:firefox-<major>:<os>-<arch>[:<threads>t] (docs/protocol.md): never a
  // Chromium tab's key, so their results land in other tuning jobs.
  const std::regex firefox_key(
      R"(^(webgl2|wasm):[a-z0-9.-]+:firefox-[0-9]+:linux-[a-z0-9_]+:[0-9]+t$)");
  EXPECT_TRUE(std::regex_match(webgl2_key_, firefox_key)) << webgl2_key_;
  EXPECT_TRUE(std::regex_match(wasm_key_, firefox_key)) << wasm_key_;
  // Under Xvfb Firefox's WebGL2 renders on Mesa's llvmpipe (its renderer string says
  // "llvmpipe, or similar"); served with COOP + COEP the page is cross-origin isolated, so wasm
  // has threads.
  EXPECT_EQ(webgl2_key_.rfind("webgl2:llvmpipe:firefox-", 0), 0u) << webgl2_key_;
  EXPECT_EQ(wasm_key_.rfind("wasm:threads:firefox-", 0), 0u) << wasm_key_;
  const boost::json::object gl = device_of(summary_, webgl2_key_);
  EXPECT_TRUE(gl.at("color_buffer_float").as_bool()) << boost::json::serialize(gl);
  EXPECT_TRUE(gl.at("cross_origin_isolated").as_bool()) << boost::json::serialize(gl);
  // Firefox reports fences about a frame late: timed batches wait with gl.finish() there.
  EXPECT_EQ(gl.at("sync").as_string(), "finish");
  EXPECT_EQ(std::string(gl.at("browser").as_string()).rfind("firefox-", 0), 0u);
  // Firefox ESR on Linux has no WebGPU: the hello says why, as the page does.
  const auto& tab_device = summary_.at("devices").at(webgl2_key_).as_object();
  EXPECT_EQ(boost::json::serialize(tab_device.at("unavailable")),
            R"({"webgpu":"navigator.gpu is undefined"})");
}

TEST_F(FirefoxFarmTest, Webgl2AndWasmJobsMatchTheReferenceAndAWrongReferenceIsCaught) {
  TrackerClient client(url_, hello_as(Role::kClient));
  std::vector<SubmitItem> items;
  const auto add = [&](uint64_t tag, const std::string& key, boost::json::value input) {
    SubmitItem item;
    item.tag = tag;
    item.key = key;
    item.lease_ms = 120000;
    item.input = std::move(input);
    items.push_back(std::move(item));
  };
  add(1, webgl2_key_, dense_input(Target::kGlesFrag, webgl2_key_));
  add(2, wasm_key_, dense_input(Target::kWasm, wasm_key_));
  add(3, webgl2_key_, dense_input(Target::kGlesFrag, webgl2_key_, 1.0));
  client.submit(items);
  std::map<uint64_t, ClientResult> results;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (results.size() < items.size() && std::chrono::steady_clock::now() < deadline)
    if (auto r = client.next_result(1s)) results.emplace(r->tag, *r);
  ASSERT_EQ(results.size(), 3u) << "farm log:\n" << farm_->log();
  for (uint64_t tag : {1, 2}) {
    const ClientResult& r = results.at(tag);
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0) << boost::json::serialize(r.result);
    EXPECT_EQ(r.key, tag == 1 ? webgl2_key_ : wasm_key_);
    EXPECT_EQ(r.agent, "ff-0");
    const auto& costs = r.result.at("costs").as_array();
    EXPECT_EQ(costs.size(), 3u) << boost::json::serialize(r.result);
    for (const auto& c : costs) EXPECT_GT(c.to_number<double>(), 0.0);
  }
  // The same kernel against a reference off by 1: the tab's sample check refuses it.
  EXPECT_EQ(results.at(3).result.at("error_no").to_number<int>(),
            static_cast<int>(MeasureErrorNo::kWrongAnswer))
      << boost::json::serialize(results.at(3).result);
}

TEST_F(FirefoxFarmTest, TuneOnTheFirefoxFarmRecordsFirefoxJobs) {
  const std::string db =
      ::testing::TempDir() + "firefox_tune_" + std::to_string(::getpid()) + ".db";
  std::filesystem::remove(db);
  for (const auto& [target, key] :
       {std::pair{std::string("webgl2"), webgl2_key_}, std::pair{std::string("wasm"), wasm_key_}}) {
    const auto run =
        run_webtune({"tune", "--tracker", url_, "--target", target, "--key", key, "--workload",
                     "dense:32,32,32", "--trials", "4", "--batch", "4", "--db", db});
    ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  }
  RecordStore store(db);
  const std::vector<TuningJobInfo> jobs = store.jobs();
  ASSERT_EQ(jobs.size(), 2u);
  for (const TuningJobInfo& job : jobs) {
    SCOPED_TRACE(job.device_key);
    EXPECT_TRUE(job.device_key == webgl2_key_ || job.device_key == wasm_key_);
    EXPECT_NE(job.device_key.find(":firefox-"), std::string::npos);
    EXPECT_EQ(job.trials, 4);
    EXPECT_EQ(job.errors, 0);
    EXPECT_GT(job.best_gflops, 0.0);
    for (const TrialRecord& t : store.trials(job.id)) {
      EXPECT_EQ(t.result.error, MeasureErrorNo::kNoError) << t.result.message;
      EXPECT_GT(t.gflops, 0.0);
      EXPECT_EQ(t.agent, "ff-0");
    }
  }
  EXPECT_NE(jobs[0].device_key, jobs[1].device_key);
  std::filesystem::remove(db);
}

/// `node farm.mjs --browser firefox --display headless` with its stdin a pipe (for "status")
/// and its stdout in a file.
class HeadlessFarm {
 public:
  HeadlessFarm(const std::string& url, const std::string& log) : log_(log) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    std::vector<std::string> args = {"node",
                                     WEBTUNE_SOURCE_DIR "/browser-agent/farm.mjs",
                                     "--browser",
                                     "firefox",
                                     "--display",
                                     "headless",
                                     "--tracker",
                                     url,
                                     "--targets",
                                     "webgl2,webgpu,wasm",
                                     "--name",
                                     "headless",
                                     "--no-restart",
                                     "--parent-pid",
                                     std::to_string(::getpid())};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[0], 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    const int rc = posix_spawnp(&pid_, "node", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[0]);
    stdin_ = fds[1];
    ::fcntl(stdin_, F_SETFD, FD_CLOEXEC);
    if (rc != 0) throw std::runtime_error("cannot start node");
  }
  HeadlessFarm(const HeadlessFarm&) = delete;
  HeadlessFarm& operator=(const HeadlessFarm&) = delete;
  ~HeadlessFarm() {
    ::close(stdin_);
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + 15s;
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

  /// The tabs' states of a "status" command (the JSON array of its answer line).
  boost::json::array status() {
    const std::string marker = "farm: status ";
    const size_t seen = testing_support::read_file_text(log_).size();
    const std::string line = "status\n";
    if (::write(stdin_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return {};
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = testing_support::read_file_text(log_);
      const size_t at = text.find(marker, seen);
      const size_t end = at == std::string::npos ? at : text.find('\n', at);
      if (end != std::string::npos)
        return boost::json::parse(text.substr(at + marker.size(), end - at - marker.size()))
            .as_array();
      std::this_thread::sleep_for(100ms);
    }
    return {};
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string log_;
};

TEST(HeadlessFirefoxTest, PageShowsEachExecutorsOwnReasonAndServesWasm) {
  if (const std::string why = missing_browser(); !why.empty()) GTEST_SKIP() << why;
  tracker::TrackerConfig config;
  config.port = 0;
  tracker::TrackerServer server(config);
  server.start_background();
  const std::string log =
      ::testing::TempDir() + "firefox_headless_" + std::to_string(::getpid()) + ".log";
  HeadlessFarm farm(server.url(), log);
  // Until the tab has joined (its agent connected) and listed its executors.
  boost::json::array tabs;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < deadline) {
    tabs = farm.status();
    if (tabs.size() == 1 && tabs[0].as_object().if_contains("status") &&
        tabs[0].at("status").as_string() == "connected")
      break;
    std::this_thread::sleep_for(300ms);
  }
  ASSERT_EQ(tabs.size(), 1u) << testing_support::read_file_text(log);
  const boost::json::object& tab = tabs[0].as_object();
  ASSERT_EQ(tab.at("status").as_string(), "connected") << boost::json::serialize(tab) << "\n"
                                                       << testing_support::read_file_text(log);
  const auto& keys = tab.at("keys").as_array();
  ASSERT_EQ(keys.size(), 1u) << boost::json::serialize(tab);
  const std::string wasm_key(keys[0].as_string());
  EXPECT_EQ(wasm_key.rfind("wasm:threads:firefox-", 0), 0u) << wasm_key;
  // The page's lines, one per executor family: headless Firefox refuses WebGL2 with its own
  // message (context creation needs a window system on Linux), has no navigator.gpu, and runs
  // wasm.
  const auto& lines = tab.at("executors").as_array();
  ASSERT_EQ(lines.size(), 3u) << boost::json::serialize(tab);
  EXPECT_EQ(lines[0].as_string(),
            "webgl2: getContext('webgl2') returned null: AllowWebgl2:false restricts context "
            "creation on this system.");
  EXPECT_EQ(lines[1].as_string(), "webgpu: navigator.gpu is undefined");
  EXPECT_EQ(lines[2].as_string(), "wasm: ready as " + wasm_key);
  server.stop();
}

}  // namespace
}  // namespace webtune
