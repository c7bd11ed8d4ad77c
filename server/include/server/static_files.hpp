/// \file static_files.hpp
/// The dashboard's files, served from one root folder with no way out of it.
///
/// A URL path maps to a file under the root when every segment is a plain name: "..", "." and
/// empty segments, backslashes and NUL bytes are refused (the path is decoded first, so "%2e%2e"
/// is ".." too), and the file's canonical path, symlinks resolved, must still lie under the
/// root's canonical path, so a symlink cannot lead out either.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "tracker/http_types.hpp"

namespace webtune::server {

class StaticFiles {
 public:
  /// `root` need not exist yet; a missing root serves nothing.
  explicit StaticFiles(std::filesystem::path root);

  /// The file that decoded URL path `path` names ("/" is "/index.html"), or nullopt when it is
  /// refused (see the file comment), missing, or not a regular file.
  std::optional<std::filesystem::path> resolve(std::string_view path) const;
  /// The file as a 200 response with its content type, or nullopt as resolve().
  std::optional<tracker::HttpResponse> serve(std::string_view path) const;
  /// The Content-Type of a file by its extension ("text/html; charset=utf-8",
  /// "text/javascript; charset=utf-8", ...); "application/octet-stream" when unknown.
  static std::string content_type(const std::filesystem::path& file);

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

}  // namespace webtune::server
