/// \file viewer_access.cpp
/// Viewer token from header, query or cookie.
#include "server/viewer_access.hpp"

#include <algorithm>
#include <cctype>

#include "tracker/secret.hpp"

namespace webtune::server {

namespace {

// The tracker's comparison: constant time, so a timing side channel reveals nothing of the token.
bool same(std::string_view a, std::string_view b) {
  return tracker::token_equals(a, b);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

bool viewer_allowed(const tracker::HttpRequest& request, const RequestTarget& target,
                    const std::string& expected) {
  if (expected.empty()) return true;
  if (auto auth = request.header("authorization"); auth && auth->starts_with("Bearer "))
    if (same(trim(auth->substr(7)), expected)) return true;
  if (auto q = target.query.find("token"); q != target.query.end() && same(q->second, expected))
    return true;
  for (const auto& [name, value] : request.headers) {
    if (name != "cookie") continue;
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t semi = rest.find(';');
      const std::string_view pair = trim(rest.substr(0, semi));
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
      const size_t eq = pair.find('=');
      if (eq != std::string_view::npos && pair.substr(0, eq) == kViewerCookie) {
        auto decoded = percent_decode(pair.substr(eq + 1), false);
        if (decoded && same(*decoded, expected)) return true;
      }
    }
  }
  return false;
}

std::string viewer_cookie(const std::string& token) {
  std::string encoded;
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : token) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      encoded += static_cast<char>(c);
    } else {
      encoded += '%';
      encoded += hex[c >> 4];
      encoded += hex[c & 15];
    }
  }
  return std::string(kViewerCookie) + "=" + encoded + "; Path=/; HttpOnly; SameSite=Strict";
}

}  // namespace webtune::server
