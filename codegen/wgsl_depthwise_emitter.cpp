/// \file wgsl_depthwise_emitter.cpp
/// WGSL depthwise conv2d template (target webgpu): config space, emitter, default config,
/// features, and its Template (registered by wgsl_template.cpp).
///
/// ## Mapping
///
/// The N·C channel planes of X and Y (plane = n·C + c) are one axis P; OH and OW the others.
/// Workgroup = threads_x × threads_y × threads_c, dispatch = blocks_x × blocks_y × blocks_c.
/// Invocation (tx, ty, tz) of workgroup (bx, by, bz) owns
///   planes  (bz·threads_c + tz)·regs_c + cc   (cc < regs_c, one plane after the other),
///   rows    (by·threads_y + ty)·regs_y + i    (i < regs_y),
///   columns (bx·threads_x + tx)·regs_x + j    (j < regs_x),
/// a regs_y × regs_x block of consecutive outputs per plane: neighbouring outputs read
/// overlapping input windows, which the unrolled variants load once. The planes of one
/// invocation are computed one after another (a run-time loop: depthwise channels share no
/// inputs, so more channels per invocation only trade invocations for work per invocation).
///
/// ## Knobs
///  - tile_c = [blocks_c, threads_c, regs_c]: split of P (channels per invocation: regs_c).
///  - tile_y = [blocks_y, threads_y, regs_y]: split of OH.
///  - tile_x = [blocks_x, threads_x, regs_x]: split of OW.
///    All three SplitPolicy::kVerbose with inner factors ≤ 64: divisors and powers of two, the
///    block count rounded up; the tail past P, OH or OW is guarded (stores skipped; loads of a
///    plane past P read plane P − 1, loads past the image are the zero padding).
///  - vec4 {0, 1}: the accumulators are vec4s of 4 adjacent outputs along OW: adjacent outputs
///    read adjacent inputs (stride 1) or every other input (stride 2), so one tap's four inputs
///    come from the row registers the unrolled variants load once, and one multiply-add updates
///    four outputs. Y (and the residual) are stored (loaded) as vec4s when OW is a multiple of
///    4 (each vec4 then holds 4 outputs of one row, 16-byte aligned); else lane by lane, each
///    lane guarded. Needs regs_x % 4 == 0.
///  - use_shared {0, 1}: 1 stages the workgroup's input tile with its halo, threads_c·regs_c
///    planes of ((BH − 1)·stride + R) × ((BW − 1)·stride + S) floats (BH = threads_y·regs_y,
///    BW = threads_x·regs_x; zero padding included), in a `var<workgroup>` array, loaded
///    cooperatively before one workgroupBarrier(); 0 reads X from the storage buffer.
///  - unroll {0, 1, 2}: 0 loops over r and s at run time (a load per tap and output); 1 loops
///    over r at run time with the S taps written out: each output row's input row is loaded
///    once per r and shared by the regs_x outputs and S taps that read it; 2 writes the whole
///    R·S window out, weights in registers, each input row of the register tile's window loaded
///    once and used by every (output row, kernel row) pair that needs it (as the gles-compute
///    depthwise template's unroll = 1, glsl_compute_emitter.cpp).
///
/// ## Rules (structural) and device limits
///  - regs_c, regs_y, regs_x ≤ 8 (registers); vec4 needs regs_x % 4 == 0.
///  - written-out multiply-adds per loop body ≤ 1024 (source size, SwiftShader compile time):
///    regs_y·regs_x·R·S with unroll 2, regs_y·regs_x·S with unroll 1.
///  - blocks_x, blocks_y, blocks_c ≤ 65535 (WebGPU's maxComputeWorkgroupsPerDimension).
///  - the guarded tail stays inside one block: (blocks − 1)·threads·regs < extent on every
///    axis (kVerbose guarantees it; checked for entities read from JSON).
/// Device limits (as the WGSL GEMM template applies them): threads_x·threads_y·threads_c ≤
/// max_workgroup_invocations (WebGPU default 256), threads_x ≤ max_workgroup_size_x, threads_y
/// ≤ max_workgroup_size_y, threads_c ≤ max_workgroup_size_z (256, 256, 64), and the input tile,
/// 4·threads_c·regs_c·TH·TW bytes, ≤ max_shared_memory_bytes (16384 by default, 32 KiB on
/// SwiftShader).
///
/// ## Edges and padding
/// Loads use xload(offset, ih, iw): a u32 compare against H and W (negative coordinates
/// wrap to large ones), the index clamped to 0 outside, and the value selected to 0, all
/// branch-free (`&` on bools, `select`), as in wgsl_emitter.cpp whose comment says why
/// (SwiftShader's pipeline builds take minutes on control flow in unrolled gathers). The test is
/// left out when pad = 0 and the OH and OW splits are exact: every window is then inside.
/// Stores are guarded by `if ((plane < P) & (oh < OH) & (ow < OW))`.
///
/// ## Epilogue
/// In the output stage, per plane: b = bias[plane % C] (once), r = residual at the output's
/// index (vec4 where Y is stored as vec4), then webtune_epilogue(v, b, r) (webtune_epilogue4
/// for vec4), written by wgsl_epilogue_functions (epilogue.hpp). No epilogue: the accumulator
/// is stored as it is and the kernel has no extra bindings.
#include "codegen/wgsl_depthwise_emitter.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "codegen/epilogue.hpp"
#include "codegen/error_no.hpp"
#include "codegen/template.hpp"
#include "shader_text.hpp"
#include "template_impl.hpp"

