#pragma once
/// \file operators.hpp
/// The ONNX operators webtune's graph layer accepts: the ones its CPU reference executor
/// (executor.hpp) runs (the deployment builds each target's subset of them, deploy/). The
/// importer (onnx_import.hpp) keeps any other operator as a node and counts it as unsupported.

#include <string>
#include <string_view>
#include <vector>

namespace webtune::graph {

/// ONNX op types of the default domain that the executor runs, sorted; plus webtune's fused
/// operators ("FusedConv", "FusedGemm", "FusedMatMul"; graph.hpp).
const std::vector<std::string>& supported_operators();

/// Whether `op_type` is in supported_operators().
bool is_supported_operator(std::string_view op_type);

}  // namespace webtune::graph
