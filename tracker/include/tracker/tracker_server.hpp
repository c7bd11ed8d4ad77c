/// \file tracker_server.hpp
/// The tracker daemon: a Boost.Beast WebSocket server on `/ws` around TrackerState. The same port
/// serves the browser agent page on `/agent`, and other HTTP requests go to an optional
/// HttpHandler (the API, /metrics, the dashboard).
///
/// One io_context thread runs everything (accepts, reads, writes, the 100 ms lease tick), so the
/// state needs no locks; stop() may be called from any thread or a signal handler's thread.
#pragma once

#include <atomic>
#include <boost/json/fwd.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "tracker/agent_page.hpp"
#include "tracker/http_types.hpp"
#include "tracker/scheduler.hpp"
#include "tracker/tracker_state.hpp"

namespace webtune::tracker {

struct TrackerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 9190;  ///< 0 picks a free port (see TrackerServer::port)
  AccessTokens tokens;
  size_t max_frame_bytes = 16u << 20;  ///< larger frames close the connection with code 1009
  int heartbeat_ms = 10000;            ///< idle agents are pinged at half of it, dropped after it
  /// The same for clients and viewers (see TrackerState): a tuner does not read while it builds.
  int client_heartbeat_ms = 300000;
  /// The browser agent's files, served under /agent (see agent_page.hpp).
  std::string agent_root = default_agent_root();
  SchedulerOptions scheduler;
  /// Answers plain HTTP requests (everything but the /ws upgrade); empty: 404 for all of them.
  HttpHandler http_handler;
  /// False serves HTTP alone (`webtune serve`): /ws upgrades get 404 and the handler gets no
  /// state.
  bool websocket = true;

  /// Reads configs/tracker.json-style files: {"host","port","tokens":{"agent","client","viewer"},
  /// "max_frame_bytes","heartbeat_ms","client_heartbeat_ms","agent_root","max_attempts","quarantine_after","quarantine_ms"};
  /// every field optional. Throws std::runtime_error naming the file and the bad field.
  static TrackerConfig from_file(const std::string& path);
};

class TrackerServer {
 public:
  /// Binds and listens at once (so port() is known); throws std::runtime_error when the address
  /// cannot be bound.
  explicit TrackerServer(TrackerConfig config);
  ~TrackerServer();

  /// The bound port.
  uint16_t port() const { return port_; }
  /// "ws://host:port/ws".
  std::string url() const;
  /// "http://host:port/", where the dashboard is when an http_handler serves it.
  std::string http_url() const;
  /// Serves until stop(); returns afterwards. Installs no signal handlers (the CLI does).
  void run();
  /// Starts run() on a background thread (for embedding in `webtune tune` and tests).
  void start_background();
  /// Closes the listener and every connection and makes run() return. Thread-safe.
  void stop();
  /// Runs `fn` on the server thread and waits for it, e.g. to read the state safely.
  void inspect(const std::function<void(const TrackerState&)>& fn);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace webtune::tracker
