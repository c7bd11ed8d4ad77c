/// \file records.cpp
/// The record store over SQLite or PostgreSQL; see records.hpp.
///
/// Every SQL text here is a constant, written once in the spelling of sql_backend.hpp (SQLite's,
/// which the PostgreSQL backend translates): values only ever travel as bound parameters.
/// Statements and transactions are RAII wrappers, so an exception anywhere finalizes the statement
/// and rolls the transaction back.
#include "tuner/records.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <istream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include "codegen/json_util.hpp"
#include "codegen/task.hpp"
#include "sql_backend.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

/// Bump when the schema changes, and add the step from the previous version to migrate().
constexpr int kSchemaVersion = 5;
/// A LIMIT that limits nothing: PostgreSQL refuses SQLite's -1.
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// A prepared statement of the store's backend (sql_backend.hpp), with chained binds. `what`
/// says what it is for, for error messages.
class Statement {
 public:
  Statement(sql::Connection* db, std::string_view sql, std::string_view what)
      : stmt_(db->prepare(sql, what)) {}

  Statement& bind(int i, int64_t v) {
    stmt_->bind_int(i, v);
    return *this;
  }
  Statement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, double v) {
    stmt_->bind_double(i, v);
    return *this;
  }
  Statement& bind(int i, std::string_view v) {
    stmt_->bind_text(i, v);  // copied: temporaries are safe to pass
    return *this;
  }
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Statement& bind_null(int i) {
    stmt_->bind_null(i);
    return *this;
  }

  /// True while there is a row to read; false when done. Throws on errors.
  bool step() { return stmt_->step(); }
  /// Runs a statement that returns no rows.
  void run() {
    while (step()) {
    }
  }
  /// `INSERT … RETURNING id`: runs it and returns the new row's id.
  int64_t insert_id() {
    if (!step()) throw std::runtime_error("records: an insert returned no id");
    const int64_t id = get_int(0);
    run();  // RETURNING: the statement completes on the step after the row
    return id;
  }
  /// Makes the statement ready to run again with new bindings.
  void reset() { stmt_->reset(); }
  /// Rows the statement changed when it last ran.
  int64_t changes() const { return stmt_->changes(); }

  bool is_null(int col) const { return stmt_->is_null(col); }
  int64_t get_int(int col) const { return stmt_->get_int(col); }
  double get_double(int col) const { return stmt_->get_double(col); }
  std::string get_text(int col) const { return stmt_->get_text(col); }

 private:
  std::unique_ptr<sql::Statement> stmt_;
};

/// Runs SQL without parameters (schema, transaction control).
void exec(sql::Connection* db, const char* sql, std::string_view what) {
  db->exec(sql, what);
}

/// A write transaction (sql::Connection::begin: the store's writer lock is taken up front, so a
/// concurrent writer waits at BEGIN instead of failing midway); rolls back unless committed.
class Transaction {
 public:
  Transaction(sql::Connection* db, std::string_view what) : db_(db), what_(what) {
    db_->begin(what_);
  }
  ~Transaction() {
    if (!committed_) db_->rollback();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    db_->commit(what_);
    committed_ = true;
  }

 private:
  sql::Connection* db_;
  std::string what_;
  bool committed_ = false;
};

// ---- schema -------------------------------------------------------------------------------

// Version 1. Counters (trials, errors, best) are not stored on the job but aggregated from
// trials through the (job_id, error_no, gflops) index, so they can never disagree with them.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE workloads (
  id    INTEGER PRIMARY KEY,
  key   TEXT NOT NULL UNIQUE,   -- Workload::key(), shapes only
  op    TEXT NOT NULL,          -- op_name(): "dense", "conv2d", "depthwise_conv2d"
  json  TEXT NOT NULL,          -- Workload::to_json() without the name
  flops REAL NOT NULL
);
CREATE INDEX workloads_op ON workloads(op);

CREATE TABLE targets (
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE     -- target_name()
);

CREATE TABLE devices (
  id        INTEGER PRIMARY KEY,
  key       TEXT NOT NULL UNIQUE,  -- e.g. "gles:llvmpipe"
  info_json TEXT NOT NULL DEFAULT '{}',
  updated   REAL NOT NULL
);

CREATE TABLE agents (
  id        INTEGER PRIMARY KEY,
  name      TEXT NOT NULL UNIQUE,
  device_id INTEGER REFERENCES devices(id),  -- the device it last measured on
  last_seen REAL NOT NULL
);

CREATE TABLE tuning_jobs (
  id           INTEGER PRIMARY KEY,
  workload_id  INTEGER NOT NULL REFERENCES workloads(id),
  target_id    INTEGER NOT NULL REFERENCES targets(id),
  device_id    INTEGER NOT NULL REFERENCES devices(id),
  task_name    TEXT NOT NULL DEFAULT '',
  tuner        TEXT NOT NULL DEFAULT '',
  options_json TEXT NOT NULL DEFAULT '{}',
  status       TEXT NOT NULL,
  created      REAL NOT NULL,
  updated      REAL NOT NULL,
  UNIQUE (workload_id, target_id, device_id)
);
CREATE INDEX tuning_jobs_target ON tuning_jobs(target_id);

CREATE TABLE trials (
  id           INTEGER PRIMARY KEY,  -- insertion order
  job_id       INTEGER NOT NULL REFERENCES tuning_jobs(id) ON DELETE CASCADE,
  config_index INTEGER NOT NULL,
  entity_json  TEXT NOT NULL,        -- ConfigEntity::to_json()
  error_no     INTEGER NOT NULL,     -- MeasureErrorNo (AutoTVM's numbering)
  message      TEXT NOT NULL DEFAULT '',
  costs_json   TEXT NOT NULL,        -- [seconds, ...]; [] on error
  mean_cost    REAL,                 -- seconds; NULL on error
  gflops       REAL NOT NULL,        -- 0 on error
  all_cost     REAL NOT NULL,        -- seconds
  timestamp    REAL NOT NULL,        -- Unix time (s)
  agent_id     INTEGER REFERENCES agents(id),
  UNIQUE (job_id, config_index)
);
-- trials(job) in insertion order: the implicit rowid makes this (job_id, id).
CREATE INDEX trials_job ON trials(job_id);
-- best(), and the per-job counters.
CREATE INDEX trials_job_best ON trials(job_id, error_no, gflops DESC);
CREATE INDEX trials_agent ON trials(agent_id);
)sql";

// Version 2: where each result came from (agent session, tracker attempt, receipt time), for
// audits such as bench/chaos; and verifications of best configs on a second agent
// (`webtune tune --verify-best`). Older trials keep NULL (read as 0: unknown).
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE trials ADD COLUMN agent_session INTEGER;  -- the agent's session on the tracker
ALTER TABLE trials ADD COLUMN attempt INTEGER;        -- the tracker's attempt number of the job
ALTER TABLE trials ADD COLUMN received REAL;          -- Unix time (s) the tuner got the result

CREATE TABLE verifications (
  id        INTEGER PRIMARY KEY,  -- insertion order: the latest row of a trial is its verdict
  trial_id  INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  verdict   TEXT NOT NULL CHECK (verdict IN ('verified', 'suspect', 'unverified')),
  agent_id  INTEGER REFERENCES agents(id),  -- the agent that re-measured it; NULL if none
  error_no  INTEGER NOT NULL,               -- of the re-measurement
  cost      REAL,                           -- fastest run of it (s); NULL if none
  ratio     REAL,                           -- cost / the trial's recorded mean cost
  message   TEXT NOT NULL DEFAULT '',
  timestamp REAL NOT NULL
);
CREATE INDEX verifications_trial ON verifications(trial_id);
)sql";

