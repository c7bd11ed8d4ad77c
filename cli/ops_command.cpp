/// \file ops_command.cpp
/// `webtune ops`: the operator table (graph/operators.hpp) — each operator webtune imports, the
/// model opsets whose form it reads, and where a package runs it outside tuned tasks. A table
/// on stdout, or JSON with --json.
#include <boost/json.hpp>
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "graph/operators.hpp"

namespace webtune::cli {
namespace {

std::string runs_text(unsigned runs) {
  if (runs & graph::kRunsAsAlias) return "alias";
  std::string text;
  if (runs & graph::kRunsOnGpu) text += "webgl2 webgpu gles-frag gles-compute";
  if (runs & graph::kRunsInWasmJs) text += std::string(text.empty() ? "" : " ") + "wasm";
  return text.empty() ? "reference only" : text;
}

}  // namespace

void add_ops_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "ops",
      "List the operators webtune imports: opsets read, and the targets that run each one "
      "outside tuned tasks");
  static bool json = false;
  cmd->add_flag("--json", json, "One JSON array on stdout instead of the table");
  cmd->callback([] {
    if (json) {
      boost::json::array out;
      for (const graph::OperatorInfo& info : graph::operator_table()) {
        boost::json::array targets;
        if (info.runs & graph::kRunsOnGpu)
          for (const char* t : {"webgl2", "webgpu", "gles-frag", "gles-compute"})
            targets.push_back(boost::json::string(t));
        if (info.runs & graph::kRunsInWasmJs) targets.push_back("wasm");
        out.push_back(boost::json::object{{"op", std::string(info.name)},
                                          {"first_opset", info.first_opset},
                                          {"last_opset", info.last_opset},
                                          {"forms", std::string(info.forms)},
                                          {"alias", (info.runs & graph::kRunsAsAlias) != 0},
                                          {"targets", std::move(targets)}});
      }
      std::puts(boost::json::serialize(out).c_str());
      return;
    }
    std::printf("%-22s %-7s %-45s %s\n", "operator", "opsets", "packages run it on", "forms");
    for (const graph::OperatorInfo& info : graph::operator_table()) {
      const std::string opsets =
          std::to_string(info.first_opset) + "-" + std::to_string(info.last_opset);
      std::printf("%-22s %-7s %-45s %s\n", std::string(info.name).c_str(), opsets.c_str(),
                  runs_text(info.runs).c_str(), std::string(info.forms).c_str());
    }
    std::printf(
        "\nConv, Gemm and MatMul nodes that a workload fits run as tuned tasks on every target; "
        "\"alias\" operators run nowhere (their output shares the input's storage).\n");
  });
}

}  // namespace webtune::cli
