#pragma once
/// \file kernels.hpp
/// Internal to the reference executor (executor.cpp): what a kernel sees of its node, and the
/// kernels by family (one .cpp per family under graph/kernels/). Not installed, not public.
///
/// A kernel reads its node's attributes and inputs from a KernelContext and fills its outputs.
/// It throws GraphError with a message that does not name the node; execute() prefixes the node
/// (Node::describe) to every error a kernel raises.

#include <cstdint>
#include <string>
#include <vector>

#include "graph/executor.hpp"

namespace webtune::graph::kernels {

struct KernelContext {
  const Node& node;
  /// One per node input; nullptr where the input name is "" (an omitted optional input).
  std::vector<const Value*> inputs;
  /// One per node output; the kernel fills those with a non-empty name (wanted()).
  std::vector<Value> outputs;
  /// The graph's declared element type of each output (kFloat32 for unnamed ones).
  std::vector<DataType> output_types;
  int64_t opset = 13;

  /// Input `i`; throws naming `what` when the node has no such input or it is omitted.
  const Value& input(size_t i, const char* what) const;
  /// Input `i`, or nullptr when the node has fewer inputs or it is omitted.
  const Value* optional_input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  /// Input `i` as float32; throws naming `what` when it is absent or of another type.
  const Value& float_input(size_t i, const char* what) const;
  /// Whether output `i` exists and has a name.
  bool wanted(size_t i) const { return i < node.outputs.size() && !node.outputs[i].empty(); }
};

/// Throws GraphError(message).
[[noreturn]] void fail(const std::string& message);
/// "[1,3,224,224]"
std::string shape_text(const std::vector<int64_t>& shape);
/// Product of `shape[begin, end)`.
int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end);
/// `axis` in [-rank, rank + extra) made non-negative; throws naming `what` when outside.
int64_t normalize_axis(int64_t axis, size_t rank, const char* what, int64_t extra = 0);

/// The extra tensors of a fused node's epilogue (graph.hpp's fused-operator convention).
struct EpilogueInputs {
  const float* bias = nullptr;      ///< [channels], or nullptr without a bias
  const float* residual = nullptr;  ///< the output's shape, or nullptr without a residual
};
/// Binds inputs 2 (bias, when epilogue.bias) and 2 or 3 (residual) of `ctx`, checking that the
/// bias is [channels] and the residual has `out_shape`; `channels_note` explains in messages
/// where the channels are (e.g. " (the output's last dimension)"). Throws GraphError otherwise.
EpilogueInputs epilogue_inputs(const KernelContext& ctx, const Epilogue& epilogue, int64_t channels,
                               const std::vector<int64_t>& out_shape,
                               const std::string& channels_note = "");

// conv_pool.cpp
void conv(KernelContext& ctx);  // Conv and FusedConv
void max_pool(KernelContext& ctx);
void average_pool(KernelContext& ctx);
void global_average_pool(KernelContext& ctx);

// matmul.cpp
void gemm(KernelContext& ctx);    // Gemm and FusedGemm
void matmul(KernelContext& ctx);  // MatMul and FusedMatMul

// elementwise.cpp
void binary(KernelContext& ctx);  // Add, Sub, Mul, Div (numpy broadcast)
void unary(KernelContext& ctx);   // Relu, Sigmoid, HardSigmoid, HardSwish
void clip(KernelContext& ctx);
void batch_normalization(KernelContext& ctx);
void softmax(KernelContext& ctx);

// shape_ops.cpp
void identity(KernelContext& ctx);
void dropout(KernelContext& ctx);
void reshape(KernelContext& ctx);
void flatten(KernelContext& ctx);
void transpose(KernelContext& ctx);
void concat(KernelContext& ctx);

}  // namespace webtune::graph::kernels
