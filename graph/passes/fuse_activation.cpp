/// \file fuse_activation.cpp
/// Activation epilogues (passes.hpp): Relu, Clip (both opset styles), HardSwish and its older
/// spelling Mul(x, HardSigmoid(x)), and SiLU's Mul(x, Sigmoid(x)) after a Conv / Gemm / MatMul
/// become epilogue.activation.
///
/// Why: every CNN layer ends in an activation, a full read and write of the output when run
/// apart. What maps onto codegen's activations (epilogue.hpp):
///  - Relu → relu.
///  - Clip: opset 6 carries min / max as attributes (defaults ∓FLT_MAX); opset 11 made them
///    optional inputs (absent = unbounded); the graph IR has no opset, so the node's form says
///    which (inputs given → inputs; else attributes; both → not fused). A bound must be a
///    constant: a computed one varies at run time. Magnitudes ≥ FLT_MAX count as unbounded.
///    Clip(0, unbounded) is relu; two finite bounds with min ≤ max are clip(min, max) (ReLU6 is
///    clip(0, 6)); the rest (one side unbounded, NaN, min > max) has no codegen form and stays.
///  - HardSwish (opset 14) → hard_swish. Before opset 14 PyTorch exports hardswish as
///    Mul(x, HardSigmoid(x; alpha = 1/6, beta = 0.5)), in either operand order: x is then read
///    by two nodes, the HardSigmoid and the Mul, and the pattern is fused only when those are its
///    only readers and the HardSigmoid's output feeds the Mul alone (the ONNX HardSigmoid is
///    max(0, min(1, alpha·x + beta)), so x·HardSigmoid(x) = x·min(max(x + 3, 0), 6)/6).
///  - SiLU → silu: PyTorch exports nn.SiLU as Mul(x, Sigmoid(x)), the same two-reader pattern
///    (EfficientNet, RegNet-Y, MnasNet's successors: after every convolution).
///  - Sigmoid → sigmoid, and HardSigmoid with alpha = 1/6, beta = 0.5 (nn.Hardsigmoid) →
///    hard_sigmoid, when x has no other reader: the last convolution of a squeeze-excite gate
///    (EfficientNet, RegNet-Y; MobileNetV3). A Sigmoid whose x is also read by a Mul is SiLU's,
///    found from the Mul.
/// The activation goes to a main node that has none yet; a residual fused before it stays
/// "before activation" (ResNet's Conv → Add → Relu).

#include <cfloat>
#include <cmath>

#include "graph/passes.hpp"
#include "passes/fusion_util.hpp"

