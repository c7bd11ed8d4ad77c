/// \file run_command.cpp
/// `webtune run --model DIR --input FILE.f32 [--output FILE.f32] [--runs N] [--warmup W]
/// [--reference MODEL.onnx] [--top K] [--profile]`: runs a gles-frag / gles-compute model package
/// (docs/package.md, `webtune build`) on the local GL device through headless EGL
/// (native_agent/model_runner.hpp), and prints its end-to-end latency, its top-K classes and,
/// with --reference, its error against the CPU reference executor (graph/executor.hpp) on the
/// ONNX model. Output on stdout:
///
///   model     resnet18  target gles-frag  device llvmpipe (LLVM 15.0.6, 256 bits)
///   steps     73 (31 kernel steps, 24 distinct kernels)
///   latency   median 412.301 ms  min 409.8 ms  max 420.0 ms  (20 runs after 3 warm-up)
///   top-5     817 12.3041  ...   (one line per class: rank, index, value)
///   reference max abs error 1.2e-05, max |logit| 14.2 (limit 0.0142): ok
///
/// A run is timed on the host from the input's upload to the output's read-back, glFinish
/// included (each run = upload + every step + read-back). Exit status: 0 when it ran (and
/// matched the reference, if given); 1 on any error (a missing or bad package, an input file of
/// the wrong size, a kernel that fails, naming the step) or when the reference check fails.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"
#include "deploy/package.hpp"
#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "native_agent/model_runner.hpp"
#include "option_checks.hpp"

