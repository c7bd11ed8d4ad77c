/// \file task_scheduler.cpp
/// Round-robin and Ansor's gradient-based task schedulers; see task_scheduler.hpp.
#include "tuner/task_scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace webtune {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// TVM's derive_similarity_tag buckets FLOP counts by powers of this base.
constexpr double kSimilarityLogBase = 1.618;
/// Rounds ahead of every other group member after which a still slow task leaves its group
/// (TVM's _adjust_similarity_group).
constexpr int kLeaveGroupRounds = 5;

}  // namespace

std::string similarity_tag(const Workload& workload) {
  const double bucket = std::floor(std::log(workload.flops() + 1) / std::log(kSimilarityLogBase));
  return std::string(op_name(workload.op)) + "_" + std::to_string(static_cast<int64_t>(bucket));
}

// ---- TaskScheduler ------------------------------------------------------------------------

TaskScheduler::TaskScheduler(std::vector<ScheduledTask> tasks)
    : tasks_(std::move(tasks)),
      history_(tasks_.size()),
      finished_(tasks_.size(), false),
      last_(tasks_.size()) {
  if (tasks_.empty()) throw std::invalid_argument("task scheduler: no tasks");
  for (const ScheduledTask& t : tasks_) {
    if (!(t.weight > 0) || !std::isfinite(t.weight))
      throw std::invalid_argument("task scheduler: task '" + t.name +
                                  "' needs a finite positive weight, not " +
                                  std::to_string(t.weight));
    if (!(t.flops >= 0) || !std::isfinite(t.flops))
      throw std::invalid_argument("task scheduler: task '" + t.name +
                                  "' has a negative or non-finite FLOP count");
  }
}

std::optional<size_t> TaskScheduler::next() {
  // Warm-up: every task gets a round before any policy compares them.
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (!finished_[i] && history_[i].empty()) return last_ = i;
  std::vector<size_t> live;
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (!finished_[i]) live.push_back(i);
  if (live.empty()) return std::nullopt;
  return last_ = pick(live);
}

void TaskScheduler::check_cost(size_t task, double cost) const {
  if (task >= tasks_.size())
    throw std::out_of_range("task scheduler: no task " + std::to_string(task) + " of " +
                            std::to_string(tasks_.size()));
  if (std::isnan(cost) || cost < 0)
    throw std::invalid_argument("task scheduler: task '" + tasks_[task].name +
                                "': a best cost must be a non-negative number of seconds");
}

void TaskScheduler::record(size_t task, double best_cost_s) {
  check_cost(task, best_cost_s);
  history_[task].push_back(best_cost_s);
  on_record(task);
}

void TaskScheduler::restore(size_t task, int rounds, double best_cost_s) {
  check_cost(task, best_cost_s);
  if (rounds < 0) throw std::invalid_argument("task scheduler: negative rounds to restore");
  history_[task].insert(history_[task].end(), static_cast<size_t>(rounds), best_cost_s);
  if (rounds > 0) on_record(task);
}

void TaskScheduler::finish(size_t task) {
  finished_.at(task) = true;
}

double TaskScheduler::best_cost(size_t i) const {
  const std::vector<double>& h = history_.at(i);
  return h.empty() ? kInf : h.back();
}

std::optional<double> TaskScheduler::objective() const {
  double sum = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const double g = best_cost(i);
    if (!std::isfinite(g)) return std::nullopt;
    sum += tasks_[i].weight * g;
  }
  return sum;
}

// ---- round-robin --------------------------------------------------------------------------

size_t RoundRobinScheduler::pick(const std::vector<size_t>& live) {
  // The first live task after the last pick, wrapping around.
  const size_t last = last_picked();
  for (size_t i : live)
    if (last >= size() || i > last) return i;
  return live.front();
}

// ---- gradient -----------------------------------------------------------------------------

GradientScheduler::GradientScheduler(std::vector<ScheduledTask> tasks,
                                     GradientSchedulerOptions options)
    : TaskScheduler(std::move(tasks)), options_(options), rng_(options.seed) {
  if (!(options_.alpha >= 0 && options_.alpha <= 1))
    throw std::invalid_argument("gradient scheduler: alpha must be in [0, 1]");
  if (!(options_.epsilon >= 0 && options_.epsilon <= 1))
    throw std::invalid_argument("gradient scheduler: epsilon must be in [0, 1]");
  if (!(options_.beta > 0) || !std::isfinite(options_.beta))
    throw std::invalid_argument("gradient scheduler: beta must be positive");
  if (options_.backward_window < 1)
    throw std::invalid_argument("gradient scheduler: the backward window must be >= 1 round");
  for (const ScheduledTask& t : tasks_) tags_.push_back(t.similarity);
}