// Version 3: model runs (records.hpp): a whole-model tuning, the jobs of its tasks with their
// weights, and its estimated latency as the tuning went. A job may belong to several runs.
constexpr const char* kSchemaV3 = R"sql(
CREATE TABLE model_runs (
  id           INTEGER PRIMARY KEY,
  model        TEXT NOT NULL,
  target_id    INTEGER NOT NULL REFERENCES targets(id),
  device_id    INTEGER NOT NULL REFERENCES devices(id),
  schedule     TEXT NOT NULL DEFAULT '',  -- the task schedule: 'gradient', 'round-robin'
  total_trials INTEGER NOT NULL DEFAULT 0, -- the session's budget; 0: per-task budgets only
  started      REAL NOT NULL               -- Unix time (s)
);

CREATE TABLE model_run_jobs (
  run_id INTEGER NOT NULL REFERENCES model_runs(id) ON DELETE CASCADE,
  job_id INTEGER NOT NULL REFERENCES tuning_jobs(id) ON DELETE CASCADE,
  weight INTEGER NOT NULL CHECK (weight >= 1),  -- times the model runs the task
  PRIMARY KEY (run_id, job_id)
);
CREATE INDEX model_run_jobs_job ON model_run_jobs(job_id);

CREATE TABLE model_estimates (
  id         INTEGER PRIMARY KEY,  -- insertion order
  run_id     INTEGER NOT NULL REFERENCES model_runs(id) ON DELETE CASCADE,
  trials     INTEGER NOT NULL,     -- sum of the run's tasks' trials when estimated
  elapsed    REAL NOT NULL,        -- seconds since the session started
  latency_ms REAL NOT NULL,        -- sum of weight x best mean cost
  timestamp  REAL NOT NULL
);
CREATE INDEX model_estimates_run ON model_estimates(run_id);
)sql";

// Version 4: measurements of whole compiled models on the farm (issue 16 item 3, `webtune
// measure-model`): one row per model job, written by the client. Keys are kept as text, not as
// device/agent ids: a package's target ("webgl2") is not a kernel target, and these rows are read
// on their own (the dashboard's Models panel).
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE model_measurements (
  id              INTEGER PRIMARY KEY,  -- insertion order
  created         REAL NOT NULL,        -- Unix time (s)
  model           TEXT NOT NULL,        -- the package's name (its folder under --models)
  manifest_sha256 TEXT NOT NULL,        -- of the package's manifest.json
  model_sha256    TEXT NOT NULL DEFAULT '',  -- of the ONNX file (the manifest's model.sha256)
  target          TEXT NOT NULL,        -- the package's target: webgl2, webgpu, wasm, gles-*
  device_key      TEXT NOT NULL DEFAULT '',  -- the agent key that measured it
  agent           TEXT NOT NULL DEFAULT '',
  seed            INTEGER NOT NULL,
  costs_json      TEXT NOT NULL,        -- [seconds per inference, ...]; [] on error
  median_ms       REAL,                 -- NULL on error
  min_ms          REAL,                 -- NULL on error
  estimated_ms    REAL,                 -- the manifest's estimated_ms; NULL when it has none
  error_no        INTEGER NOT NULL,     -- MeasureErrorNo
  message         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX model_measurements_model ON model_measurements(model, device_key);
)sql";

// Version 5: foreign AutoTVM records (issue 18, `log import --keep-foreign`): read-only history
// of other targets' tunings, looked up by workload key. The whole line is kept (UNIQUE: importing
// a log twice stores it once), so nothing the foreign template wrote is lost. IF NOT EXISTS: a
// file whose version was set back by hand (tests do) may hold the table already.
constexpr const char* kSchemaV5 = R"sql(
CREATE TABLE IF NOT EXISTS foreign_records (
  id             INTEGER PRIMARY KEY,   -- insertion order
  workload_key   TEXT NOT NULL,         -- Workload::key() of the anchor op; '' when none
  target         TEXT NOT NULL,         -- the TVM target string as written
  task_name      TEXT NOT NULL,         -- the TVM task name as written
  foreign_target TEXT NOT NULL,         -- the task name's suffix: mali, cuda, ...
  config_index   INTEGER NOT NULL,
  entity_json    TEXT NOT NULL,         -- config.entity as written
  error_no       INTEGER NOT NULL,
  costs_json     TEXT NOT NULL,         -- [seconds, ...]; [] on error
  all_cost       REAL NOT NULL,
  timestamp      REAL NOT NULL,
  source         TEXT NOT NULL DEFAULT '',
  line           TEXT NOT NULL UNIQUE,  -- the log line as read
  imported       REAL NOT NULL          -- Unix time (s)
);
CREATE INDEX IF NOT EXISTS foreign_records_workload ON foreign_records(workload_key);
)sql";

/// Brings the schema from `version` to kSchemaVersion, inside the caller's transaction.
void migrate(sql::Connection* db, int version) {
  if (version < 1) exec(db, kSchemaV1, "creating the schema");
  if (version < 2) exec(db, kSchemaV2, "migrating the schema to version 2");
  if (version < 3) exec(db, kSchemaV3, "migrating the schema to version 3");
  if (version < 4) exec(db, kSchemaV4, "migrating the schema to version 4");
  if (version < 5) exec(db, kSchemaV5, "migrating the schema to version 5");
}

/// True when the latest verification of trial `alias`.id says suspect: an SQL condition.
#define WEBTUNE_NOT_SUSPECT(alias)                                            \
  "coalesce((SELECT v.verdict FROM verifications v WHERE v.trial_id = " alias \
  ".id ORDER BY v.id DESC LIMIT 1), '') <> 'suspect'"

// ---- ids ----------------------------------------------------------------------------------

// The ids of workloads, targets, devices and agents, each row inserted when missing.

int64_t workload_id(sql::Connection* db, const Workload& workload) {
  bj::object json = workload.to_json();
  json.erase("name");  // the name belongs to the job: two tasks can share shapes
  const std::string key = workload.key();
  Statement insert(db,
                   "INSERT INTO workloads(key, op, json, flops) VALUES(?1, ?2, ?3, ?4) "
                   "ON CONFLICT(key) DO NOTHING",
                   "storing workload " + key);
  insert.bind(1, key)
      .bind(2, op_name(workload.op))
      .bind(3, bj::serialize(json))
      .bind(4, workload.flops())
      .run();
  Statement select(db, "SELECT id FROM workloads WHERE key = ?1", "looking up workload " + key);
  select.bind(1, key);
  if (!select.step()) throw std::runtime_error("records: workload " + key + " vanished");
  return select.get_int(0);
}

int64_t target_id(sql::Connection* db, Target target) {
  const std::string name(target_name(target));
  Statement insert(db, "INSERT INTO targets(name) VALUES(?1) ON CONFLICT(name) DO NOTHING",
                   "storing target " + name);
  insert.bind(1, name).run();
  Statement select(db, "SELECT id FROM targets WHERE name = ?1", "looking up target " + name);
  select.bind(1, name);
  if (!select.step()) throw std::runtime_error("records: target " + name + " vanished");
  return select.get_int(0);
}

