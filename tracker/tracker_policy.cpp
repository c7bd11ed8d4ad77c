/// \file tracker_policy.cpp
/// Lease bounds and reading the policy from a tracker config file.
#include "tracker/tracker_policy.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <stdexcept>

#include "codegen/json_util.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

std::chrono::milliseconds LeasePolicy::lease_for(double timeout_s, int64_t hint_ms) const {
  // Work in double and clamp before converting: timeouts and hints come from the network.
  double ms = !std::isfinite(timeout_s) ? static_cast<double>(max_ms)
              : timeout_s > 0           ? timeout_s * 1000.0
                                        : 0.0;
  ms += static_cast<double>(margin_ms);
  if (hint_ms > 0) ms = std::max(ms, static_cast<double>(hint_ms));
  if (!(ms <= static_cast<double>(max_ms))) ms = static_cast<double>(max_ms);  // NaN too
  ms = std::max(ms, static_cast<double>(min_ms));
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

namespace {

int64_t int_in(const bj::object& o, std::string_view key, int64_t fallback, int64_t lo,
               int64_t hi) {
  const int64_t v = json::get_int_or(o, key, fallback);
  if (v < lo || v > hi)
    throw std::invalid_argument("'" + std::string(key) + "' must be in [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "], not " + std::to_string(v));
  return v;
}

double positive(const bj::object& o, std::string_view key, double fallback) {
  const double v = json::get_double_or(o, key, fallback);
  if (!std::isfinite(v) || v <= 0)
    throw std::invalid_argument("'" + std::string(key) + "' must be a positive number");
  return v;
}

}  // namespace

void TrackerPolicy::read_json(const bj::object& o) {
  if (auto t = o.find("tokens"); t != o.end()) {
    const bj::object& tk = json::as_object(t->value(), "tokens");
    tokens.agent = json::get_string_or(tk, "agent", tokens.agent);
    tokens.client = json::get_string_or(tk, "client", tokens.client);
    tokens.viewer = json::get_string_or(tk, "viewer", tokens.viewer);
  }
  constexpr int64_t kDay = 24 * 3600 * 1000;
  heartbeat_ms = static_cast<int>(int_in(o, "heartbeat_ms", heartbeat_ms, 100, kDay));
  client_heartbeat_ms =
      static_cast<int>(int_in(o, "client_heartbeat_ms", client_heartbeat_ms, 100, kDay));
  hello_timeout = std::chrono::milliseconds(
      int_in(o, "hello_timeout_ms", hello_timeout.count(), 100, 10 * 60 * 1000));
  scheduler.max_attempts =
      static_cast<int>(int_in(o, "max_attempts", scheduler.max_attempts, 1, 100));
  scheduler.quarantine_after =
      static_cast<int>(int_in(o, "quarantine_after", scheduler.quarantine_after, 1, 1 << 30));
  scheduler.quarantine_duration = std::chrono::milliseconds(
      int_in(o, "quarantine_ms", scheduler.quarantine_duration.count(), 0, kDay));
  leases.min_ms = int_in(o, "lease_min_ms", leases.min_ms, 100, kDay);
  leases.max_ms = int_in(o, "lease_max_ms", leases.max_ms, leases.min_ms, kDay);
  leases.margin_ms = int_in(o, "lease_margin_ms", leases.margin_ms, 0, kDay);
  max_jobs_per_client = static_cast<size_t>(
      int_in(o, "max_jobs_per_client", static_cast<int64_t>(max_jobs_per_client), 1, 1 << 24));
  max_bytes_per_client = static_cast<size_t>(int_in(
      o, "max_bytes_per_client", static_cast<int64_t>(max_bytes_per_client), 1, int64_t{1} << 40));
  suspect_duration =
      std::chrono::milliseconds(int_in(o, "suspect_ms", suspect_duration.count(), 0, 30 * kDay));
  if (auto p = o.find("plausibility"); p != o.end()) {
    const bj::object& po = json::as_object(p->value(), "plausibility");
    plausibility.gpu_gflops = positive(po, "gpu_gflops", plausibility.gpu_gflops);
    plausibility.gpu_gbps = positive(po, "gpu_gbps", plausibility.gpu_gbps);
    plausibility.cpu_gflops_per_thread =
        positive(po, "cpu_gflops_per_thread", plausibility.cpu_gflops_per_thread);
    plausibility.cpu_gbps_per_thread =
        positive(po, "cpu_gbps_per_thread", plausibility.cpu_gbps_per_thread);
  }
}

}  // namespace webtune::tracker
