/// \file wasm_emitter.cpp
/// WebAssembly template (target wasm): config space, memory layout, default, and the artifact
/// around the module that wasm_module_builder.cpp builds with LLVM and lld. dense and conv2d
/// share a GEMM micro-kernel; depthwise_conv2d has its own direct kernel (below).
///
/// ## The kernel: a register-blocked GEMM (BLIS-style micro-kernel)
///
/// Per batch image b, C_b[M,N] = A[M,K] · B_b[K,N] (WasmPlan says which tensor is which: dense
/// A = data, B = weight; conv2d A = weight [K_out, C·R·S], B_b = im2col(X_b) [C·R·S, OH·OW],
/// C_b = Y_b [K_out, OH·OW], the implicit GEMM of cuDNN's and XNNPACK's convolutions).
/// C is cut into micro-tiles of MR rows × NR columns; a micro-tile keeps its MR·NR sums in
/// registers (wasm locals) over the whole K loop, so each step loads MR values of A and NR of B
/// for MR·NR multiply-adds: the arithmetic intensity that register blocking buys (Goto and van
/// de Geijn, "Anatomy of High-Performance Matrix Multiplication", TOMS 2008). With SIMD128 the
/// NR columns are NR/4 f32x4 vectors: a_i is splat, b_j loaded as v128, acc += a·b (mul then
/// add, as XNNPACK's wasmsimd GEMM micro-kernels do: SIMD128 has no fused multiply-add; or, with
/// the fma knob, one f32x4.relaxed_madd of relaxed SIMD, which V8 lowers to vfmadd231ps where
/// the CPU has FMA3: one instruction per 4 multiply-adds instead of two).
///
/// Threads: the column blocks (ceil(N/NR) of them) are split statically, thread tid owning
/// [tid·nb/T, (tid+1)·nb/T), so each thread packs or gathers only its own B panel and no
/// barrier is needed; every output element is written by exactly one run(tid).
///
/// ## Knobs
///  - mr {1, 2, 4, 6, 8}: rows of C per micro-tile (A values splat per K step).
///  - nr {1, 2, 4, 8, 16, 24, 32}: columns of C per micro-tile; with simd a multiple of 4
///    (NR/4 vector accumulators per row), scalar at most 8.
///  - unroll_k {1, 2, 4, 8}: copies of the K step in the loop body; when it does not divide K a
///    one-step tail loop does the K mod unroll_k last steps.
///  - simd {0, 1}: SIMD128 (f32x4) accumulators and loads.
///  - order {rows_outer, cols_outer}: loop order of the micro-tiles. rows_outer sweeps all the
///    thread's column blocks for one MR-row strip of A (A strip hot in L1, B streamed; with
///    pack_b the thread's whole panel is packed first); cols_outer sweeps all row blocks for one
///    NR-column block of B (B block hot, A streamed; with pack_b each block is packed right
///    before its sweep, into one K·NR panel block of scratch, so conv2d's im2col output never
///    leaves the cache).
///  - pack_b {0, 1}: 1 copies the thread's B columns into a contiguous panel
///    panel[block][k][0..NR) in its scratch slice first (timed: part of run), so the K loop reads
///    NR consecutive floats per step instead of a row N floats apart. conv2d's im2col always
///    writes this packed panel, so for im2col pack_b must be 1; a 1×1 stride-1 unpadded conv2d
///    reads X_b as B_b directly (pack_b 0) or packs it (pack_b 1).
///  - threads {1, 2, 4, 8}: run(tid) calls per execution (static column split above).
///  - fma {0, 1} (both kernels, defined after threads and allowed absent: records from before
///    it read as fma 0 with their old indices): f32x4.relaxed_madd instead of mul then add.
///    Relaxed SIMD may fuse or not (the spec lets the engine choose), so results differ from
///    mul + add in the last bit at most per step, inside the reference's tolerance. Needs simd,
///    and the device limit relaxed_simd (the tab validates f32x4.relaxed_madd: Chromium ≥ 114).
///  - split {cols, rows} (defined after fma and allowed absent, as fma is: older records read
///    as cols with their old indices): what the threads divide. cols is the column split above;
///    rows gives thread tid the row blocks [tid·rb/T, (tid+1)·rb/T) of rb = ceil(M/MR), each
///    thread sweeping (and, with pack_b, packing) every column block. A GEMM with few columns
///    and many rows — a 1×1 conv2d on a 7×7 map: N = 49, 13 blocks of NR = 4, 7 against 6 per
///    thread — balances over its rows (M = 160 .. 1280 output channels), at the price of each
///    thread packing the whole B panel (K·N floats per thread, against M·N·K multiply-adds).
///  - balance {static, steal} (both kernels, defined last and allowed absent: older records
///    read as static with their old indices): with steal the threads claim the units they split
///    at run time (wasm_module_builder.cpp claimed_loop; docs/wasm_abi.md "Claim words"), each
///    its own share first, then the others' last units, as XNNPACK's pthreadpool does; on a
///    2-core machine one thread often runs 30 % slower for seconds (another thread on its core),
///    and a static split waits for it (docs/benchmarks.md, "a `balance` knob").
///
/// ## Constraints
///  - simd needs nr % 4 == 0; scalar needs nr ≤ 8.
///  - accumulators: mr·nr/4 ≤ 24 vectors with simd, mr·nr ≤ 32 scalars without (x86-64 has 16
///    XMM registers; beyond that V8's register allocator spills and the tile stops paying).
///  - unroll_k <= K (it need not divide K since issue 14: tail loop).
///  - mr ≤ M and nr ≤ N rounded up to 4 (larger tiles only repeat the edge work).
///  - im2col needs pack_b = 1.
///  - threads ≤ the blocks they split: column blocks, or row blocks with split rows (every
///    thread gets work); split rows needs threads ≥ 2 (with one thread it is split cols).
///  - balance steal needs threads ≥ 2, batch 1 (the claims are per execution) and the split
///    blocks in the outer loop (split rows with rows_outer, split cols with cols_outer), fewer
///    than 65536 of them (a claim word holds two 16-bit unit numbers); depthwise: threads ≥ 2.
///  - linear memory ≤ 1 GiB (browsers refuse much more; the kernel's index arithmetic is i32).
/// Device limit: threads ≤ DeviceLimits::max_threads (1 in a tab without cross-origin
/// isolation).
///
/// ## Epilogue (codegen/epilogue.hpp)
/// Applied in the micro-kernel's store, to the accumulators still in locals, before the
/// (guarded) store: f32x4 where the tile is vectorised, f32 otherwise. Bias: dense's bias[n] is
/// loaded like the row of C it goes with (v128 over 4 columns); conv2d's bias[k] is one value
/// per row of C_b, loaded once per tile row and splat. Residual: loaded at the output's index
/// (v128 with simd). relu = f32x4.pmax(v, 0), clip = f32x4.pmin(f32x4.pmax(v, lo), hi),
/// hard-swish = v · pmin(pmax(v + 3, 0), 6) · (1/6): the pseudo-min/max (a < b ? b : a), one
/// maxps/minps on x86 where f32x4.max/min take about eight instructions; they keep a NaN and
/// a −0 of v as std::max/std::min in the CPU reference do. Scalars: the same compare and
/// select. An empty epilogue emits no IR: plain modules are byte-for-byte those from before
/// epilogues.
///
/// ## depthwise_conv2d: a direct micro-tiled convolution
/// Planes p = n·C + c are split in tasks of tile_c planes, thread tid owning tasks
/// [tid·nt/T, (tid+1)·nt/T). Per plane the thread copies X_p into a zero-padded plane in its
/// scratch slice (so the R·S loop has no bounds checks and the padding costs one pass over the
/// input), then sweeps micro-tiles of tile_h rows × tile_w columns of Y_p. A tile keeps
/// tile_h·tile_w sums in locals; with simd these are tile_w/4 f32x4 per row over 4 adjacent
/// ow, each tap one unaligned v128 load. With stride s > 1 the copy splits each padded row into
/// s phase rows (polyphase: phase φ holds the padded columns φ, φ+s, φ+2s, ...), so the inputs
/// of 4 adjacent outputs for tap q are contiguous in phase q mod s from column ow + q div s.
/// The deinterleave (stride 2 with simd: two v128 loads and one shuffle per 4 copied floats;
/// wasm SIMD128 has no strided load) is paid once per input element in the copy instead of
/// once per tap in the R·S loop, where it would cost R·S/s² times more. Knobs:
///  - tile_c {1, 2, 4, 8}: planes per task (the thread split's unit; <= N·C).
///  - tile_h {1, 2, 4}, tile_w {1, 2, 4, 8, 16}: the micro-tile; simd needs tile_w % 4 == 0,
///    scalar tile_w <= 8; accumulators as for the GEMM; tile_h <= OH, tile_w <= OW rounded up
///    to 4.
///  - simd {0, 1}; unroll_rs {0, 1}: R·S fully unrolled with the plane's weights in locals
///    (R·S <= 49: larger kernels would unroll into huge modules), or two loops loading each
///    weight per tile; threads {1, 2, 4, 8} <= tasks; fma and balance as for the GEMM (the
///    claimed units are the tasks).
///
/// ## Memory layout (docs/wasm_abi.md)
/// Every input in input order (data, weight, bias, residual) and then the output, the first at
/// 64 KiB, each 64-byte aligned with 256 bytes of slack after it (a micro-tile past column N
/// reads up to NR−1 floats beyond its row without packing, and so do bias and residual loads),
/// then T scratch slices: with pack_b K·NR·ceil(nb/T) floats rows_outer (K·NR·nb with split
/// rows), K·NR cols_outer;
/// depthwise one padded plane (padded_w rounded up to a multiple of the stride). The module's stack
/// is 4 KiB below 64 KiB, so every offset is past __heap_base.
#include "codegen/wasm_emitter.hpp"

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/error_no.hpp"
#include "wasm_kernel.hpp"