int64_t device_id(sql::Connection* db, const std::string& key) {
  Statement insert(db,
                   "INSERT INTO devices(key, updated) VALUES(?1, ?2) ON CONFLICT(key) DO NOTHING",
                   "storing device " + key);
  insert.bind(1, key).bind(2, now_s()).run();
  Statement select(db, "SELECT id FROM devices WHERE key = ?1", "looking up device " + key);
  select.bind(1, key);
  if (!select.step()) throw std::runtime_error("records: device " + key + " vanished");
  return select.get_int(0);
}

int64_t agent_id(sql::Connection* db, const std::string& name, int64_t device) {
  Statement upsert(db,
                   "INSERT INTO agents(name, device_id, last_seen) VALUES(?1, ?2, ?3) "
                   "ON CONFLICT(name) DO UPDATE SET device_id = excluded.device_id, "
                   "last_seen = excluded.last_seen RETURNING id",
                   "storing agent " + name);
  upsert.bind(1, name).bind(2, device).bind(3, now_s());
  if (!upsert.step()) throw std::runtime_error("records: agent " + name + " vanished");
  const int64_t id = upsert.get_int(0);
  upsert.run();  // RETURNING: the statement completes on the step after the row
  return id;
}

/// Creates or reopens a job, inside the caller's transaction. `resume` marks it "running"
/// (open_job); otherwise a new job gets `new_status` (empty: "done") and an existing one keeps
/// its status (import).
int64_t ensure_job(sql::Connection* db, const Workload& workload, Target target,
                   const std::string& device_key, const std::string& task_name,
                   const std::string& tuner, const std::string& options_json, bool resume,
                   const std::string& new_status = {}) {
  const int64_t w = workload_id(db, workload);
  const int64_t t = target_id(db, target);
  const int64_t d = device_id(db, device_key);
  const std::string task = task_name.empty() ? workload.name : task_name;
  const std::string options = options_json.empty() ? "{}" : options_json;
  const double now = now_s();
  // On conflict, values left at their defaults keep what is stored (see open_job).
  Statement upsert(db,
                   "INSERT INTO tuning_jobs(workload_id, target_id, device_id, task_name, tuner, "
                   "options_json, status, created, updated) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8) "
                   "ON CONFLICT(workload_id, target_id, device_id) DO UPDATE SET "
                   "task_name = CASE WHEN excluded.task_name <> '' THEN excluded.task_name "
                   "ELSE tuning_jobs.task_name END, "
                   "tuner = CASE WHEN excluded.tuner <> '' THEN excluded.tuner "
                   "ELSE tuning_jobs.tuner END, "
                   "options_json = CASE WHEN excluded.options_json <> '{}' "
                   "THEN excluded.options_json ELSE tuning_jobs.options_json END, "
                   "status = CASE WHEN ?9 = 1 THEN 'running' ELSE tuning_jobs.status END, "
                   "updated = excluded.updated "
                   "RETURNING id",
                   "opening the job of " + workload.key() + " on " +
                       std::string(target_name(target)) + " / " + device_key);
  upsert.bind(1, w)
      .bind(2, t)
      .bind(3, d)
      .bind(4, task)
      .bind(5, tuner)
      .bind(6, options)
      .bind(7, resume               ? "running"
               : new_status.empty() ? "done"
                                    : new_status)
      .bind(8, now)
      .bind(9, resume ? 1 : 0);
  if (!upsert.step()) throw std::runtime_error("records: the job upsert returned no id");
  const int64_t id = upsert.get_int(0);
  upsert.run();
  return id;
}

void check_json(const std::string& text, std::string_view what) {
  boost::system::error_code ec;
  bj::parse(text, ec);
  if (ec) throw std::invalid_argument(std::string(what) + " is not JSON: " + ec.message());
}

/// Checks that a trial's config JSON is an entity (as ConfigEntity::to_json writes it) of its
/// index: the export and the tuner's resume read it back.
void check_config_json(const TrialRecord& trial) {
  const std::string what = "trial of config " + std::to_string(trial.config_index);
  boost::system::error_code ec;
  const bj::value config = bj::parse(trial.config_json, ec);
  if (ec) throw std::invalid_argument(what + ": config_json is not JSON: " + ec.message());
  const bj::object& o = json::as_object(config, what + ": config_json");
  if (!json::field(o, "entity").is_array())
    throw std::invalid_argument(what + ": config_json 'entity' must be an array");
  if (o.contains("index") && json::get_int(o, "index") != trial.config_index)
    throw std::invalid_argument(what + ": config_json has index " +
                                std::to_string(json::get_int(o, "index")));
}

/// Inserts trials of job `job_id`, inside the caller's transaction; returns how many were new.
int insert_trials(sql::Connection* db, int64_t job_id, const std::vector<TrialRecord>& trials) {
  const std::string job_text = "job " + std::to_string(job_id);
  Statement job(db,
                "SELECT w.flops, j.device_id FROM tuning_jobs j "
                "JOIN workloads w ON w.id = j.workload_id WHERE j.id = ?1",
                "looking up " + job_text);
  job.bind(1, job_id);
  if (!job.step()) throw std::runtime_error("records: add_trials: no " + job_text);
  const double flops = job.get_double(0);
  const int64_t device = job.get_int(1);

  Statement insert(db,
                   "INSERT INTO trials(job_id, config_index, entity_json, error_no, message, "
                   "costs_json, mean_cost, gflops, all_cost, timestamp, agent_id, agent_session, "
                   "attempt, received) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
                   "ON CONFLICT(job_id, config_index) DO NOTHING",
                   "storing a trial of " + job_text);
  std::map<std::string, int64_t> agents;
  int inserted = 0;
  for (const TrialRecord& trial : trials) {
    check_config_json(trial);
    const MeasureResult& r = trial.result;
    bj::array costs;
    for (double c : r.costs) {
      // bj::serialize writes NaN and infinities as non-JSON tokens, which no reader takes back.
      if (!std::isfinite(c))
        throw std::invalid_argument("trial of config " + std::to_string(trial.config_index) +
                                    ": costs must be finite numbers");
      costs.emplace_back(c);
    }
    insert.reset();
    insert.bind(1, job_id)
        .bind(2, trial.config_index)
        .bind(3, trial.config_json)
        .bind(4, static_cast<int>(r.error))
        .bind(5, r.message)
        .bind(6, bj::serialize(costs))
        .bind(8, r.gflops(flops))
        .bind(9, r.all_cost)
        .bind(10, r.timestamp);
    if (r.ok() && !r.costs.empty())
      insert.bind(7, r.mean_cost());
    else
      insert.bind_null(7);
    if (trial.agent.empty()) {
      insert.bind_null(11);
    } else {
      auto it = agents.find(trial.agent);
      if (it == agents.end())
        it = agents.emplace(trial.agent, agent_id(db, trial.agent, device)).first;
      insert.bind(11, it->second);
    }
    // 0 means unknown: stored as NULL, so that audits can tell "not recorded" from a value.
    if (trial.agent_session > 0)
      insert.bind(12, static_cast<int64_t>(trial.agent_session));
    else
      insert.bind_null(12);
    if (trial.attempt > 0)
      insert.bind(13, trial.attempt);
    else
      insert.bind_null(13);
    if (trial.received > 0)
      insert.bind(14, trial.received);
    else
      insert.bind_null(14);
    insert.run();
    inserted += static_cast<int>(insert.changes());
  }
  Statement touch(db, "UPDATE tuning_jobs SET updated = ?2 WHERE id = ?1", "updating " + job_text);
  touch.bind(1, job_id).bind(2, now_s()).run();
  return inserted;
}

// ---- reading rows -------------------------------------------------------------------------

