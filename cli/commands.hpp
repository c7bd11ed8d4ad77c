/// \file commands.hpp
/// The subcommands of the `webtune` program; each registers itself on the top-level app and
/// runs through the callback it sets.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "exit_codes.hpp"

namespace webtune::cli {

/// Sets up `app` as the `webtune` program: its description, the global --log-level (bound to
/// `log_level`, which must outlive the app, and applied once parsing completes), the exit-status
/// footer and every subcommand below. main.cpp parses with it; tests walk it.
void build_app(CLI::App& app, std::string& log_level);
/// The status `webtune` exits with after CLI11 threw `error` out of parse() and App::exit
/// printed it and returned `printed_code`: 0 for --help, a command's own status for
/// CLI::RuntimeError, kExitUsage for every other parse error (CLI11's own codes, 100 and up, are
/// not kept).
int exit_status(const CLI::ParseError& error, int printed_code);

/// `webtune measure`: cost and GFLOP/s of one config on the local GL device.
void add_measure_command(CLI::App& app);
/// `webtune space`: the config space of a task: knobs, raw and valid sizes, a config's kernel.
void add_space_command(CLI::App& app);
/// `webtune device`: what the local GL device reports (renderer, version, limits).
void add_device_command(CLI::App& app);
/// `webtune ops`: the operator table (graph/operators.hpp): opsets and targets per operator.
void add_ops_command(CLI::App& app);
/// `webtune input`: a model's input file (raw float32) from a seed, for `run --input`.
void add_input_command(CLI::App& app);
/// `webtune tracker`: the tracker daemon; `webtune tracker status`: the farm per key.
void add_tracker_command(CLI::App& app);
/// `webtune agent`: a native OpenGL agent that serves the tracker.
void add_agent_command(CLI::App& app);
/// `webtune log list|best|export|import|merge`: the tuning records (an SQLite file or a
/// PostgreSQL database): jobs, best configs, AutoTVM JSON-lines logs out of and into a database,
/// and records copied between stores.
void add_log_command(CLI::App& app);
/// `webtune log merge`, a subcommand of `log` (log_merge_command.cpp).
void add_log_merge_command(CLI::App* log);
/// `webtune tune`: tunes a model's tasks on the farm (embedded by default), recording to SQLite.
void add_tune_command(CLI::App& app);
/// `webtune serve`: the dashboard, HTTP API and /metrics over a records file, without a tracker.
void add_serve_command(CLI::App& app);
/// `webtune farm`: a local farm of headless Chromium agent tabs (browser-agent/farm.mjs).
void add_farm_command(CLI::App& app);
/// `webtune artifact`: the kernel artifact JSON of a tuned config, out of the records.
void add_artifact_command(CLI::App& app);
/// `webtune import`: an ONNX model's fused graph and tuning tasks (and their workload file).
void add_import_command(CLI::App& app);
/// `webtune zoo`: a standard architecture (ResNet-18, MobileNet-v2) as ONNX with seeded weights.
void add_zoo_command(CLI::App& app);
/// `webtune run`: a gles-frag / gles-compute model package on the local GL device (latency,
/// top-K, the check against the reference executor).
void add_run_command(CLI::App& app);
/// `webtune build`: a model package (docs/package.md) from an ONNX model and the records.
void add_build_command(CLI::App& app);
/// `webtune measure-model`: a built package measured end to end on the farm (one model job),
/// recorded beside its estimate.
void add_measure_model_command(CLI::App& app);

}  // namespace webtune::cli
