/// \file glsl_compute_emitter.cpp
/// GLSL ES 3.10 compute-shader template (target gles-compute): config spaces, emitter, default.
///
/// Two kernel families share this file.
///
/// ## GEMM family: dense and conv2d
///
/// The view, knobs, rules, device limits, default and thread → output mapping below are those
/// of the GEMM schedule that gles-compute shares with webgpu (gemm_schedule.hpp, which checks
/// them); gles-compute turns on its options double_buffer, k_split and vec4 reads of four
/// shared A rows, and this file only writes GLSL ES 3.10. Knobs are read by name through
/// KnobReader (knob_reader.hpp).
///
/// Both are written as C[rows, cols] = A[rows, depth] · B[depth, cols]:
///  - dense:  rows = M, cols = N, depth = K; A = data[M,K], B = weight[K,N], C = output.
///  - conv2d: implicit GEMM. rows = K (output channels), cols = N·OH·OW (output pixels of all
///    images), depth = C·R·S. A = weight, whose row-major [K,C,R,S] already is [K, C·R·S];
///    B = im2col(data), never materialised: the shader decodes a depth index into (c, r, s)
///    and a column into (n, oh, ow) and reads X[n, c, oh·stride − pad + r, ow·stride − pad + s],
///    zero outside the image. Output column (n, p) of row k is Y at (n·K + k)·OH·OW + p.
///
/// Workgroup = threads_x × threads_y × k_split, dispatch = blocks_x × blocks_y × k_groups.
/// Invocation (tx, ty, kz) of workgroup (bx, by, kg) owns rows  by·BR + ty·g + (i div
/// g)·threads_y·g + i mod g
///                                                                              (i < regs_y)
///                              and columns bx·BC + tx·w + j·threads_x·w + e   (j < regs_x/w,
///                                                                              e < w)
/// with BR = threads_y·regs_y, BC = threads_x·regs_x, w = 4 when columns are vec4, else 1, and
/// g = 4 when shared A rows are read as vec4 (vec4, use_shared and regs_y % 4 == 0), else 1.
/// Neighbouring invocations thus touch neighbouring addresses (coalesced loads, conflict-free
/// shared reads) while each one's w columns (and g rows) form one aligned vec4. The k_split
/// invocations kz = 0 .. k_split−1 of one (tx, ty) own the same outputs and split the reduction
/// between them (see k_split below).
///
/// Knobs (the split structure is AutoTVM's CUDA templates' — topi/cuda/dense.py
/// dense_large_batch, topi/cuda/conv2d_direct.py — with their [block, vthread, thread, inner]
/// splits reduced to [block, thread, inner]: GLSL has no virtual threads):
///  - tile_y = [blocks_y, threads_y, regs_y], split of rows: workgroups along y, local size y,
///    rows per invocation (the register tile's height). Inner factors ≤ 32 (max_factor).
///  - tile_x = [blocks_x, threads_x, regs_x], split of cols, likewise.
///  - tile_k = [k_outer, k_depth], split of the depth (AutoTVM's tile_k / tile_rc): the depth
///    of one shared-memory tile. Inner factor ≤ 16, the usual SGEMM tile depth; 32 would add
///    little and push C2's raw space past 340k entities.
///  - use_shared {0, 1}: 1 stages an A tile [BR × k_depth] and a B tile [k_depth × BC] in
///    shared memory, loaded cooperatively by the whole workgroup between two barriers, so each
///    global element is read once per workgroup instead of once per invocation; 0 reads
///    operands straight from the buffers and relies on the caches (no barriers, which are
///    costly on CPU drivers such as llvmpipe).
///  - vec4 {0, 1}: 1 reads A four depth values at a time through a vec4[] view (both ops); for
///    dense also B, the accumulators and C four columns at a time.
///    With shared memory and regs_y % 4 == 0, vec4 also reads the A tile four rows at a time
///    (As holds vec4s of four consecutive rows at one depth; each invocation's rows then come in
///    groups of four, see the mapping above): 2 shared loads instead of 8 for an 8-row tile.
///  - unroll {1, 2, 4, 8}: copies of the reduction step written out in the loop body (AutoTVM's
///    unroll_explicit, with an explicit factor instead of auto_unroll_max_step). A step covers
///    4 depth values with vec4, else 1.
///  - double_buffer {0, 1}: 1 keeps two copies of the shared tiles; while the workgroup
///    multiplies one, each invocation's share of the next tile is loaded from global memory
///    into registers before the arithmetic (its latency hides behind it) and stored into the
///    other copy after it: one barrier per tile instead of two, and no idle load phase. This is
///    the prefetching of fast CUDA SGEMMs (e.g. CUTLASS's two-stage mainloop).
///  - k_split {1, 2, 4}: k_split invocations per output (the workgroup's z dimension) each take
///    a contiguous 1/k_split of every reduction loop (of a shared tile, or of the whole depth
///    without shared memory); at the end slices 1.. hand their register tiles to slice 0
///    through shared memory, which adds them in slice order and stores. This is K-splitting
///    inside a workgroup (CUTLASS's "sliced-K"): it multiplies the invocations working on a
///    task with few outputs (ResNet-18's late layers: 512 × 49 outputs, depth 4608) without a
///    second pass.
///  - k_groups {1, 2, 4, 8}: K-splitting ACROSS workgroups in one dispatch (the dispatch's z):
///    workgroup (bx, by, kg) runs the shared k-tiles [kg·T, min((kg + 1)·T, k_outer)) with
///    T = ceil(k_outer / k_groups) (a group past the end runs none and adds zeros), so a task
///    with few output tiles — dense 1000³ has 64 to 256 fast tiles for an H100's 132 SMs, each
///    looping over all of K — gets k_groups times the workgroups. Each group writes its register
///    tile (after k_split's slice sum, no epilogue) to a scratch buffer of partial sums
///    [k_groups][rows][cols] (SSBO binding 5, only the in-range outputs), then
///    memoryBarrierBuffer(), barrier(); one invocation atomicAdds the tile's arrival counter
///    (SSBO binding 6) and shares through shared memory whether it arrived last (count
///    k_groups − 1); barrier(). The last group resets the counter to 0 (the next run starts
///    clean), and after another memoryBarrierBuffer() sums the k_groups partials in group
///    order (deterministic: the sum does not depend on which group finished last), applies the
///    epilogue and stores; the others return. Both buffers are `coherent` (no stale per-SM
///    cache lines). This is the "threadfence reduction" of CUDA's threadFenceReduction sample
///    (cuda-samples, Samples/2_Concepts_and_Techniques/threadFenceReduction) and CUTLASS's
///    serial split-K (its Semaphore, cutlass/semaphore.h, which orders the k-partitions of a
///    tile); CUTLASS's "parallel" split-K with a second reduce kernel would need a second
///    dispatch. The artifact asks the runtime for the scratch (KernelArtifact::scratch_floats
///    = k_groups·rows·cols, scratch_counters = blocks_x·blocks_y), which the runtime creates
///    once per kernel, counters zero-filled. Records without the knob read as k_groups = 1
///    (ConfigSpace::allow_absent), whose kernels are unchanged byte for byte.
///
/// Constraints (structural, device-independent):
///  - regs_y ≤ 8 and regs_x ≤ 8: the register tile (≤ 64 accumulators) must stay in registers;
///    8×8 is what fast SGEMM kernels use.
///  - vec4 needs depth % 4 == 0 (a vec4 must not straddle two rows of A); for dense also
///    N % 4 == 0 and regs_x % 4 == 0 (vec4 columns of B and C).
///  - without shared memory k_depth == 1: tile_k means nothing there, and fixing it keeps the
///    valid space free of duplicate kernels.
///  - k_split × the unrolled step (unroll × 4 with vec4, else unroll) divides the loop it
///    unrolls: the depth without shared memory, k_depth with it, so no remainder loop is needed.
///  - double_buffer needs shared memory, and at most 16 global loads (vec4 or float) per
///    invocation and tile: they are held in registers across the tile's arithmetic.
///  - unrolled multiply-adds per loop body (step · regs_y · regs_x) ≤ 1024: bounds the source
///    size and the driver's compile time.
///  - blocks_x, blocks_y, k_groups ≤ 65535: the smallest GL_MAX_COMPUTE_WORK_GROUP_COUNT ES
///    3.1 allows.
///  - k_groups > 1 needs shared memory: the groups split the shared k-tiles (the loop without
///    shared memory is not split; those configs are far from the fast region and the space
///    stays smaller).
///  - k_groups ≤ k_outer: no more groups than k-tiles (a group may still get none when T does
///    not divide k_outer: 5 tiles over 4 groups are 2, 2, 1, 0).
///  - k_groups · rows · cols < 2^31: the partial sums are indexed with int.
/// Device limits: threads_x·threads_y·k_split ≤ max_workgroup_invocations (1024 on desktop
/// GPUs: 32×32, or 16×16×4), threads_x ≤ max_workgroup_size_x, threads_y ≤
/// max_workgroup_size_y, k_split ≤ max_workgroup_size_z, and shared memory — the tiles,
/// 4·k_depth·(BR + BC) bytes (twice with double_buffer), plus the k_split reduction area,
/// 4·(k_split − 1)·BR·BC bytes, plus 4 for k_groups' "last group" flag — ≤
/// max_shared_memory_bytes. The runtime also refuses scratch past GL_MAX_SHADER_STORAGE_
/// BLOCK_SIZE or bindings 5, 6 past GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS (ES 3.1 guarantees
/// only 4; llvmpipe and NVIDIA have more).
///
/// ## Direct family: depthwise_conv2d
///
/// Y[n, c, oh, ow] = Σ_{r,s} X[n, c, oh·stride − pad + r, ow·stride − pad + s] · W[c, 0, r, s].
/// Workgroup = threads_x × threads_y × threads_c, dispatch = blocks_x × blocks_y × blocks_c.
/// Invocation (x, y, z) (global ids) computes a regs_y × regs_x block of consecutive outputs
/// (oh = y·regs_y + i, ow = x·regs_x + j) of plane z = n·C + c; consecutive outputs share
/// input pixels, which the unrolled variant loads once.
///  - tile_x = [blocks_x, threads_x, regs_x], split of OW; tile_y likewise of OH. Inner ≤ 32.
///  - tile_c = [blocks_c, threads_c], split of N·C (planes per workgroup). Inner ≤ 32.
///    All three are kVerbose splits with guarded edges (see Edges below).
///  - use_shared {0, 1}: 1 stages the workgroup's input window (threads_c planes of
///    ((BH − 1)·stride + R) × ((BW − 1)·stride + S) pixels, zero padding included) in shared
///    memory; 0 reads inputs from the buffer with border conditions.
///  - unroll {0, 1}: 1 writes the R×S window out in the source, with the kernel weights in
///    registers and every input pixel of the register tile's window loaded once; 0 loops over
///    r and s at run time.
/// Constraints: regs_y, regs_x ≤ 8; unroll = 1 only while regs_y·regs_x·R·S ≤ 1024 (source
/// size); blocks ≤ 65535 per dimension. Device limits: invocations, local size x/y/z, and the
/// shared window's bytes. No vec4 knob: with stride and padding, input windows are not
/// 16-byte aligned, and R·S weights per channel are rarely a multiple of four.
///
/// ## Edges: guarded, not padded
/// Every split (tile_y, tile_x, tile_k of the GEMM; tile_x, tile_y, tile_c of depthwise) is
/// SplitPolicy::kVerbose: besides the divisors of its axis it takes powers of two that do not
/// divide it, the outermost factor rounded up, so an axis of 1000, 7×7 = 49 output pixels, 3
/// input channels or 24 / 144 / 960 channels get the tile menu of a power of two. A tile that
/// runs past its axis is GUARDED in the kernel: loads past the edge read 0 (GEMM rows and
/// columns whose accumulators are never stored read a clamped address instead; shared-memory
/// tiles are filled with zeros past the edge, rows, columns or depth; depthwise planes past
/// the last are clamped and their windows read through the bounds-checked input_at), and
/// stores past it are skipped. Buffers are not padded: in a model they are shared between ops,
/// and padding one would need a copy, or a layout change in every producer and consumer. A
/// split that divides its axis emits no guard, so records from before kVerbose still build the
/// kernels they measured; the emitter refuses (kInstantiation) an entity whose splits do not
/// cover the workload. Image borders are the other edges: reads there are conditional, with
/// the address clamped to 0 so that no invocation ever reads outside a buffer.
///
/// Space sizes (raw / valid under the ES 3.1 minimum limits): see `webtune space`; the
/// double_buffer, k_split and k_groups knobs multiply the raw space by 24.
///
/// Default (glsl_compute_default): per knob the candidate closest to "8 threads along x and
/// y, one output per invocation, one plane per workgroup, no shared memory, no vec4, no
/// unroll"; if device limits exclude that entity, the valid entity with the smallest summed
/// distance.
///
/// On an NVIDIA H100 through EGL (docs/benchmarks.md, issue 7) 128×128 block tiles of 16×16
/// invocations with 8×8 register tiles, vec4 and double buffering are the fast region.
#include "codegen/glsl_compute_emitter.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/epilogue.hpp"
#include "codegen/error_no.hpp"
#include "codegen/gemm_schedule.hpp"
#include "codegen/knob_reader.hpp"
#include "shader_text.hpp"

