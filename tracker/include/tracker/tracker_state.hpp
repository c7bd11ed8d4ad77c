/// \file tracker_state.hpp
/// The tracker's shared state: connected peers, the scheduler, and the protocol logic that links
/// them. Networking stays outside: a peer is anything that can `send` a text frame and `close`,
/// so this class runs in tests without sockets, and in the daemon behind Beast sessions.
///
/// Not thread-safe: the daemon calls it from its single io_context thread only.
#pragma once

#include <array>
#include <boost/json/fwd.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "tracker/model_job.hpp"
#include "tracker/protocol.hpp"
#include "tracker/result_check.hpp"
#include "tracker/scheduler.hpp"
#include "tracker/tracker_policy.hpp"

namespace webtune::tracker {

/// One connection as the state sees it.
class PeerConnection {
 public:
  virtual ~PeerConnection() = default;
  /// Queues one text frame.
  virtual void send(std::shared_ptr<const std::string> frame) = 0;
  /// Closes with a WebSocket close code (1000 normal, 1008 policy, 1009 too big) and a reason.
  virtual void close(int code, const std::string& reason) = 0;
  /// Changes how long the peer may stay silent (no frame, no pong) before it is dropped; pings
  /// go out at half of it. Connections without a heartbeat (test fakes) ignore it.
  virtual void set_idle_timeout(std::chrono::milliseconds /*timeout*/) {}
};

/// What the tracker knows of one connected peer.
struct PeerInfo {
  Role role = Role::kClient;
  bool greeted = false;  ///< sent a valid hello
  std::string name;
  std::vector<std::string> keys;
  std::vector<std::string> job_kinds;  ///< agents: the hello's job_kinds ({"kernel"} if none)
  std::string device_json;             ///< the hello's device object, serialized
  /// Agents: the fastest each of its keys' devices could be (result_check.hpp).
  std::map<std::string, DevicePeak> peaks;
  uint64_t jobs_done = 0, jobs_failed = 0;
  uint64_t results_refused = 0;  ///< results refused as implausible or malformed
  std::chrono::system_clock::time_point connected_at, last_seen;
  TimePoint opened{};  ///< when the connection opened (the hello deadline counts from it)
};

/// Counters exposed by `summary` and /metrics.
struct TrackerCounters {
  uint64_t connections = 0, protocol_errors = 0, refused_handshakes = 0, frames_in = 0,
           frames_out = 0;
  uint64_t hello_timeouts = 0;       ///< connections closed for sending no hello in time
  uint64_t submits_over_quota = 0;   ///< submits refused by the per-client caps
  uint64_t results_implausible = 0;  ///< agent results refused by check_result
  uint64_t suspect_marks = 0;        ///< times an agent was marked suspect
  uint64_t connections_refused = 0;  ///< accepted and closed at once: over the connection cap
  uint64_t origins_refused = 0;      ///< requests refused for their Host or Origin (403)
  uint64_t results_stale = 0;        ///< results that answered an earlier attempt of their job
  /// Results that agents sent, by error number (index = MeasureErrorNo, 0 = NO_ERROR).
  std::array<uint64_t, 9> results_by_error{};
};

class TrackerState {
 public:
  /// Enforces `policy` (tracker_policy.hpp). Its `heartbeat_ms` is how long an agent may stay
  /// silent before it is dropped (and its lease re-queued); `client_heartbeat_ms` the same for
  /// clients and viewers, which may be busy for long stretches without reading (a tuner building
  /// a batch of LLVM modules or fitting its cost model does not answer pings), and whose death
  /// the closed socket shows anyway.
  explicit TrackerState(TrackerPolicy policy);

