/// \file websocket_session.hpp
/// One WebSocket connection of the tracker: reads frames into TrackerState, and writes through a
/// queue so that exactly one async_write is in flight (as Beast's websocket examples do).
/// One template for both transports (PlainStream, TlsStream: beast.hpp).
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "beast.hpp"
#include "connection_slot.hpp"
#include "tracker/tracker_state.hpp"

namespace webtune::tracker {

template <class Stream>
class WebsocketSession : public PeerConnection,
                         public std::enable_shared_from_this<WebsocketSession<Stream>> {
 public:
  /// Takes over the stream of the HTTP session that read the upgrade request, and its slot.
  WebsocketSession(Stream&& stream, TrackerState& state, size_t max_frame_bytes, int heartbeat_ms,
                   ConnectionSlot slot);
  /// Accepts the upgrade request read by the HTTP session, then starts reading.
  void run(http::request<http::string_body> request);

  void send(std::shared_ptr<const std::string> frame) override;
  /// Closes with `code`; `reason` is cut to the 123 bytes a close frame may carry.
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

  websocket::stream<Stream> ws_;
  beast::flat_buffer buffer_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  TrackerState& state_;
  uint64_t id_ = 0;
  bool writing_ = false;
  bool closing_ = false;
  bool finished_ = false;
  int heartbeat_ms_;
  websocket::close_reason close_reason_;
  ConnectionSlot slot_;
};

}  // namespace webtune::tracker
