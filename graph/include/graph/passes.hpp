#pragma once
/// \file passes.hpp
/// Graph rewrites that fold and fuse operators before tuning and deployment: TVM Relay's FuseOps
/// (Chen et al., "TVM", OSDI 2018, §3 "operator fusion": an out-elementwise-fusable operator
/// takes its injective tail) split into small passes, one per file in graph/passes/.
///
/// A main operator (Conv, Gemm, MatMul) and the elementwise operators after it become one fused
/// node, op type "FusedConv" / "FusedGemm" / "FusedMatMul", whose codegen Epilogue
/// (codegen/epilogue.hpp) says what follows it, in the epilogue's op order: bias, residual
/// before the activation, activation, residual after the activation. The fused operator
/// convention (graph.hpp): inputs X, W (Gemm: A, B with transA / transB kept and alpha = 1),
/// then the bias if epilogue.bias (always a 1-D float tensor [C_out]), then the residual if any
/// (a tensor of exactly the output's shape); the main op's attributes (Conv: auto_pad resolved
/// into explicit pads; group, strides, dilations, kernel_shape written out); one output, the
/// last fused operator's output under its original name; the node keeps the main op's name.
///
/// Rules every pass keeps:
///  - a tensor disappears into a fused node only when exactly one node reads it and it is not a
///    graph output (a value read twice must be written out);
///  - the result computes the same values (up to fp32 rounding where constants are folded) and
///    still validate()s: the fused node takes the place of the last operator it absorbs, so the
///    node list stays topologically sorted;
///  - what is not fused stays a graph node, unchanged; constants nothing reads any more are
///    removed, new constants get fresh names (an original constant may be shared);
///  - a Gemm with alpha ≠ 1, or a C that is neither a float constant with one value per output
///    column nor a computed [N] vector with beta = 1, has no fused form: it stays a plain Gemm and
///    nothing fuses into it; a MatMul is fused only when both inputs are 2-D; a Conv only when it
///    is 2-D (4-D tensors).
/// Each pass returns how many rewrites it made and raises nothing for a valid graph.

#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.hpp"

namespace webtune::graph {

/// graph/passes/fold_batch_norm.cpp. BatchNormalization in inference mode (training_mode 0,
/// spatial 1, one output) reading the output of a Conv (or a FusedConv whose epilogue is at most
/// a bias) that nothing else reads and that is not a graph output, with scale, B, mean and var
/// float constants of [M] and the conv's weight (and bias, if any) constant: folded into the
/// conv as W'[m] = W[m]·s[m], b'[m] = (b[m] − mean[m])·s[m] + B[m] with s = scale / √(var + ε)
/// (computed in double; b = 0 without a bias). The conv keeps its op type, gets a new weight and
/// bias constant (fresh names) and writes the BatchNormalization's output. Returns the count.
int fold_batch_norm(Graph& graph);

/// graph/passes/fuse_bias.cpp. (1) Every Conv with its B input and every Gemm with a C input
/// becomes its fused form with epilogue.bias (Gemm: only with alpha = 1 and C a float constant
/// of [N], [1,N] or one value, whose C·beta becomes the bias, or a computed [N] with beta = 1). (2)
/// A Conv / Gemm / MatMul (plain, or fused with no activation and no residual yet) whose output is
/// read only by an Add of a float constant broadcast as one value per output channel ([1,C,1,1],
/// [C,1,1], [1] ... for a conv; [N], [1,N], [1] for a 2-D Gemm / MatMul output), in either operand
/// order: the Add becomes the bias, added to an existing constant bias (a new constant) or as a new
/// one. Returns the number of nodes that got a bias.
int fuse_bias(Graph& graph);

/// graph/passes/fuse_activation.cpp. An activation reading the output of a main node without an
/// activation yet (plain or fused; a residual already fused makes it "residual before
/// activation"):
///  - Relu → relu;
///  - Clip with bounds as attributes min / max (opset < 11, defaults ∓FLT_MAX) or as constant
///    inputs (opset ≥ 11, an absent input unbounded): bounds of magnitude ≥ FLT_MAX count as
///    unbounded; Clip(0, unbounded) → relu; both finite with min ≤ max → clip(min, max); any
///    other (one unbounded side, a non-constant bound, NaN, min > max) is not fused;
///  - HardSwish → hard_swish; Mul(x, HardSigmoid(x)) in either operand order, HardSigmoid with
///    alpha = 1/6 and beta = 0.5 (within 1e-6) → hard_swish. Here x is read by exactly the
///    HardSigmoid and the Mul, and the HardSigmoid's output only by the Mul;
///  - Mul(x, Sigmoid(x)) in either operand order (SiLU) → silu, with the same readers rule;
///  - Sigmoid → sigmoid; HardSigmoid with alpha = 1/6 and beta = 0.5 (within 1e-6) →
///    hard_sigmoid (squeeze-excite gates).
/// Returns the number of activations fused.
int fuse_activation(Graph& graph);

/// graph/passes/fuse_residual.cpp. Add(y, r) or Add(r, y), y the output of a main node without
/// a residual yet (plain or fused) and r a float tensor that is not a constant, not y, and of
/// exactly y's shape (a broadcasting Add is no residual): r becomes the residual input, "before
/// activation" when the node has no activation yet, "after activation" when it has one. When
/// both operands qualify, operand 0 takes it (as bench/extract_conv_layers.py does: PyTorch
/// exports `out += identity` as Add(out, identity), so ResNet's main-path conv takes the
/// residual and the 1×1 downsample conv stays conv + bias). Returns the count.
int fuse_residual(Graph& graph);

/// How many rewrites each pass made, in the order they ran.
struct PassReport {
  struct Entry {
    std::string pass;
    int rewrites = 0;
  };
  std::vector<Entry> entries;
  /// Sum of the entries named `pass` (a pass may run more than once).
  int count(std::string_view pass) const;
  int total() const;
};

/// Runs the passes in the order that yields the epilogues of ../shared/models'
/// ResNet-18 and MobileNet-v2 (configs/workloads/resnet18_fused.json, mobilenet_v2.json):
/// fold_batch_norm, fuse_bias, fuse_residual (Conv → Add → Relu: residual before the
/// activation), fuse_activation, fuse_residual again (Conv → Relu → Add: residual after it).
/// Then validate()s the graph (GraphError would be a pass's bug). Returns the counts.
PassReport run_fusion_passes(Graph& graph);

// ---------------------------------------------------------------------------------------------
// Lowering for model packages: rewrites the planner (deploy/planner.hpp) makes on its copy of
// the graph so that every step writes one value and binds what the device allows. The values
// stay the same, element for element.
// ---------------------------------------------------------------------------------------------

/// graph/passes/split_to_slices.cpp. Every Split of float32 data whose parts are known at build
/// time (the `split` attribute, a constant input 1, or equal parts) becomes one Slice per used
/// output (attribute form: starts, ends, axes). Returns the number of Splits rewritten.
int split_to_slices(Graph& graph);

/// graph/passes/split_wide_concat.cpp. Every Concat of more than `max_inputs` (>= 2) inputs
/// becomes a tree of Concats of at most `max_inputs` inputs each, along the same axis, into new
/// values "<node>/part<k>". Returns the number of Concats rewritten. Throws
/// std::invalid_argument for max_inputs < 2.
int split_wide_concat(Graph& graph, size_t max_inputs);

}  // namespace webtune::graph