namespace webtune {

namespace {

constexpr int64_t kPage = 65536;
constexpr int64_t kFirstTensor = kWasmFirstTensorOffset;  // past the 4 KiB stack, __heap_base
constexpr int64_t kSlack = kWasmTensorSlack;
constexpr int64_t kMaxMemory = int64_t{1} << 30;
constexpr int kMaxSimdAccumulators = 24;
constexpr int kMaxScalarAccumulators = 32;
constexpr int64_t kMaxUnrolledRS = 49;

const std::vector<std::string> kOrders = {"rows_outer", "cols_outer"};
/// The split knob's candidates; the first is the behaviour from before the knob.
const std::vector<std::string> kSplits = {"cols", "rows"};
/// The balance knob's candidates; the first is the behaviour from before the knob.
const std::vector<std::string> kBalances = {"static", "steal"};
/// Units of work a claim word can number (two 16-bit halves, wasm_kernel.hpp).
constexpr int64_t kMaxClaimedUnits = 1 << 16;

int64_t align64(int64_t v) {
  return (v + 63) / 64 * 64;
}

[[noreturn]] void refuse(const std::string& why) {
  throw MeasureError(MeasureErrorNo::kInstantiation, "wasm: " + why);
}

int64_t knob_int(const ConfigEntity& e, const std::string& name) {
  try {
    return e.get_int(name);
  } catch (const std::exception& ex) {
    refuse("knob '" + name + "': " + ex.what());
  }
}

/// A knob added after records were made (ConfigSpace::allow_absent): `fallback`, the behaviour
/// from before it, where the entity has no such knob.
int64_t knob_int_or(const ConfigEntity& e, const std::string& name, int64_t fallback) {
  for (const Knob& knob : e.knobs())
    if (knob.name == name) return knob_int(e, name);
  return fallback;
}

/// A string knob added after records were made (ConfigSpace::allow_absent): `fallback` where
/// the entity has no such knob.
std::string knob_string_or(const ConfigEntity& e, const std::string& name,
                           const std::string& fallback) {
  for (const Knob& knob : e.knobs()) {
    if (knob.name != name) continue;
    try {
      return e.get_string(name);
    } catch (const std::exception& ex) {
      refuse("knob '" + name + "': " + ex.what());
    }
  }
  return fallback;
}

/// Lays out memory: every input in input order, then the output, each 64-byte aligned with
/// kSlack bytes after it, then `threads` scratch slices of `scratch_per_thread` bytes.
void lay_out(const Workload& wl, int64_t scratch_per_thread, WasmPlan& p) {
  p.offsets.clear();
  int64_t next = kFirstTensor;
  for (int i = 0; i <= wl.input_count(); ++i) {
    const int64_t bytes = (i < wl.input_count() ? wl.input_size(i) : wl.output_size()) * 4;
    p.offsets.push_back(next);
    next = align64(next + bytes + kSlack);
  }
  p.scratch_offset = next;
  p.scratch_bytes_per_thread = align64(scratch_per_thread);
  const int64_t end = p.scratch_offset + p.threads * p.scratch_bytes_per_thread + kSlack;
  p.memory_pages = (end + kPage - 1) / kPage;
}

/// Decodes a depthwise entity and lays out memory; no constraint checked yet.
WasmPlan decode_depthwise(const Workload& wl, const ConfigEntity& e) {
  WasmPlan p;
  p.op = wl.op;
  p.batch = wl.batch;
  p.planes = wl.batch * wl.in_channels;
  p.k = wl.kernel_h * wl.kernel_w;  // the reduction per output, R·S
  p.tile_c = static_cast<int>(knob_int(e, "tile_c"));
  p.tile_h = static_cast<int>(knob_int(e, "tile_h"));
  p.tile_w = static_cast<int>(knob_int(e, "tile_w"));
  p.simd = knob_int(e, "simd") != 0;
  p.unroll_rs = knob_int(e, "unroll_rs") != 0;
  p.threads = static_cast<int>(knob_int(e, "threads"));
  p.fma = knob_int_or(e, "fma", 0) != 0;
  p.steal = knob_string_or(e, "balance", kBalances.front()) == "steal";
  if (p.tile_c < 1 || p.tile_h < 1 || p.tile_w < 1 || p.threads < 1)
    refuse("tile_c, tile_h, tile_w and threads must be at least 1");
  // The padded plane covers every whole micro-tile: (tiles·tile − 1)·stride + R rows.
  const int64_t oh = wl.out_h(), ow = wl.out_w();
  p.padded_h = ((oh + p.tile_h - 1) / p.tile_h * p.tile_h - 1) * wl.stride + wl.kernel_h;
  p.padded_w = ((ow + p.tile_w - 1) / p.tile_w * p.tile_w - 1) * wl.stride + wl.kernel_w;
  // Rounded up to a multiple of the stride: the plane is stored as `stride` phase planes of
  // padded_w / stride columns each (the module builder's polyphase layout).
  p.padded_w = (p.padded_w + wl.stride - 1) / wl.stride * wl.stride;
  lay_out(wl, (p.padded_h * p.padded_w + 4) * 4, p);
  return p;
}

/// Decodes the knobs and shapes; no constraint checked yet.
WasmPlan decode(const Workload& wl, const ConfigEntity& e) {
  if (wl.op == OpKind::kDepthwiseConv2d) return decode_depthwise(wl, e);
  WasmPlan p;
  p.op = wl.op;
  if (wl.op == OpKind::kDense) {
    p.m = wl.m, p.n = wl.n, p.k = wl.k, p.batch = 1;
  } else if (wl.op == OpKind::kConv2d) {
    p.m = wl.out_channels;
    p.n = wl.out_h() * wl.out_w();
    p.k = wl.in_channels * wl.kernel_h * wl.kernel_w;
    p.batch = wl.batch;
    p.im2col = !(wl.kernel_h == 1 && wl.kernel_w == 1 && wl.stride == 1 && wl.pad == 0);
  } else {
    refuse("no wasm template for " + std::string(op_name(wl.op)));
  }
  p.mr = static_cast<int>(knob_int(e, "mr"));
  p.nr = static_cast<int>(knob_int(e, "nr"));
  p.unroll_k = static_cast<int>(knob_int(e, "unroll_k"));
  p.simd = knob_int(e, "simd") != 0;
  try {
    p.cols_outer = e.get_string("order") == "cols_outer";
  } catch (const std::exception& ex) {
    refuse(std::string("knob 'order': ") + ex.what());
  }
  p.pack_b = knob_int(e, "pack_b") != 0;
  p.threads = static_cast<int>(knob_int(e, "threads"));
  p.fma = knob_int_or(e, "fma", 0) != 0;
  p.split_rows = knob_string_or(e, "split", kSplits.front()) == "rows";
  p.steal = knob_string_or(e, "balance", kBalances.front()) == "steal";
  if (p.mr < 1 || p.nr < 1 || p.unroll_k < 1 || p.threads < 1)
    refuse("mr, nr, unroll_k and threads must be at least 1");
  // cols_outer packs one column block at a time, rows_outer all of the thread's blocks first
  // (with split rows, all of them).
  const int64_t blocks_per_thread = p.cols_outer   ? 1
                                    : p.split_rows ? p.col_blocks()
                                                   : (p.col_blocks() + p.threads - 1) / p.threads;
  lay_out(wl, p.pack_b ? p.k * p.nr * blocks_per_thread * 4 : 0, p);
  return p;
}

struct Rule {
  const char* description;
  bool (*holds)(const WasmPlan&);
};

// The GEMM rules (dense, conv2d). Before issue 14 a further rule asked unroll_k to divide K;
// the K loop now has a tail instead.
const Rule kRules[] = {
    {"simd needs nr to be a multiple of 4; scalar needs nr <= 8",
     [](const WasmPlan& p) { return p.simd ? p.nr % 4 == 0 : p.nr <= 8; }},
    {"fma (f32x4.relaxed_madd) needs simd", [](const WasmPlan& p) { return !p.fma || p.simd; }},
    {"accumulators: mr*nr/4 <= 24 vectors with simd, mr*nr <= 32 scalars without",
     [](const WasmPlan& p) {
       return p.simd ? p.mr * p.nr / 4 <= kMaxSimdAccumulators
                     : p.mr * p.nr <= kMaxScalarAccumulators;
     }},
    {"unroll_k <= K", [](const WasmPlan& p) { return p.unroll_k <= p.k; }},
    {"mr <= M and nr <= N rounded up to 4",
     [](const WasmPlan& p) { return p.mr <= p.m && p.nr <= (p.n + 3) / 4 * 4; }},
    {"im2col writes a packed panel: pack_b must be 1",
     [](const WasmPlan& p) { return !p.im2col || p.pack_b; }},
    {"threads <= the blocks they split: column blocks ceil(N/nr), or row blocks ceil(M/mr) with "
     "split rows",
     [](const WasmPlan& p) {
       return p.threads <= (p.split_rows ? p.row_blocks() : p.col_blocks());
     }},
    {"split rows needs threads >= 2 (one thread is split cols)",
     [](const WasmPlan& p) { return !p.split_rows || p.threads >= 2; }},
    {"balance steal needs threads >= 2, batch 1, the blocks the threads split in the outer loop "
     "(split rows with rows_outer, split cols with cols_outer) and fewer than 65536 of them",
     [](const WasmPlan& p) {
       return !p.steal || (p.threads >= 2 && p.batch == 1 && p.split_rows != p.cols_outer &&
                           (p.split_rows ? p.row_blocks() : p.col_blocks()) < kMaxClaimedUnits);
     }},
    {"linear memory <= 1 GiB",
     [](const WasmPlan& p) { return p.memory_pages * kPage <= kMaxMemory; }},
};

// The depthwise rules on the plan alone; the tile bounds need the workload
// (depthwise_tile_fits below).
const Rule kDepthwiseRules[] = {
    {"simd needs tile_w to be a multiple of 4; scalar needs tile_w <= 8",
     [](const WasmPlan& p) { return p.simd ? p.tile_w % 4 == 0 : p.tile_w <= 8; }},
    {"fma (f32x4.relaxed_madd) needs simd", [](const WasmPlan& p) { return !p.fma || p.simd; }},
    {"accumulators: tile_h*tile_w/4 <= 24 vectors with simd, tile_h*tile_w <= 32 scalars "
     "without",
     [](const WasmPlan& p) {
       return p.simd ? p.tile_h * p.tile_w / 4 <= kMaxSimdAccumulators
                     : p.tile_h * p.tile_w <= kMaxScalarAccumulators;
     }},
    {"tile_c <= N*C", [](const WasmPlan& p) { return p.tile_c <= p.planes; }},
    {"unroll_rs needs R*S <= 49 (7x7): the unrolled body holds R*S steps of the whole tile",
     [](const WasmPlan& p) { return !p.unroll_rs || p.k <= kMaxUnrolledRS; }},
    {"threads <= tasks (ceil(N*C/tile_c))",
     [](const WasmPlan& p) { return p.threads <= p.tasks(); }},
    {"balance steal needs threads >= 2 and fewer than 65536 tasks",
     [](const WasmPlan& p) {
       return !p.steal || (p.threads >= 2 && p.tasks() < kMaxClaimedUnits);
     }},
    {"linear memory <= 1 GiB",
     [](const WasmPlan& p) { return p.memory_pages * kPage <= kMaxMemory; }},
};

/// tile_h <= OH and tile_w <= OW rounded up to 4 (larger tiles only repeat the edge work).
bool depthwise_tile_fits(const Workload& wl, const WasmPlan& p) {
  return p.tile_h <= wl.out_h() && p.tile_w <= (wl.out_w() + 3) / 4 * 4;
}
constexpr const char* kDepthwiseTileRule = "tile_h <= OH and tile_w <= OW rounded up to 4";

WasmEpilogueSpec epilogue_spec(const Workload& wl, const WasmPlan& p) {
  WasmEpilogueSpec s;
  const Epilogue& e = wl.epilogue;
  s.bias = e.bias;
  s.activation = e.activation == Activation::kRelu          ? WasmEpilogueSpec::kRelu
                 : e.activation == Activation::kClip        ? WasmEpilogueSpec::kClip
                 : e.activation == Activation::kHardSwish   ? WasmEpilogueSpec::kHardSwish
                 : e.activation == Activation::kSilu        ? WasmEpilogueSpec::kSilu
                 : e.activation == Activation::kSigmoid     ? WasmEpilogueSpec::kSigmoid
                 : e.activation == Activation::kHardSigmoid ? WasmEpilogueSpec::kHardSigmoid
                                                            : WasmEpilogueSpec::kNone;
  s.clip_min = e.clip_min, s.clip_max = e.clip_max;
  s.residual = e.residual == Residual::kBeforeActivation  ? WasmEpilogueSpec::kBeforeActivation
               : e.residual == Residual::kAfterActivation ? WasmEpilogueSpec::kAfterActivation
                                                          : WasmEpilogueSpec::kNoResidual;
  int next = 2;  // bias, then residual, after data and weight
  if (s.bias) s.bias_offset = p.offsets[static_cast<size_t>(next++)];
  if (s.residual != WasmEpilogueSpec::kNoResidual)
    s.residual_offset = p.offsets[static_cast<size_t>(next++)];
  return s;
}

WasmKernelSpec to_spec(const Workload& wl, const WasmPlan& p) {
  WasmKernelSpec s;
  s.epilogue = epilogue_spec(wl, p);
  s.c_offset = p.output_offset();
  s.threads = p.threads;
  s.simd = p.simd;
  s.fma = p.fma;
  s.steal = p.steal;
  s.scratch_offset = p.scratch_offset;
  s.scratch_bytes_per_thread = p.scratch_bytes_per_thread;
  s.memory_pages = p.memory_pages;
  if (wl.op == OpKind::kDepthwiseConv2d) {
    s.kind = WasmKernelSpec::kDepthwise;
    s.batch = wl.batch;
    s.a_offset = p.offsets[1];
    s.b_offset = p.offsets[0];
    s.channels = wl.in_channels, s.height = wl.height, s.width = wl.width;
    s.kernel_h = wl.kernel_h, s.kernel_w = wl.kernel_w, s.stride = wl.stride, s.pad = wl.pad;
    s.out_h = wl.out_h(), s.out_w = wl.out_w();
    s.tile_c = p.tile_c, s.tile_h = p.tile_h, s.tile_w = p.tile_w, s.unroll_rs = p.unroll_rs;
    s.padded_h = p.padded_h, s.padded_w = p.padded_w;
    return s;
  }
  s.m = p.m, s.n = p.n, s.k = p.k, s.batch = p.batch;
  if (wl.op == OpKind::kDense) {
    s.a_offset = p.offsets[0];
    s.b_offset = p.offsets[1];
  } else {
    s.a_offset = p.offsets[1];
    s.b_offset = p.offsets[0];
    s.b_batch_bytes = wl.in_channels * wl.height * wl.width * 4;
    s.c_batch_bytes = p.m * p.n * 4;
    s.im2col = p.im2col;
    s.channels = wl.in_channels, s.height = wl.height, s.width = wl.width;
    s.kernel_h = wl.kernel_h, s.kernel_w = wl.kernel_w, s.stride = wl.stride, s.pad = wl.pad;
    s.out_h = wl.out_h(), s.out_w = wl.out_w();
    s.bias_per_row = true;  // bias[k]: one per row of C_b
  }
  s.mr = p.mr, s.nr = p.nr, s.unroll_k = p.unroll_k;
  s.cols_outer = p.cols_outer, s.pack_b = p.pack_b;
  s.split_rows = p.split_rows;
  return s;
}

}  // namespace

WasmPlan wasm_plan(const Workload& workload, const ConfigEntity& entity) {
  const WasmPlan p = decode(workload, entity);
  const bool depthwise = workload.op == OpKind::kDepthwiseConv2d;
  for (const Rule& rule :
       depthwise ? std::span<const Rule>(kDepthwiseRules) : std::span<const Rule>(kRules))
    if (!rule.holds(p)) refuse(std::string("config breaks: ") + rule.description);
  if (depthwise && !depthwise_tile_fits(workload, p))
    refuse(std::string("config breaks: ") + kDepthwiseTileRule);
  return p;
}

namespace {

/// The fma knob, added after records were made: defined after threads and allowed absent, so
/// every older record reads as fma 0 (mul then add, the kernels from before) with its old index.
void define_fma_knob(ConfigSpace& space) {
  space.define_knob("fma", std::vector<int64_t>{0, 1});
  space.allow_absent("fma");
}

/// The balance knob, added after split (GEMM) and fma (depthwise) the same way: every older
/// record reads as static, the split from before, with its old index.
void define_balance_knob(ConfigSpace& space) {
  space.define_knob("balance", kBalances);
  space.allow_absent("balance");
}

}  // namespace

std::shared_ptr<ConfigSpace> wasm_space(const Workload& workload) {
  workload.validate();
  const Workload wl = workload;
  auto space = std::make_shared<ConfigSpace>();
  auto add_rules = [&](std::span<const Rule> rules) {
    for (const Rule& rule : rules) {
      space->add_constraint(rule.description, [wl, holds = rule.holds](const ConfigEntity& e) {
        try {
          return holds(decode(wl, e));
        } catch (const MeasureError&) {
          return false;
        }
      });
    }
  };
  if (workload.op == OpKind::kDepthwiseConv2d) {
    space->define_knob("tile_c", std::vector<int64_t>{1, 2, 4, 8});
    space->define_knob("tile_h", std::vector<int64_t>{1, 2, 4});
    space->define_knob("tile_w", std::vector<int64_t>{1, 2, 4, 8, 16});
    space->define_knob("simd", std::vector<int64_t>{0, 1});
    space->define_knob("unroll_rs", std::vector<int64_t>{0, 1});
    space->define_knob("threads", std::vector<int64_t>{1, 2, 4, 8});
    define_fma_knob(*space);
    define_balance_knob(*space);
    add_rules(kDepthwiseRules);
    space->add_constraint(kDepthwiseTileRule, [wl](const ConfigEntity& e) {
      try {
        return depthwise_tile_fits(wl, decode(wl, e));
      } catch (const MeasureError&) {
        return false;
      }
    });
  } else if (workload.op == OpKind::kDense || workload.op == OpKind::kConv2d) {
    space->define_knob("mr", std::vector<int64_t>{1, 2, 4, 6, 8});
    space->define_knob("nr", std::vector<int64_t>{1, 2, 4, 8, 16, 24, 32});
    space->define_knob("unroll_k", std::vector<int64_t>{1, 2, 4, 8});
    space->define_knob("simd", std::vector<int64_t>{0, 1});
    space->define_knob("order", kOrders);
    space->define_knob("pack_b", std::vector<int64_t>{0, 1});
    space->define_knob("threads", std::vector<int64_t>{1, 2, 4, 8});
    define_fma_knob(*space);
    // Added after fma, as fma was: absent in older records, which read as split cols.
    space->define_knob("split", kSplits);
    space->allow_absent("split");
    define_balance_knob(*space);
    add_rules(kRules);
  } else {
    throw std::invalid_argument("no wasm template for " + std::string(op_name(workload.op)));
  }
  space->add_device_limit("threads <= max_threads",
                          [](const ConfigEntity& e, const DeviceLimits& d) {
                            return e.get_int("threads") <= d.max_threads;
                          });
  space->add_device_limit("fma needs relaxed SIMD (relaxed_simd)",
                          [](const ConfigEntity& e, const DeviceLimits& d) {
                            return e.get_int("fma") == 0 || d.relaxed_simd;
                          });
  return space;
}

namespace {

/// The artifact of plan `p` (its offsets, pages and scratch as they are), built with LLVM.
KernelArtifact emit_plan(const Workload& workload, const WasmPlan& p, bool shared_memory,
                         bool max_pool = false) {
  KernelArtifact artifact;
  artifact.target = Target::kWasm;
  for (int i = 0; i < workload.input_count(); ++i) {
    TensorLayout layout;
    layout.shape = workload.input_shape(i);
    layout.pack_axis = -1;
    layout.width = layout.packed_elements();
    layout.height = 1;
    artifact.inputs.push_back(std::move(layout));
  }
  // The plain row-major output viewed as [rows, cols]: C[M,N] or Y[N·K·OH, OW].
  const std::vector<int64_t> out = workload.output_shape();
  artifact.output.cols = out.back();
  artifact.output.rows = workload.output_size() / artifact.output.cols;
  artifact.output.width = artifact.output.cols;
  artifact.output.height = artifact.output.rows;
  artifact.wasm.threads = p.threads;
  artifact.wasm.memory_pages = p.memory_pages;
  artifact.wasm.offsets.assign(p.offsets.begin(), p.offsets.end());
  artifact.wasm.simd = p.simd;
  artifact.wasm.relaxed_simd = p.fma;
  artifact.wasm.shared_memory = shared_memory && p.threads == 1;
#ifdef WEBTUNE_HAVE_LLVM
  WasmKernelSpec spec = to_spec(workload, p);
  spec.shared_memory = shared_memory || p.threads > 1;
  spec.max_pool = max_pool;
  const WasmBuildResult built = build_wasm_module(spec);
  if (built.module.empty()) throw MeasureError(MeasureErrorNo::kCompileHost, built.error);
  artifact.source = base64_encode(built.module);
#else
  (void)to_spec;
  throw MeasureError(MeasureErrorNo::kCompileHost, "webtune was built without LLVM");
#endif
  return artifact;
}

}  // namespace

KernelArtifact emit_wasm(const Workload& workload, const ConfigEntity& entity) {
  return emit_plan(workload, wasm_plan(workload, entity), false);
}

int64_t wasm_scratch_bytes(const Workload& workload, const ConfigEntity& entity) {
  const WasmPlan p = wasm_plan(workload, entity);
  return p.threads * p.scratch_bytes_per_thread + kSlack;
}

namespace {

/// Plan `p` with its tensors at `offsets` (one per tensor: `bytes[i]` each) and its scratch and
/// pages as `placement` says; MeasureError(kInstantiation) naming what lies outside the memory
/// or is not 64-byte aligned past 64 KiB with kSlack readable bytes after it.
void apply_placement(WasmPlan& p, const std::vector<int64_t>& offsets,
                     const std::vector<int64_t>& bytes, const WasmPlacement& placement) {
  const int64_t end = placement.memory_pages * kPage;
  if (placement.memory_pages < 1 || end > kMaxMemory)
    refuse("placement: " + std::to_string(placement.memory_pages) +
           " pages is outside 1 page .. 1 GiB");
  if (offsets.size() != bytes.size())
    refuse("placement: " + std::to_string(offsets.size()) + " offsets for " +
           std::to_string(bytes.size()) + " tensors (every input, then the output)");
  auto check = [&](const std::string& what, int64_t at, int64_t size) {
    if (at < kFirstTensor || at % 64 != 0 || at + size + kSlack > end)
      refuse("placement: " + what + " at byte " + std::to_string(at) + " (" + std::to_string(size) +
             " bytes and " + std::to_string(kSlack) +
             " of slack) is not 64-byte aligned past 64 KiB inside the " + std::to_string(end) +
             " bytes of memory");
  };
  for (size_t i = 0; i < offsets.size(); ++i)
    check("tensor " + std::to_string(i), offsets[i], bytes[i]);
  check("the scratch", placement.scratch_offset, p.threads * p.scratch_bytes_per_thread);
  p.offsets = offsets;
  p.scratch_offset = placement.scratch_offset;
  p.memory_pages = placement.memory_pages;
}

}  // namespace

KernelArtifact emit_wasm_placed(const Workload& workload, const ConfigEntity& entity,
                                const WasmPlacement& placement) {
  WasmPlan p = wasm_plan(workload, entity);
  std::vector<int64_t> bytes;
  for (int i = 0; i < workload.input_count(); ++i) bytes.push_back(workload.input_size(i) * 4);
  bytes.push_back(workload.output_size() * 4);
  apply_placement(p, placement.offsets, bytes, placement);
  return emit_plan(workload, p, placement.shared_memory);
}

KernelArtifact emit_wasm_max_pool_placed(const Workload& pool, const ConfigEntity& entity,
                                         const WasmPlacement& placement) {
  if (pool.op != OpKind::kDepthwiseConv2d || !pool.epilogue.empty())
    refuse("a max pool is described as a depthwise_conv2d workload without epilogue, not " +
           pool.key());
  if (placement.offsets.size() != 2)
    refuse("placement: a max pool takes 2 offsets (input, output), not " +
           std::to_string(placement.offsets.size()));
  WasmPlan p = wasm_plan(pool, entity);
  // The depthwise kernel's three tensors, the weight placed on the input: a pool never reads it.
  const int64_t in = placement.offsets[0], out = placement.offsets[1];
  apply_placement(p, {in, in, out}, {pool.input_size(0) * 4, 0, pool.output_size() * 4}, placement);
  KernelArtifact artifact = emit_plan(pool, p, placement.shared_memory, /*max_pool=*/true);
  artifact.inputs.resize(1);  // X only
  artifact.wasm.offsets = placement.offsets;
  return artifact;
}

ConfigEntity wasm_default(const ConfigSpace& space) {
  // Scalar, 1×1 tiles, no unroll, rows outer, 1 thread; no packing unless im2col needs it.
  const KnobList& knobs = space.knobs();
  for (int64_t pack : {0, 1}) {
    std::vector<int> choices(knobs.size(), 0);
    for (size_t k = 0; k < knobs.size(); ++k) {
      if (knobs[k].name != "pack_b") continue;
      for (size_t c = 0; c < knobs[k].candidates.size(); ++c)
        if (std::get<int64_t>(knobs[k].candidates[c]) == pack) choices[k] = static_cast<int>(c);
    }
    ConfigEntity e = space.from_choices(choices);
    if (space.is_valid(e)) return e;
  }
  const std::vector<int64_t>& valid = space.valid_indices();
  if (valid.empty()) throw std::runtime_error("wasm: the config space has no valid config");
  return space.get(valid.front());
}

bool wasm_emitter_available() {
#ifdef WEBTUNE_HAVE_LLVM
  return true;
#else
  return false;
#endif
}

std::string base64_encode(const std::string& bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) |
                       (uint32_t(uint8_t(bytes[i + 1])) << 8) | uint32_t(uint8_t(bytes[i + 2]));
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace webtune
