/// \file records_test.cpp
/// The SQLite record store on real database files: round trips, resume, no duplicate configs,
/// best/filters, crash safety, schema versioning, and the AutoTVM log export/import.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "codegen/task.hpp"
#include "support/record_trials.hpp"
#include "support/run_webtune.hpp"
#include "tuner/autotvm_log.hpp"
#include "tuner/records.hpp"

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using testing_support::conv_c2;
using testing_support::dense_m;
using testing_support::entity_json;
using testing_support::error_trial;
using testing_support::ok_trial;

const std::string kDevice = "gles:llvmpipe";

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// An entity as ConfigEntity::to_json writes it; the split factors depend on the index so that
/// every config differs.
/// Every field but the ids (which the store assigns).
void expect_same_trial(const TrialRecord& a, const TrialRecord& b) {
  SCOPED_TRACE("config " + std::to_string(a.config_index));
  EXPECT_EQ(a.config_index, b.config_index);
  EXPECT_EQ(a.config_json, b.config_json);
  EXPECT_EQ(a.result.error, b.result.error);
  EXPECT_EQ(a.result.message, b.result.message);
  EXPECT_EQ(a.result.costs, b.result.costs);
  EXPECT_EQ(a.result.all_cost, b.result.all_cost);
  EXPECT_EQ(a.result.timestamp, b.result.timestamp);
  EXPECT_EQ(a.gflops, b.gflops);
  EXPECT_EQ(a.agent, b.agent);
}

/// `t` with its config replaced by the `nth` valid entity of `workload` on `target`: what the
/// import (which checks every config against its template's space) accepts.
TrialRecord in_space(TrialRecord t, const Workload& workload, Target target, size_t nth) {
  const Task task = Task::create(workload, target);
  const ConfigEntity entity = task.space->get(task.space->valid_indices().at(nth));
  t.config_index = entity.index();
  t.config_json = bj::serialize(entity.to_json());
  return t;
}

Workload depthwise_d1() {
  return Workload::depthwise_conv2d(1, 32, 28, 28, 3, 2, 1, "D1");
}

/// Runs one SQL statement on its own connection and returns the first column of the first row.
std::string query_text(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::string out;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    out = text ? text : "";
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

class RecordsTest : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    path_ = testing::TempDir() + "webtune_records_" + info->name() + "_" +
            std::to_string(getpid()) + ".db";
    remove_files();
  }
  void TearDown() override { remove_files(); }
  void remove_files() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }

  std::string path_;
};

