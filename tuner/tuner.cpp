/// \file tuner.cpp
/// The Tuner base (visited set, best so far) and the model-free tuners: random, grid, genetic.
#include "tuner/tuner.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "tuner/xgb_tuner.hpp"

namespace webtune {

Tuner::Tuner(const Task& task, uint64_t seed) : task_(task), rng_(seed) {}

int64_t Tuner::valid_count() const {
  return static_cast<int64_t>(task_.space->valid_indices().size());
}

bool Tuner::has_next() const {
  int64_t visited_valid = 0;
  if (static_cast<int64_t>(visited_.size()) < valid_count()) return true;
  for (int64_t index : task_.space->valid_indices()) visited_valid += visited_.count(index);
  return visited_valid < valid_count();
}

void Tuner::update(const std::vector<ConfigEntity>& configs,
                   const std::vector<MeasureResult>& results) {
  if (configs.size() != results.size())
    throw std::invalid_argument("update: one result per config");
  const double flops = task_.workload.flops();
  std::vector<double> gflops(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    visited_.insert(configs[i].index());
    gflops[i] = results[i].ok() ? results[i].gflops(flops) : 0.0;
    ++trials_;
    if (gflops[i] > best_gflops_) {
      best_gflops_ = gflops[i];
      best_config_ = configs[i];
      best_trial_ = trials_;
    }
  }
  on_results(configs, gflops);
}

void Tuner::load_history(const std::vector<ConfigEntity>& configs,
                         const std::vector<MeasureResult>& results) {
  update(configs, results);
}

void Tuner::fill_randomly(std::vector<ConfigEntity>& out, int n) {
  if (static_cast<int>(out.size()) >= n) return;
  std::vector<int64_t> rest;
  for (int64_t index : task_.space->valid_indices())
    if (!visited(index)) rest.push_back(index);
  std::shuffle(rest.begin(), rest.end(), rng_);
  for (int64_t index : rest) {
    if (static_cast<int>(out.size()) >= n) break;
    mark_visited(index);
    out.push_back(task_.space->get(index));
  }
}

std::vector<ConfigEntity> RandomTuner::next_batch(int n) {
  std::vector<ConfigEntity> out;
  const std::vector<int64_t>& valid = task_.space->valid_indices();
  if (valid.empty()) return out;
  std::uniform_int_distribution<size_t> pick(0, valid.size() - 1);
  // Rejection sampling while the space is mostly unvisited; a shuffled sweep of the rest after.
  int misses = 0;
  while (static_cast<int>(out.size()) < n && misses < 64) {
    const int64_t index = valid[pick(rng_)];
    if (visited(index)) {
      ++misses;
      continue;
    }
    mark_visited(index);
    out.push_back(task_.space->get(index));
  }
  fill_randomly(out, n);
  return out;
}

std::vector<ConfigEntity> GridSearchTuner::next_batch(int n) {
  std::vector<ConfigEntity> out;
  const std::vector<int64_t>& valid = task_.space->valid_indices();
  while (static_cast<int>(out.size()) < n && cursor_ < valid.size()) {
    const int64_t index = valid[cursor_++];
    if (visited(index)) continue;
    mark_visited(index);
    out.push_back(task_.space->get(index));
  }
  return out;
}

GaTuner::GaTuner(const Task& task, uint64_t seed, int pop_size, int elite_num, double mutation_prob)
    : Tuner(task, seed),
      pop_size_(pop_size),
      elite_num_(elite_num),
      mutation_prob_(mutation_prob) {}

void GaTuner::on_results(const std::vector<ConfigEntity>& configs,
                         const std::vector<double>& gflops) {
  for (size_t i = 0; i < configs.size(); ++i) scored_.emplace_back(gflops[i], configs[i]);
}

std::vector<ConfigEntity> GaTuner::breed(int n) {
  // The population is the pop_size best measured configs; elites are the top elite_num.
  std::vector<std::pair<double, ConfigEntity>> population = scored_;
  std::sort(population.begin(), population.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  if (static_cast<int>(population.size()) > pop_size_) population.resize(pop_size_);
  std::vector<double> weights;
  for (const auto& [score, entity] : population) weights.push_back(score + 1e-8);
  std::discrete_distribution<size_t> parent(weights.begin(), weights.end());
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  const ConfigSpace& space = *task_.space;
  std::vector<ConfigEntity> children;
  int attempts = 0;
  while (static_cast<int>(children.size()) < n && attempts < n * 50) {
    ++attempts;
    const ConfigEntity& a = population[parent(rng_)].second;
    const ConfigEntity& b = population[parent(rng_)].second;
    std::vector<int> genes(a.choices().size());
    for (size_t k = 0; k < genes.size(); ++k) {
      genes[k] = coin(rng_) < 0.5 ? a.choices()[k] : b.choices()[k];  // uniform crossover
      if (coin(rng_) < mutation_prob_) {
        std::uniform_int_distribution<int> any(
            0, static_cast<int>(space.knobs()[k].candidates.size()) - 1);
        genes[k] = any(rng_);
      }
    }
    ConfigEntity child = space.from_choices(genes);
    if (visited(child.index()) || !space.is_valid(child)) continue;
    mark_visited(child.index());
    children.push_back(std::move(child));
  }
  return children;
}

std::vector<ConfigEntity> GaTuner::next_batch(int n) {
  std::vector<ConfigEntity> out;
  // Until a first population is measured (or when breeding stalls), fill with random configs.
  if (static_cast<int>(scored_.size()) >= std::min(pop_size_, 8)) out = breed(n);
  fill_randomly(out, n);
  return out;
}

std::unique_ptr<Tuner> make_tuner(const std::string& name, const Task& task, uint64_t seed) {
  if (name == "random") return std::make_unique<RandomTuner>(task, seed);
  if (name == "grid") return std::make_unique<GridSearchTuner>(task, seed);
  if (name == "ga") return std::make_unique<GaTuner>(task, seed);
  if (name == "xgb") return std::make_unique<XgbTuner>(task, seed);
  throw std::invalid_argument("unknown tuner '" + name + "' (known: random, grid, ga, xgb)");
}

}  // namespace webtune
