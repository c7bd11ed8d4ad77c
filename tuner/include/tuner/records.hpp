/// \file records.hpp
/// Tuning records in SQLite or PostgreSQL: workloads, targets, devices, agents, tuning jobs and
/// every trial.
///
/// The store is an SQLite file (in WAL mode) or, for many tuner hosts sharing one store, a
/// PostgreSQL database (`postgresql://user@host/db`); both hold the same schema and behave the
/// same (tuner/sql_backend.hpp translates the one SQL spelling). A tuning stores each
/// trial as its result arrives (add_trials: one transaction per call), so a crash loses at most
/// the trials still being measured. A tuning job is
/// identified by (workload key, target, device key): opening it again resumes it, and a config
/// index is stored at most once per job, so nothing is measured twice. The schema carries its
/// version (SQLite: `PRAGMA user_version`; PostgreSQL: a `schema_version` table), so a later
/// webtune can migrate an older store (and an older webtune refuses a newer one).
///
/// AutoTVM logs (export and import) are in tuner/autotvm_log.hpp, over this store.
///
/// Job statuses (tuning_jobs.status; set_status refuses others):
///  - "running": a `webtune tune` works on it now, or died without a word (SIGKILL, power loss);
///  - "done": it reached its trial budget, early stopping, or exhausted its space;
///  - "stopped": the session's wall-clock budget (--timeout) ran out first;
///  - "interrupted": a signal (SIGINT, SIGTERM, SIGHUP) ended the session; every trial stored
///    is kept (a rerun measures only the rest of its batch);
///  - "failed": an error ended the session (e.g. the tracker stayed unreachable past the
///    reconnect budget).
/// Every status but "done" is resumed by running the same tuning again (open_job); "done" jobs
/// resume too when the budget is raised.
///
/// Best-config verification (`webtune tune --verify-best`): a trial may have verifications, each
/// a re-measurement of its config on a second agent with its verdict; the latest verdict counts.
/// A trial whose latest verdict is "suspect" is left out of best() and of the jobs' best GFLOP/s.
///
/// Model runs (schema version 3): a whole-model tuning (`webtune tune` with a model name,
/// TuneOptions::model_name) is one model run: its tasks' jobs, each with its weight (how many
/// times the model runs the task), and the estimated model latency (Σ weight × best mean cost)
/// recorded after every batch once every task has a successful trial. A job belongs to every
/// model run that tuned it (two models, or two sessions of one model, share a task's job).
///
/// Model measurements (schema version 4): whole compiled models measured end to end on the farm
/// (`webtune measure-model`, docs/protocol.md "Model jobs"), one row per model job, written by
/// the client beside the package's estimate (Σ weight × best cost, the manifest's estimated_ms).
///
/// Foreign records (schema version 5): AutoTVM log lines for targets webtune does not tune
/// (TopHub's mali, cuda, ...), kept by `webtune log import --keep-foreign` as read-only history:
/// each line as read, with its workload in webtune's terms when it has one, so that a tuner can
/// look up what other targets measured for the same workload (foreign_trials). Nothing updates or
/// deletes them; they belong to no job.
///
/// A RecordStore is one database connection: use it from one thread at a time, and open one
/// store per thread or process. Writers of one store run one at a time (SQLite's write lock,
/// waited for through the busy timeout; on PostgreSQL an advisory lock taken by every write
/// transaction), so two tuners writing the same job, on one host or many, never store a config
/// index twice and never lose a trial: a trial whose index the other stored first is skipped,
/// and add_trials counts only what it inserted.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/measure.hpp"
#include "codegen/target.hpp"
#include "codegen/workload.hpp"

namespace webtune::sql {
class Connection;
}

