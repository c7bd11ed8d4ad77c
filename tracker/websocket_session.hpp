/// \file websocket_session.hpp
/// One WebSocket connection of the tracker: reads frames into TrackerState, and writes through a
/// queue so that exactly one async_write is in flight (as Beast's websocket examples do).
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "beast.hpp"
#include "tracker/tracker_state.hpp"

namespace webtune::tracker {

class WebsocketSession : public PeerConnection,
                         public std::enable_shared_from_this<WebsocketSession> {
 public:
  WebsocketSession(tcp::socket&& socket, TrackerState& state, size_t max_frame_bytes,
                   int heartbeat_ms);
  /// Accepts the upgrade request read by the HTTP session, then starts reading.
  void run(http::request<http::string_body> request);

  void send(std::shared_ptr<const std::string> frame) override;
  void close(int code, const std::string& reason) override;
  void set_idle_timeout(std::chrono::milliseconds timeout) override;

 private:
  void on_accept(beast::error_code ec);
  void do_read();
  void on_read(beast::error_code ec, size_t bytes);
  void do_write();
  void on_write(beast::error_code ec, size_t bytes);
  void start_close();
  void finish();

  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer buffer_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  TrackerState& state_;
  uint64_t id_ = 0;
  bool writing_ = false;
  bool closing_ = false;
  bool finished_ = false;
  int heartbeat_ms_;
  websocket::close_reason close_reason_;
};

}  // namespace webtune::tracker