namespace webtune {

namespace {

constexpr int64_t kMaxThreadsPerDim = 64;
constexpr int64_t kMaxRegsPerDim = 8;
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

/// The 3 factors [blocks, threads, regs] of kVerbose split `name` of an axis of `extent`:
/// blocks must be ceil(extent / (threads·regs)), as the space's candidates are. Refuses a
/// missing knob or factors of another extent.
std::array<int64_t, 3> read_verbose_split(const ConfigEntity& entity, const std::string& name,
                                          int64_t extent) {
  std::vector<int64_t> f;
  try {
    f = entity.split(name);
  } catch (const std::exception& e) {
    refuse(e.what());
  }
  if (f.size() != 3 || f[0] < 1 || f[1] < 1 || f[2] < 1 ||
      f[0] != (extent + f[1] * f[2] - 1) / (f[1] * f[2]))
    refuse("split '" + name + "' does not cover this workload's extent " + num(extent) +
           " (blocks must be ceil(extent / (threads * regs)))");
  return {f[0], f[1], f[2]};
}

int64_t read_int(const ConfigEntity& entity, const std::string& name) {
  return shader_text::read_int(entity, name, kTarget);
}

/// Input rows (or columns) behind `outputs` consecutive outputs.
int64_t window(int64_t outputs, int64_t stride, int64_t kernel) {
  return (outputs - 1) * stride + kernel;
}

/// One entity, decoded, with the workload's geometry.
struct Tiling {
  // Geometry.
  int64_t planes = 0, channels = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kh = 0, kw = 0, stride = 1, pad = 0;
  // Knobs.
  int64_t blocks_c = 1, threads_c = 1, regs_c = 1;
  int64_t blocks_y = 1, threads_y = 1, regs_y = 1;
  int64_t blocks_x = 1, threads_x = 1, regs_x = 1;
  bool vec4 = false;
  bool use_shared = false;
  int64_t unroll = 0;

