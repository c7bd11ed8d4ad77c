/// \file webtune_process.hpp
/// The real `webtune` binary as a background child process of a test: an agent, a tracker, a
/// tuner. Its stderr goes to a file the test can read; it can be stopped (SIGSTOP), resumed,
/// killed (-9) or asked to end (SIGTERM). Header-only, for the tests of tests/CMakeLists.txt
/// that define WEBTUNE_BINARY.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace webtune::testing_support {

class WebtuneProcess {
 public:
  /// Starts `webtune ARGS...`; stderr (and stdout) go to `log_path` when given, else are
  /// inherited. `max_files` > 0 lowers RLIMIT_NOFILE in the child (through a shell's ulimit).
  explicit WebtuneProcess(const std::vector<std::string>& args, const std::string& log_path = {},
                          int max_files = 0)
      : log_path_(log_path) {
    std::vector<std::string> argv_text;
    if (max_files > 0) {
      argv_text = {"/bin/sh", "-c",
                   "ulimit -n " + std::to_string(max_files) + " && exec \"$0\" \"$@\"",
                   WEBTUNE_BINARY};
    } else {
      argv_text = {WEBTUNE_BINARY};
    }
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!log_path.empty()) {
      posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
      posix_spawn_file_actions_adddup2(&actions, 2, 1);
    }
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start " + argv_text[0]);
  }
  ~WebtuneProcess() { kill_now(); }
  WebtuneProcess(const WebtuneProcess&) = delete;
  WebtuneProcess& operator=(const WebtuneProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  /// SIGKILL and reap.
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  /// Waits up to `timeout` for the process to end; returns its wait status, or -1 on timeout.
  int wait_for_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  /// What the process wrote so far (log_path only).
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

/// A TCP port of 127.0.0.1 that was free a moment ago (bound to port 0 and released).
inline uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0)
    throw std::runtime_error("cannot find a free port");
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace webtune::testing_support