std::vector<size_t> GradientScheduler::similar(size_t task) const {
  std::vector<size_t> out;
  if (tags_.at(task).empty()) return out;
  for (size_t j = 0; j < size(); ++j)
    if (tags_[j] == tags_[task]) out.push_back(j);
  return out;
}

double GradientScheduler::gradient(size_t i) const {
  if (finished(i) || rounds(i) == 0) return 0;
  const double g = best_cost(i);
  if (!std::isfinite(g)) return -kInf;
  const std::vector<double>& h = history(i);
  const int t = rounds(i);
  const int window = options_.backward_window;

  // (g(t) − g(t − Δt)) / Δt: what the last Δt rounds bought.
  double backward = 0;
  if (t - 1 - window >= 0) {
    const double now = h[static_cast<size_t>(t - 1)];
    const double then = h[static_cast<size_t>(t - 1 - window)];
    if (std::isfinite(now) && std::isfinite(then)) backward = (now - then) / window;
  }

  // g(t + Δt) − g(t), predicted optimistically: the 1/t trend, or the FLOP/s a similar task
  // reaches, with β of slack.
  double forward = -g / t;
  const double flops = task(i).flops;
  if (flops > 0) {
    double best_flops = 0;  // max over N(i) of V_k = C_k / g_k
    int others = 0;
    for (size_t k : similar(i)) {
      const double gk = best_cost(k), ck = task(k).flops;
      if (!std::isfinite(gk) || !(gk > 0) || !(ck > 0)) continue;
      best_flops = std::max(best_flops, ck / gk);
      others += k != i;
    }
    if (others > 0 && best_flops > 0)
      forward = std::min(forward, options_.beta * flops / best_flops - g);
  }
  return task(i).weight * (options_.alpha * backward + (1 - options_.alpha) * forward);
}

size_t GradientScheduler::pick(const std::vector<size_t>& live) {
  // One draw per pick, whatever it decides, so that a seed gives one sequence of picks.
  std::uniform_real_distribution<double> coin(0, 1);
  std::uniform_int_distribution<size_t> any(0, live.size() - 1);
  if (coin(rng_) < options_.epsilon) return live[any(rng_)];

  std::vector<double> grads;
  for (size_t i : live) grads.push_back(gradient(i));
  // A task without a cost yet leaves the estimate unknown: it goes first, fewest rounds first.
  size_t unknown = size();
  for (size_t j = 0; j < live.size(); ++j)
    if (std::isinf(grads[j]) && (unknown == size() || rounds(live[j]) < rounds(unknown)))
      unknown = live[j];
  if (unknown != size()) return unknown;

  const auto [lo, hi] = std::minmax_element(grads.begin(), grads.end());
  if (*lo == *hi) return live[any(rng_)];  // nothing tells them apart
  return live[static_cast<size_t>(lo - grads.begin())];
}

void GradientScheduler::on_record(size_t i) {
  // A task far behind its group's FLOP/s after many more rounds than the others is not similar
  // to them after all (TVM's _adjust_similarity_group).
  const std::vector<size_t> group = similar(i);
  if (group.size() <= 1) return;
  const double g = best_cost(i), c = task(i).flops;
  if (!std::isfinite(g) || !(g > 0) || !(c > 0)) return;
  double best_flops = 0;
  int most_rounds = 0;  // of the others
  for (size_t k : group) {
    const double gk = best_cost(k), ck = task(k).flops;
    if (std::isfinite(gk) && gk > 0 && ck > 0) best_flops = std::max(best_flops, ck / gk);
    if (k != i) most_rounds = std::max(most_rounds, rounds(k));
  }
  if (c / g < best_flops / options_.beta && rounds(i) > kLeaveGroupRounds + most_rounds)
    tags_[i].clear();
}

std::unique_ptr<TaskScheduler> make_task_scheduler(const std::string& policy,
                                                   std::vector<ScheduledTask> tasks,
                                                   uint64_t seed) {
  if (policy == "round-robin") return std::make_unique<RoundRobinScheduler>(std::move(tasks));
  if (policy == "gradient" || policy == "latency") {
    GradientSchedulerOptions options;
    options.seed = seed;
    return std::make_unique<GradientScheduler>(std::move(tasks), options);
  }
  throw std::invalid_argument("unknown task schedule '" + policy +
                              "' (round-robin or gradient; latency is gradient's older name)");
}

}  // namespace webtune
