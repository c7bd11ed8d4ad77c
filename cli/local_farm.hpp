/// \file local_farm.hpp
/// An embedded farm for `webtune tune` without --tracker: a tracker on a free loopback port and
/// N native agents, each a `webtune agent` child process of this program, or (browser targets)
/// N headless Chromium tabs of one browser farm process (browser_farm.hpp).
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
  /// Starts the tracker and `agents` agent processes serving key `key` (e.g. "gles"), or, when
  /// `browser` holds options, a browser farm of `agents` tabs (its tracker and tabs fields are
  /// filled in here). Throws std::runtime_error when a process cannot be started.
  LocalFarm(int agents, const std::string& key,
            std::optional<BrowserFarmOptions> browser = std::nullopt);
  /// Stops the agents (SIGTERM, then SIGKILL after 2 s) and the tracker.
  ~LocalFarm();

  std::string url() const { return server_->url(); }

 private:
  std::unique_ptr<tracker::TrackerServer> server_;
  std::vector<pid_t> agents_;
  std::unique_ptr<BrowserFarm> browser_farm_;
};

}  // namespace webtune::cli
