/// \file wgsl_emitter.cpp
/// WGSL compute-shader template (target webgpu): config space, emitter and default for dense
/// and conv2d.
///
/// ## One GEMM for both ops
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
/// Every split multiplies exactly to its extent, so no tile runs past the tensor and no
/// bounds checks are needed (only conv2d's zero padding is tested, per im2col element); the
/// emitter refuses (kInstantiation) an entity whose splits do not
/// match the workload.
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

#include "codegen/error_no.hpp"
#include "shader_text.hpp"

namespace webtune {

namespace {

constexpr int64_t kMaxThreadsPerDim = 64;
constexpr int64_t kMaxRegsPerDim = 8;
constexpr int64_t kMaxTileDepth = 16;
constexpr int64_t kMaxUnrolledMultiplyAdds = 1024;
constexpr int64_t kMaxGroupCount = 65535;
constexpr int64_t kDefaultThreadsPerDim = 8;

constexpr std::string_view kTarget = "webgpu";

[[noreturn]] void refuse(const std::string& why) {
  shader_text::refuse(kTarget, why);
}

std::string num(int64_t value) {
  return std::to_string(value);
}

using shader_text::ShaderWriter;

std::vector<int64_t> read_split(const ConfigEntity& entity, const std::string& name, size_t parts,
                                int64_t extent) {
  return shader_text::read_split(entity, name, parts, extent, kTarget);
}

int64_t read_int(const ConfigEntity& entity, const std::string& name) {
  return shader_text::read_int(entity, name, kTarget);
}

/// A dense or conv2d workload seen as C[rows, cols] = A[rows, depth] · B[depth, cols], `batch`
/// times (the dispatch's z dimension); see the file comment.
struct GemmView {
  bool conv = false;
  int64_t rows = 0, cols = 0, depth = 0, batch = 1;
  // conv2d only: input plane and window geometry.
  int64_t in_c = 0, in_h = 0, in_w = 0, kh = 0, kw = 0, stride = 1, pad = 0, out_w = 1;
};

GemmView gemm_view(const Workload& wl) {
  GemmView v;
  if (wl.op == OpKind::kDense) {
    v.rows = wl.m, v.cols = wl.n, v.depth = wl.k;
    return v;
  }
  if (wl.op != OpKind::kConv2d) refuse("only dense and conv2d have a template");
  v.conv = true;
  v.rows = wl.out_channels;
  v.cols = wl.out_h() * wl.out_w();
  v.depth = wl.in_channels * wl.kernel_h * wl.kernel_w;
  v.batch = wl.batch;
  v.in_c = wl.in_channels, v.in_h = wl.height, v.in_w = wl.width;
  v.kh = wl.kernel_h, v.kw = wl.kernel_w, v.stride = wl.stride, v.pad = wl.pad;
  v.out_w = wl.out_w();
  return v;
}

/// One entity of the GEMM space, decoded, with the view it tiles.
struct Tiling {
  GemmView v;
  int64_t blocks_y = 1, threads_y = 1, regs_y = 1;
  int64_t blocks_x = 1, threads_x = 1, regs_x = 1;
  int64_t k_outer = 1, k_depth = 1;
  bool use_shared = false;
  bool vec4 = false;
  int64_t unroll = 1;

