/// \file server_runner.hpp
/// What `webtune tracker` and `webtune serve` share: the --listen address and running a server
/// until SIGINT or SIGTERM.
#pragma once

#include <string>

#include "tracker/tracker_server.hpp"

namespace webtune::cli {

/// Sets config.host and config.port from "HOST:PORT"; throws std::invalid_argument otherwise.
void apply_listen(const std::string& listen, tracker::TrackerConfig& config);

/// Serves until SIGINT or SIGTERM, then stops the server and returns.
void run_until_signal(tracker::TrackerServer& server);

}  // namespace webtune::cli