// Columns of kJobSelect, in order; the WHERE clauses below are appended to it.
constexpr std::string_view kJobSelect =
    "SELECT j.id, w.json, t.name, d.key, j.task_name, j.tuner, j.status, j.created, j.updated, "
    "(SELECT count(*) FROM trials x WHERE x.job_id = j.id), "
    "(SELECT count(*) FROM trials x WHERE x.job_id = j.id AND x.error_no <> 0), "
    "(SELECT coalesce(max(x.gflops), 0) FROM trials x WHERE x.job_id = j.id AND x.error_no = 0 "
    "AND " WEBTUNE_NOT_SUSPECT("x") ") "
    "FROM tuning_jobs j JOIN workloads w ON w.id = j.workload_id "
    "JOIN targets t ON t.id = j.target_id JOIN devices d ON d.id = j.device_id ";
// ?1: substring of the workload key or task name ('' = any); ?2: target name ('' = any).
constexpr std::string_view kJobFilter =
    "WHERE (?1 = '' OR instr(w.key, ?1) > 0 OR instr(j.task_name, ?1) > 0) "
    "AND (?2 = '' OR t.name = ?2) ORDER BY j.id";

TuningJobInfo read_job(const Statement& s) {
  TuningJobInfo job;
  job.id = s.get_int(0);
  // Validated like any workload from text (Workload::validate): an edited or foreign file must
  // not hand out-of-bounds shapes to the emitters.
  try {
    job.workload = Workload::from_json(bj::parse(s.get_text(1)));
  } catch (const std::exception& e) {
    throw std::runtime_error("records: job " + std::to_string(job.id) +
                             " has an unusable workload: " + e.what());
  }
  job.target = target_from_name(s.get_text(2));
  job.device_key = s.get_text(3);
  job.task_name = s.get_text(4);
  job.workload.name = job.task_name;
  job.tuner = s.get_text(5);
  job.status = s.get_text(6);
  job.created = s.get_double(7);
  job.updated = s.get_double(8);
  job.trials = s.get_int(9);
  job.errors = s.get_int(10);
  job.best_gflops = s.get_double(11);
  return job;
}

std::vector<TuningJobInfo> select_jobs(sql::Connection* db, const std::string& workload_filter,
                                       const std::string& target_filter) {
  Statement s(db, std::string(kJobSelect) + std::string(kJobFilter), "listing jobs");
  s.bind(1, workload_filter).bind(2, target_filter);
  std::vector<TuningJobInfo> jobs;
  while (s.step()) jobs.push_back(read_job(s));
  return jobs;
}

constexpr std::string_view kTrialSelect =
    "SELECT tr.id, tr.job_id, tr.config_index, tr.entity_json, tr.error_no, tr.message, "
    "tr.costs_json, tr.all_cost, tr.timestamp, tr.gflops, coalesce(a.name, ''), "
    "coalesce(tr.agent_session, 0), coalesce(tr.attempt, 0), coalesce(tr.received, 0), "
    "coalesce((SELECT v.verdict FROM verifications v WHERE v.trial_id = tr.id "
    "ORDER BY v.id DESC LIMIT 1), '') "
    "FROM trials tr LEFT JOIN agents a ON a.id = tr.agent_id ";

TrialRecord read_trial(const Statement& s) {
  TrialRecord t;
  t.id = s.get_int(0);
  t.job_id = s.get_int(1);
  t.config_index = s.get_int(2);
  t.config_json = s.get_text(3);
  t.result.error = error_from_int(static_cast<int>(s.get_int(4)));
  t.result.message = s.get_text(5);
  const bj::value costs = bj::parse(s.get_text(6));
  for (const bj::value& c : costs.as_array()) t.result.costs.push_back(json::to_double(c, "cost"));
  t.result.all_cost = s.get_double(7);
  t.result.timestamp = s.get_double(8);
  t.gflops = s.get_double(9);
  t.agent = s.get_text(10);
  t.agent_session = static_cast<uint64_t>(s.get_int(11));
  t.attempt = static_cast<int>(s.get_int(12));
  t.received = s.get_double(13);
  t.verdict = s.get_text(14);
  return t;
}

constexpr std::string_view kVerificationSelect =
    "SELECT v.id, v.trial_id, v.verdict, coalesce(a.name, ''), v.error_no, "
    "coalesce(v.cost, 0), coalesce(v.ratio, 0), v.message, v.timestamp "
    "FROM verifications v LEFT JOIN agents a ON a.id = v.agent_id ";

VerificationRecord read_verification(const Statement& s) {
  VerificationRecord v;
  v.id = s.get_int(0);
  v.trial_id = s.get_int(1);
  v.verdict = s.get_text(2);
  v.agent = s.get_text(3);
  v.error = error_from_int(static_cast<int>(s.get_int(4)));
  v.cost = s.get_double(5);
  v.ratio = s.get_double(6);
  v.message = s.get_text(7);
  v.timestamp = s.get_double(8);
  return v;
}

bool known_status(std::string_view status) {
  return status == "running" || status == "done" || status == "stopped" ||
         status == "interrupted" || status == "failed";
}

bool known_verdict(std::string_view verdict) {
  return verdict == kVerified || verdict == kSuspect || verdict == kUnverified;
}

/// Inserts a verification, inside the caller's transaction (or none); returns its id.
int64_t insert_verification(sql::Connection* db, const VerificationRecord& v) {
  if (!known_verdict(v.verdict))
    throw std::invalid_argument("records: unknown verdict '" + v.verdict +
                                "' (verified, suspect or unverified)");
  const std::string what = "verifying trial " + std::to_string(v.trial_id);
  Statement trial(db,
                  "SELECT j.device_id FROM trials tr JOIN tuning_jobs j ON j.id = tr.job_id "
                  "WHERE tr.id = ?1",
                  what);
  trial.bind(1, v.trial_id);
  if (!trial.step())
    throw std::runtime_error("records: add_verification: no trial " + std::to_string(v.trial_id));
  const int64_t device = trial.get_int(0);
  Statement insert(db,
                   "INSERT INTO verifications(trial_id, verdict, agent_id, error_no, cost, "
                   "ratio, message, timestamp) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                   "RETURNING id",
                   what);
  insert.bind(1, v.trial_id).bind(2, v.verdict).bind(4, static_cast<int>(v.error));
  if (v.agent.empty())
    insert.bind_null(3);
  else
    insert.bind(3, agent_id(db, v.agent, device));
  if (v.cost > 0)
    insert.bind(5, v.cost);
  else
    insert.bind_null(5);
  if (v.ratio > 0)
    insert.bind(6, v.ratio);
  else
    insert.bind_null(6);
  insert.bind(7, v.message).bind(8, v.timestamp > 0 ? v.timestamp : now_s());
  return insert.insert_id();
}

}  // namespace

ConfigEntity config_in_space(const ConfigSpace& space, const Workload& workload, Target target,
                             const std::string& config_json, bool succeeded) {
  const std::string where = "config does not fit the " + std::string(target_name(target)) + " " +
                            std::string(op_name(workload.op)) + " template (" + workload.key() +
                            "): ";
  boost::system::error_code ec;
  const bj::value config = bj::parse(config_json, ec);
  if (ec) throw std::invalid_argument(where + "its JSON does not parse: " + ec.message());
  ConfigEntity entity;
  try {
    // An old log's index may predate the space's growth: the entity names the kernel.
    entity = space.from_json(config, ConfigSpace::StaleIndex::kRenumber);
  } catch (const std::exception& e) {  // MeasureError(kInstantiation) naming the knob
    throw std::invalid_argument(where + e.what());
  }
  std::string why;
  if (succeeded && !space.satisfies_constraints(entity)) {
    space.is_valid(entity, &why);  // constraints come first: `why` names the broken one
    throw std::invalid_argument(where + "a successful trial of config " +
                                std::to_string(entity.index()) + ", which " + why +
                                " and so cannot have been built");
  }
  return entity;
}

