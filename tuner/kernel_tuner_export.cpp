/// \file kernel_tuner_export.cpp
/// A tuning job as a Kernel Tuner cache file and as T4 results JSON; see kernel_tuner_export.hpp.
#include "tuner/kernel_tuner_export.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <ostream>
#include <set>
#include <stdexcept>

#include "codegen/task.hpp"
#include "codegen/template.hpp"
#include "tuner/autotvm_log.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

/// One trial in Kernel Tuner's terms.
struct KtEntry {
  std::vector<bj::value> values;  ///< one per parameter
  std::string key;                ///< the values joined by ','
  const TrialRecord* trial = nullptr;
  bool failed = false;      ///< an error, or suspect
  std::string error_class;  ///< InvalidConfig, CompilationFailedConfig, RuntimeFailedConfig
  std::string invalidity;   ///< T4's
};

/// What a job exports: its parameters and entries.
struct KtJob {
  TuningJobInfo job;
  std::vector<std::string> names;
  std::vector<std::vector<bj::value>> candidates;  ///< per parameter
  std::vector<TrialRecord> trials;
  std::vector<KtEntry> entries;
};

/// str() of a value as Python prints it in Kernel Tuner's cache keys (ints and strings only).
std::string key_text(const bj::value& v) {
  return v.is_string() ? std::string(v.get_string()) : bj::serialize(v);
}

std::string error_class(MeasureErrorNo error) {
  switch (error) {
    case MeasureErrorNo::kInstantiation:
      return "InvalidConfig";
    case MeasureErrorNo::kCompileHost:
    case MeasureErrorNo::kCompileDevice:
    case MeasureErrorNo::kBuildTimeout:
      return "CompilationFailedConfig";
    default:
      return "RuntimeFailedConfig";
  }
}

std::string t4_invalidity(MeasureErrorNo error) {
  switch (error) {
    case MeasureErrorNo::kNoError:
      return "correct";
    case MeasureErrorNo::kInstantiation:
      return "constraints";
    case MeasureErrorNo::kCompileHost:
    case MeasureErrorNo::kCompileDevice:
      return "compile";
    case MeasureErrorNo::kBuildTimeout:
    case MeasureErrorNo::kRunTimeout:
      return "timeout";
    case MeasureErrorNo::kWrongAnswer:
      return "correctness";
    default:
      return "runtime";
  }
}

/// Kernel Tuner's timestamp, str(datetime.now(timezone.utc)): "2022-12-23 12:11:26.411558+00:00".
std::string kt_timestamp(double unix_s) {
  if (!std::isfinite(unix_s) || unix_s < 0) unix_s = 0;
  const std::time_t whole = static_cast<std::time_t>(std::floor(unix_s));
  const long micros = std::lround((unix_s - static_cast<double>(whole)) * 1e6);
  std::tm tm{};
  gmtime_r(&whole, &tm);
  char buffer[64];
  const size_t n = std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &tm);
  char tail[32];
  std::snprintf(tail, sizeof tail, ".%06ld+00:00", std::min(micros, 999999L));
  return std::string(buffer, n) + tail;
}

/// The values of `knob`'s parameters in `value` (a split: one per factor).
void append_values(const Knob& knob, const KnobValue& value, std::vector<bj::value>& out) {
  if (const auto* factors = std::get_if<std::vector<int64_t>>(&value))
    for (int64_t f : *factors) out.emplace_back(f);
  else if (const auto* i = std::get_if<int64_t>(&value))
    out.emplace_back(*i);
  else
    out.emplace_back(std::get<std::string>(value));
}

