/// \file glsl_frag_emitter.hpp
/// GLSL ES 3.00 fragment-shader template (target gles-frag; runs unchanged in WebGL2).
///
/// Tensors live in float textures (R32F, or RGBA32F packed four along a chosen axis); each
/// fragment computes a block of outputs (1, 4 along a row as one vec4, or 4×4 through four draw
/// buffers); the reduction loop can be unrolled and uses `dot` on vec4 when both operands are
/// packed along the reduction axis. dense, conv2d (direct and implicit-GEMM loop structures) and
/// depthwise_conv2d. The knobs, their constraints and device limits are documented in the .cpp.
#pragma once

#include <memory>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// The config space of `workload` for gles-frag (device limits not yet applied).
/// Throws std::invalid_argument for an op without a template.
std::shared_ptr<ConfigSpace> glsl_frag_space(const Workload& workload);

/// The fragment shader and layouts for one entity of glsl_frag_space(workload).
/// Throws MeasureError(kInstantiation) when the entity cannot be built.
KernelArtifact emit_glsl_frag(const Workload& workload, const ConfigEntity& entity);

/// The untuned default: one output per fragment, R32F textures, no unroll, natural layout.
ConfigEntity glsl_frag_default(const ConfigSpace& space);

}  // namespace webtune
