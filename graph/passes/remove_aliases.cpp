/// \file remove_aliases.cpp
/// Identity and inference Dropout of a computed value disappear (simplify.hpp): their readers
/// read the aliased value. The planner would otherwise give each its own step and, on frag
/// targets, maybe a relayout; a model is no faster for an alias.

#include <algorithm>

#include "graph/simplify.hpp"

namespace webtune::graph {
namespace {

bool is_graph_output(const Graph& graph, const std::string& name) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), name) != graph.outputs.end();
}

bool is_graph_input(const Graph& graph, const std::string& name) {
  return std::find(graph.inputs.begin(), graph.inputs.end(), name) != graph.inputs.end();
}

bool is_read(const Graph& graph, const std::string& name) {
  for (const Node& n : graph.nodes)
    if (std::find(n.inputs.begin(), n.inputs.end(), name) != n.inputs.end()) return true;
  return false;
}

/// Whether a Dropout node runs in inference: no training_mode input, or a constant false one.
bool dropout_in_inference(const Graph& graph, const Node& node) {
  if (node.inputs.size() < 3 || node.inputs[2].empty()) return true;
  if (!graph.has_tensor(node.inputs[2])) return false;
  const Tensor& t = graph.tensor(node.inputs[2]);
  if (t.int_data) return t.int_data->size() == 1 && (*t.int_data)[0] == 0;
  if (t.float_data) return t.float_data->size() == 1 && (*t.float_data)[0] == 0.0f;
  return false;
}

/// Whether `node` only passes its input 0 on as its output 0, with nothing else to see.
bool is_alias(const Graph& graph, const Node& node) {
  if (node.inputs.empty() || node.inputs[0].empty() || node.outputs.empty() ||
      node.outputs[0].empty())
    return false;
  if (node.op_type == "Identity") return node.inputs.size() == 1 && node.outputs.size() == 1;
  if (node.op_type != "Dropout" || !dropout_in_inference(graph, node)) return false;
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (!node.outputs[o].empty() &&
        (is_read(graph, node.outputs[o]) || is_graph_output(graph, node.outputs[o])))
      return false;
  return true;
}

void rename_everywhere(Graph& graph, const std::string& from, const std::string& to) {
  for (Node& n : graph.nodes) {
    std::replace(n.inputs.begin(), n.inputs.end(), from, to);
    std::replace(n.outputs.begin(), n.outputs.end(), from, to);
  }
}

}  // namespace

int remove_aliases(Graph& graph, SimplifyReport& report) {
  int removed = 0;
  for (size_t i = 0; i < graph.nodes.size();) {
    const Node& node = graph.nodes[i];
    if (!is_alias(graph, node)) {
      ++i;
      continue;
    }
    const std::string x = node.inputs[0], y = node.outputs[0], op = node.op_type;
    const bool x_computed = graph.has_tensor(x) && !graph.tensor(x).is_constant();
    if (!x_computed || x == y) {
      ++i;
      continue;
    }
    if (is_graph_output(graph, y)) {
      // The graph output keeps its name: the value's producer writes it under that name.
      if (is_graph_input(graph, x) || is_graph_output(graph, x) || !graph.producer(x)) {
        ++i;
        continue;
      }
      const Node alias = graph.nodes[i];
      graph.nodes.erase(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
      rename_everywhere(graph, x, y);
      graph.tensors.erase(x);
      for (size_t o = 1; o < alias.outputs.size(); ++o) graph.tensors.erase(alias.outputs[o]);
    } else {
      const Node alias = graph.nodes[i];
      graph.nodes.erase(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
      for (Node& n : graph.nodes) std::replace(n.inputs.begin(), n.inputs.end(), y, x);
      for (const std::string& out : alias.outputs)
        if (!out.empty()) graph.tensors.erase(out);
    }
    ++report.aliases[op];
    ++removed;
  }
  return removed;
}

}  // namespace webtune::graph
