/// \file child_process.cpp
/// SIGTERM, a grace period, then SIGKILL: how the CLI ends the processes it started.
#include "child_process.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <thread>

namespace webtune::cli {

void terminate_children(const std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  for (pid_t pid : pids)
    if (pid > 0) ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t pid : pids) {
    if (pid <= 0) continue;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace webtune::cli