TEST_F(RecordsTest, CreatesSchemaInWalModeWithVersion) {
  { RecordStore store(path_); }
  EXPECT_EQ(query_text(path_, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_text(path_, "PRAGMA user_version"), "5");
  for (const char* table :
       {"workloads", "targets", "devices", "agents", "tuning_jobs", "trials", "verifications",
        "model_runs", "model_run_jobs", "model_estimates", "model_measurements"}) {
    EXPECT_EQ(query_text(path_, std::string("SELECT count(*) FROM sqlite_master WHERE type = "
                                            "'table' AND name = '") +
                                    table + "'"),
              "1")
        << table;
  }
  // Reopening an up-to-date file leaves it alone.
  { RecordStore store(path_); }
  EXPECT_EQ(query_text(path_, "PRAGMA user_version"), "5");
}

TEST_F(RecordsTest, RefusesNewerSchemaVersion) {
  { RecordStore store(path_); }
  query_text(path_, "PRAGMA user_version = 99");
  try {
    RecordStore store(path_);
    FAIL() << "opened a file of schema version 99";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

TEST_F(RecordsTest, OpeningAnUnwritablePathNamesIt) {
  const std::string bad = testing::TempDir() + "no_such_dir_webtune/x.db";
  try {
    RecordStore store(bad);
    FAIL() << "opened " << bad;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(RecordsTest, InMemoryWorks) {
  RecordStore store(":memory:");
  const int64_t job = store.open_job(dense_m(), Target::kGlesCompute, kDevice);
  EXPECT_EQ(store.add_trials(job, {ok_trial(0, {1e-3})}), 1);
  EXPECT_EQ(store.trials(job).size(), 1u);
}

TEST_F(RecordsTest, RoundTripsEveryField) {
  const double before = now_s();
  RecordStore store(path_);
  const Workload w = conv_c2();
  const int64_t job =
      store.open_job(w, Target::kGlesFrag, kDevice, "C2", "xgb", R"({"n_trial":100})");
  const std::vector<TrialRecord> in{
      ok_trial(7, {1.5e-3, 1.25e-3, 1.75e-3}),
      error_trial(3, MeasureErrorNo::kCompileDevice, "0:12: 'foo' : undeclared identifier"),
  };
  EXPECT_EQ(store.add_trials(job, in), 2);

  const std::vector<TrialRecord> out = store.trials(job);
  ASSERT_EQ(out.size(), 2u);
  const double mean = (1.5e-3 + 1.25e-3 + 1.75e-3) / 3;
  TrialRecord expected_ok = in[0];
  expected_ok.gflops = w.flops() / mean / 1e9;
  TrialRecord expected_err = in[1];
  expected_err.gflops = 0;
  expect_same_trial(out[0], expected_ok);
  expect_same_trial(out[1], expected_err);
  EXPECT_DOUBLE_EQ(out[0].gflops, in[0].result.gflops(w.flops()));
  EXPECT_TRUE(out[1].result.costs.empty());
  EXPECT_EQ(out[0].job_id, job);
  EXPECT_EQ(out[1].job_id, job);
  EXPECT_LT(out[0].id, out[1].id);  // insertion order, not config order

  const std::optional<TuningJobInfo> info = store.job(job);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->id, job);
  EXPECT_EQ(info->workload.key(), w.key());
  EXPECT_EQ(info->workload.name, "C2");
  EXPECT_EQ(info->workload.op, OpKind::kConv2d);
  EXPECT_EQ(info->workload.out_channels, 64);
  EXPECT_EQ(info->target, Target::kGlesFrag);
  EXPECT_EQ(info->device_key, kDevice);
  EXPECT_EQ(info->task_name, "C2");
  EXPECT_EQ(info->tuner, "xgb");
  EXPECT_EQ(info->status, "running");
  EXPECT_EQ(info->trials, 2);
  EXPECT_EQ(info->errors, 1);
  EXPECT_DOUBLE_EQ(info->best_gflops, expected_ok.gflops);
  EXPECT_GE(info->created, before - 1);
  EXPECT_LE(info->created, info->updated);
  EXPECT_LE(info->updated, now_s() + 1);
  EXPECT_EQ(query_text(path_, "SELECT options_json FROM tuning_jobs"), R"({"n_trial":100})");

  EXPECT_FALSE(store.job(job + 100));
  ASSERT_EQ(store.jobs().size(), 1u);
  EXPECT_EQ(store.jobs()[0].id, job);
}

TEST_F(RecordsTest, TrialsLimitAndOffset) {
  RecordStore store(path_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  std::vector<TrialRecord> batch;
  for (int64_t i = 0; i < 10; ++i) batch.push_back(ok_trial(100 - i, {1e-3}));
  ASSERT_EQ(store.add_trials(job, batch), 10);
  const std::vector<TrialRecord> page = store.trials(job, 3, 4);
  ASSERT_EQ(page.size(), 3u);
  EXPECT_EQ(page[0].config_index, 96);
  EXPECT_EQ(page[2].config_index, 94);
  EXPECT_EQ(store.trials(job, -1, 8).size(), 2u);
}

TEST_F(RecordsTest, ErrorCountsAgentsAndTrialNumbers) {
  RecordStore store(path_);
  store.upsert_device(kDevice, R"({"renderer":"llvmpipe"})");
  const int64_t a = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  const int64_t b = store.open_job(conv_c2(), Target::kGlesFrag, kDevice);
  ASSERT_EQ(
      store.add_trials(a, {ok_trial(1, {1e-3}), error_trial(2, MeasureErrorNo::kWrongAnswer, "x"),
                           ok_trial(3, {2e-3})}),
      3);
  ASSERT_EQ(store.add_trials(b, {error_trial(1, MeasureErrorNo::kCompileDevice, "y")}), 1);
  using Counts = std::vector<std::pair<MeasureErrorNo, int64_t>>;
  EXPECT_EQ(store.error_counts(a),
            (Counts{{MeasureErrorNo::kNoError, 2}, {MeasureErrorNo::kWrongAnswer, 1}}));
  EXPECT_EQ(store.error_counts(), (Counts{{MeasureErrorNo::kNoError, 2},
                                          {MeasureErrorNo::kCompileDevice, 1},
                                          {MeasureErrorNo::kWrongAnswer, 1}}));
  EXPECT_TRUE(store.error_counts(99).empty());

  const std::vector<AgentRecord> agents = store.agents();
  ASSERT_EQ(agents.size(), 2u);
  EXPECT_EQ(agents[0].name, "agent-1");
  EXPECT_EQ(agents[0].trials, 2);
  EXPECT_EQ(agents[0].errors, 0);
  EXPECT_EQ(agents[1].name, "agent-2");
  EXPECT_EQ(agents[1].trials, 2);
  EXPECT_EQ(agents[1].errors, 2);
  EXPECT_EQ(agents[1].device_key, kDevice);
  EXPECT_EQ(agents[1].device_info_json, R"({"renderer":"llvmpipe"})");
  EXPECT_GT(agents[1].last_seen, 1.7e9);

  const std::vector<TrialRecord> trials = store.trials(a);
  for (size_t i = 0; i < trials.size(); ++i)
    EXPECT_EQ(store.trial_number(a, trials[i].id), static_cast<int64_t>(i + 1));
  EXPECT_EQ(store.trial_number(b, trials[0].id), 0);  // a trial of another job
}

TEST_F(RecordsTest, OpenJobTwiceResumes) {
  int64_t job = 0;
  {
    RecordStore store(path_);
    job = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb", R"({"a":1})");
    ASSERT_EQ(store.add_trials(job, {ok_trial(0, {1e-3}), ok_trial(1, {2e-3}),
                                     error_trial(2, MeasureErrorNo::kRunTimeout, "hang")}),
              3);
    store.set_status(job, "stopped");
  }
  RecordStore store(path_);
  // Same key, no name: the job of the first session, its values kept.
  Workload unnamed = conv_c2();
  unnamed.name.clear();
  EXPECT_EQ(store.open_job(unnamed, Target::kGlesFrag, kDevice), job);
  const std::optional<TuningJobInfo> info = store.job(job);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, "running");
  EXPECT_EQ(info->task_name, "C2");
  EXPECT_EQ(info->tuner, "xgb");
  EXPECT_EQ(query_text(path_, "SELECT options_json FROM tuning_jobs"), R"({"a":1})");
  EXPECT_EQ(info->trials, 3);
  EXPECT_EQ(info->errors, 1);

  const std::vector<TrialRecord> old = store.trials(job);
  ASSERT_EQ(old.size(), 3u);
  EXPECT_EQ(old[0].config_index, 0);
  EXPECT_EQ(old[2].result.error, MeasureErrorNo::kRunTimeout);

  // Resuming goes on: config 2 was measured already, 3 and 4 are new.
  EXPECT_EQ(store.add_trials(job, {ok_trial(2, {1e-4}), ok_trial(3, {1e-3}), ok_trial(4, {1e-3})}),
            2);
  EXPECT_EQ(store.trials(job).size(), 5u);
  // Reopening with new values updates them.
  EXPECT_EQ(store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2b", "random", R"({"b":2})"),
            job);
  EXPECT_EQ(store.job(job)->tuner, "random");
  EXPECT_EQ(store.job(job)->task_name, "C2b");
  EXPECT_EQ(query_text(path_, "SELECT options_json FROM tuning_jobs"), R"({"b":2})");

  // Another device or target is another job.
  const int64_t other = store.open_job(conv_c2(), Target::kGlesFrag, "gles:other");
  const int64_t compute = store.open_job(conv_c2(), Target::kGlesCompute, kDevice);
  EXPECT_NE(other, job);
  EXPECT_NE(compute, job);
  EXPECT_NE(compute, other);
  EXPECT_EQ(store.jobs().size(), 3u);
  EXPECT_TRUE(store.trials(other).empty());
}

TEST_F(RecordsTest, ConfigIndexStoredOnce) {
  RecordStore store(path_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  // A duplicate inside one batch: the first wins.
  EXPECT_EQ(store.add_trials(job, {ok_trial(5, {1e-3}), ok_trial(5, {9e-3}), ok_trial(6, {2e-3})}),
            2);
  EXPECT_EQ(store.add_trials(job, {ok_trial(5, {1e-6})}), 0);
  EXPECT_EQ(store.add_trials(job, {}), 0);
  const std::vector<TrialRecord> trials = store.trials(job);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].config_index, 5);
  EXPECT_EQ(trials[0].result.costs, std::vector<double>{1e-3});
  EXPECT_EQ(trials[1].config_index, 6);
  EXPECT_EQ(query_text(path_, "SELECT count(*) FROM trials WHERE config_index = 5"), "1");
}

TEST_F(RecordsTest, BadBatchStoresNothing) {
  RecordStore store(path_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  EXPECT_THROW(store.add_trials(job + 1, {ok_trial(0, {1e-3})}), std::runtime_error);
  TrialRecord bad = ok_trial(1, {1e-3});
  bad.config_json = "{not json";
  EXPECT_THROW(store.add_trials(job, {ok_trial(0, {1e-3}), bad}), std::invalid_argument);
  TrialRecord wrong_index = ok_trial(2, {1e-3});
  wrong_index.config_index = 3;
  EXPECT_THROW(store.add_trials(job, {wrong_index}), std::invalid_argument);
  // The good trial before the bad one was rolled back with it.
  EXPECT_TRUE(store.trials(job).empty());
  EXPECT_EQ(store.add_trials(job, {ok_trial(0, {1e-3})}), 1);
  EXPECT_THROW(store.set_status(job + 1, "done"), std::runtime_error);
  EXPECT_THROW(store.open_job(dense_m(), Target::kGlesFrag, kDevice, "", "", "{bad"),
               std::invalid_argument);
  EXPECT_THROW(store.upsert_device(kDevice, "nope"), std::invalid_argument);
}

TEST_F(RecordsTest, UpsertDeviceLatestWins) {
  RecordStore store(path_);
  store.upsert_device(kDevice, R"({"renderer":"llvmpipe","v":1})");
  store.upsert_device(kDevice, R"({"renderer":"llvmpipe","v":2})");
  EXPECT_EQ(query_text(path_, "SELECT count(*) FROM devices"), "1");
  EXPECT_EQ(query_text(path_, "SELECT info_json FROM devices"), R"({"renderer":"llvmpipe","v":2})");
  // A job on a known device reuses its row and keeps its info.
  store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  EXPECT_EQ(query_text(path_, "SELECT count(*) FROM devices"), "1");
  EXPECT_EQ(query_text(path_, "SELECT info_json FROM devices"), R"({"renderer":"llvmpipe","v":2})");
}

TEST_F(RecordsTest, BestPicksHighestSuccessfulGflops) {
  RecordStore store(path_);
  const Workload w = conv_c2();
  const int64_t job = store.open_job(w, Target::kGlesFrag, kDevice, "C2");
  // The failed trial claims the smallest cost; it must not win.
  TrialRecord fast_but_wrong = error_trial(1, MeasureErrorNo::kWrongAnswer, "mismatch");
  fast_but_wrong.result.costs = {1e-9};
  store.add_trials(job, {ok_trial(0, {2e-3}), fast_but_wrong, ok_trial(2, {1e-3}),
                         ok_trial(3, {1e-3}), ok_trial(4, {3e-3})});
  const int64_t failing = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  store.add_trials(failing, {error_trial(0, MeasureErrorNo::kCompileDevice, "x")});

  const std::vector<BestRecord> best = store.best();
  ASSERT_EQ(best.size(), 1u);  // the job without a success is left out
  EXPECT_EQ(best[0].job.id, job);
  EXPECT_EQ(best[0].trial.config_index, 2);  // ties with 3: the earlier one
  EXPECT_DOUBLE_EQ(best[0].trial.gflops, w.flops() / 1e-3 / 1e9);
  EXPECT_DOUBLE_EQ(best[0].job.best_gflops, best[0].trial.gflops);
  EXPECT_EQ(best[0].trial.config_json, entity_json(2));
  EXPECT_EQ(store.job(job)->errors, 1);
  EXPECT_EQ(store.job(failing)->best_gflops, 0);
}

TEST_F(RecordsTest, FiltersAndRelatedTrials) {
  RecordStore store(path_);
  const int64_t c2 = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
  const int64_t c2_other = store.open_job(conv_c2(), Target::kGlesFrag, "gles:other", "C2");
  const int64_t c2_compute = store.open_job(conv_c2(), Target::kGlesCompute, kDevice, "C2");
  const int64_t d1 = store.open_job(depthwise_d1(), Target::kGlesFrag, kDevice, "D1");
  const int64_t m1 = store.open_job(dense_m(), Target::kGlesCompute, kDevice, "M1");
  for (int64_t job : {c2, c2_other, c2_compute, d1, m1})
    store.add_trials(job, {ok_trial(0, {1e-3}), error_trial(1, MeasureErrorNo::kUnknown, "?")});

  auto ids = [](const std::vector<BestRecord>& best) {
    std::vector<int64_t> out;
    for (const BestRecord& b : best) out.push_back(b.job.id);
    return out;
  };
  EXPECT_EQ(ids(store.best()), (std::vector<int64_t>{c2, c2_other, c2_compute, d1, m1}));
  EXPECT_EQ(ids(store.best("dense")), (std::vector<int64_t>{m1}));
  EXPECT_EQ(ids(store.best("depthwise")), (std::vector<int64_t>{d1}));
  // Substring of the key: depthwise_conv2d_... contains conv2d too.
  EXPECT_EQ(ids(store.best("conv2d")), (std::vector<int64_t>{c2, c2_other, c2_compute, d1}));
  EXPECT_EQ(ids(store.best("C2")), (std::vector<int64_t>{c2, c2_other, c2_compute}));  // task name
  EXPECT_EQ(ids(store.best("", "gles-compute")), (std::vector<int64_t>{c2_compute, m1}));
  EXPECT_EQ(ids(store.best("C2", "gles-frag")), (std::vector<int64_t>{c2, c2_other}));
  EXPECT_TRUE(store.best("nothing").empty());
  EXPECT_TRUE(store.best("", "webgpu").empty());
  EXPECT_TRUE(store.best("%").empty());  // no LIKE wildcards

  const auto related = store.related_trials(OpKind::kConv2d, Target::kGlesFrag, c2);
  ASSERT_EQ(related.size(), 1u);
  EXPECT_EQ(related[0].first.id, c2_other);
  ASSERT_EQ(related[0].second.size(), 2u);  // failed trials come along
  EXPECT_EQ(related[0].second[1].result.error, MeasureErrorNo::kUnknown);
  EXPECT_EQ(store.related_trials(OpKind::kDense, Target::kGlesCompute, -1).size(), 1u);
  EXPECT_TRUE(store.related_trials(OpKind::kDense, Target::kGlesCompute, m1).empty());

  // Exports follow the same filters.
  std::ostringstream out;
  EXPECT_EQ(export_autotvm(store, out, "C2", "gles-frag"), 4);
}

TEST_F(RecordsTest, ClosingWithoutStatusChangeKeepsBatches) {
  int64_t job = 0;
  {
    RecordStore store(path_);
    job = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb");
    store.add_trials(job, {ok_trial(0, {1e-3}), ok_trial(1, {1e-3})});
  }
  RecordStore store(path_);
  EXPECT_EQ(store.job(job)->status, "running");
  EXPECT_EQ(store.trials(job).size(), 2u);
}

TEST_F(RecordsTest, CrashKeepsCommittedBatches) {
  // The child commits one batch, leaves a second write uncommitted and dies without closing
  // anything, as a killed tuner would.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      auto* store = new RecordStore(path_);  // never destroyed
      const int64_t job = store->open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb");
      if (store->add_trials(job, {ok_trial(0, {1e-3}), ok_trial(1, {2e-3})}) != 2) std::_Exit(2);
      sqlite3* raw = nullptr;
      if (sqlite3_open(path_.c_str(), &raw) != SQLITE_OK) std::_Exit(3);
      const char* sql =
          "BEGIN IMMEDIATE; INSERT INTO trials(job_id, config_index, entity_json, error_no, "
          "costs_json, gflops, all_cost, timestamp) VALUES(1, 99, '{}', 0, '[]', 0, 0, 0);";
      if (sqlite3_exec(raw, sql, nullptr, nullptr, nullptr) != SQLITE_OK) std::_Exit(4);
      std::_Exit(0);
    } catch (...) {
      std::_Exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  // Nobody checkpointed: the committed batch lives in the log only.
  EXPECT_TRUE(fs::exists(path_ + "-wal"));

  RecordStore store(path_);
  const std::vector<TuningJobInfo> jobs = store.jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].status, "running");
  const std::vector<TrialRecord> trials = store.trials(jobs[0].id);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].config_index, 0);
  EXPECT_EQ(trials[1].config_index, 1);
  EXPECT_EQ(trials[1].result.costs, std::vector<double>{2e-3});
  // Resuming after the crash: config 1 is known, config 2 is not.
  EXPECT_EQ(store.open_job(conv_c2(), Target::kGlesFrag, kDevice), jobs[0].id);
  EXPECT_EQ(store.add_trials(jobs[0].id, {ok_trial(1, {1e-3}), ok_trial(2, {1e-3})}), 1);
}

