/// \file task_scheduler.cpp
/// bench_task_scheduler: the estimated latency of a whole model against the trials spent, for
/// Ansor's gradient-based task scheduler and for round-robin (tuner/task_scheduler.hpp), on
/// replayed measurements. Issue 15's target: the gradient scheduler needs at most 0.6× the
/// trials of round-robin to come within 5% of the best latency found.
///
/// What is replayed. A model-sized tuning needs one replayed space per task, and
/// bench/results/replay.db holds only three full spaces (C7, C10, D1 on gles-frag), so by default
/// this replays bench/results/h100-2026-11-24/gpu.db: ResNet-18's 15 fused conv tasks
/// (configs/workloads/resnet18_fused.json, with their occurrences as weights) tuned on an H100
/// through gles-compute, 80 measured trials each (C11R: 64). A task's replayed space is the set
/// of its measured configs: its template's space (device limits from the records) restricted by
/// one more constraint to exactly those configs, so the task's tuner (XGB, as `webtune tune`
/// uses by default, or random) proposes among them and gets the stored result back. Every task
/// of the workload file must have a job of the same workload key in the records (the first one
/// wins when several devices have one: --device-key picks). A task leaves the scheduler when its
/// space is exhausted, as in a session; the budget defaults to all the configs, so every run
/// ends at the best latency the records hold.
///
/// Limits of this choice: the spaces are small (80 configs of spaces of thousands) and were
/// picked by an XGB tuning, so they hold more good configs than a blind sample and a task's
/// curve flattens sooner than on its full space; the tuners, whose models need 64 trials before
/// their first fit, act nearly as random search here, so this measures where the scheduler puts
/// the rounds more than how well a tuner searches. A space measured in full per task (as
/// replay.db's) would remove both limits. The default config, which a session measures first,
/// is not measured here (it may not be among the recorded ones); the measurements are replayed
/// without noise.
///
/// Output: per scheduler, the median over seeds of the estimated latency at checkpoints of the
/// trials spent, then the trials each run needs to come within `--within` (5%) of the best
/// latency found by any run, their median per scheduler and the ratio gradient / round-robin.
/// Each seed seeds the scheduler (ε-greedy) and, identically for both schedulers, the tuners.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/task.hpp"
#include "codegen/workload.hpp"
#include "records_copy.hpp"
#include "tuner/records.hpp"
#include "tuner/task_scheduler.hpp"
#include "tuner/tuner.hpp"

using namespace webtune;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// One task of the model, replayed: its measured configs are its whole space.
struct ReplayedTask {
  std::string name;
  int occurrences = 1;
  Task task;
  std::unordered_map<int64_t, MeasureResult> results;  ///< by config index
  double best_cost = kInf;                             ///< s, over the measured configs
};

/// The job of `workload` in `store` (device key `device_key` when not empty).
std::optional<TuningJobInfo> find_job(const RecordStore& store, const Workload& workload,
                                      const std::string& device_key) {
  for (const TuningJobInfo& job : store.jobs())
    if (job.workload.key() == workload.key() &&
        (device_key.empty() || job.device_key == device_key))
      return job;
  return std::nullopt;
}

ReplayedTask replay(const RecordStore& store, const WorkloadFileTask& t,
                    const std::string& device_key) {
  const std::string name = t.workload.name.empty() ? t.workload.key() : t.workload.name;
  const std::optional<TuningJobInfo> job = find_job(store, t.workload, device_key);
  if (!job)
    throw std::runtime_error("task " + name + " (" + t.workload.key() +
                             "): no job of that workload in the records" +
                             (device_key.empty() ? "" : " on " + device_key));
  DeviceLimits limits;
  if (const std::optional<std::string> info = store.device_info(job->device_key)) {
    const boost::json::value device = boost::json::parse(*info);
    if (device.is_object() && device.as_object().contains("limits"))
      limits = DeviceLimits::from_json(device.as_object().at("limits"));
  }
  ReplayedTask r{name, t.occurrences, Task::create(t.workload, job->target, limits), {}, kInf};
  int stale = 0;
  for (const TrialRecord& trial : store.trials(job->id)) {
    try {
      const ConfigEntity e = r.task.space->from_json(boost::json::parse(trial.config_json),
                                                     ConfigSpace::StaleIndex::kRenumber);
      if (!r.task.space->is_valid(e)) {
        ++stale;  // the template's rules changed since: no longer in its space
        continue;
      }
      r.results.emplace(e.index(), trial.result);
      if (trial.result.ok() && !trial.result.costs.empty())
        r.best_cost = std::min(r.best_cost, trial.result.mean_cost());
    } catch (const std::exception&) {
      ++stale;
    }
  }
  if (stale > 0)
    std::fprintf(stderr, "%s: %d recorded configs no longer fit the template's space\n",
                 name.c_str(), stale);
  if (!std::isfinite(r.best_cost))
    throw std::runtime_error("task " + name + ": no successful measured config to replay");
  // The measured configs are the whole space now.
  auto measured = std::make_shared<std::unordered_set<int64_t>>();
  for (const auto& [index, result] : r.results) measured->insert(index);
  r.task.space->add_constraint("measured in the records", [measured](const ConfigEntity& e) {
    return measured->count(e.index()) > 0;
  });
  return r;
}

