/// \file metrics.hpp
/// /metrics in the Prometheus text exposition format (version 0.0.4): what a scraper needs to
/// alert on a device farm.
///
/// From the live tracker (absent when records are served alone):
///  - webtune_agents{key,state}                gauge: agents per key, state idle|busy|quarantined
///  - webtune_queue_depth{key}                 gauge: measurement jobs waiting per key
///  - webtune_jobs_leased{key}                 gauge: measurement jobs leased to agents per key
///  - webtune_measure_results_total{error_no,error}  counter: agent results by error number
///    (error_no 0 is a job done; the others failed)
///  - webtune_lease_expiries_total, webtune_jobs_submitted_total, webtune_jobs_delivered_total,
///    webtune_jobs_requeued_total, webtune_jobs_failed_max_attempts_total,
///    webtune_jobs_cancelled_total, webtune_results_refused_total, webtune_quarantines_total,
///    webtune_protocol_errors_total, webtune_refused_handshakes_total   counters
///  - webtune_websocket_connections            gauge: open WebSocket connections
///  - webtune_websocket_connections_total      counter: WebSocket connections accepted
///  - webtune_peers{role}                      gauge: greeted agents, clients, viewers
/// From the records (absent without a database):
///  - webtune_records_jobs{status}             gauge: tuning jobs by status
///  - webtune_records_trials{error_no,error}   gauge: recorded trials by error number
#pragma once

#include <boost/json/fwd.hpp>
#include <string>

#include "tuner/records.hpp"

namespace webtune::server {

/// The Content-Type of the exposition format.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

/// The metrics text. `live_summary` is TrackerState::summary() (nullptr: no tracker); `store`
/// may be nullptr. Throws only what the store's reads throw.
std::string prometheus_text(const boost::json::object* live_summary, const RecordStore* store);

/// A label value escaped as the format asks: backslash, double quote and newline.
std::string escape_label(std::string_view value);

}  // namespace webtune::server
