/// \file wasm_emitter.hpp
/// WebAssembly template (target wasm): dense and conv2d as a register-blocked GEMM, built as a
/// wasm32 module with LLVM (IRBuilder, O3, the WebAssembly backend) and linked in process by lld.
///
/// The module follows docs/wasm_abi.md: it imports `env.memory` (initial = maximum =
/// memory_pages, shared iff threads > 1) and exports `run(tid)`; inputs and output are plain
/// row-major fp32 at the artifact's byte offsets; scratch (packed B panels, im2col panels) lies
/// past the output, one slice per thread. Knobs, constraints and the thread → output mapping
/// are documented in wasm_emitter.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// One entity of a wasm space decoded, with the memory layout it gets. The kernel computes, for
/// each batch image b, the GEMM C_b[M,N] = A[M,K] · B_b[K,N]: dense has one image with A = data,
/// B = weight, C = output; conv2d has A = weight viewed as [K_out, C·R·S], B_b = im2col(X_b)
/// [C·R·S, OH·OW] and C_b = Y_b viewed as [K_out, OH·OW] (implicit GEMM).
struct WasmPlan {
  // GEMM shape per batch image.
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool im2col = false;  ///< conv2d whose B panel is gathered from X (not 1×1 stride 1 pad 0)
  // Knobs.
  int mr = 1;               ///< rows of C per micro-tile
  int nr = 1;               ///< columns of C per micro-tile (a multiple of 4 with simd)
  int unroll_k = 1;         ///< copies of the reduction step per loop iteration
  bool simd = false;        ///< f32x4 accumulators, splat A × v128 loads of B
  bool cols_outer = false;  ///< micro-tile loop order: column blocks outer (B panel stays hot)
  bool pack_b = false;      ///< copy (or gather) the thread's B columns into a contiguous panel
  int threads = 1;          ///< run(tid) calls; tid owns a static range of column blocks
  // Memory layout (bytes).
  std::array<int64_t, 3> offsets = {0, 0, 0};  ///< data, weight, output
  int64_t scratch_offset = 0;                  ///< first thread's scratch slice
  int64_t scratch_bytes_per_thread = 0;        ///< one slice (64-byte multiple), 0 without panel
  int64_t memory_pages = 0;                    ///< 64 KiB pages

  int64_t col_blocks() const { return (n + nr - 1) / nr; }
  /// Column blocks of thread `tid`: [tid·nb/T, (tid+1)·nb/T) with nb = col_blocks().
  int64_t first_block(int64_t tid) const { return tid * col_blocks() / threads; }
};

/// Decodes `entity` of wasm_space(workload) and lays out memory. Throws
/// MeasureError(kInstantiation) when the entity breaks a constraint or does not fit 4 GiB.
WasmPlan wasm_plan(const Workload& workload, const ConfigEntity& entity);

/// The config space of `workload` for wasm (device limits not yet applied: threads above
/// DeviceLimits::max_threads are dropped when they are). Throws std::invalid_argument for
/// depthwise_conv2d ("no wasm template for depthwise_conv2d").
std::shared_ptr<ConfigSpace> wasm_space(const Workload& workload);

/// Builds the module of one entity and its artifact (source = base64 module, wasm info, plain
/// row-major inputs and output). Throws MeasureError(kInstantiation) for an invalid entity,
/// MeasureError(kCompileHost, message) when LLVM or lld fail (lld's own messages included) or
/// when webtune was built without LLVM.
KernelArtifact emit_wasm(const Workload& workload, const ConfigEntity& entity);

/// The untuned baseline: scalar, MR = NR = 1, no unroll, no packing, rows outer, 1 thread.
ConfigEntity wasm_default(const ConfigSpace& space);

/// True when this build of webtune can build wasm modules (configured WEBTUNE_WITH_LLVM=ON).
bool wasm_emitter_available();

/// Standard base64 (RFC 4648 alphabet, '=' padding) of `bytes`, as the artifact carries modules.
std::string base64_encode(const std::string& bytes);

}  // namespace webtune
