/// \file api_router.cpp
/// The /api/ endpoints; see api_router.hpp for what each returns.
#include "server/api_router.hpp"

#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>

#include "server/downloads.hpp"
#include "tracker/tracker_state.hpp"
#include "tuner/tune_target.hpp"

namespace webtune::server {

namespace bj = boost::json;

namespace {

/// A 400 with the request's own words in it.
struct BadRequest : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses a whole decimal non-negative integer; throws BadRequest naming `what`.
int64_t parse_count(std::string_view text, std::string_view what) {
  int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw BadRequest(std::string(what) + " must be a non-negative integer, not '" +
                     std::string(text) + "'");
  return value;
}

int64_t query_count(const RequestTarget& target, const std::string& name, int64_t fallback) {
  auto it = target.query.find(name);
  return it == target.query.end() ? fallback : parse_count(it->second, name);
}

bj::value parse_or_null(const std::string& text) {
  boost::system::error_code ec;
  bj::value v = bj::parse(text, ec);
  return ec ? bj::value(nullptr) : v;
}

/// The trial number of a trial: its 1-based position among its job's trials.
int64_t trial_number(const RecordStore& store, const TrialRecord& trial) {
  return store.trial_number(trial.job_id, trial.id);
}

bj::object summary(const RecordStore* store, const tracker::TrackerState* live) {
  bj::object out{{"live", live != nullptr}, {"tracker", nullptr}, {"records", nullptr}};
  if (live) out["tracker"] = live->summary(tracker::Clock::now());
  if (store) {
    int64_t running = 0, trials = 0, errors = 0;
    const std::vector<TuningJobInfo> jobs = store->jobs();
    for (const TuningJobInfo& j : jobs) {
      running += j.status == "running";
      trials += j.trials;
      errors += j.errors;
    }
    out["records"] = bj::object{{"db", store->path()},
                                {"jobs", jobs.size()},
                                {"jobs_running", running},
                                {"trials", trials},
                                {"errors", errors}};
  }
  return out;
}

bj::object agents(const RecordStore* store, const tracker::TrackerState* live) {
  bj::array recorded;
  if (store)
    for (const AgentRecord& a : store->agents())
      recorded.push_back(bj::object{{"name", a.name},
                                    {"device_key", a.device_key},
                                    {"device", parse_or_null(a.device_info_json)},
                                    {"last_seen", a.last_seen},
                                    {"trials", a.trials},
                                    {"errors", a.errors}});
  return bj::object{{"live", live != nullptr},
                    {"online", live ? live->agents_json() : bj::array()},
                    {"recorded", std::move(recorded)}};
}

bj::object estimate_json(const ModelEstimate& e) {
  return bj::object{{"trials", e.trials},
                    {"elapsed_s", e.elapsed_s},
                    {"latency_ms", e.latency_ms},
                    {"timestamp", e.timestamp}};
}

bj::object model_run_json(const ModelRunInfo& run) {
  bj::array jobs;
  for (const ModelRunJob& j : run.jobs)
    jobs.push_back(bj::object{{"job", j.job_id}, {"task", j.task_name}, {"weight", j.weight}});
  return bj::object{{"id", run.id},
                    {"model", run.model},
                    {"target", tune_target_label(run.target, run.device_key)},
                    {"device_key", run.device_key},
                    {"schedule", run.schedule},
                    {"total_trials", run.total_trials},
                    {"started", run.started},
                    {"jobs", std::move(jobs)},
                    {"estimates", run.estimates},
                    {"latest", run.latest ? bj::value(estimate_json(*run.latest)) : nullptr}};
}

bj::value optional_number(const std::optional<double>& v) {
  return v ? bj::value(*v) : bj::value(nullptr);
}

bj::object model_measurement_json(const ModelMeasurementRecord& m) {
  std::optional<double> ratio;
  if (m.median_ms && m.estimated_ms && *m.estimated_ms > 0) ratio = *m.median_ms / *m.estimated_ms;
  bj::array costs;
  for (double c : m.costs) costs.emplace_back(c);
  return bj::object{{"id", m.id},
                    {"created", m.created},
                    {"model", m.model},
                    {"target", m.target},
                    {"device_key", m.device_key},
                    {"agent", m.agent},
                    {"manifest_sha256", m.manifest_sha256},
                    {"model_sha256", m.model_sha256},
                    {"seed", m.seed},
                    {"runs", m.costs.size()},
                    {"median_ms", optional_number(m.median_ms)},
                    {"min_ms", optional_number(m.min_ms)},
                    {"estimated_ms", optional_number(m.estimated_ms)},
                    {"measured_over_estimate", optional_number(ratio)},
                    {"error_no", static_cast<int>(m.error)},
                    {"error", error_name(m.error)},
                    {"message", m.message}};
}

/// /api/models/{id}[/estimates]: `rest` is what follows "/api/models/".
tracker::HttpResponse model_route(const RecordStore* store, std::string_view rest,
                                  const RequestTarget& target) {
  const size_t slash = rest.find('/');
  const std::string_view tail =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (!tail.empty() && tail != "/estimates") return json_error(404, "not found: " + target.path);
  const int64_t id = parse_count(rest.substr(0, slash), "the model run id");
  std::optional<ModelRunInfo> run = store ? store->model_run(id) : std::nullopt;
  if (!run) return json_error(404, "no model run " + std::to_string(id));
  if (tail.empty()) return json_ok(model_run_json(*run));
  bj::array estimates;
  for (const ModelEstimate& e : store->model_estimates(id)) estimates.push_back(estimate_json(e));
  return json_ok(bj::object{{"run", id}, {"estimates", std::move(estimates)}});
}

/// /api/jobs/{id}[/trials]: `rest` is what follows "/api/jobs/".
tracker::HttpResponse job_route(const RecordStore* store, std::string_view rest,
                                const RequestTarget& target) {
  const size_t slash = rest.find('/');
  const std::string_view id_text = rest.substr(0, slash);
  const std::string_view tail =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (!tail.empty() && tail != "/trials") return json_error(404, "not found: " + target.path);
  const int64_t id = parse_count(id_text, "the job id");
  std::optional<TuningJobInfo> job = store ? store->job(id) : std::nullopt;
  if (!job) return json_error(404, "no tuning job " + std::to_string(id));
  if (tail.empty()) {
    bj::object o = job_json(*job);
    bj::array errors;
    for (const auto& [error, count] : store->error_counts(id))
      errors.push_back(bj::object{
          {"error_no", static_cast<int>(error)}, {"error", error_name(error)}, {"count", count}});
    o["errors_by_error_no"] = std::move(errors);
    bj::array runs;
    for (int64_t run : store->model_runs_of_job(id)) runs.emplace_back(run);
    o["model_runs"] = std::move(runs);
    o["best"] = nullptr;
    for (const BestRecord& b :
         store->best(job->workload.key(), std::string(target_name(job->target))))
      if (b.job.id == id) o["best"] = trial_json(b.trial, trial_number(*store, b.trial));
    return json_ok(o);
  }
  const int64_t limit = query_count(target, "limit", 100);
  const int64_t offset = query_count(target, "offset", 0);
  if (limit > kMaxTrialPage)
    throw BadRequest("limit must be at most " + std::to_string(kMaxTrialPage) + ", not " +
                     std::to_string(limit));
  bj::array trials;
  int64_t number = offset;
  for (const TrialRecord& t : store->trials(id, limit, offset))
    trials.push_back(trial_json(t, ++number));
  return json_ok(bj::object{{"job", id},
                            {"total", job->trials},
                            {"offset", offset},
                            {"limit", limit},
                            {"trials", std::move(trials)}});
}

tracker::HttpResponse best_route(const RecordStore* store, const RequestTarget& target) {
  auto get = [&](const std::string& name) {
    auto it = target.query.find(name);
    return it == target.query.end() ? std::string() : it->second;
  };
  const std::string workload = get("workload"), target_filter = get("target");
  if (!target_filter.empty()) {
    try {
      target_from_name(target_filter);
    } catch (const std::invalid_argument& e) {
      throw BadRequest(e.what());
    }
  }
  bj::array best;
  if (store)
    for (const BestRecord& b : store->best(workload, target_filter))
      best.push_back(bj::object{{"job", job_json(b.job)},
                                {"trial", trial_json(b.trial, trial_number(*store, b.trial))}});
  return json_ok(bj::object{{"best", std::move(best)}});
}

/// The job of ?job=ID; throws BadRequest without one, nullopt for an unknown job.
std::optional<TuningJobInfo> query_job(const RecordStore* store, const RequestTarget& target) {
  auto it = target.query.find("job");
  if (it == target.query.end()) throw BadRequest("job=ID is needed");
  const int64_t id = parse_count(it->second, "job");
  return store ? store->job(id) : std::nullopt;
}

/// A download: `body` as `content_type`, saved by a browser as `filename`.
tracker::HttpResponse attachment(std::string body, const std::string& content_type,
                                 const std::string& filename) {
  tracker::HttpResponse r;
  r.content_type = content_type;
  r.body = std::move(body);
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + filename + "\"");
  return r;
}

/// A file name fragment of a job: "job3_dense_32_32_32".
std::string job_file_stem(const TuningJobInfo& job) {
  std::string stem = "job" + std::to_string(job.id) + "_" + job.workload.key();
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return stem;
}

}  // namespace

