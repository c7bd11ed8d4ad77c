/// \file simplify.cpp
/// The import-time simplification pipeline (simplify.hpp) and its report.

#include "graph/simplify.hpp"

namespace webtune::graph {
namespace {

int sum(const std::map<std::string, int>& counts) {
  int n = 0;
  for (const auto& [op, count] : counts) n += count;
  return n;
}

std::string list(const std::map<std::string, int>& counts) {
  std::string text;
  for (const auto& [op, count] : counts)
    text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + op;
  return text;
}

}  // namespace

int SimplifyReport::folded_total() const {
  return sum(folded);
}

int SimplifyReport::aliases_total() const {
  return sum(aliases);
}

bool SimplifyReport::empty() const {
  return folded.empty() && aliases.empty() && rewritten.empty() && dead_nodes == 0 &&
         dead_constants == 0;
}

std::string SimplifyReport::summary() const {
  std::string text;
  auto add = [&text](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  if (!folded.empty())
    add("folded " + std::to_string(folded_total()) + " node" + (folded_total() == 1 ? "" : "s") +
        " into constants (" + list(folded) + ")");
  if (!aliases.empty())
    add("removed " + std::to_string(aliases_total()) + " alias" +
        (aliases_total() == 1 ? "" : "es") + " (" + list(aliases) + ")");
  if (!rewritten.empty()) add("rewrote " + list(rewritten));
  if (dead_nodes) add(std::to_string(dead_nodes) + " dead node" + (dead_nodes == 1 ? "" : "s"));
  if (dead_constants)
    add(std::to_string(dead_constants) + " unread constant" + (dead_constants == 1 ? "" : "s"));
  if (text.empty()) text = "nothing to simplify";
  if (inference_rounds > 1)
    text += "; " + std::to_string(inference_rounds) + " rounds of shape inference";
  return text;
}

int fold_to_fixed_point(Graph& graph, int64_t opset, SimplifyReport& report) {
  int total = 0;
  while (true) {
    const int n = fold_shapes(graph, report) + fold_constants(graph, opset, report);
    total += n;
    if (n == 0) return total;
  }
}

SimplifyReport simplify(Graph& graph, int64_t opset) {
  SimplifyReport report;
  fold_to_fixed_point(graph, opset, report);
  remove_aliases(graph, report);
  reduce_mean_to_pool(graph, report);
  remove_dead_nodes(graph, report);
  graph.validate();
  return report;
}

}  // namespace webtune::graph
