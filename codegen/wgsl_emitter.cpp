/// \file wgsl_emitter.cpp
/// WGSL compute-shader template (target webgpu): config space, emitter and default for dense
/// and conv2d.
///
/// ## One GEMM for both ops
///
/// The view, knobs, rules, device limits, default and thread → output mapping below are those
/// of the GEMM schedule that webgpu shares with gles-compute (gemm_schedule.hpp, which checks
/// them); webgpu turns on per-image columns, vec4 conv2d columns and the i32 index rule, and
/// this file only writes WGSL. Knobs are read by name through KnobReader (knob_reader.hpp).
///
/// Both are written as C[rows, cols] = A[rows, depth] · B[depth, cols], once per image:
///  - dense:  rows = M, cols = N, depth = K, one image; A = data[M,K], B = weight[K,N].
///  - conv2d: implicit GEMM (as the gles-compute template, glsl_compute_emitter.cpp, and
///    AutoTVM's conv2d templates do): rows = K (output channels), cols = OH·OW, depth = C·R·S,
///    `batch` = N images along the dispatch's z. A = weight, whose row-major [K,C,R,S] already
///    is [K, C·R·S]; B = im2col(X) is never materialised: depth index d decodes to
///    (c, r, s) = (d / (R·S), d % (R·S) / S, d % S), column p to (oh, ow) = (p / OW, p % OW),
///    and B[d, p] = X[n, c, oh·stride − pad + r, ow·stride − pad + s], 0 outside the image
///    (the load index is clamped to 0 there, see xload). Output (row k, column p) of image n
///    is Y at (n·K + k)·OH·OW + p. Columns are per image so that vec4 stores along OH·OW never
///    straddle two images.
///
/// Workgroup = threads_x × threads_y, dispatch = blocks_x × blocks_y × batch. Invocation
/// (tx, ty) of workgroup (bx, by, n) owns rows  by·BR + ty + i·threads_y       (i < regs_y)
///                                  and columns bx·BC + tx·w + j·threads_x·w + e
///                                                                   (j < regs_x/w, e < w)
/// of image n, with BR = threads_y·regs_y, BC = threads_x·regs_x and w the column width (4 with
/// vec4 where legal, else 1): neighbouring invocations touch neighbouring addresses (coalesced
/// loads, conflict-free workgroup reads) while each invocation's w columns form one aligned
/// vec4. wgsl_owned_outputs() is this mapping, computed by the same helpers the stores are
/// written with.
///
/// Knobs (the gles-compute GEMM's, glsl_compute_emitter.cpp, minus double_buffer and k_split;
/// WGSL has no virtual threads either):
///  - tile_y = [blocks_y, threads_y, regs_y], split of rows: workgroups along y, workgroup size
///    y, rows per invocation. Inner factors ≤ 64 (max_factor); regs_y ≤ 8 by constraint.
///  - tile_x = [blocks_x, threads_x, regs_x], split of cols, likewise.
///  - tile_k = [k_outer, k_depth], split of the depth: one workgroup-memory tile's depth (≤ 16).
///  - use_shared {0, 1}: 1 stages an A tile [k_depth × BR] (transposed) and a B tile
///    [k_depth × BC] in `var<workgroup>` arrays, loaded cooperatively between two
///    workgroupBarrier()s; 0 reads the storage buffers directly (no barriers: on SwiftShader,
///    Chromium's headless adapter, barriers are slow and register-blocked vec4 kernels win).
///  - vec4 {0, 1}: 1 reads A through an array<vec4<f32>> view, four depth values at a time.
///    Dense: B, the accumulators and C are also vec4s of four columns. conv2d: the accumulators
///    and Y are vec4s of four columns (OH·OW positions) when OH·OW and regs_x are multiples of
///    4, else floats; X stays f32 (an im2col vec4 is four gathered floats).
///  - unroll {1, 2, 4, 8}: copies of the reduction step written out in the loop body; a step
///    covers 4 depth values with vec4 (without workgroup memory), else 1.
///
/// Constraints (structural, device-independent):
///  - regs_y ≤ 8 and regs_x ≤ 8: the register tile must stay in registers.
///  - vec4 needs depth % 4 == 0 (no vec4 straddles two rows of A); on dense also N % 4 == 0
///    and regs_x % 4 == 0 (no vec4 of B or C straddles two rows).
///  - without workgroup memory k_depth == 1 (tile_k unused; no duplicate kernels).
///  - the unrolled step (unroll, times 4 with vec4 without workgroup memory) divides the
///    reduction loop (the depth without workgroup memory, k_depth with it): no remainder loop.
///  - unrolled multiply-adds per loop body ≤ 1024 (source size, compile time).
///  - blocks_x, blocks_y, batch ≤ 65535 (WebGPU's maxComputeWorkgroupsPerDimension default).
///  - every tensor < 2^31 elements: WGSL indexes are i32.
/// Device limits: threads_x·threads_y ≤ max_workgroup_invocations (WebGPU default 256),
/// threads_x ≤ max_workgroup_size_x, threads_y ≤ max_workgroup_size_y (256 each), and the
/// workgroup tiles, 4·k_depth·(BR + BC) bytes, ≤ max_shared_memory_bytes
/// (maxComputeWorkgroupStorageSize: 16384 by default, 32 KiB on SwiftShader).
///
/// ## Edges: guarded, not padded
/// tile_y, tile_x and tile_k are SplitPolicy::kVerbose (gemm_schedule.hpp): a tile may run past
/// its axis, and the kernel GUARDS the edge: rows and columns past it whose accumulators are
/// never stored load from a clamped address, workgroup tiles hold zeros past the edge (rows,
/// columns or depth; the address is clamped too, since `select` evaluates both operands), and
/// stores past it are skipped. Guards are branch-free (`&`, `select`) like xload's. Buffers are
/// not padded: a model's buffers are shared between ops, and padding one would need a copy, or
/// a layout change in every producer and consumer. Exact splits emit no guard (and records
/// from before kVerbose build the kernels they measured); the emitter refuses (kInstantiation)
/// an entity whose splits do not cover the workload.
///
/// Default (wgsl_default): per knob the candidate closest to "8 × 8 invocations, one output per
/// invocation, no workgroup memory, no vec4, no unroll"; if that entity is invalid, the valid
/// entity with the smallest summed distance.
#include "codegen/wgsl_emitter.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "codegen/epilogue.hpp"
#include "codegen/error_no.hpp"
#include "codegen/gemm_schedule.hpp"
#include "shader_text.hpp"

