/// \file measure_command.cpp
/// `webtune measure --workload ... --target gles-frag|gles-compute --config <index|json|default>`:
/// builds one config, runs it on the local GL device in an isolated worker, and prints its cost.
/// Browser-only targets (webgpu, wasm) have no local device: measure builds the config, prints
/// what it built and that it runs only in browser tabs (`webtune tune --target ...`).
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "codegen/task.hpp"
#include "commands.hpp"
#include "native_agent/isolated_runtime.hpp"
#include "option_checks.hpp"
#include "tuner/tune_target.hpp"

namespace webtune::cli {

namespace {

struct MeasureArgs {
  std::string workload, task, target = "gles-frag", config = "default";
  uint64_t seed = 1;
  int samples = 64;
  MeasureOptions options;
  bool json = false;
};

/// The browser-only targets: build (LLVM + lld for wasm) and report, since no local agent runs
/// them. Exit code 0 when it built, 2 otherwise.
int build_only(const MeasureArgs& args, const WorkloadFileTask& t, Target target) {
  DeviceLimits limits;
  limits.max_threads = 8;      // the most a wasm tab reports (docs/wasm_abi.md)
  limits.relaxed_simd = true;  // and Chromium's tabs have relaxed SIMD (the fma knob)
  Task task = Task::create(t.workload, target, limits);
  ConfigEntity entity =
      args.config == "default" ? task.default_config() : task.space->parse(args.config);
  std::printf("workload  %s  %.2f MFLOP\n", task.workload.key().c_str(),
              task.workload.flops() / 1e6);
  std::printf("target    %s  config %lld of %lld: %s\n", args.target.c_str(),
              static_cast<long long>(entity.index()),
              static_cast<long long>(task.space->raw_size()), entity.to_string().c_str());
  try {
    const auto start = std::chrono::steady_clock::now();
    const KernelArtifact artifact = task.build(entity);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("built     %zu source characters in %.1f ms\n", artifact.source.size(), ms);
    std::printf("run       %s kernels run only in browser tabs: webtune tune --target %s\n",
                args.target.c_str(), args.target.c_str());
    return 0;
  } catch (const MeasureError& e) {
    std::printf("error     %d %s: %s\n", static_cast<int>(e.error()),
                std::string(error_name(e.error())).c_str(), e.what());
    return 2;
  }
}

int run_measure(const MeasureArgs& args) {
  std::vector<WorkloadFileTask> tasks = resolve_workloads(args.workload, args.task);
  if (tasks.size() != 1)
    throw std::invalid_argument("--workload names " + std::to_string(tasks.size()) +
                                " tasks; pick one with --task");
  const Target target = target_from_name(args.target);
  if (!runs_natively(target)) return build_only(args, tasks[0], target);
  IsolatedRuntime runtime;
  const GlDeviceInfo& device = runtime.info();
  Task task = Task::create(tasks[0].workload, target, device.limits);
  ConfigEntity entity =
      args.config == "default" ? task.default_config() : task.space->parse(args.config);

  MeasureInput input;
  input.workload = task.workload;
  input.seed = args.seed;
  input.options = args.options;
  MeasureResult result;
  try {
    input.artifact = task.build(entity);
    input.samples = reference_samples(task.workload, args.seed, args.samples);
    result = runtime.measure(input);
  } catch (const MeasureError& e) {
    result = MeasureResult::failure(e.error(), e.what());
  }

  const double flops = task.workload.flops();
  if (args.json) {
    boost::json::object out{
        {"workload", task.workload.to_json()}, {"target", args.target},
        {"device", device.renderer},           {"config", entity.to_json()},
        {"result", result.to_json()},          {"gflops", result.gflops(flops)}};
    std::puts(boost::json::serialize(out).c_str());
  } else {
    std::printf("device    %s (%s)\n", device.renderer.c_str(), device.version.c_str());
    std::printf("workload  %s  %.2f MFLOP\n", task.workload.key().c_str(), flops / 1e6);
    std::printf("target    %s  config %lld of %lld: %s\n", args.target.c_str(),
                static_cast<long long>(entity.index()),
                static_cast<long long>(task.space->raw_size()), entity.to_string().c_str());
    if (result.ok()) {
      std::printf("cost      %.4f ms (mean of %zu)  %.2f GFLOP/s\n", result.mean_cost() * 1e3,
                  result.costs.size(), result.gflops(flops));
    } else {
      std::printf("error     %d %s: %s\n", static_cast<int>(result.error),
                  std::string(error_name(result.error)).c_str(), result.message.c_str());
    }
  }
  return result.ok() ? 0 : 2;
}

}  // namespace

void add_measure_command(CLI::App& app) {
  auto args = std::make_shared<MeasureArgs>();
  CLI::App* cmd = app.add_subcommand("measure", "Measure one config on the local GL device");
  cmd->add_option("--workload", args->workload,
                  "workload file (configs/workloads/*.json) or dense:M,N,K | "
                  "conv2d:N,C,H,W,K,R,stride,pad | depthwise_conv2d:N,C,H,W,R,stride,pad")
      ->required();
  cmd->add_option("--task", args->task, "task name inside a workload file, e.g. C2");
  std::string native, browser;  // target names, each list joined with ", "
  for (Target t : targets()) {
    std::string& list = runs_natively(t) ? native : browser;
    list += (list.empty() ? "" : ", ") + std::string(target_name(t));
  }
  cmd->add_option("--target", args->target,
                  native + " (" + browser + ": build only, they run in browsers)")
      ->capture_default_str();
  cmd->add_option("--config", args->config, "config index, entity JSON, or 'default'")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "seed of the generated inputs")->capture_default_str();
  cmd->add_option("--samples", args->samples, "outputs checked against the CPU reference")
      ->check(int_range(1, kMaxSamples))
      ->capture_default_str();
  cmd->add_option("--number", args->options.number, "runs per measurement")
      ->check(int_range(1, kMaxNumber))
      ->capture_default_str();
  cmd->add_option("--repeat", args->options.repeat, "measurements")
      ->check(int_range(1, kMaxRepeat))
      ->capture_default_str();
  cmd->add_option("--min-repeat-ms", args->options.min_repeat_ms,
                  "grow --number until one measurement lasts this long")
      ->check(int_range(0, kMaxMinRepeatMs))
      ->capture_default_str();
  cmd->add_option("--timeout", args->options.timeout_s, "seconds before RUN_TIMEOUT")
      ->check(seconds(kMaxTimeoutS))
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->callback([args] {
    int code = run_measure(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace webtune::cli
