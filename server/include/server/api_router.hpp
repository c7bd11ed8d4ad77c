/// \file api_router.hpp
/// The JSON HTTP API over the tuning records and the live tracker, as a pure function of the
/// request: no sockets, so tests call it directly on a test database.
///
/// Endpoints (GET; times are Unix seconds, speeds GFLOP/s, costs seconds):
///  - /api/summary: {"live": bool, "tracker": summary or null, "records": {"db", "jobs",
///    "jobs_running", "trials", "errors"} or null}. `tracker` is TrackerState::summary(): agents
///    and queue depth per key, counters.
///  - /api/agents: {"live": bool, "online": [TrackerState::agents_json() entries],
///    "recorded": [{"name", "device_key", "device", "last_seen", "trials", "errors"}]}.
///  - /api/jobs: {"jobs": [JOB]} by id, JOB = {"id", "task", "workload": {"key", "op", "flops",
///    ...Workload::to_json()}, "target", "kernel", "device_key", "tuner", "status", "trials",
///    "errors", "best_gflops", "created", "updated"}. "target" is the tune target as the user
///    named it (tune_target_label: "webgl2" for gles-frag kernels measured by webgl2 tabs),
///    "kernel" the kernel kind its template builds ("gles-frag").
///  - /api/jobs/{id}: JOB plus "errors_by_error_no": [{"error_no", "error", "count"}], "best":
///    TRIAL or null, and "model_runs": [ids of the model runs the job belongs to].
///  - /api/jobs/{id}/trials?limit=L&offset=O: {"job", "total", "offset", "limit", "trials":
///    [TRIAL]} in insertion order; L in [0, 5000] (default 100), O >= 0 (default 0). TRIAL =
///    {"id", "number" (1-based trial number within the job), "config_index", "error_no",
///    "error", "message", "gflops", "mean_cost", "costs", "all_cost", "timestamp", "agent",
///    "config" (the config entity JSON)}.
///  - /api/best?workload=W&target=T: {"best": [{"job": JOB, "trial": TRIAL}]}, W a substring of
///    the workload key or task name, T a target name ("gles-frag"); both optional.
///  - /api/models: {"models": [RUN], "measurements": [MEASUREMENT]}: RUN by id, RUN = {"id",
///    "model", "target", "device_key", "schedule", "total_trials" (0: none), "started", "jobs":
///    [{"job", "task", "weight"}], "estimates" (how many), "latest": ESTIMATE or null}; a model
///    run is a whole-model tuning (records.hpp). MEASUREMENT: the kRecentModelMeasurements
///    newest whole-model measurements on the farm (`webtune measure-model`), newest first:
///    {"id", "created", "model" (the package), "target", "device_key", "agent",
///    "manifest_sha256", "model_sha256", "seed", "runs" (costs), "median_ms", "min_ms",
///    "estimated_ms" (Σ weight × best cost from the package's manifest), "measured_over_estimate"
///    (median_ms / estimated_ms), "error_no", "error", "message"}; the numbers are null where
///    they do not exist (a failed measurement, a package without an estimate).
///  - /api/models/{id}: RUN.
///  - /api/models/{id}/estimates: {"run", "estimates": [ESTIMATE]} oldest first, ESTIMATE =
///    {"trials" (the run's tasks' trials summed), "elapsed_s", "latency_ms" (estimated model
///    latency, Σ weight × best mean cost), "timestamp"}.
///  - /api/workloads: {"workloads": [{"key", "op", "flops", "task", "devices": [ROW]}]} by
///    workload key, ROW per job of the workload, fastest first: {"job", "device_key", "target"
///    (as the user named it), "kernel", "tuner", "status", "trials", "best_gflops", "best_ms"
///    (null: no success), "default_config_index" (-1: no template), "default_gflops" (null when
///    the default config was never measured in the job, 0 when it failed), "speedup"
///    (best / default GFLOP/s; null without a successful default)}.
///  - /api/export?job=ID&format=autotvm|csv and /api/artifact?job=ID: downloads.hpp.
///  - /api/events is not here: it streams (event_feed.hpp, dashboard_handler.cpp).
/// Errors are {"error": "..."}: 400 for a malformed id or parameter (a non-number, a negative
/// offset, a limit out of range, an unknown target), 404 for an unknown path, job or model run,
/// 405 for a
/// method other than GET. Query parameters the endpoint does not know are ignored (a viewer
/// token travels as one).
#pragma once

#include <boost/json/fwd.hpp>
#include <map>
#include <optional>
#include <string>

#include "server/url.hpp"
#include "tracker/http_types.hpp"
#include "tuner/records.hpp"

namespace webtune::server {

/// The largest `limit` of /api/jobs/{id}/trials.
inline constexpr int64_t kMaxTrialPage = 5000;
/// How many model measurements /api/models lists (the newest).
inline constexpr int64_t kRecentModelMeasurements = 200;

class ApiRouter {
 public:
  /// `store` may be nullptr (a tracker without --db): record endpoints then list nothing.
  explicit ApiRouter(const RecordStore* store) : store_(store) {}

  /// Answers `method` on `target` (a path under /api/); `live` is the running tracker's state,
  /// or nullptr when records are served alone.
  tracker::HttpResponse route(std::string_view method, const RequestTarget& target,
                              const tracker::TrackerState* live) const;

 private:
  const RecordStore* store_;
  /// Per job: its default config index, and the default trial's GFLOP/s once found (a stored
  /// trial never changes); `scanned` is the trial count last looked through.
  struct DefaultTrial {
    bool known = false;  ///< `index` was computed
    int64_t index = -1;
    std::optional<double> gflops;
    int64_t scanned = 0;
  };
  mutable std::map<int64_t, DefaultTrial> defaults_;
  /// /api/workloads.
  boost::json::object workloads() const;
};

/// The tune target name (tuner/tune_target.hpp) a job of kernel kind `kernel` on `device_key`
/// was tuned as: the one whose kernel is `kernel` and whose agents' key prefix starts the
/// device key ("webgl2:ANGLE ..." with gles-frag kernels is "webgl2"); else the kernel's name.
/// The records store only the kernel kind; the device key keeps which agents measured it.
std::string tune_target_label(Target kernel, const std::string& device_key);

/// A job as /api/jobs lists it.
boost::json::object job_json(const TuningJobInfo& job);
/// A trial as /api/jobs/{id}/trials lists it, `number` its 1-based trial number.
boost::json::object trial_json(const TrialRecord& trial, int64_t number);

/// A JSON error response: {"error": message}.
tracker::HttpResponse json_error(int status, const std::string& message);
/// A JSON 200 response (no caching: the API answers change with every trial).
tracker::HttpResponse json_ok(const boost::json::value& body);

}  // namespace webtune::server