/// The estimated model latency (ms) after each batch of one run: (trials, ms) once every task
/// has a success.
using Curve = std::vector<std::pair<int64_t, double>>;

Curve run_once(const std::vector<ReplayedTask>& tasks, const std::string& policy,
               const std::string& tuner_name, uint64_t seed, int batch, int64_t budget) {
  std::vector<ScheduledTask> scheduled;
  std::vector<std::unique_ptr<Tuner>> tuners;
  for (size_t i = 0; i < tasks.size(); ++i) {
    scheduled.push_back({tasks[i].name, static_cast<double>(tasks[i].occurrences),
                         tasks[i].task.workload.flops(), similarity_tag(tasks[i].task.workload)});
    // The same tuner seeds for every scheduler: the runs of one seed differ by the scheduler.
    tuners.push_back(make_tuner(tuner_name, tasks[i].task, seed * 1000 + i));
  }
  std::unique_ptr<TaskScheduler> scheduler = make_task_scheduler(policy, scheduled, seed);
  std::vector<double> best(tasks.size(), kInf);
  Curve curve;
  int64_t spent = 0;
  while (spent < budget) {
    for (size_t i = 0; i < tasks.size(); ++i)
      if (!tuners[i]->has_next()) scheduler->finish(i);
    const std::optional<size_t> next = scheduler->next();
    if (!next) break;
    const size_t i = *next;
    const std::vector<ConfigEntity> configs =
        tuners[i]->next_batch(static_cast<int>(std::min<int64_t>(batch, budget - spent)));
    if (configs.empty()) {
      scheduler->finish(i);
      continue;
    }
    std::vector<MeasureResult> results;
    for (const ConfigEntity& e : configs) {
      const MeasureResult& r = tasks[i].results.at(e.index());
      results.push_back(r);
      if (r.ok() && !r.costs.empty()) best[i] = std::min(best[i], r.mean_cost());
    }
    tuners[i]->update(configs, results);
    spent += static_cast<int64_t>(configs.size());
    scheduler->record(i, best[i]);
    if (const std::optional<double> f = scheduler->objective()) curve.emplace_back(spent, *f * 1e3);
  }
  return curve;
}

/// The estimate after `trials` trials (the latest point at or before it); nullopt before the
/// first.
std::optional<double> at(const Curve& curve, int64_t trials) {
  std::optional<double> out;
  for (const auto& [t, ms] : curve) {
    if (t > trials) break;
    out = ms;
  }
  return out;
}

/// Trials of the first point at or below `target`; `never` when none is.
int64_t trials_to(const Curve& curve, double target, int64_t never) {
  for (const auto& [t, ms] : curve)
    if (ms <= target) return t;
  return never;
}