namespace webtune {

namespace {

// ---- Space-shaping constants (see the file comment for why each exists) ---------------------

constexpr int64_t kMaxThreadsPerDim = 32;

// ---- Small helpers ---------------------------------------------------------------------------

constexpr std::string_view kTarget = "gles-compute";
constexpr std::string_view kDepthwiseTemplate = "gles-compute depthwise_conv2d";

[[noreturn]] void refuse(const std::string& why) {
  shader_text::refuse(kTarget, why);
}

std::string num(int64_t value) {
  return std::to_string(value);
}

using shader_text::ShaderWriter;

/// Preamble shared by every kernel: version, precisions and the local size.
void write_preamble(ShaderWriter& w, int64_t x, int64_t y, int64_t z) {
  w.line("#version 310 es");
  w.line("precision highp float;");
  w.line("precision highp int;");
  w.line("layout(local_size_x = " + num(x) + ", local_size_y = " + num(y) +
         ", local_size_z = " + num(z) + ") in;");
}

/// One std430 storage buffer: `binding`, block name, access qualifier and element type.
void write_buffer(ShaderWriter& w, int binding, const std::string& block, const std::string& access,
                  const std::string& type, const std::string& name) {
  w.line("layout(std430, binding = " + num(binding) + ") " + access + " buffer " + block + " { " +
         type + " " + name + "[]; };");
}

/// GLSL function `input_at(plane_base, ih, iw)`: the data element at row ih, column iw of the
/// image plane that starts at `plane_base`, zero outside the image (zero padding). The address
/// is clamped so that a border invocation never reads outside the buffer.
/// `checked` = false writes the unchecked read, for kernels whose windows all lie inside the
/// image: no padding and no guarded tile past the output's edge.
void write_input_at(ShaderWriter& w, const Workload& wl, bool checked) {
  w.open("float input_at(int plane_base, int ih, int iw)");
  if (!checked) {
    // Without padding every window lies inside the image: (OH−1)·stride + R ≤ H.
    w.line("return data[plane_base + ih * " + num(wl.width) + " + iw];");
  } else {
    w.line("bool inside = ih >= 0 && ih < " + num(wl.height) + " && iw >= 0 && iw < " +
           num(wl.width) + ";");
    w.line("float v = data[inside ? plane_base + ih * " + num(wl.width) + " + iw : 0];");
    w.line("return inside ? v : 0.0;");
  }
  w.close();
}

/// The epilogue's storage buffers after the output (binding 2): bias at binding 3 as `bias[]`
/// of `bias_type`, then residual at the next binding (3 without bias, else 4) as `residual[]`
/// of `residual_type` (the output's element type: it is indexed like the stores). Then the
/// epilogue's functions (glsl_epilogue_functions). Nothing for an empty epilogue.
void write_epilogue_declarations(ShaderWriter& w, const Epilogue& e, const std::string& bias_type,
                                 const std::string& residual_type) {
  if (e.empty()) return;
  int binding = 3;
  if (e.bias) write_buffer(w, binding++, "BiasBuffer", "readonly", bias_type, "bias");
  if (e.residual != Residual::kNone)
    write_buffer(w, binding, "ResidualBuffer", "readonly", residual_type, "residual");
  std::string functions = glsl_epilogue_functions(e);
  if (!functions.empty() && functions.back() == '\n') functions.pop_back();
  w.line(functions);
}

/// `value` through the epilogue: webtune_epilogue(value, b, r) with `bias` and `residual` the
/// loads (the type's zero where the epilogue has none); `value` itself for an empty epilogue.
std::string apply_epilogue(const Epilogue& e, const std::string& value, const std::string& bias,
                           const std::string& residual, bool vec4) {
  if (e.empty()) return value;
  const std::string zero = vec4 ? "vec4(0.0)" : "0.0";
  return "webtune_epilogue(" + value + ", " + (e.bias ? bias : zero) + ", " +
         (e.residual != Residual::kNone ? residual : zero) + ")";
}

/// Inputs as plain row-major buffers (pack_axis −1); buffers ignore width and height. Every
/// input: data, weight, then the epilogue's bias and residual (Workload::input_count).
std::vector<TensorLayout> plain_inputs(const Workload& wl) {
  std::vector<TensorLayout> inputs;
  for (int i = 0; i < wl.input_count(); ++i) {
    TensorLayout layout;
    layout.shape = wl.input_shape(i);
    layout.pack_axis = -1;
    layout.width = layout.packed_elements();
    layout.height = 1;
    inputs.push_back(std::move(layout));
  }
  return inputs;
}

/// The output as [all dims but the last, last dim], one float per element.
OutputLayout plain_output(const Workload& wl) {
  const std::vector<int64_t> shape = wl.output_shape();
  OutputLayout out;
  out.cols = shape.back();
  out.rows = wl.output_size() / out.cols;
  out.rows_per_item = 1;
  out.channels = 1;
  out.width = out.cols;
  out.height = out.rows;
  return out;
}

// =============================================================================================
// GEMM family (dense, conv2d)
// =============================================================================================

/// The shared GEMM schedule (gemm_schedule.hpp) with what gles-compute turns on: columns over
/// all images, double_buffer, k_split and vec4 reads of four shared A rows.
constexpr GemmScheduleOptions kGemmOptions{.target = kTarget,
                                           .max_threads_per_dim = kMaxThreadsPerDim,
                                           .columns = GemmColumns::kAllImages,
                                           .double_buffer_knob = true,
                                           .k_split_knob = true,
                                           .k_groups_knob = true,
                                           .vec4_a_rows = true};

/// Writes the GEMM-family shader for one tiling. Each member writes one part of the kernel;
/// see the file comment for the thread → element mapping.
class GemmEmitter {
 public:
  GemmEmitter(const Workload& wl, const GemmView& view, const GemmTiling& t)
      : wl_(wl), view_(view), t_(t), cw_(t.width), edges_(view, t, " && ") {}