  int64_t block_h() const { return threads_y * regs_y; }
  int64_t block_w() const { return threads_x * regs_x; }
  int64_t block_planes() const { return threads_c * regs_c; }
  int64_t invocations() const { return threads_x * threads_y * threads_c; }
  /// The workgroup's input tile (halo included), rows × columns per plane.
  int64_t tile_h() const { return window(block_h(), stride, kh); }
  int64_t tile_w() const { return window(block_w(), stride, kw); }
  int64_t shared_bytes() const { return use_shared ? 4 * block_planes() * tile_h() * tile_w() : 0; }
  /// Outputs per accumulator: 4 with vec4, else 1.
  int64_t width() const { return vec4 ? 4 : 1; }
  int64_t atoms() const { return regs_x / width(); }
  /// Y (and the residual) as vec4s: 4 adjacent outputs of one row, 16-byte aligned.
  bool vec4_store() const { return vec4 && out_w % 4 == 0; }
  bool exact_y() const { return blocks_y * block_h() == out_h; }
  bool exact_x() const { return blocks_x * block_w() == out_w; }
  bool exact_c() const { return blocks_c * block_planes() == planes; }
  /// Whether loads need the padding test (see the file comment).
  bool checked_loads() const { return pad > 0 || !exact_y() || !exact_x(); }
  /// Multiply-adds written out per loop body (the register tile × the unrolled taps).
  int64_t unrolled_multiply_adds() const {
    const int64_t taps = unroll == 2 ? kh * kw : unroll == 1 ? kw : 1;
    return regs_y * regs_x * taps;
  }
};

Tiling read_tiling(const Workload& wl, const ConfigEntity& entity) {
  if (wl.op != OpKind::kDepthwiseConv2d) refuse("this template is for depthwise_conv2d only");
  Tiling t;
  t.channels = wl.in_channels;
  t.planes = wl.batch * wl.in_channels;
  t.in_h = wl.height, t.in_w = wl.width, t.out_h = wl.out_h(), t.out_w = wl.out_w();
  t.kh = wl.kernel_h, t.kw = wl.kernel_w, t.stride = wl.stride, t.pad = wl.pad;
  const auto c = read_verbose_split(entity, "tile_c", t.planes);
  const auto y = read_verbose_split(entity, "tile_y", t.out_h);
  const auto x = read_verbose_split(entity, "tile_x", t.out_w);
  t.blocks_c = c[0], t.threads_c = c[1], t.regs_c = c[2];
  t.blocks_y = y[0], t.threads_y = y[1], t.regs_y = y[2];
  t.blocks_x = x[0], t.threads_x = x[1], t.regs_x = x[2];
  t.vec4 = read_int(entity, "vec4") != 0;
  t.use_shared = read_int(entity, "use_shared") != 0;
  t.unroll = read_int(entity, "unroll");
  if (t.unroll < 0 || t.unroll > 2) refuse("unroll must be 0, 1 or 2");
  return t;
}

struct Rule {
  const char* description;
  bool (*holds)(const Tiling&);
};

const Rule kRules[] = {
    {"register tile at most 8 per axis (regs_c, regs_y, regs_x <= 8)",
     [](const Tiling& t) {
       return t.regs_c <= kMaxRegsPerDim && t.regs_y <= kMaxRegsPerDim &&
              t.regs_x <= kMaxRegsPerDim;
     }},
    {"vec4 needs regs_x to be a multiple of 4",
     [](const Tiling& t) { return !t.vec4 || t.regs_x % 4 == 0; }},
    {"at most 1024 written-out multiply-adds per loop body (regs_y * regs_x * R * S with "
     "unroll 2, regs_y * regs_x * S with unroll 1)",
     [](const Tiling& t) { return t.unrolled_multiply_adds() <= kMaxUnrolledMultiplyAdds; }},
    {"at most 65535 workgroups per dispatch dimension",
     [](const Tiling& t) {
       return t.blocks_x <= kMaxGroupCount && t.blocks_y <= kMaxGroupCount &&
              t.blocks_c <= kMaxGroupCount;
     }},
};

struct Limit {
  const char* description;
  bool (*holds)(const Tiling&, const DeviceLimits&);
};

const Limit kLimits[] = {
    {"workgroup invocations (threads_x * threads_y * threads_c) <= max_workgroup_invocations",
     [](const Tiling& t, const DeviceLimits& d) {
       return t.invocations() <= d.max_workgroup_invocations;
     }},
    {"threads_x <= max_workgroup_size_x",
     [](const Tiling& t, const DeviceLimits& d) { return t.threads_x <= d.max_workgroup_size_x; }},
    {"threads_y <= max_workgroup_size_y",
     [](const Tiling& t, const DeviceLimits& d) { return t.threads_y <= d.max_workgroup_size_y; }},
    {"threads_c <= max_workgroup_size_z",
     [](const Tiling& t, const DeviceLimits& d) { return t.threads_c <= d.max_workgroup_size_z; }},
    {"workgroup input tile (4 * threads_c * regs_c * tile_h * tile_w bytes) <= "
     "max_shared_memory_bytes",
     [](const Tiling& t, const DeviceLimits& d) {
       return t.shared_bytes() <= d.max_shared_memory_bytes;
     }},
};

/// Writes the shader of one tiling; see the file comment.
class DepthwiseEmitter {
 public:
  DepthwiseEmitter(const Tiling& t, const Epilogue& epilogue) : t_(t), e_(epilogue) {}

