#pragma once
/// \file onnx_import.hpp
/// ONNX → webtune's graph IR (graph.hpp). Parses a ModelProto with Debian's libonnx (protobuf
/// classes of onnx-ml.proto), binds symbolic input dimensions, runs ONNX's own shape inference
/// (onnx::shape_inference::InferShapes) and converts what it finds:
///  - initializers and Constant nodes become constants (float32, int64, int32 and bool data;
///    raw_data is read as little-endian, as onnx.proto specifies);
///  - every other node stays a node with its INT, FLOAT, STRING, INTS and FLOATS attributes;
///  - graph inputs that are initializers (IR version < 4 lists them) are constants, not inputs.
/// Then import-time simplification (simplify.hpp): constants fold (Identity of a weight,
/// Shape / Gather / Slice / Concat / Cast / arithmetic chains on static shapes, ...), the folded
/// values are written back into the model and shape inference runs again, until every value has
/// a static shape or nothing more folds (at most 16 rounds); then aliases and dead nodes go.
/// ImportReport::simplified says what was folded.
/// ONNX's checker (onnx::checker::check_model) runs before each shape inference: it refuses
/// structurally broken nodes (arity, attribute kinds against the operator schemas) and a graph
/// whose nodes are not in topological order (ONNX requires it; a cycle breaks it). The result is
/// validate()d.
///
/// Operators the reference executor cannot run (operators.hpp) are kept as nodes and counted in
/// ImportReport::unsupported (after simplification: what folded away is not counted), so a caller
/// can still list the tasks it can tune; they are not an error here. Refused with GraphError (the
/// message names the file, and the node, tensor or field): a file that is not a ModelProto
/// (truncated, empty, another format), a model without a graph, an opset of the default domain
/// outside [kMinOpset, kMaxOpset], external data, a tensor of another element type than float32 /
/// int64 / int32 / bool, a shape that stays unknown after inference (a symbolic input dimension
/// without a binding names the dimension), what ONNX's checker refuses, an initializer whose data
/// does not fill its shape, a tensor- or graph-valued attribute on a supported operator, a cycle,
/// shape inference's own errors, a constant subgraph whose kernel refuses its inputs ("while
/// folding constants: ..."), and a path that is not a regular file (a directory, a FIFO or a device
/// is refused before it is opened, so nothing blocks).

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.hpp"
#include "graph/simplify.hpp"

namespace webtune::graph {

/// Opsets of the default ONNX domain the importer accepts (opset 7 is ONNX 1.2; 17 is what
/// Debian's libonnx 1.12 knows).
inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 17;
/// The largest model file read (protobuf's own limit for one message is 2 GiB).
inline constexpr int64_t kMaxModelBytes = int64_t{2} << 30;

struct ImportOptions {
  /// Values for symbolic input dimensions (dim_param), e.g. {"batch_size": 1}. A symbolic
  /// dimension not named here is refused; "*" binds every unnamed one.
  std::map<std::string, int64_t> symbolic_dims;
};

/// What the importer saw, for `webtune import`'s summary.
struct ImportReport {
  int64_t ir_version = 0;
  int64_t opset = 0;  ///< of the default domain, as read (17 after a downgrade)
  /// The file's opset when it was 18-22 and rewritten into 17 (opset_downgrade.hpp), else 0.
  int64_t downgraded_from = 0;
  std::string producer;  ///< producer_name and producer_version, e.g. "pytorch 2.11.0"
  /// Op types the reference executor does not run, with their node counts.
  std::map<std::string, int> unsupported;
  /// What import-time simplification folded and removed, and the inference rounds it took.
  SimplifyReport simplified;
};

/// Imports the ONNX model file at `path`. Throws GraphError (see the file comment).
Graph import_onnx_file(const std::string& path, const ImportOptions& options = {},
                       ImportReport* report = nullptr);

/// Imports a serialized ModelProto; `source` names it in messages (e.g. the path).
Graph import_onnx_bytes(const std::string& bytes, const std::string& source,
                        const ImportOptions& options = {}, ImportReport* report = nullptr);

}  // namespace webtune::graph