KtJob load_job(const RecordStore& store, int64_t job_id) {
  KtJob k;
  const std::optional<TuningJobInfo> job = store.job(job_id);
  if (!job) throw std::runtime_error("records: no job " + std::to_string(job_id));
  k.job = *job;
  std::shared_ptr<ConfigSpace> space;
  try {
    space = Task::create(job->workload, job->target).space;
  } catch (const std::exception& e) {
    throw std::runtime_error("records: job " + std::to_string(job_id) + " (" + job->workload.key() +
                             " on " + std::string(target_name(job->target)) +
                             ") has no template: " + e.what());
  }
  k.names = kernel_tuner_param_names(*space);
  // Candidate values per parameter: a split's per-position factors, distinct and ascending.
  for (const Knob& knob : space->knobs()) {
    if (knob.kind == Knob::Kind::kSplit) {
      std::vector<std::set<int64_t>> positions;
      for (const KnobValue& c : knob.candidates) {
        const auto& factors = std::get<std::vector<int64_t>>(c);
        if (positions.size() < factors.size()) positions.resize(factors.size());
        for (size_t i = 0; i < factors.size(); ++i) positions[i].insert(factors[i]);
      }
      for (const auto& p : positions) k.candidates.emplace_back(p.begin(), p.end());
    } else {
      std::vector<bj::value> values;
      for (const KnobValue& c : knob.candidates) append_values(knob, c, values);
      k.candidates.push_back(std::move(values));
    }
  }
  k.trials = store.trials(job_id);
  for (const TrialRecord& trial : k.trials) {
    ConfigEntity entity;
    try {
      entity = config_in_space(*space, job->workload, job->target, trial.config_json, false);
    } catch (const std::exception& e) {
      throw std::runtime_error("records: trial " + std::to_string(trial.id) + " of job " +
                               std::to_string(job_id) + ": " + e.what());
    }
    KtEntry entry;
    entry.trial = &trial;
    for (size_t i = 0; i < space->knobs().size(); ++i) {
      const Knob& knob = space->knobs()[i];
      append_values(knob, entity.value(knob.name), entry.values);
    }
    for (size_t i = 0; i < entry.values.size(); ++i)
      entry.key += (i ? "," : "") + key_text(entry.values[i]);
    const bool suspect = trial.result.ok() && trial.verdict == kSuspect;
    entry.failed = !trial.result.ok() || suspect;
    const MeasureErrorNo error = suspect ? MeasureErrorNo::kUnknown : trial.result.error;
    entry.error_class = entry.failed ? error_class(error) : "";
    entry.invalidity = t4_invalidity(error);
    k.entries.push_back(std::move(entry));
  }
  return k;
}

bj::object webtune_info(const TuningJobInfo& job) {
  return bj::object{{"job", job.id},
                    {"workload", job.workload.to_json()},
                    {"target", target_name(job.target)},
                    {"device_key", job.device_key},
                    {"task", job.task_name},
                    {"tvm_task", tvm_task_name(job.workload.op, job.target)},
                    {"tuner", job.tuner}};
}

/// The output's extents as Kernel Tuner's (x, y, z) problem size.
bj::array problem_size(const Workload& w) {
  if (w.op == OpKind::kDense) return bj::array{w.n, w.m};
  return bj::array{w.out_w(), w.out_h(), w.batch * w.out_channels};
}

std::vector<double> costs_ms(const TrialRecord& trial) {
  std::vector<double> ms;
  for (double c : trial.result.costs) ms.push_back(c * 1e3);
  return ms;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

void check_written(std::ostream& out, const char* what) {
  out.flush();
  if (!out) throw std::runtime_error(std::string("records: ") + what + ": writing failed");
}

}  // namespace

std::vector<std::string> kernel_tuner_param_names(const ConfigSpace& space) {
  std::vector<std::string> names;
  for (const Knob& knob : space.knobs()) {
    if (knob.kind != Knob::Kind::kSplit) {
      names.push_back(knob.name);
      continue;
    }
    size_t factors = 0;
    for (const KnobValue& c : knob.candidates)
      factors = std::max(factors, std::get<std::vector<int64_t>>(c).size());
    for (size_t i = 0; i < factors; ++i) names.push_back(knob.name + "_" + std::to_string(i));
  }
  return names;
}

