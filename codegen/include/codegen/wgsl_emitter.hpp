/// \file wgsl_emitter.hpp
/// WGSL compute-shader template (target webgpu): dense and conv2d as a register-blocked GEMM.
///
/// Tensors live in storage buffers, row-major: `@group(0) @binding(0)` = data (read),
/// `@binding(1)` = weight (read), `@binding(2)` = output (read_write), each an `array<f32>` or,
/// with the vec4 knob, an `array<vec4<f32>>` view of the same bytes.
///  - dense: A = data[M,K], B = weight[K,N], C = output[M,N].
///  - conv2d (NCHW): implicit GEMM per image, Y[K, OH·OW] = W[K, C·R·S] · im2col(X)[C·R·S, OH·OW],
///    with X = data[N,C,H,W] (always f32: im2col is gathered element by element, zero padding
///    computed on the fly), W = weight[K,C,R,S] (its rows are already [K, C·R·S]) and
///    Y = output[N,K,OH,OW]; the dispatch's z dimension runs over the N images.
/// Knobs: workgroup shape (threads_x, threads_y via the tile_x / tile_y splits), per-invocation
/// register tile (regs ≤ 8 per dimension), vec4 loads and stores, `var<workgroup>` tiling on/off
/// with its reduction depth (tile_k), unroll. Knobs, constraints, device limits and the thread →
/// element mapping are documented in the .cpp.
///
/// Tiles need not divide their axis (kVerbose splits): edges are GUARDED in the kernel (loads
/// past an axis read 0 or a clamped address whose result is never stored, workgroup tiles are
/// zero-filled past the edge, stores past it are skipped), not padded, because buffers in a
/// model are shared between ops: padding them would need a copy or a layout change in every
/// producer.
///
/// Epilogues (Workload::epilogue, epilogue.hpp) are applied in the output stage, after the
/// reduction, to each stored value: C[q] = webtune_epilogue(acc, b, Res[q]) (webtune_epilogue4
/// for vec4 columns) with the functions of wgsl_epilogue_functions, b the bias of the store's
/// output channel (conv2d: its row k, splatted over a vec4 of four pixels; dense: its column n,
/// a vec4 of four columns' biases where columns are vec4) and Res[q] the residual at the store's
/// own index. Extra read-only storage buffers, only when the epilogue has them: `Bias` at
/// binding 3 (array<f32>, or array<vec4<f32>> for dense's vec4 columns), `Res` at binding 3
/// without bias, else 4 (the type of C). Stores past a guarded edge skip their loads too. An
/// empty epilogue emits the kernel byte for byte as before.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/gemm_schedule.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// WebGPU's default limits (the spec's minimums, what requestDevice() grants without
/// requiredLimits): 256 invocations per workgroup, 256 × 256 × 64 workgroup size, 16384 bytes of
/// workgroup storage. Texture fields keep DeviceLimits' defaults (unused by this template).
/// Pass an agent's reported limits instead when known (SwiftShader reports 32 KiB of storage).
DeviceLimits webgpu_default_limits();

/// The config space of `workload` for webgpu (device limits not yet applied).
/// Throws std::invalid_argument for an op without a template (dense and conv2d have one).
std::shared_ptr<ConfigSpace> wgsl_space(const Workload& workload);

/// The WGSL shader, buffers and dispatch for one entity of wgsl_space(workload).
/// Throws MeasureError(kInstantiation) when the entity cannot be built (splits that do not
/// factor this workload, a broken constraint).
KernelArtifact emit_wgsl(const Workload& workload, const ConfigEntity& entity);

/// The untuned default: 8×8 workgroup (or the nearest the shapes and device limits allow), one
/// output per invocation, no workgroup memory, no vec4, no unroll.
ConfigEntity wgsl_default(const ConfigSpace& space);

/// The outputs (row, col) of the GEMM view's C that invocation (tx, ty) of workgroup (bx, by)
/// computes and stores under `entity`, in the emitter's own index arithmetic: the kernel's
/// stores go exactly there. Dense: C[M, N]. conv2d: Y[K, OH·OW] of the image the workgroup's z
/// index selects (col = oh·OW + ow). For tests (every output written exactly once) and for
/// logs. Throws like emit_wgsl.
std::vector<std::pair<int64_t, int64_t>> wgsl_owned_outputs(const Workload& workload,
                                                            const ConfigEntity& entity, int64_t bx,
                                                            int64_t by, int64_t tx, int64_t ty);

/// The flat indices into the output tensor (row-major, [M,N] or [N,K,OH,OW]) that invocation
/// `invocation` (x, y, z) of workgroup `group` (x, y, z) of the dispatch stores: the same
/// mapping as wgsl_owned_outputs, with the image (group z) added. Throws like emit_wgsl.
std::vector<int64_t> wgsl_owned_output_indices(const Workload& workload, const ConfigEntity& entity,
                                               const std::array<int64_t, 3>& group,
                                               const std::array<int64_t, 3>& invocation);

/// The shared GEMM schedule (gemm_schedule.hpp) of dense or conv2d `workload` with the options
/// webgpu turns on: the view, knobs, rules and thread → output mapping its kernels use. Throws
/// std::invalid_argument for another op.
GemmSchedule wgsl_gemm_schedule(const Workload& workload);

}  // namespace webtune
