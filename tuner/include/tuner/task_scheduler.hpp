/// \file task_scheduler.hpp
/// Which task of a model to tune next: the task schedulers of a whole-model tuning. Pure
/// bookkeeping (no networking, no measuring): the tuning loop (tune_session.cpp) or a replay
/// (bench/task_scheduler.cpp) asks next(), tunes that task for one round (one batch of
/// measurements) and records the task's best cost after it.
///
/// The objective is the model's estimated latency f = Σ_i w_i·g_i(t_i): w_i the task's weight
/// (how many times the model runs it, WorkloadFileTask::occurrences), g_i(t_i) the best cost (s)
/// of task i after t_i rounds. A round is the unit of t, as in Ansor: the gradient's windows
/// count rounds, not trials, so a short last batch weighs as much as a full one.
///
/// Every policy starts with a warm-up: each task that has no round yet gets one, in task order
/// (a task restored from earlier records with restore() counts as warmed up, as Ansor's
/// _restore_status). Then the policy picks among the live tasks; a finished task (its space
/// exhausted, early stopping, its per-task budget: finish()) is never picked again. next()
/// returns nullopt once every task is finished.
///
/// Policies:
///  - "round-robin": the live tasks in turn, from the one after the last picked.
///  - "gradient": Ansor's gradient-based task scheduler (Zheng et al., "Ansor: Generating
///    High-Performance Tensor Programs for Deep Learning", OSDI 2020, §6; TVM's
///    python/tvm/auto_scheduler/task_scheduler.py is the public reference). It picks the task
///    with the largest estimated |∂f/∂t_i|,
///
///      ∂f/∂t_i ≈ w_i · ( α·(g_i(t_i) − g_i(t_i − Δt))/Δt
///                        + (1−α)·min(−g_i(t_i)/t_i, β·C_i/max_{k∈N(i)} V_k − g_i(t_i)) )
///
///    ∂f/∂g_i = w_i for the weighted sum. The first term is the improvement of the last Δt
///    rounds (backward window, 0 while t_i ≤ Δt or while either end has no finite cost); the
///    second predicts the next improvement optimistically: either the best so far shrinks as
///    1/t_i would have it (−g/t), or task i reaches β⁻¹ of the FLOP/s V_k = C_k/g_k of the best
///    task similar to it (C_i its FLOPs). Ties (all gradients equal) and, with probability ε
///    (ε-greedy), any pick go to a uniformly random live task from the seeded RNG, so a run is
///    reproducible per seed. A live task without a finite cost yet (every trial failed) has an
///    unbounded gradient and goes first, fewest rounds first: the estimate is unknown until it
///    has one (TVM starts each cost at 1e10 to the same effect). α = 0.2, β = 2, Δt = 3,
///    ε = 0.05 by default, Ansor's values.
///
/// Similarity (N(i)): tasks with the same similarity tag, as TVM's derive_similarity_tag: the
/// same op (dense, conv2d, depthwise_conv2d; one session tunes one target, so also the same
/// template) and a FLOP count in the same bucket floor(ln(C + 1) / ln 1.618) (within about
/// 1.6×: FLOP/s of a much smaller or larger task says little). An empty tag is similar to
/// nothing. N(i) includes i; the similarity term applies only when the group has another task
/// with a finite cost. As TVM's _adjust_similarity_group, a task that has had more than 5
/// rounds more than every other member of its group and still runs below 1/β of the group's
/// best FLOP/s leaves the group for good (it is not similar after all).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codegen/workload.hpp"

namespace webtune {

/// One task as a scheduler sees it.
struct ScheduledTask {
  std::string name;        ///< for messages
  double weight = 1;       ///< w_i > 0: times the model runs the task
  double flops = 0;        ///< C_i ≥ 0: FLOPs of one run (0: no similarity estimate)
  std::string similarity;  ///< similarity tag (similarity_tag()); "" = similar to none
};

/// TVM's derive_similarity_tag for a workload: "<op>_<bucket>", bucket = floor(ln(flops + 1) /
/// ln 1.618), e.g. "conv2d_40" (see the file comment).
std::string similarity_tag(const Workload& workload);

/// The bookkeeping every policy shares (warm-up, rounds, costs, finished tasks, objective).
class TaskScheduler {
 public:
  /// Throws std::invalid_argument when `tasks` is empty, or a task's weight is not a finite
  /// positive number or its flops negative (naming the task).
  explicit TaskScheduler(std::vector<ScheduledTask> tasks);
  virtual ~TaskScheduler() = default;

