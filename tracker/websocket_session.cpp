/// \file websocket_session.cpp
/// Read loop, queued writes and close handling of one tracker WebSocket connection.
#include "websocket_session.hpp"

#include <spdlog/spdlog.h>

#include "tracker/protocol.hpp"

namespace webtune::tracker {

template <class Stream>
WebsocketSession<Stream>::WebsocketSession(Stream&& stream, TrackerState& state,
                                           size_t max_frame_bytes, int heartbeat_ms,
                                           ConnectionSlot slot)
    : ws_(std::move(stream)), state_(state), heartbeat_ms_(heartbeat_ms), slot_(std::move(slot)) {
  ws_.read_message_max(max_frame_bytes);
}

template <class Stream>
void WebsocketSession<Stream>::run(http::request<http::string_body> request) {
  beast::get_lowest_layer(ws_).expires_never();  // the websocket timeout takes over
  websocket::stream_base::timeout timeout{};
  timeout.handshake_timeout = std::chrono::seconds(10);
  // Beast pings an idle peer at half the idle timeout and closes it at the full one.
  timeout.idle_timeout = std::chrono::milliseconds(heartbeat_ms_);
  timeout.keep_alive_pings = true;
  ws_.set_option(timeout);
  ws_.async_accept(
      request, beast::bind_front_handler(&WebsocketSession::on_accept, this->shared_from_this()));
}

template <class Stream>
void WebsocketSession<Stream>::on_accept(beast::error_code ec) {
  if (ec) {
    spdlog::debug("websocket accept failed: {}", ec.message());
    return;
  }
  id_ = state_.on_open(this->shared_from_this());
  // Pings and pongs show an idle peer alive between messages (the dashboard's "last seen").
  ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
    if (kind != websocket::frame_type::close) state_.on_heartbeat(id_);
  });
  do_read();
}

template <class Stream>
void WebsocketSession<Stream>::do_read() {
  ws_.async_read(buffer_,
                 beast::bind_front_handler(&WebsocketSession::on_read, this->shared_from_this()));
}

template <class Stream>
void WebsocketSession<Stream>::on_read(beast::error_code ec, size_t bytes) {
  if (ec) {
    if (ec == websocket::error::message_too_big) {
      spdlog::warn("session {}: frame over the size limit; closing with 1009", id_);
      close(static_cast<int>(websocket::close_code::too_big), "frame over the size limit");
    } else if (ec != websocket::error::closed && ec != net::error::operation_aborted) {
      spdlog::debug("session {}: read ended: {}", id_, ec.message());
    }
    finish();
    return;
  }
  const TimePoint now = Clock::now();
  if (ws_.got_text()) {
    const auto data = buffer_.cdata();
    state_.on_message(id_, std::string_view(static_cast<const char*>(data.data()), data.size()),
                      now);
  } else {
    state_.on_binary(id_, bytes);
  }
  buffer_.consume(buffer_.size());
  if (!closing_) do_read();
}

template <class Stream>
void WebsocketSession<Stream>::send(std::shared_ptr<const std::string> frame) {
  if (closing_ || finished_) return;  // nothing goes out after a close has been decided
  queue_.push_back(std::move(frame));
  if (!writing_) do_write();
}

template <class Stream>
void WebsocketSession<Stream>::do_write() {
  writing_ = true;
  ws_.text(true);
  ws_.async_write(net::buffer(*queue_.front()),
                  beast::bind_front_handler(&WebsocketSession::on_write, this->shared_from_this()));
}

template <class Stream>
void WebsocketSession<Stream>::on_write(beast::error_code ec, size_t) {
  writing_ = false;
  if (ec) {
    finish();
    return;
  }
  queue_.pop_front();
  if (!queue_.empty())
    do_write();
  else if (closing_)
    start_close();
}

template <class Stream>
void WebsocketSession<Stream>::set_idle_timeout(std::chrono::milliseconds timeout) {
  // Called from this session's own read handler (the hello), so the stream is not in use on
  // another thread; Beast reads the new timeout when its idle timer next fires.
  websocket::stream_base::timeout options{};
  options.handshake_timeout = std::chrono::seconds(10);
  options.idle_timeout = timeout;
  options.keep_alive_pings = true;
  ws_.set_option(options);
}

template <class Stream>
void WebsocketSession<Stream>::close(int code, const std::string& reason) {
  if (closing_ || finished_) return;
  closing_ = true;
  // A close frame carries at most 123 bytes of reason: Beast throws std::length_error beyond
  // that, and a peer's long hello field once reached here through the refusal's message.
  close_reason_ = websocket::close_reason(static_cast<websocket::close_code>(code),
                                          truncate_utf8(reason, kMaxCloseReasonBytes));
  // Frames already queued (such as the error that explains the close) go out first.
  if (!writing_) start_close();
}

template <class Stream>
void WebsocketSession<Stream>::start_close() {
  ws_.async_close(close_reason_,
                  [self = this->shared_from_this()](beast::error_code) { self->finish(); });
}

template <class Stream>
void WebsocketSession<Stream>::finish() {
  if (finished_) return;
  finished_ = true;
  closing_ = true;
  queue_.clear();
  if (id_ != 0) state_.on_close(id_, Clock::now());
  beast::error_code ignored;
  beast::get_lowest_layer(ws_).socket().close(ignored);
}

template class WebsocketSession<PlainStream>;
template class WebsocketSession<TlsStream>;

}  // namespace webtune::tracker
