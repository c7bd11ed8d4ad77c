/// \file tune_test.cpp
/// The tuning loop end to end: a real tracker on loopback, a real `webtune agent` on llvmpipe,
/// a real SQLite file. Resume measures nothing twice; a killed `webtune tune` resumes.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <set>
#include <thread>

#include "tracker/tracker_server.hpp"
#include "tuner/tune_session.hpp"

extern char** environ;

namespace webtune {
namespace {

using namespace std::chrono_literals;

pid_t spawn(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, WEBTUNE_BINARY, nullptr, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start " WEBTUNE_BINARY);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string temp_db(const std::string& name) {
  std::string path =
      ::testing::TempDir() + "/webtune_" + name + "_" + std::to_string(getpid()) + ".db";
  std::filesystem::remove(path);
  return path;
}

std::set<int64_t> indices(const std::vector<TrialRecord>& trials) {
  std::set<int64_t> out;
  for (const TrialRecord& t : trials) out.insert(t.config_index);
  return out;
}

TEST(Tune, ResumeContinuesFromTheRecordsAndMeasuresNothingTwice) {
  tracker::TrackerConfig config;
  config.port = 0;
  tracker::TrackerServer server(config);
  server.start_background();
  pid_t agent = spawn({WEBTUNE_BINARY, "--log-level", "warn", "agent", "--tracker", server.url(),
                       "--key", "gles", "--name", "test-agent"});
  const std::string db = temp_db("resume");
  const std::vector<WorkloadFileTask> tasks = {{Workload::dense(32, 32, 32, "d32"), 1},
                                               {Workload::conv2d(1, 4, 8, 8, 8, 3, 1, 1, "c8"), 2}};
  TuneOptions options;
  options.tuner = "random";
  options.trials = 12;
  options.batch_size = 5;
  {
    RecordStore store(db);
    TrackerRunner runner(server.url(), "", "gles");
    auto [device_key, device_json] = runner.wait_for_device(60s);
    EXPECT_EQ(device_key, "gles:llvmpipe");
    TuneSession session(store, runner, device_key, DeviceLimits{}, options);
    int reports = 0;
    auto progress = session.run(tasks, [&](const std::vector<TaskProgress>&) { ++reports; });
    ASSERT_EQ(progress.size(), 2u);
    for (const TaskProgress& p : progress) {
      EXPECT_EQ(p.trials, 12);
      EXPECT_TRUE(p.done);
      EXPECT_GT(p.best_gflops, 0);
      EXPECT_GT(p.default_gflops, 0) << "the default config is measured first";
      EXPECT_GE(p.best_gflops, p.default_gflops);
    }
    EXPECT_GE(reports, 1 + 2 * 3);  // initial report + ceil(12/5) batches per task
    const std::string table = format_summary(progress);
    EXPECT_NE(table.find("d32"), std::string::npos);
    EXPECT_NE(table.find("estimated network time"), std::string::npos);
  }
  // A second session with a larger budget continues where the first stopped.
  options.trials = 20;
  {
    RecordStore store(db);
    TrackerRunner runner(server.url(), "", "gles:llvmpipe");
    TuneSession session(store, runner, "gles:llvmpipe", DeviceLimits{}, options);
    auto progress = session.run(tasks);
    for (const TaskProgress& p : progress) {
      EXPECT_EQ(p.resumed, 12);
      EXPECT_EQ(p.trials, 20);
    }
    auto jobs = store.jobs();
    ASSERT_EQ(jobs.size(), 2u);
    for (const TuningJobInfo& j : jobs) {
      auto trials = store.trials(j.id);
      EXPECT_EQ(trials.size(), 20u);
      EXPECT_EQ(indices(trials).size(), 20u) << "a config was measured twice";
      for (const TrialRecord& t : trials) {
        EXPECT_EQ(t.agent, "test-agent");
        EXPECT_EQ(t.result.error, MeasureErrorNo::kNoError) << t.result.message;
      }
    }
  }
  ::kill(agent, SIGTERM);
  wait_exit(agent);
}

TEST(Tune, KilledTuningResumesWhereItStopped) {
  const std::string db = temp_db("killed");
  auto tune = [&](int trials) {
    return spawn({WEBTUNE_BINARY, "--log-level", "warn", "tune", "--workload", "dense:48,48,48",
                  "--target", "gles-frag", "--tuner", "random", "--trials", std::to_string(trials),
                  "--batch", "4", "--db", db});
  };
  pid_t first = tune(400);
  // Kill it once a few batches are committed.
  int64_t recorded = 0;
  for (int i = 0; i < 600 && recorded < 8; ++i) {
    std::this_thread::sleep_for(100ms);
    try {
      RecordStore peek(db);
      auto jobs = peek.jobs();
      recorded = jobs.empty() ? 0 : static_cast<int64_t>(peek.trials(jobs[0].id).size());
    } catch (const std::exception&) {
    }
  }
  ASSERT_GE(recorded, 8);
  ::kill(first, SIGKILL);
  wait_exit(first);
  std::vector<TrialRecord> before;
  {
    RecordStore store(db);
    before = store.trials(store.jobs().at(0).id);
  }
  ASSERT_GE(before.size(), 8u);
  EXPECT_EQ(before.size() % 4, 0u) << "only whole batches are committed";
  const int total = static_cast<int>(before.size()) + 12;
  EXPECT_EQ(wait_exit(tune(total)), 0);
  RecordStore store(db);
  auto after = store.trials(store.jobs().at(0).id);
  EXPECT_EQ(static_cast<int>(after.size()), total);
  EXPECT_EQ(indices(after).size(), after.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(after[i].config_index, before[i].config_index);
}

}  // namespace
}  // namespace webtune
