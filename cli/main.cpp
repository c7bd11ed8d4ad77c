/// \file main.cpp
/// Entry point of `webtune`: parses the command line and runs one subcommand.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <exception>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "webtune: auto-tuning of tensor kernels for WebGL2, WebGPU, WebAssembly and OpenGL ES"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });
  webtune::cli::add_measure_command(app);
  webtune::cli::add_space_command(app);
  webtune::cli::add_device_command(app);
  webtune::cli::add_tracker_command(app);
  webtune::cli::add_agent_command(app);
  webtune::cli::add_log_command(app);
  webtune::cli::add_tune_command(app);
  webtune::cli::add_serve_command(app);
  webtune::cli::add_farm_command(app);
  webtune::cli::add_artifact_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
