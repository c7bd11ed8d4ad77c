#pragma once
/// \file simplify.hpp
/// Import-time simplification: what onnx-simplifier and onnxruntime's constant folding do to an
/// exported model before anything else sees it, one pass per file in graph/passes/:
///  - fold_shapes (fold_shapes.cpp): Shape and Size of a value whose shape is known become
///    int64 constants (Shape-15's start / end included);
///  - fold_constants (fold_constants.cpp): every node whose inputs are all constants and whose
///    operator the reference executor runs (executor.hpp) is run once by graph::run_node() and
///    becomes constants: Identity / Dropout of a weight (the exporter's de-duplicated
///    initializers), Gather / Slice / Concat / Unsqueeze / Squeeze / Cast / Reshape, arithmetic
///    on constants, ConstantOfShape, Range, Expand, Where ...; a node with an output of more
///    than kMaxFoldedElements elements stays a node (a folded Expand must not swell the weights);
///  - remove_aliases (remove_aliases.cpp): Identity, and Dropout in inference whose mask nobody
///    reads, of a computed value: its readers read the input instead;
///  - reduce_mean_to_pool (reduce_mean_to_pool.cpp): ReduceMean over every spatial axis of
///    an NCHW value becomes GlobalAveragePool (an exporter's `x.mean([2, 3])`);
///  - remove_dead_nodes (remove_dead_nodes.cpp): nodes whose outputs nobody reads and that are
///    no graph output, and the constants nobody reads any more.
///
/// The importer (onnx_import.cpp) runs ONNX shape inference, folds, writes what it folded back
/// into the model and infers again, to a fixed point, so that a value whose shape only a
/// folded Shape → Gather → Div → Mul → Slice chain tells gets its shape; then it runs
/// simplify() on the whole graph. Tensors whose shape is not known yet (Tensor::shape_known
/// false) may exist while the folding passes run; remove_aliases and remove_dead_nodes need a
/// complete graph.
///
/// Every pass computes the same values as the graph it is given (a folded value is what the
/// reference executor computes, bit for bit), keeps the nodes topologically sorted, and keeps
/// every graph input and output name.

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.hpp"

namespace webtune::graph {

/// The most elements one folded output may have (16 Mi: 64 MiB of float32).
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 24;

/// What the simplification did, for `webtune import`'s summary.
struct SimplifyReport {
  std::map<std::string, int> folded;     ///< op type → nodes that became constants
  std::map<std::string, int> aliases;    ///< op type → alias nodes removed (readers re-pointed)
  std::map<std::string, int> rewritten;  ///< "A → B" → nodes rewritten into another operator
  int dead_nodes = 0;                    ///< nodes removed because nothing read them
  int dead_constants = 0;                ///< constants removed because nothing read them
  int inference_rounds = 0;              ///< ONNX shape inference runs (the importer's loop)

  int folded_total() const;
  int aliases_total() const;
  bool empty() const;
  /// "folded 18 Identity, 26 Shape, 26 Gather; removed 2 aliases (Identity 2); 3 dead nodes,
  /// 4 dead constants; 2 rounds of shape inference" — or "nothing to simplify".
  std::string summary() const;
};

/// graph/passes/fold_shapes.cpp. Shape and Size nodes (default domain) whose input's shape is
/// known become int64 constants named as their outputs. Returns the count.
int fold_shapes(Graph& graph, SimplifyReport& report);

/// graph/passes/fold_constants.cpp. Nodes whose every non-empty input is a constant, whose op
/// the executor runs (has_kernel; not a fused op) and whose outputs are within
/// kMaxFoldedElements become constants: one run_node() each, in node order, so a chain folds
/// in one call. An output the graph already gives a shape must come out of that shape, and its
/// declared element type is kept (int32 / bool stay so, in int_data). Throws GraphError naming
/// the node when its kernel refuses its constant inputs (such a model fails at run time too).
/// `opset` is the model's default-domain opset (Softmax). Returns the count.
int fold_constants(Graph& graph, int64_t opset, SimplifyReport& report);

/// graph/passes/remove_aliases.cpp. Identity nodes, and Dropout nodes in inference (no
/// training_mode input, or a constant false one) with one read output, whose input is computed
/// or a graph input: the readers of the output read the input. When the output is a graph
/// output and the input is the output of a node that is no graph output, that node writes the
/// graph output's name instead. An alias from a graph input to a graph output stays. Returns
/// the count.
int remove_aliases(Graph& graph, SimplifyReport& report);

/// graph/passes/reduce_mean_to_pool.cpp. ReduceMean (axes attribute) of a float32 value of
/// rank ≥ 3 over exactly the axes {2, ..., rank-1} becomes GlobalAveragePool (keepdims 1), or
/// GlobalAveragePool into a new value then a Reshape to [N, C] (keepdims 0). Returns the count.
int reduce_mean_to_pool(Graph& graph, SimplifyReport& report);

/// graph/passes/remove_dead_nodes.cpp. Removes nodes none of whose outputs is read by a node or
/// is a graph output (to a fixed point, so a dead chain goes whole), then every constant and
/// non-input tensor that nothing reads or writes and that is no graph output. Returns the
/// number of nodes removed.
int remove_dead_nodes(Graph& graph, SimplifyReport& report);

/// fold_shapes and fold_constants until neither folds more. Works on a graph with unknown
/// shapes (the importer's rounds). Returns the number of nodes folded.
int fold_to_fixed_point(Graph& graph, int64_t opset, SimplifyReport& report);

/// The whole simplification of a complete graph: fold_to_fixed_point, remove_aliases,
/// reduce_mean_to_pool, remove_dead_nodes, then validate(). Returns the report (the caller adds
/// inference_rounds).
SimplifyReport simplify(Graph& graph, int64_t opset);

}  // namespace webtune::graph
