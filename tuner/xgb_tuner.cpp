/// \file xgb_tuner.cpp
/// The XGBoost cost-model tuner (see xgb_tuner.hpp): fitting through XGBoost's C API, the
/// simulated-annealing plan, and serving batches from the plan.
///
/// The loop follows AutoTVM's ModelBasedTuner (python/tvm/autotvm/tuner/model_based_tuner.py):
/// measure random configs until `plan_size` trials are in, fit the model, let the optimizer
/// (sa_model_optimizer.py) pick the `plan_size` best-predicted unvisited configs, serve them
/// (with an epsilon share of random ones), refit after the next `plan_size` trials, and so on.
#include "tuner/xgb_tuner.hpp"

#include <xgboost/c_api.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>

#include "tuner/features.hpp"

namespace webtune {

namespace {

/// Own successes needed before the first fit on own data: with fewer, every label but one or
/// two is 0 and the model can only tell "failed" from "ran" (AutoTVM waits for one success).
constexpr int kMinSuccesses = 3;
/// Candidates per plan entry when the diversity filter is on (AutoTVM's
/// diversity_filter_ratio; its XGBTuner docs suggest 2).
constexpr int kDiversityRatio = 2;
/// Random single-knob changes tried before a walker falls back to enumerating its valid
/// neighbours (most random changes of the GL templates are valid; enumerating costs ~50 checks).
constexpr int kWalkTries = 16;
/// Share of SA start points taken from the best measured configs (the rest are random).
constexpr size_t kBestStartDivisor = 4;

/// Throws std::runtime_error with XGBoost's message when a C API call failed.
void check(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string("xgboost ") + what + ": " + XGBGetLastError());
}

/// Owns a DMatrixHandle.
class Matrix {
 public:
  /// A dense row-major `rows` × `cols` matrix; no value is treated as missing (NaN marks
  /// missing, and features are never NaN), so zeros stay zeros.
  Matrix(const std::vector<float>& data, size_t rows, size_t cols, int nthread) {
    check(XGDMatrixCreateFromMat_omp(data.data(), rows, cols,
                                     std::numeric_limits<float>::quiet_NaN(), &handle_, nthread),
          "XGDMatrixCreateFromMat");
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  ~Matrix() {
    if (handle_ != nullptr) XGDMatrixFree(handle_);
  }
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

/// Owns a BoosterHandle.
class Booster {
 public:
  explicit Booster(DMatrixHandle train) {
    check(XGBoosterCreate(&train, 1, &handle_), "XGBoosterCreate");
  }
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;
  ~Booster() {
    if (handle_ != nullptr) XGBoosterFree(handle_);
  }
  BoosterHandle get() const { return handle_; }
  void set(const char* name, const std::string& value) {
    check(XGBoosterSetParam(handle_, name, value.c_str()), "XGBoosterSetParam");
  }

 private:
  BoosterHandle handle_ = nullptr;
};

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

/// The fitted booster. The training matrix lives as long as the booster that learnt from it:
/// XGBoost keeps per-matrix caches keyed by the handle.
struct XgbTuner::Model {
  std::unique_ptr<Matrix> train;
  std::unique_ptr<Booster> booster;
};

XgbTuner::XgbTuner(const Task& task, uint64_t seed, XgbOptions options)
    : Tuner(task, seed), options_(std::move(options)) {
  if (options_.loss_type != "rank" && options_.loss_type != "reg")
    throw std::invalid_argument("xgb loss_type must be \"rank\" or \"reg\", not \"" +
                                options_.loss_type + "\"");
  if (options_.plan_size < 1 || options_.num_rounds < 1 || options_.sa_walkers < 1 ||
      options_.sa_steps < 0 || options_.sa_early_stop < 1 || options_.num_threads < 1)
    throw std::invalid_argument(
        "xgb options: plan_size, num_rounds, sa_walkers, sa_early_stop and num_threads must be "
        "positive, sa_steps non-negative");
  // XGBoost's own seed (rank:pairwise samples pairs at random) follows the tuner's.
  xgb_seed_ = rng_() >> 33;
  feature_length_ = feature_names(task_).size();
}

XgbTuner::~XgbTuner() = default;

const std::vector<float>& XgbTuner::features_of(int64_t index) {
  auto it = feature_cache_.find(index);
  if (it == feature_cache_.end())
    it = feature_cache_.emplace(index, config_features(task_, task_.space->get(index))).first;
  return it->second;
}

void XgbTuner::on_results(const std::vector<ConfigEntity>& configs,
                          const std::vector<double>& gflops) {
  for (size_t i = 0; i < configs.size(); ++i) {
    measured_.push_back(configs[i].index());
    measured_gflops_.push_back(gflops[i]);
  }
}

void XgbTuner::add_transfer(const TransferData& data) {
  if (data.features.size() != data.gflops.size())
    throw std::invalid_argument("add_transfer: one gflops value per feature row");
  for (const auto& row : data.features) {
    if (row.size() != feature_length_)
      throw std::invalid_argument("add_transfer: rows of " + std::to_string(row.size()) +
                                  " features, this template has " +
                                  std::to_string(feature_length_));
  }
  const double best =
      data.gflops.empty() ? 0.0 : *std::max_element(data.gflops.begin(), data.gflops.end());
  // A source without one success has nothing to rank and no scale to normalise by.
  if (best <= 0) return;
  for (size_t i = 0; i < data.features.size(); ++i) {
    transfer_.features.push_back(data.features[i]);
    transfer_.gflops.push_back(std::max(0.0, data.gflops[i]) / best);
  }
  transfer_groups_.push_back(static_cast<unsigned>(data.features.size()));
  transfer_pending_ = true;
}

bool XgbTuner::fit_due() const {
  if (transfer_pending_) return true;
  const int64_t since = static_cast<int64_t>(measured_.size()) - trials_at_last_fit_;
  if (since < options_.plan_size) return false;
  const auto successes = std::count_if(measured_gflops_.begin(), measured_gflops_.end(),
                                       [](double g) { return g > 0; });
  return successes >= kMinSuccesses;
}

void XgbTuner::fit() {
  const auto start = std::chrono::steady_clock::now();
  const size_t cols = feature_length_;
  const size_t own = measured_.size();
  const size_t rows = own + transfer_.features.size();
  if (rows == 0) return;
  // Targets: GFLOP/s over the best of the same source (AutoTVM divides by the max too), so
  // that own rows and every transfer source share the scale [0, 1]; failures are 0.
  const double best =
      own == 0 ? 0.0 : *std::max_element(measured_gflops_.begin(), measured_gflops_.end());
  std::vector<float> data;
  data.reserve(rows * cols);
  std::vector<float> labels;
  labels.reserve(rows);
  for (size_t i = 0; i < own; ++i) {
    const std::vector<float>& f = features_of(measured_[i]);
    data.insert(data.end(), f.begin(), f.end());
    labels.push_back(best > 0 ? static_cast<float>(measured_gflops_[i] / best) : 0.0f);
  }
  for (size_t i = 0; i < transfer_.features.size(); ++i) {
    data.insert(data.end(), transfer_.features[i].begin(), transfer_.features[i].end());
    labels.push_back(static_cast<float>(transfer_.gflops[i]));
  }

  auto model = std::make_unique<Model>();
  model->train = std::make_unique<Matrix>(data, rows, cols, options_.num_threads);
  check(XGDMatrixSetFloatInfo(model->train->get(), "label", labels.data(), rows),
        "XGDMatrixSetFloatInfo(label)");
  const bool rank = options_.loss_type == "rank";
  if (rank) {
    // AutoTVM puts all rows in one query group. With transfer rows, each source (own trials,
    // every add_transfer call) is its own group: pairs within a source compare configs on one
    // workload and device, pairs across sources would compare unrelated normalisations.
    std::vector<unsigned> groups;
    if (own > 0) groups.push_back(static_cast<unsigned>(own));
    groups.insert(groups.end(), transfer_groups_.begin(), transfer_groups_.end());
    check(XGDMatrixSetUIntInfo(model->train->get(), "group", groups.data(), groups.size()),
          "XGDMatrixSetUIntInfo(group)");
  }
  model->booster = std::make_unique<Booster>(model->train->get());
  Booster& b = *model->booster;
  // AutoTVM's XGBoostCostModel parameters (xgboost_cost_model.py).
  b.set("objective", rank ? "rank:pairwise" : "reg:squarederror");
  b.set("max_depth", "6");
  b.set("eta", "0.3");
  b.set("gamma", "0.0001");
  b.set("min_child_weight", "1");
  b.set("subsample", "1.0");
  b.set("lambda", "1");
  b.set("alpha", "0");
  b.set("nthread", std::to_string(options_.num_threads));
  b.set("seed", std::to_string(xgb_seed_));
  b.set("verbosity", "0");
  for (int round = 0; round < options_.num_rounds; ++round)
    check(XGBoosterUpdateOneIter(b.get(), round, model->train->get()), "XGBoosterUpdateOneIter");

  model_ = std::move(model);
  trials_at_last_fit_ = static_cast<int64_t>(own);
  transfer_pending_ = false;
  plan_pending_ = true;
  ++fits_;
  spdlog::debug("xgb: fit {} on {} rows ({} own, {} transfer) in {:.1f} ms", fits_, rows, own,
                transfer_.features.size(), elapsed_ms(start));
}

std::vector<float> XgbTuner::predict_rows(const std::vector<const std::vector<float>*>& rows) {
  if (rows.empty()) return {};
  std::vector<float> data;
  data.reserve(rows.size() * feature_length_);
  for (const std::vector<float>* row : rows) data.insert(data.end(), row->begin(), row->end());
  Matrix matrix(data, rows.size(), feature_length_, options_.num_threads);
  bst_ulong length = 0;
  const float* result = nullptr;
  check(XGBoosterPredict(model_->booster->get(), matrix.get(), 0, 0, 0, &length, &result),
        "XGBoosterPredict");
  if (length != rows.size())
    throw std::runtime_error("xgboost predict: " + std::to_string(length) + " scores for " +
                             std::to_string(rows.size()) + " rows");
  return std::vector<float>(result, result + length);
}

std::vector<float> XgbTuner::predict_indices(const std::vector<int64_t>& indices) {
  // Compute every missing feature vector first: the references stay valid because
  // unordered_map never moves its elements on insertion.
  std::vector<const std::vector<float>*> rows;
  rows.reserve(indices.size());
  for (int64_t index : indices) rows.push_back(&features_of(index));
  return predict_rows(rows);
}

std::vector<float> XgbTuner::predict(const std::vector<ConfigEntity>& entities) {
  if (fit_due()) fit();
  if (!model_) throw std::logic_error("XgbTuner::predict before the first fit");
  std::vector<int64_t> indices;
  indices.reserve(entities.size());
  for (const ConfigEntity& e : entities) indices.push_back(e.index());
  return predict_indices(indices);
}

int64_t XgbTuner::random_walk(int64_t index) {
  const ConfigSpace& space = *task_.space;
  const ConfigEntity entity = space.get(index);
  const KnobList& knobs = space.knobs();
  std::vector<int> movable;  // knobs with a choice to change to
  for (size_t k = 0; k < knobs.size(); ++k)
    if (knobs[k].candidates.size() > 1) movable.push_back(static_cast<int>(k));
  if (movable.empty()) return index;
  std::uniform_int_distribution<size_t> pick_knob(0, movable.size() - 1);
  for (int attempt = 0; attempt < kWalkTries; ++attempt) {
    const int k = movable[pick_knob(rng_)];
    std::uniform_int_distribution<int> pick_choice(
        0, static_cast<int>(knobs[k].candidates.size()) - 2);
    std::vector<int> choices = entity.choices();
    int choice = pick_choice(rng_);
    if (choice >= choices[k]) ++choice;  // any choice but the current one
    choices[k] = choice;
    ConfigEntity next = space.from_choices(choices);
    if (space.is_valid(next)) return next.index();
  }
  const std::vector<ConfigEntity> around = space.neighbours(entity);
  if (around.empty()) return index;
  std::uniform_int_distribution<size_t> pick(0, around.size() - 1);
  return around[pick(rng_)].index();
}

std::vector<int64_t> XgbTuner::diversity_pick(const std::vector<int64_t>& ranked, size_t count) {
  if (ranked.size() <= count) return ranked;
  const ConfigSpace& space = *task_.space;
  std::vector<std::vector<int>> choices;
  choices.reserve(ranked.size());
  for (int64_t index : ranked) choices.push_back(space.get(index).choices());
  std::set<std::pair<size_t, int>> covered;  // (knob, choice) pairs already in the pick
  std::vector<bool> taken(ranked.size(), false);
  std::vector<int64_t> picked;
  while (picked.size() < count) {
    size_t best = ranked.size();
    int best_gain = -1;
    for (size_t i = 0; i < ranked.size(); ++i) {
      if (taken[i]) continue;
      int gain = 0;
      for (size_t k = 0; k < choices[i].size(); ++k) gain += covered.count({k, choices[i][k]}) == 0;
      if (gain > best_gain) best_gain = gain, best = i;  // first (best predicted) wins ties
    }
    taken[best] = true;
    for (size_t k = 0; k < choices[best].size(); ++k) covered.insert({k, choices[best][k]});
    picked.push_back(ranked[best]);
  }
  return picked;
}

void XgbTuner::plan() {
  const auto start = std::chrono::steady_clock::now();
  plan_.clear();
  plan_cursor_ = 0;
  plan_pending_ = false;
  const ConfigSpace& space = *task_.space;
  const std::vector<int64_t>& valid = space.valid_indices();
  if (valid.empty() || !model_) return;
  const size_t want =
      static_cast<size_t>(options_.plan_size) * (options_.diversity_filter ? kDiversityRatio : 1);
  const size_t walkers = std::min(static_cast<size_t>(options_.sa_walkers), valid.size());

  // Start points: the best measured configs (their neighbourhoods are where the next best ones
  // usually are), then random valid configs for breadth, as AutoTVM's sample_ints.
  std::vector<int64_t> points;
  points.reserve(walkers);
  {
    std::vector<size_t> order(measured_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return measured_gflops_[a] > measured_gflops_[b]; });
    std::unordered_set<int64_t> seen;
    for (size_t i : order) {
      if (points.size() >= walkers / kBestStartDivisor || measured_gflops_[i] <= 0) break;
      if (seen.insert(measured_[i]).second) points.push_back(measured_[i]);
    }
  }
  std::uniform_int_distribution<size_t> pick_valid(0, valid.size() - 1);
  while (points.size() < walkers) points.push_back(valid[pick_valid(rng_)]);
  std::vector<float> scores = predict_indices(points);

  // The top `want` unvisited configs seen so far, by predicted score (AutoTVM keeps a heap).
  std::set<std::pair<float, int64_t>> top;  // smallest first
  std::unordered_set<int64_t> in_top;
  auto offer = [&](float score, int64_t index) {
    if (visited(index) || in_top.count(index) > 0) return false;
    if (top.size() >= want) {
      if (score <= top.begin()->first) return false;
      in_top.erase(top.begin()->second);
      top.erase(top.begin());
    }
    top.emplace(score, index);
    in_top.insert(index);
    return true;
  };
  for (size_t i = 0; i < points.size(); ++i) offer(scores[i], points[i]);

  // AutoTVM's SimulatedAnnealingOptimizer: temperature from sa_temp_start down to 0 in equal
  // steps over sa_steps, acceptance probability exp(min(Δscore / T, 1)), stop after
  // sa_early_stop steps without a change of the top set.
  double temperature = options_.sa_temp_start;
  const double cool = options_.sa_temp_start / (options_.sa_steps + 1);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::vector<int64_t> next(points.size());
  int step = 0, last_change = 0;
  while (step < options_.sa_steps && step < last_change + options_.sa_early_stop) {
    for (size_t i = 0; i < points.size(); ++i) next[i] = random_walk(points[i]);
    const std::vector<float> next_scores = predict_indices(next);  // one predict per step
    for (size_t i = 0; i < points.size(); ++i) {
      const double delta = (next_scores[i] - scores[i]) / (temperature + 1e-5);
      if (coin(rng_) < std::exp(std::min(delta, 1.0))) {
        points[i] = next[i];
        scores[i] = next_scores[i];
      }
    }
    for (size_t i = 0; i < next.size(); ++i)
      if (offer(next_scores[i], next[i])) last_change = step;
    ++step;
    temperature -= cool;
  }

  std::vector<int64_t> ranked;
  ranked.reserve(top.size());
  for (auto it = top.rbegin(); it != top.rend(); ++it) ranked.push_back(it->second);
  plan_ = options_.diversity_filter
              ? diversity_pick(ranked, static_cast<size_t>(options_.plan_size))
              : std::move(ranked);
  spdlog::debug("xgb: plan of {} after {} SA steps ({} walkers, {} features cached) in {:.1f} ms",
                plan_.size(), step, walkers, feature_cache_.size(), elapsed_ms(start));
}

std::vector<ConfigEntity> XgbTuner::next_batch(int n) {
  if (fit_due()) fit();
  if (plan_pending_) plan();
  const ConfigSpace& space = *task_.space;
  const std::vector<int64_t>& valid = space.valid_indices();
  std::vector<ConfigEntity> out;
  if (valid.empty()) return out;

  // Random unvisited configs: rejection sampling while most are unvisited, then a shuffled
  // list of the rest (built once per batch).
  std::vector<int64_t> rest;
  bool rest_built = false;
  size_t rest_pos = 0;
  std::uniform_int_distribution<size_t> pick_valid(0, valid.size() - 1);
  auto random_pick = [&]() -> std::optional<int64_t> {
    if (!rest_built) {
      for (int attempt = 0; attempt < 64; ++attempt) {
        const int64_t index = valid[pick_valid(rng_)];
        if (!visited(index)) return index;
      }
      for (int64_t index : valid)
        if (!visited(index)) rest.push_back(index);
      std::shuffle(rest.begin(), rest.end(), rng_);
      rest_built = true;
    }
    while (rest_pos < rest.size()) {
      const int64_t index = rest[rest_pos++];
      if (!visited(index)) return index;
    }
    return std::nullopt;
  };
  auto plan_pick = [&]() -> std::optional<int64_t> {
    while (plan_cursor_ < plan_.size()) {
      const int64_t index = plan_[plan_cursor_++];
      if (!visited(index) && space.is_valid_index(index)) return index;
    }
    return std::nullopt;
  };

  while (static_cast<int>(out.size()) < n) {
    std::optional<int64_t> index;
    if (plan_cursor_ < plan_.size()) {
      // Epsilon-greedy (AutoTVM spends the last 5% of each plan on random configs): an
      // `epsilon` share of the slots served while a plan lasts goes to random configs, so the
      // model keeps seeing regions it rates low.
      random_credit_ += options_.epsilon;
      if (random_credit_ >= 1.0) {
        random_credit_ -= 1.0;
        index = random_pick();
      } else {
        index = plan_pick();
      }
    }
    // No plan (before the first fit), or it is used up and no refit is due yet: random.
    if (!index) index = random_pick();
    if (!index) break;  // every valid config has been proposed
    mark_visited(*index);
    out.push_back(space.get(*index));
  }
  return out;
}

}  // namespace webtune
