/// \file local_farm.hpp
/// An embedded farm for `webtune tune` without --tracker: a tracker on a free loopback port and
/// N native agents, each a `webtune agent` child process of this program. The tracker's port also
/// serves the dashboard and HTTP API over the tuning's records file.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tracker/tracker_server.hpp"

namespace webtune::cli {

class LocalFarm {
 public:
  /// Starts the tracker, with the dashboard over records file `db` (empty: none), and `agents`
  /// agent processes serving key `key` (e.g. "gles"). Throws std::runtime_error when a process
  /// cannot be started or the records file cannot be opened.
  LocalFarm(int agents, const std::string& key, const std::string& db = {});
  /// Stops the agents (SIGTERM, then SIGKILL after 2 s) and the tracker.
  ~LocalFarm();

  std::string url() const { return server_->url(); }
  /// The dashboard's address, "http://127.0.0.1:PORT/".
  std::string dashboard_url() const { return server_->http_url(); }

 private:
  std::unique_ptr<tracker::TrackerServer> server_;
  std::vector<pid_t> agents_;
};

}  // namespace webtune::cli
