/// \file http_fetch.cpp
/// A bounded HTTP(S) GET to the tracker (http_fetch.hpp): Beast's async operations on an
/// io_context of this call, so that one deadline (the tcp_stream's expiry, set once) covers
/// connect, TLS handshake, write and read together.
#include "tracker/http_fetch.hpp"

#include <functional>
#include <memory>
#include <optional>

#include "beast.hpp"
#include "client_transport.hpp"

namespace webtune::tracker {

namespace {

/// The URL as messages name it: http://host:port/target (https for wss).
std::string url_text(const TrackerUrl& url, const std::string& target) {
  return std::string(url.tls ? "https://" : "http://") + url.host + ":" + url.port + target;
}

/// What the async chain leaves behind.
struct Outcome {
  beast::error_code ec;
  std::string stage = "connect";
  std::optional<http::response_parser<http::string_body>> parser;
};

template <class Stream>
void exchange(net::io_context& ioc, Stream& stream, beast::tcp_stream& tcp,
              const tcp::resolver::results_type& endpoints,
              const http::request<http::empty_body>& request, Outcome& out,
              std::function<void(std::function<void(beast::error_code)>)> handshake) {
  beast::flat_buffer buffer;
  tcp.async_connect(endpoints, [&](beast::error_code ec, const tcp::endpoint&) {
    if (ec) {
      out.ec = ec;
      return;
    }
    out.stage = "TLS handshake";
    handshake([&](beast::error_code ec2) {
      if (ec2) {
        out.ec = ec2;
        return;
      }
      out.stage = "request";
      http::async_write(stream, request, [&](beast::error_code ec3, size_t) {
        if (ec3) {
          out.ec = ec3;
          return;
        }
        out.stage = "response";
        http::async_read(stream, buffer, *out.parser,
                         [&](beast::error_code ec4, size_t) { out.ec = ec4; });
      });
    });
  });
  ioc.run();
}

}  // namespace

std::string http_get(const std::string& tracker_url, const std::string& target, size_t max_bytes,
                     std::chrono::milliseconds timeout) {
  const TrackerUrl url = TrackerUrl::parse(tracker_url);
  if (target.empty() || target[0] != '/')
    throw std::invalid_argument("HTTP target '" + target + "' must start with '/'");
  const std::string where = url_text(url, target);

  net::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  const tcp::resolver::results_type endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) throw HttpFetchError(0, "GET " + where + ": cannot resolve the host: " + ec.message());

  http::request<http::empty_body> request{http::verb::get, target, 11};
  request.set(http::field::host, url.host + ":" + url.port);
  request.set(http::field::user_agent, "webtune-agent");
  request.keep_alive(false);

  Outcome out;
  out.parser.emplace();
  out.parser->body_limit(max_bytes);
  // Headers are small; a tracker never sends more than this.
  out.parser->header_limit(64 * 1024);

  std::shared_ptr<ssl::context> tls_context;
  if (url.tls) {
    tls_context = make_client_tls_context();
    TlsStream stream(ioc, *tls_context);
    SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str());
    stream.set_verify_callback(ssl::host_name_verification(url.host));
    beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
    tcp.expires_after(timeout);
    exchange(ioc, stream, tcp, endpoints, request, out,
             [&stream](auto done) { stream.async_handshake(ssl::stream_base::client, done); });
  } else {
    PlainStream stream(ioc);
    stream.expires_after(timeout);
    exchange(ioc, stream, stream, endpoints, request, out, [](auto done) { done({}); });
  }

  if (out.ec == http::error::body_limit)
    throw HttpFetchError(0, "GET " + where + ": the body is longer than the limit of " +
                                std::to_string(max_bytes) + " bytes");
  if (out.ec == beast::error::timeout)
    throw HttpFetchError(0, "GET " + where + ": no complete answer within " +
                                std::to_string(timeout.count()) + " ms (at the " + out.stage + ")");
  if (out.ec)
    throw HttpFetchError(0, "GET " + where + ": " + out.stage + " failed: " + out.ec.message());
  http::response<http::string_body> response = out.parser->release();
  const int status = static_cast<int>(response.result_int());
  if (status != 200) {
    std::string reason = response.body().substr(0, 200);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    throw HttpFetchError(status, "GET " + where + ": HTTP " + std::to_string(status) +
                                     (reason.empty() ? "" : ": " + reason));
  }
  return std::move(response.body());
}

}  // namespace webtune::tracker