  std::string emit() {
    const std::string y_type = t_.vec4_store() ? "vec4<f32>" : "f32";
    w_.line("// webtune depthwise_conv2d NCHW: X[N*C=" + num(t_.planes) + "," + num(t_.in_h) + "," +
            num(t_.in_w) + "] * W[" + num(t_.channels) + ",1," + num(t_.kh) + "," + num(t_.kw) +
            "], stride " + num(t_.stride) + ", pad " + num(t_.pad) + " -> Y[" + num(t_.planes) +
            "," + num(t_.out_h) + "," + num(t_.out_w) + "]");
    w_.line("@group(0) @binding(0) var<storage, read> X : array<f32>;");
    w_.line("@group(0) @binding(1) var<storage, read> Wt : array<f32>;");
    w_.line("@group(0) @binding(2) var<storage, read_write> Y : array<" + y_type + ">;");
    int binding = 3;
    if (e_.bias)
      w_.line("@group(0) @binding(" + num(binding++) + ") var<storage, read> Bias : array<f32>;");
    if (e_.residual != Residual::kNone)
      w_.line("@group(0) @binding(" + num(binding++) + ") var<storage, read> Res : array<" +
              y_type + ">;");
    if (t_.use_shared)
      w_.line("var<workgroup> tile : array<f32, " +
              num(t_.block_planes() * t_.tile_h() * t_.tile_w()) + ">;");
    const std::string epilogue = wgsl_epilogue_functions(e_);
    if (!epilogue.empty()) {
      w_.line("");
      std::string text = epilogue;
      if (text.back() == '\n') text.pop_back();
      w_.line(text);
    }
    write_x_load();
    w_.line("");
    w_.line("@compute @workgroup_size(" + num(t_.threads_x) + ", " + num(t_.threads_y) + ", " +
            num(t_.threads_c) + ")");
    w_.open(
        "fn main(@builtin(local_invocation_id) lid : vec3<u32>, "
        "@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_index) lidx : u32)");
    w_.line("let oh0 = (i32(wid.y) * " + num(t_.threads_y) + " + i32(lid.y)) * " + num(t_.regs_y) +
            ";");
    w_.line("let ow0 = (i32(wid.x) * " + num(t_.threads_x) + " + i32(lid.x)) * " + num(t_.regs_x) +
            ";");
    w_.line("let plane0 = (i32(wid.z) * " + num(t_.threads_c) + " + i32(lid.z)) * " +
            num(t_.regs_c) + ";");
    if (t_.use_shared) write_tile_load();
    w_.open("for (var cc = 0; cc < " + num(t_.regs_c) + "; cc = cc + 1)");
    w_.line("let plane = plane0 + cc;");
    // Loads of a plane past the end (guarded tail of tile_c) read the last plane instead.
    w_.line("let lplane = min(plane, " + num(t_.planes - 1) + ");");
    w_.line("let ch = lplane % " + num(t_.channels) + ";");
    w_.line("let w_base = ch * " + num(t_.kh * t_.kw) + ";");
    if (t_.use_shared) {
      // This invocation's window inside the workgroup's tile.
      w_.line("let s_base = (i32(lid.z) * " + num(t_.regs_c) + " + cc) * " +
              num(t_.tile_h() * t_.tile_w()) + " + i32(lid.y) * " +
              num(t_.regs_y * t_.stride * t_.tile_w()) + " + i32(lid.x) * " +
              num(t_.regs_x * t_.stride) + ";");
    } else {
      w_.line("let x_base = lplane * " + num(t_.in_h * t_.in_w) + ";");
      w_.line("let ih0 = oh0 * " + num(t_.stride) + " - " + num(t_.pad) + ";");
      w_.line("let iw0 = ow0 * " + num(t_.stride) + " - " + num(t_.pad) + ";");
    }
    // Zeroed explicitly for every plane: a `var` without initializer in a loop body kept the
    // previous plane's sums on SwiftShader (measured: every plane after the first wrong).
    const std::string acc_type = "array<" + std::string(t_.vec4 ? "vec4<f32>" : "f32") + ", " +
                                 num(t_.regs_y * t_.atoms()) + ">";
    w_.line("var acc = " + acc_type + "();");
    if (t_.unroll == 0)
      write_runtime_loops();
    else if (t_.unroll == 1)
      write_row_unrolled();
    else
      write_window_unrolled();
    write_stores();
    w_.close();
    w_.close();
    return w_.text();
  }

