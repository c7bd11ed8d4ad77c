/// \file client_transport.hpp
/// The client side of a tracker connection (tuners, `tracker status`, native agents): a
/// WebSocket over plain TCP for ws:// URLs or over TLS for wss:// URLs, opened the same way by
/// TrackerClient and AgentConnection.
///
/// TLS peers verify the tracker's certificate and host name, against the CA file given to
/// set_tracker_ca_file() or in $WEBTUNE_CA_FILE (a self-signed tracker certificate, or a private
/// CA) and the system's CA store otherwise; an unverified tracker is never talked to.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "beast.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune::tracker {

using PlainWebsocket = websocket::stream<PlainStream>;
using TlsWebsocket = websocket::stream<TlsStream>;

/// The TLS context of tracker clients (see the file comment). Throws std::runtime_error when the
/// CA file cannot be loaded.
std::shared_ptr<ssl::context> make_client_tls_context();

/// One client WebSocket, plain or TLS by the URL's scheme.
class ClientWebsocket {
 public:
  ClientWebsocket(net::any_io_executor executor, const TrackerUrl& url);

  /// Calls `f` with the underlying websocket::stream (PlainWebsocket& or TlsWebsocket&).
  template <class F>
  decltype(auto) visit(F&& f) {
    if (tls_) return f(*tls_);
    return f(*plain_);
  }
  /// The TCP layer (timeouts, close).
  beast::tcp_stream& tcp() {
    return tls_ ? beast::get_lowest_layer(*tls_) : beast::get_lowest_layer(*plain_);
  }

  /// Resolves nothing: connects to `endpoints`, completes TLS (wss://) and the WebSocket
  /// handshake within `timeout`, then calls `done` with the first error (or success).
  void async_open(const tcp::resolver::results_type& endpoints, std::chrono::milliseconds timeout,
                  std::function<void(beast::error_code, std::string stage)> done);

 private:
  TrackerUrl url_;
  std::shared_ptr<ssl::context> tls_context_;
  std::unique_ptr<PlainWebsocket> plain_;
  std::unique_ptr<TlsWebsocket> tls_;
};

}  // namespace webtune::tracker
