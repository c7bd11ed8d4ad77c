/// \file import_command.cpp
/// `webtune import MODEL.onnx [-o tasks.json] [--dim NAME=VALUE ...] [--no-fusion]`: imports an
/// ONNX model (graph/onnx_import.hpp), runs the fusion passes (graph/passes.hpp), extracts its
/// tuning tasks (graph/task_extraction.hpp) and prints a summary on stdout: the model, what
/// import-time simplification folded (graph/simplify.hpp), op counts
/// before and after fusion, unsupported operators, nodes no workload fits, and the task table.
/// With -o it writes the tasks as a workload file that `webtune tune --workload` reads.
///
/// A model the importer refuses (GraphError: not ONNX, truncated, unknown shapes, ...) ends
/// with its message on stderr and exit status 2, and nothing on stdout. An unsupported operator
/// is no error: it is listed with its count and the tasks the model has are still extracted.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "graph/task_extraction.hpp"
#include "option_checks.hpp"

namespace webtune::cli {

namespace {

struct ImportArgs {
  std::string model, output, name;
  std::vector<std::string> dims;
  bool no_fusion = false;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// "1x64x56x56 K64 3x3 s1 p1", "1x32x112x112 3x3 s2 p1" (depthwise), "M1 N1000 K512".
std::string shapes_text(const Workload& w) {
  auto s = [](int64_t v) { return std::to_string(v); };
  if (w.op == OpKind::kDense) return "M" + s(w.m) + " N" + s(w.n) + " K" + s(w.k);
  std::string text = s(w.batch) + "x" + s(w.in_channels) + "x" + s(w.height) + "x" + s(w.width);
  if (w.op == OpKind::kConv2d) text += " K" + s(w.out_channels);
  return text + " " + s(w.kernel_h) + "x" + s(w.kernel_w) + " s" + s(w.stride) + " p" + s(w.pad);
}

void print_summary(const ImportArgs& args, const graph::Graph& graph,
                   const graph::ImportReport& report, const std::map<std::string, int>& ops_before,
                   const graph::PassReport* passes, const graph::Extraction& extraction) {
  std::printf("model: %s\n", args.model.c_str());
  const std::string downgraded =
      report.downgraded_from
          ? " (rewritten from opset " + std::to_string(report.downgraded_from) + ")"
          : "";
  std::printf("graph '%s': IR version %lld, opset %lld%s, producer %s\n", graph.name.c_str(),
              static_cast<long long>(report.ir_version), static_cast<long long>(report.opset),
              downgraded.c_str(), report.producer.empty() ? "(none)" : report.producer.c_str());
  std::printf("simplified: %s\n", report.simplified.summary().c_str());
  for (const std::string& input : graph.inputs)
    std::printf("input  %s %s %s\n", input.c_str(), shape_text(graph.tensor(input).shape).c_str(),
                std::string(graph::data_type_name(graph.tensor(input).type)).c_str());
  for (const std::string& output : graph.outputs)
    std::printf("output %s %s %s\n", output.c_str(), shape_text(graph.tensor(output).shape).c_str(),
                std::string(graph::data_type_name(graph.tensor(output).type)).c_str());

  const std::map<std::string, int> ops_after = graph.op_counts();
  int before_total = 0, after_total = 0;
  for (const auto& [op, n] : ops_before) before_total += n;
  for (const auto& [op, n] : ops_after) after_total += n;
  if (passes) {
    std::printf("\noperators: %d nodes before fusion, %d after (", before_total, after_total);
    for (size_t i = 0; i < passes->entries.size(); ++i)
      std::printf("%s%s %d", i ? ", " : "", passes->entries[i].pass.c_str(),
                  passes->entries[i].rewrites);
    std::printf(")\n  %-22s %7s %7s\n", "op", "before", "after");
    std::map<std::string, std::pair<int, int>> both;
    for (const auto& [op, n] : ops_before) both[op].first = n;
    for (const auto& [op, n] : ops_after) both[op].second = n;
    for (const auto& [op, n] : both)
      std::printf("  %-22s %7d %7d\n", op.c_str(), n.first, n.second);
  } else {
    std::printf("\noperators: %d nodes (fusion off: --no-fusion)\n  %-22s %7s\n", before_total,
                "op", "nodes");
    for (const auto& [op, n] : ops_before) std::printf("  %-22s %7d\n", op.c_str(), n);
  }

  if (report.unsupported.empty()) {
    std::printf("\nunsupported operators: none\n");
  } else {
    std::printf(
        "\nunsupported operators (kept as graph nodes; the reference executor and the "
        "deployment cannot run them):\n");
    for (const auto& [op, n] : report.unsupported) std::printf("  %-22s %7d\n", op.c_str(), n);
  }
  if (!extraction.not_tunable.empty()) {
    std::printf("\nnot tunable (no workload fits these nodes; they are not tuned):\n");
    for (const auto& [node, why] : extraction.not_tunable)
      std::printf("  %s: %s\n", node.c_str(), why.c_str());
  }

  int nodes = 0;
  double total_mflop = 0;
  for (const graph::ExtractedTask& t : extraction.tasks) {
    nodes += t.weight;
    total_mflop += t.weight * t.workload.flops() / 1e6;
  }
  std::printf("\n%zu task%s (%d node%s, %.1f MFLOP per run)\n", extraction.tasks.size(),
              extraction.tasks.size() == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s", total_mflop);
  if (extraction.tasks.empty()) return;
  std::printf("  %-20s %-17s %-28s %-24s %6s %10s\n", "name", "op", "shapes", "epilogue", "weight",
              "MFLOP");
  for (const graph::ExtractedTask& t : extraction.tasks) {
    const std::string suffix = t.workload.epilogue.suffix();
    std::printf("  %-20s %-17s %-28s %-24s %6d %10.2f\n", t.workload.name.c_str(),
                std::string(op_name(t.workload.op)).c_str(), shapes_text(t.workload).c_str(),
                suffix.empty() ? "-" : suffix.substr(1).c_str(), t.weight,
                t.workload.flops() / 1e6);
  }
}

void run_import(const ImportArgs& args) {
  graph::ImportOptions options;
  options.symbolic_dims = symbolic_dims(args.dims);
  try {
    graph::ImportReport report;
    graph::Graph graph = graph::import_onnx_file(args.model, options, &report);
    const std::map<std::string, int> ops_before = graph.op_counts();
    std::optional<graph::PassReport> passes;
    if (!args.no_fusion) passes = graph::run_fusion_passes(graph);
    const graph::Extraction extraction = graph::extract_tasks(graph);
    if (!args.output.empty()) {
      const std::string stem = std::filesystem::path(args.model).stem().string();
      const std::string name = args.name.empty() ? stem : args.name;
      const std::string description =
          "The tuning tasks of " + std::filesystem::path(args.model).filename().string() +
          (args.no_fusion ? " (no fusion)" : " (fused)") +
          ", extracted by webtune import: occurrences = how many nodes run each task (its "
          "weight), nodes = their names.";
      graph::write_workload_file(args.output, name, extraction, description);
    }
    print_summary(args, graph, report, ops_before, passes ? &*passes : nullptr, extraction);
    if (!args.output.empty())
      spdlog::info("wrote {} task{} to {}", extraction.tasks.size(),
                   extraction.tasks.size() == 1 ? "" : "s", args.output);
  } catch (const graph::GraphError& e) {
    spdlog::error("import: {}", e.what());
    throw CLI::RuntimeError(2);
  }
}

}  // namespace

void add_import_command(CLI::App& app) {
  auto args = std::make_shared<ImportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "import", "Import an ONNX model: fuse its operators, list its tuning tasks (and write them)");
  cmd->add_option("model", args->model, "the ONNX model file (.onnx)")->required();
  cmd->add_option("-o,--output", args->output,
                  "write the tasks as a workload file (JSON) for `webtune tune --workload`");
  cmd->add_option("--name", args->name,
                  "the workload file's name field (default: the model file's stem)");
  cmd->add_option("--dim", args->dims,
                  "NAME=VALUE: a value for a symbolic input dimension, e.g. batch_size=1; "
                  "*=VALUE binds every symbolic dimension not named (repeatable)")
      ->check(dim_binding());
  cmd->add_flag("--no-fusion", args->no_fusion,
                "skip the fusion passes: one task per Conv / Gemm / MatMul shape, with only the "
                "nodes' own bias inputs as epilogue");
  cmd->callback([args] { run_import(*args); });
}

}  // namespace webtune::cli
