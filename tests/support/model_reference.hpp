/// \file model_reference.hpp
/// The graph reference executor's output for a model file, as the whole-model tests compare
/// packages against it. Header-only.
#pragma once

#include <filesystem>
#include <vector>

#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"

namespace webtune::testing_support {

/// The reference executor's output of the (single-input, single-output) model at `onnx` on
/// `input` (row-major, the input's shape). Throws graph::GraphError for a model it refuses.
inline std::vector<float> reference_logits(const std::filesystem::path& onnx,
                                           const std::vector<float>& input) {
  graph::ImportReport report;
  const graph::Graph g = graph::import_onnx_file(onnx.string(), {}, &report);
  graph::ExecuteOptions options;
  options.opset = report.opset;
  const auto& name = g.inputs.at(0);
  graph::ValueMap inputs{{name, graph::Value::floats(g.tensor(name).shape, input)}};
  return graph::execute(g, inputs, options).at(g.outputs.at(0)).data;
}

}  // namespace webtune::testing_support
