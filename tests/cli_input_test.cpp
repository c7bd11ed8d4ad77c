/// \file cli_input_test.cpp
/// Bad command-line input never crashes `webtune` (issue 13, item 10). Each test runs the real
/// binary as a child process (stdin /dev/null, stdout and stderr into separate files) and checks
/// that it ended normally (not by a signal) with a non-zero status, that stderr names the field
/// or option and its limit, and that stdout, where a command's data goes, stays empty.
///
/// The child runs under an address-space limit (RLIMIT_AS, 4 GiB) so that a regression that
/// allocates without bound ends in bad_alloc rather than in the machine's OOM killer; sanitizer
/// builds, whose shadow memory needs terabytes of address space, run without it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/task.hpp"
#include "support/run_webtune.hpp"
#include "tuner/records.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WEBTUNE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define WEBTUNE_SANITIZED 1
#endif
#endif
#ifndef WEBTUNE_SANITIZED
#define WEBTUNE_SANITIZED 0
#endif

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;

using testing_support::WebtuneRun;

/// Runs WEBTUNE_BINARY with `args` under an address-space limit: `as_limit` bytes (0: 4 GiB;
/// none in sanitizer builds).
WebtuneRun run_webtune(const std::vector<std::string>& args, rlim_t as_limit = 0) {
  testing_support::RunOptions options;
  if (!WEBTUNE_SANITIZED) options.address_space = as_limit != 0 ? as_limit : rlim_t{4} << 30;
  return testing_support::run_webtune(args, options);
}

/// The refusal every bad input must get: a normal exit with a non-zero status, each of
/// `expected` on stderr, nothing on stdout.
void expect_refused(const std::vector<std::string>& args,
                    const std::vector<std::string>& expected) {
  std::string command = "webtune";
  for (const std::string& a : args) command += " " + a;
  SCOPED_TRACE(command);
  const WebtuneRun run = run_webtune(args);
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_NE(run.status, 0) << run.describe();
  EXPECT_NE(run.status, 127) << "could not start " << WEBTUNE_BINARY;
  for (const std::string& text : expected)
    EXPECT_NE(run.err.find(text), std::string::npos) << "stderr lacks '" << text << "'\n"
                                                     << run.describe();
  EXPECT_EQ(run.out, "") << run.describe();
}

class CliInputTest : public testing::Test {
 protected:
  void SetUp() override {
    base_ = testing::TempDir() + "webtune_cli_input_" +
            testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
            std::to_string(getpid());
  }
  void TearDown() override {
    for (const std::string& path : created_) fs::remove(path);
  }
  /// A file path under the test temp dir, removed after the test.
  std::string temp_path(const std::string& suffix) {
    created_.push_back(base_ + suffix);
    for (const char* extra : {"-wal", "-shm"}) created_.push_back(base_ + suffix + extra);
    return base_ + suffix;
  }
  std::string write_file(const std::string& suffix, const std::string& text) {
    const std::string path = temp_path(suffix);
    std::ofstream(path) << text;
    return path;
  }

  std::string base_;
  std::vector<std::string> created_;
};

// ---- workloads ----------------------------------------------------------------------------

TEST_F(CliInputTest, HugeDenseDimensionsAreRefusedNotSigfpe) {
  // Was SIGFPE in the fragment-shader emitter (2^32 truncated to an int 0, then divided by).
  expect_refused({"measure", "--workload", "dense:4294967296,1,4294967296", "--target", "gles-frag",
                  "--config", "default"},
                 {"M = 4294967296", "16777216"});
  expect_refused({"space", "--workload", "dense:1,16777217,1", "--target", "gles-frag"},
                 {"N = 16777217", "16777216"});
}

