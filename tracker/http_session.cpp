/// \file http_session.cpp
/// Reads HTTP requests; hands WebSocket upgrades to WebsocketSession.
#include "http_session.hpp"

#include "tracker/agent_page.hpp"
#include "websocket_session.hpp"

namespace webtune::tracker {

HttpSession::HttpSession(tcp::socket&& socket, TrackerState& state, size_t max_frame_bytes,
                         int heartbeat_ms, std::string agent_root)
    : stream_(std::move(socket)),
      state_(state),
      max_frame_bytes_(max_frame_bytes),
      heartbeat_ms_(heartbeat_ms),
      agent_root_(std::move(agent_root)) {}

void HttpSession::run() {
  net::dispatch(stream_.get_executor(),
                beast::bind_front_handler(&HttpSession::do_read, shared_from_this()));
}

void HttpSession::do_read() {
  parser_ = std::make_unique<http::request_parser<http::string_body>>();
  parser_->body_limit(1 << 20);
  stream_.expires_after(std::chrono::seconds(30));
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&HttpSession::on_read, shared_from_this()));
}

void HttpSession::on_read(beast::error_code ec, size_t) {
  if (ec) {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return;
  }
  http::request<http::string_body> request = parser_->release();
  if (websocket::is_upgrade(request) && request.target() == "/ws") {
    std::make_shared<WebsocketSession>(stream_.release_socket(), state_, max_frame_bytes_,
                                       heartbeat_ms_)
        ->run(std::move(request));
    return;
  }
  response_ = std::make_shared<http::response<http::string_body>>(http::status::not_found,
                                                                  request.version());
  if (is_agent_page_target(request.target())) {
    // The browser agent's page and modules (agent_page.hpp); HEAD keeps GET's Content-Length.
    const bool head = request.method() == http::verb::head;
    AgentPageResponse page = agent_page_response(request.target(), agent_root_,
                                                 head || request.method() == http::verb::get, head);
    response_->result(static_cast<unsigned>(page.status));
    for (const auto& [name, value] : page.headers) response_->set(name, value);
    response_->body() = std::move(page.body);
    response_->keep_alive(request.keep_alive());
    if (!head) response_->prepare_payload();
  } else {
    response_->set(http::field::content_type, "application/json");
    response_->body() = R"({"error":"not found: the tracker speaks WebSocket on /ws"})";
    response_->keep_alive(request.keep_alive());
    response_->prepare_payload();
  }
  http::async_write(
      stream_, *response_,
      beast::bind_front_handler(&HttpSession::on_write, shared_from_this(), request.keep_alive()));
}

void HttpSession::on_write(bool keep_alive, beast::error_code ec, size_t) {
  if (ec) return;
  if (!keep_alive) {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return;
  }
  do_read();
}

}  // namespace webtune::tracker
