#pragma once
/// \file glue_kernels.hpp
/// The kernels a model package needs besides its tuned tasks (docs/package.md): layout
/// transforms between two frag kernels whose placements disagree, and small kernels of each
/// GPU target for the operators no task covers (pooling, elementwise and broadcasting ops,
/// Concat, Softmax, Transpose, ...). Each is a KernelArtifact like a tuned kernel's, so the
/// runtimes run every step the same way. wasm packages run these operators in the runtime's
/// JavaScript instead (browser-agent's model runtime).

#include <optional>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/target.hpp"
#include "deploy/storage.hpp"
#include "graph/graph.hpp"

namespace webtune::deploy {

/// A gles-frag kernel (GLSL ES 3.00, fragment stage) that reads a tensor of `shape` stored as
/// `from` (kTexture: input 0 is its one texture; kTargets: inputs 0 … rows_per_item−1 are the
/// render targets, each bound as a texture of targets.width × targets.height × channels) and
/// writes it placed as `to` into one render target (artifact.output: rows_per_item 1,
/// channels = to.channels(), width = to.width, height = to.height). Throws
/// std::invalid_argument for a `from` that is not frag storage (texture or render targets),
/// shapes whose element counts differ, or a `to` over the device limits.
///
/// Details: `to.shape` and the source's shape (from.texture.shape, or the targets' rows·cols)
/// may differ from `shape` but must have its element count: elements are matched by their
/// row-major flat index (a Reshape / Flatten alias in between keeps that order). Texels past
/// to.packed_elements() and positions past the packed axis's end are written 0, so the
/// render target holds exactly what `to.pack(logical)` would upload. artifact.output is
/// rows = 1, cols = to.width·to.height·channels: its unpack() gives those texels as they are
/// (flat texel order), not a logical tensor. For kTargets the artifact's inputs describe the
/// render targets as flat textures ([width·height·channels], pack_axis 0 for RGBA): the
/// runtime binds the slots' textures as they are and never packs them. Drawn with
/// kFullscreenVertexShader; sampler in<j> on texture unit j.
KernelArtifact relayout_kernel(const std::vector<int64_t>& shape, const Storage& from,
                               const TensorLayout& to, const DeviceLimits& limits);

/// Whether op_kernel can build a small kernel for this op type (ONNX name, or a fused
/// operator's) on `target` (gles-frag, gles-compute, webgpu): MaxPool, AveragePool,
/// GlobalAveragePool, Relu, Clip, Sigmoid, HardSigmoid, HardSwish, Add, Sub, Mul, Div, Concat,
/// Softmax, Transpose, BatchNormalization, and naive Conv / FusedConv (groups, dilations, 1-3
/// spatial dims), Gemm / FusedGemm and MatMul / FusedMatMul (batched, broadcast) for nodes no
/// tuned workload fits, and a plain copy for Reshape, Flatten, Identity and Dropout
/// (inference) where the planner cannot alias them. False for wasm (the JavaScript runtime
/// runs those).
bool has_op_kernel(Target target, const std::string& op_type);

/// The tensors an op kernel binds, in binding order: the node's non-empty inputs in node order
/// (an omitted optional input "" is skipped, e.g. Clip's min when only max is given); only the
/// data input for Reshape, Flatten, Identity and Dropout (their shape / ratio / mode inputs
/// are read at build time, not bound).
/// Constants among them (weights, BatchNormalization's parameters, Clip's bounds) are bound as
/// weights by the planner.
std::vector<std::string> op_kernel_inputs(const graph::Node& node);

/// What op_kernel needs beyond the graph.
struct OpKernelOptions {
  /// The model's default-domain opset (ImportReport::opset): Softmax before 13 coerces its
  /// input to 2-D at `axis` (default 1), from 13 on it normalises along `axis` (default −1),
  /// as graph/executor.hpp's ExecuteOptions::opset.
  int64_t opset = 13;
  /// gles-frag only, optional: where each bound input (op_kernel_inputs order) already lives
  /// when it is not a plain R32F texture — a texture of any TensorLayout, or a fragment
  /// kernel's render targets (Storage kTexture / kTargets; nullopt = plain). The kernel reads it
  /// in place, so no relayout step is needed before it. Empty: every input plain. Then
  /// artifact.inputs lists textures in sampler-unit order: one for a texture, rows_per_item for
  /// render targets (described as relayout_kernel's inputs), so it can be longer than
  /// op_kernel_inputs(node). (docs/package.md binds render targets as several textures "only
  /// for a relayout": a planner that passes kTargets here needs that sentence widened.)
  std::vector<std::optional<Storage>> input_storage;
  /// gles-frag only, optional: write the output placed as this layout (any pack axis or width,
  /// padding 0) instead of plain, so no relayout step is needed after the kernel.
  /// artifact.output is then relayout_kernel's: rows 1, cols = width·height·channels,
  /// channels = output_layout->channels().
  std::optional<TensorLayout> output_layout;
  /// gles-compute and webgpu: a reduction over groups of 128 elements or more (GlobalAveragePool,
  /// GlobalMaxPool, Reduce* but LogSumExp) runs as one workgroup per output element with a
  /// shared-memory tree (then artifact.workgroup is {T, 1, 1}, T a power of two ≤ 256 within the
  /// limits, and dispatch one workgroup per output element, {gx, gy, 1} with o = y·gx + x).
  /// false: the element frame for every operator.
  bool workgroup_reductions = true;
};

/// A small kernel for `node` of `graph` on `target` (gles-frag, gles-compute or webgpu):
/// inputs in the node's input order, each plain row-major (frag: plain_texture_layout; compute:
/// a plain buffer), the output plain as well; shapes and attributes from the graph, constants
/// bound as weights by the planner. Throws std::invalid_argument naming the node for an op type
/// or an attribute it does not handle.
///
/// Semantics are those of graph/executor.hpp's reference kernels (graph/kernels/), attribute by
/// attribute; float32 arithmetic (the reference accumulates some sums in double: differences
/// are rounding only). One output element per fragment / invocation.
///
/// Artifact, per target:
///  - inputs: op_kernel_inputs(node), frag: plain_texture_layout(shape, limits) (R32F,
///    sampler in<i> on texture unit i); compute: pack_axis −1, width = elements, height 1.
///  - output: rows 1, cols = elements, rows_per_item 1, channels 1; frag: width / height of
///    plain_texture_layout(output shape) (texels past the end are written 0); compute: width =
///    elements, height 1.
///  - compute bindings (GLSL std430 SSBOs; WGSL @group(0) var<storage>): input i at binding
///    i for i < 2 and i + 1 from i = 2 on (0, 1, 3, 4, 5, …), the output at binding 2 — the
///    tuned kernels' convention (data 0, weight 1, output 2, bias 3, residual 4) extended to n
///    inputs. workgroup {64, 1, 1} (less if the limits say so); dispatch {gx, gy, 1} with
///    gx ≤ 65535, invocation (x, y) computing element y·gx·64 + x (those past the end return).
///
/// Errors (std::invalid_argument, "op_kernel: <op> '<node name>': why", or "<op> (output
/// '<name>')" for an unnamed node): another target, an
/// op type without a kernel, a non-float32 input or output, attributes it does not handle
/// (MaxPool's Indices output, BatchNormalization training mode, an unknown auto_pad, …),
/// shapes that do not fit the operator or the graph's output shape, a frag tensor larger than
/// one texture (plain_texture_layout), a webgpu kernel with more than 7 inputs (WebGPU's
/// default maxStorageBuffersPerShaderStage is 8, the output included). gles-compute kernels
/// use inputs + 1 storage blocks: OpenGL ES 3.1 guarantees only 4
/// (GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS; llvmpipe and desktop drivers have 16 or more), so a
/// Concat of more than 3 inputs or a BatchNormalization (5 inputs) needs a device above the
/// minimum; DeviceLimits does not carry that limit, so it is not checked here.
KernelArtifact op_kernel(Target target, const graph::Graph& graph, const graph::Node& node,
                         const DeviceLimits& limits);
KernelArtifact op_kernel(Target target, const graph::Graph& graph, const graph::Node& node,
                         const DeviceLimits& limits, const OpKernelOptions& options);

}  // namespace webtune::deploy
