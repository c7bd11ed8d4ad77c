/// \file records_pg_test.cpp
/// The record store's core cases run on both backends, an SQLite file and a real PostgreSQL
/// database (a throwaway server started by tests/support/pg_server.hpp; the PostgreSQL cases skip
/// with a message naming what is missing when its binaries are not installed): jobs opened and
/// resumed, duplicate config indices skipped, best(), verifications, model runs and
/// measurements, the schema version and a migration; two processes writing one job of one store
/// at once; the SQL dialect translation; and merging records both ways between the backends,
/// through the API and through `webtune log merge`.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/pg_server.hpp"
#include "support/record_trials.hpp"
#include "support/run_webtune.hpp"
#include "tuner/records.hpp"
#include "tuner/records_merge.hpp"
#include "tuner/sql_backend.hpp"

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using testing_support::conv_c2;
using testing_support::dense_m;
using testing_support::entity_json;
using testing_support::error_trial;
using testing_support::PgServer;

const std::string kDevice = "gles:llvmpipe";

/// A successful trial whose all_cost and timestamp have no short decimal form: they must come
/// back bit for bit through PostgreSQL's text too.
TrialRecord ok_trial(int64_t index, std::vector<double> costs, std::string agent = "agent-1") {
  TrialRecord t = testing_support::ok_trial(index, std::move(costs), std::move(agent));
  t.result.all_cost = 0.25 + 0.1 * static_cast<double>(index) / 3.0;
  t.result.timestamp = 1700000000.125 + static_cast<double>(index) / 7.0;
  return t;
}

enum class Backend { kSqlite, kPostgres };

/// Failure messages name the backend ("GetParam() = PostgreSQL"), not its bytes.
void PrintTo(Backend backend, std::ostream* os) {
  *os << (backend == Backend::kSqlite ? "SQLite" : "PostgreSQL");
}

/// A fresh, empty store location of `backend` per call: an SQLite file path, or the URI of a
/// new database on the shared test server. `why_not` is set (and "" returned) when the backend
/// is not available.
std::string fresh_location(Backend backend, const std::string& tag, std::string* why_not) {
  static std::atomic<int> counter{0};
  const std::string name =
      "wt_" + tag + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  if (backend == Backend::kSqlite) {
    const std::string path = testing::TempDir() + name + ".db";
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
    return path;
  }
  PgServer& server = PgServer::shared();
  if (!server.available()) {
    *why_not = server.why_not();
    return {};
  }
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return server.create_database(lower);
}

/// The database name of a PostgreSQL URI made by fresh_location.
std::string database_of(const std::string& url) {
  const size_t start = url.find(":///") + 4;
  return url.substr(start, url.find('?') - start);
}

/// Runs SQL on the store at `location` on its own connection; returns the first column of the
/// first row ("" when none).
std::string query(const std::string& location, const std::string& sql) {
  if (sql::is_postgres_url(location)) return PgServer::shared().run_sql(sql, database_of(location));
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(location.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::string out;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    if (text) out = text;
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

class StoreTest : public testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string why_not;
    location_ = fresh_location(GetParam(), "s", &why_not);
    if (location_.empty()) GTEST_SKIP() << "PostgreSQL cases skipped: " << why_not;
  }
  void TearDown() override {
    if (GetParam() == Backend::kSqlite)
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(location_ + suffix);
  }
  std::string location_;
};

std::string backend_name(const testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "SQLite" : "PostgreSQL";
}

