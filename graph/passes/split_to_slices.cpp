/// \file split_to_slices.cpp
/// Lowering for model packages (passes.hpp): a package step writes one value, so a Split of
/// float32 data becomes one Slice per used output, each copying its part along the axis. The
/// parts are the reference's (graph/kernels/index_ops.cpp): `split` an attribute before opset
/// 13, the constant input 1 from 13 on, or equal parts (ceil-sized, the last one smaller). The
/// Slices use the attribute form (starts / ends / axes), which every target reads at any opset.
/// A Split whose parts cannot be read at build time (a computed `split` input) stays as it is,
/// and the planner refuses it by name.

#include <algorithm>

#include "graph/passes.hpp"

namespace webtune::graph {
namespace {

/// The part sizes of `node` over `dim`, or empty when they are not known at build time.
std::vector<int64_t> part_sizes(const Graph& graph, const Node& node, int64_t dim) {
  std::vector<int64_t> sizes;
  if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
    const Tensor& s = graph.tensor(node.inputs[1]);
    if (!s.int_data) return {};
    sizes = *s.int_data;
  } else {
    try {
      sizes = node.get_ints("split", {});
    } catch (const std::invalid_argument&) {
      return {};
    }
  }
  const auto parts = static_cast<int64_t>(node.outputs.size());
  if (sizes.empty()) {
    const int64_t chunk = (dim + parts - 1) / parts;
    for (int64_t k = 0; k < parts; ++k)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * k)));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return {};
    total += s;
  }
  if (static_cast<int64_t>(sizes.size()) != parts || total != dim) return {};
  return sizes;
}

}  // namespace

int split_to_slices(Graph& graph) {
  int rewritten = 0;
  std::vector<Node> nodes;
  nodes.reserve(graph.nodes.size());
  for (Node& node : graph.nodes) {
    const bool candidate = node.op_type == "Split" && !node.inputs.empty() &&
                           graph.has_tensor(node.inputs[0]) &&
                           graph.tensor(node.inputs[0]).type == DataType::kFloat32 &&
                           !graph.tensor(node.inputs[0]).shape.empty();
    std::vector<int64_t> sizes;
    int64_t axis = 0;
    if (candidate) {
      const Tensor& x = graph.tensor(node.inputs[0]);
      const auto rank = static_cast<int64_t>(x.shape.size());
      try {
        axis = node.get_int("axis", 0);
      } catch (const std::invalid_argument&) {
        axis = rank;  // refused below
      }
      if (axis < 0) axis += rank;
      if (axis >= 0 && axis < rank) sizes = part_sizes(graph, node, x.shape[axis]);
    }
    if (sizes.empty()) {
      nodes.push_back(std::move(node));
      continue;
    }
    int64_t start = 0;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const int64_t end = start + sizes[k];
      if (!node.outputs[k].empty()) {
        Node slice;
        slice.name =
            (node.name.empty() ? node.outputs[k] : node.name) + "/slice" + std::to_string(k);
        slice.op_type = "Slice";
        slice.inputs = {node.inputs[0]};
        slice.outputs = {node.outputs[k]};
        slice.attributes["starts"] = std::vector<int64_t>{start};
        slice.attributes["ends"] = std::vector<int64_t>{end};
        slice.attributes["axes"] = std::vector<int64_t>{axis};
        nodes.push_back(std::move(slice));
      }
      start = end;
    }
    ++rewritten;
  }
  graph.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace webtune::graph