TEST_F(RecordsTest, ExportWritesAutoTvmFields) {
  RecordStore store(path_);
  const int64_t conv = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb");
  store.add_trials(conv, {ok_trial(12, {1.5e-3, 2.5e-3}),
                          error_trial(13, MeasureErrorNo::kRuntimeDevice, "lost context")});
  const int64_t dw = store.open_job(depthwise_d1(), Target::kGlesCompute, kDevice, "D1");
  store.add_trials(dw, {ok_trial(0, {1e-3})});
  const int64_t dense = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
  store.add_trials(dense, {ok_trial(1, {1e-3})});

  std::ostringstream out;
  ASSERT_EQ(export_autotvm(store, out), 4);
  std::vector<bj::object> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(bj::parse(line).as_object());
  ASSERT_EQ(lines.size(), 4u);

  for (const bj::object& o : lines) {
    std::set<std::string> keys;
    for (const auto& kv : o) keys.insert(std::string(kv.key()));
    EXPECT_EQ(keys, (std::set<std::string>{"input", "config", "result", "version", "tvm_version",
                                           "webtune"}));
    EXPECT_EQ(o.at("version").to_number<double>(), 0.2);
    EXPECT_EQ(o.at("tvm_version").as_string(), "0.9.dev0");
    EXPECT_EQ(o.at("input").as_array().size(), 4u);
    EXPECT_EQ(o.at("input").as_array()[3], bj::object{});
    EXPECT_TRUE(o.at("config").as_object().at("code_hash").is_null());
  }

  // Written as TVM's json.dumps writes them: ", " and ": ", Python's float repr.
  const std::string text = out.str();
  EXPECT_EQ(text.rfind(R"({"input": ["opengl -keys=gles-frag -model=gles:llvmpipe", )"
                       R"("conv2d_nchw.gles_frag", [["TENSOR", [1, 64, 56, 56], "float32"], )",
                       0),
            0u)
      << text;
  EXPECT_NE(text.find(R"("config": {"index": 12, "code_hash": null, "entity": )"
                      R"([["tile_y", "sp", [-1, 13, 2]], ["unroll", "ot", 4], )"
                      R"(["layout", "ot", "2d"]]}, "result": [[0.0015, 0.0025], 0, )"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("result": [[1000000000.0], 4, 0.5, 1700000113.5], "version": 0.2, )"
                      R"("tvm_version": "0.9.dev0", "webtune": {"task": "C2", )"),
            std::string::npos)
      << text;

  const bj::object& ok = lines[0];
  const bj::array& input = ok.at("input").as_array();
  EXPECT_EQ(input[0].as_string(), "opengl -keys=gles-frag -model=gles:llvmpipe");
  EXPECT_EQ(input[1].as_string(), "conv2d_nchw.gles_frag");
  EXPECT_EQ(input[2], bj::parse(R"([["TENSOR",[1,64,56,56],"float32"],)"
                                R"(["TENSOR",[64,64,3,3],"float32"],[1,1],[1,1,1,1],[1,1],)"
                                R"("float32"])"));
  EXPECT_EQ(ok.at("config"), bj::parse(R"({"index":12,"code_hash":null,"entity":)"
                                       R"([["tile_y","sp",[-1,13,2]],["unroll","ot",4],)"
                                       R"(["layout","ot","2d"]]})"));
  const bj::array& result = ok.at("result").as_array();
  ASSERT_EQ(result.size(), 4u);
  EXPECT_EQ(result[0], (bj::array{1.5e-3, 2.5e-3}));
  EXPECT_EQ(result[1].to_number<int>(), 0);
  EXPECT_EQ(result[2].to_number<double>(), 0.25 + 0.012);
  EXPECT_EQ(result[3].to_number<double>(), 1700000000.125 + 12);
  const bj::object& extra = ok.at("webtune").as_object();
  EXPECT_EQ(extra.at("task").as_string(), "C2");
  EXPECT_EQ(extra.at("agent").as_string(), "agent-1");
  EXPECT_DOUBLE_EQ(extra.at("gflops").to_number<double>(), conv_c2().flops() / 2e-3 / 1e9);
  EXPECT_EQ(extra.at("entity"), bj::parse(entity_json(12)).as_object().at("entity"));

  const bj::array& failed = lines[1].at("result").as_array();
  EXPECT_EQ(failed[0], bj::array{1e9});  // AutoTVM's placeholder cost
  EXPECT_EQ(failed[1].to_number<int>(), 4);
  EXPECT_EQ(lines[1].at("webtune").as_object().at("message").as_string(), "lost context");

  const bj::array& dw_input = lines[2].at("input").as_array();
  EXPECT_EQ(dw_input[0].as_string(), "opengl -keys=gles-compute -model=gles:llvmpipe");
  EXPECT_EQ(dw_input[1].as_string(), "depthwise_conv2d_nchw.gles_compute");
  EXPECT_EQ(dw_input[2], bj::parse(R"([["TENSOR",[1,32,28,28],"float32"],)"
                                   R"(["TENSOR",[32,1,3,3],"float32"],[2,2],[1,1,1,1],[1,1],)"
                                   R"("float32"])"));

  const bj::array& dense_input = lines[3].at("input").as_array();
  EXPECT_EQ(dense_input[1].as_string(), "dense.gles_frag");
  EXPECT_EQ(dense_input[2], bj::parse(R"([["TENSOR",[64,256],"float32"],)"
                                      R"(["TENSOR",[128,256],"float32"],null,"float32"])"));
}

TEST_F(RecordsTest, ExportImportRoundTrip) {
  const std::string other_path = path_ + ".b.db";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(other_path + suffix);
  std::string log;
  std::vector<TuningJobInfo> source_jobs;
  std::vector<std::vector<TrialRecord>> source_trials;
  {
    RecordStore store(path_);
    const Target frag = Target::kGlesFrag, compute = Target::kGlesCompute;
    const int64_t a = store.open_job(conv_c2(), frag, kDevice, "C2", "xgb");
    store.add_trials(a, {in_space(ok_trial(3, {1.0 / 3, 2.0 / 7}), conv_c2(), frag, 3),
                         in_space(error_trial(4, MeasureErrorNo::kWrongAnswer, "out[3] = 1 != 2"),
                                  conv_c2(), frag, 4),
                         in_space(ok_trial(1, {1e-5}, ""), conv_c2(), frag, 1)});
    const int64_t b = store.open_job(depthwise_d1(), compute, "gles:other", "D1");
    store.add_trials(b, {in_space(error_trial(0, MeasureErrorNo::kInstantiation, "bad knob"),
                                  depthwise_d1(), compute, 0)});
    const int64_t c = store.open_job(dense_m(), frag, kDevice, "");
    store.add_trials(c, {in_space(ok_trial(9, {4e-4, 5e-4}), dense_m(), frag, 9)});
    std::ostringstream out;
    ASSERT_EQ(export_autotvm(store, out), 5);
    log = out.str();
    source_jobs = store.jobs();
    for (const TuningJobInfo& job : source_jobs) source_trials.push_back(store.trials(job.id));
  }

  RecordStore copy(other_path);
  std::istringstream in(log);
  EXPECT_EQ(import_autotvm(copy, in, ""), 5);
  const std::vector<TuningJobInfo> jobs = copy.jobs();
  ASSERT_EQ(jobs.size(), source_jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE(source_jobs[i].workload.key());
    EXPECT_EQ(jobs[i].workload.key(), source_jobs[i].workload.key());
    EXPECT_EQ(jobs[i].target, source_jobs[i].target);
    EXPECT_EQ(jobs[i].device_key, source_jobs[i].device_key);
    EXPECT_EQ(jobs[i].task_name, source_jobs[i].task_name);
    EXPECT_EQ(jobs[i].status, "done");
    EXPECT_EQ(jobs[i].trials, source_jobs[i].trials);
    EXPECT_EQ(jobs[i].errors, source_jobs[i].errors);
    EXPECT_EQ(jobs[i].best_gflops, source_jobs[i].best_gflops);
    const std::vector<TrialRecord> trials = copy.trials(jobs[i].id);
    ASSERT_EQ(trials.size(), source_trials[i].size());
    for (size_t t = 0; t < trials.size(); ++t) expect_same_trial(trials[t], source_trials[i][t]);
  }

  // Importing again adds nothing; into another device key it makes new jobs.
  std::istringstream again(log);
  EXPECT_EQ(import_autotvm(copy, again, ""), 0);
  std::istringstream elsewhere(log);
  EXPECT_EQ(import_autotvm(copy, elsewhere, "gles:third"), 5);
  EXPECT_EQ(copy.jobs().size(), 6u);
  EXPECT_EQ(copy.best("", "").size(), 4u);  // the depthwise jobs have no success

  // Exporting the copy gives the same lines for the same jobs.
  std::ostringstream out;
  export_autotvm(copy, out);
  EXPECT_EQ(out.str().substr(0, log.size()), log);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(other_path + suffix);
}

