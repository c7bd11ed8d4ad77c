/// \file fuse_bias.cpp
/// Bias epilogues (passes.hpp): a Conv's own B and a Gemm's own C, and an Add of a per-channel
/// constant after a Conv / Gemm / MatMul, become epilogue.bias with a 1-D [C_out] bias input.
///
/// Why: exporters write a layer's bias in either form (PyTorch: Conv's B, Gemm's C; TensorFlow
/// and hand-built graphs: MatMul + Add), and a separate Add is a full pass over the output. A
/// bias is one value per output channel, so only a constant that broadcasts that way qualifies:
/// for a conv [1,C,1,1], [C,1,1] or one value ([C] alone would broadcast along W); for a 2-D
/// Gemm / MatMul output [N], [1,N] or one value. An Add whose constant varies along another axis
/// ([1,C,H,W], [M,N]) is not a bias and stays an Add. The Add folds into an existing constant
/// bias (their sum, a new constant) only while no activation or residual is fused yet: the bias
/// comes first in the epilogue's op order. A Gemm with alpha ≠ 1 or another C has no fused form
/// (fusion_util.hpp, fused_form) and keeps its Add.

#include "graph/passes.hpp"
#include "passes/fusion_util.hpp"

namespace webtune::graph {

namespace {

/// Step 1: Conv with B, Gemm with C → fused form in place.
int try_own_bias(detail::Sweep& sweep, size_t index) {
  const Node& node = sweep.graph.nodes[index];
  const bool conv_b = node.op_type == "Conv" && node.inputs.size() > 2 && !node.inputs[2].empty();
  const bool gemm_c = node.op_type == "Gemm" && node.inputs.size() > 2 && !node.inputs[2].empty();
  if (!conv_b && !gemm_c) return 0;
  std::optional<Node> fused = detail::fused_form(sweep.graph, node);
  if (!fused) return 0;
  sweep.replace(index, std::move(*fused));
  return 1;
}

/// Step 2: main node → Add(y, constant) or Add(constant, y).
int try_add(detail::Sweep& sweep, size_t index) {
  Graph& graph = sweep.graph;
  const Node& add = graph.nodes[index];
  if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) return 0;
  for (int k = 0; k < 2; ++k) {
    const std::string& y = add.inputs[k];
    const std::string& c = add.inputs[1 - k];
    if (y.empty() || c.empty() || !graph.has_tensor(c) || !graph.tensor(c).is_constant()) continue;
    const std::optional<size_t> p = sweep.uses.producer(y);
    if (!p || !sweep.free(*p) || !sweep.uses.fusable(y)) continue;
    const Node& main = graph.nodes[*p];
    if (!detail::can_take_bias(main)) continue;
    const std::vector<int64_t>& out_shape = graph.tensor(y).shape;
    const bool conv = main.op_type == "Conv" || main.op_type == "FusedConv";
    if (!conv && out_shape.size() != 2) continue;  // Gemm / MatMul: a 2-D output only
    const Tensor& constant = graph.tensor(c);
    std::optional<std::vector<float>> values = detail::per_channel_values(
        constant, out_shape, detail::channel_axis(main, out_shape.size()));
    if (!values) continue;
    std::optional<Node> fused = detail::fused_form(graph, main);
    if (!fused) continue;
    const int64_t channels = static_cast<int64_t>(values->size());
    std::string bias;
    if (fused->epilogue.bias) {
      const std::string old = fused->inputs.at(2);
      const Tensor& old_bias = graph.tensor(old);
      // An existing bias must be a constant [C] to be summed with the Add's: a Conv's B
      // computed by the graph cannot absorb it. (fused_form made no constant for a Conv.)
      if (!old_bias.float_data || old_bias.shape != std::vector<int64_t>{channels}) continue;
      std::vector<float> sum = *old_bias.float_data;
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += (*values)[j];
      bias = detail::add_constant(graph, old + "_plus_" + c, {channels}, std::move(sum));
      sweep.orphan(old);
      fused->inputs[2] = bias;
    } else {
      bias = constant.shape == std::vector<int64_t>{channels}
                 ? c
                 : detail::add_constant(graph, c + "_bias", {channels}, std::move(*values));
      fused->inputs.push_back(bias);
      fused->epilogue.bias = true;
    }
    sweep.absorb(*p, index, std::move(*fused));
    return 1;
  }
  return 0;
}

}  // namespace

int fuse_bias(Graph& graph) {
  const int own = detail::run_sweeps(graph, try_own_bias);
  return own + detail::run_sweeps(graph, try_add);
}

}  // namespace webtune::graph