namespace webtune {

namespace {

constexpr int64_t kMaxThreadsPerDim = 64;

constexpr std::string_view kTarget = "webgpu";

std::string num(int64_t value) {
  return std::to_string(value);
}

using shader_text::ShaderWriter;

/// The shared GEMM schedule (gemm_schedule.hpp) with what webgpu turns on: columns per image
/// (images along the dispatch's z), vec4 conv2d columns, one depth value per unrolled step
/// with workgroup memory, and the i32 index rule.
constexpr GemmScheduleOptions kGemmOptions{
    .target = kTarget,
    .max_threads_per_dim = kMaxThreadsPerDim,
    .columns = GemmColumns::kPerImage,
    .vec4_conv_columns = true,
    .shared_step_scalar = true,
    .i32_indices = true,
};

/// Writes the dense or conv2d shader for one tiling; see the file comment for the mapping.
class GemmEmitter {
 public:
  GemmEmitter(const GemmView& v, const GemmTiling& t, const Epilogue& e)
      : t_(t), v_(v), e_(e), edges_(v, t, " & ") {}

  std::string emit() {
    const std::string a_type = t_.a_width() == 4 ? "vec4<f32>" : "f32";
    const std::string c_type = t_.width == 4 ? "vec4<f32>" : "f32";
    if (v_.conv) {
      w_.line("// webtune conv2d NCHW: X[" + num(v_.batch) + "," + num(v_.in_c) + "," +
              num(v_.in_h) + "," + num(v_.in_w) + "] * W[" + num(v_.rows) + "," + num(v_.in_c) +
              "," + num(v_.kh) + "," + num(v_.kw) + "], stride " + num(v_.stride) + ", pad " +
              num(v_.pad) + " -> Y[" + num(v_.batch) + "," + num(v_.rows) +
              ",OH*OW=" + num(v_.cols) + "]");
      w_.line("// as implicit GEMM per image: Y[K, OH*OW] = W[K, C*R*S] * im2col(X)[C*R*S, OH*OW]");
      w_.line("@group(0) @binding(0) var<storage, read> X : array<f32>;");
      w_.line("@group(0) @binding(1) var<storage, read> A : array<" + a_type + ">;");
    } else {
      w_.line("// webtune dense " + num(v_.rows) + "x" + num(v_.cols) + "x" + num(v_.depth) +
              " (C[M,N] = A[M,K] * B[K,N], row-major)");
      w_.line("@group(0) @binding(0) var<storage, read> A : array<" + a_type + ">;");
      w_.line("@group(0) @binding(1) var<storage, read> B : array<" + c_type + ">;");
    }
    w_.line("@group(0) @binding(2) var<storage, read_write> C : array<" + c_type + ">;");
    write_epilogue_declarations(c_type);
    if (t_.use_shared) {
      // As is stored transposed, [k][row]: the rows an invocation reads for one k are
      // threads_y apart, so neighbouring invocations read neighbouring words.
      w_.line("var<workgroup> As : array<f32, " + num(t_.k_depth * t_.block_rows()) + ">;");
      w_.line("var<workgroup> Bs : array<" + c_type + ", " +
              num(t_.k_depth * t_.block_cols() / t_.width) + ">;");
    }
    if (v_.conv) write_x_load();
    w_.line("");
    w_.line("@compute @workgroup_size(" + num(t_.threads_x) + ", " + num(t_.threads_y) + ", 1)");
    w_.open(
        "fn main(@builtin(local_invocation_id) lid : vec3<u32>, "
        "@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_index) lidx : u32)");
    w_.line("let tx = i32(lid.x);");
    w_.line("let ty = i32(lid.y);");
    w_.line("let block_row = i32(wid.y) * " + num(t_.block_rows()) + ";");
    w_.line("let block_col = i32(wid.x) * " + num(t_.block_cols()) + ";");
    w_.line("let row0 = block_row + ty;");
    w_.line("let col0 = block_col + tx * " + num(t_.width) + ";");
    if (v_.conv) {
      // One image per workgroup layer z: its input and output planes.
      w_.line("let x_image = i32(wid.z) * " + num(v_.in_c * v_.in_h * v_.in_w) + ";");
      w_.line("let c_image = i32(wid.z) * " + num(v_.rows * v_.cols) + ";");
    } else {
      w_.line("let c_image = 0;");
    }
    w_.line("var acc : array<" + c_type + ", " + num(t_.regs_y * t_.col_atoms()) + ">;");
    write_reduction();
    write_stores();
    w_.close();
    return w_.text();
  }