  std::string emit() {
    write_preamble(w_, t_.threads_x, t_.threads_y, t_.k_split);
    write_buffers();
    if (view_.conv) write_input_at(w_, wl_, wl_.pad != 0);
    if (t_.use_shared) write_shared_arrays();
    if (t_.k_split > 1)
      w_.line("shared " + col_type() + " Red[" + num(t_.reduction_floats() / cw_) + "];");
    if (t_.k_groups > 1) w_.line("shared uint group_is_last;");
    w_.open("void main()");
    write_indices();
    write_accumulators();
    if (!t_.use_shared)
      write_global_loop();
    else if (t_.double_buffer)
      write_double_buffered_loop();
    else
      write_shared_loop();
    if (t_.k_split > 1) write_slice_reduction();
    if (t_.k_groups > 1) write_group_reduction();
    write_stores();
    w_.close();
    return w_.text();
  }

 private:
  // ---- names and small expressions ----
  std::string a_buffer() const { return view_.conv ? "weight" : "data"; }
  std::string b_buffer() const { return view_.conv ? "data" : "weight"; }
  std::string col_type() const { return cw_ == 4 ? "vec4" : "float"; }
  int64_t col_atoms() const { return t_.col_atoms(); }
  std::string acc(int64_t i, int64_t j) const { return "acc[" + num(i * col_atoms() + j) + "]"; }
  /// Offset of invocation-local row i within the workgroup's block (relative to ty).
  /// With a_rows_vec4 the rows come in groups of four consecutive ones (one vec4 of As).
  int64_t row_step(int64_t i) const { return t_.row_step(i); }
  /// Rows per invocation step in As: 4 with a_rows_vec4, else 1.
  int64_t row_group() const { return t_.row_group(); }
  /// The reduction range of this invocation's k-slice inside a loop of `loop` depth values.
  std::string slice_begin(int64_t loop) const {
    return t_.k_split > 1 ? "kz * " + num(loop / t_.k_split) : "0";
  }
  std::string slice_end(int64_t loop) const {
    return t_.k_split > 1 ? "kz * " + num(loop / t_.k_split) + " + " + num(loop / t_.k_split)
                          : num(loop);
  }
  /// Offset, in columns, of atom j within the block (relative to tx·cw).
  int64_t col_step(int64_t j) const { return t_.col_step(j); }

  /// `buffer[index]`, or `zero` where `ok` fails (a guarded edge, GemmEdges): the address is
  /// then 0, so no invocation ever reads outside the buffer (GLSL's ?: evaluates one operand,
  /// but a driver may flatten it into a select).
  static std::string guarded_load(const std::string& buffer, const std::string& index,
                                  const std::string& ok, const std::string& zero) {
    if (ok.empty()) return buffer + "[" + index + "]";
    return "((" + ok + ") ? " + buffer + "[(" + ok + ") ? " + index + " : 0] : " + zero + ")";
  }

  void write_buffers() {
    const bool a_vec = t_.vec4;
    const bool b_vec = cw_ == 4;
    const bool data_vec = view_.conv ? false : a_vec;
    const bool weight_vec = view_.conv ? a_vec : b_vec;
    write_buffer(w_, 0, "DataBuffer", "readonly", data_vec ? "vec4" : "float", "data");
    write_buffer(w_, 1, "WeightBuffer", "readonly", weight_vec ? "vec4" : "float", "weight");
    write_buffer(w_, 2, "OutputBuffer", "writeonly", col_type(), "result");
    // Bias is per row for conv2d (output channel k), per column for dense (n): vec4 columns of
    // dense read four biases as one vec4.
    write_epilogue_declarations(w_, wl_.epilogue, view_.conv ? "float" : col_type(), col_type());
    if (t_.k_groups > 1) {
      // Written by one workgroup and read by another in the same dispatch: coherent, so that
      // the reads are not served from a stale per-SM cache (GLSL ES 3.10 §4.10).
      write_buffer(w_, 5, "PartialBuffer", "coherent", col_type(), "partials");
      write_buffer(w_, 6, "CounterBuffer", "coherent", "uint", "counters");
    }
  }

  void write_shared_arrays() {
    // As is stored transposed, [k][row], so that the rows an invocation reads for one k are
    // threads_y apart (or, as vec4, threads_y groups of four apart): neighbouring invocations
    // read neighbouring words. Double buffering keeps two copies of each tile back to back.
    const int64_t copies = t_.double_buffer ? 2 : 1;
    w_.line("shared " + std::string(t_.a_rows_vec4 ? "vec4" : "float") + " As[" +
            num(copies * t_.a_tile_floats() / row_group()) + "];");
    w_.line("shared " + col_type() + " Bs[" + num(copies * t_.b_tile_floats() / cw_) + "];");
  }

  void write_indices() {
    w_.line("int tx = int(gl_LocalInvocationID.x);");
    w_.line("int ty = int(gl_LocalInvocationID.y);");
    w_.line("int block_row = int(gl_WorkGroupID.y) * " + num(t_.block_rows()) + ";");
    w_.line("int block_col = int(gl_WorkGroupID.x) * " + num(t_.block_cols()) + ";");
    w_.line("int row0 = block_row + ty * " + num(row_group()) + ";");
    if (t_.k_split > 1) w_.line("int kz = int(gl_LocalInvocationID.z);");
    if (t_.k_groups > 1) w_.line("int kg = int(gl_WorkGroupID.z);");
    w_.line("int col0 = block_col + tx * " + num(cw_) + ";");
    if (!t_.use_shared) {
      // Start of each owned row of A, in A's element units (vec4 or float).
      const int64_t a_row_len = view_.depth / t_.a_width();
      for (int64_t i = 0; i < t_.regs_y; ++i)
        w_.line("int a_row" + num(i) + " = (" + edges_.row("row0 + " + num(row_step(i))) + ") * " +
                num(a_row_len) + ";");
    }
    if (view_.conv) write_conv_column_indices();
  }