int64_t export_kernel_tuner_cache(const RecordStore& store, int64_t job_id, std::ostream& out) {
  const KtJob k = load_job(store, job_id);
  bj::array keys;
  bj::object params;
  for (size_t i = 0; i < k.names.size(); ++i) {
    keys.emplace_back(k.names[i]);
    params[k.names[i]] = bj::array(k.candidates[i].begin(), k.candidates[i].end());
  }
  // Kernel Tuner's layout (process_cache: json.dumps(indent="") of the header, then one
  // "\n<key>: {...}," per entry, closed by "}\n}"): its reader tells a closed file by that end.
  std::string text = "{\n";
  auto field = [&text](const char* name, const bj::value& value) {
    text += bj::serialize(bj::value(name)) + ": " + bj::serialize(value) + ",\n";
  };
  field("device_name", bj::value(k.job.device_key));
  field("kernel_name", bj::value(tvm_task_name(k.job.workload.op, k.job.target)));
  field("problem_size", problem_size(k.job.workload));
  field("tune_params_keys", keys);
  field("tune_params", params);
  field("objective", bj::value("time"));
  field("webtune", webtune_info(k.job));
  text += "\"cache\": {";
  bool first = true;
  for (const KtEntry& e : k.entries) {
    bj::object entry;
    for (size_t i = 0; i < k.names.size(); ++i) entry[k.names[i]] = e.values[i];
    if (e.failed) {
      entry["time"] = e.error_class;
    } else {
      const std::vector<double> times = costs_ms(*e.trial);
      entry["time"] = mean(times);
      entry["times"] = bj::array(times.begin(), times.end());
    }
    entry["compile_time"] = 0.0;
    entry["verification_time"] = 0.0;
    entry["benchmark_time"] = e.trial->result.all_cost * 1e3;
    entry["strategy_time"] = 0.0;
    entry["framework_time"] = 0.0;
    entry["timestamp"] = kt_timestamp(e.trial->result.timestamp);
    if (e.failed)
      entry["__error__"] = e.error_class;
    else
      entry["GFLOP/s"] = e.trial->gflops;
    text += first ? "\n" : ",\n";
    first = false;
    text += bj::serialize(bj::value(e.key)) + ": " + bj::serialize(entry);
  }
  text += "}\n}\n";
  out << text;
  check_written(out, "export_kernel_tuner_cache");
  return static_cast<int64_t>(k.entries.size());
}

int64_t export_t4_results(const RecordStore& store, int64_t job_id, std::ostream& out) {
  const KtJob k = load_job(store, job_id);
  bj::array results;
  for (const KtEntry& e : k.entries) {
    bj::object r;
    r["timestamp"] = kt_timestamp(e.trial->result.timestamp);
    bj::object configuration;
    for (size_t i = 0; i < k.names.size(); ++i) configuration[k.names[i]] = e.values[i];
    r["configuration"] = std::move(configuration);
    r["objectives"] = bj::array{"time"};
    const std::vector<double> times = e.failed ? std::vector<double>{} : costs_ms(*e.trial);
    r["times"] =
        bj::object{{"compilation", 0.0}, {"benchmark", e.trial->result.all_cost * 1e3},
                   {"framework", 0.0},   {"search_algorithm", 0.0},
                   {"validation", 0.0},  {"runtimes", bj::array(times.begin(), times.end())}};
    r["invalidity"] = e.failed && e.invalidity == "correct" ? "runtime" : e.invalidity;
    r["correctness"] = e.trial->result.error == MeasureErrorNo::kWrongAnswer ? 0 : 1;
    bj::array measurements;
    if (!e.failed) {
      measurements.push_back(bj::object{{"name", "time"}, {"value", mean(times)}, {"unit", "ms"}});
      measurements.push_back(
          bj::object{{"name", "GFLOP/s"}, {"value", e.trial->gflops}, {"unit", "GFLOP/s"}});
    }
    r["measurements"] = std::move(measurements);
    results.push_back(std::move(r));
  }
  const bj::object root{
      {"schema_version", "1.0.0"},
      {"results", std::move(results)},
      {"metadata", bj::object{{"timeunit", "milliseconds"}, {"webtune", webtune_info(k.job)}}}};
  out << bj::serialize(root) << '\n';
  check_written(out, "export_t4_results");
  return static_cast<int64_t>(k.entries.size());
}

}  // namespace webtune