std::string tune_target_label(Target kernel, const std::string& device_key) {
  const std::string prefix = device_key.substr(0, device_key.find(':'));
  for (const TuneTarget& t : tune_targets())
    if (t.kernel == kernel && t.key == prefix && t.name != std::string(target_name(kernel)) &&
        t.browser)
      return t.name;
  return std::string(target_name(kernel));
}

bj::object job_json(const TuningJobInfo& job) {
  bj::object workload = job.workload.to_json();
  workload["key"] = job.workload.key();
  workload["flops"] = job.workload.flops();
  return bj::object{{"id", job.id},
                    {"task", job.task_name},
                    {"workload", std::move(workload)},
                    {"target", tune_target_label(job.target, job.device_key)},
                    {"kernel", target_name(job.target)},
                    {"device_key", job.device_key},
                    {"tuner", job.tuner},
                    {"status", job.status},
                    {"trials", job.trials},
                    {"errors", job.errors},
                    {"best_gflops", job.best_gflops},
                    {"created", job.created},
                    {"updated", job.updated}};
}

bj::object trial_json(const TrialRecord& t, int64_t number) {
  bj::array costs;
  for (double c : t.result.costs) costs.emplace_back(c);
  bj::object o{{"id", t.id},
               {"number", number},
               {"config_index", t.config_index},
               {"error_no", static_cast<int>(t.result.error)},
               {"error", error_name(t.result.error)},
               {"message", t.result.message},
               {"gflops", t.gflops},
               {"mean_cost", nullptr},
               {"costs", std::move(costs)},
               {"all_cost", t.result.all_cost},
               {"timestamp", t.result.timestamp},
               {"agent", t.agent},
               {"config", parse_or_null(t.config_json)}};
  if (t.result.ok() && !t.result.costs.empty()) o["mean_cost"] = t.result.mean_cost();
  return o;
}

