/// \file main.cpp
/// Entry point of `webtune`: parses the command line and runs one subcommand.
///
/// Streams: a command's data (tables, JSON, logs it exports) goes to stdout; every log line and
/// error goes to stderr, so that `webtune log export > f.log` holds only the log. Any error that
/// reaches this level (std::bad_alloc included) ends as one line on stderr and exit status 1;
/// CLI11's parse errors (an option out of range, ...) as CLI11 prints them, with its status.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>

#include "commands.hpp"

int main(int argc, char** argv) {
  // Before anything logs: spdlog's default logger writes to stdout.
  spdlog::set_default_logger(spdlog::stderr_color_mt("webtune"));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");  // as before: no logger name

  CLI::App app{
      "webtune: auto-tuning of tensor kernels for WebGL2, WebGPU, WebAssembly and OpenGL ES"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember(
          {"trace", "debug", "info", "warn", "warning", "error", "err", "critical", "off"}))
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
  webtune::cli::add_import_command(app);
  webtune::cli::add_zoo_command(app);
  webtune::cli::add_run_command(app);
  webtune::cli::add_build_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::bad_alloc&) {
    // Whatever needed the memory is gone by now (unwound), so logging can allocate again.
    spdlog::error(
        "out of memory (std::bad_alloc): the workload, file or request needs more memory than "
        "this process may use");
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  } catch (...) {
    spdlog::error("an unknown exception ended webtune");
    return 1;
  }
  return 0;
}