  int64_t block_rows() const { return threads_y * regs_y; }
  int64_t block_cols() const { return threads_x * regs_x; }
  int64_t invocations() const { return threads_x * threads_y; }
  /// Depth values per A load: 4 with vec4 (A rows are contiguous along the depth), else 1.
  int64_t a_width() const { return vec4 ? 4 : 1; }
  /// Columns per B atom / accumulator / store: 4 with vec4 where the columns allow it (always
  /// for a valid dense entity; for conv2d when OH·OW and regs_x are multiples of 4), else 1.
  int64_t width() const { return vec4 && v.cols % 4 == 0 && regs_x % 4 == 0 ? 4 : 1; }
  /// Column atoms (vec4s or floats) per invocation.
  int64_t col_atoms() const { return regs_x / width(); }
  /// Depth values one unrolled loop body covers.
  int64_t body_depth() const { return use_shared ? unroll : unroll * a_width(); }
  int64_t shared_bytes() const {
    return use_shared ? 4 * k_depth * (block_rows() + block_cols()) : 0;
  }
  /// Offset of owned row i from the invocation's first row (by·BR + ty).
  int64_t row_step(int64_t i) const { return i * threads_y; }
  /// Offset, in columns, of owned column atom j from the invocation's first column.
  int64_t col_step(int64_t j) const { return j * threads_x * width(); }
};

Tiling read_tiling(const Workload& wl, const ConfigEntity& entity) {
  Tiling t;
  t.v = gemm_view(wl);
  const auto y = read_split(entity, "tile_y", 3, t.v.rows);
  const auto x = read_split(entity, "tile_x", 3, t.v.cols);
  const auto k = read_split(entity, "tile_k", 2, t.v.depth);
  t.blocks_y = y[0], t.threads_y = y[1], t.regs_y = y[2];
  t.blocks_x = x[0], t.threads_x = x[1], t.regs_x = x[2];
  t.k_outer = k[0], t.k_depth = k[1];
  t.use_shared = read_int(entity, "use_shared") != 0;
  t.vec4 = read_int(entity, "vec4") != 0;
  t.unroll = read_int(entity, "unroll");
  if (t.unroll < 1) refuse("unroll must be at least 1");
  return t;
}

struct Rule {
  const char* description;
  bool (*holds)(const Tiling&);
};

const Rule kRules[] = {
    {"register tile at most 8x8 (regs_y, regs_x <= 8)",
     [](const Tiling& t) { return t.regs_y <= kMaxRegsPerDim && t.regs_x <= kMaxRegsPerDim; }},
    {"vec4 needs the reduction length (K, or C*R*S) to be a multiple of 4",
     [](const Tiling& t) { return !t.vec4 || t.v.depth % 4 == 0; }},
    {"vec4 on dense needs N and regs_x to be multiples of 4",
     [](const Tiling& t) {
       return !t.vec4 || t.v.conv || (t.v.cols % 4 == 0 && t.regs_x % 4 == 0);
     }},
    {"tile_k is only used with workgroup memory (k_depth must be 1 without it)",
     [](const Tiling& t) { return t.use_shared || t.k_depth == 1; }},
    {"the unrolled step (unroll, times 4 with vec4 without workgroup memory) divides the "
     "reduction loop",
     [](const Tiling& t) { return (t.use_shared ? t.k_depth : t.v.depth) % t.body_depth() == 0; }},
    {"at most 1024 unrolled multiply-adds per loop body",
     [](const Tiling& t) {
       return t.body_depth() * t.regs_y * t.regs_x <= kMaxUnrolledMultiplyAdds;
     }},
    {"at most 65535 workgroups per dispatch dimension",
     [](const Tiling& t) {
       return t.blocks_x <= kMaxGroupCount && t.blocks_y <= kMaxGroupCount &&
              t.v.batch <= kMaxGroupCount;
     }},
    {"at most 2^31 - 1 elements per tensor (WGSL indexes with i32)",
     [](const Tiling& t) {
       const int64_t max = std::numeric_limits<int32_t>::max();
       const int64_t data = t.v.conv ? t.v.batch * t.v.in_c * t.v.in_h * t.v.in_w : 0;
       return t.v.rows * t.v.depth <= max && t.v.depth * t.v.cols <= max && data <= max &&
              t.v.batch * t.v.rows * t.v.cols <= max;
     }},
};

struct Limit {
  const char* description;
  bool (*holds)(const Tiling&, const DeviceLimits&);
};

const Limit kLimits[] = {
    {"workgroup invocations (threads_x * threads_y) <= max_workgroup_invocations",
     [](const Tiling& t, const DeviceLimits& d) {
       return t.invocations() <= d.max_workgroup_invocations;
     }},
    {"threads_x <= max_workgroup_size_x",
     [](const Tiling& t, const DeviceLimits& d) { return t.threads_x <= d.max_workgroup_size_x; }},
    {"threads_y <= max_workgroup_size_y",
     [](const Tiling& t, const DeviceLimits& d) { return t.threads_y <= d.max_workgroup_size_y; }},
    {"workgroup tiles (4 * k_depth * (block_rows + block_cols) bytes) <= max_shared_memory_bytes",
     [](const Tiling& t, const DeviceLimits& d) {
       return t.shared_bytes() <= d.max_shared_memory_bytes;
     }},
};

/// Writes the dense or conv2d shader for one tiling; see the file comment for the mapping.
class GemmEmitter {
 public:
  explicit GemmEmitter(const Tiling& t) : t_(t), v_(t.v) {}

