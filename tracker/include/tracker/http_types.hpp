/// \file http_types.hpp
/// Plain HTTP request and response values, and the handler hook through which the tracker's
/// port serves more than the WebSocket on /ws (the HTTP API, /metrics and the dashboard of the
/// server/ library). No Beast here: handlers are testable without sockets, and only the tracker's
/// few network translation units pay for Beast's headers.
#pragma once

#include <functional>
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

/// One HTTP response; the session adds Content-Length, and keeps the connection alive when the
/// request asked for it.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// Extra header fields, e.g. {"Cache-Control", "no-store"}.
  std::vector<std::pair<std::string, std::string>> headers;
};

/// Answers a request that is not the WebSocket upgrade on /ws; nullopt means "not mine" and gets
/// the tracker's 404. Runs on the tracker's single io_context thread, so it may read `state`
/// (nullptr when the listener serves records alone, without a tracker) but must not block long.
/// An exception becomes a 500 with a JSON error.
using HttpHandler =
    std::function<std::optional<HttpResponse>(const HttpRequest&, const TrackerState* state)>;

}  // namespace webtune::tracker
