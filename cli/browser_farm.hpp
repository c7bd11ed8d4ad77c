/// \file browser_farm.hpp
/// A local farm of browser agent tabs (headless Chromium, or Firefox ESR on a private Xvfb
/// display): the `browser-agent/farm.mjs` node process, started and stopped from C++
/// (`webtune farm`, and `webtune tune --target webgl2` without --tracker).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace webtune::cli {

struct BrowserFarmOptions {
  std::string tracker;             ///< ws://HOST:PORT/ws; the tabs open http://HOST:PORT/agent
  int tabs = 1;                    ///< agent tabs (each one agent of the tracker)
  std::string targets = "webgl2";  ///< executor families, comma-separated
  std::string token;               ///< the tracker's agent token ("" when it needs none)
  std::string gl = "swiftshader";  ///< Chromium's WebGL backend: swiftshader or llvmpipe (ANGLE)
  /// "chromium" or "firefox"; empty: farm.mjs's default ($WEBTUNE_BROWSER, else chromium), so
  /// that a farm started by a command without --browser (tune's embedded one) can be switched.
  std::string browser;
  /// Firefox only: "xvfb" (windowed on a private Xvfb display: WebGL2 works) or "headless"
  /// (`firefox --headless`: no WebGL, wasm only); empty: farm.mjs's default (xvfb).
  std::string display;
  std::string name = "farm";  ///< tab i joins as "<name>-<i>"
  bool quiet = false;         ///< send the farm's output to /dev/null
};

/// The node script: $WEBTUNE_FARM_SCRIPT, else browser-agent/farm.mjs of the source tree.
std::string farm_script_path();

class BrowserFarm {
 public:
  /// Starts `node farm.mjs ...` (node from $WEBTUNE_NODE or PATH) with this process as its
  /// --parent-pid, so that it ends with this process. Throws std::runtime_error when it cannot
  /// be started (the script missing, node absent).
  explicit BrowserFarm(const BrowserFarmOptions& options);
  /// stop().
  ~BrowserFarm();
  BrowserFarm(const BrowserFarm&) = delete;
  BrowserFarm& operator=(const BrowserFarm&) = delete;

  /// The exit status (as waitpid reports it) once the farm process has ended, else nullopt.
  std::optional<int> poll();
  /// SIGTERM (the farm closes its browser), then SIGKILL after 10 s. Idempotent.
  void stop();

 private:
  pid_t pid_ = -1;
};

}  // namespace webtune::cli
