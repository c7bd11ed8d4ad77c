/// \file app.cpp
/// The `webtune` command line as one CLI11 app: its global options and every subcommand. main.cpp
/// parses with it, and tests walk it (every option has help text).
#include <spdlog/spdlog.h>

#include "commands.hpp"

namespace webtune::cli {

void build_app(CLI::App& app, std::string& log_level) {
  app.description(
      "webtune: auto-tuning of tensor kernels for WebGL2, WebGPU, WebAssembly and OpenGL ES");
  app.require_subcommand(1);
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember(
          {"trace", "debug", "info", "warn", "warning", "error", "err", "critical", "off"}))
      ->capture_default_str();
  app.parse_complete_callback(
      [&log_level] { spdlog::set_level(spdlog::level::from_str(log_level)); });
  app.footer(
      "Exit status: 0 ok, 1 an error while running, 2 a usage error (refused before anything "
      "started), 3 no agent for the key within tune --agent-wait, 128+N stopped by signal N "
      "(README.md, \"Exit codes\").");
  add_measure_command(app);
  add_space_command(app);
  add_device_command(app);
  add_ops_command(app);
  add_input_command(app);
  add_tracker_command(app);
  add_agent_command(app);
  add_log_command(app);
  add_tune_command(app);
  add_serve_command(app);
  add_farm_command(app);
  add_artifact_command(app);
  add_import_command(app);
  add_zoo_command(app);
  add_run_command(app);
  add_build_command(app);
  add_measure_model_command(app);
}

int exit_status(const CLI::ParseError& error, int printed_code) {
  if (printed_code == kExitOk) return kExitOk;  // --help and the like
  // A command that ends with a status of its own throws RuntimeError(status).
  if (dynamic_cast<const CLI::RuntimeError*>(&error)) return printed_code;
  return kExitUsage;
}

}  // namespace webtune::cli
