/// \file client_transport.cpp
/// Opening a client WebSocket to the tracker over plain TCP or verified TLS.
#include "client_transport.hpp"

#include <cstdlib>

namespace webtune::tracker {

namespace {
std::string& ca_file_setting() {
  static std::string path;
  return path;
}
}  // namespace

void set_tracker_ca_file(const std::string& path) {
  ca_file_setting() = path;
}

std::shared_ptr<ssl::context> make_client_tls_context() {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  beast::error_code ec;
  std::string ca = ca_file_setting();
  if (ca.empty())
    if (const char* env = std::getenv("WEBTUNE_CA_FILE")) ca = env;
  if (!ca.empty()) {
    context->load_verify_file(ca, ec);
    if (ec) throw std::runtime_error("cannot load the CA file '" + ca + "': " + ec.message());
  } else {
    context->set_default_verify_paths(ec);
  }
  context->set_verify_mode(ssl::verify_peer);
  return context;
}

ClientWebsocket::ClientWebsocket(net::any_io_executor executor, const TrackerUrl& url) : url_(url) {
  if (url.tls) {
    tls_context_ = make_client_tls_context();
    tls_ = std::make_unique<TlsWebsocket>(executor, *tls_context_);
    // SNI, and the certificate must name the host the URL names.
    SSL_set_tlsext_host_name(tls_->next_layer().native_handle(), url.host.c_str());
    tls_->next_layer().set_verify_callback(ssl::host_name_verification(url.host));
  } else {
    plain_ = std::make_unique<PlainWebsocket>(executor);
  }
}

void ClientWebsocket::async_open(const tcp::resolver::results_type& endpoints,
                                 std::chrono::milliseconds timeout,
                                 std::function<void(beast::error_code, std::string)> done) {
  tcp().expires_after(timeout);
  auto handshake = [this, done](beast::error_code ec) {
    if (ec) return done(ec, "TLS handshake");
    visit([&](auto& ws) {
      beast::get_lowest_layer(ws).expires_never();
      ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
      ws.async_handshake(url_.host + ":" + url_.port, url_.path,
                         [done](beast::error_code ec2) { done(ec2, "WebSocket handshake"); });
    });
  };
  tcp().async_connect(endpoints,
                      [this, done, handshake](beast::error_code ec, const tcp::endpoint&) {
                        if (ec) return done(ec, "connect");
                        beast::error_code ignored;
                        tcp().socket().set_option(tcp::no_delay(true), ignored);
                        if (tls_)
                          tls_->next_layer().async_handshake(ssl::stream_base::client, handshake);
                        else
                          handshake({});
                      });
}

}  // namespace webtune::tracker
