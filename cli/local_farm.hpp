/// \file local_farm.hpp
/// An embedded farm for `webtune tune` without --tracker: a tracker on a free loopback port and
/// N native agents, each a `webtune agent` child process of this program, or (browser targets)
/// N headless Chromium tabs of one browser farm process (browser_farm.hpp). The tracker's port
/// also serves the dashboard and HTTP API over the tuning's records file.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "browser_farm.hpp"
#include "tracker/tracker_server.hpp"

namespace webtune::cli {

class LocalFarm {
 public:
  /// Starts the tracker, with the dashboard over records file `db` (empty: none), and `agents`
  /// agent processes serving key `key` (e.g. "gles"), or, when `browser` holds options, a browser
  /// farm of `agents` tabs (its tracker and tabs fields are filled in here). Throws
  /// std::runtime_error when a process cannot be started or the records file cannot be opened.
  LocalFarm(int agents, const std::string& key, const std::string& db = {},
            std::optional<BrowserFarmOptions> browser = std::nullopt);
  /// Stops the agents (SIGTERM, then SIGKILL after 2 s) and the tracker.
  ~LocalFarm();

  std::string url() const { return server_->url(); }
  /// The dashboard's address, "http://127.0.0.1:PORT/".
  std::string dashboard_url() const { return server_->http_url(); }

 private:
  std::unique_ptr<tracker::TrackerServer> server_;
  std::vector<pid_t> agents_;
  std::unique_ptr<BrowserFarm> browser_farm_;
};

}  // namespace webtune::cli
