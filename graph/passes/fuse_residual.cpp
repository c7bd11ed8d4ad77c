/// \file fuse_residual.cpp
/// Residual epilogues (passes.hpp): Add(y, r) after a Conv / Gemm / MatMul, r another tensor of
/// exactly y's shape, becomes epilogue.residual with r as the fused node's last input.
///
/// Why: residual networks (ResNet, MobileNet-v2's inverted residuals) add a block's input to its
/// last conv's output, a full read of both and a write when run apart. Conditions:
///  - r is not a constant (a constant is a bias, fuse_bias, or no epilogue at all) and not y;
///  - r has exactly y's shape, which is the Add's output shape: a broadcasting operand would
///    need the codegen to index it differently, so it stays an Add;
///  - y is read by the Add alone and is not a graph output. That also rules out a cycle: r
///    cannot be computed from y, since y has no other reader. The fused node takes the Add's
///    place, after r's producer, so the order stays topological;
///  - the node has no residual yet. Before its activation when it has none yet (ResNet:
///    Conv → Add → Relu; fuse_activation then adds the relu), after it when the activation is
///    already fused (Conv → Relu → Add). A residual with no activation is "before", as
///    Epilogue::parse makes it (MobileNet-v2's projection conv + bias + residual).
/// When both operands qualify (ResNet's downsample block: two conv chains meet), operand 0
/// takes the residual, as bench/extract_conv_layers.py decides: PyTorch exports
/// `out += identity` as Add(out, identity), the main path first; when operand 0 does not
/// qualify, operand 1 is tried.

#include "graph/passes.hpp"
#include "passes/fusion_util.hpp"

namespace webtune::graph {

namespace {

int try_residual(detail::Sweep& sweep, size_t index) {
  Graph& graph = sweep.graph;
  const Node& add = graph.nodes[index];
  if (add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) return 0;
  const std::string& out = add.outputs[0];
  for (int k = 0; k < 2; ++k) {
    const std::string& y = add.inputs[k];
    const std::string& r = add.inputs[1 - k];
    if (y.empty() || r.empty() || y == r || !graph.has_tensor(y) || !graph.has_tensor(r)) continue;
    const Tensor& residual = graph.tensor(r);
    if (residual.is_constant() || residual.type != DataType::kFloat32) continue;
    const std::vector<int64_t>& shape = graph.tensor(y).shape;
    if (residual.shape != shape || graph.tensor(out).shape != shape) continue;
    const std::optional<size_t> p = sweep.uses.producer(y);
    if (!p || !sweep.free(*p) || !sweep.uses.fusable(y)) continue;
    if (!detail::can_take_residual(graph.nodes[*p])) continue;
    std::optional<Node> fused = detail::fused_form(graph, graph.nodes[*p]);
    if (!fused) continue;
    fused->epilogue.residual = fused->epilogue.activation == Activation::kNone
                                   ? Residual::kBeforeActivation
                                   : Residual::kAfterActivation;
    fused->inputs.push_back(r);
    sweep.absorb(*p, index, std::move(*fused));
    return 1;
  }
  return 0;
}

}  // namespace

int fuse_residual(Graph& graph) {
  return detail::run_sweeps(graph, try_residual);
}

}  // namespace webtune::graph
