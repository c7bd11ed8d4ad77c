/// \file wgsl_depthwise_emitter.hpp
/// WGSL compute-shader template for depthwise conv2d (target webgpu, template
/// "depthwise_conv2d_nchw.webgpu"): a direct convolution, each invocation a block of outputs.
///
/// Y[n, c, oh, ow] = Σ_{r,s} X[n, c, oh·stride − pad + r, ow·stride − pad + s] · W[c, 0, r, s],
/// then the workload's epilogue (epilogue.hpp), with X = data[N,C,H,W], W = weight[C,1,R,S] and
/// Y = output[N,C,OH,OW], all fp32 row-major in storage buffers:
///   `@binding(0)` X (read), `@binding(1)` W (read), `@binding(2)` Y (read_write; an
///   array<vec4<f32>> view with vec4 stores), then the epilogue's bias [C] at `@binding(3)` and
///   its residual [N,C,OH,OW] at the next binding (3 without bias, else 4), as
///   kernel_artifact.hpp lays out every compute target's bindings.
/// Any stride and any pad; splits use SplitPolicy::kVerbose, so an axis of 7, 49 or 144 gets
/// the tiles of a power of two beside its divisors, with guarded edges (not padded buffers:
/// the agents allocate plain tensors, and a guard costs one compare per store).
/// Knobs, rules, device limits, the thread → output mapping and the default are documented in
/// the .cpp.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// The config space of a depthwise_conv2d `workload` for webgpu (device limits not yet
/// applied; webgpu_default_limits() in wgsl_emitter.hpp are WebGPU's). Validates the workload
/// (std::invalid_argument as Workload::validate) and throws std::invalid_argument for another
/// op.
std::shared_ptr<ConfigSpace> wgsl_depthwise_space(const Workload& workload);

/// The WGSL shader, buffer layouts (every input of Workload::input_count, in binding order),
/// dispatch and workgroup size of one entity of wgsl_depthwise_space(workload). Throws
/// MeasureError(kInstantiation) for an entity that does not fit this workload (a split of
/// another extent, a missing knob) or breaks a rule (the message names it). Does not check
/// device limits (Task::build does).
KernelArtifact emit_wgsl_depthwise(const Workload& workload, const ConfigEntity& entity);

/// The untuned default: per knob the candidate closest to "8 × 8 invocations over the output
/// plane, one channel and one output per invocation, exact splits where the axis allows
/// (7 for an axis of 7), no vec4, no workgroup memory, run-time R·S loops"; when device limits
/// exclude that entity, the valid entity with the smallest summed distance. Throws
/// std::runtime_error when the space has no valid entity.
ConfigEntity wgsl_depthwise_default(const ConfigSpace& space);

/// Estimated bytes fetched per output (input pixels and weights, caches ignored) by the kernel
/// of `entity`: a first-order traffic model for the cost model's analytic features
/// (Template::features). Throws like emit_wgsl_depthwise.
double wgsl_depthwise_input_bytes_per_output(const Workload& workload, const ConfigEntity& entity);

/// The flat indices into Y that invocation `invocation` (x, y, z) of workgroup `group` (x, y, z)
/// stores under `entity`, in the emitter's own index arithmetic (guarded edges left out): for
/// tests (every output stored exactly once) and logs. Throws like emit_wgsl_depthwise.
std::vector<int64_t> wgsl_depthwise_owned_output_indices(const Workload& workload,
                                                         const ConfigEntity& entity,
                                                         const std::array<int64_t, 3>& group,
                                                         const std::array<int64_t, 3>& invocation);

}  // namespace webtune
