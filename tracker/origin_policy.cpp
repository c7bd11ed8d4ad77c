/// \file origin_policy.cpp
/// Host and Origin checks (see origin_policy.hpp for the attacks they stop).
#include "tracker/origin_policy.hpp"

#include <cctype>

#include "tracker/protocol.hpp"

namespace webtune::tracker {

namespace {

// "name" → "name:port"; "name:port" and "[v6]:port" stay; "[v6]" → "[v6]:port".
std::string with_port(std::string host, uint16_t port) {
  const bool bracketed = !host.empty() && host.front() == '[';
  const size_t close = host.find(']');
  const bool has_port =
      bracketed ? close != std::string::npos && close + 1 < host.size() && host[close + 1] == ':'
                : host.find(':') != std::string::npos;
  if (!has_port) host += ":" + std::to_string(port);
  return host;
}

std::string bracket_v6(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  const std::string h = ascii_lower(host);
  return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
}

bool is_wildcard_host(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

bool OriginPolicy::host_allowed(std::optional<std::string_view> host) const {
  if (!host) return true;  // HTTP/1.0 without Host: not what a browser sends
  const std::string h = ascii_lower(*host);
  if (is_wildcard_host(listen_host) && allowed_hosts.empty()) return true;
  std::vector<std::string> names = {"127.0.0.1", "localhost", "[::1]"};
  if (!is_wildcard_host(listen_host)) names.push_back(bracket_v6(ascii_lower(listen_host)));
  for (const std::string& extra : allowed_hosts) names.push_back(ascii_lower(extra));
  for (const std::string& name : names)
    if (h == with_port(name, port)) return true;
  return false;
}

bool OriginPolicy::origin_allowed(std::optional<std::string_view> origin,
                                  std::optional<std::string_view> host) const {
  if (!origin) return true;
  std::string o = ascii_lower(*origin);
  while (!o.empty() && o.back() == '/') o.pop_back();
  for (const std::string& allowed : allowed_origins) {
    std::string a = ascii_lower(allowed);
    while (!a.empty() && a.back() == '/') a.pop_back();
    if (o == a) return true;
  }
  // Same origin: the page this listener served, under a Host it answers.
  if (!host || !host_allowed(host)) return false;
  return o == std::string(tls ? "https://" : "http://") + ascii_lower(*host);
}

}  // namespace webtune::tracker
