/// \file xgb_tuner.hpp
/// AutoTVM's model-based tuner with an XGBoost cost model (Chen et al., "Learning to Optimize
/// Tensor Programs", NeurIPS 2018; python/tvm/autotvm/tuner/xgboost_tuner.py and
/// model_based_tuner.py).
///
/// The model (XGBoost 1.7 C API) predicts a score from config_features(); targets are GFLOP/s
/// normalised by the best seen (failed trials are 0). It is refitted every `plan_size` trials
/// once at least 3 of them succeeded; then a simulated-annealing optimizer (AutoTVM's
/// SimulatedAnnealingOptimizer: `sa_walkers` parallel walkers started from the best measured
/// and random valid configs, temperature cooled linearly from `sa_temp_start` to 0 over
/// `sa_steps`, stopping early after `sa_early_stop` steps without a change of the top set)
/// proposes the next plan of the `plan_size` best-predicted unvisited configs. While a plan
/// lasts an `epsilon` share of the slots (0.05) goes to random configs, as AutoTVM spends the
/// last 5% of each plan; once it is used up and no refit is due, batches are random. An
/// optional diversity filter (AutoTVM's submodular_pick) picks the plan from twice as many
/// candidates so that its members cover many knob choices. Until the first fit, batches are
/// random.
///
/// Transfer: add_transfer rows make a fit due at once, even with no own trial, so the first
/// batch after it already comes from a plan (AutoTVM's load_history likewise fits and plans
/// from history before measuring). With loss "rank" every source (own trials, each
/// add_transfer call) is its own query group.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tuner/tuner.hpp"

namespace webtune {

struct XgbOptions {
  std::string loss_type = "rank";  ///< "rank" (rank:pairwise) or "reg" (reg:squarederror)
  int plan_size = 64;
  int num_rounds = 100;  ///< boosting rounds per fit (AutoTVM's default fit uses up to 8000
                         ///< with early stopping; a fixed 100 suits spaces of this size)
  int num_threads = 1;   ///< XGBoost nthread; >1 spins under CPU contention (platform notes)
  int sa_walkers = 128, sa_steps = 500, sa_early_stop = 50;
  double sa_temp_start = 1.0;
  double epsilon = 0.05;
  bool diversity_filter = false;
};

/// Training rows from other tuning runs (transfer learning): features and GFLOP/s.
struct TransferData {
  std::vector<std::vector<float>> features;
  std::vector<double> gflops;
};

class XgbTuner : public Tuner {
 public:
  XgbTuner(const Task& task, uint64_t seed, XgbOptions options = {});
  ~XgbTuner() override;
  std::vector<ConfigEntity> next_batch(int n) override;
  std::string name() const override { return "xgb"; }

  /// Warm-starts the model from records of the same template on other workloads or devices;
  /// the rows join the training set (each call is one source, normalised by its own best; a
  /// source without a success is ignored). Throws std::invalid_argument when a row's length
  /// is not this template's feature length. The fit happens at the next next_batch/predict.
  void add_transfer(const TransferData& data);
  /// Predicted scores of entities (for tests), higher is better; fits first when a fit is
  /// due. Throws std::logic_error when there is no model yet (no fit due and none before).
  std::vector<float> predict(const std::vector<ConfigEntity>& entities);
  /// Times the model has been fitted.
  int fits() const { return fits_; }

 protected:
  void on_results(const std::vector<ConfigEntity>& configs,
                  const std::vector<double>& gflops) override;

 private:
  struct Model;
  /// True when the model should be (re)fitted before the next batch: transfer rows arrived, or
  /// `plan_size` own trials since the last fit with enough successes to learn from.
  bool fit_due() const;
  void fit();
  void plan();
  const std::vector<float>& features_of(int64_t index);
  /// Model scores of configs, one XGBoosterPredict for all of them.
  std::vector<float> predict_rows(const std::vector<const std::vector<float>*>& rows);
  std::vector<float> predict_indices(const std::vector<int64_t>& indices);
  /// A random valid config that differs from `index` in one knob (AutoTVM's random_walk);
  /// `index` itself when it has no valid neighbour.
  int64_t random_walk(int64_t index);
  /// AutoTVM's submodular_pick with zero scores: greedily the candidate that adds the most
  /// (knob, choice) pairs not yet in the pick, ties to the better predicted.
  std::vector<int64_t> diversity_pick(const std::vector<int64_t>& ranked, size_t count);

  XgbOptions options_;
  std::unique_ptr<Model> model_;
  std::vector<int64_t> measured_;  // indices, in measurement order
  std::vector<double> measured_gflops_;
  TransferData transfer_;                  // all transfer rows; gflops normalised per source
  std::vector<unsigned> transfer_groups_;  // rows per add_transfer call (one rank group each)
  bool transfer_pending_ = false;          // transfer rows not yet in the model
  bool plan_pending_ = false;              // fitted, but no plan from this model yet
  std::vector<int64_t> plan_;              // best-predicted unvisited configs, best first
  size_t plan_cursor_ = 0;
  double random_credit_ = 0;  // epsilon share owed to random picks
  int64_t trials_at_last_fit_ = 0;
  int fits_ = 0;
  uint64_t xgb_seed_ = 0;
  size_t feature_length_ = 0;
  std::unordered_map<int64_t, std::vector<float>> feature_cache_;
};

}  // namespace webtune
