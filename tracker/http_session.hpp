/// \file http_session.hpp
/// The requests on a tracker connection: a WebSocket upgrade on /ws becomes a WebsocketSession;
/// any other request goes to the configured HttpHandler (the HTTP API, /metrics, the dashboard),
/// and gets a 404 JSON error when there is none or it declines.
#pragma once

#include <memory>
#include <string>

#include "beast.hpp"
#include "tracker/tracker_server.hpp"
#include "tracker/tracker_state.hpp"

namespace webtune::tracker {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  /// `config` must outlive the session (it is the server's own).
  HttpSession(tcp::socket&& socket, TrackerState& state, const TrackerConfig& config);
  void run();

 private:
  void do_read();
  void on_read(beast::error_code ec, size_t bytes);
  void on_write(bool keep_alive, beast::error_code ec, size_t bytes);
  /// The handler's answer to `request`, or the tracker's 404.
  HttpResponse answer(const http::request<http::string_body>& request);

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::unique_ptr<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
  TrackerState& state_;
  const TrackerConfig& config_;
};

}  // namespace webtune::tracker