TEST_F(CliInputTest, AConvolutionTooLargeForMemoryIsRefusedBeforeAllocating) {
  // Was a bare std::bad_alloc after trying to allocate ~196 GB of reference inputs.
  const std::string db = temp_path(".db");
  expect_refused({"tune", "--workload", "conv2d:1,1000000000,7,7,64,3,1,1", "--target", "gles-frag",
                  "--trials", "4", "--db", db},
                 {"C = 1000000000", "16777216"});
  EXPECT_FALSE(fs::exists(db)) << "a refused tune created its records file";
  // Every dimension within bounds, the data tensor not: 4096·4096·4096 = 2^36 elements.
  expect_refused({"space", "--workload", "conv2d:1,4096,4096,4096,1,1,1,0"},
                 {"data tensor", "68719476736", "268435456"});
  // The weight tensor: K·C·R·S = 2^14 · 2^14 · 2 · 1 > 2^28 (R = 2, S = 2: 2^30).
  expect_refused({"space", "--workload", "conv2d:1,16384,2,2,16384,2,1,0"},
                 {"weight tensor", "268435456"});
}

TEST_F(CliInputTest, AbsurdPadsAndStridesNeverReachTheShader) {
  expect_refused({"space", "--workload", "conv2d:1,3,8,8,4,3,1,9223372036854775807", "--target",
                  "gles-frag", "--config", "default"},
                 {"pad = 9223372036854775807", "16777216"});
  expect_refused({"space", "--workload", "conv2d:1,3,8,8,4,3,1,-1", "--config", "default"},
                 {"pad = -1", ">= 0"});
  expect_refused(
      {"space", "--workload", "depthwise_conv2d:1,3,8,8,3,99999999999,1", "--config", "default"},
      {"stride = 99999999999", "16777216"});
  expect_refused({"space", "--workload", "conv2d:1,3,8,8,4,3,0,1"}, {"stride = 0", ">= 1"});
  // A number that does not fit 64 bits at all.
  expect_refused({"space", "--workload", "dense:99999999999999999999,1,1"},
                 {"99999999999999999999", "dense:M,N,K"});
}

TEST_F(CliInputTest, WorkloadFilesAreCheckedLikeInlineSpecs) {
  const std::string bad_pad =
      write_file(".json", R"({"op":"conv2d","C":3,"H":8,"W":8,"K":4,"R":3,"stride":1,"pad":-2})");
  expect_refused({"space", "--workload", bad_pad}, {bad_pad, "pad = -2"});
  const std::string big = write_file(
      "_big.json", R"({"name":"net","tasks":[{"op":"dense","name":"fc","M":1,"N":1000,"K":512},)"
                   R"({"op":"dense","name":"huge","M":65536,"N":65536,"K":1}]})");
  expect_refused({"space", "--workload", big, "--task", "fc"},
                 {big, "output tensor", "4294967296", "268435456"});
  const std::string occurrences =
      write_file("_occ.json", R"({"tasks":[{"op":"dense","M":1,"N":8,"K":8,"occurrences":0}]})");
  expect_refused({"space", "--workload", occurrences}, {"occurrences"});
}

TEST_F(CliInputTest, AWorkloadThatIsNotARegularFileOrTooLargeIsRefused) {
  // Was read until bad_alloc.
  expect_refused({"measure", "--workload", "/dev/zero", "--target", "gles-frag"},
                 {"/dev/zero", "not a regular file"});
  expect_refused({"space", "--workload", testing::TempDir()}, {"not a regular file"});
  // A sparse file just over the 64 MiB cap: refused from its size, before reading.
  const std::string large = temp_path("_large.json");
  {
    std::ofstream(large) << "{";
    fs::resize_file(large, (uint64_t{64} << 20) + 1);
  }
  expect_refused({"space", "--workload", large}, {large, "67108865 bytes", "67108864"});
  expect_refused({"space", "--workload", temp_path("_missing.json")}, {"cannot open"});
  // An AutoTVM log is read line by line, each line bounded.
  expect_refused({"log", "import", "--db", temp_path(".db"), "--in", "/dev/zero"},
                 {"line 1", "longer than the limit of 4194304 bytes"});
}

TEST_F(CliInputTest, ValidWorkloadsAtTheScaleOfRealModelsStillWork) {
  // dense 4096³ and a VGG-16 fc6 (25088 → 4096: a 102.8 M-element weight) are within bounds.
  for (const char* spec :
       {"dense:4096,4096,4096", "dense:1,4096,25088", "conv2d:1,64,224,224,64,3,1,1"}) {
    const WebtuneRun run = run_webtune({"space", "--workload", spec, "--target", "gles-frag"});
    ASSERT_TRUE(run.exited) << run.describe();
    EXPECT_EQ(run.status, 0) << spec << "\n" << run.describe();
    EXPECT_NE(run.out.find("raw configs"), std::string::npos) << run.describe();
  }
}