  /// A new connection; returns its session id. It must say hello within the policy's
  /// hello_timeout of `now`, or on_tick closes it.
  uint64_t on_open(std::shared_ptr<PeerConnection> peer, TimePoint now = Clock::now());
  /// One text frame from session `id`. Never throws: protocol errors are answered and counted.
  void on_message(uint64_t id, std::string_view text, TimePoint now);
  /// A ping or pong from session `id`: the peer is alive (PeerInfo::last_seen).
  void on_heartbeat(uint64_t id);
  /// A binary frame: not used by protocol version 1 for anything but reserved payloads.
  void on_binary(uint64_t id, size_t bytes);
  /// The connection is gone (closed, reset, timed out).
  void on_close(uint64_t id, TimePoint now);
  /// Lease expiries, quarantine ends and hello deadlines; call periodically.
  void on_tick(TimePoint now);
  /// The network layer refused a connection (over the cap); returns the count so far.
  uint64_t note_refused_connection() { return ++counters_.connections_refused; }
  /// The network layer refused a request for its Host or Origin.
  void note_refused_origin() { ++counters_.origins_refused; }
  /// Closes every connection with `code` (1001 "going away" at shutdown).
  void close_all(int code, const std::string& reason);

  const Scheduler& scheduler() const { return scheduler_; }
  const TrackerPolicy& policy() const { return policy_; }
  /// Whether an agent of this name is suspect now (refused results; see TrackerPolicy).
  bool is_suspect(const std::string& agent_name, TimePoint now) const;
  const TrackerCounters& counters() const { return counters_; }
  const std::map<uint64_t, PeerInfo>& peers() const { return peers_; }
  /// The packages of model jobs read so far (a cache: unchanged files are not read again).
  const ModelPackageCache& model_packages() const { return packages_; }
  /// Open WebSocket connections (greeted or not).
  size_t open_connections() const { return connections_.size(); }
  /// The `summary` message body: {"keys": {KEY: {"agents_idle", "agents_busy",
  /// "agents_quarantined", "jobs_pending", "jobs_leased"}}, "devices": {KEY: device},
  /// "counters": {...}, "results_by_error_no": {"NO_ERROR": n, ...}, "open_connections",
  /// "agents", "clients", "viewers"}.
  boost::json::object summary(TimePoint now) const;
  /// The `agents` message body (docs/protocol.md, "Everyone"): the agents whose keys `pattern`
  /// matches and that run jobs of `kind`, by state: {"key", "kind", "agents", "idle", "busy",
  /// "quarantined", "unresponsive", "keys": {KEY: {the same counts}}, "quarantine_reasons":
  /// {REASON: agents}}. "quarantined" counts suspect agents too (their reason says "suspect").
  boost::json::object agents_for(const std::string& pattern, JobKind kind) const;
  /// The greeted agents, by session id: [{"session", "name", "keys": [...], "job_kinds": [...],
  /// "device": {...},
  /// "state": "busy"|"idle"|"quarantined"|"suspect", "jobs_done", "jobs_failed",
  /// "results_refused", "connected_at", "last_seen"}], times in Unix seconds.
  boost::json::array agents_json() const;

 private:
  void handle_hello(uint64_t id, const boost::json::object& message, TimePoint now);
  void handle_result(uint64_t id, const boost::json::object& message, TimePoint now);
  void handle_submit(uint64_t id, const boost::json::object& message, TimePoint now);
  void handle_cancel(uint64_t id, const boost::json::object& message);
  void send(uint64_t id, const boost::json::object& message);
  void send_raw(uint64_t id, std::string frame);
  void protocol_error(uint64_t id, const std::string& code, const std::string& message);
  /// "busy", "idle", "quarantined" or "suspect" (agents_json's "state").
  const char* agent_state(uint64_t id, const PeerInfo& peer) const;
  /// Refuses agent `id`'s result for `job`: re-queues the job, marks the agent suspect.
  void refuse_result(uint64_t id, uint64_t job, const std::string& why, TimePoint now);
  /// Carries out scheduler actions, then dispatches waiting jobs to idle agents.
  void execute(std::vector<Action> actions, TimePoint now);

  TrackerPolicy policy_;
  Scheduler scheduler_;
  std::map<std::string, TimePoint> suspects_;  // agent name → suspect until
  uint64_t next_session_ = 1;
  std::map<uint64_t, std::shared_ptr<PeerConnection>> connections_;
  std::map<uint64_t, PeerInfo> peers_;
  TrackerCounters counters_;
  ModelPackageCache packages_;  // model jobs' packages, read at submit
};

}  // namespace webtune::tracker
