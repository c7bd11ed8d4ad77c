/// \file tune_session.hpp
/// The tuning loop over a model's tasks: for each task a tuner proposes batches, the builder and
/// the runner measure them, each trial is recorded in SQLite as its result arrives (so a
/// dashboard shows it at once; a config index at most once per job), and the tuner learns from
/// the whole batch once it is complete. Resumes from the records; stops a task at its trial budget,
/// at early stopping, or at the wall-clock timeout, and the whole session at its total trial
/// budget.
///
/// Which task gets the next batch (one round) is the task scheduler's choice
/// (task_scheduler.hpp): "round-robin", or "gradient", Ansor's gradient-based scheduler, which
/// spends the trials where they cut the estimated model latency most. The estimated model
/// latency is Σ occurrences × best mean cost over the tasks (ms); it is unknown ("n/a") while
/// some task has no successful trial. It is reported after every batch (SessionProgress,
/// format_progress), and with a model name (TuneOptions::model_name) the session records a
/// model run with its tasks' jobs and every new estimate (records.hpp).
///
/// Resume: a task's earlier trials count toward its per-task and the total budget, and toward
/// its rounds for the scheduler (ceil(trials / batch_size), a flat history, as Ansor's
/// _restore_status), so it has no warm-up round again.
///
/// A stop request (the runner's stop flag, set by a signal handler) ends the session at the next
/// wait: the rest of the batch in flight is dropped (its trials already recorded stay, and a
/// rerun does not measure them again), unfinished jobs are marked "interrupted" and
/// Interrupted is thrown; an error that ends the session marks them "failed" (records.hpp).
///
/// With `verify_best`, a task's best config is re-measured on a second agent of the same device
/// key when the task finishes (and for every task at the end of the session) before it is
/// believed:
///  - the re-measurement must come from an agent other than the one that measured the best
///    (submitted with `avoid_agent`); it waits at most `verify_wait_s` for one, after which the
///    best is recorded as "unverified" and the session goes on (never hangs);
///  - it runs at least 3 timed repeats; when its fastest run is at most `verify_tolerance` (1.5)
///    times the recorded mean cost, the best is "verified". The fastest run is used because load
///    only ever slows a run down, and the recorded best is the fastest of many noisy trials (the
///    winner's curse), so mean against mean would condemn honest bests on a loaded machine. Two
///    honest measurements of one kernel on one device class then agree well within 1.5x, while a
///    faked cost is off by far more. A re-measurement *faster* than the record cannot show that
///    the record was faked (it only says the config is at least that good), and counting it
///    against the record would let a lying verifier discredit an honest best: only slower counts;
///  - a re-measurement slower than that, or one that fails on the second agent (e.g.
///    WRONG_ANSWER), is a disagreement; the first one is recorded "unverified" and the best is
///    re-measured once more, since one disagreement may be a loaded agent or a crashed worker;
///  - a second disagreement makes the best "suspect". When the re-measurement succeeded (the
///    recorded cost was too fast to be reproduced), every other unverified successful trial of
///    the same agent in this job is suspect too: an agent caught claiming a cost it cannot back
///    is not believed for the rest of the job. Suspect trials are left out of
///    RecordStore::best(), of the progress and summary, and of what the tuner learns when the
///    job is resumed; the next best is then verified;
///  - a job the tracker itself failed (lost agents) proves nothing and costs a try; at most
///    `verify_tries` re-measurements are made per task.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/workload.hpp"
#include "tuner/measure_pipeline.hpp"
#include "tuner/records.hpp"