namespace webtune::cli {

namespace {

struct RunArgs {
  std::string model, input, output, reference;
  int runs = 20, warmup = 3, top = 5;
  bool profile = false;
};

/// `--profile`: one more run with every step timed (ModelRunner::profile), a line per step and
/// the sums by kind beside the tasks' recorded costs, so that the gap between the build's
/// estimate (Σ weight × recorded cost) and the end-to-end latency can be read off.
void print_profile(ModelRunner& runner, const std::vector<float>& input) {
  const deploy::Manifest& manifest = runner.manifest();
  const ModelRunner::RunProfile profile = runner.profile(input);
  std::printf("profile   one run, %s; run total %.3f ms\n",
              profile.gpu_timestamps ? "GPU time per step (timestamps)"
                                     : "host time per step run alone (glFinish after each)",
              profile.total_ms);
  std::printf("  %4s  %-8s  %-8s  %-22s  %9s  %11s  %s\n", "step", "kind", "role", "task", "ms",
              "recorded_ms", "node");
  double by_kind[4] = {0, 0, 0, 0};  // task kernels, other kernels, upload, download
  double recorded = 0, recorded_steps_ms = 0;
  for (const auto& t : profile.steps) {
    const deploy::PackageStep& step = manifest.steps[static_cast<size_t>(t.step)];
    std::string recorded_text = "-";
    if (step.kind == deploy::PackageStep::Kind::kKernel &&
        step.role == deploy::PackageStep::Role::kTask) {
      by_kind[0] += t.ms;
      for (const deploy::PackageTask& task : manifest.tasks) {
        if (task.name == step.task && task.cost_ms) {
          recorded += *task.cost_ms;
          recorded_steps_ms += t.ms;
          char buffer[32];
          std::snprintf(buffer, sizeof buffer, "%.4f", *task.cost_ms);
          recorded_text = buffer;
        }
      }
    } else if (step.kind == deploy::PackageStep::Kind::kKernel) {
      by_kind[1] += t.ms;
    } else if (step.kind == deploy::PackageStep::Kind::kUpload) {
      by_kind[2] += t.ms;
    } else {
      by_kind[3] += t.ms;
    }
    const bool kernel = step.kind == deploy::PackageStep::Kind::kKernel;
    std::printf("  %4d  %-8s  %-8s  %-22s  %9.4f  %11s  %s\n", t.step,
                std::string(deploy::step_kind_name(step.kind)).c_str(),
                kernel ? std::string(deploy::step_role_name(step.role)).c_str() : "-",
                step.task.empty() ? "-" : step.task.c_str(), t.ms, recorded_text.c_str(),
                step.node.c_str());
  }
  const double steps_total = by_kind[0] + by_kind[1] + by_kind[2] + by_kind[3];
  std::printf(
      "  sums    task kernels %.3f ms (those with a record: %.3f ms measured here, %.3f ms "
      "recorded); other kernels %.3f ms; upload %.3f ms; download %.3f ms; all steps %.3f ms "
      "of the run's %.3f ms\n",
      by_kind[0], recorded_steps_ms, recorded, by_kind[1], by_kind[2], by_kind[3], steps_total,
      profile.total_ms);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// The raw little-endian fp32 file at `path`, which must hold exactly `count` floats.
std::vector<float> read_floats(const std::string& path, int64_t count, const std::string& what) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) throw std::runtime_error("cannot open " + what + " file '" + path + "'");
  const auto bytes = static_cast<int64_t>(file.tellg());
  const int64_t expected = count * static_cast<int64_t>(sizeof(float));
  if (bytes != expected) {
    throw std::runtime_error(what + " file '" + path + "' has " + std::to_string(bytes) +
                             " bytes; the model needs exactly " + std::to_string(expected) + " (" +
                             std::to_string(count) + " little-endian float32 values)");
  }
  std::vector<float> values(static_cast<size_t>(count));
  file.seekg(0);
  if (!file.read(reinterpret_cast<char*>(values.data()), expected))
    throw std::runtime_error("cannot read " + what + " file '" + path + "'");
  return values;
}

void write_floats(const std::string& path, const std::vector<float>& values) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file ||
      !file.write(reinterpret_cast<const char*>(values.data()),
                  static_cast<std::streamsize>(values.size() * sizeof(float))) ||
      !file.flush()) {
    throw std::runtime_error("cannot write the output file '" + path + "'");
  }
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// The reference executor's output for `input` on the ONNX model at `path`: the graph output
/// named `output_name`, else its only output.
std::vector<float> reference_output(const std::string& path, const std::string& input_name,
                                    const std::vector<int64_t>& input_shape,
                                    const std::vector<float>& input,
                                    const std::string& output_name) {
  graph::ImportReport report;
  const graph::Graph graph = graph::import_onnx_file(path, {}, &report);
  if (!report.unsupported.empty()) {
    std::string ops;
    for (const auto& [op, count] : report.unsupported) ops += (ops.empty() ? "" : ", ") + op;
    throw std::runtime_error("the reference executor does not run " + ops + " of '" + path + "'");
  }
  graph::ExecuteOptions options;
  options.opset = report.opset;
  graph::ValueMap inputs;
  inputs[input_name] = graph::Value::floats(input_shape, input);
  const graph::ValueMap outputs = graph::execute(graph, inputs, options);
  auto it = outputs.find(output_name);
  if (it == outputs.end()) {
    if (outputs.size() != 1) {
      throw std::runtime_error("the reference model '" + path + "' has no output '" + output_name +
                               "'");
    }
    it = outputs.begin();
  }
  return it->second.data;
}

