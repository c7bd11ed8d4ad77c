/// \file tune_session.cpp
/// The tuning loop: schedule tasks, propose, build, run, record, learn.
#include "tuner/tune_session.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <sstream>

#include "tuner/features.hpp"
#include "tuner/xgb_tuner.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

struct TaskState {
  Task task;
  std::unique_ptr<Tuner> tuner;
  std::unique_ptr<Builder> builder;
  TaskProgress progress;
};

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Best time of a task in seconds (inf when nothing has succeeded).
double best_time(const TaskProgress& p) {
  return p.best_gflops > 0 ? p.workload.flops() / (p.best_gflops * 1e9)
                           : std::numeric_limits<double>::infinity();
}

}  // namespace

TuneSession::TuneSession(RecordStore& store, TrackerRunner& runner, std::string device_key,
                         DeviceLimits limits, TuneOptions options)
    : store_(store),
      runner_(runner),
      device_key_(std::move(device_key)),
      limits_(limits),
      options_(std::move(options)) {}

std::vector<TaskProgress> TuneSession::run(
    const std::vector<WorkloadFileTask>& tasks,
    const std::function<void(const std::vector<TaskProgress>&)>& on_progress) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<TaskState>> states;
  const std::string options_json =
      bj::serialize(bj::object{{"tuner", options_.tuner},
                               {"trials", options_.trials},
                               {"seed", options_.seed},
                               {"measure", options_.measure.to_json()}});

  // Open (or resume) a tuning job per task.
  for (const WorkloadFileTask& t : tasks) {
    auto s = std::make_unique<TaskState>();
    s->task = Task::create(t.workload, options_.target, limits_);
    s->tuner = make_tuner(options_.tuner, s->task, options_.seed);
    s->builder =
        std::make_unique<Builder>(s->task, options_.seed, options_.samples, options_.measure);
    TaskProgress& p = s->progress;
    p.name = t.workload.name.empty() ? t.workload.key() : t.workload.name;
    p.workload = t.workload;
    p.occurrences = t.occurrences;
    p.job_id = store_.open_job(t.workload, options_.target, device_key_, t.workload.name,
                               options_.tuner, options_json);
    store_.set_status(p.job_id, "running");

    // Resume: earlier trials are visited and teach the tuner.
    std::vector<ConfigEntity> configs;
    std::vector<MeasureResult> results;
    const ConfigEntity default_config = s->task.default_config();
    for (const TrialRecord& r : store_.trials(p.job_id)) {
      try {
        ConfigEntity e = s->task.space->from_json(bj::parse(r.config_json));
        configs.push_back(e);
        results.push_back(r.result);
        if (e.index() == default_config.index()) p.default_gflops = r.gflops;
        p.errors += !r.result.ok();
      } catch (const std::exception& e) {
        spdlog::warn("{}: skipping a record that no longer fits the space: {}", p.name, e.what());
      }
    }
    if (!configs.empty()) s->tuner->load_history(configs, results);
    p.trials = p.resumed = static_cast<int>(configs.size());
    p.best_gflops = s->tuner->best_gflops();
    if (s->tuner->best_config()) p.best_config = bj::serialize(s->tuner->best_config()->to_json());
    states.push_back(std::move(s));
  }

  // Transfer learning: XGB tuners learn from related records before their first batch.
  if (options_.transfer && options_.tuner == "xgb") {
    for (auto& s : states) {
      auto* xgb = dynamic_cast<XgbTuner*>(s->tuner.get());
      size_t rows = 0;
      // One add_transfer per earlier job: each is normalised by its own best and ranked as its
      // own group, so workloads of different speeds do not distort each other.
      for (const auto& [job, trials] :
           store_.related_trials(s->task.workload.op, options_.target, s->progress.job_id)) {
        Task other = Task::create(job.workload, options_.target, limits_);
        TransferData data;
        for (const TrialRecord& r : trials) {
          try {
            data.features.push_back(
                config_features(other, other.space->from_json(bj::parse(r.config_json))));
            data.gflops.push_back(r.gflops);
          } catch (const std::exception&) {
            // A record from an older space version: not usable for this model.
          }
        }
        if (data.features.empty()) continue;
        rows += data.features.size();
        xgb->add_transfer(data);
      }
      if (rows > 0) spdlog::info("{}: transfer from {} earlier trials", s->progress.name, rows);
    }
  }

  auto report = [&] {
    if (!on_progress) return;
    std::vector<TaskProgress> all;
    for (auto& s : states) all.push_back(s->progress);
    on_progress(all);
  };
  report();

  auto finished = [&](TaskState& s) {
    TaskProgress& p = s.progress;
    if (p.done) return true;
    std::string reason;
    if (p.trials >= options_.trials)
      reason = "trial budget";
    else if (!s.tuner->has_next())
      reason = "space exhausted";
    else if (options_.early_stopping > 0 && s.tuner->trials_since_best() >= options_.early_stopping)
      reason = "early stopping";
    if (reason.empty()) return false;
    p.done = true;
    p.stop_reason = reason;
    store_.set_status(p.job_id, "done");
    return true;
  };

  size_t round_robin = 0;
  while (true) {
    if (options_.timeout_s > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            options_.timeout_s) {
      for (auto& s : states)
        if (!s->progress.done) {
          s->progress.stop_reason = "timeout";
          store_.set_status(s->progress.job_id, "stopped");
        }
      break;
    }
    // Pick the next task.
    TaskState* next = nullptr;
    if (options_.schedule == "latency") {
      double largest = -1;
      for (auto& s : states) {
        if (finished(*s)) continue;
        const double share = best_time(s->progress) * s->progress.occurrences;
        if (share > largest) {
          largest = share;
          next = s.get();
        }
      }
    } else {
      for (size_t i = 0; i < states.size() && !next; ++i) {
        TaskState* s = states[(round_robin + i) % states.size()].get();
        if (!finished(*s)) {
          next = s;
          round_robin = (round_robin + i + 1) % states.size();
        }
      }
    }
    if (!next) break;
    TaskProgress& p = next->progress;

    // The default config is measured first, so the table can show the speedup over it.
    std::vector<ConfigEntity> batch;
    const ConfigEntity default_config = next->task.default_config();
    if (p.trials == 0 && !next->tuner->visited(default_config.index())) {
      batch.push_back(default_config);
    }
    const int room =
        std::min(options_.batch_size, options_.trials - p.trials) - static_cast<int>(batch.size());
    for (ConfigEntity& e : next->tuner->next_batch(std::max(0, room)))
      if (e.index() != default_config.index() || batch.empty()) batch.push_back(std::move(e));
    if (batch.empty()) {
      p.done = true;
      p.stop_reason = "space exhausted";
      store_.set_status(p.job_id, "done");
      continue;
    }

    // Build, run what built, and keep results in proposal order.
    std::vector<MeasureResult> results(batch.size());
    std::vector<std::string> agents(batch.size());
    std::vector<MeasureInput> inputs;
    std::vector<size_t> slots;
    for (size_t i = 0; i < batch.size(); ++i) {
      MeasureInput input;
      if (next->builder->build(batch[i], &input, &results[i])) {
        inputs.push_back(std::move(input));
        slots.push_back(i);
      }
    }
    std::vector<std::string> run_agents;
    std::vector<MeasureResult> ran = runner_.run(inputs, &run_agents);
    for (size_t j = 0; j < slots.size(); ++j) {
      results[slots[j]] = ran[j];
      agents[slots[j]] = run_agents[j];
    }

    std::vector<TrialRecord> records;
    const double flops = next->task.workload.flops();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (results[i].timestamp == 0) results[i].timestamp = now_unix();
      TrialRecord r;
      r.config_index = batch[i].index();
      r.config_json = bj::serialize(batch[i].to_json());
      r.result = results[i];
      r.gflops = results[i].gflops(flops);
      r.agent = agents[i];
      records.push_back(std::move(r));
      if (batch[i].index() == default_config.index()) p.default_gflops = results[i].gflops(flops);
      p.errors += !results[i].ok();
    }
    store_.add_trials(p.job_id, records);
    next->tuner->update(batch, results);
    p.trials += static_cast<int>(batch.size());
    p.best_gflops = next->tuner->best_gflops();
    if (next->tuner->best_config())
      p.best_config = bj::serialize(next->tuner->best_config()->to_json());
    report();
  }
  std::vector<TaskProgress> out;
  for (auto& s : states) {
    finished(*s);
    out.push_back(s->progress);
  }
  return out;
}

