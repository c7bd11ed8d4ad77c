/// \file http_session.cpp
/// Reads HTTP requests (over plain TCP or TLS); checks Host and Origin; hands WebSocket upgrades
/// to WebsocketSession and the rest to the configured HttpHandler.
#include "http_session.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <cctype>

#include "tracker/agent_page.hpp"
#include "tracker/protocol.hpp"
#include "tracker/secret.hpp"
#include "websocket_session.hpp"

namespace webtune::tracker {

namespace {

HttpResponse json_error(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = R"({"error":)" + boost::json::serialize(boost::json::string(message)) + "}";
  return r;
}

std::optional<std::string_view> header(const http::request<http::string_body>& request,
                                       http::field field) {
  auto it = request.find(field);
  if (it == request.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

}  // namespace

template <class Stream>
HttpSession<Stream>::HttpSession(tcp::socket&& socket, ListenerContext& context,
                                 ConnectionSlot slot)
    : stream_([&]() -> Stream {
        if constexpr (std::is_same_v<Stream, TlsStream>)
          return TlsStream(std::move(socket), *context.tls);
        else
          return PlainStream(std::move(socket));
      }()),
      context_(context),
      slot_(std::move(slot)) {}

template <class Stream>
void HttpSession<Stream>::run() {
  auto self = this->shared_from_this();
  net::dispatch(stream_.get_executor(), [self] {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      // A peer that opens TCP and says nothing holds a socket: bound the TLS handshake too.
      beast::get_lowest_layer(self->stream_).expires_after(std::chrono::seconds(10));
      self->stream_.async_handshake(ssl::stream_base::server, [self](beast::error_code ec) {
        if (ec) {
          spdlog::debug("TLS handshake failed: {}", ec.message());
          return;
        }
        self->do_read();
      });
    } else {
      self->do_read();
    }
  });
}

template <class Stream>
void HttpSession<Stream>::do_read() {
  parser_ = std::make_unique<http::request_parser<http::string_body>>();
  parser_->header_limit(16 * 1024);
  parser_->body_limit(1 << 20);
  beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(30));
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&HttpSession::on_read, this->shared_from_this()));
}

template <class Stream>
std::optional<HttpResponse> HttpSession<Stream>::refuse_foreign(
    const http::request<http::string_body>& request) {
  const auto host = header(request, http::field::host);
  if (!context_.origins.host_allowed(host)) {
    context_.state.note_refused_origin();
    spdlog::warn("refused a request for Host '{}' (not this tracker's; see allowed_hosts)",
                 truncate_utf8(host.value_or(""), 64));
    return json_error(403, "Host '" + truncate_utf8(host.value_or(""), 64) +
                               "' is not one this tracker answers (allowed_hosts)");
  }
  const auto origin = header(request, http::field::origin);
  if (!context_.origins.origin_allowed(origin, host)) {
    context_.state.note_refused_origin();
    spdlog::warn("refused a request from Origin '{}' (see allowed_origins)",
                 truncate_utf8(origin.value_or(""), 64));
    return json_error(403, "Origin '" + truncate_utf8(origin.value_or(""), 64) +
                               "' may not use this tracker (allowed_origins)");
  }
  return std::nullopt;
}

namespace {

/// A static file answer (agent_page.hpp) as the session's HttpResponse.
HttpResponse static_answer(AgentPageResponse page) {
  HttpResponse r;
  r.status = page.status;
  r.body = std::move(page.body);
  for (auto& [name, value] : page.headers) {
    if (ascii_lower(name) == "content-type")
      r.content_type = std::move(value);
    else
      r.headers.emplace_back(std::move(name), std::move(value));
  }
  return r;
}

}  // namespace

template <class Stream>
HttpResponse HttpSession<Stream>::answer(const http::request<http::string_body>& request) {
  const ListenerContext& c = context_;
  if (c.config.websocket && is_agent_page_target(request.target())) {
    // The browser agent's page and modules (agent_page.hpp); HEAD keeps GET's Content-Length.
    const bool head = request.method() == http::verb::head;
    AgentPageResponse page = agent_page_response(request.target(), c.config.agent_root,
                                                 head || request.method() == http::verb::get, head);
    return static_answer(std::move(page));
  }
  if (c.config.websocket && is_model_page_target(request.target())) {
    // Built model packages (docs/package.md), pages a person can open on their own device.
    const bool head = request.method() == http::verb::head;
    AgentPageResponse page = model_page_response(request.target(), c.config.models_root,
                                                 head || request.method() == http::verb::get, head);
    return static_answer(std::move(page));
  }
  if (!c.config.http_handler)
    return json_error(404, "not found: the tracker speaks WebSocket on /ws");
  HttpRequest plain;
  plain.method = std::string(request.method_string());
  plain.target = std::string(request.target());
  for (const auto& field : request)
    plain.headers.emplace_back(ascii_lower(field.name_string()), std::string(field.value()));
  try {
    std::optional<HttpResponse> r =
        c.config.http_handler(plain, c.config.websocket ? &c.state : nullptr);
    if (r) return std::move(*r);
  } catch (const std::exception& e) {
    // The target may carry ?token=...: never write it to a log.
    spdlog::warn("HTTP {} {}: {}", plain.method, redact_secrets(plain.target), e.what());
    return json_error(500, std::string("internal error: ") + e.what());
  }
  return json_error(404, "not found: " + redact_secrets(plain.target));
}

