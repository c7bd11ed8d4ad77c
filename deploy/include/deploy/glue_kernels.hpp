#pragma once
/// \file glue_kernels.hpp
/// The kernels a model package needs besides its tuned tasks (docs/package.md): layout
/// transforms between two frag kernels whose placements disagree, and small kernels of each
/// GPU target for the operators no task covers (pooling, elementwise and broadcasting ops,
/// Concat, Softmax, Transpose, ...). Each is a KernelArtifact like a tuned kernel's, so the
/// runtimes run every step the same way. wasm packages run these operators in the runtime's
/// JavaScript instead (browser-agent's model runtime).

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
/// std::invalid_argument for other targets or a `to` over the device limits.
KernelArtifact relayout_kernel(const std::vector<int64_t>& shape, const Storage& from,
                               const TensorLayout& to, const DeviceLimits& limits);

/// Whether op_kernel can build a small kernel for this op type (ONNX name) on `target`.
bool has_op_kernel(Target target, const std::string& op_type);

/// A small kernel for `node` of `graph` on `target` (gles-frag, gles-compute or webgpu):
/// inputs in the node's input order, each plain row-major (frag: plain_texture_layout; compute:
/// a plain buffer), the output plain as well; shapes and attributes from the graph, constants
/// bound as weights by the planner. Throws std::invalid_argument naming the node for an op type
/// or an attribute it does not handle.
KernelArtifact op_kernel(Target target, const graph::Graph& graph, const graph::Node& node,
                         const DeviceLimits& limits);

}  // namespace webtune::deploy
