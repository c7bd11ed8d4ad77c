/// \file operators.cpp
/// The list of operators the graph layer accepts (operators.hpp).

#include "graph/operators.hpp"

#include <algorithm>

namespace webtune::graph {

const std::vector<std::string>& supported_operators() {
  // Keep sorted: is_supported_operator() searches it. Every entry has a kernel in executor.cpp.
  static const std::vector<std::string> ops = {
      "Add",
      "AveragePool",
      "BatchNormalization",
      "Clip",
      "Concat",
      "Conv",
      "Div",
      "Dropout",
      "Flatten",
      "FusedConv",
      "FusedGemm",
      "FusedMatMul",
      "Gemm",
      "GlobalAveragePool",
      "HardSigmoid",
      "HardSwish",
      "Identity",
      "MatMul",
      "MaxPool",
      "Mul",
      "Relu",
      "Reshape",
      "Sigmoid",
      "Softmax",
      "Sub",
      "Transpose",
  };
  return ops;
}

bool is_supported_operator(std::string_view op_type) {
  const auto& ops = supported_operators();
  return std::binary_search(ops.begin(), ops.end(), op_type,
                            [](std::string_view a, std::string_view b) { return a < b; });
}

}  // namespace webtune::graph