/// An entity as AutoTVM writes it: −1 for the outermost factor of every split.
std::string autotvm_entity_text(const ConfigEntity& entity) {
  bj::array items = entity.to_json().at("entity").as_array();
  for (bj::value& item : items)
    if (item.as_array()[1].as_string() == "sp") item.as_array()[2].as_array()[0] = -1;
  return bj::serialize(items);
}

TEST_F(RecordsTest, ImportsForeignAutoTvmLines) {
  RecordStore store(path_);
  // Lines another tool wrote for webtune's templates: TVM's dense weight is [N,K]; no
  // "webtune" object; -1 in the splits; stride as an int; a '#' comment as in TopHub's files.
  const Workload dense = Workload::dense(8, 16, 32);
  const Workload conv = Workload::conv2d(1, 3, 32, 32, 8, 5, 2, 2);
  const Task dense_task = Task::create(dense, Target::kGlesCompute);
  const Task conv_task = Task::create(conv, Target::kGlesCompute);
  const ConfigEntity dense_entity = dense_task.space->get(dense_task.space->valid_indices().at(5));
  const ConfigEntity conv_entity = conv_task.space->get(conv_task.space->valid_indices().at(0));
  ASSERT_NE(autotvm_entity_text(dense_entity).find("-1"), std::string::npos);
  std::istringstream in(
      "# pre-tuned parameters\n"
      R"({"input": ["opengl -keys=gles-compute,gpu", "dense.gles-compute", )"
      R"([["TENSOR", [8, 32], "float32"], ["TENSOR", [16, 32], "float32"], null, "float32"], {}],)"
      R"( "config": {"index": )" +
      std::to_string(dense_entity.index()) + R"(, "code_hash": null, "entity": )" +
      autotvm_entity_text(dense_entity) +
      R"(}, "result": [[0.001, 0.003], 0, 1.5, 1600000000.0], "version": 0.2,)"
      R"( "tvm_version": "0.8.0"})"
      "\n"
      R"({"input": ["opengl", "conv2d_nchw.gles-compute", )"
      R"([["TENSOR", [1, 3, 32, 32], "float32"], ["TENSOR", [8, 3, 5, 5], "float32"], 2, )"
      R"([2, 2], 1, "float32"], {}], "config": {"index": )" +
      std::to_string(conv_entity.index()) + R"(, "entity": )" + autotvm_entity_text(conv_entity) +
      R"(}, "result": [[1000000000.0], 7, 10, 1600000001]})"
      "\n");
  EXPECT_EQ(import_autotvm(store, in), 2);
  const std::vector<TuningJobInfo> jobs = store.jobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].workload.key(), dense.key());
  EXPECT_EQ(jobs[0].device_key, "imported");
  EXPECT_EQ(jobs[0].target, Target::kGlesCompute);
  const std::vector<TrialRecord> dense_trials = store.trials(jobs[0].id);
  ASSERT_EQ(dense_trials.size(), 1u);
  EXPECT_EQ(dense_trials[0].config_index, dense_entity.index());
  // Stored as the space's own entity: the -1 factors resolved.
  EXPECT_EQ(dense_trials[0].config_json, bj::serialize(dense_entity.to_json()));
  EXPECT_EQ(dense_trials[0].result.costs, (std::vector<double>{0.001, 0.003}));
  EXPECT_DOUBLE_EQ(dense_trials[0].gflops, 2.0 * 8 * 16 * 32 / 0.002 / 1e9);

  EXPECT_EQ(jobs[1].workload.key(), conv.key());
  EXPECT_EQ(jobs[1].target, Target::kGlesCompute);
  const std::vector<TrialRecord> conv_trials = store.trials(jobs[1].id);
  ASSERT_EQ(conv_trials.size(), 1u);
  EXPECT_EQ(conv_trials[0].config_json, bj::serialize(conv_entity.to_json()));
  EXPECT_EQ(conv_trials[0].result.error, MeasureErrorNo::kRunTimeout);
  EXPECT_TRUE(conv_trials[0].result.costs.empty());
  EXPECT_EQ(conv_trials[0].result.timestamp, 1600000001);
}

TEST_F(RecordsTest, MalformedImportNamesTheLineAndImportsNothing) {
  std::string good;
  {
    RecordStore source(":memory:");
    const int64_t job = source.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
    source.add_trials(job, {in_space(ok_trial(0, {1e-3}), dense_m(), Target::kGlesFrag, 0)});
    std::ostringstream out;
    export_autotvm(source, out);
    good = out.str();
  }
  RecordStore store(path_);
  auto expect_line = [&](const std::string& text, const std::string& line,
                         const std::string& reason) {
    std::istringstream in(text);
    try {
      import_autotvm(store, in);
      ADD_FAILURE() << "imported " << text;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("line " + line + ":"), std::string::npos) << what;
      EXPECT_NE(what.find(reason), std::string::npos) << what;
    }
  };
  expect_line(good + "\n{not json\n", "3", "not JSON");  // the blank line 2 still counts
  expect_line(good + R"({"input": [], "config": {}, "result": []})", "2", "input");
  std::string no_result = good;
  no_result.replace(no_result.find("\"result\""), 8, "\"resolt\"");
  expect_line(good + no_result, "2", "result");
  std::string bad_error = good;
  bad_error.replace(bad_error.find("], 0, "), 6, "], 42, ");
  expect_line(bad_error, "1", "42");
  std::string bad_target = good;
  bad_target.replace(bad_target.find("dense.gles_frag"), 15, "dense.cuda");
  bad_target.replace(bad_target.find("-keys=gles-frag"), 15, "-keys=cuda");
  expect_line(bad_target, "1", "cuda");
  std::string bad_op = good;
  bad_op.replace(bad_op.find("dense.gles_frag"), 15, "softmax.gles_frag");
  expect_line(bad_op, "1", "softmax");
  EXPECT_TRUE(store.jobs().empty());

  std::istringstream in(good);
  EXPECT_EQ(import_autotvm(store, in), 1);
}

// Two lines of TopHub's real AutoTVM logs (tlc-pack/tophub f05376ec, ../shared/tophub):
// opencl_v0.04.log line 3, a CUDA conv2d, and mali_v0.06.log line 3, a Mali dense.
const std::string kTopHubCuda =
    R"({"input": ["opencl -model=1080ti", "conv2d_nchw.cuda", [["TENSOR", [1, 2048, 8, 8], )"
    R"("float32"], ["TENSOR", [192, 2048, 1, 1], "float32"], [1, 1], [0, 0, 0, 0], [1, 1], )"
    R"("float32"], {}], "config": {"index": 599486, "code_hash": null, "entity": [["tile_f", )"
    R"("sp", [12, 1, 16, 1]], ["tile_y", "sp", [4, 1, 2, 1]], ["tile_x", "sp", [1, 1, 8, 1]], )"
    R"(["tile_rc", "sp", [128, 16]], ["tile_rx", "sp", [1, 1]], ["tile_ry", "sp", [1, 1]], )"
    R"(["auto_unroll_max_step", "ot", 0], ["unroll_explicit", "ot", 0]]}, "result": )"
    R"([[3.342781593590029e-05], 0, 2.1750707626342773, 1535942689.128338], "version": 0.2, )"
    R"("tvm_version": "0.7.dev0"})";
const std::string kTopHubMali =
    R"({"input": ["opencl -model=rk3399 -device=mali", "dense.mali", [["TENSOR", [1, 1024], )"
    R"("float32"], ["TENSOR", [1000, 1024], "float32"], ["TENSOR", [1000], "float32"], null], )"
    R"({}], "config": {"index": 407, "code_hash": null, "entity": [["tile_y", "sp", [1, 1, 1]], )"
    R"(["tile_x", "sp", [40, 25, 1]], ["c_unroll", "sp", [64, 16]]]}, "result": )"
    R"([[0.0008410332727272727], 0, 0.9504795074462891, 1538219132.0322816], "version": 0.2, )"
    R"("tvm_version": "0.7.dev0"})";

/// `text` with its first `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

/// Imports `log` into `store`, expecting a refusal whose message holds each of `expected`.
void expect_refused(RecordStore& store, const std::string& log,
                    const std::vector<std::string>& expected) {
  std::istringstream in(log);
  try {
    const int64_t n = import_autotvm(store, in);
    ADD_FAILURE() << "imported " << n << " trials of\n" << log;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    for (const std::string& text : expected)
      EXPECT_NE(what.find(text), std::string::npos) << "'" << text << "' not in: " << what;
  }
}