 private:
  std::string acc(int64_t i, int64_t j) const { return "acc[" + num(i * t_.atoms() + j) + "]"; }

  /// xload(offset, ih, iw): X at offset + ih·W + iw, 0 in the padding (see the file comment).
  void write_x_load() {
    w_.line("");
    w_.open("fn xload(offset : i32, ih : i32, iw : i32) -> f32");
    if (!t_.checked_loads()) {
      w_.line("return X[offset + ih * " + num(t_.in_w) + " + iw];");
    } else {
      w_.line("let inside = (u32(ih) < " + num(t_.in_h) + "u) & (u32(iw) < " + num(t_.in_w) +
              "u);");
      w_.line("let v = X[select(0, offset + ih * " + num(t_.in_w) + " + iw, inside)];");
      w_.line("return select(0.0, v, inside);");
    }
    w_.close();
  }

  /// Cooperative load of the workgroup's input tile (halo and zero padding included).
  void write_tile_load() {
    const int64_t plane_size = t_.tile_h() * t_.tile_w();
    w_.line("let group_ih0 = i32(wid.y) * " + num(t_.block_h() * t_.stride) + " - " + num(t_.pad) +
            ";");
    w_.line("let group_iw0 = i32(wid.x) * " + num(t_.block_w() * t_.stride) + " - " + num(t_.pad) +
            ";");
    w_.line("let group_plane = i32(wid.z) * " + num(t_.block_planes()) + ";");
    w_.open("for (var e = i32(lidx); e < " + num(t_.block_planes() * plane_size) + "; e = e + " +
            num(t_.invocations()) + ")");
    w_.line("let z = e / " + num(plane_size) + ";");
    w_.line("let rest = e - z * " + num(plane_size) + ";");
    w_.line("let row = rest / " + num(t_.tile_w()) + ";");
    w_.line("let col = rest - row * " + num(t_.tile_w()) + ";");
    w_.line("let p = min(group_plane + z, " + num(t_.planes - 1) + ");");
    w_.line("tile[e] = xload(p * " + num(t_.in_h * t_.in_w) +
            ", group_ih0 + row, group_iw0 + col);");
    w_.close();
    w_.line("workgroupBarrier();");
  }

  /// The input at row `dy`, column `dx` of this invocation's window (i32 expressions).
  std::string input(const std::string& dy, const std::string& dx) const {
    if (t_.use_shared) return "tile[s_base + (" + dy + ") * " + num(t_.tile_w()) + " + " + dx + "]";
    return "xload(x_base, ih0 + " + dy + ", iw0 + " + dx + ")";
  }

  /// acc(i, j) += weight · the inputs of accumulator j's outputs at tap column `s`, the input
  /// of output column jj being `x(jj·stride + s)`.
  template <typename InputAt>
  void write_fma(int64_t i, int64_t j, const std::string& weight, int64_t s, InputAt x) {
    std::string value;
    if (t_.vec4) {
      for (int64_t e = 0; e < 4; ++e) value += (e ? ", " : "") + x((j * 4 + e) * t_.stride + s);
      value = "vec4<f32>(" + value + ")";
    } else {
      value = x(j * t_.stride + s);
    }
    w_.line(acc(i, j) + " = " + acc(i, j) + " + " + weight + " * " + value + ";");
  }

  /// unroll 0: run-time loops over r and s; a load per tap and output.
  void write_runtime_loops() {
    w_.open("for (var r = 0; r < " + num(t_.kh) + "; r = r + 1)");
    w_.open("for (var s = 0; s < " + num(t_.kw) + "; s = s + 1)");
    w_.line("let wv = Wt[w_base + r * " + num(t_.kw) + " + s];");
    for (int64_t i = 0; i < t_.regs_y; ++i)
      for (int64_t j = 0; j < t_.atoms(); ++j)
        write_fma(i, j, "wv", 0,
                  [&](int64_t dx) { return input(num(i * t_.stride) + " + r", num(dx) + " + s"); });
    w_.close();
    w_.close();
  }

