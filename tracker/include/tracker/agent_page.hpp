/// \file agent_page.hpp
/// The browser agent's page and its ES modules, served by the tracker under `/agent`, and built
/// model packages under `/models/<name>/`.
///
/// Plain request → response logic without networking (the Beast session calls it and copies the
/// answer into its own response), so that path resolution is unit-tested on its own.
/// Every answer carries `Cross-Origin-Opener-Policy: same-origin` and
/// `Cross-Origin-Embedder-Policy: require-corp`: the page is cross-origin isolated, which gives
/// it 5 µs `performance.now()` instead of 100 µs.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace webtune::tracker {

/// An HTTP answer: status code, headers (name, value) and body.
struct AgentPageResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// True when `target` (the request target, query included) is one this module answers:
/// `/agent`, `/agent/` or anything under `/agent/`, and anything under `/runtime/` (the kernel
/// runners the agent's executors import as `../runtime/*.mjs`, shared with the model runtime).
bool is_agent_page_target(std::string_view target);

/// Answers GET or HEAD (`head` true: no body, but the length of the GET body in
/// Content-Length) of an agent page target from the files under `root`:
///   `/agent`, `/agent/` → `index.html`;  `/agent/<path>` → `<root>/<path>`;
///   `/runtime/<path>` → `<root>/../runtime/<path>` (the repository's runtime/ beside
///   browser-agent/).
/// The query string is ignored (the page reads it in the browser). Percent-escapes are decoded
/// once; a path with a `..` or `.`-prefixed segment, a backslash, a NUL, an empty segment, or
/// that resolves (through symbolic links) outside `root` is refused with 404, as is a missing
/// file. Content types by extension (.html, .mjs/.js, .css, .json, .wasm, .svg, .png, .ico;
/// anything else application/octet-stream). `method_ok` false gives 405.
AgentPageResponse agent_page_response(std::string_view target, const std::string& root,
                                      bool method_ok = true, bool head = false);

/// True when `target` is `/models` or lies under `/models/`.
bool is_model_page_target(std::string_view target);

/// Answers GET or HEAD of a model page (docs/package.md: a built web package is a page a person
/// can open): `/models/<name>/<path>` → `<models_root>/<name>/<path>`, `/models/<name>/` →
/// its `index.html`, `/models/<name>` → 308 to `/models/<name>/` (the page's relative URLs
/// need the slash). The same path rules, content types and isolation headers as
/// agent_page_response (cross-origin isolation gives the wasm runtime its threads). An empty
/// `models_root` (the tracker was started without --models) answers 404 saying so.
AgentPageResponse model_page_response(std::string_view target, const std::string& models_root,
                                      bool method_ok = true, bool head = false);

/// The directory the tracker serves the agent page from: $WEBTUNE_AGENT_ROOT when set, else the
/// `browser-agent/` directory of the source tree this program was built from.
std::string default_agent_root();

}  // namespace webtune::tracker
