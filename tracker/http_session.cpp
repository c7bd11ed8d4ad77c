/// \file http_session.cpp
/// Reads HTTP requests; hands WebSocket upgrades to WebsocketSession and the rest to the
/// configured HttpHandler.
#include "http_session.hpp"

#include <spdlog/spdlog.h>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <cctype>

#include "tracker/agent_page.hpp"
#include "websocket_session.hpp"

namespace webtune::tracker {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

HttpResponse json_error(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = R"({"error":)" + boost::json::serialize(boost::json::string(message)) + "}";
  return r;
}

}  // namespace

HttpSession::HttpSession(tcp::socket&& socket, TrackerState& state, const TrackerConfig& config)
    : stream_(std::move(socket)), state_(state), config_(config) {}

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

HttpResponse HttpSession::answer(const http::request<http::string_body>& request) {
  if (config_.websocket && is_agent_page_target(request.target())) {
    // The browser agent's page and modules (agent_page.hpp); HEAD keeps GET's Content-Length.
    const bool head = request.method() == http::verb::head;
    AgentPageResponse page = agent_page_response(request.target(), config_.agent_root,
                                                 head || request.method() == http::verb::get, head);
    HttpResponse r;
    r.status = page.status;
    r.body = std::move(page.body);
    for (auto& [name, value] : page.headers) {
      if (lower(name) == "content-type")
        r.content_type = std::move(value);
      else
        r.headers.emplace_back(std::move(name), std::move(value));
    }
    return r;
  }
  if (!config_.http_handler)
    return json_error(404, "not found: the tracker speaks WebSocket on /ws");
  HttpRequest plain;
  plain.method = std::string(request.method_string());
  plain.target = std::string(request.target());
  for (const auto& field : request)
    plain.headers.emplace_back(lower(field.name_string()), std::string(field.value()));
  try {
    std::optional<HttpResponse> r =
        config_.http_handler(plain, config_.websocket ? &state_ : nullptr);
    if (r) return std::move(*r);
  } catch (const std::exception& e) {
    spdlog::warn("HTTP {} {}: {}", plain.method, plain.target, e.what());
    return json_error(500, std::string("internal error: ") + e.what());
  }
  return json_error(404, "not found: " + plain.target);
}

void HttpSession::on_read(beast::error_code ec, size_t) {
  if (ec) {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return;
  }
  http::request<http::string_body> request = parser_->release();
  if (config_.websocket && websocket::is_upgrade(request) && request.target() == "/ws") {
    std::make_shared<WebsocketSession>(stream_.release_socket(), state_, config_.max_frame_bytes,
                                       config_.heartbeat_ms)
        ->run(std::move(request));
    return;
  }
  HttpResponse r = answer(request);
  // A refused upgrade ends the connection: its client waits for a 101, not for another request.
  const bool keep_alive = request.keep_alive() && !websocket::is_upgrade(request);
  response_ = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(r.status), request.version());
  response_->set(http::field::server, "webtune");
  response_->set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) response_->insert(name, value);
  response_->body() = std::move(r.body);
  response_->keep_alive(keep_alive);
  // A HEAD answer that already states its GET body's length (the agent page) keeps it.
  if (!(request.method() == http::verb::head && response_->has_content_length()))
    response_->prepare_payload();
  http::async_write(
      stream_, *response_,
      beast::bind_front_handler(&HttpSession::on_write, shared_from_this(), keep_alive));
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