 private:
  /// The reduction over the depth: through workgroup tiles, or straight from the buffers.
  void write_reduction() {
    if (t_.use_shared) return write_shared_loop();
    write_global_loop();
  }

  int64_t a_row_atoms() const { return v_.depth / t_.a_width(); }
  int64_t b_row_atoms() const { return v_.cols / t_.width; }
  int64_t plane() const { return v_.in_h * v_.in_w; }
  int64_t window() const { return v_.kh * v_.kw; }
  std::string acc(int64_t i, int64_t j) const { return "acc[" + num(i * t_.col_atoms() + j) + "]"; }
  static std::string lane(int64_t c) { return std::string(".") + "xyzw"[c]; }

  /// xload(offset, ih, iw): X at offset + ih·W + iw, or 0 in the zero padding. The index is
  /// clamped to 0 there, so no out-of-range address is ever formed; u32 compares catch
  /// negative coordinates too. Without padding every window lies inside the image.
  /// The test is branch-free on purpose: `&` on bools, not the short-circuit `&&`. With `&&`
  /// every gather becomes control flow, and SwiftShader (headless Chromium's WebGPU) then takes
  /// minutes to build the pipeline of an unrolled kernel (measured: a 16x100x72 conv with 32
  /// gathers per loop body, over 6 minutes with `&&`, 0.22 s with `&`), long enough for
  /// Chromium to give up on its GPU process.
  void write_x_load() {
    w_.line("");
    w_.open("fn xload(offset : i32, ih : i32, iw : i32) -> f32");
    if (v_.pad == 0) {
      w_.line("return X[offset + ih * " + num(v_.in_w) + " + iw];");
    } else {
      w_.line("let inside = (u32(ih) < " + num(v_.in_h) + "u) & (u32(iw) < " + num(v_.in_w) +
              "u);");
      w_.line("let v = X[select(0, offset + ih * " + num(v_.in_w) + " + iw, inside)];");
      w_.line("return select(0.0, v, inside);");
    }
    w_.close();
  }

