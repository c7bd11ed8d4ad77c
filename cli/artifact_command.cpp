/// \file artifact_command.cpp
/// `webtune artifact --db F --workload SPEC --target T [--config-index N | --rank R]
/// [-o out.json]`: the
/// kernel of a tuned config, out of a records database, as one JSON object that a runtime
/// outside the tuner (the browser agent's executors in bench/web_vs_tfjs, a deployment) can run:
///
///   {"job": 3, "task": "dense512", "target": "gles-frag", "device_key": "webgl2:swiftshader",
///    "trials": 200, "config_index": 812, "config": {entity JSON}, "best": true, "rank": 1,
///    "workload": {Workload JSON}, "flops": 268435456,
///    "result": {MeasureResult of that trial, or null}, "cost_s": 0.061, "gflops": 4.4,
///    "artifact": {KernelArtifact JSON},
///    "seed": 1, "samples": [[index, value, abs_sum, tolerance], ...]}
///
/// workload + artifact + seed + samples are a MeasureInput (codegen/measure.hpp) but for its
/// options, so a runtime can check the kernel's output before timing it. The space is rebuilt
/// with the device limits the records stored for the job's device (as tune did), so a config
/// index means the same entity it meant while tuning.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/task.hpp"
#include "commands.hpp"
#include "option_checks.hpp"
#include "tuner/records.hpp"
#include "tuner/tune_target.hpp"
#include "tuner/tuned_artifact.hpp"

