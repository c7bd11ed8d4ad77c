/// \file cli_agent_wait_test.cpp
/// `webtune tune` never stalls silently (issue 17, item 3): the real binary against a real
/// tracker on loopback (a TrackerServer of this process), with no agent, or with agents that
/// take jobs and never answer (so the tracker quarantines them). It says why nothing runs at
/// once and gives up after --agent-wait with exit status 3; a signal while it waits exits 130.
/// Options that cannot work are refused with status 2 before anything starts: nothing on stdout
/// (where the embedded farm's dashboard line would be the first thing), no records file.
#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/run_webtune.hpp"
#include "support/webtune_process.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"
#include "tuner/measure_pipeline.hpp"

namespace webtune {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing_support::WebtuneRun;

/// The exit statuses of README.md, "Exit codes" (cli/exit_codes.hpp).
constexpr int kUsage = 2, kNoAgent = 3;

class CliAgentWait : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("webtune_cli_agent_wait_" + std::to_string(getpid()) + "_" +
            testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string db() const { return (dir_ / "records.db").string(); }

  /// `tune` of dense 64×64×64 on gles-frag against `url`, plus `extra`.
  std::vector<std::string> tune_args(const std::string& url, std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "tune",     "--tracker", url,       "--workload", "dense:64,64,64",
        "--target", "gles-frag", "--tuner", "random",     "--trials",
        "4",        "--batch",   "2",       "--db",       db()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  fs::path dir_;
};

tracker::TrackerConfig loopback() {
  tracker::TrackerConfig config;
  config.port = 0;
  return config;
}

/// Where `text` is in `log`, failing the test when it is not.
size_t position_of(const std::string& log, const std::string& text) {
  const size_t at = log.find(text);
  EXPECT_NE(at, std::string::npos) << "stderr lacks: " << text << "\n--- stderr ---\n" << log;
  return at;
}

TEST_F(CliAgentWait, NoAgentIsSaidAtOnceAndAgentWaitGivesUpWithStatusThree) {
  tracker::TrackerServer server(loopback());
  server.start_background();
  const auto start = std::chrono::steady_clock::now();
  const WebtuneRun run =
      testing_support::run_webtune(tune_args(server.url(), {"--agent-wait", "3"}));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, kNoAgent) << run.describe();
  // Said while waiting (after a grace of 1 s), then the error that ends it.
  const size_t said = position_of(
      run.err,
      "[warning] no agent connected for key 'gles'; waiting for one, giving up after 3 s "
      "(--agent-wait)");
  const size_t gave_up = position_of(run.err,
                                     "[error] no agent connected for key 'gles' for 3 s; giving up "
                                     "(--agent-wait 3)");
  EXPECT_LT(said, gave_up);
  EXPECT_GE(took, 3.0) << "it gave up before --agent-wait";
  EXPECT_EQ(run.out, "") << "nothing was tuned, so no data on stdout";
}

TEST_F(CliAgentWait, AllAgentsQuarantinedIsSaidWithTheReasonAndAgentWaitGivesUp) {
  // Two agents that take a job each and never answer: their leases (0.6 s) expire and, with
  // quarantine_after 1, each is quarantined for a minute at its first lost lease.
  tracker::TrackerConfig config = loopback();
  config.leases.min_ms = 600;
  config.leases.max_ms = 600;
  config.scheduler.quarantine_after = 1;
  config.scheduler.quarantine_duration = 60s;
  config.heartbeat_ms = 120000;  // the mute agents do not answer pings either
  tracker::TrackerServer server(config);
  server.start_background();
  std::vector<std::unique_ptr<tracker::TrackerClient>> mute;
  for (const char* name : {"mute-1", "mute-2"}) {
    tracker::Hello hello;
    hello.role = tracker::Role::kAgent;
    hello.name = name;
    hello.keys = {"gles:mute"};
    mute.push_back(std::make_unique<tracker::TrackerClient>(server.url(), hello));
  }
  const WebtuneRun run =
      testing_support::run_webtune(tune_args(server.url(), {"--agent-wait", "3"}));
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, kNoAgent) << run.describe();
  const size_t said = position_of(
      run.err,
      "[warning] all 2 agents for key 'gles:mute' are quarantined (lease expired \u00d71); "
      "waiting for one, giving up after 3 s (--agent-wait)");
  const size_t gave_up = position_of(
      run.err,
      "[error] all 2 agents for key 'gles:mute' are quarantined (lease expired \u00d71) for 3 s; "
      "giving up (--agent-wait 3)");
  EXPECT_LT(said, gave_up);
  // The tuning had started (its header is data on stdout) and the tracker saw the quarantines.
  EXPECT_NE(run.out.find("tuning 1 task(s) on gles-frag (gles:mute)"), std::string::npos)
      << run.describe();
  server.inspect([](const tracker::TrackerState& state) {
    EXPECT_EQ(state.scheduler().counters().quarantines, 2u);
  });
}

TEST_F(CliAgentWait, ASignalWhileWaitingForAnAgentExitsWith128PlusItsNumber) {
  tracker::TrackerServer server(loopback());
  server.start_background();
  const std::string log = (dir_ / "tune.log").string();
  // --agent-wait 0: it would wait for ever, saying why every 10 s.
  testing_support::WebtuneProcess tune(tune_args(server.url(), {"--agent-wait", "0"}), log);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  const std::string waiting =
      "no agent connected for key 'gles'; waiting for one, waiting for ever (--agent-wait 0)";
  while (tune.log().find(waiting) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  ASSERT_NE(tune.log().find(waiting), std::string::npos) << tune.log();
  tune.signal(SIGINT);
  const int status = tune.wait_for_exit(30s);
  ASSERT_NE(status, -1) << "still running 30 s after SIGINT\n" << tune.log();
  ASSERT_TRUE(WIFEXITED(status)) << tune.log();
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT) << tune.log();
}

