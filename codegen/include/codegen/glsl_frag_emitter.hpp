/// \file glsl_frag_emitter.hpp
/// GLSL ES 3.00 fragment-shader template (target gles-frag; runs unchanged in WebGL2).
///
/// Tensors live in float textures (R32F, or RGBA32F packed four along a chosen axis); each
/// fragment computes a block of outputs (1 or 4 consecutive columns as a float or a vec4, times
/// 1, 2, 4 or 8 consecutive rows through as many draw buffers: 1, vec4, 4×4 up to 8×4; or, with
/// knob stage = vertex, one vertex per block whose up to 24 rows are captured by transform
/// feedback); the
/// reduction loop can be unrolled and uses `dot` (or vec4 multiply-adds) when the operands are
/// packed four along an axis. dense, conv2d (direct and implicit-GEMM loop structures) and
/// depthwise_conv2d. The knobs, their constraints and device limits are documented in the .cpp.
///
/// Epilogues (Workload::epilogue): the bias and the residual are inputs 2, 3 in
/// Workload::input_count order, samplers `in2` / `in3` on texture units 2 / 3, one TensorLayout
/// each in KernelArtifact::inputs (shapes [C_out] and the output's). They are read with one
/// fetch per block row (conv bias), per output vec4 (dense bias packed four along N; residual
/// packed four along its last axis where an output column quad is one texel: dense with vec4
/// blocks, convolutions with OW % 4 = 0) or per output (R32F otherwise), after the reduction,
/// and the block is stored as webtune_epilogue(acc, bias, residual) in the fragment and the
/// vertex stage alike. An empty epilogue leaves the kernel's text as it was.
///
/// Non-divisible tiling: no knob must divide an axis (except depthwise packing c with batch > 1
/// and C % 4 ≠ 0: out_rows divides C so that a channel quad stays in one image). Block rows and
/// columns past the output are padding in OutputLayout, computed from clamped indices (every fetch
/// stays inside its texture) and never read back; convolution blocks that straddle two images
/// decode the image per row (conv2d then fetches the data per row); reduction tails are
/// straight-line remainder steps of the unrolled loop, and packed quads past K or C read the zeros
/// TensorLayout::pack fills them with. Zero padding where it costs nothing in the loop
/// (reduction axes), clamping where the result is discarded anyway (block axes). Records made
/// before this read the same: no knob or candidate changed, only which entities are valid.
#pragma once

#include <memory>
#include <optional>

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

/// How a model package wires a tuned kernel to its neighbours (deploy/planner.cpp). Neither
/// changes the arithmetic of the config, only where the output goes and where the data comes
/// from, so a kernel costs what its record measured (same fetches, same multiply-adds).
struct FragPackageOptions {
  /// Store the output as channel quads in the layers of one 2D array texture
  /// (OutputLayout::quad_layers). Needs frag_can_write_quad_layers.
  bool quad_layers_out = false;
  /// Read the data (input 0, sampler2DArray in0) from another kernel's quad_layers output of
  /// this layout instead of the data texture the config names (KernelArtifact::inputs[0] then
  /// has TensorLayout::layers). Needs frag_can_read_quad_layers.
  std::optional<OutputLayout> data_layers;
};

/// Whether the kernel of `entity` can store its output as quad layers: a fragment-stage conv2d
/// or depthwise_conv2d of batch 1 with K (C) a multiple of 4, out_cols 4 and out_rows 4 or 8.
bool frag_can_write_quad_layers(const Workload& workload, const ConfigEntity& entity);

/// Whether the kernel of `entity` can read its data from `source`, a quad_layers output: a
/// fragment-stage conv2d or depthwise_conv2d of batch 1 with packing c, whose data [1, C, H, W]
/// is `source`'s [C, H·W].
bool frag_can_read_quad_layers(const Workload& workload, const ConfigEntity& entity,
                               const OutputLayout& source);

/// emit_glsl_frag with a package's wiring. Throws std::invalid_argument when an option does not
/// fit (see the two predicates above), MeasureError(kInstantiation) as emit_glsl_frag.
KernelArtifact emit_glsl_frag(const Workload& workload, const ConfigEntity& entity,
                              const FragPackageOptions& options);

/// The untuned default: one output per fragment, R32F textures, no unroll, direct convolution
/// loops (c, r, s), and the natural 2d layout for every texture whose 2d form fits the space's
/// device limits (flat for the others). If even that is invalid, the valid entity of lowest
/// index; if the space has none, the plain entity (invalid).
ConfigEntity glsl_frag_default(const ConfigSpace& space);

}  // namespace webtune
