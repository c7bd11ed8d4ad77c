/// \file metrics.cpp
/// Renders tracker counters and record counts as Prometheus text; see metrics.hpp.
#include "server/metrics.hpp"

#include <boost/json.hpp>
#include <cstdio>
#include <map>

namespace webtune::server {

namespace bj = boost::json;

namespace {

class Writer {
 public:
  /// Starts a metric family: its HELP and TYPE lines.
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
    out_ += "# TYPE " + std::string(name) + " " + std::string(type) + "\n";
  }
  /// One sample; `labels` already rendered as `a="x",b="y"` (or empty).
  void sample(std::string_view name, const std::string& labels, double value) {
    out_ += std::string(name);
    if (!labels.empty()) out_ += "{" + labels + "}";
    // Counters and gauges here are whole numbers: print them without an exponent.
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.17g", value);
    out_ += " " + std::string(buffer) + "\n";
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string label(std::string_view name, std::string_view value) {
  return std::string(name) + "=\"" + escape_label(value) + "\"";
}

double number(const bj::object& o, std::string_view key) {
  auto it = o.find(key);
  return it == o.end() ? 0.0 : it->value().to_number<double>();
}

void live_metrics(Writer& w, const bj::object& s) {
  const bj::object& keys = s.at("keys").as_object();
  w.family("webtune_agents", "gauge", "Agents per key and state.");
  for (const auto& [key, v] : keys) {
    const bj::object& k = v.as_object();
    for (const char* state : {"idle", "busy", "quarantined"})
      w.sample("webtune_agents", label("key", key) + "," + label("state", state),
               number(k, std::string("agents_") + state));
  }
  w.family("webtune_queue_depth", "gauge", "Measurement jobs waiting per key.");
  for (const auto& [key, v] : keys)
    w.sample("webtune_queue_depth", label("key", key), number(v.as_object(), "jobs_pending"));
  w.family("webtune_jobs_leased", "gauge", "Measurement jobs leased to agents per key.");
  for (const auto& [key, v] : keys)
    w.sample("webtune_jobs_leased", label("key", key), number(v.as_object(), "jobs_leased"));

  w.family("webtune_measure_results_total", "counter",
           "Results agents sent, by error number (0: the job is done; others: it failed).");
  const bj::object& by_error = s.at("results_by_error_no").as_object();
  for (int e = 0; e <= static_cast<int>(MeasureErrorNo::kUnknown); ++e) {
    const std::string_view name = error_name(static_cast<MeasureErrorNo>(e));
    w.sample("webtune_measure_results_total",
             label("error_no", std::to_string(e)) + "," + label("error", name),
             number(by_error, name));
  }

  const bj::object& c = s.at("counters").as_object();
  const std::pair<const char*, const char*> counters[] = {
      {"lease_expiries", "Leases that expired before the agent answered."},
      {"jobs_submitted", "Measurement jobs submitted by clients."},
      {"jobs_delivered", "Results delivered to clients."},
      {"jobs_requeued", "Measurement jobs re-queued after a lost agent or lease."},
      {"jobs_failed_max_attempts", "Measurement jobs failed after their last attempt."},
      {"jobs_cancelled", "Measurement jobs cancelled by their client."},
      {"results_refused", "Results refused (late, or for a job not leased to the agent)."},
      {"quarantines", "Agents quarantined after failures in a row."},
      {"protocol_errors", "Protocol errors answered."},
      {"refused_handshakes", "Handshakes refused (bad token or hello)."},
      {"results_implausible", "Agent results refused as implausible or malformed."},
      {"suspect_marks", "Times an agent was marked suspect for a refused result."},
      {"hello_timeouts", "Connections closed for sending no hello in time."},
      {"submits_over_quota", "Submits refused by the per-client caps."},
      {"connections_refused", "Connections closed at once: over the connection cap."},
      {"origins_refused", "Requests refused for their Host or Origin."},
      {"results_stale", "Results that answered an earlier attempt of their job."},
  };
  for (const auto& [key, help] : counters) {
    const std::string name = std::string("webtune_") + key + "_total";
    w.family(name, "counter", help);
    w.sample(name, "", number(c, key));
  }
  w.family("webtune_websocket_connections", "gauge", "Open WebSocket connections.");
  w.sample("webtune_websocket_connections", "", number(s, "open_connections"));
  w.family("webtune_websocket_connections_total", "counter", "WebSocket connections accepted.");
  w.sample("webtune_websocket_connections_total", "", number(c, "connections"));
  w.family("webtune_peers", "gauge", "Greeted peers by role.");
  for (const char* role : {"agent", "client", "viewer"})
    w.sample("webtune_peers", label("role", role), number(s, std::string(role) + "s"));
}

void record_metrics(Writer& w, const RecordStore& store) {
  std::map<std::string, int64_t> by_status;
  for (const TuningJobInfo& j : store.jobs()) ++by_status[j.status];
  w.family("webtune_records_jobs", "gauge", "Tuning jobs in the records, by status.");
  for (const auto& [status, n] : by_status)
    w.sample("webtune_records_jobs", label("status", status), static_cast<double>(n));
  w.family("webtune_records_trials", "gauge", "Trials in the records, by error number.");
  for (const auto& [error, n] : store.error_counts())
    w.sample("webtune_records_trials",
             label("error_no", std::to_string(static_cast<int>(error))) + "," +
                 label("error", error_name(error)),
             static_cast<double>(n));
}

}  // namespace

std::string escape_label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string prometheus_text(const bj::object* live_summary, const RecordStore* store) {
  Writer w;
  w.family("webtune_up", "gauge", "1 when the tracker runs (0: records are served alone).");
  w.sample("webtune_up", "", live_summary ? 1 : 0);
  if (live_summary) live_metrics(w, *live_summary);
  if (store) record_metrics(w, *store);
  return w.take();
}

}  // namespace webtune::server
