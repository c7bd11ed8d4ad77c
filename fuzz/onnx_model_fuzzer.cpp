/// \file onnx_model_fuzzer.cpp
/// libFuzzer harness for ONNX import (graph/onnx_import.hpp): the input is a model file's bytes,
/// as `webtune import` and `webtune tune --model` read them from a stranger.
///
/// Asserts: only graph::GraphError escapes, with a message; a graph that imports passes
/// validate(), every tensor has a known shape and every constant holds exactly its shape's
/// element count; the fusion passes and task extraction then run on it (what `webtune import`
/// does), throwing only GraphError, and every task's workload validates. The seed corpus
/// (fuzz/corpus/onnx_model/) is small node models of Debian's libonnx-testdata, one per operator
/// family the importer meets in real models.
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "graph/task_extraction.hpp"

using webtune::fuzz::check;
using webtune::fuzz::throws_only;
namespace graph = webtune::graph;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  graph::ImportOptions options;
  options.symbolic_dims["*"] = 1;  // reach shape inference for dynamic inputs too
  graph::Graph g;
  if (!throws_only<graph::GraphError>(
          "import_onnx_bytes", [&] { g = graph::import_onnx_bytes(bytes, "fuzz.onnx", options); }))
    return 0;
  throws_only<>("validate", [&] { g.validate(); });
  for (const auto& [name, t] : g.tensors) {
    for (int64_t d : t.shape) check(d >= 0, "tensor '" + name + "' has a negative dimension");
    if (t.float_data)
      check(static_cast<int64_t>(t.float_data->size()) == t.elements(),
            "constant '" + name + "' does not fill its shape");
    if (t.int_data)
      check(static_cast<int64_t>(t.int_data->size()) == t.elements(),
            "constant '" + name + "' does not fill its shape");
  }
  if (!throws_only<graph::GraphError>("run_fusion_passes", [&] { graph::run_fusion_passes(g); }))
    return 0;
  graph::Extraction extraction;
  if (!throws_only<graph::GraphError>("extract_tasks",
                                      [&] { extraction = graph::extract_tasks(g); }))
    return 0;
  for (const auto& task : extraction.tasks) {
    throws_only<>("Workload::validate", [&] { task.workload.validate(); });
    check(task.weight >= 1, "task " + task.workload.key() + " has weight < 1");
  }
  return 0;
}
