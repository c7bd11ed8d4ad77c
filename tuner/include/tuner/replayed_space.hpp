/// \file replayed_space.hpp
/// A config space measured in full once on a real device and stored in the SQLite records
/// (for instance by `webtune tune --tuner grid --trials <space size>`), replayed without the
/// device: each config's stored measure result stands in for a new measurement. This is how
/// the search strategies are compared on real cost landscapes (bench/tuner_efficiency and the
/// tuner tests), the way AutoTVM's paper compares its tuners on measured traces (Chen et al.,
/// "Learning to Optimize Tensor Programs", NeurIPS 2018, §6).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"
#include "tuner/records.hpp"
#include "tuner/tuner.hpp"

namespace webtune {

class ReplayedSpace {
 public:
  /// Loads job `job_id` of `store`. The task is rebuilt with the device limits stored for the
  /// job's device key, so that config indices mean what they meant when measured, and a knob
  /// added to the template after the records (ConfigSpace::allow_absent, named by no stored
  /// entity) is fixed at its first candidate, the space as it was then. Every stored
  /// trial's entity must equal the entity of its index in that space. Throws
  /// std::runtime_error when the job is unknown, a stored entity disagrees with the rebuilt
  /// space, or a valid config of the space was never measured (the space is not complete).
  static ReplayedSpace load(const RecordStore& store, int64_t job_id);

  const Task& task() const { return task_; }
  const TuningJobInfo& job() const { return job_; }
  /// Valid configs of the space (all of them measured).
  int64_t size() const { return static_cast<int64_t>(results_.size()); }
  /// The stored result of a config. Throws std::out_of_range for a config never measured.
  const MeasureResult& result(const ConfigEntity& entity) const;
  /// GFLOP/s of a config's stored result; 0 for a failed trial.
  double gflops(const ConfigEntity& entity) const;
  /// The highest GFLOP/s in the space.
  double best_gflops() const { return best_gflops_; }
  /// How many configs reach at least `fraction` of the best (e.g. 0.95): the smaller, the
  /// harder the space is for a blind search.
  int64_t count_at_least(double fraction) const;

 private:
  ReplayedSpace(TuningJobInfo job, Task task) : job_(std::move(job)), task_(std::move(task)) {}
  TuningJobInfo job_;
  Task task_;
  std::unordered_map<int64_t, MeasureResult> results_;  ///< by config index
  double best_gflops_ = 0;
};

/// Runs `tuner` in batches of `batch` configs, feeding it `measure`'s results, until a proposed
/// config reaches `target_gflops`; returns that config's trial number (1-based), or
/// `budget + 1` when no config within `budget` trials (or the whole space) reaches it.
/// GFLOP/s are computed from the results with the task's FLOP count.
int64_t trials_to_reach(Tuner& tuner,
                        const std::function<MeasureResult(const ConfigEntity&)>& measure,
                        double target_gflops, int64_t budget, int batch = 16);

}  // namespace webtune
