/// \file http_types.hpp
/// Plain HTTP request and response values, and the handler hook through which the tracker's
/// port serves more than the WebSocket on /ws (the HTTP API, /metrics and the dashboard of the
/// server/ library). No Beast here: handlers are testable without sockets, and only the tracker's
/// few network translation units pay for Beast's headers.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace webtune::tracker {

class TrackerState;

/// One HTTP request as a handler sees it.
struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string target;  ///< the raw request target: path and query, still percent-encoded
  /// Header fields in arrival order; names in lower case.
  std::vector<std::pair<std::string, std::string>> headers;

  /// The value of the first header named `name` (lower case), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return std::string_view(v);
    return std::nullopt;
  }
};

/// A response that never ends: server-sent events (the HTML Living Standard's
/// "text/event-stream"). The session sends the status and headers, then calls `poll` at once and
/// every `interval`, on the tracker's thread, and writes what it returns as it is (already in
/// the event-stream format; empty: nothing new). After `heartbeat` without data it writes a
/// comment line (": \n"), so a peer that went away is noticed. The stream ends when the peer
/// goes away, a write fails, or `poll` returns nullopt (the connection is then closed).
struct EventStream {
  std::chrono::milliseconds interval{250};
  std::chrono::milliseconds heartbeat{15000};
  std::function<std::optional<std::string>()> poll;
};

/// One HTTP response; the session adds Content-Length, and keeps the connection alive when the
/// request asked for it. With `stream` set the body is ignored and the answer is that stream
/// (Content-Type text/event-stream, no Content-Length, the connection closed at its end).
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// Extra header fields, e.g. {"Cache-Control", "no-store"}.
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<EventStream> stream;
};

/// Answers a request that is not the WebSocket upgrade on /ws; nullopt means "not mine" and gets
/// the tracker's 404. Runs on the tracker's single io_context thread, so it may read `state`
/// (nullptr when the listener serves records alone, without a tracker) but must not block long.
/// An exception becomes a 500 with a JSON error.
using HttpHandler =
    std::function<std::optional<HttpResponse>(const HttpRequest&, const TrackerState* state)>;

}  // namespace webtune::tracker