int run_model(const RunArgs& args) {
  ModelRunner runner(args.model, EglContext::create());
  const deploy::Manifest& manifest = runner.manifest();
  const std::vector<float> input = read_floats(args.input, runner.input_elements(), "input");

  const GlDeviceInfo& info = runner.info();
  std::printf("model     %s  target %s  device %s\n", manifest.model.name.c_str(),
              manifest.target.c_str(), info.renderer.c_str());
  std::printf("steps     %zu (%d kernel steps, %d distinct kernels)\n", manifest.steps.size(),
              runner.kernel_steps(), runner.kernels());
  std::printf("input     '%s' %s from %s\n", manifest.inputs[0].name.c_str(),
              shape_string(runner.input_shape()).c_str(), args.input.c_str());
  std::fflush(stdout);

  using Clock = std::chrono::steady_clock;
  std::vector<float> output;
  for (int w = 0; w < args.warmup; ++w) output = runner.run(input);
  std::vector<double> ms;
  for (int r = 0; r < args.runs; ++r) {
    const auto start = Clock::now();
    output = runner.run(input);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::printf("latency   median %.3f ms  min %.3f ms  max %.3f ms  (%d runs after %d warm-up)\n",
              median(ms), *std::min_element(ms.begin(), ms.end()),
              *std::max_element(ms.begin(), ms.end()), args.runs, args.warmup);
  std::printf("output    '%s' %s\n", manifest.outputs[0].name.c_str(),
              shape_string(runner.output_shape()).c_str());
  if (args.profile) print_profile(runner, input);

  for (float v : output) {
    if (!std::isfinite(v)) {
      spdlog::error("the output holds a value that is not finite ({})", v);
      return 1;
    }
  }
  const int k = std::min<int>(args.top, static_cast<int>(output.size()));
  std::vector<int> order(output.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return output[a] > output[b] || (output[a] == output[b] && a < b);
  });
  std::printf("top-%d\n", k);
  for (int i = 0; i < k; ++i)
    std::printf("  %d  %6d  %.6g\n", i + 1, order[static_cast<size_t>(i)],
                output[static_cast<size_t>(order[static_cast<size_t>(i)])]);

  if (!args.output.empty()) {
    write_floats(args.output, output);
    spdlog::info("wrote {} floats to {}", output.size(), args.output);
  }

  int status = 0;
  if (!args.reference.empty()) {
    const std::vector<float> expected =
        reference_output(args.reference, manifest.inputs[0].name, runner.input_shape(), input,
                         manifest.outputs[0].name);
    if (expected.size() != output.size()) {
      throw std::runtime_error("the reference output has " + std::to_string(expected.size()) +
                               " values, the package's " + std::to_string(output.size()));
    }
    double max_error = 0, max_logit = 0;
    for (size_t i = 0; i < output.size(); ++i) {
      max_error = std::max(max_error, std::fabs(double{output[i]} - double{expected[i]}));
      max_logit = std::max(max_logit, std::fabs(double{expected[i]}));
    }
    const double limit = 1e-3 * max_logit;
    const bool ok = max_error <= limit;
    std::printf("reference max abs error %.3g, max |logit| %.4g (limit %.3g): %s\n", max_error,
                max_logit, limit, ok ? "ok" : "FAILED");
    if (!ok) {
      spdlog::error(
          "the package's output differs from the reference executor's by {:.3g} (> {:.3g})",
          max_error, limit);
      status = 1;
    }
  }
  return status;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a gles-frag / gles-compute model package (webtune build) on the local GL device "
      "through headless EGL: end-to-end latency, top-K classes, and the check against the CPU "
      "reference executor");
  cmd->add_option("--model", args->model,
                  "package directory (manifest.json, weights.bin, kernels/)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--input", args->input,
                  "raw little-endian float32 input file, exactly the input's element count "
                  "(row-major, e.g. 1x3x224x224 = 602112 bytes)")
      ->required();
  cmd->add_option("--output", args->output, "write the last run's output here (raw float32)");
  cmd->add_option("--runs", args->runs, "timed runs (each: upload + every step + read-back)")
      ->check(int_range(1, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--warmup", args->warmup,
                  "untimed runs before them (the first run checks GL "
                  "errors after every step)")
      ->check(int_range(0, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--reference", args->reference,
                  "the ONNX model: run the CPU reference executor on the same input and fail "
                  "when max abs error > 1e-3 x max |logit|");
  cmd->add_flag("--profile", args->profile,
                "after the timed runs, time every step of one more run (GPU timestamps where "
                "the context has GL_EXT_disjoint_timer_query, else each step alone) and print "
                "them beside the tasks' recorded costs");
  cmd->add_option("--top", args->top, "classes to print (largest outputs)")
      ->check(int_range(0, 1'000'000))
      ->capture_default_str();
  cmd->footer(
      "Output (latency, top-K, reference check) goes to stdout, logs and errors to stderr.\n"
      "Exit status: 0 = ran (and matched the reference when --reference is given); 1 = an error "
      "(missing or bad package, input file of the wrong size, a failing step: the message names "
      "the step, its node and kernel file) or a reference mismatch; other non-zero values are "
      "option errors.");
  cmd->callback([args] {
    const int code = run_model(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace webtune::cli