namespace webtune {

/// One tuning job: a workload tuned on a target and device.
struct TuningJobInfo {
  int64_t id = 0;
  Workload workload;  ///< its name is the job's task name
  Target target = Target::kGlesFrag;
  std::string device_key;  ///< e.g. "gles:llvmpipe"
  std::string task_name;   ///< e.g. "C2"; may be empty
  std::string tuner;       ///< "xgb", "random", ...
  std::string status;      ///< "running", "done", "stopped", "interrupted", "failed" (above)
  int64_t trials = 0, errors = 0;
  double best_gflops = 0;           ///< 0 when nothing succeeded
  double created = 0, updated = 0;  ///< Unix time (s)
};

/// One measured config.
struct TrialRecord {
  int64_t id = 0, job_id = 0;  ///< set by the store; ignored by add_trials
  int64_t config_index = 0;
  std::string config_json;  ///< ConfigEntity::to_json(), serialized
  MeasureResult result;
  /// 0 on error. add_trials computes it from the job's workload FLOPs and the mean cost, so
  /// that every stored trial agrees with best(); the value passed in is ignored.
  double gflops = 0;
  std::string agent;  ///< name of the agent that measured it; may be empty
  /// Where the result came from, for audits: the agent's session on the tracker (0: unknown,
  /// e.g. imported, recorded by an older webtune, or failed by the tracker itself), the
  /// tracker's attempt number of the job (0: unknown), and the Unix time (s) the tuner received
  /// the result (0: unknown).
  uint64_t agent_session = 0;
  int attempt = 0;
  double received = 0;
  /// The latest verification verdict ("verified", "suspect", "unverified"), empty when none;
  /// read only (add_verification sets it).
  std::string verdict;
};

/// Verdicts of a verification.
inline constexpr const char* kVerified = "verified";      ///< a second agent agreed
inline constexpr const char* kSuspect = "suspect";        ///< not believed (see TuneOptions)
inline constexpr const char* kUnverified = "unverified";  ///< no second measurement was had

/// One re-measurement of a trial's config on another agent, and what it concluded.
struct VerificationRecord {
  int64_t id = 0;        ///< set by the store
  int64_t trial_id = 0;  ///< the trial it judges
  std::string verdict;   ///< kVerified, kSuspect or kUnverified
  std::string agent;     ///< the agent that re-measured it; empty when none did
  MeasureErrorNo error = MeasureErrorNo::kNoError;  ///< of the re-measurement
  /// The re-measurement's fastest run (s; load only ever slows a run down); 0 when none.
  double cost = 0;
  double ratio = 0;      ///< cost / the trial's recorded mean cost; 0 when not measured
  std::string message;   ///< why, in words
  double timestamp = 0;  ///< Unix time (s); 0: now
};

/// An agent that measured trials, as the records know it.
struct AgentRecord {
  std::string name;
  std::string device_key;        ///< the device it last measured on; may be empty
  std::string device_info_json;  ///< that device's info ("{}" when unknown)
  double last_seen = 0;          ///< Unix time (s) of its last stored trial batch
  int64_t trials = 0, errors = 0;
};

/// The best trial of a job.
struct BestRecord {
  TuningJobInfo job;
  TrialRecord trial;
  /// The trial's latest verification; nullopt when it was never re-measured.
  std::optional<VerificationRecord> verification;
};

/// One task of a model run.
struct ModelRunJob {
  int64_t job_id = 0;
  std::string task_name;  ///< the job's task name
  int64_t weight = 1;     ///< times the model runs the task
};

/// The estimated latency of a model run at one point of its tuning.
struct ModelEstimate {
  /// Trials of the run's tasks when estimated (Σ over tasks, trials of earlier sessions of the
  /// same jobs included, as TuneOptions::total_trials counts them).
  int64_t trials = 0;
  double elapsed_s = 0;   ///< seconds since the session started
  double latency_ms = 0;  ///< Σ weight × best mean cost, in ms
  double timestamp = 0;   ///< Unix time (s); 0 in add_model_estimate: now
};

/// A model run (see the file comment).
struct ModelRunInfo {
  int64_t id = 0;
  std::string model;  ///< e.g. "resnet18"
  Target target = Target::kGlesFrag;
  std::string device_key;
  std::string schedule;                 ///< the task schedule: "gradient", "round-robin"
  int64_t total_trials = 0;             ///< the session's total budget; 0: per-task budgets only
  double started = 0;                   ///< Unix time (s)
  std::vector<ModelRunJob> jobs;        ///< by job id
  int64_t estimates = 0;                ///< estimates recorded
  std::optional<ModelEstimate> latest;  ///< the latest estimate; nullopt when none
};

/// One whole-model measurement on the farm (a model job's result; docs/protocol.md "Model jobs").
struct ModelMeasurementRecord {
  int64_t id = 0;               ///< set by the store
  double created = 0;           ///< Unix time (s); 0 in add_model_measurement: now
  std::string model;            ///< the package's name (its folder under the tracker's --models)
  std::string manifest_sha256;  ///< of the package's manifest.json
  std::string model_sha256;     ///< of the ONNX file it was built from (manifest model.sha256)
  std::string target;           ///< the package's target: webgl2, webgpu, wasm, gles-frag, ...
  std::string device_key;       ///< the agent key that measured it ("" when none did)
  std::string agent;            ///< the agent's name ("" when none did)
  uint64_t seed = 0;            ///< of the model's input
  std::vector<double> costs;    ///< seconds per inference; empty on error
  /// Median and fastest cost (ms), computed by add_model_measurement from `costs`; nullopt on
  /// error. The values passed in are ignored.
  std::optional<double> median_ms, min_ms;
  std::optional<double> estimated_ms;  ///< the manifest's estimated_ms; nullopt when none
  MeasureErrorNo error = MeasureErrorNo::kNoError;
  std::string message;
};

/// The median of `values` (the mean of the middle two for an even count); NaN when empty.
double median_of(std::vector<double> values);

/// Checks a trial's config JSON against the config space of its template, `workload` on
/// `target` (device limits are not applied: the device may differ): the knob names and values as
/// ConfigSpace::from_json checks them, and, when `succeeded`, the template's structural
/// constraints (a config that breaks one cannot have been built, let alone measured). Returns
/// the entity, with the space's current index: an "index" from before the space grew is
/// renumbered (StaleIndex::kRenumber), since the knob values name the kernel. Throws
/// std::invalid_argument naming the template and what does not fit, e.g. "config does not fit the
/// gles-frag conv2d template (conv2d_1_2048_8_8_192_1x1_s1_p0): config outside the space: unknown
/// knob 'tile_f'", or when the workload has no template on `target`.
ConfigEntity config_in_space(const Workload& workload, Target target,
                             const std::string& config_json, bool succeeded);
/// config_in_space with the template's space already built (an import keeps one per task).
ConfigEntity config_in_space(const ConfigSpace& space, const Workload& workload, Target target,
                             const std::string& config_json, bool succeeded);

/// The trials of one job to import (RecordStore::import_jobs).
struct ImportedJob {
  Workload workload;
  Target target = Target::kGlesFrag;
  std::string device_key;
  std::string task_name;  ///< empty: the workload's name
  std::vector<TrialRecord> trials;
  /// Stored on a job the import creates (an existing job keeps its own): the tuner's name, and
  /// the status (empty: "done"; else one of the statuses of the file comment).
  std::string tuner, status;
};

/// One foreign AutoTVM record (see the file comment).
struct ForeignRecord {
  int64_t id = 0;            ///< set by the store
  std::string workload_key;  ///< Workload::key() of its anchor workload; "" when webtune has none
  std::string target;  ///< the line's TVM target string, e.g. "opencl -model=rk3399 -device=mali"
  std::string task_name;       ///< the line's TVM task name, e.g. "conv2d_nchw_spatial_pack.mali"
  std::string foreign_target;  ///< what it was tuned for: the task name's suffix ("mali", "cuda")
  int64_t config_index = 0;    ///< config.index as written (an index of the foreign template)
  std::string entity_json;     ///< config.entity as written (the foreign template's knobs)
  MeasureResult result;        ///< costs (s; empty on error), error, all_cost, timestamp
  std::string source;          ///< where it came from (a file name), may be empty
  std::string line;            ///< the whole log line as read: the record, losslessly
};
/// True when `location` (a --db value) names a PostgreSQL database (`postgresql://…`,
/// `postgres://…`) rather than an SQLite file: commands that refuse to create a missing file
/// check only files.
bool is_postgres_url(const std::string& location);

class RecordStore {
 public:
  /// Opens or creates the database at `path` (":memory:" works) and its schema; a
  /// `postgresql://…` or `postgres://…` URI (libpq's syntax; a Unix socket as
  /// `postgresql:///db?host=/run/postgresql`) connects to that PostgreSQL database instead,
  /// which must exist (its tables are created when missing). Throws std::runtime_error with
  /// SQLite's or PostgreSQL's message, e.g. when the store was written by a newer webtune
  /// (higher schema version) or the server refuses the connection.
  /// How a store is opened. kReadOnly never writes to what `path` names: an SQLite file is
  /// copied into memory (sql::open_sqlite_snapshot: no WAL switch, no migration on disk; writes
  /// go to the copy and are lost) and a PostgreSQL database of an older schema is refused
  /// instead of migrated.
  enum class Access { kReadWrite, kReadOnly };