TEST_P(StoreTest, RoundTripsEveryFieldExactly) {
  RecordStore store(location_);
  EXPECT_EQ(store.is_postgres(), GetParam() == Backend::kPostgres);
  store.upsert_device(kDevice, R"({"renderer":"llvmpipe","v":1})");
  const Workload w = conv_c2();
  const int64_t job = store.open_job(w, Target::kGlesFrag, kDevice, "C2", "xgb");
  TrialRecord ok = ok_trial(7, {1e-3 / 3, 2e-3 / 7, 3e-3});
  ok.agent_session = (uint64_t{1} << 40) + 5;  // past 32 bits: the columns are 64-bit
  ok.attempt = 3;
  ok.received = 1700000123.0 / 3;
  const TrialRecord failed = error_trial(8, MeasureErrorNo::kWrongAnswer, "max |diff| 'x' = 1");
  ASSERT_EQ(store.add_trials(job, {ok, failed}), 2);

  const std::vector<TrialRecord> trials = store.trials(job);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].config_index, 7);
  EXPECT_EQ(trials[0].config_json, ok.config_json);
  EXPECT_EQ(trials[0].result.costs, ok.result.costs);  // bit for bit
  EXPECT_EQ(trials[0].result.all_cost, ok.result.all_cost);
  EXPECT_EQ(trials[0].result.timestamp, ok.result.timestamp);
  EXPECT_EQ(trials[0].gflops, ok.result.gflops(w.flops()));
  EXPECT_EQ(trials[0].agent, "agent-1");
  EXPECT_EQ(trials[0].agent_session, ok.agent_session);
  EXPECT_EQ(trials[0].attempt, 3);
  EXPECT_EQ(trials[0].received, ok.received);
  EXPECT_EQ(trials[1].result.error, MeasureErrorNo::kWrongAnswer);
  EXPECT_EQ(trials[1].result.message, "max |diff| 'x' = 1");
  EXPECT_TRUE(trials[1].result.costs.empty());
  EXPECT_EQ(trials[1].gflops, 0);
  EXPECT_EQ(trials[1].agent_session, 0u);  // NULL: unknown
  EXPECT_LT(trials[0].id, trials[1].id);

  const std::optional<TuningJobInfo> info = store.job(job);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->workload.key(), w.key());
  EXPECT_EQ(info->task_name, "C2");
  EXPECT_EQ(info->tuner, "xgb");
  EXPECT_EQ(info->status, "running");
  EXPECT_EQ(info->trials, 2);
  EXPECT_EQ(info->errors, 1);
  EXPECT_EQ(info->best_gflops, trials[0].gflops);
  EXPECT_EQ(store.device_info(kDevice), R"({"renderer":"llvmpipe","v":1})");
  EXPECT_EQ(store.device_keys(), std::vector<std::string>{kDevice});
  EXPECT_EQ(store.trials(job, 1, 1).size(), 1u);
  EXPECT_EQ(store.trials(job, 1, 1)[0].config_index, 8);
  EXPECT_EQ(store.trial_number(job, trials[1].id), 2);
  EXPECT_EQ(store.trial_number(job + 1, trials[1].id), 0);

  const auto errors = store.error_counts();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[1].first, MeasureErrorNo::kWrongAnswer);
  EXPECT_EQ(errors[1].second, 1);
  const std::vector<AgentRecord> agents = store.agents();
  ASSERT_EQ(agents.size(), 2u);
  EXPECT_EQ(agents[0].name, "agent-1");
  EXPECT_EQ(agents[0].device_key, kDevice);
  EXPECT_EQ(agents[0].trials, 1);
  EXPECT_EQ(agents[1].errors, 1);
}

TEST_P(StoreTest, OpenJobTwiceResumesAndKeepsOrUpdatesItsValues) {
  int64_t job = 0;
  {
    RecordStore store(location_);
    job = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb", R"({"a":1})");
    ASSERT_EQ(store.add_trials(job, {ok_trial(0, {1e-3}), ok_trial(1, {2e-3}),
                                     error_trial(2, MeasureErrorNo::kRunTimeout, "hang")}),
              3);
    store.set_status(job, "stopped");
    EXPECT_EQ(store.job(job)->status, "stopped");
  }
  RecordStore store(location_);
  Workload unnamed = conv_c2();
  unnamed.name.clear();
  EXPECT_EQ(store.open_job(unnamed, Target::kGlesFrag, kDevice), job);
  const std::optional<TuningJobInfo> info = store.job(job);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, "running");
  EXPECT_EQ(info->task_name, "C2");
  EXPECT_EQ(info->tuner, "xgb");
  EXPECT_EQ(query(location_, "SELECT options_json FROM tuning_jobs"), R"({"a":1})");
  EXPECT_EQ(info->trials, 3);
  // Resuming goes on: config 2 was measured already, 3 and 4 are new.
  EXPECT_EQ(store.add_trials(job, {ok_trial(2, {1e-4}), ok_trial(3, {1e-3}), ok_trial(4, {1e-3})}),
            2);
  EXPECT_EQ(store.trials(job).size(), 5u);
  EXPECT_EQ(store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2b", "random", R"({"b":2})"),
            job);
  EXPECT_EQ(store.job(job)->tuner, "random");
  EXPECT_EQ(store.job(job)->task_name, "C2b");
  EXPECT_EQ(query(location_, "SELECT options_json FROM tuning_jobs"), R"({"b":2})");
  const int64_t other = store.open_job(conv_c2(), Target::kGlesFrag, "gles:other");
  const int64_t compute = store.open_job(conv_c2(), Target::kGlesCompute, kDevice);
  EXPECT_NE(other, job);
  EXPECT_NE(compute, job);
  EXPECT_EQ(store.jobs().size(), 3u);
  EXPECT_THROW(store.set_status(job + 100, "done"), std::runtime_error);
  EXPECT_THROW(store.set_status(job, "paused"), std::invalid_argument);
}