ConfigEntity config_in_space(const Workload& workload, Target target,
                             const std::string& config_json, bool succeeded) {
  const Task task = Task::create(workload, target);
  return config_in_space(*task.space, workload, target, config_json, succeeded);
}

// ---- RecordStore --------------------------------------------------------------------------

namespace {

std::unique_ptr<sql::Connection> open_connection(const std::string& path,
                                                 RecordStore::Access access) {
  if (access == RecordStore::Access::kReadOnly && !sql::is_postgres_url(path))
    return sql::open_sqlite_snapshot(path);
  return sql::open(path);
}

}  // namespace

RecordStore::RecordStore(const std::string& path, Access access)
    : path_(sql::is_postgres_url(path) ? sql::redact_url(path) : path),
      connection_(open_connection(path, access)),
      db_(connection_.get()) {
  Transaction tx(db_, "creating the schema of '" + path_ + "'");
  const int version = db_->schema_version();
  if (version > kSchemaVersion)
    throw std::runtime_error("records: '" + path_ + "' has schema version " +
                             std::to_string(version) + ", newer than this webtune's (" +
                             std::to_string(kSchemaVersion) + "); update webtune");
  // A read-only SQLite store is an in-memory copy, migrated freely; a PostgreSQL database is
  // the real one, so it is not touched.
  if (version < kSchemaVersion && access == Access::kReadOnly && is_postgres())
    throw std::runtime_error(
        "records: '" + path_ + "' has schema version " + std::to_string(version) +
        ", older than this webtune's (" + std::to_string(kSchemaVersion) +
        ") and is opened read-only; migrate it first: `webtune log list --db URL` opens it "
        "read-write and updates its schema");
  if (version < kSchemaVersion) {
    migrate(db_, version);
    db_->set_schema_version(kSchemaVersion);
  }
  tx.commit();
}

RecordStore::~RecordStore() = default;

bool RecordStore::is_postgres() const {
  return db_->dialect() == sql::Dialect::kPostgres;
}

bool is_postgres_url(const std::string& location) {
  return sql::is_postgres_url(location);
}

int64_t RecordStore::open_job(const Workload& workload, Target target,
                              const std::string& device_key, const std::string& task_name,
                              const std::string& tuner, const std::string& options_json) {
  check_json(options_json.empty() ? "{}" : options_json, "open_job: options_json");
  Transaction tx(db_, "opening a job");
  const int64_t id =
      ensure_job(db_, workload, target, device_key, task_name, tuner, options_json, true);
  tx.commit();
  return id;
}

void RecordStore::upsert_device(const std::string& device_key, const std::string& info_json) {
  check_json(info_json, "upsert_device: info_json of '" + device_key + "'");
  Statement s(db_,
              "INSERT INTO devices(key, info_json, updated) VALUES(?1, ?2, ?3) "
              "ON CONFLICT(key) DO UPDATE SET info_json = excluded.info_json, "
              "updated = excluded.updated",
              "storing device " + device_key);
  s.bind(1, device_key).bind(2, info_json).bind(3, now_s()).run();
}

std::vector<std::string> RecordStore::device_keys() const {
  Statement s(db_, "SELECT key FROM devices ORDER BY key", "listing devices");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.get_text(0));
  return out;
}

std::optional<std::string> RecordStore::device_info(const std::string& device_key) const {
  Statement s(db_, "SELECT info_json FROM devices WHERE key = ?1", "reading device " + device_key);
  s.bind(1, device_key);
  if (!s.step() || s.is_null(0)) return std::nullopt;
  return s.get_text(0);
}

int RecordStore::add_trials(int64_t job_id, const std::vector<TrialRecord>& trials) {
  Transaction tx(db_, "adding trials to job " + std::to_string(job_id));
  const int inserted = insert_trials(db_, job_id, trials);
  tx.commit();
  return inserted;
}

int RecordStore::renumber_trials(int64_t job_id, const ConfigSpace& space) {
  const std::string what = "renumbering the trials of job " + std::to_string(job_id);
  Transaction tx(db_, what);
  Statement job(db_, "SELECT 1 FROM tuning_jobs WHERE id = ?1", what);
  job.bind(1, job_id);
  if (!job.step())
    throw std::runtime_error("records: renumber_trials: no job " + std::to_string(job_id));

  struct Move {
    int64_t id, index;
    std::string config_json;
  };
  std::vector<Move> moves;
  std::set<int64_t> held;  // indices that stay taken: unmoved trials and the moves' targets
  Statement read(
      db_, "SELECT id, config_index, entity_json FROM trials WHERE job_id = ?1 ORDER BY id", what);
  read.bind(1, job_id);
  std::vector<std::tuple<int64_t, int64_t, int64_t>> decoded;  // id, stored, current index
  std::vector<std::string> configs;
  while (read.step()) {
    const int64_t id = read.get_int(0), stored = read.get_int(1);
    held.insert(stored);
    boost::system::error_code ec;
    const bj::value config = bj::parse(read.get_text(2), ec);
    if (ec) continue;
    try {
      const ConfigEntity entity = space.from_json(config, ConfigSpace::StaleIndex::kRenumber);
      if (entity.index() == stored) continue;
      decoded.emplace_back(id, stored, entity.index());
      configs.push_back(bj::serialize(entity.to_json()));
    } catch (const std::exception&) {
      // No longer in the space: left where it is (the tuner's resume skips it with a warning).
    }
  }
  // A trial moves away from its stale index unless its new index is held by a trial that stays
  // (the same entity measured twice keeps both rows) or wanted by an earlier mover; a trial that
  // stays holds its stale index, which may stop another mover: repeat until nothing changes.
  std::vector<bool> stays(decoded.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    std::set<int64_t> taken = held;
    for (size_t i = 0; i < decoded.size(); ++i)
      if (!stays[i]) taken.erase(std::get<1>(decoded[i]));
    for (size_t i = 0; i < decoded.size(); ++i) {
      if (stays[i]) continue;
      if (!taken.insert(std::get<2>(decoded[i])).second) {
        stays[i] = changed = true;
        break;
      }
    }
  }
  for (size_t i = 0; i < decoded.size(); ++i)
    if (!stays[i]) moves.push_back({std::get<0>(decoded[i]), std::get<2>(decoded[i]), configs[i]});
  // Two steps through negative indices, so that no UPDATE meets the UNIQUE(job, index) of a row
  // that has not moved yet.
  Statement park(db_, "UPDATE trials SET config_index = -1 - ?2 WHERE id = ?1", what);
  for (const Move& m : moves) {
    park.reset();
    park.bind(1, m.id).bind(2, m.index).run();
  }
  Statement place(db_, "UPDATE trials SET config_index = ?2, entity_json = ?3 WHERE id = ?1", what);
  for (const Move& m : moves) {
    place.reset();
    place.bind(1, m.id).bind(2, m.index).bind(3, m.config_json).run();
  }
  tx.commit();
  return static_cast<int>(moves.size());
}

