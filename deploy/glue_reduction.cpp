/// \file glue_reduction.cpp
/// The workgroup frame of GPU op kernels on the compute targets (gles-compute, webgpu) for the
/// reductions whose groups are large: GlobalAveragePool, GlobalMaxPool and ReduceSum, Mean,
/// Max, Min, Prod, L1, L2, SumSquare, LogSum. The element frame (glue_ops.cpp) gives each output
/// element one invocation that loops over its whole group: a squeeze-excite block's pool over a
/// 56×56 plane is 16 invocations of 3136 serial loads each, and such pools took 0.40 of 1.01 ms
/// of one model on an H200 (issue 48). Here each output element is one workgroup of T threads
/// (a power of two, 256 at most and within the device limits): thread t folds elements t,
/// t + T, … of the group, then the workgroup folds the T partial results in shared memory in
/// log₂ T halving steps (the classic tree reduction, e.g. Harris, "Optimizing Parallel
/// Reduction in CUDA", 2007), and thread 0 writes. Fold order differs from the reference's
/// serial double sum: float32 rounding only. NaN: Max / Min propagate it (as the reference);
/// GlobalMaxPool ignores it (std::max in the reference keeps the larger non-NaN).
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "glue_code.hpp"

namespace webtune::deploy::glue {
namespace {

/// What a reduction folds: output element o reduces the `count` elements of X at
/// base(o) + offset(r), with base over the kept axes and offset over the reduced ones.
struct Plan {
  std::vector<int64_t> kept, kept_strides, group, group_strides;
  int64_t count = 0;
  std::string op;  ///< "Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "SumSquare", "LogSum",
                   ///< "GlobalMax"
};

std::optional<Plan> plan_of(const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  Plan p;
  if (node.op_type == "GlobalAveragePool" || node.op_type == "GlobalMaxPool") {
    if (x.size() < 3) return std::nullopt;  // the element frame reports it
    p.count = product(x, 2);
    p.kept = {product(x, 0, 2)};
    p.kept_strides = {p.count};
    p.group = {p.count};
    p.group_strides = {1};
    p.op = node.op_type == "GlobalAveragePool" ? "Mean" : "GlobalMax";
    return p;
  }
  if (node.op_type.rfind("Reduce", 0) != 0) return std::nullopt;
  p.op = node.op_type.substr(6);
  if (p.op == "LogSumExp") return std::nullopt;  // two passes: the element frame
  std::vector<int64_t> axes;
  if (auto input = ctx.ints_input(1))
    axes = *input;
  else
    axes = node.get_ints("axes", {});
  if (axes.empty() && node.get_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
  std::vector<bool> reduced(x.size(), axes.empty());
  for (int64_t a : axes) {
    const auto i = static_cast<size_t>(normalize_axis(ctx, a, x.size()));
    if (reduced[i]) return std::nullopt;  // the element frame reports it
    reduced[i] = true;
  }
  const std::vector<int64_t> strides = row_major_strides(x);
  for (size_t i = 0; i < x.size(); ++i) {
    (reduced[i] ? p.group : p.kept).push_back(x[i]);
    (reduced[i] ? p.group_strides : p.kept_strides).push_back(strides[i]);
  }
  p.count = product(p.group);
  if (product(p.kept) != ctx.out_elements) return std::nullopt;
  return p;
}

/// `acc` folded with `x` (both float expressions), for plan op `op`.
std::string fold(const Code& c, const std::string& op, const std::string& acc,
                 const std::string& x) {
  // WGSL's select(f, t, cond); GLSL's frame defines webtune_select with the same order.
  const std::string sel = c.wgsl() ? "select" : "webtune_select";
  if (op == "Prod") return acc + " * " + x;
  if (op == "Max" || op == "Min") {
    const std::string f = op == "Max" ? "max" : "min";
    return sel + "(" + f + "(" + acc + ", " + x + "), " + c.nan() + ", " + c.is_nan(acc) + " || " +
           c.is_nan(x) + ")";
  }
  if (op == "GlobalMax") return sel + "(" + acc + ", " + x + ", " + x + " > " + acc + ")";
  return acc + " + " + x;  // sums (the element's own term is applied when loaded)
}

}  // namespace

bool reduction_kernel(Target target, const OpContext& ctx, const DeviceLimits& limits,
                      const std::string& header, KernelArtifact& artifact) {
  if (target != Target::kGlesCompute && target != Target::kWebgpu) return false;
  const std::optional<Plan> plan = plan_of(ctx);
  // Small groups gain nothing from a workgroup per element (and few outputs of large groups are
  // exactly where the element frame starves the GPU).
  if (!plan || plan->count < 128) return false;
  const Plan& p = *plan;
  int64_t threads = 1;
  while (threads * 2 <=
         std::min<int64_t>({256, limits.max_workgroup_invocations, limits.max_workgroup_size_x}))
    threads *= 2;
  const bool wgsl = target == Target::kWebgpu;
  const Lang lang = wgsl ? Lang::kWgsl : Lang::kGlsl;
  const int64_t n = ctx.out_elements;
  const int64_t gx = std::min(n, kMaxGroups), gy = (n + gx - 1) / gx;
  if (gy > kMaxGroups) ctx.fail("the output needs more than 65535^2 workgroups");

  // The per-thread loop, in the Code vocabulary: o (the output element) and t (the thread).
  Code body(lang);
  decode(body, "o", "q", p.kept);
  body.let_int("base", dot("q", p.kept_strides));
  std::string init = "0.0";
  if (p.op == "Prod") init = "1.0";
  if (p.op == "Max" || p.op == "GlobalMax") init = body.negative_infinity();
  if (p.op == "Min") init = body.positive_infinity();
  body.var_float("acc", init);
  body.var_int("r", "t");
  body.open("while (r < " + num(p.count) + ")");
  decode(body, "r", "g", p.group);
  body.let_float("x", ctx.ld(0, "base + " + dot("g", p.group_strides)));
  std::string term = "x";
  if (p.op == "L1") term = "abs(x)";
  if (p.op == "L2" || p.op == "SumSquare") term = "x * x";
  body.assign("acc", fold(body, p.op, "acc", term));
  body.assign("r", "r + " + num(threads));
  body.close();
  // The final value from the fully folded `v`.
  std::string finish = "v";
  if (p.op == "Mean") finish = "v / " + Code::lit(static_cast<double>(p.count));
  if (p.op == "L2") finish = "sqrt(v)";
  if (p.op == "LogSum") finish = "log(v)";

  const std::string body_text = body.text();
  const std::string combine = fold(body, p.op, "part[t]", "part[t + s]");
  std::ostringstream s;
  const std::string ts = num(threads);
  if (wgsl) {
    s << header << "\n";
    s << "@group(0) @binding(0) var<storage, read> in0 : array<f32>;\n";
    s << "@group(0) @binding(2) var<storage, read_write> dst : array<f32>;\n";
    s << "fn ld0(k : i32) -> f32 { return in0[k]; }\n";
    s << "var<workgroup> part : array<f32, " << ts << ">;\n";
    s << "@compute @workgroup_size(" << ts << ", 1, 1)\n";
    s << "fn main(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_id) lid : "
         "vec3<u32>) {\n";
    s << "  let o : i32 = i32(wid.y) * " << gx << " + i32(wid.x);\n";
    s << "  let t : i32 = i32(lid.x);\n";
    // o is uniform over the workgroup, so the early return keeps the barriers uniform.
    s << "  if (o >= " << n << ") { return; }\n";
    s << body_text;
    s << "  part[t] = acc;\n  workgroupBarrier();\n";
    s << "  for (var s : i32 = " << threads / 2 << "; s > 0; s = s / 2) {\n";
    s << "    if (t < s) { part[t] = " << combine << "; }\n";
    s << "    workgroupBarrier();\n  }\n";
    s << "  if (t == 0) {\n    let v : f32 = part[0];\n    dst[o] = " << finish << ";\n  }\n}\n";
  } else {
    s << "#version 310 es\n" << header << "\n";
    s << "precision highp float;\nprecision highp int;\n";
    s << "layout(local_size_x = " << ts << ", local_size_y = 1, local_size_z = 1) in;\n";
    s << "layout(std430, binding = 0) readonly buffer In0 { float in0[]; };\n";
    s << "layout(std430, binding = 2) writeonly buffer Out { float result[]; };\n";
    s << "float ld0(int k) { return in0[k]; }\n";
    s << "float webtune_select(float f, float t, bool c) { return c ? t : f; }\n";
    s << "shared float part[" << ts << "];\n";
    s << "void main() {\n";
    s << "  int o = int(gl_WorkGroupID.y) * " << gx << " + int(gl_WorkGroupID.x);\n";
    s << "  int t = int(gl_LocalInvocationID.x);\n";
    s << "  if (o >= " << n << ") return;\n";
    s << body_text;
    s << "  part[t] = acc;\n  memoryBarrierShared();\n  barrier();\n";
    s << "  for (int s = " << threads / 2 << "; s > 0; s = s / 2) {\n";
    s << "    if (t < s) { part[t] = " << combine << "; }\n";
    s << "    memoryBarrierShared();\n    barrier();\n  }\n";
    s << "  if (t == 0) {\n    float v = part[0];\n    result[o] = " << finish << ";\n  }\n}\n";
  }
  artifact.source = s.str();
  artifact.dispatch = {gx, gy, 1};
  artifact.workgroup = {threads, 1, 1};
  return true;
}

}  // namespace webtune::deploy::glue
