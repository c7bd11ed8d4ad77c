/// \file main.cpp
/// Entry point of `webtune`: parses the command line and runs one subcommand.
///
/// Streams: a command's data (tables, JSON, logs it exports) goes to stdout; every log line and
/// error goes to stderr, so that `webtune log export > f.log` holds only the log. Exit statuses
/// (exit_codes.hpp, README.md "Exit codes"): any error that reaches this level (std::bad_alloc
/// included) ends as one line on stderr and status 1; CLI11's parse errors (an unknown option,
/// a value out of range, ...) as CLI11 prints them, with status 2; a command that ends with a
/// status of its own (CLI::RuntimeError) with that status.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>

#include "commands.hpp"
#include "log_lines.hpp"

int main(int argc, char** argv) {
  // Before anything logs: spdlog's default logger writes to stdout. The second sink counts the
  // lines, for output that is redrawn in place (tune's progress).
  auto logger = std::make_shared<spdlog::logger>(
      "webtune", spdlog::sinks_init_list{std::make_shared<spdlog::sinks::stderr_color_sink_mt>(),
                                         std::make_shared<webtune::cli::LineCountingSink>()});
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");  // as before: no logger name

  CLI::App app;
  std::string log_level = "info";
  webtune::cli::build_app(app, log_level);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return webtune::cli::exit_status(e, app.exit(e));
  } catch (const std::bad_alloc&) {
    // Whatever needed the memory is gone by now (unwound), so logging can allocate again.
    spdlog::error(
        "out of memory (std::bad_alloc): the workload, file or request needs more memory than "
        "this process may use");
    return webtune::cli::kExitError;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return webtune::cli::kExitError;
  } catch (...) {
    spdlog::error("an unknown exception ended webtune");
    return webtune::cli::kExitError;
  }
  return webtune::cli::kExitOk;
}