  /// For conv2d: each owned column's image base, window origin and output base, decoded once.
  void write_conv_column_indices() {
    const int64_t ohw = wl_.out_h() * wl_.out_w();
    for (int64_t j = 0; j < col_atoms(); ++j) {
      const std::string s = num(j);
      w_.line("int column" + s + " = " + edges_.col("col0 + " + num(col_step(j))) + ";");
      w_.line("int image" + s + " = column" + s + " / " + num(ohw) + ";");
      w_.line("int pixel" + s + " = column" + s + " - image" + s + " * " + num(ohw) + ";");
      w_.line("int out_base" + s + " = image" + s + " * " + num(view_.rows * ohw) + " + pixel" + s +
              ";");
      if (t_.use_shared) continue;
      w_.line("int x_base" + s + " = image" + s + " * " +
              num(wl_.in_channels * wl_.height * wl_.width) + ";");
      w_.line("int ih0_" + s + " = (pixel" + s + " / " + num(wl_.out_w()) + ") * " +
              num(wl_.stride) + " - " + num(wl_.pad) + ";");
      w_.line("int iw0_" + s + " = (pixel" + s + " - (pixel" + s + " / " + num(wl_.out_w()) +
              ") * " + num(wl_.out_w()) + ") * " + num(wl_.stride) + " - " + num(wl_.pad) + ";");
    }
  }

  void write_accumulators() {
    const int64_t count = t_.regs_y * col_atoms();
    w_.line(col_type() + " acc[" + num(count) + "];");
    for (int64_t q = 0; q < count; ++q) w_.line("acc[" + num(q) + "] = " + col_type() + "(0.0);");
  }

  /// Writes `int c, r, s` (prefixed) decoding depth index `k` of conv2d into channel, kernel
  /// row and kernel column.
  void write_depth_decode(const std::string& prefix, const std::string& k) {
    const int64_t rs = wl_.kernel_h * wl_.kernel_w;
    w_.line("int " + prefix + "c = (" + k + ") / " + num(rs) + ";");
    w_.line("int " + prefix + "rs = (" + k + ") - " + prefix + "c * " + num(rs) + ";");
    w_.line("int " + prefix + "r = " + prefix + "rs / " + num(wl_.kernel_w) + ";");
    w_.line("int " + prefix + "s = " + prefix + "rs - " + prefix + "r * " + num(wl_.kernel_w) +
            ";");
  }

  // ---- reduction without shared memory ----

  void write_global_loop() {
    w_.open("for (int k = " + slice_begin(view_.depth) + "; k < " + slice_end(view_.depth) +
            "; k += " + num(t_.body_depth) + ")");
    for (int64_t u = 0; u < t_.unroll; ++u) write_global_step(u * t_.a_width());
    w_.close();
  }

  /// One unrolled step at depth k + offset: a_width depth values, straight from the buffers.
  void write_global_step(int64_t offset) {
    w_.open("");
    const std::string k0 = "k + " + num(offset);
    if (t_.vec4) {
      for (int64_t i = 0; i < t_.regs_y; ++i)
        w_.line("vec4 a" + num(i) + " = " + a_buffer() + "[a_row" + num(i) + " + (" + k0 +
                ") / 4];");
    }
    for (int64_t v = 0; v < t_.a_width(); ++v) {
      const std::string k = k0 + " + " + num(v);
      const std::string sv = "_" + num(v);
      std::vector<std::string> a(static_cast<size_t>(t_.regs_y));
      for (int64_t i = 0; i < t_.regs_y; ++i) {
        if (t_.vec4) {
          a[i] = "a" + num(i) + "[" + num(v) + "]";
        } else {
          a[i] = "a" + num(i) + sv;
          w_.line("float " + a[i] + " = " + a_buffer() + "[a_row" + num(i) + " + " + k + "];");
        }
      }
      if (view_.conv) write_depth_decode("d" + num(v) + "_", k);
      for (int64_t j = 0; j < col_atoms(); ++j)
        w_.line(col_type() + " b" + num(j) + sv + " = " + global_b(j, k, "d" + num(v) + "_") + ";");
      write_multiply_adds(a, sv);
    }
    w_.close();
  }

  /// B at depth `k`, column atom j, read from the buffer (dense) or decoded im2col (conv2d,
  /// using the depth decode variables with prefix `d`).
  std::string global_b(int64_t j, const std::string& k, const std::string& d) const {
    if (view_.conv) {
      const std::string s = num(j);
      return "input_at(x_base" + s + " + " + d + "c * " + num(wl_.height * wl_.width) + ", ih0_" +
             s + " + " + d + "r, iw0_" + s + " + " + d + "s)";
    }
    const int64_t b_row_len = view_.cols / cw_;
    return "weight[(" + k + ") * " + num(b_row_len) + " + " + "(" +
           edges_.col("col0 + " + num(col_step(j)), cw_) + ") / " + num(cw_) + "]";
  }

  /// acc[i][j] += a_i · b_j for the whole register tile; b names end in `suffix`.
  void write_multiply_adds(const std::vector<std::string>& a, const std::string& suffix) {
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < col_atoms(); ++j)
        w_.line(acc(i, j) + " += " + a[i] + " * b" + num(j) + suffix + ";");
  }

  // ---- reduction through shared memory ----

  void write_shared_loop() {
    w_.line("int tid = int(gl_LocalInvocationIndex);");
    if (t_.k_groups > 1) {
      // This k-group's k-tiles [kg·T, min((kg + 1)·T, k_outer)); none for an empty group.
      w_.line("int tile_begin = kg * " + num(t_.group_tiles()) + ";");
      w_.line("int tile_end = min(tile_begin + " + num(t_.group_tiles()) + ", " + num(t_.k_outer) +
              ");");
      w_.open("for (int k0 = tile_begin * " + num(t_.k_depth) + "; k0 < tile_end * " +
              num(t_.k_depth) + "; k0 += " + num(t_.k_depth) + ")");
    } else {
      w_.open("for (int k0 = 0; k0 < " + num(view_.depth) + "; k0 += " + num(t_.k_depth) + ")");
    }
    w_.open("for (int e = tid; e < " + num(a_items()) + "; e += " + num(t_.invocations()) + ")");
    write_a_indices("e");
    write_a_load("p", "k0", true);
    write_a_store("p", "");
    w_.close();
    w_.open("for (int e = tid; e < " + num(b_items()) + "; e += " + num(t_.invocations()) + ")");
    write_b_load("p", "e", "k0", true);
    w_.line("Bs[e] = p;");
    w_.close();
    w_.line("memoryBarrierShared();");
    w_.line("barrier();");
    write_tile_product("", "");
    // Nobody may overwrite the tiles for the next k0 while others still read them.
    w_.line("barrier();");
    w_.close();
  }

  /// Two copies of each tile: while the workgroup multiplies one, each invocation's share of
  /// the next tile travels from global memory into registers (issued before the arithmetic, so
  /// its latency hides behind it) and then into the other copy. One barrier per tile suffices:
  /// the copy written during tile t was last read during tile t − 1, before the previous barrier.
  void write_double_buffered_loop() {
    // ceil(depth / k_depth) tiles: the last may be guarded. With k_groups, this group's share
    // [tile_begin, tile_begin + group_tiles) of them, counted from tile_begin.
    const bool grouped = t_.k_groups > 1;
    const std::string tiles = grouped ? "group_tiles" : num(t_.k_outer);
    const std::string first = grouped ? "tile_begin + " : "";
    const int64_t a_loads = ceil_div(a_items(), t_.invocations());
    const int64_t b_loads = ceil_div(b_items(), t_.invocations());
    w_.line("int tid = int(gl_LocalInvocationIndex);");
    if (grouped) {
      w_.line("int tile_begin = kg * " + num(t_.group_tiles()) + ";");
      // ≤ 0 for an empty group: the loop does not run and the group adds zeros.
      w_.line("int group_tiles = min(" + num(t_.group_tiles()) + ", " + num(t_.k_outer) +
              " - tile_begin);");
    }
    for (int64_t l = 0; l < a_loads; ++l) declare_a_registers("pa" + num(l));
    for (int64_t l = 0; l < b_loads; ++l)
      w_.line((cw_ == 4 ? "vec4 pb" : "float pb") + num(l) + ";");
    // An empty group prefetches the last tile instead (a valid address; never used).
    const std::string prologue =
        !grouped               ? "0"
        : t_.has_empty_group() ? "min(tile_begin, " + num(t_.k_outer - 1) + ") * " + num(t_.k_depth)
                               : "tile_begin * " + num(t_.k_depth);
    write_prefetch(a_loads, b_loads, prologue);
    write_commit(a_loads, b_loads, "0", "0");
    w_.line("memoryBarrierShared();");
    w_.line("barrier();");
    w_.open("for (int t = 0; t < " + tiles + "; ++t)");
    w_.line("int a_cur = (t & 1) * " + num(t_.a_tile_floats() / row_group()) + ";");
    w_.line("int b_cur = (t & 1) * " + num(t_.b_tile_floats() / cw_) + ";");
    w_.line("bool more = t + 1 < " + tiles + ";");
    w_.open("if (more)");
    write_prefetch(a_loads, b_loads, "(" + first + "t + 1) * " + num(t_.k_depth));
    w_.close();
    write_tile_product("a_cur + ", "b_cur + ");
    w_.open("if (more)");
    write_commit(a_loads, b_loads, num(t_.a_tile_floats() / row_group()) + " - a_cur",
                 num(t_.b_tile_floats() / cw_) + " - b_cur");
    w_.close();
    w_.line("memoryBarrierShared();");
    w_.line("barrier();");
    w_.close();
  }

  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