// ---- numeric options ----------------------------------------------------------------------

TEST_F(CliInputTest, NumericOptionsOutOfRangeExitNonZeroNamingTheOption) {
  const std::string db = temp_path(".db");
  const std::vector<std::string> tune = {"tune", "--workload", "dense:8,8,8", "--db", db};
  auto with = [](std::vector<std::string> base, std::initializer_list<std::string> more) {
    base.insert(base.end(), more);
    return base;
  };
  expect_refused(with(tune, {"--trials", "-5"}), {"--trials", "-5"});
  expect_refused(with(tune, {"--trials", "0"}), {"--trials"});
  expect_refused(with(tune, {"--batch", "0"}), {"--batch"});
  expect_refused(with(tune, {"--number", "0"}), {"--number"});
  expect_refused(with(tune, {"--repeat", "0"}), {"--repeat"});
  expect_refused(with(tune, {"--repeat", "100000"}), {"--repeat"});
  expect_refused(with(tune, {"--min-repeat-ms", "-1"}), {"--min-repeat-ms"});
  expect_refused(with(tune, {"--min-repeat-ms", "60001"}), {"--min-repeat-ms"});
  expect_refused(with(tune, {"--run-timeout", "0"}), {"--run-timeout"});
  expect_refused(with(tune, {"--run-timeout", "-3"}), {"--run-timeout"});
  expect_refused(with(tune, {"--run-timeout", "nan"}), {"--run-timeout"});
  expect_refused(with(tune, {"--run-timeout", "7200"}), {"--run-timeout"});
  expect_refused(with(tune, {"--local-agents", "-1"}), {"--local-agents"});
  expect_refused(with(tune, {"--early-stopping", "0"}), {"--early-stopping"});
  expect_refused(with(tune, {"--timeout", "-1"}), {"--timeout"});
  expect_refused(with(tune, {"--linger", "-1"}), {"--linger"});
  expect_refused(with(tune, {"--total-trials", "0"}), {"--total-trials"});
  expect_refused(with(tune, {"--total-trials", "-100"}), {"--total-trials"});
  expect_refused(with(tune, {"--schedule", "fastest-first"}), {"--schedule", "fastest-first"});
  EXPECT_FALSE(fs::exists(db)) << "a refused tune created its records file";

  const std::vector<std::string> measure = {"measure", "--workload", "dense:8,8,8"};
  expect_refused(with(measure, {"--repeat", "0"}), {"--repeat"});
  expect_refused(with(measure, {"--number", "0"}), {"--number"});
  expect_refused(with(measure, {"--min-repeat-ms", "-1"}), {"--min-repeat-ms"});
  expect_refused(with(measure, {"--timeout", "0"}), {"--timeout"});
  expect_refused(with(measure, {"--samples", "0"}), {"--samples"});
  expect_refused(with(measure, {"--samples", "100000"}), {"--samples"});

  const std::vector<std::string> space = {"space", "--workload", "dense:8,8,8"};
  expect_refused(with(space, {"--max-texture-size", "0"}), {"--max-texture-size"});
  expect_refused(with(space, {"--max-draw-buffers", "-1"}), {"--max-draw-buffers"});
  expect_refused(with(space, {"--max-invocations", "0"}), {"--max-invocations"});
  expect_refused(with(space, {"--max-threads", "0"}), {"--max-threads"});
  expect_refused(with(space, {"--max-varyings", "0"}), {"--max-varyings"});
  expect_refused(with(space, {"--max-feedback-components", "0"}), {"--max-feedback-components"});

  const std::vector<std::string> artifact = {"artifact",    "--db",     db,         "--workload",
                                             "dense:8,8,8", "--target", "gles-frag"};
  expect_refused(with(artifact, {"--rank", "0"}), {"--rank"});
  expect_refused(with(artifact, {"--config-index", "-2"}), {"--config-index"});
  expect_refused(with(artifact, {"--samples", "0"}), {"--samples"});
  expect_refused({"farm", "--tabs", "0"}, {"--tabs"});
  expect_refused({"--log-level", "loud", "space", "--workload", "dense:8,8,8"}, {"--log-level"});
  EXPECT_FALSE(fs::exists(db)) << "a refused command created a records file";
}

