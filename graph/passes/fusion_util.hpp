#pragma once
/// \file fusion_util.hpp
/// What the fusion passes (graph/passes/*.cpp) and task extraction share, private to the graph
/// library: who reads and writes each tensor, when a tensor may be fused away, the fused form of
/// a Conv / Gemm / MatMul, a convolution's geometry with auto_pad resolved, per-channel constants
/// and fresh constant names, and the sweep loop every pass runs.
///
/// A pass rewrites a chain "main node p → tail node t" (t the only reader of p's output) into one
/// fused node that takes t's place in the node list and writes t's output. t comes after p and
/// after every other tensor it reads, and the fused node reads only p's and t's inputs, so the
/// node list stays in topological order without a re-sort. Within one sweep the indices are a
/// snapshot: a node rewritten in it is "touched" and not looked at again until the next sweep,
/// which starts from a fresh index. Sweeps repeat until one changes nothing.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace webtune::graph::detail {

/// Readers and writers of every tensor of a graph, as of when it was built.
struct UseIndex {
  explicit UseIndex(const Graph& graph);
  std::map<std::string, std::vector<size_t>> readers;  ///< node indices, each node once
  std::map<std::string, size_t> writer;
  std::set<std::string> graph_outputs;

  size_t reader_count(const std::string& tensor) const;
  std::optional<size_t> producer(const std::string& tensor) const;
  /// Whether `tensor` may disappear into a fused node: exactly one node reads it and it is not a
  /// graph output.
  bool fusable(const std::string& tensor) const;
};

/// One sweep over a graph's nodes (see the file comment).
class Sweep {
 public:
  explicit Sweep(Graph& graph);
  Graph& graph;
  UseIndex uses;
  /// Whether node `index` is neither removed nor rewritten in this sweep.
  bool free(size_t index) const { return !dead_[index] && !touched_[index]; }
  /// Node `main` (already in its fused form, `fused`) absorbs the tail node at `tail`: the fused
  /// node replaces the tail, writes its output, and `main` is removed. The tail's inputs and the
  /// main node's old output are dropped at the end of the sweep if nothing reads them any more.
  void absorb(size_t main, size_t tail, Node fused);
  /// Replaces node `index` in place (a rewrite without a tail, e.g. Conv's own B → bias).
  void replace(size_t index, Node node);
  /// Removes node `index` (e.g. the HardSigmoid of a hard-swish); its tensors are dropped at the
  /// end of the sweep if nothing reads them any more.
  void remove(size_t index);
  /// Drops `tensor` at the end of the sweep if nothing reads or writes it then.
  void orphan(const std::string& tensor);
  /// Removes dead nodes and the tensors the sweep left without reader, writer or graph role.
  void finish();

 private:
  std::vector<bool> dead_, touched_;
  std::set<std::string> orphans_;
};

/// Runs sweeps of `try_at(sweep, index)` over every free node until a sweep fuses nothing;
/// try_at returns how many fusions it made at that node (0 or 1). Returns the total.
template <typename TryAt>
int run_sweeps(Graph& graph, TryAt try_at) {
  int total = 0;
  for (;;) {
    Sweep sweep(graph);
    int made = 0;
    for (size_t i = 0; i < graph.nodes.size(); ++i)
      if (sweep.free(i)) made += try_at(sweep, i);
    sweep.finish();
    total += made;
    if (made == 0) return total;
  }
}

/// "FusedConv", "FusedGemm" or "FusedMatMul".
bool is_fused_op(const Node& node);
/// Conv, Gemm, MatMul or one of their fused forms.
bool is_main_op(const Node& node);