  /// Declares x<dx> for the columns dx of one input row that the register tile's outputs read.
  void write_row_loads(const std::string& dy) {
    const int64_t cols = window(t_.regs_x, t_.stride, t_.kw);
    std::vector<bool> used(static_cast<size_t>(cols), false);
    for (int64_t j = 0; j < t_.regs_x; ++j)
      for (int64_t s = 0; s < t_.kw; ++s) used[static_cast<size_t>(j * t_.stride + s)] = true;
    for (int64_t dx = 0; dx < cols; ++dx)
      if (used[static_cast<size_t>(dx)])
        w_.line("let x" + num(dx) + " = " + input(dy, num(dx)) + ";");
  }

  /// unroll 1: a run-time loop over r; per output row its input row is loaded once.
  void write_row_unrolled() {
    w_.open("for (var r = 0; r < " + num(t_.kh) + "; r = r + 1)");
    for (int64_t s = 0; s < t_.kw; ++s)
      w_.line("let w" + num(s) + " = Wt[w_base + r * " + num(t_.kw) + " + " + num(s) + "];");
    for (int64_t i = 0; i < t_.regs_y; ++i) {
      w_.open("");
      write_row_loads(num(i * t_.stride) + " + r");
      for (int64_t j = 0; j < t_.atoms(); ++j)
        for (int64_t s = 0; s < t_.kw; ++s)
          write_fma(i, j, "w" + num(s), s, [](int64_t dx) { return "x" + num(dx); });
      w_.close();
    }
    w_.close();
  }

  /// unroll 2: the whole window written out; each input row of the register tile's window is
  /// loaded once and used by every (output row i, kernel row r) pair with i·stride + r = dy.
  void write_window_unrolled() {
    for (int64_t r = 0; r < t_.kh; ++r)
      for (int64_t s = 0; s < t_.kw; ++s)
        w_.line("let w" + num(r) + "_" + num(s) + " = Wt[w_base + " + num(r * t_.kw + s) + "];");
    const int64_t rows = window(t_.regs_y, t_.stride, t_.kh);
    for (int64_t dy = 0; dy < rows; ++dy) {
      std::vector<std::pair<int64_t, int64_t>> users;
      for (int64_t i = 0; i < t_.regs_y; ++i)
        if (dy - i * t_.stride >= 0 && dy - i * t_.stride < t_.kh)
          users.emplace_back(i, dy - i * t_.stride);
      if (users.empty()) continue;  // stride > R skips some rows
      w_.open("");
      write_row_loads(num(dy));
      for (const auto& [i, r] : users)
        for (int64_t j = 0; j < t_.atoms(); ++j)
          for (int64_t s = 0; s < t_.kw; ++s)
            write_fma(i, j, "w" + num(r) + "_" + num(s), s,
                      [](int64_t dx) { return "x" + num(dx); });
      w_.close();
    }
  }

