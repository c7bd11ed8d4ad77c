/// \file http_fetch.hpp
/// One HTTP(S) GET from the tracker a peer is connected to, over the same host, port and TLS
/// settings as its WebSocket (client_transport.hpp): native agents fetch model packages from the
/// tracker's `/models/<name>/` routes this way (docs/protocol.md, MODEL_JOBS.md).
///
/// A ws:// URL is fetched as http://, a wss:// one as https:// with the tracker certificate
/// verified exactly as the WebSocket's is (the CA file of set_tracker_ca_file() or
/// $WEBTUNE_CA_FILE, else the system store; host name checked; SNI sent). Synchronous, on an
/// io_context of its own: callers are worker threads (an agent's job thread), never the agent's
/// io_context thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "tracker/tracker_client.hpp"

namespace webtune::tracker {

/// A GET that did not give a 200 with a body within the limits. `status()` is the HTTP status
/// (0 when no response came: a connect, TLS or read error, a timeout, a body over the limit).
class HttpFetchError : public std::runtime_error {
 public:
  HttpFetchError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

/// GETs `target` (an absolute path, e.g. "/models/resnet18-gles/manifest.json", already
/// percent-encoded where needed) from the host and port of `tracker_url` (a ws:// or wss://
/// URL, TrackerUrl::parse). Returns the body of a 200 answer. The whole exchange (connect, TLS,
/// request, response) must end within `timeout`. Throws HttpFetchError naming the URL for a
/// status other than 200 (with the start of the body, which the tracker fills with its reason),
/// a body longer than `max_bytes`, a timeout, or a network or TLS error; std::invalid_argument
/// for a URL TrackerUrl::parse refuses or a target that does not start with '/'.
std::string http_get(const std::string& tracker_url, const std::string& target, size_t max_bytes,
                     std::chrono::milliseconds timeout);

}  // namespace webtune::tracker