/// The fused form of a main node (a fused node is returned unchanged), or nullopt with `why` set
/// when it has none:
///  - Conv → FusedConv for a 2-D convolution (4-D X, W and output); its B input, when given
///    (1-D [M] by ONNX's spec), becomes the epilogue's bias; auto_pad is resolved into explicit
///    pads, and group, strides, dilations, kernel_shape are written out;
///  - Gemm → FusedGemm when alpha = 1 and C is absent or gemm_bias takes it (a new constant
///    unless C is already the [N] bias); transA / transB are kept; a Gemm with alpha ≠ 1, or
///    another C, has no fused form (it stays a plain Gemm);
///  - MatMul → FusedMatMul when both inputs are 2-D (a batched MatMul is not fused).
/// Any constant it needs is added to `graph` only on success.
std::optional<Node> fused_form(Graph& graph, const Node& node, std::string* why = nullptr);

/// How a Gemm's C input becomes a 1-D bias [N]: the tensor itself (`values` empty) when it is
/// already a [N] float vector and beta = 1 (a computed C included), else `values` = beta·C
/// expanded to [N] for a float constant with one value per output column ([N], [1,N], [1],
/// scalar). Nullopt with `why` otherwise (a C that varies along M, a computed C of another
/// shape or with beta ≠ 1). `output_shape` is the Gemm's [M,N].
struct GemmBias {
  std::string tensor;
  std::optional<std::vector<float>> values;
};
std::optional<GemmBias> gemm_bias(const Graph& graph, const Node& gemm,
                                  const std::vector<int64_t>& output_shape, std::string* why);

/// Whether the epilogue of a main node can still take each part, in Epilogue's op order.
bool can_take_bias(const Node& node);        ///< no activation, no residual (bias comes first)
bool can_take_activation(const Node& node);  ///< no activation yet
bool can_take_residual(const Node& node);    ///< no residual yet

/// The output-channel axis of a main node's output: 1 for a conv, the last for Gemm / MatMul.
int channel_axis(const Node& node, size_t output_rank);

/// A float constant `tensor` broadcast against an output of `output_shape` as a per-channel
/// vector along `axis`: its shape, right-aligned to the output's rank, is 1 everywhere but at
/// `axis`, where it is 1 or the channel count, and it is no longer than the output's rank (so
/// adding it leaves the output's shape as it is). The channel count's values, or nullopt.
std::optional<std::vector<float>> per_channel_values(const Tensor& tensor,
                                                     const std::vector<int64_t>& output_shape,
                                                     int axis);

/// A single float value held by constant `name` (any shape with one element), or nullopt.
std::optional<float> scalar_constant(const Graph& graph, const std::string& name);

/// `base` when no tensor has that name, else `base_2`, `base_3`, ...
std::string fresh_name(const Graph& graph, const std::string& base);
/// Adds a float32 constant under a fresh name derived from `base`; returns the name.
std::string add_constant(Graph& graph, const std::string& base, std::vector<int64_t> shape,
                         std::vector<float> data);

/// A 2-D convolution's geometry with ONNX's defaults filled in and auto_pad resolved.
struct ConvGeometry {
  int64_t group = 1;
  std::vector<int64_t> kernel;     ///< [kH, kW] (the weight's, checked against kernel_shape)
  std::vector<int64_t> strides;    ///< [sH, sW]
  std::vector<int64_t> dilations;  ///< [dH, dW]
  std::vector<int64_t> pads;       ///< [top, left, bottom, right], ONNX's order
};
/// The geometry of Conv / FusedConv `node` (4-D X and W). auto_pad SAME_UPPER / SAME_LOWER are
/// resolved as ONNX specifies (output = ceil(input / stride), the odd pad at the end for
/// SAME_UPPER, at the start for SAME_LOWER); VALID is zero pads. Throws GraphError naming the
/// node for tensors that are not 4-D, attribute lists of the wrong length, or a kernel_shape that
/// disagrees with the weight.
ConvGeometry conv_geometry(const Graph& graph, const Node& node);

/// The node's name, or "<its op type> writing '<first output>'" when it has none.
std::string node_label(const Node& node);

}  // namespace webtune::graph::detail