TEST_P(StoreTest, AddTrialsSkipsDuplicatesAndABadBatchStoresNothing) {
  RecordStore store(location_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  EXPECT_EQ(store.add_trials(job, {ok_trial(5, {1e-3}), ok_trial(5, {9e-3}), ok_trial(6, {2e-3})}),
            2);
  EXPECT_EQ(store.add_trials(job, {ok_trial(5, {1e-6})}), 0);
  EXPECT_EQ(store.add_trials(job, {}), 0);
  std::vector<TrialRecord> trials = store.trials(job);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].result.costs, std::vector<double>{1e-3});
  EXPECT_EQ(query(location_, "SELECT count(*) FROM trials WHERE config_index = 5"), "1");

  EXPECT_THROW(store.add_trials(job + 1, {ok_trial(0, {1e-3})}), std::runtime_error);
  TrialRecord bad = ok_trial(8, {1e-3});
  bad.config_json = "{not json";
  EXPECT_THROW(store.add_trials(job, {ok_trial(7, {1e-3}), bad}), std::invalid_argument);
  EXPECT_THROW(store.add_trials(job, {ok_trial(7, {1e-3}), ok_trial(9, {NAN})}),
               std::invalid_argument);
  EXPECT_EQ(store.trials(job).size(), 2u);  // config 7 rolled back with the bad trial
  // The connection is usable after the failed transactions.
  EXPECT_EQ(store.add_trials(job, {ok_trial(7, {1e-3})}), 1);
}

TEST_P(StoreTest, BestFiltersAndRelatedTrials) {
  RecordStore store(location_);
  const Workload w = conv_c2();
  const int64_t job = store.open_job(w, Target::kGlesFrag, kDevice, "C2");
  TrialRecord fast_but_wrong = error_trial(1, MeasureErrorNo::kWrongAnswer, "mismatch");
  fast_but_wrong.result.costs = {1e-9};
  store.add_trials(job, {ok_trial(0, {2e-3}), fast_but_wrong, ok_trial(2, {1e-3}),
                         ok_trial(3, {1e-3}), ok_trial(4, {3e-3})});
  const int64_t dense = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
  store.add_trials(dense, {ok_trial(0, {1e-3})});
  const int64_t compute = store.open_job(w, Target::kGlesCompute, kDevice, "C2");
  store.add_trials(compute, {error_trial(0, MeasureErrorNo::kCompileDevice, "x")});

  const std::vector<BestRecord> best = store.best();
  ASSERT_EQ(best.size(), 2u);  // the compute job has no success
  EXPECT_EQ(best[0].job.id, job);
  EXPECT_EQ(best[0].trial.config_index, 2);  // ties with 3: the earlier one
  EXPECT_DOUBLE_EQ(best[0].trial.gflops, w.flops() / 1e-3 / 1e9);
  // Filters: a substring of the key or task name (instr → strpos on PostgreSQL), a target.
  EXPECT_EQ(store.best("C2").size(), 1u);
  EXPECT_EQ(store.best("dense").size(), 1u);
  EXPECT_EQ(store.best("", "gles-compute").size(), 0u);
  EXPECT_EQ(store.jobs("C2", "").size(), 2u);
  EXPECT_EQ(store.jobs("C2", "gles-compute").size(), 1u);
  EXPECT_EQ(store.jobs("nothing", "").size(), 0u);
  EXPECT_EQ(store.best_trial(job)->config_index, 2);
  EXPECT_FALSE(store.best_trial(compute));

  const auto related = store.related_trials(OpKind::kConv2d, Target::kGlesFrag, dense);
  ASSERT_EQ(related.size(), 1u);
  EXPECT_EQ(related[0].first.id, job);
  EXPECT_EQ(related[0].second.size(), 5u);
}

