/// \file static_files.cpp
/// Safe path resolution under the static root, and reading the files.
#include "server/static_files.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

namespace webtune::server {

namespace fs = std::filesystem;

StaticFiles::StaticFiles(fs::path root) : root_(std::move(root)) {}

std::optional<fs::path> StaticFiles::resolve(std::string_view path) const {
  if (path.empty() || path.front() != '/') return std::nullopt;
  if (path == "/") path = "/index.html";
  if (path.find('\\') != std::string_view::npos || path.find('\0') != std::string_view::npos)
    return std::nullopt;
  fs::path relative;
  std::string_view rest = path.substr(1);
  while (true) {
    const size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") return std::nullopt;
    relative /= fs::path(std::string(segment));
    if (slash == std::string_view::npos) break;
    rest = rest.substr(slash + 1);
  }
  std::error_code ec;
  const fs::path root = fs::canonical(root_, ec);
  if (ec) return std::nullopt;
  const fs::path file = fs::canonical(root / relative, ec);
  if (ec) return std::nullopt;
  // Symlinks are resolved now: the target must still lie under the root.
  const auto [root_end, file_it] =
      std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  if (root_end != root.end() || file_it == file.end()) return std::nullopt;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  return file;
}

std::optional<tracker::HttpResponse> StaticFiles::serve(std::string_view path) const {
  const std::optional<fs::path> file = resolve(path);
  if (!file) return std::nullopt;
  std::ifstream in(*file, std::ios::binary);
  if (!in) return std::nullopt;
  tracker::HttpResponse r;
  r.content_type = content_type(*file);
  r.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  // The files change with a rebuild only; revalidating each time keeps a dashboard current.
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

std::string StaticFiles::content_type(const fs::path& file) {
  static const std::map<std::string, std::string> types = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
      {".map", "application/json"},
  };
  const auto it = types.find(file.extension().string());
  return it == types.end() ? "application/octet-stream" : it->second;
}

}  // namespace webtune::server
