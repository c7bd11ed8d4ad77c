/// \file local_farm.hpp
/// An embedded farm for `webtune tune` without --tracker: a tracker on a free loopback port and
/// N native agents, each a `webtune agent` child process of this program.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tracker/tracker_server.hpp"

namespace webtune::cli {

class LocalFarm {
 public:
  /// Starts the tracker and `agents` agent processes serving key `key` (e.g. "gles").
  /// Throws std::runtime_error when a process cannot be started.
  LocalFarm(int agents, const std::string& key);
  /// Stops the agents (SIGTERM, then SIGKILL after 2 s) and the tracker.
  ~LocalFarm();

  std::string url() const { return server_->url(); }

 private:
  std::unique_ptr<tracker::TrackerServer> server_;
  std::vector<pid_t> agents_;
};

}  // namespace webtune::cli