TEST_P(StoreTest, VerificationsAndSuspectTrialsLeaveTheBest) {
  RecordStore store(location_);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  store.add_trials(job, {ok_trial(0, {1e-3}, "fast-liar"), ok_trial(1, {2e-3}, "honest"),
                         ok_trial(2, {1.5e-3}, "fast-liar")});
  const std::vector<TrialRecord> trials = store.trials(job);
  VerificationRecord v;
  v.trial_id = trials[1].id;
  v.verdict = kVerified;
  v.agent = "checker";
  v.cost = 2.1e-3;
  v.ratio = 1.05;
  v.message = "agreed";
  v.timestamp = 1700000500.25;
  const int64_t first = store.add_verification(v);
  v.message = "agreed again";
  const int64_t second = store.add_verification(v);
  EXPECT_GT(second, first);
  EXPECT_EQ(store.verification(trials[1].id)->message, "agreed again");
  EXPECT_EQ(store.verification(trials[1].id)->id, second);
  EXPECT_EQ(store.verification(trials[1].id)->cost, 2.1e-3);
  EXPECT_FALSE(store.verification(trials[0].id));

  EXPECT_EQ(store.mark_agent_suspect(job, "fast-liar", "too fast"), 2);
  EXPECT_EQ(store.mark_agent_suspect(job, "fast-liar", "too fast"), 0);  // already suspect
  EXPECT_EQ(store.best_trial(job)->config_index, 1);
  EXPECT_EQ(store.trials(job)[0].verdict, kSuspect);
  const std::vector<BestRecord> best = store.best();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].trial.config_index, 1);
  ASSERT_TRUE(best[0].verification);
  EXPECT_EQ(best[0].verification->verdict, kVerified);
  EXPECT_DOUBLE_EQ(best[0].job.best_gflops, best[0].trial.gflops);
  EXPECT_EQ(store.verifications(job).size(), 4u);
  v.verdict = "maybe";
  EXPECT_THROW(store.add_verification(v), std::invalid_argument);
  v.verdict = kVerified;
  v.trial_id = trials[2].id + 100;
  EXPECT_THROW(store.add_verification(v), std::runtime_error);
}

TEST_P(StoreTest, ModelRunsAndMeasurements) {
  RecordStore store(location_);
  const int64_t c2 = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
  const int64_t m1 = store.open_job(dense_m(), Target::kGlesFrag, kDevice, "M1");
  const int64_t run = store.open_model_run("resnet18", Target::kGlesFrag, kDevice, "gradient", 40);
  store.add_model_run_job(run, c2, 2);
  store.add_model_run_job(run, m1, 1);
  store.add_model_run_job(run, c2, 1);  // weights add up
  store.add_model_estimate(run, {10, 1.5, 3.25, 1700000000.5});
  store.add_model_estimate(run, {20, 3.0, 2.75, 0});
  EXPECT_THROW(store.add_model_run_job(run + 1, c2, 1), std::runtime_error);
  EXPECT_THROW(store.add_model_run_job(run, c2, 0), std::invalid_argument);
  const std::optional<ModelRunInfo> info = store.model_run(run);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->model, "resnet18");
  EXPECT_EQ(info->schedule, "gradient");
  EXPECT_EQ(info->total_trials, 40);
  ASSERT_EQ(info->jobs.size(), 2u);
  EXPECT_EQ(info->jobs[0].job_id, c2);
  EXPECT_EQ(info->jobs[0].weight, 3);
  EXPECT_EQ(info->estimates, 2);
  ASSERT_TRUE(info->latest);
  EXPECT_EQ(info->latest->latency_ms, 2.75);
  EXPECT_EQ(store.model_estimates(run).front().timestamp, 1700000000.5);
  EXPECT_EQ(store.model_runs_of_job(m1), std::vector<int64_t>{run});
  EXPECT_EQ(store.model_runs().size(), 1u);

  ModelMeasurementRecord m;
  m.model = "resnet18";
  m.manifest_sha256 = "abc";
  m.target = "webgl2";
  m.device_key = kDevice;
  m.seed = ~uint64_t{0} - 1;  // the whole 64 bits
  m.costs = {3e-3, 1e-3, 2e-3};
  m.estimated_ms = 1.5;
  const int64_t first = store.add_model_measurement(m);
  m.model = "mobilenet";
  m.error = MeasureErrorNo::kRunTimeout;
  m.message = "timeout";
  const int64_t second = store.add_model_measurement(m);
  EXPECT_GT(second, first);
  const auto all = store.model_measurements();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].model, "mobilenet");  // newest first
  EXPECT_FALSE(all[0].median_ms);
  EXPECT_EQ(all[1].seed, m.seed);
  EXPECT_DOUBLE_EQ(*all[1].median_ms, 2.0);
  EXPECT_DOUBLE_EQ(*all[1].min_ms, 1.0);
  EXPECT_EQ(store.model_measurements("resnet18").size(), 1u);
  EXPECT_EQ(store.model_measurements({}, 1).size(), 1u);
}

