/// \file tune_session.cpp
/// The tuning loop: schedule tasks, propose, build, run, record, learn.
#include "tuner/tune_session.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <sstream>

#include "tuner/features.hpp"
#include "tuner/task_scheduler.hpp"
#include "tuner/xgb_tuner.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

struct TaskState {
  Task task;
  std::unique_ptr<Tuner> tuner;
  std::unique_ptr<Builder> builder;
  TaskProgress progress;
  bool verify_done = false;  // verify_best ran for this task
};

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Best time of a task in seconds (inf when nothing has succeeded).
double best_time(const TaskProgress& p) {
  return p.best_gflops > 0 ? p.workload.flops() / (p.best_gflops * 1e9)
                           : std::numeric_limits<double>::infinity();
}

/// Takes the task's best (and its verdict) from the records, which leave suspect trials out.
void best_from_records(const RecordStore& store, TaskProgress& p) {
  std::optional<TrialRecord> best = store.best_trial(p.job_id);
  p.best_gflops = best ? best->gflops : 0;
  p.best_config = best ? best->config_json : std::string();
  p.verification = best ? best->verdict : std::string();
}

std::string ms(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4f ms", seconds * 1e3);
  return buffer;
}

/// Re-measures a task's best on a second agent until one is verified, the tries run out, or no
/// second agent answers in time (see tune_session.hpp).
void verify_best(RecordStore& store, TrackerRunner& runner, TaskState& s,
                 const TuneOptions& options) {
  TaskProgress& p = s.progress;
  s.verify_done = true;
  const auto wait = std::chrono::milliseconds(static_cast<int64_t>(options.verify_wait_s * 1000));
  int64_t disputed = 0;  // the trial whose first re-measurement disagreed (0: none)
  for (int tries = 0;; ++tries) {
    std::optional<TrialRecord> best = store.best_trial(p.job_id);
    if (!best || best->verdict == kVerified) break;
    if (tries >= options.verify_tries) {
      spdlog::warn("{}: the best (config {}) is not verified: {} re-measurement(s) spent", p.name,
                   best->config_index, tries);
      if (best->verdict.empty()) {
        VerificationRecord v;
        v.trial_id = best->id;
        v.verdict = kUnverified;
        v.message = "not re-measured: the " + std::to_string(tries) +
                    " re-measurements of this task went to other trials";
        store.add_verification(v);
      }
      break;
    }
    VerificationRecord v;
    v.trial_id = best->id;
    ConfigEntity entity;
    MeasureInput input;
    MeasureResult error;
    try {
      entity =
          s.task.space->from_json(bj::parse(best->config_json), ConfigSpace::StaleIndex::kRenumber);
    } catch (const std::exception& e) {
      spdlog::warn("{}: cannot re-measure the best: {}", p.name, e.what());
      break;
    }
    if (!s.builder->build(entity, &input, &error)) {
      v.verdict = kSuspect;
      v.error = error.error;
      v.message = "the config no longer builds: " + error.message;
      store.add_verification(v);
      continue;
    }
    // Three timed runs at least: the verdict rests on the fastest of them.
    input.options.repeat = std::max(input.options.repeat, 3);
    const std::string first = best->agent.empty() ? "an unknown agent" : "'" + best->agent + "'";
    spdlog::info(
        "{}: verifying the best ({:.3f} GFLOP/s, {}, config {}, measured by {}) on a second "
        "agent of {}",
        p.name, best->gflops, ms(best->result.mean_cost()), best->config_index, first,
        runner.key());
    const RunResult r = runner.measure({input}, {best->agent}, wait).at(0);
    v.agent = r.agent;
    v.error = r.result.error;
    if (!r.delivered) {
      v.verdict = kUnverified;
      v.message = "no agent of " + runner.key() + " other than " + first +
                  " re-measured it within " +
                  std::to_string(static_cast<int>(options.verify_wait_s)) + " s";
      store.add_verification(v);
      spdlog::warn("{}: the best is UNVERIFIED: {}", p.name, v.message);
      break;
    }
    if (r.agent.empty()) {
      v.verdict = kUnverified;
      v.message = "the tracker failed the re-measurement: " + r.result.message;
      store.add_verification(v);
      spdlog::warn("{}: {}", p.name, v.message);
      continue;
    }
    std::string disagreement;
    if (r.result.ok() && !r.result.costs.empty()) {
      v.cost = *std::min_element(r.result.costs.begin(), r.result.costs.end());
      v.ratio = v.cost / best->result.mean_cost();
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2fx", v.ratio);
      v.message = "re-measured " + ms(v.cost) + " (fastest of " +
                  std::to_string(r.result.costs.size()) + ") by '" + r.agent + "' against " +
                  ms(best->result.mean_cost()) + " recorded by " + first + ": " + ratio;
      if (v.ratio <= options.verify_tolerance) {
        v.verdict = kVerified;
        store.add_verification(v);
        spdlog::info("{}: the best is verified: {}", p.name, v.message);
        break;
      }
      char tolerance[32];
      std::snprintf(tolerance, sizeof tolerance, "%.2fx", options.verify_tolerance);
      disagreement = v.message + ", slower than the tolerance of " + tolerance;
    } else {
      disagreement = "the re-measurement by '" + r.agent +
                     "' failed: " + std::string(error_name(r.result.error)) + " " +
                     r.result.message;
    }
    // One disagreement may be bad luck (a loaded agent, a crashed worker): the trial is
    // suspect only when a second re-measurement disagrees too.
    if (disputed != best->id) {
      disputed = best->id;
      v.verdict = kUnverified;
      v.message = disagreement + "; re-measuring once more";
      store.add_verification(v);
      spdlog::warn("{}: {}", p.name, v.message);
      continue;
    }
    v.verdict = kSuspect;
    v.message = disagreement + " (twice)";
    store.add_verification(v);
    int others = 0;
    // Only a cost too fast to be reproduced condemns the agent's other trials.
    if (r.result.ok() && !best->agent.empty())
      others =
          store.mark_agent_suspect(p.job_id, best->agent,
                                   "measured by " + first + ", whose config " +
                                       std::to_string(best->config_index) + " was " + v.message);
    spdlog::warn("{}: the best is SUSPECT: {}; {} other trial(s) of {} left out too", p.name,
                 v.message, others, first);
  }
  best_from_records(store, p);
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
    const std::function<void(const SessionProgress&)>& on_progress) {
  const auto start = std::chrono::steady_clock::now();
  // Options that cannot work are refused before anything is recorded.
  if (options_.trials < 0 || options_.total_trials < 0)
    throw std::invalid_argument("tune: trials (" + std::to_string(options_.trials) +
                                ") and total_trials (" + std::to_string(options_.total_trials) +
                                ") must not be negative");
  if (options_.trials == 0 && options_.total_trials == 0)
    throw std::invalid_argument(
        "tune: no trial budget: give trials per task, total_trials, or both");
  if (options_.batch_size < 1)
    throw std::invalid_argument("tune: batch_size must be at least 1, not " +
                                std::to_string(options_.batch_size));
  std::vector<ScheduledTask> scheduled;
  for (const WorkloadFileTask& t : tasks) {
    if (t.occurrences < 1)
      throw std::invalid_argument("tune: task '" + t.workload.name + "' (" + t.workload.key() +
                                  ") has occurrences " + std::to_string(t.occurrences) +
                                  "; it must be at least 1");
    scheduled.push_back({t.workload.name.empty() ? t.workload.key() : t.workload.name,
                         static_cast<double>(t.occurrences), t.workload.flops(),
                         similarity_tag(t.workload)});
  }
  if (tasks.empty()) return {};
  const std::unique_ptr<TaskScheduler> scheduler =
      make_task_scheduler(options_.schedule, std::move(scheduled), options_.seed);

  std::vector<std::unique_ptr<TaskState>> states;
  bj::object options_object{{"tuner", options_.tuner},
                            {"trials", options_.trials},
                            {"seed", options_.seed},
                            {"measure", options_.measure.to_json()}};
  if (options_.total_trials > 0) {
    options_object["total_trials"] = options_.total_trials;
    options_object["schedule"] = scheduler->name();
  }
  const std::string options_json = bj::serialize(options_object);

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
    // Records made before the template's space grew hold old indices: renumbered first, so
    // that a new config never lands on an index an old trial still holds.
    if (const int moved = store_.renumber_trials(p.job_id, *s->task.space); moved > 0)
      spdlog::info("{}: renumbered {} earlier trials into the template's current space", p.name,
                   moved);
    for (const TrialRecord& r : store_.trials(p.job_id)) {
      try {
        ConfigEntity e =
            s->task.space->from_json(bj::parse(r.config_json), ConfigSpace::StaleIndex::kRenumber);
        configs.push_back(e);
        // A suspect trial teaches the tuner nothing good: it counts as a failure.
        const bool suspect = r.verdict == kSuspect;
        results.push_back(suspect ? MeasureResult::failure(MeasureErrorNo::kUnknown, "suspect")
                                  : r.result);
        if (e.index() == default_config.index() && !suspect) p.default_gflops = r.gflops;
        p.errors += !r.result.ok();
      } catch (const std::exception& e) {
        spdlog::warn("{}: skipping a record that no longer fits the space: {}", p.name, e.what());
      }
    }
    if (!configs.empty()) s->tuner->load_history(configs, results);
    p.trials = p.resumed = static_cast<int>(configs.size());
    best_from_records(store_, p);
    // Earlier rounds, as the scheduler counts them: the task needs no warm-up round.
    if (p.trials > 0)
      scheduler->restore(states.size(), (p.trials + options_.batch_size - 1) / options_.batch_size,
                         best_time(p));
    states.push_back(std::move(s));
  }

  // The model run: its tasks' jobs with their weights, then an estimate after every batch.
  int64_t model_run = 0;
  if (!options_.model_name.empty()) {
    model_run = store_.open_model_run(options_.model_name, options_.target, device_key_,
                                      scheduler->name(), options_.total_trials);
    for (auto& s : states)
      store_.add_model_run_job(model_run, s->progress.job_id, s->progress.occurrences);
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
                config_features(other, other.space->from_json(bj::parse(r.config_json),
                                                              ConfigSpace::StaleIndex::kRenumber)));
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

  auto spent = [&] {
    int64_t n = 0;
    for (auto& s : states) n += s->progress.trials;
    return n;
  };
  // The latest estimate recorded (trials, ms): a report that changes neither records nothing.
  std::optional<std::pair<int64_t, double>> recorded;
  auto report = [&] {
    SessionProgress progress;
    for (auto& s : states) progress.tasks.push_back(s->progress);
    progress.trials = spent();
    progress.total_trials = options_.total_trials;
    progress.trials_per_task = options_.trials;
    progress.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.estimated_latency_ms = estimated_latency_ms(progress.tasks);
    progress.model_name = options_.model_name;
    progress.model_run_id = model_run;
    progress.schedule = scheduler->name();
    if (model_run > 0 && progress.estimated_latency_ms) {
      const std::pair<int64_t, double> now{progress.trials, *progress.estimated_latency_ms};
      if (recorded != now) {
        store_.add_model_estimate(model_run, {now.first, progress.elapsed_s, now.second, 0});
        recorded = now;
      }
    }
    if (on_progress) on_progress(progress);
  };
  report();

  auto finished = [&](TaskState& s) {
    TaskProgress& p = s.progress;
    if (p.done) return true;
    std::string reason;
    if (options_.trials > 0 && p.trials >= options_.trials)
      reason = "trial budget";
    else if (!s.tuner->has_next())
      reason = "space exhausted";
    else if (options_.early_stopping > 0 && s.tuner->trials_since_best() >= options_.early_stopping)
      reason = "early stopping";
    if (reason.empty()) return false;
    p.done = true;
    p.stop_reason = reason;
    store_.set_status(p.job_id, "done");
    if (options_.verify_best && !s.verify_done) {
      verify_best(store_, runner_, s, options_);
      report();
    }
    return true;
  };

  // Marks the jobs that did not finish with `status`, best effort: the session is ending on an
  // exception, which must not be replaced by another.
  auto mark_unfinished = [&](const std::string& status) {
    for (auto& s : states) {
      if (s->progress.done || s->progress.stop_reason == "timeout") continue;
      s->progress.stop_reason = status;
      try {
        store_.set_status(s->progress.job_id, status);
      } catch (const std::exception& e) {
        spdlog::error("{}: could not mark job {} {}: {}", s->progress.name, s->progress.job_id,
                      status, e.what());
      }
    }
  };

  try {
    while (true) {
      if (const int signal = runner_.stop_requested()) throw Interrupted(signal);
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
      // The total budget ends the session: every task still going is done.
      if (options_.total_trials > 0 && spent() >= options_.total_trials) {
        for (auto& s : states)
          if (!s->progress.done) {
            s->progress.done = true;
            s->progress.stop_reason = "total trial budget";
            store_.set_status(s->progress.job_id, "done");
          }
        break;
      }
      // Pick the next task: the scheduler skips the finished ones.
      for (size_t i = 0; i < states.size(); ++i)
        if (finished(*states[i])) scheduler->finish(i);
      const std::optional<size_t> picked = scheduler->next();
      if (!picked) break;
      TaskState* next = states[*picked].get();
      TaskProgress& p = next->progress;

      // The default config is measured first, so the table can show the speedup over it.
      std::vector<ConfigEntity> batch;
      const ConfigEntity default_config = next->task.default_config();
      if (p.trials == 0 && !next->tuner->visited(default_config.index())) {
        batch.push_back(default_config);
      }
      int64_t room = options_.batch_size;
      if (options_.trials > 0) room = std::min<int64_t>(room, options_.trials - p.trials);
      if (options_.total_trials > 0) room = std::min(room, options_.total_trials - spent());
      room -= static_cast<int64_t>(batch.size());
      for (ConfigEntity& e : next->tuner->next_batch(static_cast<int>(std::max<int64_t>(0, room))))
        if (e.index() != default_config.index() || batch.empty()) batch.push_back(std::move(e));
      if (batch.empty()) {
        p.done = true;
        p.stop_reason = "space exhausted";
        store_.set_status(p.job_id, "done");
        scheduler->finish(*picked);
        continue;
      }

      // Build, run what built, and keep results in proposal order.
      std::vector<MeasureResult> results(batch.size());
      std::vector<MeasureInput> inputs;
      std::vector<size_t> slots;
      for (size_t i = 0; i < batch.size(); ++i) {
        MeasureInput input;
        if (next->builder->build(batch[i], &input, &results[i])) {
          inputs.push_back(std::move(input));
          slots.push_back(i);
        }
      }
      // Each trial is stored as its result arrives (a dashboard shows it at once); what has
      // no result from an agent (a build error, an input past the deadline) after the batch.
      // The search still learns from the whole batch at once, below.
      const double flops = next->task.workload.flops();
      std::vector<bool> stored(batch.size(), false);
      auto store_trial = [&](size_t i, const RunResult* from) {
        if (results[i].timestamp == 0) results[i].timestamp = now_unix();
        TrialRecord r;
        r.config_index = batch[i].index();
        r.config_json = bj::serialize(batch[i].to_json());
        r.result = results[i];
        r.gflops = results[i].gflops(flops);
        if (from) {
          r.agent = from->agent;
          r.agent_session = from->agent_session;
          r.attempt = from->attempt;
          r.received = from->received;
        }
        store_.add_trials(p.job_id, {r});
        stored[i] = true;
      };
      std::vector<RunResult> ran =
          runner_.measure(inputs, {}, {}, [&](size_t j, const RunResult& r) {
            results[slots[j]] = r.result;
            store_trial(slots[j], &r);
          });
      for (size_t j = 0; j < slots.size(); ++j) results[slots[j]] = ran[j].result;
      for (size_t j = 0; j < slots.size(); ++j)
        if (!stored[slots[j]]) store_trial(slots[j], &ran[j]);
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!stored[i]) store_trial(i, nullptr);
        if (batch[i].index() == default_config.index()) p.default_gflops = results[i].gflops(flops);
        p.errors += !results[i].ok();
      }
      next->tuner->update(batch, results);
      p.trials += static_cast<int>(batch.size());
      best_from_records(store_, p);
      scheduler->record(*picked, best_time(p));
      report();
    }
    for (auto& s : states) {
      finished(*s);
      // Tasks stopped by the timeout have a best too: it is verified at the end of the session.
      if (options_.verify_best && !s->verify_done) {
        verify_best(store_, runner_, *s, options_);
        report();
      }
    }
  } catch (const Interrupted&) {
    mark_unfinished("interrupted");
    throw;
  } catch (...) {
    mark_unfinished("failed");
    throw;
  }
  std::vector<TaskProgress> out;
  for (auto& s : states) out.push_back(s->progress);
  return out;
}