  /// The output stage: epilogue and guarded stores.
  void write_stores() {
    const bool has_epilogue = !e_.empty();
    const bool res = e_.residual != Residual::kNone;
    if (e_.bias) w_.line("let b = Bias[ch];");
    w_.line("let y_plane = plane * " + num(t_.out_h * t_.out_w) + ";");
    for (int64_t i = 0; i < t_.regs_y; ++i) {
      const std::string oh = "(oh0 + " + num(i) + ")";
      for (int64_t j = 0; j < t_.atoms(); ++j) {
        if (t_.vec4_store()) {
          const std::string ow = "(ow0 + " + num(j * 4) + ")";
          w_.open("if ((plane < " + num(t_.planes) + ") & (" + oh + " < " + num(t_.out_h) +
                  ") & (" + ow + " < " + num(t_.out_w) + "))");
          w_.line("let q = (y_plane + " + oh + " * " + num(t_.out_w) + " + " + ow + ") / 4;");
          std::string value = acc(i, j);
          if (has_epilogue)
            value = "webtune_epilogue4(" + value + ", " +
                    (e_.bias ? "vec4<f32>(b)" : "vec4<f32>(0.0)") + ", " +
                    (res ? "Res[q]" : "vec4<f32>(0.0)") + ")";
          w_.line("Y[q] = " + value + ";");
          w_.close();
          continue;
        }
        for (int64_t e = 0; e < t_.width(); ++e) {
          const std::string ow = "(ow0 + " + num(j * t_.width() + e) + ")";
          w_.open("if ((plane < " + num(t_.planes) + ") & (" + oh + " < " + num(t_.out_h) +
                  ") & (" + ow + " < " + num(t_.out_w) + "))");
          w_.line("let q = y_plane + " + oh + " * " + num(t_.out_w) + " + " + ow + ";");
          std::string value = acc(i, j) + (t_.vec4 ? std::string(".") + "xyzw"[e] : "");
          if (has_epilogue)
            value = "webtune_epilogue(" + value + ", " + (e_.bias ? "b" : "0.0") + ", " +
                    (res ? "Res[q]" : "0.0") + ")";
          w_.line("Y[q] = " + value + ";");
          w_.close();
        }
      }
    }
  }

  Tiling t_;
  Epilogue e_;
  ShaderWriter w_;
};

/// How far a candidate is from the untuned default (smaller is closer).
double default_distance(const Knob& knob, const KnobValue& value) {
  if (const auto* f = std::get_if<std::vector<int64_t>>(&value)) {
    if (f->size() != 3) return 0.0;
    const double threads = static_cast<double>((*f)[1]);
    const double target = knob.name == "tile_c" ? 1.0 : static_cast<double>(kDefaultThreadsPerDim);
    // One output (channel) per invocation first, then an exact split, then threads near the
    // target, with a small tie-break towards fewer threads.
    const bool exact = (*f)[0] * (*f)[1] * (*f)[2] == knob.split_extent;
    return 1000.0 * static_cast<double>((*f)[2] - 1) + (exact ? 0.0 : 10.0) +
           std::abs(std::log2(threads / target)) + 1e-3 * threads;
  }
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  return 0.0;
}

/// The template registered as "depthwise_conv2d_nchw.webgpu".
class WgslDepthwiseTemplate final : public Template {
 public:
  WgslDepthwiseTemplate() : Template(Target::kWebgpu, OpKind::kDepthwiseConv2d) {}