  std::string emit() {
    const std::string a_type = t_.a_width() == 4 ? "vec4<f32>" : "f32";
    const std::string c_type = t_.width() == 4 ? "vec4<f32>" : "f32";
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
    if (t_.use_shared) {
      // As is stored transposed, [k][row]: the rows an invocation reads for one k are
      // threads_y apart, so neighbouring invocations read neighbouring words.
      w_.line("var<workgroup> As : array<f32, " + num(t_.k_depth * t_.block_rows()) + ">;");
      w_.line("var<workgroup> Bs : array<" + c_type + ", " +
              num(t_.k_depth * t_.block_cols() / t_.width()) + ">;");
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
    w_.line("let col0 = block_col + tx * " + num(t_.width()) + ";");
    if (v_.conv) {
      // One image per workgroup layer z: its input and output planes.
      w_.line("let x_image = i32(wid.z) * " + num(v_.in_c * v_.in_h * v_.in_w) + ";");
      w_.line("let c_image = i32(wid.z) * " + num(v_.rows * v_.cols) + ";");
    } else {
      w_.line("let c_image = 0;");
    }
    w_.line("var acc : array<" + c_type + ", " + num(t_.regs_y * t_.col_atoms()) + ">;");
    if (t_.use_shared)
      write_shared_loop();
    else
      write_global_loop();
    write_stores();
    w_.close();
    return w_.text();
  }

 private:
  int64_t a_row_atoms() const { return v_.depth / t_.a_width(); }
  int64_t b_row_atoms() const { return v_.cols / t_.width(); }
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
    const int64_t w = t_.width();
    for (int64_t i = 0; i < t_.regs_y; ++i)
      w_.line("let a_row" + num(i) + " = (row0 + " + num(t_.row_step(i)) + ") * " +
              num(a_row_atoms()) + ";");
    if (v_.conv) {
      // Each owned column's window origin, decoded once.
      for (int64_t j = 0; j < t_.col_atoms(); ++j)
        for (int64_t e = 0; e < w; ++e)
          write_column_decode("c" + num(j) + "_" + num(e) + "_",
                              "col0 + " + num(t_.col_step(j) + e));
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
            w_.line("let b" + num(j) + " = B[(" + depth + ") * " + num(b_row_atoms()) +
                    " + b_col + " + num(t_.col_step(j) / w) + "];");
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
    const int64_t w = t_.width();
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
    if (aw == 4) {
      w_.line("let flat = (block_row + r) * " + num(v_.depth) + " + k0 + q;");
      w_.line("As[q * " + num(br) + " + r] = A[flat / 4][flat % 4];");
    } else {
      w_.line("As[q * " + num(br) + " + r] = A[(block_row + r) * " + num(v_.depth) + " + k0 + q];");
    }
    w_.close();
    // B tile: kd rows × BC/w atoms, stored in the same order.
    w_.open("for (var e = i32(lidx); e < " + num(kd * bc_atoms) + "; e = e + " + num(n) + ")");
    w_.line("let r = e / " + num(bc_atoms) + ";");
    w_.line("let q = e - r * " + num(bc_atoms) + ";");
    if (v_.conv) {
      write_depth_decode("d", "k0 + r");
      std::string value;
      for (int64_t c = 0; c < w; ++c) {
        const std::string p = "c" + num(c) + "_";
        write_column_decode(p, "block_col + q * " + num(w) + " + " + num(c));
        value += (c ? ", " : "") + im2col("d", p);
      }
      w_.line("Bs[e] = " + (w == 4 ? "vec4<f32>(" + value + ")" : value) + ";");
    } else {
      w_.line("Bs[e] = B[(k0 + r) * " + num(b_row_atoms()) + " + block_col / " + num(w) + " + q];");
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

  void write_stores() {
    const int64_t w = t_.width();
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < t_.col_atoms(); ++j)
        w_.line("C[(c_image + (row0 + " + num(t_.row_step(i)) + ") * " + num(v_.cols) +
                " + col0 + " + num(t_.col_step(j)) + ") / " + num(w) + "] = " + acc(i, j) + ";");
  }

  Tiling t_;
  GemmView v_;
  ShaderWriter w_;
};

/// How far a candidate is from the untuned default (smaller is closer).
double default_distance(const Knob& knob, const KnobValue& value) {
  if (const auto* factors = std::get_if<std::vector<int64_t>>(&value)) {
    if ((knob.name == "tile_x" || knob.name == "tile_y") && factors->size() == 3) {
      const double threads = static_cast<double>((*factors)[1]);
      return 1000.0 * static_cast<double>((*factors)[2] - 1) +
             std::abs(std::log2(threads / kDefaultThreadsPerDim)) + 1e-3 * threads;
    }
    return static_cast<double>(factors->back());
  }
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  return 0.0;
}

}  // namespace

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
  const Workload wl = workload;
  const GemmView v = gemm_view(wl);
  auto space = std::make_shared<ConfigSpace>();
  space->define_split("tile_y", v.rows, 3, SplitPolicy::kFactors, kMaxThreadsPerDim);
  space->define_split("tile_x", v.cols, 3, SplitPolicy::kFactors, kMaxThreadsPerDim);
  space->define_split("tile_k", v.depth, 2, SplitPolicy::kFactors, kMaxTileDepth);
  space->define_knob("use_shared", std::vector<int64_t>{0, 1});
  space->define_knob("vec4", std::vector<int64_t>{0, 1});
  space->define_knob("unroll", std::vector<int64_t>{1, 2, 4, 8});
  for (const Rule& rule : kRules) {
    space->add_constraint(rule.description, [wl, holds = rule.holds](const ConfigEntity& e) {
      return holds(read_tiling(wl, e));
    });
  }
  for (const Limit& limit : kLimits) {
    space->add_device_limit(
        limit.description, [wl, holds = limit.holds](const ConfigEntity& e, const DeviceLimits& d) {
          return holds(read_tiling(wl, e), d);
        });
  }
  return space;
}

KernelArtifact emit_wgsl(const Workload& workload, const ConfigEntity& entity) {
  const Tiling t = read_tiling(workload, entity);
  for (const Rule& rule : kRules)
    if (!rule.holds(t)) refuse(std::string("config breaks: ") + rule.description);
  KernelArtifact artifact;
  artifact.target = Target::kWebgpu;
  artifact.source = GemmEmitter(t).emit();
  for (int i = 0; i < 2; ++i) {
    TensorLayout layout;
    layout.shape = workload.input_shape(i);
    layout.pack_axis = -1;  // vec4 views read the same row-major bytes
    layout.width = layout.packed_elements();
    layout.height = 1;
    artifact.inputs.push_back(std::move(layout));
  }
  // The plain row-major output: [M, N], or [N·K, OH·OW] for conv2d.
  artifact.output.rows = t.v.batch * t.v.rows;
  artifact.output.cols = t.v.cols;
  artifact.output.width = artifact.output.cols;
  artifact.output.height = artifact.output.rows;
  artifact.dispatch = {t.blocks_x, t.blocks_y, t.v.batch};
  artifact.workgroup = {t.threads_x, t.threads_y, 1};
  artifact.shared_memory_bytes = t.shared_bytes();
  return artifact;
}

ConfigEntity wgsl_default(const ConfigSpace& space) {
  const KnobList& knobs = space.knobs();
  std::vector<int> choices(knobs.size(), 0);
  for (size_t k = 0; k < knobs.size(); ++k) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < knobs[k].candidates.size(); ++c) {
      const double d = default_distance(knobs[k], knobs[k].candidates[c]);
      if (d < best) best = d, choices[k] = static_cast<int>(c);
    }
  }
  ConfigEntity entity = space.from_choices(choices);
  if (space.is_valid(entity)) return entity;
  double best = std::numeric_limits<double>::infinity();
  int64_t best_index = -1;
  for (int64_t index : space.valid_indices()) {
    const ConfigEntity candidate = space.get(index);
    double d = 0;
    for (size_t k = 0; k < knobs.size(); ++k)
      d += default_distance(knobs[k], knobs[k].candidates[candidate.choices()[k]]);
    if (d < best) best = d, best_index = index;
  }
  if (best_index < 0) throw std::runtime_error("webgpu: the config space has no valid config");
  return space.get(best_index);
}