  /// Declares `<p>ch, <p>r, <p>s`: channel and window position of depth index `depth`.
  void write_depth_decode(const std::string& p, const std::string& depth) {
    w_.line("let " + p + "ch = (" + depth + ") / " + num(window()) + ";");
    w_.line("let " + p + "rs = (" + depth + ") - " + p + "ch * " + num(window()) + ";");
    w_.line("let " + p + "r = " + p + "rs / " + num(v_.kw) + ";");
    w_.line("let " + p + "s = " + p + "rs - " + p + "r * " + num(v_.kw) + ";");
  }

  /// Declares `<p>ih, <p>iw`: the window origin (top-left, padding included) of output
  /// column `col` (oh·OW + ow).
  void write_column_decode(const std::string& p, const std::string& col) {
    w_.line("let " + p + "oh = (" + col + ") / " + num(v_.out_w) + ";");
    w_.line("let " + p + "ih = " + p + "oh * " + num(v_.stride) + " - " + num(v_.pad) + ";");
    w_.line("let " + p + "iw = ((" + col + ") - " + p + "oh * " + num(v_.out_w) + ") * " +
            num(v_.stride) + " - " + num(v_.pad) + ";");
  }

  /// The im2col value at the depth decoded with prefix `d` and the column decoded with `c`.
  std::string im2col(const std::string& d, const std::string& c) const {
    return "xload(x_image + " + d + "ch * " + num(plane()) + ", " + c + "ih + " + d + "r, " + c +
           "iw + " + d + "s)";
  }

  /// acc[i][j] += a_i · b_j for one depth value whose operands are named a<i>, b<j>.
  void write_products(const std::string& a_suffix, const std::string& b_suffix) {
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < t_.col_atoms(); ++j)
        w_.line(acc(i, j) + " = " + acc(i, j) + " + a" + num(i) + a_suffix + " * b" + num(j) +
                b_suffix + ";");
  }

  /// Reads straight from the storage buffers: the loop runs over the depth in A atoms.
  void write_global_loop() {
    const int64_t aw = t_.a_width();
    const int64_t w = t_.width;
    for (int64_t i = 0; i < t_.regs_y; ++i)
      w_.line("let a_row" + num(i) + " = (" + edges_.row("row0 + " + num(t_.row_step(i))) + ") * " +
              num(a_row_atoms()) + ";");
    if (v_.conv) {
      // Each owned column's window origin, decoded once.
      for (int64_t j = 0; j < t_.col_atoms(); ++j)
        for (int64_t e = 0; e < w; ++e)
          write_column_decode("c" + num(j) + "_" + num(e) + "_",
                              edges_.col("col0 + " + num(t_.col_step(j) + e)));
    } else {
      w_.line("let b_col = col0 / " + num(w) + ";");
    }
    w_.open("for (var k = 0; k < " + num(a_row_atoms()) + "; k = k + " + num(t_.unroll) + ")");
    for (int64_t u = 0; u < t_.unroll; ++u) {
      w_.open("");
      for (int64_t i = 0; i < t_.regs_y; ++i)
        w_.line("let a" + num(i) + " = A[a_row" + num(i) + " + k + " + num(u) + "];");
      for (int64_t c = 0; c < aw; ++c) {
        // Depth value (k + u)·aw + c: row of B.
        const std::string depth = "(k + " + num(u) + ") * " + num(aw) + " + " + num(c);
        w_.open("");
        if (v_.conv) {
          write_depth_decode("d", depth);
          for (int64_t j = 0; j < t_.col_atoms(); ++j) {
            std::string value;
            for (int64_t e = 0; e < w; ++e)
              value += (e ? ", " : "") + im2col("d", "c" + num(j) + "_" + num(e) + "_");
            w_.line("let b" + num(j) + " = " + (w == 4 ? "vec4<f32>(" + value + ")" : value) + ";");
          }
        } else {
          for (int64_t j = 0; j < t_.col_atoms(); ++j)
            w_.line("let b" + num(j) + " = B[(" + depth + ") * " + num(b_row_atoms()) + " + " +
                    (t_.cols_exact
                         ? "b_col + " + num(t_.col_step(j) / w)
                         : "(" + edges_.col("col0 + " + num(t_.col_step(j)), w) + ") / " + num(w)) +
                    "];");
        }
        write_products(aw == 4 ? lane(c) : "", "");
        w_.close();
      }
      w_.close();
    }
    w_.close();
  }

