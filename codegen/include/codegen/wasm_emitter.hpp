/// \file wasm_emitter.hpp
/// WebAssembly template (target wasm): dense and conv2d as a register-blocked GEMM,
/// depthwise_conv2d as a direct micro-tiled convolution, each with the workload's epilogue
/// fused into its store, built as a wasm32 module with LLVM (IRBuilder, O3, the WebAssembly
/// backend) and linked in process by lld.
///
/// The module follows docs/wasm_abi.md: it imports `env.memory` (initial = maximum =
/// memory_pages, shared iff threads > 1) and exports `run(tid)`; every input (data, weight,
/// bias, residual) and the output are plain row-major fp32 at the artifact's byte offsets;
/// scratch (packed B panels, im2col panels, padded depthwise planes) lies past the output, one
/// slice per thread. Knobs, constraints and the thread → output mapping
/// are documented in wasm_emitter.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// One entity of a wasm space decoded, with the memory layout it gets.
///
/// dense and conv2d: the kernel computes, for each batch image b, the GEMM C_b[M,N] = A[M,K] ·
/// B_b[K,N]: dense has one image with A = data, B = weight, C = output; conv2d has A = weight
/// viewed as [K_out, C·R·S], B_b = im2col(X_b) [C·R·S, OH·OW] and C_b = Y_b viewed as
/// [K_out, OH·OW] (implicit GEMM).
/// depthwise_conv2d: a direct convolution per plane p = n·C + c of X[N,C,H,W] (W[C,1,R,S]),
/// over a zero-padded copy of the plane in scratch, in micro-tiles of Y[N,C,OH,OW].
///
/// ## Tiles that do not divide their axis (issue 14; every axis, per op)
///  - GEMM M (mr): guarded edges. Rows past M read row M − 1 of A (clamped: no memory past A
///    is touched) and are not stored; the bias/residual of such rows is never loaded.
///  - GEMM N (nr; conv2d's OH·OW): padded panels where B is packed (pack_b, and always for
///    im2col: columns past N are zero in the panel), else loads past the row end into the slack
///    after each tensor; stores are guarded (a scalar tail: a vector straddling N is stored lane
///    by lane). Padding keeps the K loop free of branches, which is where the time goes.
///  - GEMM K (unroll_k; conv2d's C·R·S): guarded edge. The unrolled loop covers the largest
///    multiple of unroll_k and a one-step tail loop the rest; zero-padding K would need padding
///    A as well, which is not packed.
///  - depthwise OH, OW (tile_h, tile_w): padded scratch. The padded plane is as large as the
///    whole micro-tiles need (zeros past the input), so the R·S loop never checks bounds; rows
///    past OH and columns past OW are not stored (guarded, scalar tail as above).
///  - depthwise planes N·C (tile_c): guarded edge; the last task stops at plane N·C.
/// The unroll_k rule (unroll_k divides K) of the first wasm space is gone; old records, all of
/// which divided, decode and build the same modules.
struct WasmPlan {
  OpKind op = OpKind::kDense;
  // GEMM shape per batch image (depthwise: k = R·S, the reduction per output; batch = N).
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool im2col = false;  ///< conv2d whose B panel is gathered from X (not 1×1 stride 1 pad 0)
  // GEMM knobs.
  int mr = 1;               ///< rows of C per micro-tile
  int nr = 1;               ///< columns of C per micro-tile (a multiple of 4 with simd)
  int unroll_k = 1;         ///< copies of the reduction step per loop iteration (tail looped)
  bool simd = false;        ///< f32x4 accumulators (GEMM: splat A × v128 loads of B)
  bool cols_outer = false;  ///< micro-tile loop order: column blocks outer (B panel stays hot)
  bool pack_b = false;      ///< copy (or gather) the thread's B columns into a contiguous panel
  int threads = 1;          ///< run(tid) calls; tid owns a range of column (or row) blocks/tasks
  /// acc += a·b as one f32x4.relaxed_madd (relaxed SIMD; fused on x86-64 with FMA3 and on
  /// ARM64) instead of f32x4.mul then f32x4.add; needs simd and DeviceLimits::relaxed_simd.
  bool fma = false;
  /// GEMM: the threads split the row blocks (every thread sweeping every column block) instead
  /// of the column blocks (knob split: rows, cols).
  bool split_rows = false;
  /// Knob balance (static, steal): with steal, the threads claim the units they split (the
  /// GEMM's outer blocks, depthwise tasks) one at a time through claim words in linear memory,
  /// each its own share from the front and then the others' from the back, so that a thread
  /// slowed by its core (another thread on it) leaves its last units to the others. Static is
  /// the fixed split. See docs/wasm_abi.md, "Claim words".
  bool steal = false;
  // Depthwise knobs and geometry.
  int tile_c = 1;          ///< planes (n, c) per task: the unit of the static thread split
  int tile_h = 1;          ///< output rows per micro-tile
  int tile_w = 1;          ///< output columns per micro-tile (a multiple of 4 with simd)
  bool unroll_rs = false;  ///< R·S fully unrolled, the plane's weights kept in locals
  int64_t planes = 0;      ///< N·C
  int64_t padded_h = 0, padded_w = 0;  ///< the zero-padded plane in scratch, floats
  // Memory layout (bytes).
  /// Every input's offset in input order (data, weight, then bias and residual if the
  /// epilogue has them), then the output's last: Workload::input_count() + 1 entries.
  std::vector<int64_t> offsets;
  int64_t scratch_offset = 0;            ///< first thread's scratch slice
  int64_t scratch_bytes_per_thread = 0;  ///< one slice (64-byte multiple), 0 without panel
  int64_t memory_pages = 0;              ///< 64 KiB pages