  /// The task to tune for the next round: a task with no round yet (warm-up, task order), else
  /// the policy's pick among the live tasks; nullopt when every task is finished.
  std::optional<size_t> next();
  /// Records a round of `task`: its best cost (s) after it, +infinity while nothing succeeded.
  /// Throws std::out_of_range for a bad index, std::invalid_argument for a NaN or negative cost.
  void record(size_t task, double best_cost_s);
  /// Restores `rounds` earlier rounds of `task` (resume from records) ending at `best_cost_s`:
  /// they count as rounds (the task is warmed up) with a flat history. Errors as record().
  void restore(size_t task, int rounds, double best_cost_s);
  /// Marks `task` finished: never picked again. Idempotent.
  void finish(size_t task);

  size_t size() const { return tasks_.size(); }
  const ScheduledTask& task(size_t i) const { return tasks_.at(i); }
  bool finished(size_t i) const { return finished_.at(i); }
  /// t_i: rounds of task i (restored ones included).
  int rounds(size_t i) const { return static_cast<int>(history_.at(i).size()); }
  /// g_i(t_i) (s); +infinity before a success.
  double best_cost(size_t i) const;
  /// g_i after each round, oldest first.
  const std::vector<double>& history(size_t i) const { return history_.at(i); }
  /// f = Σ w_i·g_i (s), or nullopt while some task (finished or not) has no finite cost.
  std::optional<double> objective() const;
  /// "round-robin" or "gradient".
  virtual std::string name() const = 0;

 protected:
  /// The policy's pick, called once every live task has a round; `live` is non-empty.
  virtual size_t pick(const std::vector<size_t>& live) = 0;
  /// Called after each record() (and restore()).
  virtual void on_record(size_t task) {}
  /// The task last returned by next() (size() before the first).
  size_t last_picked() const { return last_; }

  std::vector<ScheduledTask> tasks_;
  std::vector<std::vector<double>> history_;
  std::vector<bool> finished_;

 private:
  void check_cost(size_t task, double cost) const;
  size_t last_;
};

/// The live tasks in turn (see the file comment).
class RoundRobinScheduler : public TaskScheduler {
 public:
  using TaskScheduler::TaskScheduler;
  std::string name() const override { return "round-robin"; }

 protected:
  size_t pick(const std::vector<size_t>& live) override;
};

struct GradientSchedulerOptions {
  double alpha = 0.2;       ///< weight of the backward (observed) term
  double beta = 2;          ///< slack on a similar task's FLOP/s
  int backward_window = 3;  ///< Δt, in rounds (≥ 1)
  double epsilon = 0.05;    ///< probability of a random live task (ε-greedy)
  uint64_t seed = 1;        ///< the RNG of ties and ε-greedy
};

/// Ansor's gradient-based task scheduler (see the file comment).
class GradientScheduler : public TaskScheduler {
 public:
  /// Throws std::invalid_argument as TaskScheduler, and for α or ε outside [0, 1], β ≤ 0 or a
  /// backward window < 1.
  GradientScheduler(std::vector<ScheduledTask> tasks, GradientSchedulerOptions options = {});
  std::string name() const override { return "gradient"; }

  /// The estimated ∂f/∂t_i (s per round, ≤ 0) of a live task with at least one round:
  /// −infinity when it has no finite cost yet; 0 for a finished task or one with no round.
  double gradient(size_t task) const;
  /// The tasks similar to `task` now (itself included while it has a tag).
  std::vector<size_t> similar(size_t task) const;

 protected:
  size_t pick(const std::vector<size_t>& live) override;
  void on_record(size_t task) override;

 private:
  GradientSchedulerOptions options_;
  std::vector<std::string> tags_;  ///< similarity tags; a task that left its group has ""
  std::mt19937_64 rng_;
};

/// A scheduler by policy name: "round-robin", or "gradient" (also "latency", its older name in
/// TuneOptions::schedule) with Ansor's defaults and `seed`. Throws std::invalid_argument for
/// another name, and as the constructors.
std::unique_ptr<TaskScheduler> make_task_scheduler(const std::string& policy,
                                                   std::vector<ScheduledTask> tasks,
                                                   uint64_t seed = 1);

}  // namespace webtune
