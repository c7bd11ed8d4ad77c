/// \file device_command.cpp
/// `webtune device`: opens the headless EGL context and prints what the GL device reports.
#include <boost/json.hpp>
#include <cstdio>

#include "commands.hpp"
#include "native_agent/isolated_runtime.hpp"

namespace webtune::cli {

void add_device_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("device", "Print the local GL device's info and limits");
  cmd->callback([] {
    IsolatedRuntime runtime;
    std::puts(boost::json::serialize(runtime.info().to_json()).c_str());
  });
}

}  // namespace webtune::cli