TEST_P(StoreTest, SchemaVersionIsStoredAndANewerOneRefused) {
  { RecordStore store(location_); }
  const bool pg = GetParam() == Backend::kPostgres;
  const std::string version_sql =
      pg ? "SELECT max(version) FROM schema_version" : "PRAGMA user_version";
  EXPECT_EQ(query(location_, version_sql), "5");
  { RecordStore store(location_); }  // reopening leaves it alone
  EXPECT_EQ(query(location_, version_sql), "5");
  if (pg)
    query(location_, "UPDATE schema_version SET version = 99");
  else
    query(location_, "PRAGMA user_version = 99");
  try {
    RecordStore store(location_);
    FAIL() << "opened a store of schema version 99";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
}

TEST_P(StoreTest, MigratesAVersion3StoreToModelMeasurements) {
  const bool pg = GetParam() == Backend::kPostgres;
  int64_t job = 0;
  {
    RecordStore store(location_);
    job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
    store.add_trials(job, {ok_trial(0, {1e-3})});
  }
  // What a version-3 webtune left: no model_measurements table.
  query(location_, "DROP TABLE model_measurements");
  query(location_, pg ? "UPDATE schema_version SET version = 3" : "PRAGMA user_version = 3");
  RecordStore store(location_);
  EXPECT_EQ(
      query(location_, pg ? "SELECT max(version) FROM schema_version" : "PRAGMA user_version"),
      "5");
  EXPECT_EQ(store.trials(job).size(), 1u);
  ModelMeasurementRecord m;
  m.model = "resnet18";
  m.costs = {1e-3};
  EXPECT_GT(store.add_model_measurement(m), 0);
  EXPECT_EQ(store.model_measurements().size(), 1u);
}

/// Two processes, each its own connection ("tuner host"), open the same job of one store at
/// once and write overlapping config indices in batches, in opposite orders.
TEST_P(StoreTest, TwoProcessesTuningOneJobNeitherDoubleNorLoseATrial) {
  constexpr int kPerProcess = 120, kOverlap = 60, kBatch = 6;
  const std::string dir = testing::TempDir();
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < 2; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(gate[1]);
      char byte;
      (void)!read(gate[0], &byte, 1);  // both start together: the parent closes the pipe
      int code = 0;
      try {
        RecordStore store(location_);
        const int64_t job =
            store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb", "{}");
        std::vector<int64_t> indices;
        for (int i = 0; i < kPerProcess; ++i) indices.push_back(p * (kPerProcess - kOverlap) + i);
        if (p == 1) std::reverse(indices.begin(), indices.end());
        int inserted = 0;
        for (size_t b = 0; b < indices.size(); b += kBatch) {
          std::vector<TrialRecord> batch;
          for (size_t i = b; i < std::min(indices.size(), b + kBatch); ++i)
            batch.push_back(ok_trial(indices[i], {1e-3 + 1e-6 * static_cast<double>(indices[i])},
                                     "host-" + std::to_string(p)));
          inserted += store.add_trials(job, batch);
        }
        store.set_status(job, "done");
        std::ofstream(dir + "wt_child_" + std::to_string(getppid()) + "_" + std::to_string(p))
            << job << " " << inserted;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        code = 1;
      }
      _exit(code);  // never the parent's atexit handlers (the test server)
    }
    children.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer failed";
  }
  int64_t jobs[2], inserted[2];
  for (int p = 0; p < 2; ++p) {
    const std::string file = dir + "wt_child_" + std::to_string(getpid()) + "_" + std::to_string(p);
    std::ifstream in(file);
    ASSERT_TRUE(in >> jobs[p] >> inserted[p]) << file;
    fs::remove(file);
  }
  EXPECT_EQ(jobs[0], jobs[1]) << "both hosts must resume one job";
  constexpr int kDistinct = 2 * kPerProcess - kOverlap;
  EXPECT_EQ(inserted[0] + inserted[1], kDistinct) << "a trial was stored twice or lost";

  RecordStore store(location_);
  const std::vector<TrialRecord> trials = store.trials(jobs[0]);
  std::set<int64_t> indices;
  for (const TrialRecord& t : trials) indices.insert(t.config_index);
  EXPECT_EQ(trials.size(), static_cast<size_t>(kDistinct));
  EXPECT_EQ(indices.size(), trials.size()) << "a config index stored twice";
  EXPECT_EQ(*indices.begin(), 0);
  EXPECT_EQ(*indices.rbegin(), kDistinct - 1);
  int64_t by_agents = 0;
  for (const AgentRecord& a : store.agents()) by_agents += a.trials;
  EXPECT_EQ(by_agents, kDistinct);
  EXPECT_EQ(store.jobs().size(), 1u);

  // A third host resumes from the shared store: the same job, its measured configs skipped.
  EXPECT_EQ(store.open_job(conv_c2(), Target::kGlesFrag, kDevice), jobs[0]);
  EXPECT_EQ(store.job(jobs[0])->status, "running");
  std::vector<TrialRecord> resumed;
  for (int i = kDistinct - 5; i < kDistinct + 5; ++i) resumed.push_back(ok_trial(i, {2e-3}));
  EXPECT_EQ(store.add_trials(jobs[0], resumed), 5);
  EXPECT_EQ(store.job(jobs[0])->trials, kDistinct + 5);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, testing::Values(Backend::kSqlite, Backend::kPostgres),
                         backend_name);