  /// Cooperative loads of one A and one B tile into workgroup memory, then the products.
  void write_shared_loop() {
    const int64_t aw = t_.a_width();
    const int64_t w = t_.width;
    const int64_t kd = t_.k_depth;
    const int64_t br = t_.block_rows();
    const int64_t bc_atoms = t_.block_cols() / w;
    const int64_t n = t_.invocations();
    w_.open("for (var k0 = 0; k0 < " + num(v_.depth) + "; k0 = k0 + " + num(kd) + ")");
    // A tile: BR rows × kd depth values, read as floats (k_depth need not be a multiple of 4)
    // from A's float or vec4 view.
    w_.open("for (var e = i32(lidx); e < " + num(br * kd) + "; e = e + " + num(n) + ")");
    w_.line("let r = e / " + num(kd) + ";");
    w_.line("let q = e - r * " + num(kd) + ";");
    // Past a guarded edge (rows or depth) the tile holds zeros, read from address 0.
    const std::string a_ok =
        edges_.all({edges_.row_ok("block_row + r"), edges_.depth_ok("k0 + q")});
    const std::string a_index = "(block_row + r) * " + num(v_.depth) + " + k0 + q";
    if (aw == 4) {
      w_.line("let flat = " +
              (a_ok.empty() ? a_index : "select(0, " + a_index + ", " + a_ok + ")") + ";");
      w_.line("As[q * " + num(br) + " + r] = " + zero_unless("A[flat / 4][flat % 4]", a_ok, "0.0") +
              ";");
    } else {
      w_.line("As[q * " + num(br) + " + r] = " + guarded("A", a_index, a_ok, "0.0") + ";");
    }
    w_.close();
    // B tile: kd rows × BC/w atoms, stored in the same order.
    w_.open("for (var e = i32(lidx); e < " + num(kd * bc_atoms) + "; e = e + " + num(n) + ")");
    w_.line("let r = e / " + num(bc_atoms) + ";");
    w_.line("let q = e - r * " + num(bc_atoms) + ";");
    if (v_.conv) {
      // Past a guarded edge the column and depth decode clamped (a valid address) and the
      // value is 0.
      write_depth_decode("d", edges_.depth("k0 + r"));
      std::string value;
      for (int64_t c = 0; c < w; ++c) {
        const std::string p = "c" + num(c) + "_";
        const std::string col = "block_col + q * " + num(w) + " + " + num(c);
        write_column_decode(p, edges_.col(col));
        value += (c ? ", " : "") +
                 zero_unless(im2col("d", p),
                             edges_.all({edges_.col_ok(col), edges_.depth_ok("k0 + r")}), "0.0");
      }
      w_.line("Bs[e] = " + (w == 4 ? "vec4<f32>(" + value + ")" : value) + ";");
    } else {
      const std::string ok =
          edges_.all({edges_.depth_ok("k0 + r"), edges_.col_ok("block_col + q * " + num(w))});
      w_.line("Bs[e] = " +
              guarded("B", "(k0 + r) * " + num(b_row_atoms()) + " + block_col / " + num(w) + " + q",
                      ok, w == 4 ? "vec4<f32>()" : "0.0") +
              ";");
    }
    w_.close();
    w_.line("workgroupBarrier();");
    w_.open("for (var kk = 0; kk < " + num(kd) + "; kk = kk + " + num(t_.unroll) + ")");
    for (int64_t u = 0; u < t_.unroll; ++u) {
      w_.open("");
      for (int64_t i = 0; i < t_.regs_y; ++i)
        w_.line("let a" + num(i) + " = As[(kk + " + num(u) + ") * " + num(br) + " + ty + " +
                num(t_.row_step(i)) + "];");
      for (int64_t j = 0; j < t_.col_atoms(); ++j)
        w_.line("let b" + num(j) + " = Bs[(kk + " + num(u) + ") * " + num(bc_atoms) + " + tx + " +
                num(t_.col_step(j) / w) + "];");
      write_products("", "");
      w_.close();
    }
    w_.close();
    // Nobody overwrites a tile that another invocation still reads.
    w_.line("workgroupBarrier();");
    w_.close();
  }