template <class Stream>
void HttpSession<Stream>::on_read(beast::error_code ec, size_t) {
  if (ec) {
    shutdown();
    return;
  }
  http::request<http::string_body> request = parser_->release();
  std::optional<HttpResponse> refused = refuse_foreign(request);
  if (!refused && context_.config.websocket && websocket::is_upgrade(request) &&
      request.target() == "/ws") {
    beast::get_lowest_layer(stream_).expires_never();  // the WebSocket's own timeouts take over
    std::make_shared<WebsocketSession<Stream>>(std::move(stream_), context_.state,
                                               context_.config.max_frame_bytes,
                                               context_.config.heartbeat_ms, std::move(slot_))
        ->run(std::move(request));
    return;
  }
  HttpResponse r = refused ? std::move(*refused) : answer(request);
  if (r.stream && r.stream->poll && r.status == 200 && request.method() == http::verb::get) {
    start_stream(std::move(r), request.version());
    return;
  }
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
      beast::bind_front_handler(&HttpSession::on_write, this->shared_from_this(), keep_alive));
}

template <class Stream>
void HttpSession<Stream>::on_write(bool keep_alive, beast::error_code ec, size_t) {
  if (ec) return;
  if (!keep_alive) {
    shutdown();
    return;
  }
  do_read();
}

template <class Stream>
void HttpSession<Stream>::start_stream(HttpResponse r, unsigned version) {
  events_ = std::move(r.stream);
  events_timer_ = std::make_unique<net::steady_timer>(stream_.get_executor());
  // The headers by hand: Beast's serializer wants a body type with a known end, and this body
  // has none (HTTP/1.1 ends it with the connection: no Content-Length, no chunking).
  std::string head = std::string(version >= 11 ? "HTTP/1.1" : "HTTP/1.0") +
                     " 200 OK\r\nServer: webtune\r\nContent-Type: text/event-stream\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\n";
  for (const auto& [name, value] : r.headers)
    if (ascii_lower(name) != "cache-control") head += name + ": " + value + "\r\n";
  head += "\r\n";
  beast::get_lowest_layer(stream_).expires_never();  // the heartbeat finds a dead peer
  try {
    if (std::optional<std::string> first = events_->poll()) head += *first;
  } catch (const std::exception& e) {
    spdlog::warn("event stream: {}", e.what());  // the next tick tries again, or ends it
  }
  stream_write(std::move(head));
  stream_watch();
}

template <class Stream>
void HttpSession<Stream>::stream_watch() {
  // The peer sends nothing more; a read that ends says it went away (a closed tab), so the
  // stream stops at once instead of at the next heartbeat.
  auto buffer = std::make_shared<std::array<char, 256>>();
  stream_.async_read_some(net::buffer(*buffer),
                          [self = this->shared_from_this(), buffer](beast::error_code ec, size_t) {
                            if (!ec) {
                              self->stream_watch();
                              return;
                            }
                            self->events_closed_ = true;
                            self->events_timer_->cancel();
                          });
}

template <class Stream>
void HttpSession<Stream>::stream_write(std::string text) {
  events_out_ = std::make_shared<std::string>(std::move(text));
  events_last_write_ = std::chrono::steady_clock::now();
  net::async_write(stream_, net::buffer(*events_out_),
                   [self = this->shared_from_this()](beast::error_code ec, size_t) {
                     if (ec) return;  // the peer went away: the session ends here
                     self->events_timer_->expires_after(self->events_->interval);
                     self->events_timer_->async_wait([self](beast::error_code wait_ec) {
                       if (!wait_ec) self->stream_tick();
                     });
                   });
}

template <class Stream>
void HttpSession<Stream>::stream_tick() {
  if (events_closed_) return;
  std::optional<std::string> next;
  try {
    next = events_->poll();
  } catch (const std::exception& e) {
    // A busy or locked file now and then: nothing this time, the next tick tries again.
    spdlog::debug("event stream: {}", e.what());
    next = std::string();
  }
  if (!next) {
    shutdown();
    return;
  }
  if (next->empty() && std::chrono::steady_clock::now() - events_last_write_ >= events_->heartbeat)
    *next = ": \n\n";
  if (next->empty()) {
    events_timer_->expires_after(events_->interval);
    events_timer_->async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) self->stream_tick();
    });
    return;
  }
  stream_write(std::move(*next));
}

template <class Stream>
void HttpSession<Stream>::shutdown() {
  beast::error_code ignored;
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(5));
    stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
  } else {
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }
}

template class HttpSession<PlainStream>;
template class HttpSession<TlsStream>;

void start_session(tcp::socket&& socket, ListenerContext& context, ConnectionSlot slot) {
  if (context.tls)
    std::make_shared<HttpSession<TlsStream>>(std::move(socket), context, std::move(slot))->run();
  else
    std::make_shared<HttpSession<PlainStream>>(std::move(socket), context, std::move(slot))->run();
}

}  // namespace webtune::tracker