void RecordStore::set_status(int64_t job_id, const std::string& status) {
  if (!known_status(status))
    throw std::invalid_argument("records: unknown job status '" + status +
                                "' (running, done, stopped, interrupted or failed)");
  Statement s(db_, "UPDATE tuning_jobs SET status = ?2, updated = ?3 WHERE id = ?1",
              "setting the status of job " + std::to_string(job_id));
  s.bind(1, job_id).bind(2, status).bind(3, now_s()).run();
  if (s.changes() == 0)
    throw std::runtime_error("records: set_status: no job " + std::to_string(job_id));
}

std::vector<TuningJobInfo> RecordStore::jobs() const {
  return select_jobs(db_, {}, {});
}

std::vector<TuningJobInfo> RecordStore::jobs(const std::string& workload_filter,
                                             const std::string& target_filter) const {
  return select_jobs(db_, workload_filter, target_filter);
}

int64_t RecordStore::import_jobs(const std::vector<ImportedJob>& jobs) {
  for (const ImportedJob& job : jobs)
    if (!job.status.empty() && !known_status(job.status))
      throw std::invalid_argument("records: import of " + job.workload.key() +
                                  ": unknown job status '" + job.status + "'");
  Transaction tx(db_, "importing records");
  int64_t imported = 0;
  for (const ImportedJob& job : jobs) {
    const int64_t job_id = ensure_job(db_, job.workload, job.target, job.device_key, job.task_name,
                                      job.tuner, "{}", false, job.status);
    imported += insert_trials(db_, job_id, job.trials);
  }
  tx.commit();
  return imported;
}

std::optional<TuningJobInfo> RecordStore::job(int64_t job_id) const {
  Statement s(db_, std::string(kJobSelect) + "WHERE j.id = ?1",
              "reading job " + std::to_string(job_id));
  s.bind(1, job_id);
  if (!s.step()) return std::nullopt;
  return read_job(s);
}

std::vector<TrialRecord> RecordStore::trials(int64_t job_id, int64_t limit, int64_t offset) const {
  Statement s(db_,
              std::string(kTrialSelect) +
                  "WHERE tr.job_id = ?1 ORDER BY tr.id LIMIT ?2 "
                  "OFFSET ?3",
              "reading the trials of job " + std::to_string(job_id));
  s.bind(1, job_id).bind(2, limit < 0 ? kNoLimit : limit).bind(3, std::max<int64_t>(0, offset));
  std::vector<TrialRecord> out;
  while (s.step()) out.push_back(read_trial(s));
  return out;
}

std::vector<BestRecord> RecordStore::best(const std::string& workload_filter,
                                          const std::string& target_filter) const {
  Statement s(db_,
              std::string(kTrialSelect) +
                  "WHERE tr.job_id = ?1 AND tr.error_no = 0 AND " WEBTUNE_NOT_SUSPECT(
                      "tr") " ORDER BY tr.gflops DESC, tr.id LIMIT 1",
              "finding the best trial");
  std::vector<BestRecord> out;
  for (TuningJobInfo& job : select_jobs(db_, workload_filter, target_filter)) {
    s.reset();
    s.bind(1, job.id);
    if (!s.step()) continue;
    TrialRecord trial = read_trial(s);
    std::optional<VerificationRecord> v = verification(trial.id);
    out.push_back({std::move(job), std::move(trial), std::move(v)});
  }
  return out;
}

std::optional<TrialRecord> RecordStore::best_trial(int64_t job_id) const {
  Statement s(db_,
              std::string(kTrialSelect) +
                  "WHERE tr.job_id = ?1 AND tr.error_no = 0 AND " WEBTUNE_NOT_SUSPECT(
                      "tr") " ORDER BY tr.gflops DESC, tr.id LIMIT 1",
              "finding the best trial of job " + std::to_string(job_id));
  s.bind(1, job_id);
  if (!s.step()) return std::nullopt;
  return read_trial(s);
}

int64_t RecordStore::add_verification(const VerificationRecord& verification) {
  return insert_verification(db_, verification);
}

int RecordStore::mark_agent_suspect(int64_t job_id, const std::string& agent,
                                    const std::string& message) {
  Transaction tx(db_, "marking the trials of agent " + agent + " suspect");
  if (!job(job_id))
    throw std::runtime_error("records: mark_agent_suspect: no job " + std::to_string(job_id));
  std::vector<int64_t> ids;
  {
    // Successful trials of the agent whose latest verdict is not already suspect, and not a
    // verification by another agent (which vouches for the config, whoever measured it first).
    Statement s(db_,
                "SELECT tr.id FROM trials tr JOIN agents a ON a.id = tr.agent_id "
                "WHERE tr.job_id = ?1 AND a.name = ?2 AND tr.error_no = 0 AND "
                "coalesce((SELECT v.verdict FROM verifications v WHERE v.trial_id = tr.id "
                "ORDER BY v.id DESC LIMIT 1), '') NOT IN ('suspect', 'verified') ORDER BY tr.id",
                "finding the trials of agent " + agent);
    s.bind(1, job_id).bind(2, agent);
    while (s.step()) ids.push_back(s.get_int(0));
  }
  for (int64_t id : ids) {
    VerificationRecord v;
    v.trial_id = id;
    v.verdict = kSuspect;
    v.error = MeasureErrorNo::kNoError;
    v.message = message;
    insert_verification(db_, v);
  }
  tx.commit();
  return static_cast<int>(ids.size());
}

std::optional<VerificationRecord> RecordStore::verification(int64_t trial_id) const {
  Statement s(db_,
              std::string(kVerificationSelect) +
                  "WHERE v.trial_id = ?1 ORDER BY v.id DESC "
                  "LIMIT 1",
              "reading the verification of trial " + std::to_string(trial_id));
  s.bind(1, trial_id);
  if (!s.step()) return std::nullopt;
  return read_verification(s);
}

std::vector<VerificationRecord> RecordStore::verifications(int64_t job_id) const {
  Statement s(db_,
              std::string(kVerificationSelect) +
                  "JOIN trials tr ON tr.id = v.trial_id WHERE tr.job_id = ?1 ORDER BY v.id",
              "reading the verifications of job " + std::to_string(job_id));
  s.bind(1, job_id);
  std::vector<VerificationRecord> out;
  while (s.step()) out.push_back(read_verification(s));
  return out;
}

int64_t RecordStore::trial_number(int64_t job_id, int64_t trial_id) const {
  Statement s(db_,
              "SELECT CASE WHEN EXISTS(SELECT 1 FROM trials WHERE id = ?2 AND job_id = ?1) "
              "THEN (SELECT count(*) FROM trials WHERE job_id = ?1 AND id <= ?2) ELSE 0 END",
              "numbering trial " + std::to_string(trial_id));
  s.bind(1, job_id).bind(2, trial_id);
  return s.step() ? s.get_int(0) : 0;
}

std::vector<std::pair<MeasureErrorNo, int64_t>> RecordStore::error_counts(int64_t job_id) const {
  Statement s(db_,
              "SELECT error_no, count(*) FROM trials WHERE ?1 = 0 OR job_id = ?1 "
              "GROUP BY error_no ORDER BY error_no",
              "counting the errors of job " + std::to_string(job_id));
  s.bind(1, job_id);
  std::vector<std::pair<MeasureErrorNo, int64_t>> out;
  while (s.step()) out.emplace_back(error_from_int(static_cast<int>(s.get_int(0))), s.get_int(1));
  return out;
}