std::string format_progress(const std::vector<TaskProgress>& tasks, int trials_per_task) {
  std::ostringstream out;
  for (const TaskProgress& p : tasks) {
    const int width = 24;
    const int filled =
        trials_per_task > 0 ? std::min(width, p.trials * width / trials_per_task) : 0;
    char line[256];
    std::snprintf(line, sizeof line, "%-10s [%s%s] %4d/%-4d best %9.3f GFLOP/s  %3d errors%s\n",
                  p.name.c_str(), std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), p.trials, trials_per_task,
                  p.best_gflops, p.errors, p.done ? "  done" : "");
    out << line;
  }
  return out.str();
}

std::string format_summary(const std::vector<TaskProgress>& tasks) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %9s %12s %12s %8s %7s %7s\n", "task", "MFLOP", "default",
                "best", "speedup", "trials", "errors");
  out << line;
  std::snprintf(line, sizeof line, "%-10s %9s %12s %12s %8s %7s %7s\n", "", "", "GFLOP/s",
                "GFLOP/s", "", "", "");
  out << line;
  double network_s = 0;
  bool complete = true;
  for (const TaskProgress& p : tasks) {
    const double speedup = p.default_gflops > 0 ? p.best_gflops / p.default_gflops : 0;
    std::snprintf(line, sizeof line, "%-10s %9.2f %12.3f %12.3f %7.2fx %7d %7d\n", p.name.c_str(),
                  p.workload.flops() / 1e6, p.default_gflops, p.best_gflops, speedup, p.trials,
                  p.errors);
    out << line;
    const double t = best_time(p);
    if (std::isfinite(t))
      network_s += t * p.occurrences;
    else
      complete = false;
  }
  std::snprintf(line, sizeof line,
                "estimated network time (sum of best time x occurrences): %.3f ms%s\n",
                network_s * 1e3, complete ? "" : " (some tasks have no successful trial)");
  out << line;
  return out.str();
}

}  // namespace webtune
