#pragma once
/// \file graph.hpp
/// webtune's graph IR: what an imported model is between ONNX and the tuner / the deployed
/// package. Small on purpose (ONNX's own protobuf classes stay inside the importer):
///  - tensors by name, each with a data type and a static shape (every dimension known: the
///    importer runs ONNX shape inference and refuses a graph whose shapes stay unknown);
///  - constants (ONNX initializers and Constant nodes) hold their data;
///  - nodes in topological order, each an ONNX operator type with its attributes, or a fused
///    operator (op types "FusedConv", "FusedGemm", "FusedMatMul", see below) that carries a
///    codegen Epilogue.
/// Layouts are ONNX's: NCHW activations, OIHW conv weights ([M, C/group, kH, kW]), Gemm B as
/// stored (transB says whether it is [N, K]).
///
/// Fused operators (made by the passes in graph/passes/, TVM Relay FuseOps' "out-elementwise-
/// fusable" op with its elementwise tail): inputs are the main op's inputs (X, W), then the
/// epilogue's extra tensors in the order of codegen/epilogue.hpp (bias of the output channels,
/// then the residual of the output's shape); attributes are the main op's; `epilogue` says what
/// follows the op. An unfused node has an empty epilogue.

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "codegen/epilogue.hpp"

namespace webtune::graph {

/// The element types a tensor may have. Only kFloat32 tensors flow through kernels; kInt64
/// appears as shape inputs (Reshape) and indices, kInt32/kBool are carried for completeness.
enum class DataType { kFloat32, kInt64, kInt32, kBool };

std::string_view data_type_name(DataType type);

/// A tensor: a graph input, an intermediate value, a graph output or a constant.
struct Tensor {
  std::string name;
  DataType type = DataType::kFloat32;
  std::vector<int64_t> shape;  ///< every dimension known and ≥ 0; {} is a scalar
  /// false only inside the importer, between ONNX shape inference rounds (onnx_import.cpp):
  /// the value's shape is not known yet (`shape` is then meaningless) until import-time
  /// simplification (simplify.hpp) folds what computes it. validate() refuses it.
  bool shape_known = true;
  /// Constants only (initializers, Constant nodes, folded values): row-major data. Exactly one
  /// of them is filled for a constant, the one of its type (kInt32 and kBool widen to int64).
  std::optional<std::vector<float>> float_data;
  std::optional<std::vector<int64_t>> int_data;

  bool is_constant() const { return float_data.has_value() || int_data.has_value(); }
  /// Product of the shape (1 for a scalar).
  int64_t elements() const;
};

/// An ONNX attribute value: int, float, string, ints or floats (the kinds the accepted
/// operators use; tensors and graphs as attributes are refused by the importer).
using Attribute =
    std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>>;

struct Node {
  std::string name;  ///< ONNX node name ("" allowed); error messages use it
  std::string
      op_type;  ///< ONNX op type ("Conv", "Relu", ...) or "FusedConv" / "FusedGemm" / "FusedMatMul"
  std::vector<std::string> inputs;   ///< tensor names; "" = an omitted optional input
  std::vector<std::string> outputs;  ///< tensor names
  std::map<std::string, Attribute> attributes;
  Epilogue epilogue;  ///< fused operators only; empty otherwise

  /// Typed attribute access with a default; throws std::invalid_argument naming the node and
  /// the attribute when it exists with another kind.
  int64_t get_int(const std::string& key, int64_t fallback) const;
  float get_float(const std::string& key, float fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> fallback) const;
  std::vector<float> get_floats(const std::string& key, std::vector<float> fallback) const;
  bool has(const std::string& key) const { return attributes.count(key) != 0; }
  /// "Conv 'conv1'" or "Conv #12" (for error messages).
  std::string describe(size_t index) const;
};

/// Raised for a graph that breaks the IR's invariants or a model the importer refuses; the
/// message names the node or tensor.
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Graph {
 public:
  std::string name;
  std::vector<std::string> inputs;   ///< graph inputs (non-constant), in ONNX order
  std::vector<std::string> outputs;  ///< graph outputs, in ONNX order
  std::vector<Node> nodes;           ///< topological order (validate() checks it)
  std::map<std::string, Tensor> tensors;

  /// The tensor `name`; throws GraphError naming it when absent.
  const Tensor& tensor(const std::string& name) const;
  Tensor& tensor(const std::string& name);
  bool has_tensor(const std::string& name) const { return tensors.count(name) != 0; }

  /// Checks the invariants: every node input is a graph input, a constant or an earlier node's
  /// output (so nodes are in topological order and acyclic); every tensor is produced once;
  /// every graph output exists; shapes are known; constants' data sizes match their shapes.
  /// Throws GraphError naming the first problem.
  void validate() const;

  /// Reorders `nodes` topologically (Kahn's algorithm, stable: ties keep their order); throws
  /// GraphError naming a node on a cycle when there is one.
  void sort_topologically();

  /// Indices of the nodes that read `tensor` (in node order).
  std::vector<size_t> consumers(const std::string& tensor) const;
  /// Index of the node that writes `tensor`, or nullopt for inputs and constants.
  std::optional<size_t> producer(const std::string& tensor) const;

  /// Node count per op type, e.g. {"Conv": 20, "Relu": 17} (import's summary).
  std::map<std::string, int> op_counts() const;
};

}  // namespace webtune::graph
