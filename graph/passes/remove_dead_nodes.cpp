/// \file remove_dead_nodes.cpp
/// Dead-code elimination (simplify.hpp): after folding, the Shape chains that computed a
/// Reshape's shape, and nodes an exporter left unread, are gone; so are the constants and
/// value entries that nothing reads any more.

#include <set>

#include "graph/simplify.hpp"

namespace webtune::graph {

int remove_dead_nodes(Graph& graph, SimplifyReport& report) {
  std::set<std::string> needed(graph.outputs.begin(), graph.outputs.end());
  std::vector<bool> live(graph.nodes.size(), false);
  // One sweep from the back is a fixed point: a node's readers all come after it.
  for (size_t i = graph.nodes.size(); i-- > 0;) {
    const Node& node = graph.nodes[i];
    for (const std::string& out : node.outputs)
      if (!out.empty() && needed.count(out)) live[i] = true;
    if (live[i])
      for (const std::string& in : node.inputs)
        if (!in.empty()) needed.insert(in);
  }
  std::vector<Node> kept;
  int removed = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (live[i])
      kept.push_back(std::move(graph.nodes[i]));
    else
      ++removed;
  }
  graph.nodes = std::move(kept);

  std::set<std::string> used(graph.inputs.begin(), graph.inputs.end());
  used.insert(graph.outputs.begin(), graph.outputs.end());
  for (const Node& node : graph.nodes) {
    for (const std::string& in : node.inputs) used.insert(in);
    for (const std::string& out : node.outputs) used.insert(out);
  }
  for (auto it = graph.tensors.begin(); it != graph.tensors.end();) {
    if (used.count(it->first)) {
      ++it;
      continue;
    }
    if (it->second.is_constant()) ++report.dead_constants;
    it = graph.tensors.erase(it);
  }
  report.dead_nodes += removed;
  return removed;
}

}  // namespace webtune::graph