// ---- merging between backends ----------------------------------------------------------------

/// Fills a store with two jobs, trials, a verification, a device and a model measurement.
void fill(RecordStore& store, int64_t first_index) {
  store.upsert_device(kDevice, R"({"renderer":"llvmpipe"})");
  const int64_t c2 = store.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2", "xgb");
  const int64_t m1 = store.open_job(dense_m(), Target::kGlesCompute, kDevice, "M1", "random");
  std::vector<TrialRecord> trials;
  for (int64_t i = first_index; i < first_index + 10; ++i)
    trials.push_back(ok_trial(i, {1e-3 + 1e-5 * static_cast<double>(i)}));
  trials.push_back(error_trial(first_index + 10, MeasureErrorNo::kRunTimeout, "hang"));
  store.add_trials(c2, trials);
  store.add_trials(m1, {ok_trial(first_index, {1e-3})});
  store.set_status(c2, "stopped");
  VerificationRecord v;
  v.trial_id = store.trials(c2)[0].id;
  v.verdict = kVerified;
  v.agent = "checker";
  v.timestamp = 1700000000.0 + static_cast<double>(first_index) / 3;
  store.add_verification(v);
  ModelMeasurementRecord m;
  m.model = "resnet18";
  m.created = 1700000000.0 + static_cast<double>(first_index);
  m.costs = {1e-3};
  store.add_model_measurement(m);
}

class MergeTest : public testing::TestWithParam<std::pair<Backend, Backend>> {};

std::string merge_name(const testing::TestParamInfo<std::pair<Backend, Backend>>& info) {
  auto name = [](Backend b) { return b == Backend::kSqlite ? "SQLite" : "PostgreSQL"; };
  return std::string(name(info.param.first)) + "To" + name(info.param.second);
}

