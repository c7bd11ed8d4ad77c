/// \file browser_farm.cpp
/// Starts, watches and stops the node farm driver (browser-agent/farm.mjs).
#include "browser_farm.hpp"

#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#ifndef WEBTUNE_SOURCE_DIR
#define WEBTUNE_SOURCE_DIR "."
#endif

extern char** environ;

namespace webtune::cli {

std::string farm_script_path() {
  if (const char* env = std::getenv("WEBTUNE_FARM_SCRIPT"); env != nullptr && *env != '\0')
    return env;
  return WEBTUNE_SOURCE_DIR "/browser-agent/farm.mjs";
}

BrowserFarm::BrowserFarm(const BrowserFarmOptions& options) {
  const std::string script = farm_script_path();
  struct stat st {};
  if (::stat(script.c_str(), &st) != 0)
    throw std::runtime_error("the browser farm script " + script +
                             " is missing (set WEBTUNE_FARM_SCRIPT)");
  const char* node_env = std::getenv("WEBTUNE_NODE");
  const std::string node = node_env != nullptr && *node_env != '\0' ? node_env : "node";
  std::vector<std::string> args = {node,           script,
                                   "--tracker",    options.tracker,
                                   "--tabs",       std::to_string(options.tabs),
                                   "--targets",    options.targets,
                                   "--token",      options.token,
                                   "--gl",         options.gl,
                                   "--name",       options.name,
                                   "--parent-pid", std::to_string(::getpid())};
  if (!options.browser.empty()) args.insert(args.end(), {"--browser", options.browser});
  if (!options.display.empty()) args.insert(args.end(), {"--display", options.display});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The farm reads commands on stdin; it gets none from here (and must not steal a terminal's).
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // Nothing of this process (sockets, databases) leaks into the farm and its browser.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (options.quiet) posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Callers may block SIGINT/SIGTERM to sigwait for them; the farm must still receive them.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  const int rc = posix_spawnp(&pid_, node.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    throw std::runtime_error("cannot start '" + node + "' for the browser farm (install nodejs)");
  }
  spdlog::info("browser farm: {} {} tab(s) of {} for {} (node pid {})", options.tabs,
               options.browser.empty() ? "browser" : options.browser, options.targets,
               options.tracker, pid_);
}

BrowserFarm::~BrowserFarm() {
  stop();
}

std::optional<int> BrowserFarm::poll() {
  if (pid_ <= 0) return 0;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  pid_ = -1;
  return status;
}

void BrowserFarm::stop() {
  if (pid_ <= 0) return;
  // Closing the browser cleanly takes a moment; a farm that hangs is killed (Chromium, on a
  // DevTools pipe, follows it; Firefox follows its Xvfb, which the farm's holder shell ends).
  terminate_children({pid_}, std::chrono::seconds(10));
  pid_ = -1;
}

}  // namespace webtune::cli