  explicit RecordStore(const std::string& path, Access access = Access::kReadWrite);
  ~RecordStore();
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;

  /// The job of (workload, target, device_key), created when new, and marked "running".
  /// `task_name` (defaults to workload.name), `tuner` and `options_json` are stored on creation
  /// and updated on reopening; on reopening, a value left at its default (empty, "{}") keeps the
  /// stored one. Returns its id.
  int64_t open_job(const Workload& workload, Target target, const std::string& device_key,
                   const std::string& task_name = {}, const std::string& tuner = {},
                   const std::string& options_json = "{}");
  /// Records a device's info JSON under its key (latest wins). Throws std::invalid_argument
  /// when `info_json` is not JSON.
  void upsert_device(const std::string& device_key, const std::string& info_json);
  /// The info JSON last stored for a device key (as upsert_device got it), or nullopt when the
  /// key is unknown ("{}" for a device whose info was never stored).
  std::optional<std::string> device_info(const std::string& device_key) const;
  /// Every device key the store knows (devices of jobs, agents and upsert_device), sorted.
  std::vector<std::string> device_keys() const;
  /// Appends trials to a job in one transaction; a config index already stored for the job (or
  /// earlier in the same batch) is skipped. Returns how many were inserted. Throws
  /// std::runtime_error for an unknown job, std::invalid_argument for a trial whose config JSON
  /// is not an entity of its index or whose costs are not finite; nothing of the batch is stored
  /// then.
  int add_trials(int64_t job_id, const std::vector<TrialRecord>& trials);
  /// Renumbers job `job_id`'s trials into `space`'s indices, in one transaction, and returns how
  /// many moved. A template's space may grow (a split with more candidates, see
  /// SplitPolicy::kVerbose), which renumbers its configs while an old record's knob values still
  /// name the same kernel (ConfigSpace::from_json with StaleIndex::kRenumber). Without this a
  /// resumed tuning would store a new config under an index an old trial still holds, and
  /// add_trials would skip it as already measured. A trial whose entity no longer decodes, or
  /// whose entity another trial of the job already holds, keeps its index. Throws
  /// std::runtime_error for an unknown job.
  int renumber_trials(int64_t job_id, const ConfigSpace& space);
  /// Sets a job's status (one of those in the file comment). Throws std::invalid_argument for
  /// another status, std::runtime_error for an unknown job.
  void set_status(int64_t job_id, const std::string& status);