namespace {

/// The task lines; the bar is filled against `bar_full` trials (0: empty), and the trial count
/// shows "/cap" when there is a per-task cap.
std::string task_lines(const std::vector<TaskProgress>& tasks, int64_t bar_full,
                       int trials_per_task) {
  std::ostringstream out;
  for (const TaskProgress& p : tasks) {
    const int width = 24;
    const int filled =
        bar_full > 0 ? static_cast<int>(std::min<int64_t>(width, p.trials * width / bar_full)) : 0;
    char count[32];
    if (trials_per_task > 0)
      std::snprintf(count, sizeof count, "%4d/%-4d", p.trials, trials_per_task);
    else
      std::snprintf(count, sizeof count, "%4d     ", p.trials);
    char line[256];
    std::snprintf(line, sizeof line, "%-10s [%s%s] %s best %9.3f GFLOP/s  %3d errors%s%s%s\n",
                  p.name.c_str(), std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), count, p.best_gflops, p.errors,
                  p.done ? "  done" : "", p.verification.empty() ? "" : "  ",
                  p.verification.c_str());
    out << line;
  }
  return out.str();
}

/// "C3, C4" for the tasks without a successful trial.
std::string unmeasured(const std::vector<TaskProgress>& tasks) {
  std::string names;
  for (const TaskProgress& p : tasks)
    if (!std::isfinite(best_time(p))) names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

}  // namespace

