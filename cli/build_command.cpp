/// \file build_command.cpp
/// `webtune build --model MODEL.onnx [--db RECORDS.db] --target webgl2|webgpu|wasm|gles-compute|
/// gles-frag [--device-key KEY] [--dim NAME=V ...] [--no-fusion] [--no-quad-layers] -o DIR`: builds
/// a model package (docs/package.md) out of an ONNX model and the tuning records
/// (deploy/planner.hpp): each task's best record for the device key (else its family's, else the
/// default config), the steps with their layout transforms, the weights pre-packed, the memory
/// pool. Prints the build report on stdout (also DIR/report.txt).
///
/// Without --db every task takes its default config (the report says so). Errors end with the
/// message on stderr and exit status 2, nothing on stdout: a model the importer refuses, an op
/// the target cannot run (named with its node), an unknown target, a missing records file, an
/// output folder that is neither empty nor an earlier package.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "deploy/planner.hpp"
#include "graph/graph.hpp"
#include "option_checks.hpp"

namespace webtune::cli {

namespace {

struct BuildArgs {
  deploy::BuildOptions options;
  std::vector<std::string> dims;
};

void run_build(BuildArgs& args) {
  args.options.symbolic_dims = symbolic_dims(args.dims);
  try {
    const deploy::PlannedPackage package = deploy::build_package(args.options);
    std::fputs(package.report().c_str(), stdout);
    spdlog::info("wrote the {} package of {} to {}", args.options.target,
                 package.manifest.model.file, args.options.out_dir);
    // Loud when most tasks run untuned: a package built from another target's records (or none)
    // is often far slower than the user expects (issue 52, item 5).
    size_t defaults = 0;
    for (const deploy::PackageTask& t : package.manifest.tasks)
      defaults += t.source == deploy::TaskSource::kDefault ? 1 : 0;
    const size_t tasks = package.manifest.tasks.size();
    if (tasks > 0 && 2 * defaults > tasks)
      spdlog::warn(
          "{} of {} tasks have no tuning record for target {}{}: they run their template's "
          "default config, usually far slower than tuned. Tune this target first: webtune tune "
          "--model {} --target {}{}",
          defaults, tasks, args.options.target,
          args.options.db_path.empty() ? " (no --db given)" : " in " + args.options.db_path,
          args.options.model_path, args.options.target,
          args.options.db_path.empty() ? " --db FILE" : " --db " + args.options.db_path);
  } catch (const graph::GraphError& e) {
    spdlog::error("build: {}", e.what());
    throw CLI::RuntimeError(2);
  } catch (const std::invalid_argument& e) {
    spdlog::error("build: {}", e.what());
    throw CLI::RuntimeError(2);
  } catch (const std::runtime_error& e) {
    spdlog::error("build: {}", e.what());
    throw CLI::RuntimeError(2);
  }
}

}  // namespace

void add_build_command(CLI::App& app) {
  auto args = std::make_shared<BuildArgs>();
  CLI::App* cmd = app.add_subcommand(
      "build", "Build a model package (kernels, weights, manifest) from an ONNX model and records");
  cmd->add_option("--model", args->options.model_path, "the ONNX model file (.onnx)")->required();
  cmd->add_option("--db", args->options.db_path,
                  "SQLite records database (absent: every task takes its default config)");
  cmd->add_option("--target", args->options.target,
                  "what runs the package: " + deploy::build_target_names() +
                      " (webgl2, webgpu, wasm: a page; gles-compute, gles-frag: webtune run)")
      ->required();
  cmd->add_option("--device-key", args->options.device_key,
                  "take the records of this device first (e.g. webgl2:swiftshader), then of its "
                  "family (the text before ':')");
  cmd->add_option("--dim", args->dims,
                  "NAME=VALUE: a value for a symbolic input dimension, e.g. batch_size=1; "
                  "*=VALUE binds every symbolic dimension not named (repeatable)")
      ->check(dim_binding());
  cmd->add_flag(
      "--no-fusion", [args](int64_t) { args->options.fuse = false; },
      "skip the fusion passes (every Relu, Add, ... its own step)");
  cmd->add_flag(
      "--no-quad-layers", [args](int64_t) { args->options.quad_layers = false; },
      "webgl2 / gles-frag: no convolution writes quad layers for the next one (a relayout goes "
      "between every two tuned kernels, as before quad layers)");
  cmd->add_flag(
      "--no-workgroup-reductions", [args](int64_t) { args->options.workgroup_reductions = false; },
      "gles-compute / webgpu: global pools and reductions as one invocation per output element "
      "(as before workgroup reductions; for side-by-side benchmarks)");
  cmd->add_option("-o,--out", args->options.out_dir,
                  "the package folder (created; an earlier package there is replaced)")
      ->required();
  cmd->callback([args] { run_build(*args); });
}

}  // namespace webtune::cli
