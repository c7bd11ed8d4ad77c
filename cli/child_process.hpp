/// \file child_process.hpp
/// Ending child processes that the CLI started (embedded agents, the browser farm driver).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

namespace webtune::cli {

/// Sends SIGTERM to every pid, waits up to `grace` for all of them together, SIGKILLs those
/// still running then, and reaps every one, so that no zombie or orphan is left behind.
/// Pids ≤ 0 are skipped.
void terminate_children(const std::vector<pid_t>& pids, std::chrono::milliseconds grace);

}  // namespace webtune::cli