  std::shared_ptr<ConfigSpace> space(const Workload& workload) const override {
    return wgsl_depthwise_space(workload);
  }
  KernelArtifact emit(const Workload& workload, const ConfigEntity& entity) const override {
    return emit_wgsl_depthwise(workload, entity);
  }
  ConfigEntity default_config(const ConfigSpace& space) const override {
    return wgsl_depthwise_default(space);
  }
  std::vector<float> features(const Workload& workload, const ConfigEntity& entity,
                              const KernelArtifact* artifact) const override {
    if (artifact == nullptr) return std::vector<float>(kAnalyticFeatureCount, 0.0f);
    return detail::compute_kernel_features(workload, *artifact,
                                           wgsl_depthwise_input_bytes_per_output(workload, entity));
  }
};

}  // namespace

std::shared_ptr<ConfigSpace> wgsl_depthwise_space(const Workload& workload) {
  workload.validate();
  if (workload.op != OpKind::kDepthwiseConv2d)
    throw std::invalid_argument("webgpu's depthwise template has no kernels for op '" +
                                std::string(op_name(workload.op)) + "'");
  const Workload wl = workload;
  auto space = std::make_shared<ConfigSpace>();
  space->define_split("tile_c", wl.batch * wl.in_channels, 3, SplitPolicy::kVerbose,
                      kMaxThreadsPerDim);
  space->define_split("tile_y", wl.out_h(), 3, SplitPolicy::kVerbose, kMaxThreadsPerDim);
  space->define_split("tile_x", wl.out_w(), 3, SplitPolicy::kVerbose, kMaxThreadsPerDim);
  space->define_knob("vec4", std::vector<int64_t>{0, 1});
  space->define_knob("use_shared", std::vector<int64_t>{0, 1});
  space->define_knob("unroll", std::vector<int64_t>{0, 1, 2});
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

KernelArtifact emit_wgsl_depthwise(const Workload& workload, const ConfigEntity& entity) {
  const Tiling t = read_tiling(workload, entity);
  for (const Rule& rule : kRules)
    if (!rule.holds(t)) refuse(std::string("config breaks: ") + rule.description);
  KernelArtifact artifact;
  artifact.target = Target::kWebgpu;
  artifact.source = DepthwiseEmitter(t, workload.epilogue).emit();
  for (int i = 0; i < workload.input_count(); ++i) {
    TensorLayout layout;
    layout.shape = workload.input_shape(i);
    layout.pack_axis = -1;  // vec4 views read the same row-major bytes
    layout.width = layout.packed_elements();
    layout.height = 1;
    artifact.inputs.push_back(std::move(layout));
  }
  // The plain row-major output [N·C·OH, OW].
  artifact.output.rows = t.planes * t.out_h;
  artifact.output.cols = t.out_w;
  artifact.output.width = artifact.output.cols;
  artifact.output.height = artifact.output.rows;
  artifact.dispatch = {t.blocks_x, t.blocks_y, t.blocks_c};
  artifact.workgroup = {t.threads_x, t.threads_y, t.threads_c};
  artifact.shared_memory_bytes = t.shared_bytes();
  return artifact;
}

ConfigEntity wgsl_depthwise_default(const ConfigSpace& space) {
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
  if (best_index < 0) throw std::runtime_error("webgpu: the depthwise space has no valid config");
  return space.get(best_index);
}

double wgsl_depthwise_input_bytes_per_output(const Workload& workload, const ConfigEntity& entity) {
  const Tiling t = read_tiling(workload, entity);
  const double r = static_cast<double>(t.kh), s = static_cast<double>(t.kw);
  const double stride = static_cast<double>(t.stride);
  const double ry = static_cast<double>(t.regs_y), rx = static_cast<double>(t.regs_x);
  const double outputs = ry * rx;  // per invocation and plane
  // Weights: R·S per plane and invocation (unroll 0 reloads them per tap: the same count).
  const double weights = r * s;
  double inputs = 0;
  if (t.use_shared) {
    // The workgroup's tile, read once from the buffer for its BH × BW outputs per plane.
    const double bh = static_cast<double>(t.block_h()), bw = static_cast<double>(t.block_w());
    inputs = static_cast<double>(t.tile_h() * t.tile_w()) * outputs / (bh * bw);
  } else if (t.unroll == 2) {
    inputs = ((ry - 1) * stride + r) * ((rx - 1) * stride + s);  // the window, once
  } else if (t.unroll == 1) {
    inputs = r * ry * ((rx - 1) * stride + s);  // each output row's input row, once per r
  } else {
    inputs = r * s * outputs;  // a load per tap and output
  }
  return 4.0 * (inputs + weights) / outputs;
}

std::vector<int64_t> wgsl_depthwise_owned_output_indices(const Workload& workload,
                                                         const ConfigEntity& entity,
                                                         const std::array<int64_t, 3>& group,
                                                         const std::array<int64_t, 3>& invocation) {
  const Tiling t = read_tiling(workload, entity);
  std::vector<int64_t> out;
  // The same arithmetic as the shader's oh0, ow0, plane0 and its guarded stores.
  const int64_t oh0 = (group[1] * t.threads_y + invocation[1]) * t.regs_y;
  const int64_t ow0 = (group[0] * t.threads_x + invocation[0]) * t.regs_x;
  const int64_t plane0 = (group[2] * t.threads_c + invocation[2]) * t.regs_c;
  for (int64_t cc = 0; cc < t.regs_c; ++cc)
    for (int64_t i = 0; i < t.regs_y; ++i)
      for (int64_t j = 0; j < t.regs_x; ++j) {
        const int64_t plane = plane0 + cc, oh = oh0 + i, ow = ow0 + j;
        if (plane < t.planes && oh < t.out_h && ow < t.out_w)
          out.push_back((plane * t.out_h + oh) * t.out_w + ow);
      }
  return out;
}

namespace detail {

std::unique_ptr<Template> make_wgsl_depthwise_template() {
  return std::make_unique<WgslDepthwiseTemplate>();
}

}  // namespace detail
}  // namespace webtune