  /// `value`, or `zero` where `ok` fails (`select` evaluates both: `value` must read a valid
  /// address either way).
  static std::string zero_unless(const std::string& value, const std::string& ok,
                                 const std::string& zero) {
    return ok.empty() ? value : "select(" + zero + ", " + value + ", " + ok + ")";
  }
  /// `buffer[index]`, or `zero` where `ok` fails, reading address 0 then.
  static std::string guarded(const std::string& buffer, const std::string& index,
                             const std::string& ok, const std::string& zero) {
    if (ok.empty()) return buffer + "[" + index + "]";
    return zero_unless(buffer + "[select(0, " + index + ", " + ok + ")]", ok, zero);
  }

  /// The epilogue's storage buffers after C (binding 2): Bias at binding 3, per row (conv2d's
  /// output channel k: array<f32>) or per column (dense's n: array of the column type, so that
  /// vec4 columns read their four biases as one vec4), then Res at the next binding (3 without
  /// bias, else 4) as an array of the column type (indexed like C). Then the epilogue's
  /// functions. Nothing for an empty epilogue.
  void write_epilogue_declarations(const std::string& c_type) {
    if (e_.empty()) return;
    int binding = 3;
    if (e_.bias)
      w_.line("@group(0) @binding(" + num(binding++) + ") var<storage, read> Bias : array<" +
              (v_.conv ? std::string("f32") : c_type) + ">;");
    if (e_.residual != Residual::kNone)
      w_.line("@group(0) @binding(" + num(binding) + ") var<storage, read> Res : array<" + c_type +
              ">;");
    std::string functions = wgsl_epilogue_functions(e_);
    if (!functions.empty() && functions.back() == '\n') functions.pop_back();
    w_.line(functions);
  }

  /// Stores of the register tile; those past a guarded edge are skipped. With an epilogue each
  /// store goes through webtune_epilogue (webtune_epilogue4 for vec4 columns) with the bias of
  /// its output channel and the residual at its own index.
  void write_stores() {
    const int64_t w = t_.width;
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < t_.col_atoms(); ++j) {
        const std::string row = "row0 + " + num(t_.row_step(i));
        const std::string col = "col0 + " + num(t_.col_step(j));
        const std::string index =
            "(c_image + (" + row + ") * " + num(v_.cols) + " + " + col + ") / " + num(w);
        const std::string ok = edges_.all({edges_.row_ok(row), edges_.col_ok(col)});
        if (e_.empty()) {
          const std::string store = "C[" + index + "] = " + acc(i, j) + ";";
          w_.line(ok.empty() ? store : "if (" + ok + ") { " + store + " }");
          continue;
        }
        // conv2d: the row's channel, shared by a vec4's lanes (four pixels); dense: the
        // column's, a vec4 of four columns' biases where columns are vec4.
        const std::string zero = w == 4 ? "vec4<f32>(0.0)" : "0.0";
        std::string bias = zero;
        if (e_.bias) {
          bias = v_.conv ? "Bias[" + row + "]" : "Bias[(" + col + ") / " + num(w) + "]";
          if (v_.conv && w == 4) bias = "vec4<f32>(" + bias + ")";
        }
        const std::string residual = e_.residual != Residual::kNone ? "Res[q]" : zero;
        w_.open(ok.empty() ? "" : "if (" + ok + ")");
        w_.line("let q = " + index + ";");
        w_.line("C[q] = " + std::string(w == 4 ? "webtune_epilogue4(" : "webtune_epilogue(") +
                acc(i, j) + ", " + bias + ", " + residual + ");");
        w_.close();
      }
  }