  /// A load items per tile: groups of 4 rows × 4 depth values (a_rows_vec4), else single
  /// rows × a_width depth values.
  int64_t a_items() const {
    return t_.a_rows_vec4 ? (t_.block_rows() / 4) * (t_.k_depth / 4)
                          : t_.block_rows() * (t_.k_depth / t_.a_width());
  }
  int64_t b_items() const { return t_.b_tile_floats() / cw_; }

  void declare_a_registers(const std::string& name) {
    if (t_.a_rows_vec4) {
      for (int64_t r = 0; r < 4; ++r) w_.line("vec4 " + name + "_" + num(r) + ";");
    } else {
      w_.line((t_.vec4 ? "vec4 " : "float ") + name + ";");
    }
  }

  /// Item `l` of this invocation: index e, and whether it exists (when the invocations do not
  /// divide the items). Opens a scope the caller closes.
  void open_item(int64_t l, int64_t items) {
    w_.open("");
    w_.line("int e = tid + " + num(l * t_.invocations()) + ";");
    if (items % t_.invocations() != 0) w_.open("if (e < " + num(items) + ")");
  }
  void close_item(int64_t items) {
    if (items % t_.invocations() != 0) w_.close();
    w_.close();
  }

  void write_prefetch(int64_t a_loads, int64_t b_loads, const std::string& k0) {
    for (int64_t l = 0; l < a_loads; ++l) {
      open_item(l, a_items());
      write_a_indices("e");
      write_a_load("pa" + num(l), k0, false);
      close_item(a_items());
    }
    for (int64_t l = 0; l < b_loads; ++l) {
      open_item(l, b_items());
      write_b_load("pb" + num(l), "e", k0, false);
      close_item(b_items());
    }
  }

  void write_commit(int64_t a_loads, int64_t b_loads, const std::string& a_off,
                    const std::string& b_off) {
    for (int64_t l = 0; l < a_loads; ++l) {
      open_item(l, a_items());
      write_a_indices("e");
      write_a_store("pa" + num(l), a_off + " + ");
      close_item(a_items());
    }
    for (int64_t l = 0; l < b_loads; ++l) {
      open_item(l, b_items());
      w_.line("Bs[" + b_off + " + e] = pb" + num(l) + ";");
      close_item(b_items());
    }
  }

  /// `int m, kq` of A item `e`: its row (group) in the block and its depth quad / value.
  void write_a_indices(const std::string& e) {
    const int64_t per_row = t_.a_rows_vec4 ? t_.k_depth / 4 : t_.k_depth / t_.a_width();
    w_.line("int m = " + e + " / " + num(per_row) + ";");
    w_.line("int kq = " + e + " - m * " + num(per_row) + ";");
  }

  /// Loads A item (m, kq) of the tile at depth k0 into `reg` (declared here when `declare`).
  void write_a_load(const std::string& reg, const std::string& k0, bool declare) {
    const int64_t aw = t_.a_width();
    const std::string row_len = num(view_.depth / aw);
    if (t_.a_rows_vec4) {
      for (int64_t r = 0; r < 4; ++r) {
        const std::string row = "block_row + m * 4 + " + num(r);
        const std::string ok =
            edges_.all({edges_.row_ok(row), edges_.depth_ok("(" + k0 + ") + kq * 4")});
        w_.line((declare ? "vec4 " : "") + reg + "_" + num(r) + " = " +
                guarded_load(a_buffer(), "(" + row + ") * " + row_len + " + (" + k0 + ") / 4 + kq",
                             ok, "vec4(0.0)") +
                ";");
      }
      return;
    }
    const std::string ok = edges_.all(
        {edges_.row_ok("block_row + m"), edges_.depth_ok("(" + k0 + ") + kq * " + num(aw))});
    w_.line((declare ? (aw == 4 ? "vec4 " : "float ") : "") + reg + " = " +
            guarded_load(a_buffer(),
                         "(block_row + m) * " + row_len + " + (" + k0 + ") / " + num(aw) + " + kq",
                         ok, aw == 4 ? "vec4(0.0)" : "0.0") +
            ";");
  }

  /// Stores A item (m, kq) from `reg` into As (transposed, [k][row]) at offset `off`.
  void write_a_store(const std::string& reg, const std::string& off) {
    const int64_t br = t_.block_rows();
    if (t_.a_rows_vec4) {
      // Four rows × four depths in registers, transposed into four vec4s of four rows each.
      for (int64_t c = 0; c < 4; ++c)
        w_.line("As[" + off + "(kq * 4 + " + num(c) + ") * " + num(br / 4) + " + m] = vec4(" + reg +
                "_0[" + num(c) + "], " + reg + "_1[" + num(c) + "], " + reg + "_2[" + num(c) +
                "], " + reg + "_3[" + num(c) + "]);");
      return;
    }
    if (t_.a_width() == 1) {
      w_.line("As[" + off + "kq * " + num(br) + " + m] = " + reg + ";");
      return;
    }
    for (int64_t c = 0; c < 4; ++c)
      w_.line("As[" + off + "(kq * 4 + " + num(c) + ") * " + num(br) + " + m] = " + reg + "[" +
              num(c) + "];");
  }

  /// Loads B item `e` (depth row kk, column atom n of the tile at depth k0) into `reg`
  /// (declared first when `declare`); the index arithmetic stays in a scope of its own.
  void write_b_load(const std::string& reg, const std::string& e, const std::string& k0,
                    bool declare) {
    const int64_t per_row = t_.block_cols() / cw_;
    if (declare) w_.line(col_type() + " " + reg + ";");
    w_.open("");
    w_.line("int kk = " + e + " / " + num(per_row) + ";");
    w_.line("int n = " + e + " - kk * " + num(per_row) + ";");
    if (view_.conv) {
      const int64_t ohw = wl_.out_h() * wl_.out_w();
      // Past the edge the column and depth are clamped (a valid address) and the value is 0.
      const std::string ok =
          edges_.all({edges_.col_ok("block_col + n"), edges_.depth_ok("(" + k0 + ") + kk")});
      w_.line("int col = " + edges_.col("block_col + n") + ";");
      w_.line("int img = col / " + num(ohw) + ";");
      w_.line("int pix = col - img * " + num(ohw) + ";");
      w_.line("int oh = pix / " + num(wl_.out_w()) + ";");
      w_.line("int ow = pix - oh * " + num(wl_.out_w()) + ";");
      write_depth_decode("", edges_.depth("(" + k0 + ") + kk"));
      const std::string value = "input_at((img * " + num(wl_.in_channels) + " + c) * " +
                                num(wl_.height * wl_.width) + ", oh * " + num(wl_.stride) + " - " +
                                num(wl_.pad) + " + r, ow * " + num(wl_.stride) + " - " +
                                num(wl_.pad) + " + s)";
      w_.line(reg + " = " + (ok.empty() ? value : "(" + ok + ") ? " + value + " : 0.0") + ";");
    } else {
      const std::string ok = edges_.all(
          {edges_.depth_ok("(" + k0 + ") + kk"), edges_.col_ok("block_col + n * " + num(cw_))});
      w_.line(reg + " = " +
              guarded_load("weight",
                           "((" + k0 + ") + kk) * " + num(view_.cols / cw_) + " + block_col / " +
                               num(cw_) + " + n",
                           ok, cw_ == 4 ? "vec4(0.0)" : "0.0") +
              ";");
    }
    w_.close();
  }

  /// This k-slice's share of the product of the current tiles (at offsets a_off, b_off).
  void write_tile_product(const std::string& a_off, const std::string& b_off) {
    w_.open("for (int k = " + slice_begin(t_.k_depth) + "; k < " + slice_end(t_.k_depth) +
            "; k += " + num(t_.body_depth) + ")");
    for (int64_t step = 0; step < t_.body_depth; ++step) write_shared_step(step, a_off, b_off);
    w_.close();
  }