  /// Stores a verification of a trial; returns its id. Throws std::invalid_argument for an
  /// unknown verdict, std::runtime_error for an unknown trial.
  int64_t add_verification(const VerificationRecord& verification);
  /// Marks every successful trial of job `job_id` measured by agent `agent` suspect (one
  /// verification each, with `message`), except those already verified or suspect; one
  /// transaction. Used when that agent's best was caught too fast to be
  /// true. Returns how many trials it marked. Throws std::runtime_error for an unknown job.
  int mark_agent_suspect(int64_t job_id, const std::string& agent, const std::string& message);
  /// The latest verification of trial `trial_id`, or nullopt when it has none.
  std::optional<VerificationRecord> verification(int64_t trial_id) const;
  /// Every verification of job `job_id`'s trials, oldest first.
  std::vector<VerificationRecord> verifications(int64_t job_id) const;
  /// The best trial of one job as best() picks it (suspect trials left out); nullopt when the
  /// job has no successful trial that is not suspect.
  std::optional<TrialRecord> best_trial(int64_t job_id) const;

  /// Every job, by id.
  std::vector<TuningJobInfo> jobs() const;
  /// The jobs whose workload key or task name contains `workload_filter` (case-sensitive) and
  /// whose target name equals `target_filter` (empty: any), by id.
  std::vector<TuningJobInfo> jobs(const std::string& workload_filter,
                                  const std::string& target_filter) const;
  std::optional<TuningJobInfo> job(int64_t job_id) const;
  /// Trials of a job in insertion order; `limit` < 0 means all.
  std::vector<TrialRecord> trials(int64_t job_id, int64_t limit = -1, int64_t offset = 0) const;
  /// The best successful trial that is not suspect (highest GFLOP/s, the earliest on a tie),
  /// with its latest verification, of each job whose workload key or task name contains
  /// `workload_filter` (case-sensitive) and whose target name equals `target_filter` (empty:
  /// any), by job id. Jobs without such a trial are left out.
  std::vector<BestRecord> best(const std::string& workload_filter = {},
                               const std::string& target_filter = {}) const;
  /// The 1-based position of trial `trial_id` among its job's trials in insertion order (the
  /// trial number a convergence plot shows); 0 when the job has no such trial.
  int64_t trial_number(int64_t job_id, int64_t trial_id) const;
  /// Trial counts by error number (AutoTVM's numbering) of job `job_id`, or of every job when
  /// `job_id` is 0; numbers without trials are left out.
  std::vector<std::pair<MeasureErrorNo, int64_t>> error_counts(int64_t job_id = 0) const;
  /// Every agent that measured a trial, by name.
  std::vector<AgentRecord> agents() const;
  /// Successful and failed trials of other jobs with the same op and target (transfer learning),
  /// excluding job `exclude_job_id`; by job id, trials in insertion order.
  std::vector<std::pair<TuningJobInfo, std::vector<TrialRecord>>> related_trials(
      OpKind op, Target target, int64_t exclude_job_id) const;

