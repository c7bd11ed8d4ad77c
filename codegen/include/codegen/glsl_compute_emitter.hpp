/// \file glsl_compute_emitter.hpp
/// GLSL ES 3.10 compute-shader template (target gles-compute; OpenGL ES 3.1 / GL 4.3).
///
/// Tensors live in storage buffers, row-major (float or vec4 views; bindings 0 data, 1 weight,
/// 2 output). dense and conv2d share one implicit-GEMM template, depthwise_conv2d has a direct
/// one. GEMM knobs: workgroup shape, per-invocation register tile (up to 8×8), shared-memory
/// tiling on/off with its reduction depth, vec4 loads, stores and shared reads, unroll,
/// double-buffered shared tiles, k_split (invocations per output splitting the reduction
/// inside a workgroup, up to 1024 invocations in all) and k_groups (workgroups per output tile
/// splitting it across the dispatch's z, summed in one dispatch through scratch buffers:
/// KernelArtifact::scratch_floats / scratch_counters). Knobs, constraints and device limits
/// are documented in the .cpp.
///
/// Tiles need not divide their axis (kVerbose splits): edges are GUARDED in the kernel (loads
/// past an axis read 0 or a clamped address whose result is never stored, shared tiles are
/// zero-filled past the edge, stores past it are skipped), not padded, because buffers in a
/// model are shared between ops: padding them would need a copy or a layout change in every
/// producer.
///
/// Epilogues (Workload::epilogue, epilogue.hpp) are applied in the output stage, after the
/// reduction (and k_split's slice sum, and k_groups' sum of partials by the last group), to
/// each stored value: result[i] = webtune_epilogue(acc,
/// b, r) with the functions of glsl_epilogue_functions, b the bias of the store's output channel
/// (conv2d: its row k; dense: its column n, a vec4 of four columns' biases where columns are
/// vec4; depthwise: its plane's channel) and r the residual at the store's own index. Extra
/// read-only buffers, only when the epilogue has them: bias at binding 3 (`bias[]`: float, or
/// vec4 for dense's vec4 columns), residual at binding 3 without bias, else 4 (`residual[]`, the
/// output's element type). Stores past a guarded edge skip their loads too. An empty epilogue
/// emits the kernel byte for byte as before.
#pragma once

#include <memory>

#include "codegen/config_space.hpp"
#include "codegen/gemm_schedule.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// The config space of `workload` for gles-compute (device limits not yet applied).
/// Throws std::invalid_argument for an op without a template.
std::shared_ptr<ConfigSpace> glsl_compute_space(const Workload& workload);

/// The compute shader, buffers and dispatch for one entity of glsl_compute_space(workload).
/// Throws MeasureError(kInstantiation) when the entity cannot be built.
KernelArtifact emit_glsl_compute(const Workload& workload, const ConfigEntity& entity);

/// The untuned default: 8×8 workgroup (or the nearest the shapes and device limits allow),
/// one output per invocation, no shared memory, no vec4, no unroll.
ConfigEntity glsl_compute_default(const ConfigSpace& space);

/// The shared GEMM schedule (gemm_schedule.hpp) of dense or conv2d `workload` with the options
/// gles-compute turns on: the view, knobs, rules and thread → output mapping its kernels use.
/// Throws std::invalid_argument for another op.
GemmSchedule glsl_compute_gemm_schedule(const Workload& workload);

}  // namespace webtune
