/// \file fold_constants.cpp
/// Constant folding (simplify.hpp): a node whose inputs are all constants runs once, on the
/// CPU, through the reference executor's own kernel (graph::run_node), and its outputs become
/// constants. What exporters leave for a runtime to compute this way: Identity of a shared
/// weight, Shape → Gather → Div → Mul → Unsqueeze → Concat chains that compute Slice bounds
/// and Reshape shapes, Cast, ConstantOfShape, Range, Expand and Where on constants.
///
/// Sizes: an output of more than kMaxFoldedElements is left to run at run time. Where the graph
/// does not know an output's shape yet (between the importer's inference rounds), the size is
/// bounded before the kernel runs: from the shape input of ConstantOfShape / Expand / Tile,
/// Range's count, and for every other operator the broadcast of its inputs' shapes (the most
/// any elementwise, gather, slice or concat output holds: Σ of the inputs); operators whose
/// output size their attributes alone set (Pad, Resize, Upsample, ConvTranspose) are not folded
/// then.

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "graph/executor.hpp"
#include "graph/simplify.hpp"

namespace webtune::graph {
namespace {

constexpr int64_t kLimit = kMaxFoldedElements;

/// a · b, saturating at kLimit + 1 (only the comparison with kLimit matters).
int64_t mul_capped(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  if (a > (kLimit + 1) / b) return kLimit + 1;
  return std::min(a * b, kLimit + 1);
}

int64_t product_capped(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n = mul_capped(n, std::max<int64_t>(d, 0));
  return n;
}

/// The most elements `node`'s largest output can have, from its constant inputs, or
/// kLimit + 1 where that cannot be told without running it.
int64_t output_bound(const Node& node, const std::vector<const Tensor*>& in) {
  const std::string& op = node.op_type;
  auto ints = [&](size_t i) -> const std::vector<int64_t>* {
    return i < in.size() && in[i] && in[i]->int_data ? &*in[i]->int_data : nullptr;
  };
  if (op == "ConstantOfShape") {
    const auto* shape = ints(0);
    return shape ? product_capped(*shape) : kLimit + 1;
  }
  if (op == "Expand" || op == "Tile") {
    const auto* second = ints(1);
    if (!second || !in[0]) return kLimit + 1;
    const std::vector<int64_t>& x = in[0]->shape;
    if (op == "Tile") {
      if (second->size() != x.size()) return kLimit + 1;
      int64_t n = 1;
      for (size_t i = 0; i < x.size(); ++i) n = mul_capped(n, mul_capped(x[i], (*second)[i]));
      return n;
    }
    const size_t rank = std::max(x.size(), second->size());
    int64_t n = 1;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t a = i < rank - x.size() ? 1 : x[i - (rank - x.size())];
      const int64_t b = i < rank - second->size() ? 1 : (*second)[i - (rank - second->size())];
      n = mul_capped(n, std::max(a, b));
    }
    return n;
  }
  if (op == "Range") {
    if (in.size() < 3 || !in[0] || !in[1] || !in[2]) return kLimit + 1;
    auto scalar = [](const Tensor& t) -> double {
      if (t.float_data && !t.float_data->empty()) return (*t.float_data)[0];
      if (t.int_data && !t.int_data->empty()) return static_cast<double>((*t.int_data)[0]);
      return std::numeric_limits<double>::quiet_NaN();
    };
    const double start = scalar(*in[0]), limit = scalar(*in[1]), delta = scalar(*in[2]);
    const double count = std::ceil((limit - start) / delta);
    if (!std::isfinite(count)) return kLimit + 1;
    return count <= 0 ? 0 : (count > kLimit ? kLimit + 1 : static_cast<int64_t>(count));
  }
  if (op == "Pad" || op == "Resize" || op == "Upsample" || op == "ConvTranspose") return kLimit + 1;
  // Elementwise with broadcasting, Gather, Slice, Concat, Reshape, Cast, ...: no output holds
  // more than the broadcast of the inputs' shapes or the sum of their elements.
  int64_t sum = 0;
  size_t rank = 0;
  for (const Tensor* t : in)
    if (t) {
      sum = std::min(kLimit + 1, sum + product_capped(t->shape));
      rank = std::max(rank, t->shape.size());
    }
  std::vector<int64_t> broadcast(rank, 1);
  for (const Tensor* t : in)
    if (t)
      for (size_t i = 0; i < t->shape.size(); ++i) {
        int64_t& b = broadcast[rank - t->shape.size() + i];
        b = std::max(b, t->shape[i]);
      }
  return std::max(sum, product_capped(broadcast));
}

bool is_int(DataType type) {
  return type != DataType::kFloat32;
}

}  // namespace

int fold_constants(Graph& graph, int64_t opset, SimplifyReport& report) {
  int folded = 0;
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    Node& node = graph.nodes[index];
    const bool candidate =
        node.op_type.rfind("Fused", 0) != 0 && has_kernel(node.op_type) && !node.outputs.empty();
    std::vector<const Tensor*> in;
    bool all_constant = candidate;
    for (const std::string& name : node.inputs) {
      if (!all_constant) break;
      if (name.empty()) {
        in.push_back(nullptr);
        continue;
      }
      const Tensor* t = graph.has_tensor(name) ? &graph.tensor(name) : nullptr;
      if (!t || !t->is_constant()) all_constant = false;
      in.push_back(t);
    }
    // An output whose shape is known must be small; one not known yet is bounded from inputs.
    bool small = all_constant;
    bool every_known = true;
    for (const std::string& out : node.outputs) {
      if (out.empty() || !small) continue;
      if (graph.has_tensor(out) && graph.tensor(out).shape_known)
        small = product_capped(graph.tensor(out).shape) <= kLimit;
      else
        every_known = false;
    }
    if (small && !every_known) small = output_bound(node, in) <= kLimit;
    if (!small) {
      kept.push_back(std::move(node));
      continue;
    }

    std::vector<Value> values;
    std::vector<const Value*> args;
    values.reserve(in.size());
    for (const Tensor* t : in) values.push_back(t ? Value::constant(*t) : Value{});
    for (size_t i = 0; i < in.size(); ++i) args.push_back(in[i] ? &values[i] : nullptr);
    std::vector<DataType> types;
    for (const std::string& out : node.outputs)
      types.push_back(!out.empty() && graph.has_tensor(out) ? graph.tensor(out).type
                                                            : DataType::kFloat32);
    std::vector<Value> outs = run_node(node, index, args, types, opset);

    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const std::string& name = node.outputs[o];
      if (name.empty()) continue;
      Value& v = outs[o];
      Tensor& t = graph.tensors[name];
      const bool declared = !t.name.empty();
      if (declared && t.shape_known && t.shape != v.shape)
        throw GraphError(node.describe(index) + ": folding it gives output '" + name +
                         "' a shape the model does not declare");
      if (declared && is_int(t.type) != is_int(v.type))
        throw GraphError(node.describe(index) + ": folding it gives output '" + name + "' " +
                         std::string(data_type_name(v.type)) + " values; the model says " +
                         std::string(data_type_name(t.type)));
      t.name = name;
      if (!declared) t.type = v.type;
      t.shape = v.shape;
      t.shape_known = true;
      if (v.is_float()) {
        t.float_data = std::move(v.data);
        t.int_data.reset();
      } else {
        t.int_data = std::move(v.ints);
        t.float_data.reset();
      }
    }
    ++report.folded[node.op_type];
    ++folded;
  }
  graph.nodes = std::move(kept);
  return folded;
}

}  // namespace webtune::graph