  /// One depth value (k + step) of the tile: the register tile's A and B from shared memory.
  void write_shared_step(int64_t step, const std::string& a_off, const std::string& b_off) {
    w_.open("");
    const std::string k = "k + " + num(step);
    std::vector<std::string> a(static_cast<size_t>(t_.regs_y));
    if (t_.a_rows_vec4) {
      for (int64_t q = 0; q < t_.regs_y / 4; ++q)
        w_.line("vec4 a" + num(q) + " = As[" + a_off + "(" + k + ") * " + num(t_.block_rows() / 4) +
                " + ty + " + num(q * t_.threads_y) + "];");
      for (int64_t i = 0; i < t_.regs_y; ++i) a[i] = "a" + num(i / 4) + "[" + num(i % 4) + "]";
    } else {
      for (int64_t i = 0; i < t_.regs_y; ++i) {
        a[i] = "a" + num(i);
        w_.line("float " + a[i] + " = As[" + a_off + "(" + k + ") * " + num(t_.block_rows()) +
                " + ty + " + num(row_step(i)) + "];");
      }
    }
    const int64_t bs_row = t_.block_cols() / cw_;
    for (int64_t j = 0; j < col_atoms(); ++j)
      w_.line(col_type() + " b" + num(j) + " = Bs[" + b_off + "(" + k + ") * " + num(bs_row) +
              " + tx + " + num(j * t_.threads_x) + "];");
    write_multiply_adds(a, "");
    w_.close();
  }

  /// k_split: slices 1.. hand their register tiles to slice 0 through shared memory, which
  /// sums them (in slice order, so the result does not depend on timing) and stores.
  void write_slice_reduction() {
    const int64_t n_acc = t_.regs_y * col_atoms();
    const int64_t inv = t_.slice_invocations();
    w_.line("int lid = ty * " + num(t_.threads_x) + " + tx;");
    w_.open("if (kz > 0)");
    for (int64_t q = 0; q < n_acc; ++q)
      w_.line("Red[((kz - 1) * " + num(n_acc) + " + " + num(q) + ") * " + num(inv) +
              " + lid] = acc[" + num(q) + "];");
    w_.close();
    w_.line("memoryBarrierShared();");
    w_.line("barrier();");
    // With k_groups every invocation must reach the barriers that follow: slices 1.. stay.
    if (t_.k_groups > 1)
      w_.open("if (kz == 0)");
    else
      w_.line("if (kz > 0) return;");
    for (int64_t z = 1; z < t_.k_split; ++z)
      for (int64_t q = 0; q < n_acc; ++q)
        w_.line("acc[" + num(q) + "] += Red[" + num(((z - 1) * n_acc + q) * inv) + " + lid];");
    if (t_.k_groups > 1) w_.close();
  }

  /// Index, in partials[] (col_type() units), of owned output (i, j) in k-group `group` (a GLSL
  /// int expression): [k_group][row][col] over the view's C.
  std::string partial_index(const std::string& group, int64_t i, int64_t j) const {
    const int64_t row_len = view_.cols / cw_;
    const std::string col = "col0 + " + num(col_step(j));
    return group + " * " + num(view_.rows * row_len) + " + (row0 + " + num(row_step(i)) + ") * " +
           num(row_len) + " + " + (cw_ == 1 ? "(" + col + ")" : "(" + col + ") / " + num(cw_));
  }

  /// The condition under which owned output (i, j) lies inside the view ("" when it always
  /// does): stores, partial writes and partial reads past a guarded edge are skipped.
  std::string output_ok(int64_t i, int64_t j) const {
    return edges_.all({edges_.row_ok("(row0 + " + num(row_step(i)) + ")"),
                       edges_.col_ok("col0 + " + num(col_step(j)))});
  }

  /// k_groups: cross-workgroup split-K in one dispatch ("threadfence reduction": CUDA's
  /// threadFenceReduction sample; CUTLASS's serial split-K semaphore). Each group writes its
  /// register tile to partials[kg] and makes the writes visible; one invocation counts the
  /// group in on the tile's counter; the group that arrives last (count k_groups − 1) resets
  /// the counter for the next run, sums the k_groups partials in group order (so the result
  /// does not depend on which group finished last) into acc, and goes on to the stores and the
  /// epilogue. The others are done.
  void write_group_reduction() {
    if (t_.k_split > 1) w_.open("if (kz == 0)");
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < col_atoms(); ++j) {
        const std::string store =
            "partials[" + partial_index("kg", i, j) + "] = " + acc(i, j) + ";";
        const std::string ok = output_ok(i, j);
        w_.line(ok.empty() ? store : "if (" + ok + ") " + store);
      }
    if (t_.k_split > 1) w_.close();
    w_.line("memoryBarrierBuffer();");
    w_.line("barrier();");
    w_.open("if (gl_LocalInvocationIndex == 0u)");
    w_.line("int tile = int(gl_WorkGroupID.y) * " + num(t_.blocks_x) + " + int(gl_WorkGroupID.x);");
    w_.line("uint arrived = atomicAdd(counters[tile], 1u);");
    w_.line("group_is_last = arrived == " + num(t_.k_groups - 1) + "u ? 1u : 0u;");
    // Every group of the tile has counted itself in: the counter is free again.
    w_.line("if (group_is_last == 1u) atomicExchange(counters[tile], 0u);");
    w_.close();
    w_.line("memoryBarrierShared();");
    w_.line("barrier();");
    w_.line("if (group_is_last == 0u) return;");
    w_.line("memoryBarrierBuffer();");
    if (t_.k_split > 1) w_.line("if (kz > 0) return;");
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < col_atoms(); ++j) {
        std::string sum;
        for (int64_t g = 0; g < t_.k_groups; ++g)
          sum += (g ? " + " : "") + ("partials[" + partial_index(num(g), i, j) + "]");
        const std::string load = acc(i, j) + " = " + sum + ";";
        const std::string ok = output_ok(i, j);
        w_.line(ok.empty() ? load : "if (" + ok + ") " + load);
      }
  }

  // ---- results ----

  void write_stores() {
    const int64_t ohw = wl_.out_h() * wl_.out_w();
    for (int64_t i = 0; i < t_.regs_y; ++i) {
      const std::string row = "(row0 + " + num(row_step(i)) + ")";
      for (int64_t j = 0; j < col_atoms(); ++j) {
        std::string index;
        if (view_.conv)
          index = "out_base" + num(j) + " + " + row + " * " + num(ohw);
        else
          index = row + " * " + num(view_.cols / cw_) + " + (col0 + " + num(col_step(j)) + ") / " +
                  num(cw_);
        const std::string ok =
            edges_.all({edges_.row_ok(row), edges_.col_ok("col0 + " + num(col_step(j)))});
        // The epilogue's bias: of the row's output channel (conv2d, shared by a vec4's lanes)
        // or of the column's (dense, a vec4 of four columns' biases).
        std::string bias = view_.conv
                               ? "bias[" + row + "]"
                               : "bias[(col0 + " + num(col_step(j)) + ") / " + num(cw_) + "]";
        if (view_.conv && cw_ == 4) bias = "vec4(" + bias + ")";
        const std::string value =
            apply_epilogue(wl_.epilogue, acc(i, j), bias, "residual[" + index + "]", cw_ == 4);
        const std::string store = "result[" + index + "] = " + value + ";";
        w_.line(ok.empty() ? store : "if (" + ok + ") " + store);
      }
    }
  }

  const Workload& wl_;
  GemmView view_;
  GemmTiling t_;
  int64_t cw_;  // columns per B load, accumulator and store
  GemmEdges edges_;
  ShaderWriter w_;
};

KernelArtifact emit_gemm(const Workload& wl, const ConfigEntity& entity) {
  const GemmSchedule schedule = glsl_compute_gemm_schedule(wl);
  const GemmView& view = schedule.view();
  const GemmTiling t = schedule.read_checked(entity);
  KernelArtifact artifact;
  artifact.target = Target::kGlesCompute;
  artifact.source = GemmEmitter(wl, view, t).emit();
  artifact.inputs = plain_inputs(wl);
  artifact.output = plain_output(wl);
  artifact.dispatch = {t.blocks_x, t.blocks_y, t.k_groups};
  artifact.workgroup = {t.threads_x, t.threads_y, t.k_split};
  artifact.shared_memory_bytes = t.shared_bytes();
  artifact.scratch_floats = schedule.partial_floats(t);
  artifact.scratch_counters = schedule.tile_counters(t);
  return artifact;
}

// =============================================================================================
// Direct family (depthwise_conv2d)
// =============================================================================================