std::vector<AgentRecord> RecordStore::agents() const {
  Statement s(db_,
              "SELECT a.name, coalesce(d.key, ''), coalesce(d.info_json, '{}'), a.last_seen, "
              "(SELECT count(*) FROM trials x WHERE x.agent_id = a.id), "
              "(SELECT count(*) FROM trials x WHERE x.agent_id = a.id AND x.error_no <> 0) "
              "FROM agents a LEFT JOIN devices d ON d.id = a.device_id ORDER BY a.name",
              "listing agents");
  std::vector<AgentRecord> out;
  while (s.step()) {
    AgentRecord a;
    a.name = s.get_text(0);
    a.device_key = s.get_text(1);
    a.device_info_json = s.get_text(2);
    a.last_seen = s.get_double(3);
    a.trials = s.get_int(4);
    a.errors = s.get_int(5);
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<std::pair<TuningJobInfo, std::vector<TrialRecord>>> RecordStore::related_trials(
    OpKind op, Target target, int64_t exclude_job_id) const {
  std::vector<TuningJobInfo> jobs;
  {
    Statement s(db_,
                std::string(kJobSelect) +
                    "WHERE w.op = ?1 AND t.name = ?2 AND j.id <> ?3 "
                    "ORDER BY j.id",
                "finding related jobs");
    s.bind(1, op_name(op)).bind(2, target_name(target)).bind(3, exclude_job_id);
    while (s.step()) jobs.push_back(read_job(s));
  }
  std::vector<std::pair<TuningJobInfo, std::vector<TrialRecord>>> out;
  for (TuningJobInfo& job : jobs) {
    std::vector<TrialRecord> t = trials(job.id);
    out.emplace_back(std::move(job), std::move(t));
  }
  return out;
}

// ---- model runs ---------------------------------------------------------------------------

namespace {

constexpr std::string_view kModelRunSelect =
    "SELECT r.id, r.model, t.name, d.key, r.schedule, r.total_trials, r.started, "
    "(SELECT count(*) FROM model_estimates e WHERE e.run_id = r.id) "
    "FROM model_runs r JOIN targets t ON t.id = r.target_id JOIN devices d ON d.id = r.device_id ";

constexpr std::string_view kEstimateSelect =
    "SELECT trials, elapsed, latency_ms, timestamp FROM model_estimates WHERE run_id = ?1 ";

ModelEstimate read_estimate(const Statement& s) {
  ModelEstimate e;
  e.trials = s.get_int(0);
  e.elapsed_s = s.get_double(1);
  e.latency_ms = s.get_double(2);
  e.timestamp = s.get_double(3);
  return e;
}

/// The run of the current row of kModelRunSelect, with its jobs and latest estimate.
ModelRunInfo read_model_run(sql::Connection* db, const Statement& s) {
  ModelRunInfo run;
  run.id = s.get_int(0);
  run.model = s.get_text(1);
  run.target = target_from_name(s.get_text(2));
  run.device_key = s.get_text(3);
  run.schedule = s.get_text(4);
  run.total_trials = s.get_int(5);
  run.started = s.get_double(6);
  run.estimates = s.get_int(7);
  const std::string what = "reading model run " + std::to_string(run.id);
  Statement jobs(db,
                 "SELECT m.job_id, j.task_name, m.weight FROM model_run_jobs m "
                 "JOIN tuning_jobs j ON j.id = m.job_id WHERE m.run_id = ?1 ORDER BY m.job_id",
                 what);
  jobs.bind(1, run.id);
  while (jobs.step()) run.jobs.push_back({jobs.get_int(0), jobs.get_text(1), jobs.get_int(2)});
  Statement latest(db, std::string(kEstimateSelect) + "ORDER BY id DESC LIMIT 1", what);
  latest.bind(1, run.id);
  if (latest.step()) run.latest = read_estimate(latest);
  return run;
}

void require_model_run(sql::Connection* db, int64_t run_id, std::string_view what) {
  Statement s(db, "SELECT 1 FROM model_runs WHERE id = ?1", what);
  s.bind(1, run_id);
  if (!s.step())
    throw std::runtime_error("records: " + std::string(what) + ": no model run " +
                             std::to_string(run_id));
}

}  // namespace

int64_t RecordStore::open_model_run(const std::string& model, Target target,
                                    const std::string& device_key, const std::string& schedule,
                                    int64_t total_trials) {
  if (model.empty()) throw std::invalid_argument("records: a model run needs a model name");
  if (total_trials < 0)
    throw std::invalid_argument("records: model run '" + model + "': negative total_trials");
  Transaction tx(db_, "opening a model run of " + model);
  const int64_t t = target_id(db_, target);
  const int64_t d = device_id(db_, device_key);
  Statement insert(db_,
                   "INSERT INTO model_runs(model, target_id, device_id, schedule, total_trials, "
                   "started) VALUES(?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                   "opening a model run of " + model);
  insert.bind(1, model).bind(2, t).bind(3, d).bind(4, schedule).bind(5, total_trials);
  insert.bind(6, now_s());
  const int64_t id = insert.insert_id();
  tx.commit();
  return id;
}

void RecordStore::add_model_run_job(int64_t run_id, int64_t job_id, int64_t weight) {
  const std::string what =
      "adding job " + std::to_string(job_id) + " to model run " + std::to_string(run_id);
  if (weight < 1)
    throw std::invalid_argument("records: " + what + ": the weight must be at least 1, not " +
                                std::to_string(weight));
  Transaction tx(db_, what);
  require_model_run(db_, run_id, what);
  Statement job(db_, "SELECT 1 FROM tuning_jobs WHERE id = ?1", what);
  job.bind(1, job_id);
  if (!job.step())
    throw std::runtime_error("records: " + what + ": no job " + std::to_string(job_id));
  Statement insert(db_,
                   "INSERT INTO model_run_jobs(run_id, job_id, weight) VALUES(?1, ?2, ?3) "
                   "ON CONFLICT(run_id, job_id) DO UPDATE SET weight = model_run_jobs.weight + "
                   "excluded.weight",
                   what);
  insert.bind(1, run_id).bind(2, job_id).bind(3, weight).run();
  tx.commit();
}

void RecordStore::add_model_estimate(int64_t run_id, const ModelEstimate& estimate) {
  const std::string what = "adding an estimate to model run " + std::to_string(run_id);
  if (!std::isfinite(estimate.latency_ms) || estimate.latency_ms < 0 || estimate.trials < 0 ||
      !std::isfinite(estimate.elapsed_s))
    throw std::invalid_argument("records: " + what +
                                ": the latency must be a finite number of ms >= 0, the trials "
                                ">= 0 and the elapsed time finite");
  require_model_run(db_, run_id, what);
  Statement insert(db_,
                   "INSERT INTO model_estimates(run_id, trials, elapsed, latency_ms, timestamp) "
                   "VALUES(?1, ?2, ?3, ?4, ?5)",
                   what);
  insert.bind(1, run_id).bind(2, estimate.trials).bind(3, estimate.elapsed_s);
  insert.bind(4, estimate.latency_ms)
      .bind(5, estimate.timestamp > 0 ? estimate.timestamp : now_s())
      .run();
}

std::vector<ModelRunInfo> RecordStore::model_runs() const {
  Statement s(db_, std::string(kModelRunSelect) + "ORDER BY r.id", "listing model runs");
  std::vector<ModelRunInfo> out;
  while (s.step()) out.push_back(read_model_run(db_, s));
  return out;
}

std::optional<ModelRunInfo> RecordStore::model_run(int64_t run_id) const {
  Statement s(db_, std::string(kModelRunSelect) + "WHERE r.id = ?1",
              "reading model run " + std::to_string(run_id));
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  return read_model_run(db_, s);
}

std::vector<ModelEstimate> RecordStore::model_estimates(int64_t run_id) const {
  Statement s(db_, std::string(kEstimateSelect) + "ORDER BY id",
              "reading the estimates of model run " + std::to_string(run_id));
  s.bind(1, run_id);
  std::vector<ModelEstimate> out;
  while (s.step()) out.push_back(read_estimate(s));
  return out;
}

std::vector<int64_t> RecordStore::model_runs_of_job(int64_t job_id) const {
  Statement s(db_, "SELECT run_id FROM model_run_jobs WHERE job_id = ?1 ORDER BY run_id",
              "finding the model runs of job " + std::to_string(job_id));
  s.bind(1, job_id);
  std::vector<int64_t> out;
  while (s.step()) out.push_back(s.get_int(0));
  return out;
}

// ---- model measurements -----------------------------------------------------------------

int64_t RecordStore::add_model_measurement(const ModelMeasurementRecord& m) {
  if (m.model.empty()) throw std::invalid_argument("records: a model measurement needs a model");
  if (m.estimated_ms && (!std::isfinite(*m.estimated_ms) || *m.estimated_ms < 0))
    throw std::invalid_argument("records: model measurement of '" + m.model +
                                "': estimated_ms must be finite and >= 0");
  const bool ok = m.error == MeasureErrorNo::kNoError;
  std::vector<double> costs = ok ? m.costs : std::vector<double>{};
  bj::array costs_json;
  for (double c : costs) {
    if (!std::isfinite(c) || c <= 0)
      throw std::invalid_argument("records: model measurement of '" + m.model +
                                  "': costs must be finite and > 0 seconds");
    costs_json.push_back(c);
  }
  Statement s(db_,
              "INSERT INTO model_measurements(created, model, manifest_sha256, model_sha256, "
              "target, device_key, agent, seed, costs_json, median_ms, min_ms, estimated_ms, "
              "error_no, message) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
              "?14) RETURNING id",
              "storing a model measurement of '" + m.model + "'");
  s.bind(1, m.created > 0 ? m.created : now_s())
      .bind(2, m.model)
      .bind(3, m.manifest_sha256)
      .bind(4, m.model_sha256)
      .bind(5, m.target)
      .bind(6, m.device_key)
      .bind(7, m.agent)
      .bind(8, static_cast<int64_t>(m.seed))
      .bind(9, bj::serialize(costs_json));
  if (!costs.empty()) {
    s.bind(10, median_of(costs) * 1e3)
        .bind(11, *std::min_element(costs.begin(), costs.end()) * 1e3);
  } else {
    s.bind_null(10).bind_null(11);
  }
  if (m.estimated_ms)
    s.bind(12, *m.estimated_ms);
  else
    s.bind_null(12);
  s.bind(13, static_cast<int>(m.error)).bind(14, m.message);
  return s.insert_id();
}

std::vector<ModelMeasurementRecord> RecordStore::model_measurements(const std::string& model,
                                                                    int64_t limit) const {
  Statement s(db_,
              "SELECT id, created, model, manifest_sha256, model_sha256, target, device_key, "
              "agent, seed, costs_json, median_ms, min_ms, estimated_ms, error_no, message "
              "FROM model_measurements WHERE (?1 = '' OR model = ?1) ORDER BY id DESC LIMIT ?2",
              "listing model measurements");
  s.bind(1, model).bind(2, limit < 0 ? kNoLimit : limit);
  std::vector<ModelMeasurementRecord> out;
  while (s.step()) {
    ModelMeasurementRecord m;
    m.id = s.get_int(0);
    m.created = s.get_double(1);
    m.model = s.get_text(2);
    m.manifest_sha256 = s.get_text(3);
    m.model_sha256 = s.get_text(4);
    m.target = s.get_text(5);
    m.device_key = s.get_text(6);
    m.agent = s.get_text(7);
    m.seed = static_cast<uint64_t>(s.get_int(8));
    const bj::value costs = bj::parse(s.get_text(9));
    for (const bj::value& c : costs.as_array()) m.costs.push_back(c.to_number<double>());
    if (!s.is_null(10)) m.median_ms = s.get_double(10);
    if (!s.is_null(11)) m.min_ms = s.get_double(11);
    if (!s.is_null(12)) m.estimated_ms = s.get_double(12);
    m.error = static_cast<MeasureErrorNo>(s.get_int(13));
    m.message = s.get_text(14);
    out.push_back(std::move(m));
  }
  return out;
}

// ---- foreign records (schema version 5) ----------------------------------------------------

int64_t RecordStore::add_foreign_records(const std::vector<ForeignRecord>& records) {
  Transaction tx(db_, "storing foreign records");
  Statement insert(db_,
                   "INSERT INTO foreign_records(workload_key, target, task_name, foreign_target, "
                   "config_index, entity_json, error_no, costs_json, all_cost, timestamp, source, "
                   "line, imported) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
                   "ON CONFLICT(line) DO NOTHING",
                   "storing a foreign record");
  const double now = now_s();
  int64_t inserted = 0;
  for (const ForeignRecord& r : records) {
    if (r.line.empty()) throw std::invalid_argument("records: a foreign record has no line");
    bj::array costs;
    for (double c : r.result.costs) {
      if (!std::isfinite(c))
        throw std::invalid_argument("records: foreign record '" + r.task_name +
                                    "': a cost is not finite");
      costs.push_back(c);
    }
    insert.reset();
    insert.bind(1, r.workload_key)
        .bind(2, r.target)
        .bind(3, r.task_name)
        .bind(4, r.foreign_target)
        .bind(5, r.config_index)
        .bind(6, r.entity_json)
        .bind(7, static_cast<int>(r.result.error))
        .bind(8, bj::serialize(costs))
        .bind(9, r.result.all_cost)
        .bind(10, r.result.timestamp)
        .bind(11, r.source)
        .bind(12, r.line)
        .bind(13, now)
        .run();
    inserted += insert.changes();
  }
  tx.commit();
  return inserted;
}

std::vector<ForeignRecord> RecordStore::foreign_trials(const Workload& workload) const {
  Workload anchor = workload;
  anchor.epilogue = Epilogue{};
  anchor.name.clear();
  Statement s(db_,
              "SELECT id, workload_key, target, task_name, foreign_target, config_index, "
              "entity_json, error_no, costs_json, all_cost, timestamp, source, line "
              "FROM foreign_records WHERE workload_key = ?1 ORDER BY id",
              "reading foreign records");
  s.bind(1, anchor.key());
  std::vector<ForeignRecord> out;
  while (s.step()) {
    ForeignRecord r;
    r.id = s.get_int(0);
    r.workload_key = s.get_text(1);
    r.target = s.get_text(2);
    r.task_name = s.get_text(3);
    r.foreign_target = s.get_text(4);
    r.config_index = s.get_int(5);
    r.entity_json = s.get_text(6);
    r.result.error = static_cast<MeasureErrorNo>(s.get_int(7));
    const bj::value costs = bj::parse(s.get_text(8));
    for (const bj::value& c : costs.as_array()) r.result.costs.push_back(c.to_number<double>());
    r.result.all_cost = s.get_double(9);
    r.result.timestamp = s.get_double(10);
    r.source = s.get_text(11);
    r.line = s.get_text(12);
    out.push_back(std::move(r));
  }
  return out;
}

int64_t RecordStore::foreign_record_count() const {
  Statement s(db_, "SELECT count(*) FROM foreign_records", "counting foreign records");
  return s.step() ? s.get_int(0) : 0;
}

double median_of(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace webtune