TEST_P(MergeTest, CopiesWhatIsMissingAndSkipsWhatIsThere) {
  std::string why_not;
  const std::string a = fresh_location(GetParam().first, "a", &why_not);
  const std::string b = a.empty() ? "" : fresh_location(GetParam().second, "b", &why_not);
  if (a.empty() || b.empty()) GTEST_SKIP() << "PostgreSQL cases skipped: " << why_not;
  {
    RecordStore from(a);
    fill(from, 0);  // configs 0..10 of C2, config 0 of M1
  }
  {
    RecordStore into(b);
    // The destination holds C2's configs 5..15 already, and another job.
    const int64_t c2 = into.open_job(conv_c2(), Target::kGlesFrag, kDevice, "C2");
    std::vector<TrialRecord> trials;
    for (int64_t i = 5; i < 16; ++i) trials.push_back(ok_trial(i, {5e-3}, "other-host"));
    into.add_trials(c2, trials);
    into.open_job(Workload::dense(32, 32, 32, "M9"), Target::kGlesFrag, kDevice, "M9");
  }
  {
    const RecordStore from(a);
    RecordStore into(b);
    const MergeCounts c = merge_records(from, into);
    EXPECT_EQ(c.jobs, 2);
    EXPECT_EQ(c.jobs_created, 1);  // M1; C2 was there
    EXPECT_EQ(c.trials, 5 + 1);    // C2's 0..4 and M1's 0
    EXPECT_EQ(c.trials_skipped, 6);
    EXPECT_EQ(c.verifications, 1);
    EXPECT_EQ(c.devices, 1);
    EXPECT_EQ(c.model_measurements, 1);

    const std::vector<TuningJobInfo> jobs = into.jobs();
    ASSERT_EQ(jobs.size(), 3u);
    EXPECT_EQ(jobs[0].trials, 16);         // 0..15, each once
    EXPECT_EQ(jobs[0].status, "running");  // an existing job keeps its status
    const std::vector<TrialRecord> trials = into.trials(jobs[0].id);
    std::set<int64_t> indices;
    for (const TrialRecord& t : trials) indices.insert(t.config_index);
    EXPECT_EQ(indices.size(), 16u);
    EXPECT_EQ(trials[0].config_index, 5);  // the destination's own come first
    EXPECT_EQ(trials[0].agent, "other-host");
    EXPECT_EQ(trials.back().config_index, 4);
    // Config 0's verification followed it.
    const std::vector<VerificationRecord> v = into.verifications(jobs[0].id);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(into.trials(jobs[0].id)[11].config_index, 0);
    EXPECT_EQ(v[0].trial_id, into.trials(jobs[0].id)[11].id);
    EXPECT_EQ(v[0].timestamp, 1700000000.0);
    const TuningJobInfo& m1 = jobs[2];
    EXPECT_EQ(m1.task_name, "M1");
    EXPECT_EQ(m1.tuner, "random");
    EXPECT_EQ(m1.status, "running");  // as the source has it
    EXPECT_EQ(m1.target, Target::kGlesCompute);
    EXPECT_EQ(into.device_info(kDevice), R"({"renderer":"llvmpipe"})");
    EXPECT_EQ(into.model_measurements().size(), 1u);

    // Merging again copies nothing.
    const MergeCounts again = merge_records(from, into);
    EXPECT_EQ(again.jobs_created, 0);
    EXPECT_EQ(again.trials, 0);
    EXPECT_EQ(again.trials_skipped, 12);
    EXPECT_EQ(again.verifications, 0);
    EXPECT_EQ(again.verifications_skipped, 1);
    EXPECT_EQ(again.devices, 0);
    EXPECT_EQ(again.model_measurements, 0);
  }
  // And back: the source gains the destination's configs 11..15 and its M9 job.
  {
    const RecordStore from(b);
    RecordStore into(a);
    const MergeCounts c = merge_records(from, into);
    EXPECT_EQ(c.jobs_created, 1);
    EXPECT_EQ(c.trials, 5);
    EXPECT_EQ(into.jobs().size(), 3u);
    EXPECT_EQ(into.jobs()[0].trials, 16);
  }
  for (const std::string& loc : {a, b})
    if (!sql::is_postgres_url(loc))
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(loc + suffix);
}

INSTANTIATE_TEST_SUITE_P(Backends, MergeTest,
                         testing::Values(std::pair{Backend::kSqlite, Backend::kPostgres},
                                         std::pair{Backend::kPostgres, Backend::kSqlite},
                                         std::pair{Backend::kSqlite, Backend::kSqlite}),
                         merge_name);

