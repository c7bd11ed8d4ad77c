/// \file fold_batch_norm.cpp
/// Folds an inference BatchNormalization into the convolution before it (passes.hpp).
///
/// BatchNormalization in inference mode is a per-channel affine map y = (x − mean)·s + B with
/// s = scale / √(var + ε). After a convolution x = W ⊛ X + b it is again a convolution:
/// W' = W·s per output channel m, b' = (b − mean)·s + B. Folding it removes a full pass over
/// the activation and leaves a plain Conv + bias for fuse_bias (TVM's SimplifyInference +
/// FoldScaleAxis do the same; PyTorch's exporter folds it itself with constant folding on, so
/// ../shared/models have none left). Only when every operand is a constant: W, b and the four
/// statistics; the intermediate x must be read by the BatchNormalization alone and not be a
/// graph output. The products are computed in double and rounded once to fp32. New constants
/// get fresh names: the original weight may be shared with another node.

#include <cmath>

#include "graph/passes.hpp"
#include "passes/fusion_util.hpp"

namespace webtune::graph {

namespace {

/// The float data of constant `name` when it holds exactly `count` values in shape [count].
const std::vector<float>* vector_constant(const Graph& graph, const std::string& name,
                                          int64_t count) {
  if (name.empty() || !graph.has_tensor(name)) return nullptr;
  const Tensor& t = graph.tensor(name);
  if (!t.float_data || t.shape != std::vector<int64_t>{count}) return nullptr;
  return &*t.float_data;
}

int try_fold(detail::Sweep& sweep, size_t index) {
  Graph& graph = sweep.graph;
  const Node& bn = graph.nodes[index];
  if (bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || bn.outputs.empty() ||
      bn.outputs[0].empty())
    return 0;
  // Inference mode: the running statistics outputs (training only) absent.
  for (size_t k = 1; k < bn.outputs.size(); ++k)
    if (!bn.outputs[k].empty()) return 0;
  double epsilon = 1e-5;
  try {
    if (bn.get_int("training_mode", 0) != 0 || bn.get_int("spatial", 1) != 1) return 0;
    epsilon = bn.get_float("epsilon", 1e-5f);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  const std::string& x = bn.inputs[0];
  const std::optional<size_t> p = sweep.uses.producer(x);
  if (!p || !sweep.free(*p) || !sweep.uses.fusable(x)) return 0;
  const Node& conv = graph.nodes[*p];
  if (conv.op_type != "Conv" && conv.op_type != "FusedConv") return 0;
  if (!detail::can_take_bias(conv) || conv.outputs.size() != 1 || conv.inputs.size() < 2 ||
      conv.inputs[1].empty())
    return 0;
  const Tensor& weight = graph.tensor(conv.inputs[1]);
  if (!weight.float_data || weight.shape.size() != 4) return 0;
  const int64_t channels = weight.shape[0];
  const std::string bias_name = conv.inputs.size() > 2 ? conv.inputs[2] : std::string();
  const std::vector<float>* bias = nullptr;
  if (!bias_name.empty() && !(bias = vector_constant(graph, bias_name, channels))) return 0;
  const std::vector<float>* scale = vector_constant(graph, bn.inputs[1], channels);
  const std::vector<float>* shift = vector_constant(graph, bn.inputs[2], channels);
  const std::vector<float>* mean = vector_constant(graph, bn.inputs[3], channels);
  const std::vector<float>* var = vector_constant(graph, bn.inputs[4], channels);
  if (!scale || !shift || !mean || !var) return 0;

  const std::vector<float>& w = *weight.float_data;
  const size_t per_channel = w.size() / static_cast<size_t>(channels);
  std::vector<float> new_w(w.size()), new_b(static_cast<size_t>(channels));
  for (size_t m = 0; m < static_cast<size_t>(channels); ++m) {
    const double s = static_cast<double>((*scale)[m]) / std::sqrt((*var)[m] + epsilon);
    for (size_t j = 0; j < per_channel; ++j)
      new_w[m * per_channel + j] = static_cast<float>(w[m * per_channel + j] * s);
    const double b = bias ? (*bias)[m] : 0.0;
    new_b[m] = static_cast<float>((b - (*mean)[m]) * s + (*shift)[m]);
  }
  Node folded = conv;
  const std::string base = detail::node_label(conv);
  folded.inputs.resize(3);
  folded.inputs[1] =
      detail::add_constant(graph, weight.name + "_bn_folded", weight.shape, std::move(new_w));
  folded.inputs[2] =
      detail::add_constant(graph, (bias_name.empty() ? base + "_bias" : bias_name) + "_bn_folded",
                           {channels}, std::move(new_b));
  if (folded.op_type == "FusedConv") folded.epilogue.bias = true;
  sweep.absorb(*p, index, std::move(folded));
  return 1;
}

}  // namespace

int fold_batch_norm(Graph& graph) {
  return detail::run_sweeps(graph, try_fold);
}

}  // namespace webtune::graph