bj::object ApiRouter::workloads() const {
  std::map<std::string, bj::object> by_key;
  std::map<std::string, std::vector<std::pair<double, bj::object>>> rows;
  if (store_) {
    for (const TuningJobInfo& j : store_->jobs()) {
      const std::string key = j.workload.key();
      if (!by_key.count(key)) {
        by_key[key] = bj::object{{"key", key},
                                 {"op", op_name(j.workload.op)},
                                 {"flops", j.workload.flops()},
                                 {"task", j.task_name}};
      }
      DefaultTrial& d = defaults_[j.id];
      if (!d.known) {
        d.index = default_config_index(*store_, j);  // builds the job's space: once per job
        d.known = true;
      }
      if (!d.gflops && d.index >= 0 && j.trials > d.scanned) {
        for (const TrialRecord& t : store_->trials(j.id, -1, d.scanned))
          if (t.config_index == d.index) d.gflops = t.gflops;
        d.scanned = j.trials;
      }
      const double flops = j.workload.flops();
      bj::object row{{"job", j.id},
                     {"device_key", j.device_key},
                     {"target", tune_target_label(j.target, j.device_key)},
                     {"kernel", target_name(j.target)},
                     {"tuner", j.tuner},
                     {"status", j.status},
                     {"trials", j.trials},
                     {"best_gflops", j.best_gflops},
                     {"best_ms", j.best_gflops > 0 ? bj::value(flops / (j.best_gflops * 1e9) * 1e3)
                                                   : bj::value(nullptr)},
                     {"default_config_index", d.index},
                     {"default_gflops", d.gflops ? bj::value(*d.gflops) : bj::value(nullptr)},
                     {"speedup", d.gflops && *d.gflops > 0 && j.best_gflops > 0
                                     ? bj::value(j.best_gflops / *d.gflops)
                                     : bj::value(nullptr)}};
      rows[key].emplace_back(j.best_gflops, std::move(row));
    }
  }
  bj::array out;
  for (auto& [key, w] : by_key) {
    auto& list = rows[key];
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    bj::array devices;
    for (auto& [g, row] : list) devices.push_back(std::move(row));
    w["devices"] = std::move(devices);
    out.push_back(std::move(w));
  }
  return bj::object{{"workloads", std::move(out)}};
}

