/// \file http_session.hpp
/// The requests on a tracker connection: a WebSocket upgrade on /ws becomes a WebsocketSession;
/// any other request goes to the configured HttpHandler (the HTTP API, /metrics, the dashboard),
/// and gets a 404 JSON error when there is none or it declines. Every request's `Host`, and its
/// `Origin` when a browser sends one, must pass the OriginPolicy (403 otherwise).
///
/// One template for both transports (PlainStream, TlsStream: beast.hpp); a TLS session first
/// completes the TLS handshake, and shuts TLS down before closing.
#pragma once

#include <memory>
#include <string>

#include "beast.hpp"
#include "connection_slot.hpp"
#include "tracker/origin_policy.hpp"
#include "tracker/tracker_server.hpp"
#include "tracker/tracker_state.hpp"

namespace webtune::tracker {

/// What every session of one listener shares; owned by the server, outlives its sessions.
struct ListenerContext {
  TrackerState& state;
  const TrackerConfig& config;
  OriginPolicy origins;
  ssl::context* tls = nullptr;  ///< set when the listener speaks TLS
};

template <class Stream>
class HttpSession : public std::enable_shared_from_this<HttpSession<Stream>> {
 public:
  HttpSession(tcp::socket&& socket, ListenerContext& context, ConnectionSlot slot);
  void run();

 private:
  void do_read();
  void on_read(beast::error_code ec, size_t bytes);
  void on_write(bool keep_alive, beast::error_code ec, size_t bytes);
  /// Ends the connection (TLS: close_notify first).
  void shutdown();
  /// The handler's answer to `request`, or the tracker's 404 / 403.
  HttpResponse answer(const http::request<http::string_body>& request);
  /// Sends `r`'s event stream (HttpResponse::stream) until it ends or the peer goes away.
  void start_stream(HttpResponse r, unsigned version);
  void stream_tick();
  void stream_watch();
  void stream_write(std::string text);
  /// 403 when the request's Host or Origin is not one this listener answers.
  std::optional<HttpResponse> refuse_foreign(const http::request<http::string_body>& request);

  Stream stream_;
  beast::flat_buffer buffer_;
  std::unique_ptr<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
  ListenerContext& context_;
  ConnectionSlot slot_;
  // An event stream's state (start_stream); unused otherwise.
  std::shared_ptr<EventStream> events_;
  std::unique_ptr<net::steady_timer> events_timer_;
  std::shared_ptr<std::string> events_out_;
  std::chrono::steady_clock::time_point events_last_write_;
  bool events_closed_ = false;
};

/// Starts a session on an accepted socket: HTTP over plain TCP, or over TLS when the context
/// has one.
void start_session(tcp::socket&& socket, ListenerContext& context, ConnectionSlot slot);

}  // namespace webtune::tracker
