#pragma once
/// \file operators.hpp
/// The operator table: the one place that says, for each operator webtune accepts, which ONNX
/// opsets it reads, the CPU reference kernel that defines its semantics (graph/kernels/), and
/// where a model package runs it when no tuned task covers it (deploy/'s GPU op kernels,
/// runtime/ops.mjs for wasm, or an alias). The importer (onnx_import.hpp) keeps any other
/// operator as a node and counts it as unsupported; the executor (executor.hpp), the planner
/// (deploy/planner.hpp) and the GPU op kernels (deploy/glue_kernels.hpp) read this table, and
/// tests check that runtime/ops.mjs's OP_TYPES and deploy/'s bodies agree with it.
/// docs/contributing.md says how to add an operator.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace webtune::graph {

namespace kernels {
struct KernelContext;
}

/// A reference kernel (graph/kernels/kernels.hpp): reads ctx's node and inputs, fills its outputs.
using ReferenceKernel = void (*)(kernels::KernelContext&);

/// Where a package runs an operator outside tuned tasks (bit flags of OperatorInfo::runs).
enum OperatorRuns : unsigned {
  /// A small kernel of deploy/glue_kernels.hpp's op_kernel on gles-frag, gles-compute and
  /// webgpu (one body, written once for GLSL and WGSL).
  kRunsOnGpu = 1u << 0,
  /// runtime/ops.mjs runs it in JavaScript in wasm packages.
  kRunsInWasmJs = 1u << 1,
  /// Row-major order unchanged (Reshape, Flatten, ...): the planner aliases the output to its
  /// data input instead of running anything.
  kRunsAsAlias = 1u << 2,
};

/// One operator of the table.
struct OperatorInfo {
  std::string_view name;  ///< ONNX op type of the default domain, or webtune's Fused*
  /// The model opsets (default domain, after the importer's downgrade of 18–22) whose form of
  /// the operator is read: the importer reads models of opset 7 to 17 and rewrites 18 to 22,
  /// so first_opset is the operator's first ONNX version clamped to 7, last_opset 22 unless the
  /// operator left the standard (Upsample).
  int first_opset;
  int last_opset;
  /// The forms that differ by opset, as the reference reads them ("" where one form).
  std::string_view forms;
  ReferenceKernel reference;
  unsigned runs;  ///< OperatorRuns bits
  /// Bit i set: input i is a parameter (a shape, axes, pads, starts, scales, indices, ...) that a
  /// package reads at build time; it must be a constant, and GPU op kernels do not bind it.
  uint32_t build_time_inputs;
};

/// Every operator, sorted by name.
const std::vector<OperatorInfo>& operator_table();

/// The entry of `op_type`, or nullptr.
const OperatorInfo* find_operator(std::string_view op_type);

/// The op types of operator_table(), sorted: ONNX op types of the default domain that the
/// executor runs, plus webtune's fused operators ("FusedConv", "FusedGemm", "FusedMatMul";
/// graph.hpp).
const std::vector<std::string>& supported_operators();

/// Whether `op_type` is in operator_table().
bool is_supported_operator(std::string_view op_type);

/// The op types whose entry has all of `runs` set, sorted.
std::vector<std::string> operators_that_run(unsigned runs);

}  // namespace webtune::graph
