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
#include <vector>

#include "tracker/agent_page.hpp"
#include "tracker/http_types.hpp"
#include "tracker/scheduler.hpp"
#include "tracker/tracker_policy.hpp"
#include "tracker/tracker_state.hpp"

namespace webtune::tracker {

/// The daemon's configuration: the policy TrackerState enforces (tokens, leases, caps,
/// plausibility; tracker_policy.hpp) and what the network layer needs.
struct TrackerConfig : TrackerPolicy {
  std::string host = "127.0.0.1";
  uint16_t port = 9190;                ///< 0 picks a free port (see TrackerServer::port)
  size_t max_frame_bytes = 16u << 20;  ///< larger frames close the connection with code 1009
  /// Open connections (HTTP and WebSocket, greeted or not); one more is closed at once.
  size_t max_connections = 1024;
  /// The browser agent's files, served under /agent (see agent_page.hpp).
  std::string agent_root = default_agent_root();
  // models_root (TrackerPolicy): built model packages, served under /models/<name>/.
  /// Extra `Host` names and `Origin`s the port answers (origin_policy.hpp).
  std::vector<std::string> allowed_hosts, allowed_origins;
  /// PEM files of the certificate (chain) and its private key: when both are set, the port
  /// speaks only TLS (https://, wss://), through Asio's SSL stream over OpenSSL.
  std::string tls_cert_file, tls_key_file;
  /// Listening beyond loopback without a token for every role is refused unless this is set
  /// (and then warned about at every start): anyone who reaches the port could join as an agent
  /// and fake results, or read the records.
  bool allow_public_without_tokens = false;
  /// Answers plain HTTP requests (everything but the /ws upgrade); empty: 404 for all of them.
  HttpHandler http_handler;
  /// False serves HTTP alone (`webtune serve`): /ws upgrades get 404 and the handler gets no
  /// state.
  bool websocket = true;

  bool tls() const { return !tls_cert_file.empty() && !tls_key_file.empty(); }

  /// Reads configs/tracker.json-style files: {"host","port","max_frame_bytes","max_connections",
  /// "agent_root","allowed_hosts":[...],"allowed_origins":[...],"tls_cert_file","tls_key_file",
  /// "allow_public_without_tokens"} and the policy fields (TrackerPolicy::read_json); every
  /// field optional, unknown fields refused (a typo must not silently drop a setting). Throws
  /// std::runtime_error naming the file and the bad field.
  static TrackerConfig from_file(const std::string& path);
  /// Throws std::invalid_argument when the configuration exposes the tracker unsafely: a
  /// non-loopback listen address without a token for every role (unless
  /// allow_public_without_tokens) — or, with `websocket` off (no agents, no clients: `webtune
  /// serve`), without a viewer token — or only one of the two TLS files.
  void check_exposure() const;
};

class TrackerServer {
 public:
  /// Checks the configuration (check_exposure), loads the TLS files, binds and listens at once
  /// (so port() is known); throws std::invalid_argument for an unsafe or bad configuration and
  /// std::runtime_error when the address cannot be bound or a TLS file cannot be loaded.
  explicit TrackerServer(TrackerConfig config);
  ~TrackerServer();

  /// The bound port.
  uint16_t port() const { return port_; }
  /// "ws://host:port/ws" ("wss://" with TLS).
  std::string url() const;
  /// "http://host:port/" ("https://" with TLS), where the dashboard is when an http_handler
  /// serves it.
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
