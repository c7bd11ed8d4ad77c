/// \file artifact_command_test.cpp
/// `webtune artifact` on a real SQLite records file: the best (or a given) config's kernel comes
/// out as the JSON a runtime needs, built in the space the job was tuned in (its device limits),
/// and a selection that matches no job fails with a message instead of printing something else.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "codegen/task.hpp"
#include "tuner/records.hpp"

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;

struct CommandRun {
  int status = -1;
  std::string out;  ///< stdout and stderr together
};

/// Runs `webtune artifact ARGS` through the shell and collects its output and exit status.
CommandRun run_artifact(const std::string& args) {
  CommandRun run;
  const std::string command = std::string(WEBTUNE_BINARY) + " artifact " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

MeasureResult ok_result(double cost_s) {
  MeasureResult r;
  r.costs = {cost_s};
  r.all_cost = 0.5;
  r.timestamp = 1.7e9;
  return r;
}

class ArtifactCommandTest : public testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::TempDir() + "webtune_artifact_" +
            testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
            std::to_string(getpid()) + ".db";
    remove_files();
    // Limits unlike the defaults (8 draw buffers, as WebGL2 in Chromium has): the command must
    // rebuild the space with these for the stored indices to mean the same entities.
    limits_.max_draw_buffers = 8;
    limits_.max_texture_size = 8192;
    task_ = Task::create(workload_, Target::kGlesFrag, limits_);
    const auto& valid = task_.space->valid_indices();
    ASSERT_GE(valid.size(), 3u);
    best_ = valid[valid.size() / 2];
    slow_ = valid.front();
    failed_ = valid.back();

    RecordStore store(path_);
    store.upsert_device(kDevice, bj::serialize(bj::object{{"limits", limits_.to_json()}}));
    const int64_t job = store.open_job(workload_, Target::kGlesFrag, kDevice, "dense64", "random");
    std::vector<TrialRecord> trials(3);
    trials[0].config_index = slow_;
    trials[0].config_json = bj::serialize(task_.space->get(slow_).to_json());
    trials[0].result = ok_result(2e-3);
    trials[1].config_index = best_;
    trials[1].config_json = bj::serialize(task_.space->get(best_).to_json());
    trials[1].result = ok_result(5e-4);
    trials[2].config_index = failed_;
    trials[2].config_json = bj::serialize(task_.space->get(failed_).to_json());
    trials[2].result = MeasureResult::failure(MeasureErrorNo::kWrongAnswer, "output[0] differs");
    ASSERT_EQ(store.add_trials(job, trials), 3);
    // A job of another target on the same workload, which a --target webgpu selection finds.
    store.open_job(workload_, Target::kGlesCompute, "gles:llvmpipe", "dense64", "random");
  }
  void TearDown() override { remove_files(); }
  void remove_files() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }

  static constexpr const char* kDevice = "webgl2:swiftshader";
  const Workload workload_ = Workload::dense(64, 64, 64, "dense64");
  DeviceLimits limits_;
  Task task_;
  int64_t best_ = 0, slow_ = 0, failed_ = 0;
  std::string path_;
};

TEST_F(ArtifactCommandTest, PrintsTheBestConfigsKernelWorkloadCostAndSamples) {
  const CommandRun run =
      run_artifact("--db " + path_ + " --workload dense64 --target webgl2 --samples 16");
  ASSERT_EQ(run.status, 0) << run.out;
  const bj::object out = bj::parse(run.out).as_object();
  EXPECT_EQ(out.at("task").as_string(), "dense64");
  EXPECT_EQ(out.at("target").as_string(), "gles-frag");
  EXPECT_EQ(out.at("device_key").as_string(), kDevice);
  EXPECT_EQ(out.at("trials").to_number<int64_t>(), 3);
  EXPECT_TRUE(out.at("best").as_bool());
  EXPECT_EQ(out.at("config_index").to_number<int64_t>(), best_);
  EXPECT_EQ(out.at("workload"), bj::value(workload_.to_json()));
  EXPECT_DOUBLE_EQ(out.at("flops").to_number<double>(), 2.0 * 64 * 64 * 64);
  EXPECT_DOUBLE_EQ(out.at("cost_s").to_number<double>(), 5e-4);
  EXPECT_NEAR(out.at("gflops").to_number<double>(), 2.0 * 64 * 64 * 64 / 5e-4 / 1e9, 1e-9);
  // The very kernel the tuner built for that index, in the space of the stored limits.
  EXPECT_EQ(out.at("artifact"), bj::value(task_.build(task_.space->get(best_)).to_json()));
  EXPECT_EQ(out.at("seed").to_number<uint64_t>(), 1u);
  const auto samples = samples_from_json(out.at("samples"));
  ASSERT_EQ(samples.size(), 16u);
  const auto expected = reference_samples(workload_, 1, 16);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].index, expected[i].index);
    EXPECT_DOUBLE_EQ(samples[i].value, expected[i].value);
  }
}