TEST_F(RecordsTest, ImportRefusesForeignTargetsKnobsAndValues) {
  RecordStore store(path_);
  // As TopHub wrote them: targets that are not webtune's.
  expect_refused(store, "# TopHub\n" + kTopHubCuda + "\n",
                 {"line 2:", "opencl -model=1080ti", "conv2d_nchw.cuda", "not one of webtune's"});
  expect_refused(store, kTopHubMali + "\n", {"line 1:", "dense.mali", "not one of webtune's"});
  // -keys= and the task name must agree.
  expect_refused(store, replaced(kTopHubCuda, "opencl -model=1080ti", "opengl -keys=gles-frag"),
                 {"line 1:", "-keys= names gles-frag", "'cuda'"});
  // Relabelled as webtune's: the CUDA knobs are not the template's (this was stored as a
  // gles-frag job, and `log best` reported tile_f).
  const std::string cuda_as_frag =
      replaced(replaced(kTopHubCuda, "opencl -model=1080ti", "opengl -keys=gles-frag"),
               "conv2d_nchw.cuda", "conv2d_nchw.gles-frag");
  expect_refused(store, cuda_as_frag,
                 {"line 1:", "gles-frag conv2d template", "unknown knob 'tile_f'"});
  const std::string mali_as_compute =
      replaced(replaced(kTopHubMali, "opencl -model=rk3399 -device=mali", "opengl"), "dense.mali",
               "dense.gles-compute");
  expect_refused(store, mali_as_compute, {"line 1:", "gles-compute dense template"});

  // A webtune line whose knob names are right but one value is not a candidate, or whose index
  // does not match its entity.
  std::string good;
  {
    RecordStore source(":memory:");
    const int64_t job = source.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
    source.add_trials(job, {in_space(ok_trial(0, {1e-3}), dense_m(), Target::kGlesFrag, 2)});
    std::ostringstream out;
    export_autotvm(source, out);
    good = out.str();
  }
  // unroll 3000 in both copies of the entity, AutoTVM's and webtune's.
  std::string bad_value = good;
  for (size_t at = 0; (at = bad_value.find(R"(["unroll", "ot", )", at)) != std::string::npos;) {
    const size_t value = at + 17, end = bad_value.find(']', value);
    bad_value.replace(value, end - value, "3000");
    at = value;
  }
  expect_refused(store, bad_value,
                 {"line 1:", "gles-frag dense template", "knob 'unroll' has no candidate 3000"});
  // An index that disagrees with its entity is what a log from before the space grew holds
  // (kVerbose splits renumber configs): the entity names the kernel, so the line imports under
  // the entity's current index instead of being refused.
  {
    RecordStore renumbered(":memory:");
    const std::string stale_index =
        replaced(good, R"("config": {"index": )", R"("config": {"index": 1)");
    EXPECT_EQ(import_autotvm(renumbered, *std::make_unique<std::istringstream>(stale_index)), 1);
    const std::vector<TrialRecord> trials = renumbered.trials(renumbered.jobs().at(0).id);
    ASSERT_EQ(trials.size(), 1u);
    const TrialRecord expected = in_space(ok_trial(0, {1e-3}), dense_m(), Target::kGlesFrag, 2);
    EXPECT_EQ(trials[0].config_index, expected.config_index);
    EXPECT_EQ(trials[0].config_json, expected.config_json);
  }
  // A good line before a bad one: nothing of the log is imported.
  expect_refused(store, good + cuda_as_frag + "\n", {"line 2:", "unknown knob 'tile_f'"});
  EXPECT_TRUE(store.jobs().empty());

  std::istringstream in(good);
  EXPECT_EQ(import_autotvm(store, in), 1);
}

TEST_F(RecordsTest, AnEndlessLineIsRefusedNotReadIntoMemory) {
  RecordStore store(path_);
  // 5 MiB without a newline, after a blank line: refused at line 2 from its length.
  expect_refused(store, "\n" + std::string(size_t{5} << 20, ' '),
                 {"line 2:", "longer than the limit of 4194304 bytes"});
  EXPECT_TRUE(store.jobs().empty());
}

TEST_F(RecordsTest, ASuccessfulTrialOfAConfigThatBreaksAConstraintIsRefused) {
  const Task task = Task::create(dense_m(), Target::kGlesFrag);
  int64_t broken = -1;
  for (int64_t i = 0; i < task.space->raw_size() && broken < 0; ++i)
    if (!task.space->satisfies_constraints(task.space->get(i))) broken = i;
  ASSERT_GE(broken, 0) << "every config of the space satisfies its constraints";
  std::string log;
  {
    RecordStore source(":memory:");
    const int64_t job = source.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
    TrialRecord fake = ok_trial(broken, {1e-3});
    fake.config_json = bj::serialize(task.space->get(broken).to_json());
    TrialRecord failed = error_trial(broken, MeasureErrorNo::kInstantiation, "not valid");
    failed.config_json = fake.config_json;
    source.add_trials(job, {fake});
    std::ostringstream out;
    export_autotvm(source, out);
    log = out.str();
    // The same config as a failed trial imports: failing is what such a config does.
    RecordStore other(":memory:");
    const int64_t job2 = other.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
    other.add_trials(job2, {failed});
    std::ostringstream out2;
    export_autotvm(other, out2);
    RecordStore store(":memory:");
    std::istringstream in(out2.str());
    EXPECT_EQ(import_autotvm(store, in), 1);
  }
  RecordStore store(path_);
  expect_refused(
      store, log,
      {"line 1:", "a successful trial of config " + std::to_string(broken), "breaks constraint"});
}

TEST_F(RecordsTest, AStoredWorkloadOutOfBoundsIsReportedWithItsJob) {
  {
    RecordStore store(path_);
    store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
  }
  // An edited (or hostile) records file: shapes past the workload bounds.
  query_text(path_, R"(UPDATE workloads SET json = '{"op":"dense","M":4294967296,"N":1,"K":1}')");
  RecordStore store(path_);
  try {
    store.jobs();
    ADD_FAILURE() << "a workload with M = 2^32 was read back";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("job 1 has an unusable workload"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("M = 4294967296"), std::string::npos) << e.what();
  }
}

// ---- the real binary: data on stdout, logs on stderr ----------------------------------------

using testing_support::read_file_text;
using testing_support::WebtuneRun;

/// Runs WEBTUNE_BINARY with `args`, its stdout into `out_path` (a temporary when empty).
WebtuneRun run_webtune(const std::vector<std::string>& args, std::string out_path = {}) {
  testing_support::RunOptions options;
  options.out_path = std::move(out_path);
  return testing_support::run_webtune(args, options);
}

TEST_F(RecordsTest, ExportThroughTheBinaryWritesOnlyTheLogToStdoutAndReimports) {
  // `webtune log export > f.log` once had spdlog's "exported N records" line appended to f.log
  // (the default logger wrote to stdout), and re-importing f.log failed at that line.
  const std::string copy_path = path_ + ".copy.db", log_path = path_ + ".log";
  const Target frag = Target::kGlesFrag, compute = Target::kGlesCompute;
  {
    RecordStore store(path_);
    const int64_t a = store.open_job(conv_c2(), frag, kDevice, "C2", "xgb");
    store.add_trials(a, {in_space(ok_trial(0, {1e-3, 2e-3}), conv_c2(), frag, 0),
                         in_space(error_trial(0, MeasureErrorNo::kWrongAnswer, "out[1] differs"),
                                  conv_c2(), frag, 1),
                         in_space(ok_trial(0, {5e-4}), conv_c2(), frag, 2)});
    const int64_t b = store.open_job(dense_m(), compute, kDevice, "M1", "random");
    store.add_trials(b, {in_space(ok_trial(0, {1e-4}), dense_m(), compute, 0)});
  }
  WebtuneRun run = run_webtune({"log", "export", "--db", path_, "--format", "autotvm"}, log_path);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string log = read_file_text(log_path);
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4) << log;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);)
    EXPECT_NO_THROW(bj::parse(line).as_object().at("input")) << line;
  EXPECT_NE(run.err.find("exported 4 AutoTVM records to stdout"), std::string::npos) << run.err;

  run = run_webtune({"log", "import", "--db", copy_path, "--in", log_path});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("imported 4 trials"), std::string::npos) << run.out;
  {
    RecordStore source(path_), copy(copy_path);
    const auto jobs = source.jobs(), copied = copy.jobs();
    ASSERT_EQ(copied.size(), jobs.size());
    for (size_t j = 0; j < jobs.size(); ++j) {
      EXPECT_EQ(copied[j].workload.key(), jobs[j].workload.key());
      EXPECT_EQ(copied[j].target, jobs[j].target);
      EXPECT_EQ(copied[j].task_name, jobs[j].task_name);
      EXPECT_EQ(copied[j].best_gflops, jobs[j].best_gflops);
      const auto a = source.trials(jobs[j].id), b = copy.trials(copied[j].id);
      ASSERT_EQ(b.size(), a.size());
      for (size_t t = 0; t < a.size(); ++t) expect_same_trial(b[t], a[t]);
    }
  }

  // The other readers print data only: no log line on stdout, whatever the log level.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--log-level", "trace", "log", "best", "--db", copy_path},
        std::vector<std::string>{"--log-level", "trace", "log", "list", "--db", copy_path},
        std::vector<std::string>{"--log-level", "trace", "log", "export", "--db", copy_path}}) {
    run = run_webtune(args);
    EXPECT_EQ(run.status, 0) << args[3] << ": " << run.err;
    EXPECT_EQ(run.out.find("] ["), std::string::npos) << args[3] << " stdout:\n" << run.out;
    EXPECT_NE(run.out.find(args[3] == "export" ? "conv2d_nchw.gles_frag" : "C2"), std::string::npos)
        << args[3] << " stdout:\n"
        << run.out;
  }
  for (const std::string& p : {copy_path, log_path})
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p + suffix);
}