/// `webtune log merge` and `webtune log list --db postgresql://…` through the binary.
TEST(LogMergeCommand, MergesAFileIntoAServerAndListsIt) {
  std::string why_not;
  const std::string pg = fresh_location(Backend::kPostgres, "cli", &why_not);
  if (pg.empty()) GTEST_SKIP() << "PostgreSQL cases skipped: " << why_not;
  const std::string file = fresh_location(Backend::kSqlite, "cli", &why_not);
  {
    RecordStore store(file);
    fill(store, 0);
  }
  const testing_support::WebtuneRun merged =
      testing_support::run_webtune({"log", "merge", "--from", file, "--into", pg});
  ASSERT_EQ(merged.status, 0) << merged.describe();
  EXPECT_NE(merged.out.find("12 trials copied (0 already there)"), std::string::npos) << merged.out;
  EXPECT_NE(merged.out.find("2 jobs (2 new)"), std::string::npos) << merged.out;
  const testing_support::WebtuneRun again =
      testing_support::run_webtune({"log", "merge", "--from", file, "--into", pg});
  ASSERT_EQ(again.status, 0) << again.describe();
  EXPECT_NE(again.out.find("0 trials copied (12 already there)"), std::string::npos) << again.out;
  const testing_support::WebtuneRun list =
      testing_support::run_webtune({"log", "list", "--db", pg});
  ASSERT_EQ(list.status, 0) << list.describe();
  EXPECT_NE(list.out.find("C2"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("M1"), std::string::npos) << list.out;
  const testing_support::WebtuneRun missing =
      testing_support::run_webtune({"log", "merge", "--from", file + ".missing", "--into", pg});
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("no records database"), std::string::npos) << missing.err;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(file + suffix);
}

/// A long-lived store (a tracker's dashboard, a tuner) outlives a server restart: the call that
/// meets the broken connection fails, the next one reconnects.
TEST(PostgresStore, ReconnectsAfterTheServerRestarts) {
  std::string why_not;
  const std::string pg = fresh_location(Backend::kPostgres, "restart", &why_not);
  if (pg.empty()) GTEST_SKIP() << "PostgreSQL cases skipped: " << why_not;
  RecordStore store(pg);
  const int64_t job = store.open_job(dense_m(), Target::kGlesFrag, kDevice);
  ASSERT_EQ(store.add_trials(job, {ok_trial(0, {1e-3})}), 1);
  ASSERT_TRUE(PgServer::shared().restart());
  try {
    store.jobs();  // may fail: the connection broke under it
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(store.jobs().size(), 1u);
  EXPECT_EQ(store.add_trials(job, {ok_trial(0, {1e-3}), ok_trial(1, {1e-3})}), 1);
  EXPECT_EQ(store.job(job)->trials, 2);
}

TEST(SqlDialect, TranslatesPlaceholdersTypesAndFunctionsOutsideLiterals) {
  int parameters = 0;
  EXPECT_EQ(sql::to_postgres("SELECT a FROM t WHERE b = ?2 AND instr(c, ?1) > 0 AND d = '?3'",
                             &parameters),
            "SELECT a FROM t WHERE b = $2 AND strpos(c, $1) > 0 AND d = '?3'");
  EXPECT_EQ(parameters, 2);
  EXPECT_EQ(sql::to_postgres("CREATE TABLE x (\n  id INTEGER PRIMARY KEY,  -- REAL ?1\n"
                             "  n INTEGER NOT NULL, r REAL, s TEXT DEFAULT 'REAL')"),
            "CREATE TABLE x (\n  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,  -- "
            "REAL ?1\n  n BIGINT NOT NULL, r DOUBLE PRECISION, s TEXT DEFAULT 'REAL')");
  EXPECT_EQ(sql::to_postgres("SELECT 'it''s ?1', 1e3, x.real FROM \"instr\""),
            "SELECT 'it''s ?1', 1e3, x.real FROM \"instr\"");
  EXPECT_THROW(sql::to_postgres("SELECT ?"), std::invalid_argument);
  EXPECT_EQ(sql::redact_url("postgresql://user:secret@host/db"), "postgresql://user:***@host/db");
  EXPECT_EQ(sql::redact_url("postgresql://host/db?password=x&port=5"),
            "postgresql://host/db?password=***&port=5");
  EXPECT_TRUE(sql::is_postgres_url("postgres://h/db"));
  EXPECT_FALSE(sql::is_postgres_url("records.db"));
}

TEST(PostgresStore, AnUnreachableServerIsNamedWithoutItsPassword) {
  try {
    RecordStore store("postgresql://webtune:hunter2@/nodb?host=/nonexistent-webtune-socket");
    FAIL() << "connected to nothing";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("connecting to 'postgresql://webtune:***@"), std::string::npos) << what;
    EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace webtune
