#pragma once
/// \file kernels.hpp
/// Internal to the reference executor (executor.cpp): what a kernel sees of its node, and the
/// kernels by family (one .cpp per family under graph/kernels/). Not installed, not public.
///
/// A kernel reads its node's attributes and inputs from a KernelContext and fills its outputs.
/// It throws GraphError with a message that does not name the node; execute() prefixes the node
/// (Node::describe) to every error a kernel raises.

#include <array>
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
/// Steps `index`, a row-major multi-index into `shape` (the same rank), to the next element:
/// the last axis fastest, wrapping to all zeros after the last element. The odometer every
/// kernel that walks an output by coordinates uses.
void next_index(std::vector<int64_t>& index, const std::vector<int64_t>& shape);
/// `axis` in [-rank, rank + extra) made non-negative; throws naming `what` when outside.
int64_t normalize_axis(int64_t axis, size_t rank, const char* what, int64_t extra = 0);
/// The values of an integer tensor of rank 0 or 1 (axes, pads, a shape, starts, ...); throws
/// naming `what` for a float tensor or a higher rank.
std::vector<int64_t> int_list(const Value& v, const char* what);
/// Whether `type` is held in Value::ints (int64, int32, bool).
inline bool is_int(DataType type) {
  return type != DataType::kFloat32;
}
/// `v` wrapped to the range of `type` (int32 two's complement, bool 0 / 1); int64 unchanged.
int64_t wrap_int(int64_t v, DataType type);
/// The value of a one-element tensor as double (float or int); throws naming `what` otherwise.
double scalar_of(const Value& v, const char* what);

/// numpy broadcast of two shapes (right-aligned; a dimension of 1 stretches); throws when they
/// do not broadcast.
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
/// Strides of `shape` (row-major, right-aligned) over the broadcast shape `out`: 0 where it
/// stretches.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& out);

/// Calls f(o, offsets) for every element o of `out` in row-major order, where offsets[k] is the
/// element of input k (of shape *shapes[k], which broadcasts to `out`) that o reads.
template <size_t K, typename F>
void for_each_broadcast(const std::vector<int64_t>& out,
                        const std::array<const std::vector<int64_t>*, K>& shapes, F&& f) {
  const int64_t total = product(out, 0, out.size());
  if (total == 0) return;
  std::array<int64_t, K> off{};
  if (out.empty()) {
    f(int64_t{0}, off);
    return;
  }
  std::array<std::vector<int64_t>, K> strides;
  for (size_t k = 0; k < K; ++k) strides[k] = broadcast_strides(*shapes[k], out);
  const size_t rank = out.size();
  const int64_t inner = out.back();
  std::vector<int64_t> index(rank - 1, 0);
  int64_t o = 0;
  for (int64_t r = 0, rows = total / inner; r < rows; ++r) {
    for (size_t k = 0; k < K; ++k) {
      off[k] = 0;
      for (size_t i = 0; i + 1 < rank; ++i) off[k] += index[i] * strides[k][i];
    }
    for (int64_t j = 0; j < inner; ++j, ++o) {
      f(o, off);
      for (size_t k = 0; k < K; ++k) off[k] += strides[k].back();
    }
    for (size_t i = rank - 1; i-- > 0;) {  // odometer over the outer dimensions
      if (++index[i] < out[i]) break;
      index[i] = 0;
    }
  }
}

/// Row-major strides of `shape`.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape);

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
void conv_transpose(KernelContext& ctx);
void max_pool(KernelContext& ctx);
void average_pool(KernelContext& ctx);
void global_average_pool(KernelContext& ctx);
void global_max_pool(KernelContext& ctx);

// matmul.cpp
void gemm(KernelContext& ctx);    // Gemm and FusedGemm
void matmul(KernelContext& ctx);  // MatMul and FusedMatMul

// elementwise.cpp: numpy-broadcasting arithmetic, comparisons and logic, float or int
void arithmetic(KernelContext& ctx);  // Add, Sub, Mul, Div, Pow, Mod
void variadic(KernelContext& ctx);    // Max, Min, Sum, Mean
void compare(KernelContext& ctx);     // Equal, Less, Greater, LessOrEqual, GreaterOrEqual
void logical(KernelContext& ctx);     // And, Or, Xor
void logical_not(KernelContext& ctx);
void where(KernelContext& ctx);
void cast(KernelContext& ctx);
void signed_unary(KernelContext& ctx);  // Neg, Abs, Sign (float or int)

// activations.cpp: float32 maps of one value
void unary(KernelContext& ctx);  // Relu, Sigmoid, Tanh, Exp, Log, Erf, Gelu, ... (see the file)
void clip(KernelContext& ctx);
void prelu(KernelContext& ctx);

// normalization.cpp
void batch_normalization(KernelContext& ctx);
void instance_normalization(KernelContext& ctx);
void layer_normalization(KernelContext& ctx);
void softmax(KernelContext& ctx);  // Softmax and LogSoftmax

// reduce.cpp
void reduce(KernelContext& ctx);  // ReduceSum, ReduceMean, ReduceMax, ... (see the file)

// shape_ops.cpp
void identity(KernelContext& ctx);
void dropout(KernelContext& ctx);
void reshape(KernelContext& ctx);
void flatten(KernelContext& ctx);
void transpose(KernelContext& ctx);
void concat(KernelContext& ctx);
void shape(KernelContext& ctx);
void size(KernelContext& ctx);
void squeeze(KernelContext& ctx);
void unsqueeze(KernelContext& ctx);
void expand(KernelContext& ctx);
void tile(KernelContext& ctx);
void constant_of_shape(KernelContext& ctx);
void range(KernelContext& ctx);

// index_ops.cpp
void gather(KernelContext& ctx);
void gather_elements(KernelContext& ctx);
void slice(KernelContext& ctx);
void split(KernelContext& ctx);
void pad(KernelContext& ctx);

// resize.cpp
void resize(KernelContext& ctx);  // Resize and Upsample

}  // namespace webtune::graph::kernels