namespace webtune {

struct TuneOptions {
  Target target = Target::kGlesFrag;
  std::string tuner = "xgb";
  /// Per task, including trials of earlier runs (resume); 0 = no per-task cap (only with
  /// total_trials; `webtune tune --total-trials N` without --trials sets 0).
  int trials = 200;
  /// > 0: the session stops once its tasks' trials (earlier runs' included) sum to this; the
  /// scheduler decides which tasks they go to. 0 = no total budget.
  int64_t total_trials = 0;
  int early_stopping = -1;  ///< stop a task after this many trials without a better config
  double timeout_s = 0;     ///< wall-clock budget of the whole session; 0 = none
  int batch_size = 16;      ///< configs measured per round
  uint64_t seed = 1;        ///< search seed; inputs use seed too
  int samples = 32;         ///< reference samples per measurement
  MeasureOptions measure;
  bool transfer = false;  ///< warm-start XGB from records of other workloads (same template)
  /// The task scheduler (task_scheduler.hpp): "round-robin" (one batch per task in turn) or
  /// "gradient" (Ansor's, seeded with `seed`); "latency", the name of an older largest-share
  /// rule, is taken as "gradient", which minimises the same estimated latency.
  std::string schedule = "round-robin";
  /// Non-empty: the session records a model run of this name (records.hpp) linking its tasks'
  /// jobs with their occurrences, and the estimated model latency after every batch.
  std::string model_name;
  bool verify_best = false;       ///< re-measure each task's best on a second agent (above)
  double verify_wait_s = 60;      ///< how long a re-measurement waits for its result (s)
  double verify_tolerance = 1.5;  ///< re-measured fastest / recorded mean above: disagreement
  int verify_tries = 4;           ///< re-measurements per task at most
};

/// Progress of one task, as reported after every batch.
struct TaskProgress {
  std::string name;
  Workload workload;
  int occurrences = 1;
  int64_t job_id = 0;
  int trials = 0, errors = 0, resumed = 0;
  double best_gflops = 0, default_gflops = 0;
  std::string best_config;  ///< entity JSON
  bool done = false;
  std::string stop_reason;
  /// The latest verdict on the best ("verified", "suspect", "unverified"); empty when it was
  /// not re-measured.
  std::string verification;
};

/// The estimated model latency of `tasks` in ms: Σ occurrences × best mean cost (from the best
/// GFLOP/s); nullopt while some task has no successful trial.
std::optional<double> estimated_latency_ms(const std::vector<TaskProgress>& tasks);

/// The whole session's progress, as reported after every batch. It converts to its task list,
/// so a callback written for the tasks alone takes it too.
struct SessionProgress {
  std::vector<TaskProgress> tasks;
  int64_t trials = 0;        ///< Σ tasks' trials (earlier runs' included)
  int64_t total_trials = 0;  ///< TuneOptions::total_trials (0: none)
  int trials_per_task = 0;   ///< TuneOptions::trials (0: no per-task cap)
  double elapsed_s = 0;      ///< since the session started
  /// Σ occurrences × best mean cost (ms); nullopt while a task has no successful trial.
  std::optional<double> estimated_latency_ms;
  std::string model_name;    ///< TuneOptions::model_name
  int64_t model_run_id = 0;  ///< the recorded model run; 0 when none
  std::string schedule;      ///< the scheduler's policy, "gradient" or "round-robin"

  operator const std::vector<TaskProgress>&() const { return tasks; }
};

class TuneSession {
 public:
  TuneSession(RecordStore& store, TrackerRunner& runner, std::string device_key,
              DeviceLimits limits, TuneOptions options);

  /// Tunes the tasks; `on_progress` is called once before the first batch and after each
  /// batch with the session's progress. Throws std::invalid_argument before anything is
  /// recorded for options that cannot work (an unknown schedule, no budget: trials 0 without
  /// total_trials, a negative budget, a batch size below 1, a task's occurrences below 1).
  /// Throws Interrupted on a stop request and rethrows errors of the runner and the records,
  /// after marking the unfinished jobs (see the file comment).
  std::vector<TaskProgress> run(
      const std::vector<WorkloadFileTask>& tasks,
      const std::function<void(const SessionProgress&)>& on_progress = {});

 private:
  RecordStore& store_;
  TrackerRunner& runner_;
  std::string device_key_;
  DeviceLimits limits_;
  TuneOptions options_;
};

/// The end-of-run table: task, MFLOP, default GFLOP/s, best GFLOP/s, speedup, trials, errors;
/// then the estimated model latency (sum of occurrences × best time), or "n/a" naming the tasks
/// without a successful trial.
std::string format_summary(const std::vector<TaskProgress>& tasks);
/// One progress line per task ("C2   48/48  best 1.23 GFLOP/s  2 errors"), with the best's
/// verdict when it has one. `trials_per_task` 0: no per-task cap (no bar, trials alone).
std::string format_progress(const std::vector<TaskProgress>& tasks, int trials_per_task);
/// The task lines (the bar against the per-task cap, or against the total budget without one),
/// then one line for the session: "model resnet18: 480/1000 trials, estimated latency 1.2345 ms"
/// ("n/a" while a task has no successful trial; "all tasks" without a model name).
std::string format_progress(const SessionProgress& progress);

}  // namespace webtune
