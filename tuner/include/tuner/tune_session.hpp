/// \file tune_session.hpp
/// The tuning loop over a model's tasks: for each task a tuner proposes batches, the builder and
/// the runner measure them, every batch is recorded in SQLite in one transaction, and the
/// tuner learns from it. Resumes from the records; stops a task at its trial budget, at early
/// stopping, or at the wall-clock timeout.
///
/// A stop request (the runner's stop flag, set by a signal handler) ends the session at the next
/// wait: the batch in flight is dropped, unfinished jobs are marked "interrupted" and
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
#include <string>
#include <vector>

#include "codegen/workload.hpp"
#include "tuner/measure_pipeline.hpp"
#include "tuner/records.hpp"

namespace webtune {

struct TuneOptions {
  Target target = Target::kGlesFrag;
  std::string tuner = "xgb";
  int trials = 200;         ///< per task, including trials of earlier runs (resume)
  int early_stopping = -1;  ///< stop a task after this many trials without a better config
  double timeout_s = 0;     ///< wall-clock budget of the whole session; 0 = none
  int batch_size = 16;      ///< configs measured per round
  uint64_t seed = 1;        ///< search seed; inputs use seed too
  int samples = 32;         ///< reference samples per measurement
  MeasureOptions measure;
  bool transfer = false;  ///< warm-start XGB from records of other workloads (same template)
  /// "round-robin": one batch per task in turn; "latency": the task with the largest share of
  /// estimated network time (best time × occurrences; unmeasured tasks first) goes next.
  std::string schedule = "round-robin";
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

class TuneSession {
 public:
  TuneSession(RecordStore& store, TrackerRunner& runner, std::string device_key,
              DeviceLimits limits, TuneOptions options);

  /// Tunes the tasks; `on_progress` is called after each batch with all tasks' progress.
  /// Throws Interrupted on a stop request and rethrows errors of the runner and the records,
  /// after marking the unfinished jobs (see the file comment).
  std::vector<TaskProgress> run(
      const std::vector<WorkloadFileTask>& tasks,
      const std::function<void(const std::vector<TaskProgress>&)>& on_progress = {});

 private:
  RecordStore& store_;
  TrackerRunner& runner_;
  std::string device_key_;
  DeviceLimits limits_;
  TuneOptions options_;
};

/// The end-of-run table: task, MFLOP, default GFLOP/s, best GFLOP/s, speedup, trials, errors;
/// then the estimated whole-network time (sum of best time × occurrences).
std::string format_summary(const std::vector<TaskProgress>& tasks);
/// One progress line per task ("C2   48/48  best 1.23 GFLOP/s  2 errors"), with the best's
/// verdict when it has one.
std::string format_progress(const std::vector<TaskProgress>& tasks, int trials_per_task);

}  // namespace webtune