namespace webtune::graph {

namespace {

struct Found {
  Epilogue epilogue;  ///< activation and clip bounds only
  std::string x;      ///< the main node's output the activation reads
  /// The (Hard)Sigmoid node of Mul(x, HardSigmoid(x)) or Mul(x, Sigmoid(x)).
  std::optional<size_t> hard_sigmoid;
};

bool unbounded(float v) {
  return std::isinf(v) || std::fabs(v) >= FLT_MAX;
}

/// The activation of a Clip node, or nullopt when it has no codegen form (file comment).
std::optional<Epilogue> clip_activation(const Graph& graph, const Node& clip) {
  bool bound_inputs = false;
  for (size_t k = 1; k < clip.inputs.size(); ++k) bound_inputs |= !clip.inputs[k].empty();
  const bool bound_attributes = clip.has("min") || clip.has("max");
  if (bound_inputs && bound_attributes) return std::nullopt;
  float lo = -INFINITY, hi = INFINITY;
  if (bound_inputs) {
    for (size_t k = 1; k < 3 && k < clip.inputs.size(); ++k) {
      if (clip.inputs[k].empty()) continue;
      const std::optional<float> v = detail::scalar_constant(graph, clip.inputs[k]);
      if (!v) return std::nullopt;
      (k == 1 ? lo : hi) = *v;
    }
  } else {
    try {
      lo = clip.get_float("min", -FLT_MAX);
      hi = clip.get_float("max", FLT_MAX);
    } catch (const std::invalid_argument&) {
      return std::nullopt;
    }
  }
  if (std::isnan(lo) || std::isnan(hi)) return std::nullopt;
  Epilogue e;
  if (lo == 0 && unbounded(hi) && hi > 0) {
    e.activation = Activation::kRelu;
    return e;
  }
  if (unbounded(lo) || unbounded(hi) || lo > hi) return std::nullopt;
  e.activation = Activation::kClip;
  e.clip_min = lo;
  e.clip_max = hi;
  return e;
}

/// Mul(x, HardSigmoid(x)) or Mul(HardSigmoid(x), x) at `mul` (hard_swish), or the same with
/// Sigmoid (silu: x · sigmoid(x), as PyTorch exports nn.SiLU), with the readers it needs.
std::optional<Found> hard_swish_pattern(const detail::Sweep& sweep, const Node& mul) {
  const Graph& graph = sweep.graph;
  if (mul.inputs.size() != 2) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const std::string& h_out = mul.inputs[k];
    const std::string& x = mul.inputs[1 - k];
    const std::optional<size_t> h = sweep.uses.producer(h_out);
    if (!h || !sweep.free(*h) || x.empty() || h_out == x) continue;
    const Node& hs = graph.nodes[*h];
    if (hs.inputs.size() != 1 || hs.inputs[0] != x) continue;
    const bool silu = hs.op_type == "Sigmoid";
    if (!silu && hs.op_type != "HardSigmoid") continue;
    float alpha = 1.0f / 6.0f, beta = 0.5f;
    try {
      if (!silu) {
        alpha = hs.get_float("alpha", 0.2f);
        beta = hs.get_float("beta", 0.5f);
      }
    } catch (const std::invalid_argument&) {
      continue;
    }
    if (std::fabs(alpha - 1.0 / 6.0) > 1e-6 || std::fabs(beta - 0.5) > 1e-6) continue;
    // x read by exactly the HardSigmoid and the Mul; the HardSigmoid's output by the Mul only.
    if (!sweep.uses.fusable(h_out) || sweep.uses.reader_count(x) != 2 ||
        sweep.uses.graph_outputs.count(x))
      continue;
    Found found;
    found.epilogue.activation = silu ? Activation::kSilu : Activation::kHardSwish;
    found.x = x;
    found.hard_sigmoid = *h;
    return found;
  }
  return std::nullopt;
}

std::optional<Found> find_activation(const detail::Sweep& sweep, const Node& node) {
  if (node.outputs.size() != 1 || node.inputs.empty() || node.inputs[0].empty())
    return std::nullopt;
  Found found;
  found.x = node.inputs[0];
  if (node.op_type == "Relu" && node.inputs.size() == 1) {
    found.epilogue.activation = Activation::kRelu;
  } else if (node.op_type == "HardSwish" && node.inputs.size() == 1) {
    found.epilogue.activation = Activation::kHardSwish;
  } else if (node.op_type == "Sigmoid" && node.inputs.size() == 1) {
    found.epilogue.activation = Activation::kSigmoid;
  } else if (node.op_type == "HardSigmoid" && node.inputs.size() == 1) {
    float alpha = 0, beta = 0;
    try {
      alpha = node.get_float("alpha", 0.2f);
      beta = node.get_float("beta", 0.5f);
    } catch (const std::invalid_argument&) {
      return std::nullopt;
    }
    if (std::fabs(alpha - 1.0f / 6.0f) > 1e-6f || std::fabs(beta - 0.5f) > 1e-6f)
      return std::nullopt;
    found.epilogue.activation = Activation::kHardSigmoid;
  } else if (node.op_type == "Clip") {
    std::optional<Epilogue> e = clip_activation(sweep.graph, node);
    if (!e) return std::nullopt;
    found.epilogue = *e;
  } else if (node.op_type == "Mul") {
    return hard_swish_pattern(sweep, node);
  } else {
    return std::nullopt;
  }
  if (!sweep.uses.fusable(found.x)) return std::nullopt;
  return found;
}

int try_activation(detail::Sweep& sweep, size_t index) {
  Graph& graph = sweep.graph;
  const std::optional<Found> found = find_activation(sweep, graph.nodes[index]);
  if (!found) return 0;
  const std::optional<size_t> p = sweep.uses.producer(found->x);
  if (!p || !sweep.free(*p) || !detail::can_take_activation(graph.nodes[*p])) return 0;
  std::optional<Node> fused = detail::fused_form(graph, graph.nodes[*p]);
  if (!fused) return 0;
  fused->epilogue.activation = found->epilogue.activation;
  fused->epilogue.clip_min = found->epilogue.clip_min;
  fused->epilogue.clip_max = found->epilogue.clip_max;
  if (found->hard_sigmoid) sweep.remove(*found->hard_sigmoid);
  sweep.absorb(*p, index, std::move(*fused));
  return 1;
}

}  // namespace

int fuse_activation(Graph& graph) {
  return detail::run_sweeps(graph, try_activation);
}

}  // namespace webtune::graph
