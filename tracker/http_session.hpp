/// \file http_session.hpp
/// The first request on a tracker connection: a WebSocket upgrade on /ws becomes a
/// WebsocketSession; any other request gets a plain HTTP answer (the HTTP API and pages of later
/// issues hang off here).
#pragma once

#include <memory>
#include <string>

#include "beast.hpp"
#include "tracker/tracker_state.hpp"

namespace webtune::tracker {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  /// `agent_root`: the directory served under /agent (see agent_page.hpp).
  HttpSession(tcp::socket&& socket, TrackerState& state, size_t max_frame_bytes, int heartbeat_ms,
              std::string agent_root);
  void run();

 private:
  void do_read();
  void on_read(beast::error_code ec, size_t bytes);
  void on_write(bool keep_alive, beast::error_code ec, size_t bytes);

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::unique_ptr<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<http::response<http::string_body>> response_;
  TrackerState& state_;
  size_t max_frame_bytes_;
  int heartbeat_ms_;
  std::string agent_root_;
};

}  // namespace webtune::tracker