namespace webtune::cli {

namespace {

namespace bj = boost::json;

struct ArtifactArgs {
  std::string db, workload, task, target, out = "-";
  int64_t config_index = -1;  // −1: the job's best successful trial (or the rank-th best)
  int rank = 1;               // 1: the best successful trial, 2: the runner-up, ...
  uint64_t seed = 1;
  int samples = 64;
};

/// True when `spec` is a workload as `tune --workload` takes it (a file or "op:dims"), rather
/// than a task name or workload-key fragment to look for among the jobs.
bool is_workload_spec(const std::string& spec) {
  return spec.find(':') != std::string::npos || std::filesystem::is_regular_file(spec);
}

/// Does job `j` belong to the --workload/--task selection? A spec matches by workload key (the
/// shapes), anything else as `log best` filters: a substring of the key or the task name.
bool matches(const TuningJobInfo& j, const ArtifactArgs& args,
             const std::vector<WorkloadFileTask>& wanted) {
  if (!args.task.empty() && j.task_name != args.task && !is_workload_spec(args.workload))
    return false;
  if (!wanted.empty()) {
    for (const WorkloadFileTask& w : wanted)
      if (w.workload.key() == j.workload.key()) return true;
    return false;
  }
  return j.workload.key().find(args.workload) != std::string::npos ||
         j.task_name.find(args.workload) != std::string::npos;
}

/// The one job of the selection; throws std::runtime_error listing the candidates when there
/// are none or several.
TuningJobInfo find_job(const RecordStore& store, const ArtifactArgs& args) {
  const TuneTarget target = tune_target_from_name(args.target);
  std::vector<WorkloadFileTask> wanted;
  if (is_workload_spec(args.workload)) wanted = resolve_workloads(args.workload, args.task);
  std::vector<TuningJobInfo> found;
  std::string all;
  for (const TuningJobInfo& j : store.jobs()) {
    all += "\n  job " + std::to_string(j.id) + " " + (j.task_name.empty() ? "-" : j.task_name) +
           " " + j.workload.key() + " on " + j.device_key;
    // A tune target names the kernel kind and, for browser targets, the agents' key prefix:
    // "webgl2" jobs are gles-frag kernels measured by "webgl2:<renderer>" tabs.
    if (j.target != target.kernel) continue;
    if (j.device_key.rfind(target.key + ":", 0) != 0 && j.device_key != target.key) continue;
    if (matches(j, args, wanted)) found.push_back(j);
  }
  if (found.size() == 1) return found.front();
  throw std::runtime_error(
      (found.empty() ? "no tuning job" : std::to_string(found.size()) + " tuning jobs") +
      " of target " + args.target + " match --workload '" + args.workload + "'" +
      (args.task.empty() ? "" : " --task " + args.task) + " in " + args.db +
      (all.empty() ? " (it has no jobs)" : "; its jobs:" + all));
}

DeviceLimits stored_limits(const RecordStore& store, const std::string& device_key) {
  if (const std::optional<std::string> info = store.device_info(device_key)) {
    const bj::value device = bj::parse(*info);
    if (device.is_object() && device.as_object().contains("limits"))
      return DeviceLimits::from_json(device.as_object().at("limits"));
  }
  spdlog::warn("no device limits stored for {}: the space uses the default limits", device_key);
  return {};
}

bj::object artifact_json(const ArtifactArgs& args) {
  if (!is_postgres_url(args.db) && !std::filesystem::exists(args.db))
    throw std::runtime_error("no records database at '" + args.db + "'");
  RecordStore store(args.db);
  const TuningJobInfo job = find_job(store, args);
  const Task task = Task::create(job.workload, job.target, stored_limits(store, job.device_key));

  // The trial behind the config: the best one, or the stored trial of --config-index (absent
  // when that index was never measured; its kernel is still built).
  std::optional<TrialRecord> trial;
  bool best = false;
  if (args.config_index < 0) {
    if (args.rank < 1) throw std::runtime_error("--rank counts from 1 (the best trial)");
    // Successful trials, fastest first (ties: the earlier trial first, as store.best does).
    std::vector<TrialRecord> ok;
    for (TrialRecord& t : store.trials(job.id))
      if (t.result.ok()) ok.push_back(std::move(t));
    std::stable_sort(ok.begin(), ok.end(), [](const TrialRecord& a, const TrialRecord& b) {
      return a.result.mean_cost() < b.result.mean_cost();
    });
    if (ok.empty())
      throw std::runtime_error("job " + std::to_string(job.id) + " (" + job.workload.key() +
                               ") has no successful trial");
    if (static_cast<int64_t>(ok.size()) < args.rank)
      throw std::runtime_error("job " + std::to_string(job.id) + " (" + job.workload.key() +
                               ") has " + std::to_string(ok.size()) +
                               " successful trials, fewer than --rank " +
                               std::to_string(args.rank));
    trial = ok[static_cast<size_t>(args.rank - 1)];
    best = args.rank == 1;
  } else {
    for (const TrialRecord& t : store.trials(job.id))
      if (t.config_index == args.config_index) trial = t;
  }
  if (trial) {
    // A stored config that the job's template no longer holds is an error, not a kernel.
    try {
      config_in_space(job.workload, job.target, trial->config_json, trial->result.ok());
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("job " + std::to_string(job.id) + " (" + job.workload.key() +
                               "): the stored trial of config " +
                               std::to_string(trial->config_index) + " is unusable: " + e.what());
    }
  }
  const ConfigEntity entity = trial ? task.space->from_json(bj::parse(trial->config_json))
                                    : task.space->parse(std::to_string(args.config_index));
  return tuned_artifact_json(
      job, task, entity, trial ? &*trial : nullptr, best,
      args.config_index < 0 ? std::optional<int64_t>(args.rank) : std::nullopt, args.seed,
      args.samples);
}

void run_artifact(const ArtifactArgs& args) {
  const std::string text = bj::serialize(artifact_json(args)) + "\n";
  if (args.out == "-") {
    std::fputs(text.c_str(), stdout);
    return;
  }
  std::ofstream file(args.out);
  if (!(file << text)) throw std::runtime_error("cannot write '" + args.out + "'");
}

}  // namespace

void add_artifact_command(CLI::App& app) {
  auto args = std::make_shared<ArtifactArgs>();
  CLI::App* cmd = app.add_subcommand(
      "artifact", "Print the kernel artifact (JSON) of a task's best or a given tuned config");
  cmd->add_option("--db", args->db, "records: an SQLite file or postgresql://user@host/db")
      ->required();
  cmd->add_option("--workload", args->workload,
                  "workload file or inline spec (as tune takes it), or a task name / workload "
                  "key fragment of a job, e.g. C2 or dense_512")
      ->required();
  cmd->add_option("--task", args->task, "task name inside a workload file, e.g. C2");
  cmd->add_option("--target", args->target, "target the job was tuned for: " + tune_target_names())
      ->required();
  cmd->add_option("--config-index", args->config_index,
                  "this config of the job's space instead of the best measured one")
      ->check(int_range(0, std::numeric_limits<int64_t>::max()));
  cmd->add_option("--rank", args->rank,
                  "the rank-th best measured config (1: the best; e.g. 2..5 for finalists to "
                  "re-measure side by side)")
      ->check(int_range(1, 1'000'000))
      ->capture_default_str()
      ->excludes("--config-index");
  cmd->add_option("--seed", args->seed, "seed of the inputs the reference samples are for")
      ->capture_default_str();
  cmd->add_option("--samples", args->samples, "reference samples of the output to include")
      ->check(int_range(1, kMaxSamples))
      ->capture_default_str();
  cmd->add_option("-o,--out", args->out, "output file, or - for stdout")->capture_default_str();
  cmd->callback([args] { run_artifact(*args); });
}

}  // namespace webtune::cli