tracker::HttpResponse json_error(int status, const std::string& message) {
  tracker::HttpResponse r;
  r.status = status;
  r.body = bj::serialize(bj::object{{"error", message}});
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

tracker::HttpResponse json_ok(const bj::value& body) {
  tracker::HttpResponse r;
  r.body = bj::serialize(body);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

tracker::HttpResponse ApiRouter::route(std::string_view method, const RequestTarget& target,
                                       const tracker::TrackerState* live) const {
  if (method != "GET") {
    tracker::HttpResponse r = json_error(405, "the API is read-only: use GET");
    r.headers.emplace_back("Allow", "GET");
    return r;
  }
  std::string_view path = target.path;
  // "/api/jobs/" and "/api/jobs" are the same list.
  if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  try {
    if (path == "/api/summary") return json_ok(summary(store_, live));
    if (path == "/api/agents") return json_ok(agents(store_, live));
    if (path == "/api/jobs") {
      bj::array jobs;
      if (store_)
        for (const TuningJobInfo& j : store_->jobs()) jobs.push_back(job_json(j));
      return json_ok(bj::object{{"jobs", std::move(jobs)}});
    }
    constexpr std::string_view kJobs = "/api/jobs/";
    if (path.starts_with(kJobs)) return job_route(store_, path.substr(kJobs.size()), target);
    if (path == "/api/best") return best_route(store_, target);
    if (path == "/api/workloads") return json_ok(workloads());
    if (path == "/api/export" || path == "/api/artifact") {
      const std::optional<TuningJobInfo> job = query_job(store_, target);
      if (!job) return json_error(404, "no tuning job " + target.query.at("job"));
      if (path == "/api/artifact") {
        try {
          tracker::HttpResponse r = json_ok(best_artifact_json(*store_, *job));
          r.headers.emplace_back("Content-Disposition",
                                 "attachment; filename=\"" + job_file_stem(*job) + "_best.json\"");
          return r;
        } catch (const std::runtime_error& e) {
          return json_error(404, e.what());
        }
      }
      auto it = target.query.find("format");
      const std::string format = it == target.query.end() ? "autotvm" : it->second;
      if (format == "autotvm")
        return attachment(export_job_autotvm(*store_, job->id), "application/x-ndjson",
                          job_file_stem(*job) + ".log");
      if (format == "csv")
        return attachment(export_job_csv(*store_, job->id), "text/csv; charset=utf-8",
                          job_file_stem(*job) + ".csv");
      throw BadRequest("format must be autotvm or csv, not '" + format + "'");
    }
    if (path == "/api/models") {
      bj::array runs, measurements;
      if (store_) {
        for (const ModelRunInfo& r : store_->model_runs()) runs.push_back(model_run_json(r));
        for (const ModelMeasurementRecord& m :
             store_->model_measurements({}, kRecentModelMeasurements))
          measurements.push_back(model_measurement_json(m));
      }
      return json_ok(
          bj::object{{"models", std::move(runs)}, {"measurements", std::move(measurements)}});
    }
    constexpr std::string_view kModels = "/api/models/";
    if (path.starts_with(kModels)) return model_route(store_, path.substr(kModels.size()), target);
  } catch (const BadRequest& e) {
    return json_error(400, e.what());
  }
  return json_error(404, "not found: " + target.path);
}

}  // namespace webtune::server