struct DepthwiseTiling {
  int64_t blocks_x = 1, threads_x = 1, regs_x = 1;  // along OW
  int64_t blocks_y = 1, threads_y = 1, regs_y = 1;  // along OH
  int64_t blocks_c = 1, threads_c = 1;              // along N·C planes
  bool use_shared = false;
  bool unroll = false;
  /// Whether each split multiplies to its extent (else its last tile is guarded).
  bool x_exact = true, y_exact = true, c_exact = true;

  int64_t block_h() const { return threads_y * regs_y; }
  int64_t block_w() const { return threads_x * regs_x; }
  int64_t invocations() const { return threads_x * threads_y * threads_c; }
  /// Input rows / columns that an extent of `outputs` consecutive outputs reads.
  static int64_t window(int64_t outputs, int64_t stride, int64_t kernel) {
    return (outputs - 1) * stride + kernel;
  }
};

DepthwiseTiling read_depthwise_tiling(const Workload& wl, const ConfigEntity& entity) {
  DepthwiseTiling t;
  const KnobReader knobs(entity, kDepthwiseTemplate);
  const auto x = knobs.split("tile_x", 3, wl.out_w(), SplitCover::kCeil);
  const auto y = knobs.split("tile_y", 3, wl.out_h(), SplitCover::kCeil);
  const auto c = knobs.split("tile_c", 2, wl.batch * wl.in_channels, SplitCover::kCeil);
  t.x_exact = split_is_exact(x, wl.out_w());
  t.y_exact = split_is_exact(y, wl.out_h());
  t.c_exact = split_is_exact(c, wl.batch * wl.in_channels);
  t.blocks_x = x[0], t.threads_x = x[1], t.regs_x = x[2];
  t.blocks_y = y[0], t.threads_y = y[1], t.regs_y = y[2];
  t.blocks_c = c[0], t.threads_c = c[1];
  t.use_shared = knobs.get_int("use_shared") != 0;
  t.unroll = knobs.get_int("unroll") != 0;
  return t;
}

int64_t depthwise_shared_bytes(const Workload& wl, const DepthwiseTiling& t) {
  if (!t.use_shared) return 0;
  return 4 * t.threads_c * DepthwiseTiling::window(t.block_h(), wl.stride, wl.kernel_h) *
         DepthwiseTiling::window(t.block_w(), wl.stride, wl.kernel_w);
}

struct DepthwiseRule {
  const char* description;
  bool (*holds)(const Workload&, const DepthwiseTiling&);
};

const DepthwiseRule kDepthwiseRules[] = {
    {"register tile at most 8x8 (regs_y, regs_x <= 8)",
     [](const Workload&, const DepthwiseTiling& t) {
       return t.regs_y <= kComputeMaxRegsPerDim && t.regs_x <= kComputeMaxRegsPerDim;
     }},
    {"unrolled window at most 1024 multiply-adds (regs_y * regs_x * R * S)",
     [](const Workload& wl, const DepthwiseTiling& t) {
       return !t.unroll ||
              t.regs_y * t.regs_x * wl.kernel_h * wl.kernel_w <= kComputeMaxUnrolledMultiplyAdds;
     }},
    {"at most 65535 workgroups per dispatch dimension",
     [](const Workload&, const DepthwiseTiling& t) {
       return t.blocks_x <= kComputeMaxGroupCount && t.blocks_y <= kComputeMaxGroupCount &&
              t.blocks_c <= kComputeMaxGroupCount;
     }},
};

struct DepthwiseLimit {
  const char* description;
  bool (*holds)(const Workload&, const DepthwiseTiling&, const DeviceLimits&);
};

const DepthwiseLimit kDepthwiseLimits[] = {
    {"workgroup invocations (threads_x * threads_y * threads_c) <= max_workgroup_invocations",
     [](const Workload&, const DepthwiseTiling& t, const DeviceLimits& d) {
       return t.invocations() <= d.max_workgroup_invocations;
     }},
    {"threads_x, threads_y, threads_c <= max_workgroup_size_x, _y, _z",
     [](const Workload&, const DepthwiseTiling& t, const DeviceLimits& d) {
       return t.threads_x <= d.max_workgroup_size_x && t.threads_y <= d.max_workgroup_size_y &&
              t.threads_c <= d.max_workgroup_size_z;
     }},
    {"shared input window (4 * threads_c * window_h * window_w bytes) <= max_shared_memory_bytes",
     [](const Workload& wl, const DepthwiseTiling& t, const DeviceLimits& d) {
       return depthwise_shared_bytes(wl, t) <= d.max_shared_memory_bytes;
     }},
};

std::shared_ptr<ConfigSpace> depthwise_space(const Workload& wl) {
  auto space = std::make_shared<ConfigSpace>();
  space->define_split("tile_x", wl.out_w(), 3, SplitPolicy::kVerbose, kMaxThreadsPerDim);
  space->define_split("tile_y", wl.out_h(), 3, SplitPolicy::kVerbose, kMaxThreadsPerDim);
  space->define_split("tile_c", wl.batch * wl.in_channels, 2, SplitPolicy::kVerbose,
                      kMaxThreadsPerDim);
  space->define_knob("use_shared", std::vector<int64_t>{0, 1});
  space->define_knob("unroll", std::vector<int64_t>{0, 1});
  for (const DepthwiseRule& rule : kDepthwiseRules) {
    space->add_constraint(rule.description, [wl, holds = rule.holds](const ConfigEntity& e) {
      return holds(wl, read_depthwise_tiling(wl, e));
    });
  }
  for (const DepthwiseLimit& limit : kDepthwiseLimits) {
    space->add_device_limit(
        limit.description, [wl, holds = limit.holds](const ConfigEntity& e, const DeviceLimits& d) {
          return holds(wl, read_depthwise_tiling(wl, e), d);
        });
  }
  return space;
}

/// Writes the depthwise shader for one tiling; see the file comment for the mapping.
class DepthwiseEmitter {
 public:
  DepthwiseEmitter(const Workload& wl, const DepthwiseTiling& t) : wl_(wl), t_(t) {}

  std::string emit() {
    write_preamble(w_, t_.threads_x, t_.threads_y, t_.threads_c);
    write_buffer(w_, 0, "DataBuffer", "readonly", "float", "data");
    write_buffer(w_, 1, "WeightBuffer", "readonly", "float", "weight");
    write_buffer(w_, 2, "OutputBuffer", "writeonly", "float", "result");
    write_epilogue_declarations(w_, wl_.epilogue, "float", "float");
    write_input_at(w_, wl_, wl_.pad != 0 || !t_.x_exact || !t_.y_exact);
    if (t_.use_shared)
      w_.line("shared float window[" + num(t_.threads_c * shared_h() * shared_w()) + "];");
    w_.open("void main()");
    write_indices();
    if (t_.use_shared) write_shared_load();
    w_.line("float acc[" + num(t_.regs_y * t_.regs_x) + "];");
    for (int64_t q = 0; q < t_.regs_y * t_.regs_x; ++q) w_.line("acc[" + num(q) + "] = 0.0;");
    if (t_.unroll)
      write_unrolled_window();
    else
      write_window_loops();
    write_stores();
    w_.close();
    return w_.text();
  }

 private:
  int64_t shared_h() const {
    return DepthwiseTiling::window(t_.block_h(), wl_.stride, wl_.kernel_h);
  }
  int64_t planes() const { return wl_.batch * wl_.in_channels; }
  int64_t shared_w() const {
    return DepthwiseTiling::window(t_.block_w(), wl_.stride, wl_.kernel_w);
  }

  void write_indices() {
    if (t_.c_exact) {
      w_.line("int plane = int(gl_GlobalInvocationID.z);");
    } else {
      // Past the last plane (a guarded tile_c) the plane is clamped for loads; stores skip it.
      w_.line("int plane_id = int(gl_GlobalInvocationID.z);");
      w_.line("int plane = min(plane_id, " + num(planes() - 1) + ");");
    }
    w_.line("int oh0 = int(gl_GlobalInvocationID.y) * " + num(t_.regs_y) + ";");
    w_.line("int ow0 = int(gl_GlobalInvocationID.x) * " + num(t_.regs_x) + ";");
    w_.line("int w_base = (plane - (plane / " + num(wl_.in_channels) + ") * " +
            num(wl_.in_channels) + ") * " + num(wl_.kernel_h * wl_.kernel_w) + ";");
    if (t_.use_shared) {
      // This invocation's window inside the workgroup's shared window.
      w_.line("int s_base = int(gl_LocalInvocationID.z) * " + num(shared_h() * shared_w()) +
              " + int(gl_LocalInvocationID.y) * " + num(t_.regs_y * wl_.stride * shared_w()) +
              " + int(gl_LocalInvocationID.x) * " + num(t_.regs_x * wl_.stride) + ";");
    } else {
      w_.line("int x_base = plane * " + num(wl_.height * wl_.width) + ";");
      w_.line("int ih0 = oh0 * " + num(wl_.stride) + " - " + num(wl_.pad) + ";");
      w_.line("int iw0 = ow0 * " + num(wl_.stride) + " - " + num(wl_.pad) + ";");
    }
  }