  int64_t output_offset() const { return offsets.back(); }
  /// GEMM blocks of NR columns and of MR rows. Thread tid owns the column blocks
  /// [tid·nb/T, (tid+1)·nb/T) of nb = col_blocks() and every row block; with split_rows, the
  /// row blocks [tid·rb/T, (tid+1)·rb/T) of rb = row_blocks() and every column block.
  int64_t col_blocks() const { return (n + nr - 1) / nr; }
  int64_t row_blocks() const { return (m + mr - 1) / mr; }
  /// Depthwise tasks: ceil(N·C / tile_c); thread tid owns [tid·nt/T, (tid+1)·nt/T).
  int64_t tasks() const { return (planes + tile_c - 1) / tile_c; }
};

/// Decodes `entity` of wasm_space(workload) and lays out memory. Throws
/// MeasureError(kInstantiation) when the entity breaks a constraint or does not fit 4 GiB.
WasmPlan wasm_plan(const Workload& workload, const ConfigEntity& entity);

/// The config space of `workload` (dense, conv2d or depthwise_conv2d, with any epilogue) for
/// wasm (device limits not yet applied: threads above DeviceLimits::max_threads are dropped
/// when they are). Throws std::invalid_argument for an invalid workload.
std::shared_ptr<ConfigSpace> wasm_space(const Workload& workload);

/// Builds the module of one entity and its artifact (source = base64 module, wasm info, plain
/// row-major inputs and output). Throws MeasureError(kInstantiation) for an invalid entity,
/// MeasureError(kCompileHost, message) when LLVM or lld fail (lld's own messages included) or
/// when webtune was built without LLVM.
KernelArtifact emit_wasm(const Workload& workload, const ConfigEntity& entity);

/// Where a model package puts one kernel in the linear memory that every kernel of the package
/// shares (deploy/wasm_memory.hpp, docs/package.md "wasm linear memory"), instead of the
/// kernel's own memory laid out by wasm_plan: no copies between steps, the tensors are read and
/// written where they live.
struct WasmPlacement {
  /// Byte offset of every input in input order, then of the output: Workload::input_count() + 1
  /// entries, each 64-byte aligned, each tensor followed by at least kWasmTensorSlack readable
  /// bytes (edge micro-tiles read, never write, up to a tile's width past a row).
  std::vector<int64_t> offsets;
  /// First byte of the kernel's scratch: threads × WasmPlan::scratch_bytes_per_thread bytes and
  /// kWasmTensorSlack more (64-byte aligned; nothing else may live there while the kernel runs).
  int64_t scratch_offset = 0;
  int64_t memory_pages = 0;    ///< 64 KiB pages of the shared memory (initial = maximum)
  bool shared_memory = false;  ///< the memory is shared (some kernel of the package has T > 1)
};

/// Bytes of readable slack a kernel needs after each tensor (and after its scratch).
inline constexpr int64_t kWasmTensorSlack = 256;
/// The first byte a tensor may start at: past the modules' 4 KiB stack and __heap_base.
inline constexpr int64_t kWasmFirstTensorOffset = 65536;

/// Scratch bytes `entity` needs past WasmPlacement::scratch_offset, slack included (threads ×
/// the per-thread slice + kWasmTensorSlack). Throws as wasm_plan does.
int64_t wasm_scratch_bytes(const Workload& workload, const ConfigEntity& entity);

/// emit_wasm with the tensors and scratch where `placement` says. The artifact's wasm info
/// carries the placement's offsets and pages, and `shared_memory` when the memory is shared
/// but the kernel has one thread (the module is then linked for a shared memory too). Throws
/// MeasureError(kInstantiation) naming the problem for a wrong count of offsets, an unaligned
/// offset, or a tensor or the scratch outside the pages; otherwise as emit_wasm.
KernelArtifact emit_wasm_placed(const Workload& workload, const ConfigEntity& entity,
                                const WasmPlacement& placement);

/// A MaxPool (2-D window, square kernel, one stride and one pad on every side, no dilation) as
/// a kernel placed in a package's linear memory: the depthwise kernel of `entity` (a config of
/// wasm_space(pool)) with −∞ padding and f32x4.max instead of the multiply-add, no weight, no
/// epilogue. `pool` is the pool's geometry as a depthwise_conv2d workload (N, C, H, W, R,
/// stride, pad) without epilogue; `placement.offsets` is {input, output}. The artifact has one
/// input and offsets {input, output}. Throws MeasureError(kInstantiation) for another workload
/// or a placement outside the memory, as emit_wasm_placed.
KernelArtifact emit_wasm_max_pool_placed(const Workload& pool, const ConfigEntity& entity,
                                         const WasmPlacement& placement);

/// The untuned baseline: scalar, MR = NR = 1, no unroll, no packing, rows outer, 1 thread
/// (depthwise: 1 plane per task, 1×1 tiles, R·S looped, 1 thread).
ConfigEntity wasm_default(const ConfigSpace& space);

/// True when this build of webtune can build wasm modules (configured WEBTUNE_WITH_LLVM=ON).
bool wasm_emitter_available();

/// Standard base64 (RFC 4648 alphabet, '=' padding) of `bytes`, as the artifact carries modules.
std::string base64_encode(const std::string& bytes);

}  // namespace webtune
