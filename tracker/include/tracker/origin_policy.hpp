/// \file origin_policy.hpp
/// Which `Host` headers and `Origin`s the tracker's port answers.
///
/// Two browser attacks reach a server on loopback: a page of any site can open a WebSocket to
/// 127.0.0.1 (cross-site WebSocket hijacking: the browser sends that site's `Origin`), and a
/// site whose name the attacker re-points at 127.0.0.1 can read the HTTP API as "same origin"
/// (DNS rebinding: the browser sends the attacker's name in `Host`). So:
///  - `Host` must name this listener: the listen address, `127.0.0.1`, `localhost` or `[::1]`,
///    or an entry of `allowed_hosts`, with this port (an entry without a port gets this port).
///    A listener on a wildcard address (0.0.0.0, ::) cannot know its public names: it accepts
///    any `Host` unless `allowed_hosts` is set (it needs tokens anyway, see docs/protocol.md).
///  - `Origin`, when a browser sends one, must be this listener's own origin
///    (`http(s)://` + an allowed `Host`, the page the tracker itself served) or an entry of
///    `allowed_origins`. Requests without `Origin` (native agents, tuners, curl) pass: they are
///    not a browser acting for another site, and tokens govern them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace webtune::tracker {

struct OriginPolicy {
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;
  bool tls = false;                          ///< the listener speaks https/wss
  std::vector<std::string> allowed_hosts;    ///< extra Host values, e.g. "farm.example.org"
  std::vector<std::string> allowed_origins;  ///< extra origins, e.g. "https://lab.example.org"

  /// Whether a request with this `Host` header (absent: nullopt) is answered.
  bool host_allowed(std::optional<std::string_view> host) const;
  /// Whether a request with this `Origin` header (absent: nullopt) and `Host` is answered.
  bool origin_allowed(std::optional<std::string_view> origin,
                      std::optional<std::string_view> host) const;
};

/// True for 127.0.0.0/8, ::1 and "localhost" (the addresses only this machine reaches).
bool is_loopback_host(std::string_view host);
/// True for the wildcard addresses 0.0.0.0, :: and the empty host.
bool is_wildcard_host(std::string_view host);

}  // namespace webtune::tracker