std::optional<double> estimated_latency_ms(const std::vector<TaskProgress>& tasks) {
  if (tasks.empty()) return std::nullopt;
  double seconds = 0;
  for (const TaskProgress& p : tasks) {
    const double t = best_time(p);
    if (!std::isfinite(t)) return std::nullopt;
    seconds += t * p.occurrences;
  }
  return seconds * 1e3;
}

std::string format_progress(const std::vector<TaskProgress>& tasks, int trials_per_task) {
  return task_lines(tasks, trials_per_task, trials_per_task);
}

std::string format_progress(const SessionProgress& progress) {
  // Without a per-task cap the bars show each task's share of the total budget.
  const int64_t bar_full =
      progress.trials_per_task > 0 ? progress.trials_per_task : progress.total_trials;
  std::string out = task_lines(progress.tasks, bar_full, progress.trials_per_task);
  char line[256];
  const std::string who =
      progress.model_name.empty() ? "all tasks" : "model " + progress.model_name;
  const std::string budget =
      progress.total_trials > 0 ? "/" + std::to_string(progress.total_trials) : "";
  if (progress.estimated_latency_ms)
    std::snprintf(line, sizeof line, "%s: %lld%s trials, estimated latency %.4f ms\n", who.c_str(),
                  static_cast<long long>(progress.trials), budget.c_str(),
                  *progress.estimated_latency_ms);
  else
    std::snprintf(line, sizeof line,
                  "%s: %lld%s trials, estimated latency n/a (no successful trial yet: %s)\n",
                  who.c_str(), static_cast<long long>(progress.trials), budget.c_str(),
                  unmeasured(progress.tasks).substr(0, 120).c_str());
  return out + line;
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
  for (const TaskProgress& p : tasks) {
    const double speedup = p.default_gflops > 0 ? p.best_gflops / p.default_gflops : 0;
    std::snprintf(line, sizeof line, "%-10s %9.2f %12.3f %12.3f %7.2fx %7d %7d\n", p.name.c_str(),
                  p.workload.flops() / 1e6, p.default_gflops, p.best_gflops, speedup, p.trials,
                  p.errors);
    out << line;
  }
  if (const std::optional<double> latency = estimated_latency_ms(tasks))
    std::snprintf(line, sizeof line,
                  "estimated model latency (sum of occurrences x best time): %.4f ms\n", *latency);
  else
    std::snprintf(line, sizeof line,
                  "estimated model latency (sum of occurrences x best time): n/a (no successful "
                  "trial: %s)\n",
                  unmeasured(tasks).substr(0, 120).c_str());
  out << line;
  return out.str();
}

}  // namespace webtune
