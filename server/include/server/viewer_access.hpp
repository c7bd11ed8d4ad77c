/// \file viewer_access.hpp
/// The viewer token check of the HTTP side: when the tracker has a viewer token, the API,
/// /metrics and the dashboard answer only requests that carry it.
///
/// A request carries the token in any of: an `Authorization: Bearer TOKEN` header (scrapers,
/// curl), a `token=TOKEN` query parameter (the link a person opens), or the `webtune_viewer`
/// cookie, which the dashboard page sets when it was opened with the query parameter so that
/// its scripts and API calls carry it too.
#pragma once

#include <string>
#include <string_view>

#include "server/url.hpp"
#include "tracker/http_types.hpp"

namespace webtune::server {

/// The cookie that carries the viewer token.
inline constexpr std::string_view kViewerCookie = "webtune_viewer";

/// True when `expected` is empty or the request carries it (see the file comment). The
/// comparison takes the same time wherever the strings differ.
bool viewer_allowed(const tracker::HttpRequest& request, const RequestTarget& target,
                    const std::string& expected);

/// The Set-Cookie value that stores `token` for the dashboard's later requests (HttpOnly,
/// SameSite=Strict, Path=/).
std::string viewer_cookie(const std::string& token);

}  // namespace webtune::server
