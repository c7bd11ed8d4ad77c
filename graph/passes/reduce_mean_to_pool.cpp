/// \file reduce_mean_to_pool.cpp
/// An exporter habit (simplify.hpp): `x.mean([2, 3])` on NCHW (mnasnet's head, and every
/// global pool the dynamo exporter writes) reaches ONNX as ReduceMean over the spatial axes
/// instead of GlobalAveragePool. The two compute the same (ONNX: GlobalAveragePool averages
/// over all spatial axes; ReduceMean with axes = every axis from 2 on); the rewrite lets the
/// targets run it with the pool kernel they have.
///
/// Rewritten: ReduceMean (opsets 1-17, `axes` as an attribute; opset-18 models arrive
/// rewritten, opset_downgrade.hpp) of a float32 input of rank ≥ 3 with a known shape whose
/// axes (negative ones counted from the end) are exactly {2, ..., rank-1}. keepdims = 1 (the
/// default) gives GlobalAveragePool writing the output; keepdims = 0 gives GlobalAveragePool
/// into a new [N, C, 1, ...] value, then a Reshape to the output's [N, C] (an alias step).

#include <algorithm>
#include <set>

#include "graph/simplify.hpp"

namespace webtune::graph {

int reduce_mean_to_pool(Graph& graph, SimplifyReport& report) {
  int rewritten = 0;
  std::vector<Node> nodes;
  nodes.reserve(graph.nodes.size());
  for (Node& node : graph.nodes) {
    const bool candidate = node.op_type == "ReduceMean" && node.inputs.size() == 1 &&
                           node.outputs.size() == 1 && !node.outputs[0].empty() &&
                           graph.has_tensor(node.inputs[0]) && graph.has_tensor(node.outputs[0]);
    if (!candidate) {
      nodes.push_back(std::move(node));
      continue;
    }
    const Tensor& x = graph.tensor(node.inputs[0]);
    const auto rank = static_cast<int64_t>(x.shape.size());
    std::set<int64_t> axes;
    bool valid = x.shape_known && x.type == DataType::kFloat32 && !x.is_constant() && rank >= 3;
    std::vector<int64_t> listed;
    try {
      listed = node.get_ints("axes", {});
    } catch (const std::invalid_argument&) {
      valid = false;
    }
    for (int64_t a : listed) {
      if (a < -rank || a >= rank) valid = false;
      axes.insert(a < 0 ? a + rank : a);
    }
    std::set<int64_t> spatial;
    for (int64_t a = 2; a < rank; ++a) spatial.insert(a);
    if (!valid || axes != spatial) {
      nodes.push_back(std::move(node));
      continue;
    }
    int64_t keepdims = 1;
    try {
      keepdims = node.get_int("keepdims", 1);
    } catch (const std::invalid_argument&) {
      nodes.push_back(std::move(node));
      continue;
    }
    Node pool;
    pool.name = node.name;
    pool.op_type = "GlobalAveragePool";
    pool.inputs = {node.inputs[0]};
    if (keepdims != 0) {
      pool.outputs = {node.outputs[0]};
      nodes.push_back(std::move(pool));
    } else {
      std::vector<int64_t> pooled = {x.shape[0], x.shape[1]};
      pooled.resize(x.shape.size(), 1);
      const std::string mid = node.outputs[0] + "/pooled";
      const std::string shape = node.outputs[0] + "/shape";
      Tensor& m = graph.tensors[mid];
      m.name = mid;
      m.shape = pooled;
      Tensor& s = graph.tensors[shape];
      s.name = shape;
      s.type = DataType::kInt64;
      s.shape = {2};
      s.int_data = std::vector<int64_t>{x.shape[0], x.shape[1]};
      pool.outputs = {mid};
      Node reshape;
      reshape.name = node.name + "/reshape";
      reshape.op_type = "Reshape";
      reshape.inputs = {mid, shape};
      reshape.outputs = {node.outputs[0]};
      nodes.push_back(std::move(pool));
      nodes.push_back(std::move(reshape));
    }
    ++report.rewritten["ReduceMean → GlobalAveragePool"];
    ++rewritten;
  }
  graph.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace webtune::graph
