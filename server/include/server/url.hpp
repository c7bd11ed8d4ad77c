/// \file url.hpp
/// Request targets: the path and the query string of "/api/jobs/3/trials?limit=50&offset=100",
/// percent-decoded (RFC 3986 section 2.1; '+' is a space in query values, as HTML forms send).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace webtune::server {

/// A request target split and decoded.
struct RequestTarget {
  std::string path;                          ///< decoded, starts with '/'
  std::map<std::string, std::string> query;  ///< decoded; a repeated name keeps its first value
};

/// Decodes %XX escapes (and '+' as a space when `plus_is_space`). nullopt when an escape is
/// malformed ("%4", "%zz") or decodes to a NUL byte, which no path or value may hold.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

/// Splits and decodes a request target. nullopt when it does not start with '/' (absolute-form
/// and authority-form targets are not served) or holds a malformed escape.
std::optional<RequestTarget> parse_target(std::string_view target);

}  // namespace webtune::server
