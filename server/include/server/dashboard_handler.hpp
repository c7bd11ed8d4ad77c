/// \file dashboard_handler.hpp
/// The HTTP side of a tracker port (or of `webtune serve`): the JSON API under /api/, /metrics,
/// and the dashboard's static files at /, behind the viewer token. Plug the result into
/// TrackerConfig::http_handler.
#pragma once

#include <filesystem>
#include <string>

#include "tracker/http_types.hpp"

namespace webtune::server {

struct DashboardOptions {
  std::string db;                  ///< records file; empty serves no records
  std::filesystem::path web_root;  ///< the built dashboard files (see default_web_root)
  std::string viewer_token;        ///< empty: no token needed
};

/// Where the dashboard files are: $WEBTUNE_WEB_ROOT when set, else the build tree's `web/` folder
/// (the build copies them there) when it exists, else `../share/webtune/web` from the program's
/// folder (an installed tree).
std::filesystem::path default_web_root();

/// The handler. Opens the records file at once (creating it when missing, as RecordStore does),
/// so a bad file fails here with RecordStore's std::runtime_error rather than on the first
/// request. The handler is called on the tracker's thread only; its store is its own SQLite
/// connection.
tracker::HttpHandler make_dashboard_handler(const DashboardOptions& options);

}  // namespace webtune::server
