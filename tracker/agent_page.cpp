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
constexpr std::string_view kModelsPrefix = "/models";
/// The kernel runners the agent's executors import (`../runtime/x.mjs` from /agent/ resolves to
/// /runtime/x.mjs), served from the `runtime/` directory beside the agent root.
constexpr std::string_view kRuntimePrefix = "/runtime";

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

AgentPageResponse error_response(int status, const std::string& message) {
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

namespace {

/// Whether `target`'s path is `prefix` itself or lies under `prefix/`.
bool under_prefix(std::string_view target, std::string_view prefix) {
  const std::string_view path = target.substr(0, target.find('?'));
  if (path.substr(0, prefix.size()) != prefix) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

/// The file `relative` (percent-encoded, "" = index.html) of the tree at `root`, as an answer.
AgentPageResponse tree_file_response(std::string_view encoded, const std::string& root,
                                     std::string_view what) {
  std::string relative;
  if (encoded.empty()) {
    relative = "index.html";
  } else if (!percent_decode(encoded, relative)) {
    relative.clear();
  }
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::path(root), ec);
  fs::path file;
  bool found = false;
  if (!root.empty() && !ec && safe_relative_path(relative)) {
    file = fs::weakly_canonical(base / relative, ec);
    // The canonical file must still lie under the canonical root (a symbolic link inside the
    // tree must not lead out of it).
    const auto [root_end, unused] = std::mismatch(base.begin(), base.end(), file.begin());
    found = !ec && root_end == base.end() && fs::is_regular_file(file, ec);
  }
  if (!found) return error_response(404, "no such file of the " + std::string(what));
  std::ifstream in(file, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  if (!in && !in.eof())
    return error_response(500, "cannot read a file of the " + std::string(what));
  AgentPageResponse r;
  r.status = 200;
  r.headers.emplace_back("Content-Type", content_type(file));
  r.body = content.str();
  return r;
}

/// The path part of `target` after `prefix` and its '/', fragment and query removed.
std::string_view rest_of(std::string_view target, std::string_view prefix) {
  std::string_view path = target.substr(0, target.find('?'));
  path = path.substr(0, path.find('#'));
  std::string_view rest = path.substr(prefix.size());
  if (!rest.empty()) rest.remove_prefix(1);  // the '/'
  return rest;
}

void finish(AgentPageResponse& r, bool head) {
  add_isolation_headers(r);
  if (head) {
    r.headers.emplace_back("Content-Length", std::to_string(r.body.size()));
    r.body.clear();
  }
}

}  // namespace

bool is_agent_page_target(std::string_view target) {
  return under_prefix(target, kPrefix) || under_prefix(target, kRuntimePrefix);
}

AgentPageResponse agent_page_response(std::string_view target, const std::string& root,
                                      bool method_ok, bool head) {
  AgentPageResponse r;
  if (!is_agent_page_target(target)) {
    r = error_response(404, "not found");
  } else if (!method_ok) {
    r = error_response(405, "the agent page answers GET and HEAD only");
    r.headers.emplace_back("Allow", "GET, HEAD");
  } else if (under_prefix(target, kRuntimePrefix)) {
    const std::string_view rest = rest_of(target, kRuntimePrefix);
    // No index page for the runtime: only its modules.
    r = rest.empty()
            ? error_response(404, "no such file of the agent page")
            : tree_file_response(rest, (fs::path(root) / ".." / "runtime").string(), "agent page");
  } else {
    r = tree_file_response(rest_of(target, kPrefix), root, "agent page");
  }
  finish(r, head);
  return r;
}

bool is_model_page_target(std::string_view target) {
  return under_prefix(target, kModelsPrefix);
}

AgentPageResponse model_page_response(std::string_view target, const std::string& models_root,
                                      bool method_ok, bool head) {
  AgentPageResponse r;
  const std::string_view rest = rest_of(target, kModelsPrefix);
  const size_t slash = rest.find('/');
  if (!is_model_page_target(target)) {
    r = error_response(404, "not found");
  } else if (!method_ok) {
    r = error_response(405, "model pages answer GET and HEAD only");
    r.headers.emplace_back("Allow", "GET, HEAD");
  } else if (models_root.empty()) {
    r = error_response(404, "this tracker serves no models (start it with --models DIR)");
  } else if (rest.empty() || slash == std::string_view::npos) {
    // "/models" or "/models/<name>": the page's relative URLs (./model.mjs) need the slash.
    std::string name;
    if (rest.empty() || !percent_decode(rest, name) || !safe_relative_path(name) ||
        name.find('/') != std::string::npos) {
      r = error_response(404, "no such model: ask for /models/<name>/");
    } else {
      r.status = 308;
      r.headers.emplace_back("Location",
                             std::string(kModelsPrefix) + "/" + std::string(rest) + "/");
      r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
      r.body = "the model page is at the Location above\n";
    }
  } else {
    std::string name;
    if (!percent_decode(rest.substr(0, slash), name) || !safe_relative_path(name) ||
        name.find('/') != std::string::npos) {
      r = error_response(404, "no such model");
    } else {
      r = tree_file_response(rest.substr(slash + 1), (fs::path(models_root) / name).string(),
                             "model's package");
    }
  }
  finish(r, head);
  return r;
}

std::string default_agent_root() {
  if (const char* env = std::getenv("WEBTUNE_AGENT_ROOT"); env != nullptr && *env != '\0')
    return env;
  return WEBTUNE_AGENT_ROOT;
}

}  // namespace webtune::tracker
