/// \file run_fusion_passes.cpp
/// The fusion pipeline (passes.hpp): the passes in the order that gives each epilogue its op
/// order, and their counts.
///
/// Order: BatchNorm first (it needs the plain conv's weight); the bias before anything else
/// (it comes first in an epilogue, and a bias Add fuses only into a node without activation or
/// residual); the residual before the activation, so that Conv → Add → Relu gets the residual
/// "before activation" (an activation pass first would stop at the Add); then the activation;
/// then the residual again for Conv → Relu → Add ("after activation").

#include "graph/passes.hpp"

namespace webtune::graph {

int PassReport::count(std::string_view pass) const {
  int n = 0;
  for (const Entry& e : entries)
    if (e.pass == pass) n += e.rewrites;
  return n;
}

int PassReport::total() const {
  int n = 0;
  for (const Entry& e : entries) n += e.rewrites;
  return n;
}

PassReport run_fusion_passes(Graph& graph) {
  PassReport report;
  report.entries.push_back({"fold_batch_norm", fold_batch_norm(graph)});
  report.entries.push_back({"fuse_bias", fuse_bias(graph)});
  report.entries.push_back({"fuse_residual", fuse_residual(graph)});
  report.entries.push_back({"fuse_activation", fuse_activation(graph)});
  report.entries.push_back({"fuse_residual", fuse_residual(graph)});
  graph.validate();
  return report;
}

}  // namespace webtune::graph