TEST_F(RecordsTest, StoredConfigsOutsideTheirSpaceAreReportedNotUsed) {
  // Records whose best config the template's space does not hold (a CUDA entity stored by an
  // older import, or an edited file): `log best` and `artifact` say so instead of using it.
  {
    RecordStore store(path_);
    const int64_t bad = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb");
    TrialRecord cuda = ok_trial(599486, {1e-5});
    cuda.config_json =
        R"({"index":599486,"entity":[["tile_f","sp",[12,1,16,1]],["tile_rc","sp",[128,16]]]})";
    store.add_trials(bad, {in_space(ok_trial(0, {1e-3}), conv_c2(), Target::kGlesFrag, 0), cuda});
    const int64_t good = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1", "xgb");
    store.add_trials(good, {in_space(ok_trial(0, {1e-4}), dense_m(), Target::kGlesFrag, 3)});
  }
  WebtuneRun run = run_webtune({"log", "best", "--db", path_});
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("job 1 (C2"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("unknown knob 'tile_f'"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("1 job(s) hold a best config outside their template's space"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.out.find("tile_f"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("job 2  M1"), std::string::npos) << run.out;

  run = run_webtune({"artifact", "--db", path_, "--workload", "C2", "--target", "gles-frag"});
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("stored trial of config 599486 is unusable"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("unknown knob 'tile_f'"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
  // The job's second-best trial fits, and is used.
  run = run_webtune(
      {"artifact", "--db", path_, "--workload", "C2", "--target", "gles-frag", "--rank", "2"});
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("\"artifact\""), std::string::npos);
}

/// Runs SQL (several statements) on its own connection; fails the test on an error.
void exec_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << (message ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

TEST_F(RecordsTest, ProvenanceOfEachTrialRoundTrips) {
  RecordStore store(path_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
  TrialRecord a = ok_trial(0, {1e-3});
  a.agent_session = 17;
  a.attempt = 2;
  a.received = 1700000000.5;
  TrialRecord b = ok_trial(1, {2e-3});  // provenance unknown: stored as NULL, read back as 0
  ASSERT_EQ(store.add_trials(job, {a, b}), 2);
  const std::vector<TrialRecord> trials = store.trials(job);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].agent_session, 17u);
  EXPECT_EQ(trials[0].attempt, 2);
  EXPECT_DOUBLE_EQ(trials[0].received, 1700000000.5);
  EXPECT_EQ(trials[1].agent_session, 0u);
  EXPECT_EQ(trials[1].attempt, 0);
  EXPECT_EQ(trials[1].received, 0);
  EXPECT_EQ(query_text(path_, "SELECT count(*) FROM trials WHERE agent_session IS NULL"), "1");
  EXPECT_EQ(trials[0].verdict, "");
}

TEST_F(RecordsTest, MigratesVersion1FilesAndKeepsTheirTrials) {
  int64_t job = 0;
  {
    RecordStore store(path_);
    job = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
    store.add_trials(job, {ok_trial(0, {1e-3}), ok_trial(1, {2e-3})});
  }
  // Turn the file into what webtune wrote before version 2.
  exec_sql(path_,
           "DROP TABLE model_measurements; "
           "DROP TABLE model_estimates; DROP TABLE model_run_jobs; DROP TABLE model_runs; "
           "DROP TABLE verifications; ALTER TABLE trials DROP COLUMN agent_session; "
           "ALTER TABLE trials DROP COLUMN attempt; ALTER TABLE trials DROP COLUMN received; "
           "PRAGMA user_version = 1;");
  ASSERT_EQ(query_text(path_, "SELECT count(*) FROM sqlite_master WHERE name = 'verifications'"),
            "0");
  RecordStore store(path_);
  EXPECT_EQ(query_text(path_, "PRAGMA user_version"), "5");
  const std::vector<TrialRecord> trials = store.trials(job);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].result.costs, std::vector<double>{1e-3});
  EXPECT_EQ(trials[0].agent_session, 0u);
  EXPECT_EQ(trials[0].received, 0);
  // The migrated file takes the new data.
  VerificationRecord v;
  v.trial_id = trials[0].id;
  v.verdict = kVerified;
  v.agent = "agent-2";
  v.cost = 1.1e-3;
  v.ratio = 1.1;
  v.message = "ok";
  EXPECT_GT(store.add_verification(v), 0);
  ASSERT_EQ(store.best().size(), 1u);
  ASSERT_TRUE(store.best()[0].verification.has_value());
  EXPECT_EQ(store.best()[0].verification->verdict, "verified");
}

/// The bytes of a file (to prove a read-only open changed none of them).
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(RecordsTest, ReadOnlyStoresReadAnOldFileWithoutChangingIt) {
  int64_t job = 0;
  {
    RecordStore store(path_);
    job = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
    store.add_trials(job, {ok_trial(0, {1e-3}), ok_trial(1, {2e-3})});
  }
  // An older webtune's file, in rollback-journal mode (as a copy made with `cp` of a checkpointed
  // store may be): a read-write open would migrate it and switch it to WAL.
  exec_sql(path_,
           "DROP TABLE model_measurements; PRAGMA user_version = 3; "
           "PRAGMA journal_mode = DELETE;");
  const std::string before = file_bytes(path_);
  ASSERT_FALSE(before.empty());
  {
    RecordStore store(path_, RecordStore::Access::kReadOnly);
    const std::vector<TrialRecord> trials = store.trials(job);
    ASSERT_EQ(trials.size(), 2u);
    EXPECT_EQ(trials[1].result.costs, std::vector<double>{2e-3});
    ASSERT_EQ(store.best().size(), 1u);
    EXPECT_EQ(store.best()[0].trial.config_index, trials[0].config_index);
    // Writes go to the in-memory copy only.
    store.add_trials(job, {ok_trial(2, {0.5e-3})});
    EXPECT_EQ(store.trials(job).size(), 3u);
  }
  EXPECT_EQ(file_bytes(path_), before) << "a read-only open changed the file";
  EXPECT_FALSE(fs::exists(path_ + "-wal"));
  EXPECT_EQ(query_text(path_, "PRAGMA user_version"), "3");
  EXPECT_EQ(query_text(path_, "SELECT count(*) FROM trials"), "2");
}

TEST_F(RecordsTest, ReadOnlyStoresOpenAReadOnlyFileAndRefuseMissingAndForeignOnes) {
  {
    RecordStore store(path_);
    const int64_t job = store.open_job(dense_m(), Target::kWasm, kDevice);
    store.add_trials(job, {ok_trial(0, {1e-3})});
  }
  // A file the user may read but not write (as root, permissions do not stop a write: the
  // byte comparison above is the check that counts; this one proves no write is needed).
  fs::permissions(path_, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  {
    RecordStore store(path_, RecordStore::Access::kReadOnly);
    EXPECT_EQ(store.jobs().size(), 1u);
  }
  fs::permissions(path_, fs::perms::owner_read | fs::perms::owner_write);

  const std::string missing = testing::TempDir() + "webtune_no_such_records.db";
  fs::remove(missing);
  try {
    RecordStore store(missing, RecordStore::Access::kReadOnly);
    FAIL() << "opened a missing file read-only";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(missing)) << "a read-only open created the file";

  const std::string text = path_ + ".txt";
  std::ofstream(text) << "not a database, just some text that is long enough to be a header\n";
  try {
    RecordStore store(text, RecordStore::Access::kReadOnly);
    FAIL() << "opened a text file as records";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
  fs::remove(text);
}

TEST_F(RecordsTest, ModelRunsKeepTheirJobsWeightsAndEstimates) {
  RecordStore store(path_);
  const int64_t c2 = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
  const int64_t d1 = store.open_job(depthwise_d1(), Target::kGlesFrag, kDevice, "D1");
  const int64_t other = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
  const int64_t run = store.open_model_run("resnet18", Target::kGlesFrag, kDevice, "gradient", 480);
  store.add_model_run_job(run, c2, 2);
  store.add_model_run_job(run, d1, 1);
  store.add_model_run_job(run, d1, 3);  // the model lists D1 twice: the weights add up
  store.add_model_estimate(run, {32, 1.5, 4.25, 1700000000});
  store.add_model_estimate(run, {48, 2.5, 3.75, 0});

  const std::optional<ModelRunInfo> info = store.model_run(run);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->model, "resnet18");
  EXPECT_EQ(info->target, Target::kGlesFrag);
  EXPECT_EQ(info->device_key, kDevice);
  EXPECT_EQ(info->schedule, "gradient");
  EXPECT_EQ(info->total_trials, 480);
  EXPECT_GT(info->started, now_s() - 60);
  ASSERT_EQ(info->jobs.size(), 2u);
  EXPECT_EQ(info->jobs[0].job_id, c2);
  EXPECT_EQ(info->jobs[0].task_name, "C2");
  EXPECT_EQ(info->jobs[0].weight, 2);
  EXPECT_EQ(info->jobs[1].job_id, d1);
  EXPECT_EQ(info->jobs[1].weight, 4);
  EXPECT_EQ(info->estimates, 2);
  ASSERT_TRUE(info->latest.has_value());
  EXPECT_EQ(info->latest->trials, 48);
  EXPECT_DOUBLE_EQ(info->latest->latency_ms, 3.75);
  EXPECT_GT(info->latest->timestamp, now_s() - 60) << "0 means now";

  const std::vector<ModelEstimate> estimates = store.model_estimates(run);
  ASSERT_EQ(estimates.size(), 2u);
  EXPECT_EQ(estimates[0].trials, 32);
  EXPECT_DOUBLE_EQ(estimates[0].elapsed_s, 1.5);
  EXPECT_DOUBLE_EQ(estimates[0].latency_ms, 4.25);
  EXPECT_DOUBLE_EQ(estimates[0].timestamp, 1700000000);
  EXPECT_EQ(store.model_runs_of_job(c2), std::vector<int64_t>{run});
  EXPECT_TRUE(store.model_runs_of_job(other).empty());

  // A second session of the same model is a run of its own; the job belongs to both.
  const int64_t again = store.open_model_run("resnet18", Target::kGlesFrag, kDevice);
  store.add_model_run_job(again, c2, 2);
  EXPECT_EQ(store.model_runs_of_job(c2), (std::vector<int64_t>{run, again}));
  ASSERT_EQ(store.model_runs().size(), 2u);
  EXPECT_EQ(store.model_runs()[1].estimates, 0);
  EXPECT_FALSE(store.model_runs()[1].latest.has_value());
  EXPECT_TRUE(store.model_estimates(again).empty());

  // Bad input is refused with what was wrong.
  EXPECT_THROW(store.open_model_run("", Target::kGlesFrag, kDevice), std::invalid_argument);
  EXPECT_THROW(store.add_model_run_job(run, c2, 0), std::invalid_argument);
  EXPECT_THROW(store.add_model_run_job(999, c2, 1), std::runtime_error);
  EXPECT_THROW(store.add_model_run_job(run, 999, 1), std::runtime_error);
  EXPECT_THROW(store.add_model_estimate(999, {1, 0, 1, 0}), std::runtime_error);
  EXPECT_THROW(store.add_model_estimate(run, {1, 0, std::nan(""), 0}), std::invalid_argument);
  EXPECT_THROW(store.add_model_estimate(run, {1, 0, -1, 0}), std::invalid_argument);
  EXPECT_EQ(store.model_estimates(run).size(), 2u) << "nothing stored by a refused call";
  EXPECT_FALSE(store.model_run(999).has_value());
}

TEST_F(RecordsTest, MigratesVersion2FilesToModelRuns) {
  int64_t job = 0;
  {
    RecordStore store(path_);
    job = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
    store.add_trials(job, {ok_trial(0, {1e-3})});
  }
  exec_sql(path_,
           "DROP TABLE model_measurements; "
           "DROP TABLE model_estimates; DROP TABLE model_run_jobs; DROP TABLE model_runs; "
           "PRAGMA user_version = 2;");
  RecordStore store(path_);
  EXPECT_EQ(query_text(path_, "PRAGMA user_version"), "5");
  EXPECT_EQ(store.trials(job).size(), 1u);
  EXPECT_TRUE(store.model_runs().empty());
  const int64_t run = store.open_model_run("m", Target::kGlesFrag, kDevice);
  store.add_model_run_job(run, job, 1);
  store.add_model_estimate(run, {1, 0.5, 1.0, 0});
  EXPECT_EQ(store.model_estimates(run).size(), 1u);
}

TEST_F(RecordsTest, MigratesVersion3FilesToModelMeasurements) {
  int64_t job = 0, run = 0;
  {
    RecordStore store(path_);
    job = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
    store.add_trials(job, {ok_trial(0, {1e-3})});
    run = store.open_model_run("m", Target::kGlesFrag, kDevice);
    store.add_model_run_job(run, job, 2);
  }
  // What webtune wrote before model measurements.
  exec_sql(path_, "DROP TABLE model_measurements; PRAGMA user_version = 3;");
  ASSERT_EQ(
      query_text(path_, "SELECT count(*) FROM sqlite_master WHERE name = 'model_measurements'"),
      "0");
  RecordStore store(path_);
  EXPECT_EQ(query_text(path_, "PRAGMA user_version"), "5");
  EXPECT_EQ(store.trials(job).size(), 1u);
  ASSERT_TRUE(store.model_run(run).has_value());
  EXPECT_EQ(store.model_run(run)->jobs.at(0).weight, 2);
  EXPECT_TRUE(store.model_measurements().empty());
  ModelMeasurementRecord m;
  m.model = "net";
  m.manifest_sha256 = "ab";
  m.target = "webgl2";
  m.costs = {2e-3};
  EXPECT_GT(store.add_model_measurement(m), 0);
  EXPECT_EQ(store.model_measurements().size(), 1u);
}

TEST_F(RecordsTest, ModelMeasurementsAreStoredWithTheirMedianAndEstimate) {
  {
    RecordStore store(path_);
    ModelMeasurementRecord m;
    m.created = 1.7e9;
    m.model = "resnet18-webgl2";
    m.manifest_sha256 = std::string(64, 'c');
    m.model_sha256 = std::string(64, 'd');
    m.target = "webgl2";
    m.device_key = "webgl2:swiftshader:chromium-1:linux-x86_64:2t";
    m.agent = "tab-1";
    m.seed = (uint64_t{1} << 63) + 5;  // above int64: stored as its bits, read back the same
    m.costs = {0.030, 0.010, 0.020, 0.040};
    m.median_ms = 999;  // ignored: computed from the costs
    m.estimated_ms = 12.5;
    const int64_t first = store.add_model_measurement(m);
    ModelMeasurementRecord failed = m;
    failed.created = 0;  // now
    failed.model = "mobilenet-wasm";
    failed.target = "wasm";
    failed.error = MeasureErrorNo::kWrongAnswer;
    failed.message = "output[57] = 1, expected 3.14 +- 0.004";
    failed.estimated_ms.reset();
    const int64_t second = store.add_model_measurement(failed);
    EXPECT_GT(second, first);
    // Bad values are refused, naming the model.
    ModelMeasurementRecord bad = m;
    bad.costs = {0.01, -1};
    EXPECT_THROW(store.add_model_measurement(bad), std::invalid_argument);
    bad = m;
    bad.estimated_ms = std::numeric_limits<double>::infinity();
    EXPECT_THROW(store.add_model_measurement(bad), std::invalid_argument);
    bad.model = "";
    EXPECT_THROW(store.add_model_measurement(bad), std::invalid_argument);
  }
  // A fresh connection reads what the file holds.
  RecordStore store(path_);
  const std::vector<ModelMeasurementRecord> all = store.model_measurements();
  ASSERT_EQ(all.size(), 2u);
  const ModelMeasurementRecord& newest = all[0];
  EXPECT_EQ(newest.model, "mobilenet-wasm");
  EXPECT_EQ(newest.error, MeasureErrorNo::kWrongAnswer);
  EXPECT_TRUE(newest.costs.empty()) << "a failed measurement keeps no costs";
  EXPECT_FALSE(newest.median_ms.has_value());
  EXPECT_FALSE(newest.estimated_ms.has_value());
  EXPECT_GT(newest.created, 1.7e9);
  const ModelMeasurementRecord& r = all[1];
  EXPECT_EQ(r.model, "resnet18-webgl2");
  EXPECT_EQ(r.created, 1.7e9);
  EXPECT_EQ(r.manifest_sha256, std::string(64, 'c'));
  EXPECT_EQ(r.model_sha256, std::string(64, 'd'));
  EXPECT_EQ(r.target, "webgl2");
  EXPECT_EQ(r.device_key, "webgl2:swiftshader:chromium-1:linux-x86_64:2t");
  EXPECT_EQ(r.agent, "tab-1");
  EXPECT_EQ(r.seed, (uint64_t{1} << 63) + 5);
  EXPECT_EQ(r.costs, (std::vector<double>{0.030, 0.010, 0.020, 0.040}));
  ASSERT_TRUE(r.median_ms && r.min_ms && r.estimated_ms);
  EXPECT_DOUBLE_EQ(*r.median_ms, 25.0);  // (20 + 30) / 2 ms
  EXPECT_DOUBLE_EQ(*r.min_ms, 10.0);
  EXPECT_DOUBLE_EQ(*r.estimated_ms, 12.5);
  EXPECT_EQ(r.error, MeasureErrorNo::kNoError);
  // Filter and limit.
  ASSERT_EQ(store.model_measurements("resnet18-webgl2").size(), 1u);
  EXPECT_EQ(store.model_measurements("resnet18-webgl2")[0].agent, "tab-1");
  EXPECT_TRUE(store.model_measurements("resnet").empty()) << "the name matches exactly";
  ASSERT_EQ(store.model_measurements({}, 1).size(), 1u);
  EXPECT_EQ(store.model_measurements({}, 1)[0].model, "mobilenet-wasm");
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2);
}

TEST_F(RecordsTest, SuspectTrialsAreLeftOutOfTheBest) {
  RecordStore store(path_);
  const Workload w = dense_m();
  const int64_t job = store.open_job(w, Target::kGlesFrag, kDevice, "M1");
  // "faker" claims the two fastest costs; "honest" measured the rest.
  store.add_trials(job, {ok_trial(0, {4e-3}, "honest"), ok_trial(1, {1e-6}, "faker"),
                         ok_trial(2, {2e-6}, "faker"), ok_trial(3, {2e-3}, "honest"),
                         error_trial(4, MeasureErrorNo::kWrongAnswer, "x")});
  std::vector<TrialRecord> trials = store.trials(job);
  ASSERT_EQ(store.best_trial(job)->config_index, 1);
  EXPECT_FALSE(store.best()[0].verification.has_value());

  // The best is re-measured 2000x slower: suspect; the next best is the faker's other trial.
  VerificationRecord v;
  v.trial_id = trials[1].id;
  v.verdict = kSuspect;
  v.agent = "honest";
  v.cost = 2e-3;
  v.ratio = 2000;
  v.message = "re-measured 2000x slower";
  store.add_verification(v);
  EXPECT_EQ(store.best_trial(job)->config_index, 2);
  EXPECT_EQ(store.trials(job)[1].verdict, "suspect");

  // Every other unverified success of the faker goes too; the honest ones and errors stay.
  EXPECT_EQ(store.mark_agent_suspect(job, "faker", "caught"), 1);
  EXPECT_EQ(store.mark_agent_suspect(job, "faker", "caught"), 0);  // idempotent
  std::optional<TrialRecord> best = store.best_trial(job);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->config_index, 3);
  EXPECT_EQ(best->agent, "honest");
  const std::vector<BestRecord> all = store.best();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].trial.config_index, 3);
  EXPECT_DOUBLE_EQ(all[0].job.best_gflops, w.flops() / 2e-3 / 1e9);
  EXPECT_DOUBLE_EQ(store.job(job)->best_gflops, w.flops() / 2e-3 / 1e9);
  EXPECT_EQ(store.trials(job).size(), 5u) << "suspect trials stay in the records";

  // A verification of the new best is shown with it; the latest verdict counts.
  v = {};
  v.trial_id = best->id;
  v.verdict = kUnverified;
  v.message = "no second agent";
  store.add_verification(v);
  v.verdict = kVerified;
  v.agent = "faker";
  v.cost = 1.9e-3;
  v.ratio = 0.95;
  v.message = "agreed";
  store.add_verification(v);
  ASSERT_TRUE(store.best()[0].verification.has_value());
  EXPECT_EQ(store.best()[0].verification->verdict, "verified");
  EXPECT_EQ(store.best()[0].verification->agent, "faker");
  EXPECT_DOUBLE_EQ(store.best()[0].verification->ratio, 0.95);
  EXPECT_EQ(store.verifications(job).size(), 4u);
  // A verified trial is not marked when its agent is caught later.
  EXPECT_EQ(store.mark_agent_suspect(job, "honest", "x"), 1);  // config 0 only
  EXPECT_EQ(store.best_trial(job)->config_index, 3);
}

