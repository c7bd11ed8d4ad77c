/// \file local_farm.cpp
/// Starts and stops the embedded tracker and agent processes.
#include "local_farm.hpp"

#include "child_process.hpp"

#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "server/dashboard_handler.hpp"

extern char** environ;

namespace webtune::cli {

namespace {

std::string self_path() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) throw std::runtime_error("cannot find this program's path");
  return std::string(buffer, static_cast<size_t>(n));
}

}  // namespace

LocalFarm::LocalFarm(int agents, const std::string& key, const std::string& db,
                     std::optional<BrowserFarmOptions> browser) {
  tracker::TrackerConfig config;
  config.port = 0;
  server::DashboardOptions dashboard;
  dashboard.db = db;
  dashboard.web_root = server::default_web_root();
  config.http_handler = server::make_dashboard_handler(dashboard);
  server_ = std::make_unique<tracker::TrackerServer>(config);
  server_->start_background();
  if (browser) {
    browser->tracker = url();
    browser->tabs = agents;
    browser->name = "local";
    browser_farm_ = std::make_unique<BrowserFarm>(*browser);
    spdlog::info("local farm: tracker at {}, {} browser tab(s)", url(), agents);
    return;
  }
  const std::string exe = self_path();
  for (int i = 0; i < agents; ++i) {
    std::vector<std::string> args = {exe,
                                     "--log-level",
                                     "warn",
                                     "agent",
                                     "--tracker",
                                     url(),
                                     "--key",
                                     key,
                                     "--name",
                                     "local-" + std::to_string(i),
                                     "--parent-pid",
                                     std::to_string(::getpid())};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start a local agent from " + exe);
    agents_.push_back(pid);
  }
  spdlog::info("local farm: tracker at {}, {} native agent(s)", url(), agents);
}

LocalFarm::~LocalFarm() {
  browser_farm_.reset();
  terminate_children(agents_, std::chrono::seconds(2));
  server_->stop();
}

}  // namespace webtune::cli