  /// Starts a model run of `model` (a non-empty name) on `target` and `device_key`; returns
  /// its id. Throws std::invalid_argument for an empty name or a negative total.
  int64_t open_model_run(const std::string& model, Target target, const std::string& device_key,
                         const std::string& schedule = {}, int64_t total_trials = 0);
  /// Links job `job_id` to model run `run_id` with `weight` (≥ 1); linking it again adds the
  /// weights (a model that lists one workload twice). Throws std::runtime_error for an unknown
  /// run or job, std::invalid_argument for a weight below 1.
  void add_model_run_job(int64_t run_id, int64_t job_id, int64_t weight);
  /// Appends an estimate to model run `run_id`. Throws std::runtime_error for an unknown run,
  /// std::invalid_argument for a latency that is not a finite non-negative number or negative
  /// trials.
  void add_model_estimate(int64_t run_id, const ModelEstimate& estimate);
  /// Every model run, by id.
  std::vector<ModelRunInfo> model_runs() const;
  std::optional<ModelRunInfo> model_run(int64_t run_id) const;
  /// The estimates of model run `run_id`, oldest first (empty for an unknown run).
  std::vector<ModelEstimate> model_estimates(int64_t run_id) const;
  /// The model runs that job `job_id` belongs to, by id.
  std::vector<int64_t> model_runs_of_job(int64_t job_id) const;

  /// Stores one model measurement; returns its id. Its median_ms and min_ms are computed from
  /// its costs (seconds → ms) when it succeeded; a failed one keeps no costs. Throws
  /// std::invalid_argument for an empty model, a cost that is not finite and > 0, or an
  /// estimated_ms that is not finite and >= 0.
  int64_t add_model_measurement(const ModelMeasurementRecord& measurement);
  /// Model measurements of package `model` (empty: every package), newest first, at most
  /// `limit` of them (< 0: all).
  std::vector<ModelMeasurementRecord> model_measurements(const std::string& model = {},
                                                         int64_t limit = -1) const;

  /// Adds every job's trials in ONE transaction: a job of (workload, target, device_key) is
  /// created with the job's status ("done" when empty) and tuner when new (an existing one keeps
  /// its own), and config indices already stored are skipped, as add_trials does. Returns trials
  /// inserted. Any error (a trial add_trials would refuse, an unknown status) throws and stores
  /// nothing.
  int64_t import_jobs(const std::vector<ImportedJob>& jobs);

  /// Stores foreign records in one transaction; a record whose line is already stored is
  /// skipped. Returns how many were inserted. Throws std::invalid_argument for an empty line or
  /// a cost that is not finite (nothing is stored then).
  int64_t add_foreign_records(const std::vector<ForeignRecord>& records);
  /// The foreign records whose anchor workload is `workload`'s (its epilogue and name are
  /// ignored: an AutoTVM task is the anchor operator alone), in insertion order.
  std::vector<ForeignRecord> foreign_trials(const Workload& workload) const;
  /// How many foreign records the store holds.
  int64_t foreign_record_count() const;

  /// The path or URI the store was opened with (a URI's password replaced by "***").
  const std::string& path() const { return path_; }
  /// True when the store is a PostgreSQL database.
  bool is_postgres() const;

 private:
  std::string path_;
  std::unique_ptr<sql::Connection> connection_;
  sql::Connection* db_ = nullptr;  ///< connection_.get()
};

}  // namespace webtune