  /// Cooperative load of the workgroup's input window (zero padding included) into `window`.
  void write_shared_load() {
    const int64_t plane_size = shared_h() * shared_w();
    w_.line("int group_ih0 = int(gl_WorkGroupID.y) * " + num(t_.block_h() * wl_.stride) + " - " +
            num(wl_.pad) + ";");
    w_.line("int group_iw0 = int(gl_WorkGroupID.x) * " + num(t_.block_w() * wl_.stride) + " - " +
            num(wl_.pad) + ";");
    w_.line("int group_plane = int(gl_WorkGroupID.z) * " + num(t_.threads_c) + ";");
    w_.open("for (int e = int(gl_LocalInvocationIndex); e < " + num(t_.threads_c * plane_size) +
            "; e += " + num(t_.invocations()) + ")");
    w_.line("int z = e / " + num(plane_size) + ";");
    w_.line("int rest = e - z * " + num(plane_size) + ";");
    w_.line("int row = rest / " + num(shared_w()) + ";");
    w_.line("int col = rest - row * " + num(shared_w()) + ";");
    const std::string plane =
        t_.c_exact ? "group_plane + z" : "min(group_plane + z, " + num(planes() - 1) + ")";
    w_.line("window[e] = input_at((" + plane + ") * " + num(wl_.height * wl_.width) +
            ", group_ih0 + row, group_iw0 + col);");
    w_.close();
    w_.line("memoryBarrierShared();");
    w_.line("barrier();");
  }

  /// The input at row `dy`, column `dx` of this invocation's window (GLSL int expressions).
  std::string input(const std::string& dy, const std::string& dx) const {
    if (t_.use_shared)
      return "window[s_base + (" + dy + ") * " + num(shared_w()) + " + " + dx + "]";
    return "input_at(x_base, ih0 + " + dy + ", iw0 + " + dx + ")";
  }

  /// Runtime loops over the kernel window; the register tile is written out.
  void write_window_loops() {
    w_.open("for (int r = 0; r < " + num(wl_.kernel_h) + "; ++r)");
    w_.open("for (int s = 0; s < " + num(wl_.kernel_w) + "; ++s)");
    w_.line("float wv = weight[w_base + r * " + num(wl_.kernel_w) + " + s];");
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < t_.regs_x; ++j)
        w_.line("acc[" + num(i * t_.regs_x + j) + "] += wv * " +
                input(num(i * wl_.stride) + " + r", num(j * wl_.stride) + " + s") + ";");
    w_.close();
    w_.close();
  }

  /// The whole window written out: weights in registers, each input row of the register
  /// tile's window loaded once and used by every (output row, kernel row) pair that needs it.
  void write_unrolled_window() {
    const int64_t kh = wl_.kernel_h, kw = wl_.kernel_w, stride = wl_.stride;
    for (int64_t r = 0; r < kh; ++r)
      for (int64_t s = 0; s < kw; ++s)
        w_.line("float w" + num(r) + "_" + num(s) + " = weight[w_base + " + num(r * kw + s) + "];");
    const int64_t rows = DepthwiseTiling::window(t_.regs_y, stride, kh);
    const int64_t cols = DepthwiseTiling::window(t_.regs_x, stride, kw);
    for (int64_t dy = 0; dy < rows; ++dy) {
      // (output row i, kernel row r) pairs that read input row dy = i·stride + r.
      std::vector<std::pair<int64_t, int64_t>> users;
      for (int64_t i = 0; i < t_.regs_y; ++i)
        if (dy - i * stride >= 0 && dy - i * stride < kh) users.emplace_back(i, dy - i * stride);
      if (users.empty()) continue;  // stride > R skips some rows
      w_.open("");
      std::vector<bool> used(static_cast<size_t>(cols), false);
      for (int64_t j = 0; j < t_.regs_x; ++j)
        for (int64_t s = 0; s < kw; ++s) used[j * stride + s] = true;
      for (int64_t dx = 0; dx < cols; ++dx)
        if (used[dx]) w_.line("float x" + num(dx) + " = " + input(num(dy), num(dx)) + ";");
      for (const auto& [i, r] : users)
        for (int64_t j = 0; j < t_.regs_x; ++j)
          for (int64_t s = 0; s < kw; ++s)
            w_.line("acc[" + num(i * t_.regs_x + j) + "] += w" + num(r) + "_" + num(s) + " * x" +
                    num(j * stride + s) + ";");
      w_.close();
    }
  }

  /// Stores of the register tile; outputs past a guarded edge (row, column or plane) are
  /// skipped.
  void write_stores() {
    // The epilogue's bias is of the plane's channel (plane = n·C + c; clamped past the last).
    if (wl_.epilogue.bias)
      w_.line("int channel = plane - (plane / " + num(wl_.in_channels) + ") * " +
              num(wl_.in_channels) + ";");
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < t_.regs_x; ++j) {
        std::string ok;
        if (!t_.y_exact) ok = "oh0 + " + num(i) + " < " + num(wl_.out_h());
        if (!t_.x_exact)
          ok += (ok.empty() ? "" : " && ") + ("ow0 + " + num(j) + " < " + num(wl_.out_w()));
        if (!t_.c_exact) ok += (ok.empty() ? "" : " && ") + ("plane_id < " + num(planes()));
        const std::string index = "(plane * " + num(wl_.out_h()) + " + oh0 + " + num(i) + ") * " +
                                  num(wl_.out_w()) + " + ow0 + " + num(j);
        const std::string value =
            apply_epilogue(wl_.epilogue, "acc[" + num(i * t_.regs_x + j) + "]", "bias[channel]",
                           "residual[" + index + "]", false);
        const std::string store = "result[" + index + "] = " + value + ";";
        w_.line(ok.empty() ? store : "if (" + ok + ") " + store);
      }
  }

  const Workload& wl_;
  DepthwiseTiling t_;
  ShaderWriter w_;
};

KernelArtifact emit_depthwise(const Workload& wl, const ConfigEntity& entity) {
  const DepthwiseTiling t = read_depthwise_tiling(wl, entity);
  for (const DepthwiseRule& rule : kDepthwiseRules)
    if (!rule.holds(wl, t))
      KnobReader(entity, kDepthwiseTemplate)
          .refuse(std::string("config breaks: ") + rule.description);
  KernelArtifact artifact;
  artifact.target = Target::kGlesCompute;
  artifact.source = DepthwiseEmitter(wl, t).emit();
  artifact.inputs = plain_inputs(wl);
  artifact.output = plain_output(wl);
  artifact.dispatch = {t.blocks_x, t.blocks_y, t.blocks_c};
  artifact.workgroup = {t.threads_x, t.threads_y, t.threads_c};
  artifact.shared_memory_bytes = depthwise_shared_bytes(wl, t);
  return artifact;
}

}  // namespace

GemmSchedule glsl_compute_gemm_schedule(const Workload& workload) {
  return GemmSchedule(workload, kGemmOptions);
}

std::shared_ptr<ConfigSpace> glsl_compute_space(const Workload& workload) {
  workload.validate();
  switch (workload.op) {
    case OpKind::kDense:
    case OpKind::kConv2d:
      return glsl_compute_gemm_schedule(workload).space();
    case OpKind::kDepthwiseConv2d:
      return depthwise_space(workload);
  }
  throw std::invalid_argument("gles-compute has no template for op '" +
                              std::string(op_name(workload.op)) + "'");
}

KernelArtifact emit_glsl_compute(const Workload& workload, const ConfigEntity& entity) {
  switch (workload.op) {
    case OpKind::kDense:
    case OpKind::kConv2d:
      return emit_gemm(workload, entity);
    case OpKind::kDepthwiseConv2d:
      return emit_depthwise(workload, entity);
  }
  refuse("no template for op '" + std::string(op_name(workload.op)) + "'");
}

ConfigEntity glsl_compute_default(const ConfigSpace& space) {
  return untuned_default(space, kTarget);
}

}  // namespace webtune