TEST_F(RecordsTest, AFusedJobKeepsItsEpilogueThroughTheStoreAndAutoTvm) {
  Workload fused = dense_m();
  fused.epilogue = Epilogue::parse({"bias", "residual", "clip(0,6)"});
  std::string log;
  {
    RecordStore store(path_);
    const int64_t plain = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
    const int64_t job = store.open_job(fused, Target::kGlesFrag, kDevice, "M1+fused");
    EXPECT_NE(plain, job);  // the epilogue is part of the workload: another job
    store.add_trials(job, {in_space(ok_trial(2, {4e-3}), fused, Target::kGlesFrag, 2)});
    std::ostringstream out;
    ASSERT_EQ(export_autotvm(store, out, fused.key(), ""), 1);
    log = out.str();
    const std::vector<TuningJobInfo> jobs = store.jobs();
    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_EQ(jobs[1].workload.epilogue, fused.epilogue);
  }
  // TVM's args are the anchor op's; the epilogue is in webtune's field and comes back.
  const bj::object line = bj::parse(log).as_object();
  EXPECT_EQ(line.at("input").as_array().at(1).as_string(), "dense.gles_frag");
  EXPECT_EQ(line.at("webtune").as_object().at("epilogue").as_object().at("activation").as_string(),
            "clip");
  const std::string other_path = path_ + ".fused.db";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(other_path + suffix);
  {
    RecordStore copy(other_path);
    std::istringstream in(log);
    EXPECT_EQ(import_autotvm(copy, in, ""), 1);
    ASSERT_EQ(copy.jobs().size(), 1u);
    EXPECT_EQ(copy.jobs()[0].workload.key(), fused.key());
    EXPECT_EQ(copy.jobs()[0].workload.epilogue, fused.epilogue);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(other_path + suffix);
}

// A template's space that grows (SplitPolicy::kVerbose) renumbers its configs; records made
// before keep their old indices and their knob values. renumber_trials moves each to its
// entity's current index, through a chain where one trial's new index is another's old one,
// keeps a second copy of an entity where it is, and frees the old indices for new trials.
TEST_F(RecordsTest, TrialsFromBeforeTheSpaceGrewAreRenumberedAndNewTrialsAreNotLost) {
  const Workload w = dense_m();
  const Task task = Task::create(w, Target::kGlesCompute);
  const std::vector<int64_t>& valid = task.space->valid_indices();
  ASSERT_GE(valid.size(), 8u);
  const ConfigEntity a = task.space->get(valid[1]), b = task.space->get(valid[3]);
  const int64_t free_index = valid[5], other = valid[7];
  // A stale trial: entity `e`, stored under `index` (as the grown space numbers it, wrongly).
  auto stale = [](const ConfigEntity& e, int64_t index, double cost) {
    TrialRecord t = ok_trial(index, {cost});
    bj::object config = e.to_json();
    config["index"] = index;
    t.config_json = bj::serialize(config);
    return t;
  };
  RecordStore store(":memory:");
  const int64_t job = store.open_job(w, Target::kGlesCompute, kDevice, "M1");
  // a sits on b's index, b on free_index; a second copy of a sits on `other`.
  ASSERT_EQ(store.add_trials(job, {stale(a, b.index(), 1e-3), stale(b, free_index, 2e-3),
                                   stale(a, other, 3e-3)}),
            3);
  EXPECT_EQ(store.renumber_trials(job, *task.space), 2);
  std::map<int64_t, double> cost_at;
  for (const TrialRecord& t : store.trials(job)) {
    cost_at[t.config_index] = t.result.costs.at(0);
    EXPECT_EQ(bj::parse(t.config_json).at("index").as_int64(), t.config_index);
    EXPECT_EQ(task.space->from_json(bj::parse(t.config_json), ConfigSpace::StaleIndex::kRenumber)
                      .index() == t.config_index,
              t.config_index != other)
        << "only the second copy of a keeps its stale index";
  }
  EXPECT_EQ(cost_at,
            (std::map<int64_t, double>{{a.index(), 1e-3}, {b.index(), 2e-3}, {other, 3e-3}}));
  EXPECT_EQ(store.renumber_trials(job, *task.space), 0) << "a second pass moves nothing";
  // The index b held before is free again: a new trial of that config is stored, not skipped.
  EXPECT_EQ(store.add_trials(job, {in_space(ok_trial(0, {4e-3}), w, Target::kGlesCompute, 5)}), 1);
  EXPECT_THROW(store.renumber_trials(job + 99, *task.space), std::runtime_error);
}

TEST_F(RecordsTest, SuspectTrialsAreExportedAsFailures) {
  RecordStore store(path_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
  store.add_trials(job, {ok_trial(0, {4e-3}, "honest"), ok_trial(1, {1e-6, 2e-6}, "faker")});
  EXPECT_EQ(store.mark_agent_suspect(job, "faker", "caught"), 1);
  std::ostringstream out;
  ASSERT_EQ(export_autotvm(store, out), 2);
  std::istringstream lines(out.str());
  std::string text;
  std::vector<bj::object> parsed;
  while (std::getline(lines, text)) parsed.push_back(bj::parse(text).as_object());
  ASSERT_EQ(parsed.size(), 2u);
  // The honest trial as it was; the suspect one as UNKNOWN_ERROR with AutoTVM's error cost.
  EXPECT_EQ(parsed[0].at("result").as_array().at(1).to_number<int>(), 0);
  EXPECT_DOUBLE_EQ(parsed[0].at("result").as_array().at(0).as_array().at(0).to_number<double>(),
                   4e-3);
  const bj::array& result = parsed[1].at("result").as_array();
  EXPECT_EQ(result.at(1).to_number<int>(), 8);
  ASSERT_EQ(result.at(0).as_array().size(), 1u);
  EXPECT_DOUBLE_EQ(result.at(0).as_array().at(0).to_number<double>(), 1e9);
  const bj::object& ours = parsed[1].at("webtune").as_object();
  EXPECT_NE(std::string(ours.at("message").as_string()).find("suspect"), std::string::npos);
  ASSERT_EQ(ours.at("suspect_costs").as_array().size(), 2u);
  EXPECT_DOUBLE_EQ(ours.at("suspect_costs").as_array().at(1).to_number<double>(), 2e-6);
}

TEST_F(RecordsTest, ExportRefusesATrialWhoseIndexAndConfigDisagree) {
  {
    RecordStore store(path_);
    const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
    store.add_trials(job, {ok_trial(3, {1e-3}), ok_trial(4, {1e-3})});
  }
  // A damaged file: the second trial's index column no longer matches its config JSON.
  query_text(path_, "UPDATE trials SET config_index = 40 WHERE config_index = 4");
  RecordStore store(path_);
  std::ostringstream out;
  try {
    export_autotvm(store, out);
    ADD_FAILURE() << "exported " << out.str();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("has config index 40 but its config JSON says 4"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(RecordsTest, RefusesUnknownStatusesVerdictsAndTrials) {
  RecordStore store(path_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  for (const char* status : {"running", "done", "stopped", "interrupted", "failed"})
    EXPECT_NO_THROW(store.set_status(job, status)) << status;
  EXPECT_EQ(store.job(job)->status, "failed");
  EXPECT_THROW(store.set_status(job, "paused"), std::invalid_argument);
  EXPECT_THROW(store.set_status(job + 100, "done"), std::runtime_error);
  store.add_trials(job, {ok_trial(0, {1e-3})});
  VerificationRecord v;
  v.trial_id = store.trials(job)[0].id;
  v.verdict = "maybe";
  EXPECT_THROW(store.add_verification(v), std::invalid_argument);
  v.verdict = kVerified;
  v.trial_id += 100;
  EXPECT_THROW(store.add_verification(v), std::runtime_error);
  EXPECT_THROW(store.mark_agent_suspect(job + 100, "a", "x"), std::runtime_error);
  EXPECT_TRUE(store.verifications(job).empty());
}

}  // namespace
}  // namespace webtune
