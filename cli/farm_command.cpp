/// \file farm_command.cpp
/// `webtune farm --tabs N --targets webgl2 [--browser chromium|firefox] [--tracker
/// ws://HOST:PORT/ws] [--token T] [--gl swiftshader|llvmpipe] [--display xvfb|headless]`: a local
/// farm of browser tabs (headless Chromium, or Firefox ESR) that serve a tracker; without
/// --tracker it also runs a tracker on --listen (default 127.0.0.1:9190; port 0: a free one,
/// printed). Runs until SIGINT/SIGTERM, or until the farm process ends.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <cstdio>
#include <ctime>
#include <memory>

#include "browser_farm.hpp"
#include "commands.hpp"
#include "option_checks.hpp"
#include "tracker/tracker_server.hpp"
#include "tuner/tune_target.hpp"

namespace webtune::cli {

namespace {

struct FarmArgs {
  BrowserFarmOptions farm;
  std::string listen = "127.0.0.1:9190";
};

int run_farm(FarmArgs& args) {
  // SIGINT/SIGTERM are taken with sigtimedwait below; block them before any thread starts so
  // that no other thread (the tracker's) gets them. The farm process unblocks them again.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<tracker::TrackerServer> server;
  if (args.farm.tracker.empty()) {
    tracker::TrackerConfig config;
    const auto colon = args.listen.rfind(':');
    if (colon == std::string::npos) throw std::invalid_argument("--listen takes HOST:PORT");
    config.host = args.listen.substr(0, colon);
    config.port = static_cast<uint16_t>(std::stoi(args.listen.substr(colon + 1)));
    config.tokens.agent = args.farm.token;
    server = std::make_unique<tracker::TrackerServer>(config);
    server->start_background();
    args.farm.tracker = server->url();
    std::printf("tracker %s; agent page http://%s:%u/agent\n", server->url().c_str(),
                config.host.c_str(), static_cast<unsigned>(server->port()));
    std::fflush(stdout);
  }
  BrowserFarm farm(args.farm);
  int exit_code = 0;
  for (;;) {
    const timespec wait = {0, 200'000'000};
    siginfo_t info;
    if (sigtimedwait(&signals, &info, &wait) > 0) {
      spdlog::info("signal {}: stopping the farm", info.si_signo);
      break;
    }
    if (std::optional<int> status = farm.poll()) {
      exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 1;
      spdlog::warn("the browser farm process ended (exit code {})", exit_code);
      break;
    }
  }
  farm.stop();
  if (server) server->stop();
  return exit_code;
}

}  // namespace

void add_farm_command(CLI::App& app) {
  auto args = std::make_shared<FarmArgs>();
  CLI::App* cmd = app.add_subcommand(
      "farm", "Run a local farm of browser agent tabs (Chromium or Firefox; webgl2, webgpu, wasm)");
  cmd->add_option("--tabs", args->farm.tabs, "agent tabs")
      ->check(int_range(1, 64))
      ->capture_default_str();
  std::string families;
  for (const TuneTarget& t : tune_targets())
    if (t.browser) families += (families.empty() ? "" : ", ") + t.key;
  cmd->add_option("--targets", args->farm.targets,
                  "executor families, comma-separated (" + families + ")")
      ->capture_default_str();
  cmd->add_option("--tracker", args->farm.tracker,
                  "ws://HOST:PORT/ws of the tracker to serve (default: run one on --listen)");
  cmd->add_option("--listen", args->listen, "HOST:PORT of the embedded tracker")
      ->capture_default_str();
  cmd->add_option("--token", args->farm.token, "the tracker's agent token");
  args->farm.browser = "chromium";
  cmd->add_option("--browser", args->farm.browser,
                  "chromium (Debian's, headless) or firefox (Debian's firefox-esr, over WebDriver "
                  "BiDi; windowed on a private Xvfb display unless --display headless)")
      ->check(CLI::IsMember({"chromium", "firefox"}))
      ->capture_default_str();
  cmd->add_option("--gl", args->farm.gl, "Chromium's WebGL backend: swiftshader or llvmpipe")
      ->check(CLI::IsMember({"swiftshader", "llvmpipe"}))
      ->capture_default_str();
  args->farm.display = "xvfb";
  cmd->add_option("--display", args->farm.display,
                  "Firefox's display: xvfb (a private Xvfb display; WebGL2 works) or headless "
                  "(firefox --headless: no WebGL there, wasm only)")
      ->check(CLI::IsMember({"xvfb", "headless"}))
      ->capture_default_str();
  cmd->add_option("--name", args->farm.name, "tab i joins as NAME-i")->capture_default_str();
  cmd->callback([args] {
    const int code = run_farm(*args);
    if (code != 0) throw std::runtime_error("the browser farm failed");
  });
}

}  // namespace webtune::cli