TEST_F(ArtifactCommandTest, AnInlineSpecAndAGivenConfigIndexWriteToAFile) {
  const std::string file = path_ + ".json";
  const CommandRun run =
      run_artifact("--db " + path_ + " --workload dense:64,64,64 --target webgl2 --config-index " +
                   std::to_string(failed_) + " --seed 7 --samples 4 -o " + file);
  ASSERT_EQ(run.status, 0) << run.out;
  std::FILE* f = std::fopen(file.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text(static_cast<size_t>(fs::file_size(file)), '\0');
  ASSERT_EQ(std::fread(text.data(), 1, text.size(), f), text.size());
  std::fclose(f);
  fs::remove(file);
  const bj::object out = bj::parse(text).as_object();
  EXPECT_FALSE(out.at("best").as_bool());
  EXPECT_EQ(out.at("config_index").to_number<int64_t>(), failed_);
  // The stored trial failed: its result says so, and it has no cost.
  EXPECT_EQ(out.at("result").at("error_no").to_number<int>(),
            static_cast<int>(MeasureErrorNo::kWrongAnswer));
  EXPECT_TRUE(out.at("cost_s").is_null());
  EXPECT_DOUBLE_EQ(out.at("gflops").to_number<double>(), 0.0);
  EXPECT_EQ(out.at("seed").to_number<uint64_t>(), 7u);
  EXPECT_EQ(out.at("samples").as_array().size(), 4u);
  EXPECT_EQ(out.at("artifact"), bj::value(task_.build(task_.space->get(failed_)).to_json()));
}

TEST_F(ArtifactCommandTest, RankPicksTheRunnerUpAndRefusesRanksBeyondTheSuccessfulTrials) {
  CommandRun run =
      run_artifact("--db " + path_ + " --workload dense64 --target webgl2 --rank 2 --samples 1");
  ASSERT_EQ(run.status, 0) << run.out;
  bj::object out = bj::parse(run.out).as_object();
  EXPECT_FALSE(out.at("best").as_bool());
  EXPECT_EQ(out.at("rank").to_number<int>(), 2);
  EXPECT_EQ(out.at("config_index").to_number<int64_t>(), slow_);
  EXPECT_DOUBLE_EQ(out.at("cost_s").to_number<double>(), 2e-3);
  EXPECT_EQ(out.at("artifact"), bj::value(task_.build(task_.space->get(slow_)).to_json()));
  // Rank 1 is the best; the failed trial is never ranked, so there is no rank 3.
  run = run_artifact("--db " + path_ + " --workload dense64 --target webgl2 --rank 1 --samples 1");
  ASSERT_EQ(run.status, 0) << run.out;
  out = bj::parse(run.out).as_object();
  EXPECT_TRUE(out.at("best").as_bool());
  EXPECT_EQ(out.at("config_index").to_number<int64_t>(), best_);
  run = run_artifact("--db " + path_ + " --workload dense64 --target webgl2 --rank 3");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.out.find("has 2 successful trials, fewer than --rank 3"), std::string::npos)
      << run.out;
  run = run_artifact("--db " + path_ +
                     " --workload dense64 --target webgl2 --rank 2 "
                     "--config-index " +
                     std::to_string(best_));
  EXPECT_NE(run.status, 0) << "--rank and --config-index together were accepted";
}

TEST_F(ArtifactCommandTest, ASelectionWithoutAJobOrWithoutSuccessFailsAndSaysWhy) {
  CommandRun run = run_artifact("--db " + path_ + " --workload dense64 --target webgpu");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.out.find("no tuning job of target webgpu match --workload 'dense64'"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("dense_64_64_64 on webgl2:swiftshader"), std::string::npos) << run.out;

  run = run_artifact("--db " + path_ + " --workload dense64 --target gles-compute");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.out.find("has no successful trial"), std::string::npos) << run.out;

  run = run_artifact("--db " + path_ + ".missing --workload dense64 --target webgl2");
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.out.find("no records database"), std::string::npos) << run.out;
  EXPECT_FALSE(fs::exists(path_ + ".missing"));
}

}  // namespace
}  // namespace webtune