template <typename T>
double median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? static_cast<double>(v[n / 2])
               : 0.5 * (static_cast<double>(v[n / 2 - 1]) + static_cast<double>(v[n / 2]));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Estimated model latency against trials: Ansor's gradient task scheduler vs round-robin, "
      "on replayed measurements"};
  std::string db = "bench/results/h100-2026-11-24/gpu.db";
  std::string workload_file = "configs/workloads/resnet18_fused.json";
  std::string device_key, tuner = "xgb";
  int seeds = 10, batch = 16;
  int64_t budget = 0, step = 0;
  double within = 0.05;
  app.add_option("--db", db, "records holding the tasks' measured configs")->capture_default_str();
  app.add_option("--workload", workload_file, "the model's tasks and weights (occurrences)")
      ->capture_default_str();
  app.add_option("--device-key", device_key, "take the jobs of this device key (default: any)");
  app.add_option("--tuner", tuner, "each task's tuner: xgb or random")
      ->check(CLI::IsMember({"xgb", "random", "ga", "grid"}))
      ->capture_default_str();
  app.add_option("--seeds", seeds, "seeds per scheduler")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--batch", batch, "configs per round, as TuneOptions::batch_size")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--budget", budget, "total trials per run (default: every measured config)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  app.add_option("--within", within, "come within this fraction of the best latency found")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--step", step,
                 "trials between the latency checkpoints printed (default: 4 rounds)")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  CLI11_PARSE(app, argc, argv);

  const auto start = std::chrono::steady_clock::now();
  std::vector<ReplayedTask> tasks;
  int64_t configs = 0;
  double best_possible_s = 0;
  try {
    const bench::RecordsCopy copy(db, "bench_task_scheduler");  // the committed file stays as is
    RecordStore store(copy.path());
    for (const WorkloadFileTask& t : load_workload_file(workload_file)) {
      tasks.push_back(replay(store, t, device_key));
      configs += static_cast<int64_t>(tasks.back().results.size());
      best_possible_s += tasks.back().occurrences * tasks.back().best_cost;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_task_scheduler: %s\n", e.what());
    return 1;
  }
  if (budget == 0) budget = configs;
  if (step == 0) step = 4 * batch;

  std::printf(
      "%zu tasks of %s replayed from %s: %lld measured configs; tuner %s, batch %d, "
      "budget %lld trials, %d seeds\n",
      tasks.size(), workload_file.c_str(), db.c_str(), static_cast<long long>(configs),
      tuner.c_str(), batch, static_cast<long long>(budget), seeds);
  std::printf("%-6s %6s %6s %9s %12s %12s\n", "task", "weight", "space", "MFLOP", "best ms",
              "x weight ms");
  for (const ReplayedTask& t : tasks)
    std::printf("%-6s %6d %6zu %9.1f %12.5f %12.5f\n", t.name.c_str(), t.occurrences,
                t.results.size(), t.task.workload.flops() / 1e6, t.best_cost * 1e3,
                t.occurrences * t.best_cost * 1e3);
  std::printf("best latency the records hold (sum of weight x best): %.5f ms\n\n",
              best_possible_s * 1e3);

  const std::vector<std::string> policies = {"gradient", "round-robin"};
  std::map<std::string, std::vector<Curve>> curves;
  for (const std::string& policy : policies)
    for (int seed = 1; seed <= seeds; ++seed)
      curves[policy].push_back(
          run_once(tasks, policy, tuner, static_cast<uint64_t>(seed), batch, budget));

  double best_found = kInf;
  for (const auto& [policy, runs] : curves)
    for (const Curve& c : runs)
      for (const auto& [t, ms] : c) best_found = std::min(best_found, ms);
  const double target = (1 + within) * best_found;

  std::printf("median estimated latency (ms) over %d seeds against trials spent:\n", seeds);
  std::printf("%7s", "trials");
  for (const std::string& policy : policies) std::printf(" %12s", policy.c_str());
  std::printf("\n");
  for (int64_t t = step; t <= budget; t += step) {
    std::printf("%7lld", static_cast<long long>(t));
    for (const std::string& policy : policies) {
      std::vector<double> values;
      for (const Curve& c : curves[policy]) values.push_back(at(c, t).value_or(kInf));
      const double m = median(values);
      if (std::isfinite(m))
        std::printf(" %12.5f", m);
      else
        std::printf(" %12s", "n/a");
    }
    std::printf("\n");
  }

  std::printf("\nbest latency found: %.5f ms; trials to come within %.0f%% (<= %.5f ms):\n",
              best_found, 100 * within, target);
  std::map<std::string, double> medians;
  for (const std::string& policy : policies) {
    std::vector<int64_t> trials;
    for (const Curve& c : curves[policy]) trials.push_back(trials_to(c, target, budget + 1));
    medians[policy] = median(trials);
    std::printf("  %-12s median %7.1f  (min %lld, max %lld; per seed:", policy.c_str(),
                medians[policy],
                static_cast<long long>(*std::min_element(trials.begin(), trials.end())),
                static_cast<long long>(*std::max_element(trials.begin(), trials.end())));
    for (int64_t t : trials) std::printf(" %lld", static_cast<long long>(t));
    std::printf(")\n");
  }
  std::printf("ratio gradient / round-robin: %.2f  (target: <= 0.60)\n",
              medians["gradient"] / medians["round-robin"]);
  std::printf("(%.1f s)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