  GemmTiling t_;
  GemmView v_;
  Epilogue e_;
  GemmEdges edges_;  // guards are branch-free (`&`), as xload's test is
  ShaderWriter w_;
};

}  // namespace

GemmSchedule wgsl_gemm_schedule(const Workload& workload) {
  return GemmSchedule(workload, kGemmOptions);
}

DeviceLimits webgpu_default_limits() {
  DeviceLimits d;
  d.max_workgroup_invocations = 256;
  d.max_workgroup_size_x = 256;
  d.max_workgroup_size_y = 256;
  d.max_workgroup_size_z = 64;
  d.max_shared_memory_bytes = 16384;
  return d;
}

std::shared_ptr<ConfigSpace> wgsl_space(const Workload& workload) {
  workload.validate();
  if (workload.op != OpKind::kDense && workload.op != OpKind::kConv2d)
    throw std::invalid_argument("webgpu has no template for op '" +
                                std::string(op_name(workload.op)) + "' (only dense and conv2d)");
  return wgsl_gemm_schedule(workload).space();
}

KernelArtifact emit_wgsl(const Workload& workload, const ConfigEntity& entity) {
  if (workload.op != OpKind::kDense && workload.op != OpKind::kConv2d)
    shader_text::refuse(kTarget, "only dense and conv2d have a template");
  const GemmSchedule schedule = wgsl_gemm_schedule(workload);
  const GemmView& v = schedule.view();
  const GemmTiling t = schedule.read_checked(entity);
  KernelArtifact artifact;
  artifact.target = Target::kWebgpu;
  artifact.source = GemmEmitter(v, t, workload.epilogue).emit();
  // Every input: data, weight, then the epilogue's bias and residual (Workload::input_count).
  for (int i = 0; i < workload.input_count(); ++i) {
    TensorLayout layout;
    layout.shape = workload.input_shape(i);
    layout.pack_axis = -1;  // vec4 views read the same row-major bytes
    layout.width = layout.packed_elements();
    layout.height = 1;
    artifact.inputs.push_back(std::move(layout));
  }
  // The plain row-major output: [M, N], or [N·K, OH·OW] for conv2d.
  artifact.output.rows = v.batch * v.rows;
  artifact.output.cols = v.cols;
  artifact.output.width = artifact.output.cols;
  artifact.output.height = artifact.output.rows;
  artifact.dispatch = {t.blocks_x, t.blocks_y, v.batch};
  artifact.workgroup = {t.threads_x, t.threads_y, 1};
  artifact.shared_memory_bytes = t.shared_bytes();
  return artifact;
}

ConfigEntity wgsl_default(const ConfigSpace& space) {
  return untuned_default(space, kTarget);
}

std::vector<std::pair<int64_t, int64_t>> wgsl_owned_outputs(const Workload& workload,
                                                            const ConfigEntity& entity, int64_t bx,
                                                            int64_t by, int64_t tx, int64_t ty) {
  const GemmSchedule schedule = wgsl_gemm_schedule(workload);
  return schedule.owned_outputs(schedule.read(entity), bx, by, tx, ty);
}

std::vector<int64_t> wgsl_owned_output_indices(const Workload& workload, const ConfigEntity& entity,
                                               const std::array<int64_t, 3>& group,
                                               const std::array<int64_t, 3>& invocation) {
  const GemmSchedule schedule = wgsl_gemm_schedule(workload);
  const GemmView& v = schedule.view();
  std::vector<int64_t> out;
  if (invocation[2] != 0) return out;  // the workgroups are one invocation deep
  // c_image + row · cols + col, as write_stores() addresses C.
  const int64_t image = group[2] * v.rows * v.cols;
  for (const auto& [row, col] : schedule.owned_outputs(schedule.read(entity), group[0], group[1],
                                                       invocation[0], invocation[1]))
    out.push_back(image + row * v.cols + col);
  return out;
}

}  // namespace webtune
