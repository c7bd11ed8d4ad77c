/// \file wasm_kernel.hpp
/// The plain description of one wasm kernel that wasm_emitter.cpp hands to the LLVM module
/// builder (wasm_module_builder.cpp), and the builder's entry point.
///
/// Private to codegen. Deliberately free of Boost and of LLVM types: the builder's translation
/// unit is compiled with LLVM's flags and includes, the emitter's with Boost's (see
/// codegen/CMakeLists.txt and ../shared/platform-notes.md). The epilogue is therefore restated
/// here in plain fields (codegen/epilogue.hpp has the semantics).
#pragma once

#include <cstdint>
#include <string>

namespace webtune {
/// Byte address of the threads' claim words (WasmKernelSpec::steal): below wasm-ld's default
/// global base (1024), where the linked module keeps nothing; one i32 per thread.
constexpr int64_t kWasmClaimWordsAt = 512;

/// The epilogue (epilogue.hpp) in plain fields: applied to every output value before its store.
struct WasmEpilogueSpec {
  enum Activation {
    kNone = 0,
    kRelu = 1,
    kClip = 2,
    kHardSwish = 3,
    kSilu = 4,
    kSigmoid = 5,
    kHardSigmoid = 6
  };
  enum Residual { kNoResidual = 0, kBeforeActivation = 1, kAfterActivation = 2 };
  bool bias = false;
  int activation = kNone;
  float clip_min = 0.0f, clip_max = 6.0f;
  int residual = kNoResidual;
  int64_t bias_offset = 0;      ///< bias[C_out] (bytes), with bias
  int64_t residual_offset = 0;  ///< residual, laid out as the output (bytes), with a residual

  bool empty() const { return !bias && activation == kNone && residual == kNoResidual; }
};

/// What the module computes; wasm_emitter.cpp's file comment is the full statement.
/// kGemm, per batch image b: C_b[M,N] (row stride N) = A[M,K] (row stride K) · B_b[K,N], where
/// B_b is either a row-major matrix in memory (dense weight, or a 1×1 stride-1 unpadded conv's
/// X_b viewed as [C, H·W]) or gathered from X_b by im2col. kDepthwise: Y[p][oh][ow] =
/// Σ_{r,s} X[p][oh·stride − pad + r][ow·stride − pad + s] · W[p mod C][r][s] for every plane
/// p = n·C + c. All offsets are bytes in linear memory.
struct WasmKernelSpec {
  enum Kind { kGemm, kDepthwise };
  Kind kind = kGemm;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t a_offset = 0;                     ///< A, shared by all images
  int64_t b_offset = 0, b_batch_bytes = 0;  ///< B_0 (or X_0 with im2col), bytes between images
  int64_t c_offset = 0, c_batch_bytes = 0;  ///< C_0, bytes between images (also the residual's)
  // im2col geometry (im2col true): X_b[C,H,W], kernel R×S, output width OW; K = C·R·S,
  // N = OH·OW. Depthwise uses channels, height, width, kernel_*, stride, pad, out_h, out_w.
  bool im2col = false;
  int64_t channels = 0, height = 0, width = 0, kernel_h = 0, kernel_w = 0, stride = 1, pad = 0;
  int64_t out_h = 0, out_w = 0;
  // GEMM schedule.
  int mr = 1, nr = 1, unroll_k = 1;
  bool simd = false, cols_outer = false, pack_b = false;
  /// The threads split the row blocks (ceil(M/MR)), each sweeping every column block, instead
  /// of the column blocks (ceil(N/NR)) with every row block.
  bool split_rows = false;
  /// acc += a·b as llvm.wasm.fma (LLVM 15's name; it emits f32x4.relaxed_madd, opcode 0xfd
  /// 0x105, computing a·b + c as the final relaxed-SIMD spec has it); needs simd. Both kernels.
  bool fma = false;
  int threads = 1;
  /// Threads claim their units of work (row blocks with split_rows and rows outside, column
  /// blocks with split cols and columns outside, depthwise tasks) through one word each at
  /// kWasmClaimWordsAt, their own from the front, then the others' from the back.
  bool steal = false;
  int64_t scratch_offset = 0, scratch_bytes_per_thread = 0;
  // Depthwise schedule: planes per task, output micro-tile rows × cols, R·S fully unrolled;
  // the padded input plane in scratch is padded_h × padded_w floats, padded_w a multiple of
  // stride; each padded row is stored as `stride` phase rows of padded_w / stride floats, phase
  // φ holding the padded columns φ, φ + stride, φ + 2·stride, ... (polyphase).
  int tile_c = 1, tile_h = 1, tile_w = 1;
  bool unroll_rs = false;
  /// kDepthwise as a max pool (a package's MaxPool op, emit_wasm_max_pool_placed): Y[p][oh][ow] =
  /// max over the R×S window of X[p] (padding −∞; no weight, no epilogue; f32x4.max, which
  /// propagates NaN).
  bool max_pool = false;
  int64_t padded_h = 0, padded_w = 0;
  /// The epilogue; bias per output column (dense) or per row of C_b / per plane (conv).
  WasmEpilogueSpec epilogue;
  bool bias_per_row = false;  ///< conv2d: bias[row of C_b] (K_out); dense: bias[column]
  // Module.
  int64_t memory_pages = 1;
  /// The imported memory is shared (linked --shared-memory, +atomics,+bulk-memory): threads > 1,
  /// or a package's linear memory that some other kernel runs threads over.
  bool shared_memory = false;
};

/// The result of build_wasm_module: the linked module, or an error message.
struct WasmBuildResult {
  std::string module;  ///< wasm binary bytes; empty on failure
  std::string error;   ///< LLVM's or lld's messages when module is empty
  double codegen_ms = 0, link_ms = 0;
};

/// Builds the IR for `spec`, optimizes it at O3 (new pass manager), emits a wasm32 object
/// (+simd128 with simd, +relaxed-simd with fma; +atomics,+bulk-memory with threads > 1) and links
/// it with lld in process (serialized by a mutex: lld 15 keeps global state). Never throws;
/// failures come back in `error`. Defined only when webtune is built with LLVM.
WasmBuildResult build_wasm_module(const WasmKernelSpec& spec);

}  // namespace webtune