/// A sink that keeps "[level] message" lines, readable from any thread.
class LineSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  std::string text() {
    std::lock_guard<std::mutex> lock(lines_mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::mutex> lock(lines_mutex_);
    text_ += "[" +
             std::string(spdlog::level::to_string_view(msg.level).data(),
                         spdlog::level::to_string_view(msg.level).size()) +
             "] " + std::string(msg.payload.data(), msg.payload.size()) + "\n";
  }
  void flush_() override {}

 private:
  std::mutex lines_mutex_;
  std::string text_;
};

/// What the default logger writes while it lives (the runner's notices).
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()), sink_(std::make_shared<LineSink>()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink_));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() { return sink_->text(); }
  size_t count(const std::string& needle) {
    const std::string all = text();
    size_t n = 0;
    for (size_t at = all.find(needle); at != std::string::npos; at = all.find(needle, at + 1)) ++n;
    return n;
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<LineSink> sink_;
};

TEST(RunnerNotices, TheReasonIsRepeatedWhileNoAgentComesAndItsEndIsSaid) {
  tracker::TrackerServer server(loopback());
  server.start_background();
  CapturedLog log;
  {
    TrackerRunner runner(server.url(), "", "gles");
    runner.agent_notice_every = 200ms;  // 10 s in the CLI
    EXPECT_THROW(runner.wait_for_device(2s), NoAgent);
  }
  // Said after the 1 s grace, again every 200 ms, then given up.
  EXPECT_GE(log.count("[warning] no agent connected for key 'gles'"), 2u) << log.text();
  EXPECT_EQ(log.count("[warning] no agent connected for key 'gles'; waiting for one, giving up "
                      "after 2 s (--agent-wait)"),
            1u)
      << log.text();
  EXPECT_GE(log.count("[warning] no agent connected for key 'gles' (for "), 1u) << log.text();

  // An agent that joins while the runner waits ends the wait, and the runner says so.
  TrackerRunner runner(server.url(), "", "gles");
  std::unique_ptr<tracker::TrackerClient> late;
  const size_t warned = log.count("[warning]");
  std::thread join([&] {
    // Once this runner said there is none.
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (log.count("[warning]") == warned && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    tracker::Hello hello;
    hello.role = tracker::Role::kAgent;
    hello.name = "late";
    hello.keys = {"gles:late"};
    late = std::make_unique<tracker::TrackerClient>(server.url(), hello);
  });
  const auto [key, device] = runner.wait_for_device(30s);
  join.join();
  EXPECT_EQ(key, "gles:late");
  EXPECT_EQ(log.count("[info] an agent for key 'gles' can take jobs now (after "), 1u)
      << log.text();
}

/// Runs `args`, which must be refused as a usage error before anything starts: status 2, stderr
/// exactly `message` and CLI11's hint, nothing on stdout (the embedded farm prints its dashboard
/// first thing), no records file.
void expect_usage_error(const std::vector<std::string>& args, const std::string& db,
                        const std::string& message) {
  std::string command = "webtune";
  for (const std::string& a : args) command += " " + a;
  SCOPED_TRACE(command);
  const WebtuneRun run = testing_support::run_webtune(args);
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, kUsage) << run.describe();
  EXPECT_EQ(run.err, message + "\nRun with --help for more information.\n");
  EXPECT_EQ(run.out, "");
  EXPECT_FALSE(fs::exists(db)) << "the records file was opened";
}

TEST_F(CliAgentWait, BadOptionsAreRefusedBeforeTheFarmStarts) {
  // No --tracker: a tune that got past its checks would start the embedded farm.
  const std::vector<std::string> base = {"tune", "--local-agents", "1", "--db", db()};
  auto tune = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_usage_error(tune({"--workload", "dense:64,64,64", "--tuner", "bayes"}), db(),
                     "--tuner: 'bayes' is not a known tuner (known: xgb, ga, random, grid)");
  expect_usage_error(tune({"--workload", "matmul:64,64,64"}), db(),
                     "--workload: 'matmul:64,64,64': unknown op 'matmul'; the known ops are "
                     "dense:M,N,K, conv2d:N,C,H,W,K,R,stride,pad and "
                     "depthwise_conv2d:N,C,H,W,R,stride,pad (or give a workload file)");
  expect_usage_error(tune({"--workload", "dense:64,64,64", "--number", "0"}), db(),
                     "--number: Value 0 not in range 1 to 1000000");
  expect_usage_error(tune({"--workload", "dense:64,64,64", "--agent-wait", "-5"}), db(),
                     "--agent-wait: Value -5 not in range 0 to 604800");
  expect_usage_error({"space", "--workload", "matmul:64,64,64"}, db(),
                     "--workload: 'matmul:64,64,64': unknown op 'matmul'; the known ops are "
                     "dense:M,N,K, conv2d:N,C,H,W,K,R,stride,pad and "
                     "depthwise_conv2d:N,C,H,W,R,stride,pad (or give a workload file)");
}

}  // namespace
}  // namespace webtune
