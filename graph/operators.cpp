/// \file operators.cpp
/// The operator table (operators.hpp). One row per operator: its name, the model opsets whose
/// form is read, the forms that differ by opset, its reference kernel (graph/kernels/), where
/// packages run it, and which inputs are build-time parameters. Keep it sorted by name.

#include "graph/operators.hpp"

#include <algorithm>

#include "kernels/kernels.hpp"

namespace webtune::graph {

const std::vector<OperatorInfo>& operator_table() {
  static const std::vector<OperatorInfo> table = {
      {"Abs", 7, 22, "", kernels::signed_unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Add", 7, 22, "", kernels::arithmetic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"And", 7, 22, "", kernels::logical, 0, 0b0},
      {"AveragePool", 7, 22, "count_include_pad from 7; dilations from 19 (read at any opset)",
       kernels::average_pool, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"BatchNormalization", 7, 22, "inference only; spatial 1 (the default before 9)",
       kernels::batch_normalization, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Cast", 7, 22, "", kernels::cast, 0, 0b0},
      {"Ceil", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Clip", 7, 22, "min / max attributes before 11, optional inputs 1, 2 from 11", kernels::clip,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Concat", 7, 22, "", kernels::concat, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"ConstantOfShape", 9, 22, "", kernels::constant_of_shape, 0, 0b1},
      {"Conv", 7, 22, "", kernels::conv, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"ConvTranspose", 7, 22, "", kernels::conv_transpose, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Div", 7, 22, "", kernels::arithmetic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Dropout", 7, 22,
       "ratio an attribute before 12, inputs ratio, training_mode from 12 (inference)",
       kernels::dropout, kRunsOnGpu | kRunsInWasmJs | kRunsAsAlias, 0b110},
      {"Elu", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Equal", 7, 22, "", kernels::compare, 0, 0b0},
      {"Erf", 9, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Exp", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Expand", 8, 22, "", kernels::expand, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"Flatten", 7, 22, "", kernels::flatten, kRunsOnGpu | kRunsInWasmJs | kRunsAsAlias, 0b0},
      {"Floor", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"FusedConv", 7, 22, "webtune's Conv + epilogue (graph.hpp)", kernels::conv,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"FusedGemm", 7, 22, "webtune's Gemm + epilogue (graph.hpp)", kernels::gemm,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"FusedMatMul", 7, 22, "webtune's MatMul + epilogue (graph.hpp)", kernels::matmul,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Gather", 7, 22, "", kernels::gather, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"GatherElements", 11, 22, "", kernels::gather_elements, 0, 0b0},
      {"Gelu", 20, 22, "approximate none / tanh", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Gemm", 7, 22, "", kernels::gemm, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"GlobalAveragePool", 7, 22, "", kernels::global_average_pool, kRunsOnGpu | kRunsInWasmJs,
       0b0},
      {"GlobalMaxPool", 7, 22, "", kernels::global_max_pool, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Greater", 7, 22, "", kernels::compare, 0, 0b0},
      {"GreaterOrEqual", 12, 22, "", kernels::compare, 0, 0b0},
      {"HardSigmoid", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"HardSwish", 14, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Identity", 7, 22, "", kernels::identity, kRunsOnGpu | kRunsInWasmJs | kRunsAsAlias, 0b0},
      {"InstanceNormalization", 7, 22, "", kernels::instance_normalization,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"LayerNormalization", 17, 22, "", kernels::layer_normalization, kRunsOnGpu | kRunsInWasmJs,
       0b0},
      {"LeakyRelu", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Less", 7, 22, "", kernels::compare, 0, 0b0},
      {"LessOrEqual", 12, 22, "", kernels::compare, 0, 0b0},
      {"Log", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"LogSoftmax", 7, 22, "2-D coercion at axis before 13, along axis from 13", kernels::softmax,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"MatMul", 7, 22, "", kernels::matmul, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Max", 7, 22, "", kernels::variadic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"MaxPool", 7, 22, "Indices output not in packages", kernels::max_pool,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Mean", 7, 22, "", kernels::variadic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Min", 7, 22, "", kernels::variadic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Mod", 10, 22, "", kernels::arithmetic, 0, 0b0},
      {"Mul", 7, 22, "", kernels::arithmetic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Neg", 7, 22, "", kernels::signed_unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Not", 7, 22, "", kernels::logical_not, 0, 0b0},
      {"Or", 7, 22, "", kernels::logical, 0, 0b0},
      {"PRelu", 7, 22, "", kernels::prelu, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Pad", 7, 22,
       "pads, value attributes before 11, inputs pads, constant_value (axes from 18) from 11",
       kernels::pad, kRunsOnGpu | kRunsInWasmJs, 0b1110},
      {"Pow", 7, 22, "", kernels::arithmetic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Range", 11, 22, "", kernels::range, 0, 0b0},
      {"Reciprocal", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"ReduceL1", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceL2", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceLogSum", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceLogSumExp", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceMax", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceMean", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceMin", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceProd", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceSum", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"ReduceSumSquare", 7, 22,
       "axes an attribute; input 1 for ReduceSum from 13 (all from 18, rewritten at import)",
       kernels::reduce, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"Relu", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Reshape", 7, 22, "shape an attribute before 5 (not read), input 1 from 5", kernels::reshape,
       kRunsOnGpu | kRunsInWasmJs | kRunsAsAlias, 0b10},
      {"Resize", 10, 22,
       "Resize-10: inputs X, scales; from 11: roi, scales, sizes and the coordinate modes",
       kernels::resize, kRunsOnGpu | kRunsInWasmJs, 0b1110},
      {"Round", 11, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Selu", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Shape", 7, 22, "start / end from 15", kernels::shape, 0, 0b0},
      {"Sigmoid", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Sign", 9, 22, "", kernels::signed_unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Size", 7, 22, "", kernels::size, 0, 0b0},
      {"Slice", 7, 22, "starts / ends / axes attributes before 10, inputs (and steps) from 10",
       kernels::slice, kRunsOnGpu | kRunsInWasmJs, 0b11110},
      {"Softmax", 7, 22, "2-D coercion at axis before 13, along axis from 13", kernels::softmax,
       kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Softplus", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Softsign", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Split", 7, 22, "split an attribute before 13, input 1 from 13; packages run it as Slices",
       kernels::split, 0, 0b10},
      {"Sqrt", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Squeeze", 7, 22, "axes an attribute before 13, input 1 from 13", kernels::squeeze,
       kRunsOnGpu | kRunsInWasmJs | kRunsAsAlias, 0b10},
      {"Sub", 7, 22, "", kernels::arithmetic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Sum", 7, 22, "", kernels::variadic, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Tanh", 7, 22, "", kernels::unary, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Tile", 7, 22, "", kernels::tile, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"Transpose", 7, 22, "", kernels::transpose, kRunsOnGpu | kRunsInWasmJs, 0b0},
      {"Unsqueeze", 7, 22, "axes an attribute before 13, input 1 from 13", kernels::unsqueeze,
       kRunsOnGpu | kRunsInWasmJs | kRunsAsAlias, 0b10},
      {"Upsample", 7, 10, "scales an attribute in 7, input 1 from 9; deprecated from 10",
       kernels::resize, kRunsOnGpu | kRunsInWasmJs, 0b10},
      {"Where", 9, 22, "", kernels::where, 0, 0b0},
      {"Xor", 7, 22, "", kernels::logical, 0, 0b0},
  };
  return table;
}

const OperatorInfo* find_operator(std::string_view op_type) {
  const auto& table = operator_table();
  const auto it = std::lower_bound(
      table.begin(), table.end(), op_type,
      [](const OperatorInfo& info, std::string_view name) { return info.name < name; });
  return it != table.end() && it->name == op_type ? &*it : nullptr;
}

const std::vector<std::string>& supported_operators() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const OperatorInfo& info : operator_table()) names.emplace_back(info.name);
    return names;
  }();
  return ops;
}

bool is_supported_operator(std::string_view op_type) {
  return find_operator(op_type) != nullptr;
}

std::vector<std::string> operators_that_run(unsigned runs) {
  std::vector<std::string> names;
  for (const OperatorInfo& info : operator_table())
    if ((info.runs & runs) == runs) names.emplace_back(info.name);
  return names;
}

}  // namespace webtune::graph
