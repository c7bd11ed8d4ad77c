/// \file space_command.cpp
/// `webtune space --workload ... --target ...`: prints a task's config space, and with --config
/// the kernel source that config emits.
#include <boost/json.hpp>
#include <cstdio>
#include <memory>

#include "codegen/task.hpp"
#include "commands.hpp"
#include "option_checks.hpp"

namespace webtune::cli {

namespace {

struct SpaceArgs {
  std::string workload, task, target = "gles-frag", config;
  int64_t max_texture_size = 4096, max_draw_buffers = 4, max_invocations = 1024;
  int64_t max_threads = 8;    // wasm: the most a tab reports (docs/wasm_abi.md)
  bool relaxed_simd = false;  // wasm: the tab validates relaxed SIMD (the fma knob)
  // gles-frag vertex stage; defaults: the OpenGL ES 3.0 minimums (SwiftShader: 31 and 128).
  int64_t max_varying_vectors = 15, max_feedback_components = 64;
};

void run_space(const SpaceArgs& args) {
  DeviceLimits limits;
  limits.max_texture_size = args.max_texture_size;
  limits.max_draw_buffers = args.max_draw_buffers;
  limits.max_workgroup_invocations = args.max_invocations;
  limits.max_workgroup_size_x = limits.max_workgroup_size_y = args.max_invocations;
  limits.max_shared_memory_bytes = 32768;
  limits.max_threads = args.max_threads;
  limits.relaxed_simd = args.relaxed_simd;
  limits.max_varying_vectors = args.max_varying_vectors;
  limits.max_feedback_components = args.max_feedback_components;
  // A spec or file that cannot be read is a usage error (exit status 2), named after its option.
  std::vector<WorkloadFileTask> tasks;
  try {
    tasks = resolve_workloads(args.workload, args.task);
  } catch (const std::exception& e) {
    throw CLI::ValidationError(std::string("--workload: ") + e.what());
  }
  for (const WorkloadFileTask& t : tasks) {
    Task task = Task::create(t.workload, target_from_name(args.target), limits);
    std::printf("%s %s on %s: %lld raw configs, %zu valid\n", t.workload.name.c_str(),
                t.workload.key().c_str(), args.target.c_str(),
                static_cast<long long>(task.space->raw_size()), task.space->valid_indices().size());
    for (const Knob& knob : task.space->knobs())
      std::printf("  %-14s %zu candidates\n", knob.name.c_str(), knob.candidates.size());
    if (!args.config.empty()) {
      ConfigEntity entity =
          args.config == "default" ? task.default_config() : task.space->parse(args.config);
      KernelArtifact artifact = task.build(entity);
      // A wasm module is base64 (docs/wasm_abi.md): print the whole artifact, as agents get it.
      const std::string text = artifact.target == Target::kWasm
                                   ? boost::json::serialize(artifact.to_json())
                                   : artifact.source;
      std::printf("config %s\n%s\n", boost::json::serialize(entity.to_json()).c_str(),
                  text.c_str());
    }
  }
}

}  // namespace

void add_space_command(CLI::App& app) {
  auto args = std::make_shared<SpaceArgs>();
  CLI::App* cmd =
      app.add_subcommand("space", "Print a task's config space (and a config's kernel)");
  cmd->add_option("--workload", args->workload, "workload file or inline spec")->required();
  cmd->add_option("--task", args->task, "task names inside a workload file, e.g. C2,C4");
  cmd->add_option("--target", args->target, target_names())
      ->check(parses_as([](const std::string& name) { target_from_name(name); },
                        "{" + target_names() + "}"))
      ->capture_default_str();
  cmd->add_option("--config", args->config,
                  "print the kernel of this config (index, JSON, default)");
  cmd->add_option("--max-texture-size", args->max_texture_size,
                  "gles-frag: GL_MAX_TEXTURE_SIZE, the widest and tallest texture")
      ->check(int_range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--max-draw-buffers", args->max_draw_buffers,
                  "gles-frag: GL_MAX_DRAW_BUFFERS, outputs of a fragment")
      ->check(int_range(1, 64))
      ->capture_default_str();
  cmd->add_option("--max-invocations", args->max_invocations,
                  "gles-compute, webgpu: invocations (and size in x and y) of a workgroup")
      ->check(int_range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--max-threads", args->max_threads, "wasm: threads a tab allows")
      ->check(int_range(1, 256))
      ->capture_default_str();
  cmd->add_flag("--relaxed-simd", args->relaxed_simd,
                "wasm: the tab validates relaxed SIMD (Chromium >= 114), so fma 1 is valid");
  cmd->add_option("--max-varyings", args->max_varying_vectors,
                  "gles-frag vertex stage: GL_MAX_VARYING_VECTORS")
      ->check(int_range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--max-feedback-components", args->max_feedback_components,
                  "gles-frag vertex stage: GL_MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS")
      ->check(int_range(1, 4096))
      ->capture_default_str();
  cmd->callback([args] { run_space(*args); });
}

}  // namespace webtune::cli
