/// \file fold_shapes.cpp
/// Shape and Size of a value whose shape is known become int64 constants (simplify.hpp). In a
/// static-shape model every Shape folds; the exporters' Shape → Gather → ... chains then fold
/// in fold_constants.cpp.
///
/// Shape-1 / 13 / 15: output [rank] int64; Shape-15's start and end (defaults 0 and rank) are
/// clamped to [0, rank] after adding rank to a negative value, and end ≤ start gives [0].
/// Size-1 / 13: a scalar int64, the element count.

#include <algorithm>

#include "graph/simplify.hpp"

namespace webtune::graph {
namespace {

/// The tensor `name` with a known shape, or nullptr.
const Tensor* known(const Graph& graph, const std::string& name) {
  if (name.empty() || !graph.has_tensor(name)) return nullptr;
  const Tensor& t = graph.tensor(name);
  return t.shape_known ? &t : nullptr;
}

/// Shape-15's [start, end) of a rank-`rank` shape.
std::pair<int64_t, int64_t> shape_range(const Node& node, int64_t rank) {
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  const int64_t start = clamp(node.get_int("start", 0));
  const int64_t end = clamp(node.get_int("end", rank));
  return {start, std::max(start, end)};
}

void make_constant(Graph& graph, const std::string& name, std::vector<int64_t> shape,
                   std::vector<int64_t> data) {
  Tensor& t = graph.tensors[name];
  t.name = name;
  t.type = DataType::kInt64;
  t.shape = std::move(shape);
  t.shape_known = true;
  t.float_data.reset();
  t.int_data = std::move(data);
}

}  // namespace

int fold_shapes(Graph& graph, SimplifyReport& report) {
  int folded = 0;
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (Node& node : graph.nodes) {
    const bool shape = node.op_type == "Shape", size = node.op_type == "Size";
    const Tensor* x = (shape || size) && node.inputs.size() == 1 && node.outputs.size() == 1 &&
                              !node.outputs[0].empty()
                          ? known(graph, node.inputs[0])
                          : nullptr;
    if (!x) {
      kept.push_back(std::move(node));
      continue;
    }
    if (shape) {
      const auto [start, end] = shape_range(node, static_cast<int64_t>(x->shape.size()));
      std::vector<int64_t> dims(x->shape.begin() + start, x->shape.begin() + end);
      const auto n = static_cast<int64_t>(dims.size());
      make_constant(graph, node.outputs[0], {n}, std::move(dims));
    } else {
      make_constant(graph, node.outputs[0], {}, {x->elements()});
    }
    ++report.folded[node.op_type];
    ++folded;
  }
  graph.nodes = std::move(kept);
  return folded;
}

}  // namespace webtune::graph