// ---- records ------------------------------------------------------------------------------

TEST_F(CliInputTest, ARefusedLogImportLeavesNoNewDatabaseAndAnExistingOneAsItWas) {
  const std::string log = write_file(".log", "# a comment line\nnot json\n");
  // Into a path that does not exist: refused, and no empty database left behind.
  const std::string fresh = temp_path("_fresh.db");
  expect_refused({"log", "import", "--db", fresh, "--in", log}, {"line 2", "not JSON"});
  EXPECT_FALSE(fs::exists(fresh)) << "a refused import created " << fresh;
  EXPECT_FALSE(fs::exists(fresh + "-wal"));
  // Into a database that holds a job: refused, and the job and its trial are still there.
  const std::string db = temp_path(".db");
  const Workload dense = Workload::dense(1, 8, 8, "d8");
  {
    RecordStore store(db);
    const int64_t job = store.open_job(dense, Target::kGlesFrag, "gles:test", "d8", "random");
    const Task task = Task::create(dense, Target::kGlesFrag);
    TrialRecord trial;
    const ConfigEntity entity = task.default_config();
    trial.config_index = entity.index();
    trial.config_json = bj::serialize(entity.to_json());
    trial.result.costs = {1e-3};
    ASSERT_EQ(store.add_trials(job, {trial}), 1);
  }
  expect_refused({"log", "import", "--db", db, "--in", log}, {"line 2"});
  ASSERT_TRUE(fs::exists(db));
  RecordStore store(db);
  const auto jobs = store.jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(store.trials(jobs[0].id).size(), 1u);
  // An input file that cannot be read is refused before the database is opened.
  const std::string other = temp_path("_other.db");
  expect_refused({"log", "import", "--db", other, "--in", temp_path("_missing.log")},
                 {"cannot read"});
  EXPECT_FALSE(fs::exists(other));
}

// ---- out of memory ------------------------------------------------------------------------

TEST_F(CliInputTest, OutOfMemoryEndsAsOneErrorLineAndStatusOne) {
  if (WEBTUNE_SANITIZED) GTEST_SKIP() << "needs an address-space limit, which sanitizers forbid";
  // A workload within bounds whose reference inputs (a 1 GiB data tensor) do not fit a 512 MiB
  // address space: `webtune artifact` computes reference samples for it.
  const std::string db = temp_path(".db");
  const Workload big = Workload::conv2d(1, 16384, 128, 128, 1, 1, 1, 0, "big");
  ASSERT_EQ(big.data_size(), int64_t{1} << 28);
  {
    // Textures as large as the data: the default config is valid, and gets built.
    DeviceLimits limits;
    limits.max_texture_size = 1 << 20;
    RecordStore store(db);
    store.upsert_device("gles:test", bj::serialize(bj::object{{"limits", limits.to_json()}}));
    const int64_t job = store.open_job(big, Target::kGlesFrag, "gles:test", "big", "random");
    const Task task = Task::create(big, Target::kGlesFrag, limits);
    TrialRecord trial;
    const ConfigEntity entity = task.default_config();
    trial.config_index = entity.index();
    trial.config_json = bj::serialize(entity.to_json());
    trial.result.costs = {1e-3};
    ASSERT_EQ(store.add_trials(job, {trial}), 1);
  }
  const WebtuneRun run = run_webtune(
      {"artifact", "--db", db, "--workload", "big", "--target", "gles-frag"}, rlim_t{512} << 20);
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 1) << run.describe();
  EXPECT_NE(run.err.find("out of memory"), std::string::npos) << run.describe();
  EXPECT_EQ(run.out, "") << run.describe();
  // One line: the error, nothing else.
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.describe();
}

}  // namespace
}  // namespace webtune
