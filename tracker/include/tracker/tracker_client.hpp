/// \file tracker_client.hpp
/// A blocking WebSocket peer of the tracker, for tuners (role client), viewers, tests and
/// `webtune tracker status`. Frames that arrive while waiting for something else are kept in
/// order, so a result is never lost because an `accepted` was awaited.
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tracker/protocol.hpp"

namespace webtune::tracker {

/// A job's result as the client receives it.
struct ClientResult {
  uint64_t job = 0, tag = 0;
  int attempt = 0;
  std::string agent;           ///< name of the agent that measured it (empty if none did)
  uint64_t agent_session = 0;  ///< that agent's session id on the tracker (0 if none did)
  std::string key;             ///< the agent key (device class) it ran under (empty if none)
  boost::json::object result;  ///< MeasureResult JSON
};

/// Splits "ws://host:port/path" or "wss://host:port/path" into its parts; throws
/// std::invalid_argument. wss:// is TLS, verified as client_transport.hpp says
/// ($WEBTUNE_CA_FILE).
struct TrackerUrl {
  std::string host, port, path;
  bool tls = false;
  static TrackerUrl parse(const std::string& url);
};

/// The CA certificate file that wss:// peers of this process (TrackerClient, AgentConnection)
/// verify the tracker's certificate against; empty: $WEBTUNE_CA_FILE when set, else the
/// system's CA store. Call before connecting (the CLI's --ca-file does).
void set_tracker_ca_file(const std::string& path);

class TrackerClient {
 public:
  /// Connects and sends `hello`; waits for `welcome`. Throws std::runtime_error with the
  /// tracker's error message (e.g. "bad_token: wrong token for role client") when refused, or
  /// when it cannot connect within `timeout`.
  TrackerClient(const std::string& url, const Hello& hello,
                std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Connects without a handshake (for protocol tests that send their own first frame).
  static std::unique_ptr<TrackerClient> connect_raw(const std::string& url,
                                                    std::chrono::milliseconds timeout);
  ~TrackerClient();

  uint64_t session() const { return session_; }

  /// Submits a batch; returns (tag, job id) pairs from `accepted`. Throws std::runtime_error when
  /// the tracker answers with an error.
  std::vector<std::pair<uint64_t, uint64_t>> submit(const std::vector<SubmitItem>& items,
                                                    int priority = 0);
  /// The next result, or nullopt when none arrives within `timeout`.
  std::optional<ClientResult> next_result(std::chrono::milliseconds timeout);
  /// Asks for a summary and waits for it.
  boost::json::object summary(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  /// Asks which agents can serve key pattern `key` (kernel jobs) and waits for the answer
  /// (docs/protocol.md, `agents`). Throws std::runtime_error as summary() does, e.g.
  /// "unknown_type: ..." from a tracker older than the message.
  boost::json::object agents(const std::string& key,
                             std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void cancel(uint64_t job);

  /// Sends one text (or binary) frame as is.
  void send_text(const std::string& text);
  void send_binary(const std::string& bytes);
  /// The next frame of any type, parsed; nullopt on timeout. Throws std::runtime_error when the
  /// connection closed (the message has the close code and reason).
  std::optional<boost::json::object> next_message(std::chrono::milliseconds timeout);
  /// True once the tracker has closed the connection.
  bool closed() const;
  /// The close code the tracker sent (0 if none).
  int close_code() const;
  void close();

 private:
  TrackerClient();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t session_ = 0;
  /// Waits for a message of `type`, keeping others for later.
  boost::json::object await_type(const std::string& type, std::chrono::milliseconds timeout);
};

}  // namespace webtune::tracker
