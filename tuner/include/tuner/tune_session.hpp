/// \file tune_session.hpp
/// The tuning loop over a model's tasks: for each task a tuner proposes batches, the builder and
/// the runner measure them, every batch is recorded in SQLite in one transaction, and the
/// tuner learns from it. Resumes from the records; stops a task at its trial budget, at early
/// stopping, or at the wall-clock timeout.
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
};

class TuneSession {
 public:
  TuneSession(RecordStore& store, TrackerRunner& runner, std::string device_key,
              DeviceLimits limits, TuneOptions options);

  /// Tunes the tasks; `on_progress` is called after each batch with all tasks' progress.
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
/// One progress line per task ("C2   48/48  best 1.23 GFLOP/s  2 errors").
std::string format_progress(const std::vector<TaskProgress>& tasks, int trials_per_task);

}  // namespace webtune
