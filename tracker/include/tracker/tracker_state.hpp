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

#include "tracker/protocol.hpp"
#include "tracker/scheduler.hpp"

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

/// Who may connect: an empty token accepts anyone of that role.
struct AccessTokens {
  std::string agent, client, viewer;
};

/// What the tracker knows of one connected peer.
struct PeerInfo {
  Role role = Role::kClient;
  bool greeted = false;  ///< sent a valid hello
  std::string name;
  std::vector<std::string> keys;
  std::string device_json;  ///< the hello's device object, serialized
  uint64_t jobs_done = 0, jobs_failed = 0;
  std::chrono::system_clock::time_point connected_at, last_seen;
};

/// Counters exposed by `summary` and /metrics.
struct TrackerCounters {
  uint64_t connections = 0, protocol_errors = 0, refused_handshakes = 0, frames_in = 0,
           frames_out = 0;
  /// Results that agents sent, by error number (index = MeasureErrorNo, 0 = NO_ERROR).
  std::array<uint64_t, 9> results_by_error{};
};

class TrackerState {
 public:
  /// `heartbeat_ms`: how long an agent may stay silent before it is dropped (and its lease
  /// re-queued). `client_heartbeat_ms`: the same for clients and viewers, which may be busy
  /// for long stretches without reading (a tuner building a batch of LLVM modules or fitting
  /// its cost model does not answer pings), and whose death the closed socket shows anyway.
  TrackerState(AccessTokens tokens, SchedulerOptions options, int heartbeat_ms,
               int client_heartbeat_ms = 300000);

  /// A new connection; returns its session id.
  uint64_t on_open(std::shared_ptr<PeerConnection> peer);
  /// One text frame from session `id`. Never throws: protocol errors are answered and counted.
  void on_message(uint64_t id, std::string_view text, TimePoint now);
  /// A ping or pong from session `id`: the peer is alive (PeerInfo::last_seen).
  void on_heartbeat(uint64_t id);
  /// A binary frame: not used by protocol version 1 for anything but reserved payloads.
  void on_binary(uint64_t id, size_t bytes);
  /// The connection is gone (closed, reset, timed out).
  void on_close(uint64_t id, TimePoint now);
  /// Lease expiries and quarantine ends; call periodically.
  void on_tick(TimePoint now);
  /// Closes every connection with `code` (1001 "going away" at shutdown).
  void close_all(int code, const std::string& reason);

  const Scheduler& scheduler() const { return scheduler_; }
  const TrackerCounters& counters() const { return counters_; }
  const std::map<uint64_t, PeerInfo>& peers() const { return peers_; }
  /// Open WebSocket connections (greeted or not).
  size_t open_connections() const { return connections_.size(); }
  /// The `summary` message body: {"keys": {KEY: {"agents_idle", "agents_busy",
  /// "agents_quarantined", "jobs_pending", "jobs_leased"}}, "devices": {KEY: device},
  /// "counters": {...}, "results_by_error_no": {"NO_ERROR": n, ...}, "open_connections",
  /// "agents", "clients", "viewers"}.
  boost::json::object summary(TimePoint now) const;
  /// The greeted agents, by session id: [{"session", "name", "keys": [...], "device": {...},
  /// "state": "busy"|"idle", "jobs_done", "jobs_failed", "connected_at", "last_seen"}], times in
  /// Unix seconds.
  boost::json::array agents_json() const;

 private:
  void handle_hello(uint64_t id, const boost::json::object& message, TimePoint now);
  void handle_result(uint64_t id, const boost::json::object& message, TimePoint now);
  void handle_submit(uint64_t id, const boost::json::object& message, TimePoint now);
  void handle_cancel(uint64_t id, const boost::json::object& message);
  void send(uint64_t id, const boost::json::object& message);
  void send_raw(uint64_t id, std::string frame);
  void protocol_error(uint64_t id, const std::string& code, const std::string& message);
  /// Carries out scheduler actions, then dispatches waiting jobs to idle agents.
  void execute(std::vector<Action> actions, TimePoint now);

  AccessTokens tokens_;
  int heartbeat_ms_;
  int client_heartbeat_ms_;
  Scheduler scheduler_;
  uint64_t next_session_ = 1;
  std::map<uint64_t, std::shared_ptr<PeerConnection>> connections_;
  std::map<uint64_t, PeerInfo> peers_;
  TrackerCounters counters_;
};

}  // namespace webtune::tracker
