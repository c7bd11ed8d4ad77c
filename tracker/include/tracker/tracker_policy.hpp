/// \file tracker_policy.hpp
/// What the tracker allows its peers: tokens, lease bounds, per-client caps, hello deadline and
/// the plausibility bounds on results. The trust model behind these numbers is written down in
/// docs/protocol.md ("Trust model"); TrackerState enforces all of it without networking.
#pragma once

#include <boost/json/fwd.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tracker/scheduler.hpp"

namespace webtune::tracker {

/// Who may connect: an empty token accepts anyone of that role. Tokens are compared in constant
/// time (secret.hpp).
struct AccessTokens {
  std::string agent, client, viewer;
  /// True when every role needs a token.
  bool complete() const { return !agent.empty() && !client.empty() && !viewer.empty(); }
};

/// How long a job's lease lasts. The tracker chooses it, not the client: a client's `lease_ms`
/// is only a hint that may lengthen the lease up to `max_ms`. The floor is the job's own
/// measurement budget (MeasureOptions::timeout_s, after which the agent reports RUN_TIMEOUT
/// itself) plus `margin_ms` for compiling, uploading and answering, so that a lease never
/// expires on an agent that is doing what it was asked; it is clamped to [min_ms, max_ms].
struct LeasePolicy {
  int64_t min_ms = 5'000;
  int64_t max_ms = 15 * 60'000;
  int64_t margin_ms = 30'000;

  /// The lease of a job whose measurement may take `timeout_s` seconds, given the client's
  /// hint (ms; <= 0 for none). Never overflows: a NaN, infinite or huge timeout or hint gives
  /// `max_ms`.
  std::chrono::milliseconds lease_for(double timeout_s, int64_t hint_ms) const;
};

/// Upper bounds on the speed a result may claim, per device (result_check.hpp applies them).
/// They are deliberately loose (several times the fastest hardware each class has) so that only
/// impossible results are refused: H100/H200 reach about 67 TFLOP/s fp32 without tensor cores
/// and 3.4/4.8 TB/s of HBM bandwidth (NVIDIA's data sheets); one x86 core with AVX-512 reaches
/// about 2 FMA × 16 lanes × 2 FLOP × 4 GHz = 256 GFLOP/s, and its L1 about 2 × 64 B × 4 GHz.
struct PlausibilityPolicy {
  double gpu_gflops = 250'000;         ///< any GPU device, GFLOP/s
  double gpu_gbps = 25'000;            ///< any GPU device, GB/s of compulsory traffic
  double cpu_gflops_per_thread = 300;  ///< CPU-backed devices (wasm, llvmpipe, SwiftShader)
  double cpu_gbps_per_thread = 1'000;  ///< the same, GB/s per hardware thread
  int cpu_threads_when_unknown = 256;  ///< when a CPU device does not say how many it has
};

/// Everything TrackerState enforces.
struct TrackerPolicy {
  AccessTokens tokens;
  SchedulerOptions scheduler;
  int heartbeat_ms = 10000;  ///< idle agents are pinged at half of it, dropped after it
  /// The same for clients and viewers: a tuner does not read while it builds a batch.
  int client_heartbeat_ms = 300000;
  /// A connection that has not sent a valid hello this long after it opened is closed.
  std::chrono::milliseconds hello_timeout{5000};
  LeasePolicy leases;
  /// Jobs (queued or leased) one client may have at a time, and their payload bytes; a submit
  /// that would go past either is refused whole (error `over_quota`).
  size_t max_jobs_per_client = 4096;
  size_t max_bytes_per_client = size_t{512} << 20;
  PlausibilityPolicy plausibility;
  /// How long an agent that sent an implausible result takes no job (by name, so that
  /// reconnecting does not clear it).
  std::chrono::milliseconds suspect_duration{std::chrono::hours(1)};
  /// Directory of built model packages, served under /models/<name>/ (agent_page.hpp) and read
  /// at the submit of a model job (job_facts.hpp); "" = none: model jobs are refused.
  std::string models_root;

  /// Reads the policy fields of a tracker config object (every field optional; see
  /// configs/tracker.json and docs/protocol.md): "tokens", "heartbeat_ms",
  /// "client_heartbeat_ms", "hello_timeout_ms", "max_attempts", "quarantine_after",
  /// "quarantine_ms", "lease_min_ms", "lease_max_ms", "lease_margin_ms",
  /// "max_jobs_per_client", "max_bytes_per_client", "suspect_ms", "plausibility":
  /// {"gpu_gflops", "gpu_gbps", "cpu_gflops_per_thread", "cpu_gbps_per_thread"}. Throws
  /// std::invalid_argument naming a field of the wrong type or out of range.
  void read_json(const boost::json::object& config);
};

}  // namespace webtune::tracker
