#pragma once
/// \file executor.hpp
/// The CPU reference executor of webtune's graph IR (graph.hpp): runs a Graph node by node with
/// plain loops (no BLAS, no threads), to check what the tuned kernels and the deployed package
/// compute. Correctness first; it is fast enough for ResNet-18 and MobileNet-v2 in a unit test
/// (the convolution loops keep the output width innermost so the compiler can vectorise them).
///
/// Semantics are ONNX's (https://onnx.ai/onnx/operators/), for every operator of
/// supported_operators() (operators.hpp), plus webtune's fused operators FusedConv / FusedGemm /
/// FusedMatMul (graph.hpp; the main op's accumulator goes through Epilogue::apply, in double).
///
/// Precision: Conv, ConvTranspose, Gemm, MatMul, the pools' sums, GlobalAveragePool, the
/// reductions (ReduceSum, ReduceMean, ReduceL2, ...), BatchNormalization, InstanceNormalization,
/// LayerNormalization, Softmax, LogSoftmax, Resize's interpolation, Pow and the transcendental
/// maps (Sigmoid, Tanh, Exp, Log, Sqrt, Erf, Gelu, Softplus, Softsign, Elu, Selu) accumulate /
/// compute in double and round the result to float32 once. Add, Sub, Mul, Div, Mod, Sum, Mean,
/// Max, Min, Neg, Abs, Relu, LeakyRelu, PRelu, Reciprocal, Floor, Ceil, Round, Clip,
/// HardSigmoid and HardSwish compute in float32 (as ONNX's numpy reference does). Integer
/// tensors compute exactly (wrapping on overflow; Div truncates toward zero like C). docs/graph.md
/// ("Reference executor") lists the attribute coverage and the ONNX conformance cases that run.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace webtune::graph {

/// A tensor value at run time: a shape and row-major data. Float32 tensors fill `data`; int64,
/// int32 and bool tensors (shapes and shape arithmetic, indices, masks, comparison results)
/// fill `ints` (widened to int64, bool as 0 / 1, as Tensor::int_data) and say which in `type`.
struct Value {
  std::vector<int64_t> shape;  ///< {} is a scalar
  std::vector<float> data;     ///< type == kFloat32: elements() values
  std::vector<int64_t> ints;   ///< any other type: elements() values
  DataType type = DataType::kFloat32;

  /// Product of the shape (1 for a scalar).
  int64_t elements() const;
  bool is_float() const { return type == DataType::kFloat32; }

  static Value floats(std::vector<int64_t> shape, std::vector<float> data);
  static Value int64s(std::vector<int64_t> shape, std::vector<int64_t> ints);
  /// The data of the constant tensor `t` (Tensor::is_constant()) as a Value of its shape and type.
  static Value constant(const Tensor& t);
};

using ValueMap = std::map<std::string, Value>;

struct ExecuteOptions {
  /// Also return every node output (intermediate tensors), not only the graph outputs.
  bool keep_intermediates = false;
  /// The model's opset of the default ONNX domain (ImportReport::opset). The graph does not
  /// carry it; Softmax and LogSoftmax depend on it (before opset 13 the input is coerced to 2-D
  /// at `axis`, default 1; from 13 on they normalise along `axis`, default -1), and Resize
  /// (before 11: inputs X, scales and asymmetric coordinates). Other operators tell their opset
  /// style from the node (attributes or inputs).
  int64_t opset = 13;
};

/// Runs `graph` on `inputs` and returns its outputs by name (plus every node output when
/// options.keep_intermediates). `inputs` must hold every graph input by name, no other name,
/// each with the graph's shape and element kind (float32 in `data`, the other types in `ints`).
/// Graph outputs that are constants or inputs are returned as they are.
///
/// Throws GraphError, naming the node (Node::describe) where one is involved, for: a graph that
/// fails Graph::validate(); a missing, unknown or mis-shaped input; an operator without a kernel
/// (checked before anything runs); an attribute value a kernel does not handle (e.g. Conv's
/// auto_pad "FOO", BatchNormalization in training mode, Dropout in training mode with ratio > 0);
/// shapes that do not fit the operator at run time; a node output whose computed shape differs
/// from the graph's.
ValueMap execute(const Graph& graph, const ValueMap& inputs, const ExecuteOptions& options = {});

/// Runs one node by itself: `inputs` holds one pointer per node input (nullptr where the input
/// name is "" or the input is omitted), `output_types` the element type each node output has in
/// the graph (kernels that cannot tell it from their inputs read it: Dropout's mask,
/// ConstantOfShape's integer type). Returns one Value per node output (an unnamed output stays
/// empty). This is what execute() does for each node and what constant folding
/// (graph/passes/fold_constants.cpp) calls. Throws GraphError naming the node as
/// `node.describe(index)` for an operator without a kernel, an attribute value the kernel does not
/// handle, or inputs that do not fit.
std::vector<Value> run_node(const Node& node, size_t index, const std::vector<const Value*>& inputs,
                            const std::vector<DataType>& output_types, int64_t opset = 13);

/// Whether the executor has a kernel for `op_type` (executable_operators()).
bool has_kernel(const std::string& op_type);

/// The op types execute() has a kernel for, sorted. Equals supported_operators() (a test
/// checks it).
std::vector<std::string> executable_operators();

}  // namespace webtune::graph
