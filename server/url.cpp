/// \file url.cpp
/// Percent-decoding and the split of a request target into path and query.
#include "server/url.hpp"

namespace webtune::server {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out.push_back(c);
  }
  return out;
}

std::optional<RequestTarget> parse_target(std::string_view target) {
  if (target.empty() || target.front() != '/') return std::nullopt;
  RequestTarget out;
  const size_t question = target.find('?');
  std::string_view path = target.substr(0, question);
  // A fragment never reaches a server, but a hand-written client could send one: drop it.
  if (const size_t hash = path.find('#'); hash != std::string_view::npos)
    path = path.substr(0, hash);
  auto decoded = percent_decode(path, false);
  if (!decoded) return std::nullopt;
  out.path = std::move(*decoded);
  if (question == std::string_view::npos) return out;
  std::string_view query = target.substr(question + 1);
  if (const size_t hash = query.find('#'); hash != std::string_view::npos)
    query = query.substr(0, hash);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    auto name = percent_decode(pair.substr(0, eq), true);
    auto value = percent_decode(
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
    if (!name || !value) return std::nullopt;
    out.query.emplace(std::move(*name), std::move(*value));
  }
  return out;
}

}  // namespace webtune::server
