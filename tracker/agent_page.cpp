/// \file agent_page.cpp
/// Safe static files for the browser agent page; see agent_page.hpp.
#include "tracker/agent_page.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef WEBTUNE_AGENT_ROOT
#define WEBTUNE_AGENT_ROOT "browser-agent"
#endif

namespace webtune::tracker {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "/agent";
/// The kernel runners the agent's executors import (`../runtime/x.mjs` from /agent/ resolves to
/// /runtime/x.mjs), served from the `runtime/` directory beside the agent root.
constexpr std::string_view kRuntimePrefix = "/runtime";

/// True when `path` is `prefix` or lies under `prefix/`.
bool under(std::string_view path, std::string_view prefix) {
  if (path.substr(0, prefix.size()) != prefix) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Decodes %XX escapes once; false on a malformed escape.
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

/// True when every segment of the decoded relative path is a plain name: no "", ".", "..",
/// hidden names, backslashes or control characters. A '%' left after decoding is refused too,
/// so that a double-encoded "%252e%252e" can never become ".." anywhere later.
bool safe_relative_path(const std::string& path) {
  if (path.empty()) return false;
  size_t begin = 0;
  while (begin <= path.size()) {
    const size_t end = std::min(path.find('/', begin), path.size());
    const std::string_view segment(path.data() + begin, end - begin);
    if (segment.empty() || segment.front() == '.') return false;
    for (char c : segment) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f || c == '\\' || c == '%' || c == ':') return false;
    }
    begin = end + 1;
  }
  return true;
}

std::string content_type(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".mjs" || ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json") return "application/json";
  if (ext == ".wasm") return "application/wasm";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".txt" || ext == ".md") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

AgentPageResponse error_response(int status, std::string message) {
  AgentPageResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  // Messages are fixed strings below: nothing from the request is echoed.
  r.body = R"({"error":")" + message + R"("})";
  return r;
}

void add_isolation_headers(AgentPageResponse& r) {
  r.headers.emplace_back("Cross-Origin-Opener-Policy", "same-origin");
  r.headers.emplace_back("Cross-Origin-Embedder-Policy", "require-corp");
  r.headers.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  // Sources change while developing; a farm must never run a stale agent.
  r.headers.emplace_back("Cache-Control", "no-cache");
}

}  // namespace

bool is_agent_page_target(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return under(path, kPrefix) || under(path, kRuntimePrefix);
}

AgentPageResponse agent_page_response(std::string_view target, const std::string& root,
                                      bool method_ok, bool head) {
  AgentPageResponse r;
  if (!is_agent_page_target(target)) {
    r = error_response(404, "not found");
  } else if (!method_ok) {
    r = error_response(405, "the agent page answers GET and HEAD only");
    r.headers.emplace_back("Allow", "GET, HEAD");
  } else {
    std::string_view path = target.substr(0, target.find('?'));
    path = path.substr(0, path.find('#'));
    const bool runtime = under(path, kRuntimePrefix);
    std::string_view rest = path.substr(runtime ? kRuntimePrefix.size() : kPrefix.size());
    if (!rest.empty()) rest.remove_prefix(1);  // the '/'
    std::string relative;
    if (runtime && rest.empty()) {
      relative.clear();  // no index page for the runtime
    } else if (rest.empty()) {
      relative = "index.html";
    } else if (!percent_decode(rest, relative)) {
      relative.clear();
    }
    std::error_code ec;
    const fs::path base =
        fs::weakly_canonical(runtime ? fs::path(root) / ".." / "runtime" : fs::path(root), ec);
    fs::path file;
    bool found = false;
    if (!ec && safe_relative_path(relative)) {
      file = fs::weakly_canonical(base / relative, ec);
      // The canonical file must still lie under the canonical root (a symbolic link inside the
      // tree must not lead out of it).
      const auto [root_end, unused] = std::mismatch(base.begin(), base.end(), file.begin());
      found = !ec && root_end == base.end() && fs::is_regular_file(file, ec);
    }
    if (!found) {
      r = error_response(404, "no such file of the agent page");
    } else {
      std::ifstream in(file, std::ios::binary);
      std::ostringstream content;
      content << in.rdbuf();
      if (!in && !in.eof()) {
        r = error_response(500, "cannot read a file of the agent page");
      } else {
        r.status = 200;
        r.headers.emplace_back("Content-Type", content_type(file));
        r.body = content.str();
      }
    }
  }
  add_isolation_headers(r);
  if (head) {
    r.headers.emplace_back("Content-Length", std::to_string(r.body.size()));
    r.body.clear();
  }
  return r;
}

std::string default_agent_root() {
  if (const char* env = std::getenv("WEBTUNE_AGENT_ROOT"); env != nullptr && *env != '\0')
    return env;
  return WEBTUNE_AGENT_ROOT;
}

}  // namespace webtune::tracker
