/// \file tuner.hpp
/// The search interface (AutoTVM's Tuner): propose a batch of config entities, learn from their
/// measure results, never propose a config twice. Concrete tuners: random, grid, genetic and the
/// XGBoost cost-model tuner.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"

namespace webtune {

class Tuner {
 public:
  /// `task` must outlive the tuner. `seed` makes the search reproducible.
  Tuner(const Task& task, uint64_t seed);
  virtual ~Tuner() = default;

  /// Up to `n` valid entities never proposed before; fewer (possibly none) when the space is
  /// exhausted. Entities proposed here count as visited at once.
  virtual std::vector<ConfigEntity> next_batch(int n) = 0;
  /// Feeds back the results of measured entities, in the same order. Failed results count as
  /// 0 GFLOP/s.
  void update(const std::vector<ConfigEntity>& configs, const std::vector<MeasureResult>& results);
  /// Trials measured earlier (resume): marks them visited and learns from them, so the search
  /// goes on where it stopped.
  void load_history(const std::vector<ConfigEntity>& configs,
                    const std::vector<MeasureResult>& results);
  /// False once every valid config has been proposed.
  bool has_next() const;

  const Task& task() const { return task_; }
  /// Best GFLOP/s measured so far (0 when nothing succeeded yet), and its config.
  double best_gflops() const { return best_gflops_; }
  const std::optional<ConfigEntity>& best_config() const { return best_config_; }
  /// Trials seen by update/load_history.
  int64_t trials() const { return trials_; }
  /// Trials since the last improvement of the best (for early stopping).
  int64_t trials_since_best() const { return trials_ - best_trial_; }
  bool visited(int64_t index) const { return visited_.count(index) > 0; }
  /// Short name: "random", "grid", "ga", "xgb".
  virtual std::string name() const = 0;

 protected:
  /// Hook for learning tuners; called by update and load_history with GFLOP/s per config.
  virtual void on_results(const std::vector<ConfigEntity>& configs,
                          const std::vector<double>& gflops) {}
  void mark_visited(int64_t index) { visited_.insert(index); }
  /// Appends unvisited valid configs in random order (marking them visited) until `out` holds
  /// `n` or the space is exhausted.
  void fill_randomly(std::vector<ConfigEntity>& out, int n);
  int64_t valid_count() const;

  const Task& task_;
  std::mt19937_64 rng_;

 private:
  std::unordered_set<int64_t> visited_;
  double best_gflops_ = 0;
  std::optional<ConfigEntity> best_config_;
  int64_t trials_ = 0, best_trial_ = 0;
};

/// Uniform random sampling without replacement.
class RandomTuner : public Tuner {
 public:
  using Tuner::Tuner;
  std::vector<ConfigEntity> next_batch(int n) override;
  std::string name() const override { return "random"; }
};

/// Valid configs in index order.
class GridSearchTuner : public Tuner {
 public:
  using Tuner::Tuner;
  std::vector<ConfigEntity> next_batch(int n) override;
  std::string name() const override { return "grid"; }

 private:
  size_t cursor_ = 0;
};

/// Genetic search over knob choices, as AutoTVM's GATuner: a population of `pop_size`, the
/// `elite_num` best kept, parents picked with probability proportional to fitness, uniform
/// crossover per knob, and each knob mutated with probability `mutation_prob`.
class GaTuner : public Tuner {
 public:
  GaTuner(const Task& task, uint64_t seed, int pop_size = 100, int elite_num = 3,
          double mutation_prob = 0.1);
  std::vector<ConfigEntity> next_batch(int n) override;
  std::string name() const override { return "ga"; }

 protected:
  void on_results(const std::vector<ConfigEntity>& configs,
                  const std::vector<double>& gflops) override;

 private:
  std::vector<ConfigEntity> breed(int n);
  int pop_size_, elite_num_;
  double mutation_prob_;
  std::vector<std::pair<double, ConfigEntity>> scored_;  // every measured config
};

/// Builds a tuner by name: random, grid, ga or xgb (see xgb_tuner.hpp for xgb's options).
/// Throws std::invalid_argument for an unknown name.
std::unique_ptr<Tuner> make_tuner(const std::string& name, const Task& task, uint64_t seed);

}  // namespace webtune