std::vector<std::pair<int64_t, int64_t>> wgsl_owned_outputs(const Workload& workload,
                                                            const ConfigEntity& entity, int64_t bx,
                                                            int64_t by, int64_t tx, int64_t ty) {
  const Tiling t = read_tiling(workload, entity);
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t row0 = by * t.block_rows() + ty;
  const int64_t col0 = bx * t.block_cols() + tx * t.width();
  for (int64_t i = 0; i < t.regs_y; ++i)
    for (int64_t j = 0; j < t.col_atoms(); ++j)
      for (int64_t e = 0; e < t.width(); ++e)
        out.emplace_back(row0 + t.row_step(i), col0 + t.col_step(j) + e);
  return out;
}

std::vector<int64_t> wgsl_owned_output_indices(const Workload& workload, const ConfigEntity& entity,
                                               const std::array<int64_t, 3>& group,
                                               const std::array<int64_t, 3>& invocation) {
  const Tiling t = read_tiling(workload, entity);
  std::vector<int64_t> out;
  if (invocation[2] != 0) return out;  // the workgroups are one invocation deep
  // c_image + row · cols + col, as write_stores() addresses C.
  const int64_t image = group[2] * t.v.rows * t.v.cols;
  for (const auto& [row, col] :
       wgsl_owned_outputs(workload, entity, group[0], group[1], invocation[0], invocation[1]))
    out.push_back(image + row * t.v.cols + col);
  return out;
}

}  // namespace webtune
