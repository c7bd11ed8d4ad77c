/// \file glue_ops.cpp
/// Small kernels for the operators no tuned task covers (op_kernel, glue_kernels.hpp), for the
/// three GPU targets: GLSL ES 3.00 fragment shaders (gles-frag), GLSL ES 3.10 compute shaders
/// (gles-compute) and WGSL compute shaders (webgpu).
///
/// Every kernel computes ONE output element per fragment or invocation: its flat row-major
/// index `o` comes from the fragment's texel (o = y·width + x of the plain output texture) or
/// from the invocation id (o = id.y · threads per dispatch row + id.x), and the operator's body
/// turns `o` into the value `v`, reading input i's element at flat index k through the function
/// `ld<i>(k)` (texelFetch of a plain R32F texture, or the storage buffer's k-th float). Each
/// operator's body is written once, through `Code` (glue_code.hpp), which spells declarations,
/// loops, casts and literals in GLSL or in WGSL; the bodies live in glue_bodies_<family>.cpp.
/// This file is the frame (declarations, `ld<i>`, the index and the store), which differs per
/// target, and the registry of the bodies, checked against graph/operators.cpp's table. Glue
/// kernels are a small share of a model's time, so they favour one simple shape over speed: e.g.
/// Softmax recomputes its row's maximum and sum in every element's invocation (L² work for rows of
/// length L, 10^6 for a 1000-class classifier).
///
/// On gles-frag the inputs may also be read in place from any frag storage and the output
/// written in any TensorLayout (OpKernelOptions::input_storage / output_layout): `ld<i>` is
/// then glue_frag's reader of that storage, and the body becomes `float op_value(int o)`,
/// called by glue_frag's writer for each element a destination texel holds (so an RGBA output
/// runs the operator four times per fragment).
///
/// The semantics are graph/kernels' (the reference executor), attribute by attribute; the
/// pools' window geometry (pads, strides, dilations, ceil_mode, auto_pad, count_include_pad)
/// is conv_pool.cpp's rule, repeated in glue_bodies_pool.cpp's pool_geometry.
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/epilogue.hpp"
#include "deploy/glue_kernels.hpp"
#include "glue_code.hpp"
#include "glue_frag.hpp"
#include "graph/operators.hpp"

namespace webtune::deploy {
namespace {

using namespace glue;

/// Every family's bodies by op type, checked once against the operator table: an operator
/// marked kRunsOnGpu without a body, or a body of an operator not so marked, is a programming
/// error (std::logic_error at the first op kernel, so every glue test fails on it).
const std::map<std::string, Body>& bodies() {
  static const std::map<std::string, Body> map = [] {
    std::map<std::string, Body> all;
    for (auto family : {pool_bodies, elementwise_bodies, normalization_bodies, layout_bodies,
                        linear_bodies, reduce_bodies, resize_bodies})
      for (const BodyEntry& e : family())
        if (!all.emplace(e.op, e.body).second)
          throw std::logic_error(std::string("glue body of ") + e.op + " registered twice");
    for (const graph::OperatorInfo& info : graph::operator_table()) {
      const bool marked = (info.runs & graph::kRunsOnGpu) != 0;
      const bool has = all.count(std::string(info.name)) != 0;
      if (marked != has)
        throw std::logic_error("graph/operators.cpp says " + std::string(info.name) +
                               (marked ? " runs on GPUs, but deploy/ has no glue body for it"
                                       : " has no GPU kernel, but deploy/ has a glue body"));
    }
    for (const auto& [op, body] : all)
      if (graph::find_operator(op) == nullptr)
        throw std::logic_error("glue body of " + op + ", an operator not in the table");
    return all;
  }();
  return map;
}

Body find_body(const std::string& op_type) {
  const auto& map = bodies();
  const auto it = map.find(op_type);
  return it == map.end() ? nullptr : it->second;
}

bool is_fused(const std::string& op_type) {
  return op_type == "FusedConv" || op_type == "FusedGemm" || op_type == "FusedMatMul";
}

/// plain_texture_layout, its error naming the node and the tensor.
TensorLayout plain_layout(const std::vector<int64_t>& shape, const DeviceLimits& limits,
                          const NodeError& fail, const std::string& what) {
  try {
    return plain_texture_layout(shape, limits);
  } catch (const std::invalid_argument& e) {
    fail(what + ": " + e.what());
  }
}

/// WebGPU's default maxStorageBuffersPerShaderStage: the inputs and the output share it.
constexpr size_t kWebgpuStorageBuffers = 8;

}  // namespace

bool has_op_kernel(Target target, const std::string& op_type) {
  if (target != Target::kGlesFrag && target != Target::kGlesCompute && target != Target::kWebgpu)
    return false;
  return find_body(op_type) != nullptr;
}

std::vector<std::string> op_kernel_inputs(const graph::Node& node) {
  const graph::OperatorInfo* info = graph::find_operator(node.op_type);
  const uint32_t build_time = info ? info->build_time_inputs : 0;
  std::vector<std::string> inputs;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty() && (i >= 32 || ((build_time >> i) & 1u) == 0))
      inputs.push_back(node.inputs[i]);
  return inputs;
}

KernelArtifact op_kernel(Target target, const graph::Graph& graph, const graph::Node& node,
                         const DeviceLimits& limits) {
  return op_kernel(target, graph, node, limits, OpKernelOptions{});
}

KernelArtifact op_kernel(Target target, const graph::Graph& graph, const graph::Node& node,
                         const DeviceLimits& limits, const OpKernelOptions& options) {
  const NodeError fail{node};
  if (target != Target::kGlesFrag && target != Target::kGlesCompute && target != Target::kWebgpu)
    fail("target " + std::string(target_name(target)) +
         " has no glue kernels (only gles-frag, "
         "gles-compute and webgpu)");
  const Body body_of = find_body(node.op_type);
  if (body_of == nullptr) fail("no glue kernel for this operator");
  if (node.outputs.empty() || node.outputs[0].empty()) fail("has no output");
  if (!node.epilogue.empty() && !is_fused(node.op_type))
    fail("an unfused operator carries an epilogue");

  OpContext ctx{graph, node, fail, options.opset, op_kernel_inputs(node), {}, 0};
  if (const graph::OperatorInfo* info = graph::find_operator(node.op_type))
    ctx.build_time = info->build_time_inputs;
  for (const std::string& name : ctx.inputs) {
    const graph::Tensor& t = graph.tensor(name);
    if (t.type != graph::DataType::kFloat32)
      fail("input '" + name + "' is " + std::string(graph::data_type_name(t.type)) +
           "; glue kernels read float32 tensors");
  }
  const graph::Tensor& out = graph.tensor(node.outputs[0]);
  if (out.type != graph::DataType::kFloat32) fail("the output is not float32");
  ctx.out_shape = out.shape;
  ctx.out_elements = product(out.shape);
  if (ctx.out_elements < 1) fail("the output is empty");
  if (ctx.out_elements >= (int64_t{1} << 30)) fail("the output is too large for int indices");
  if (ctx.inputs.empty()) fail("has no input");
  if (target == Target::kWebgpu && ctx.inputs.size() + 1 > kWebgpuStorageBuffers)
    fail(std::to_string(ctx.inputs.size()) + " inputs and the output exceed WebGPU's default " +
         std::to_string(kWebgpuStorageBuffers) + " storage buffers per shader stage");

  const Lang lang = target == Target::kWebgpu ? Lang::kWgsl : Lang::kGlsl;
  Code body(lang);
  body_of(body, ctx);

  KernelArtifact artifact;
  artifact.target = target;
  const bool frag = target == Target::kGlesFrag;
  if (!frag && (!options.input_storage.empty() || options.output_layout))
    fail("input_storage and output_layout are for gles-frag kernels only");
  if (!options.input_storage.empty() && options.input_storage.size() != ctx.inputs.size())
    fail("input_storage has " + std::to_string(options.input_storage.size()) + " entries for " +
         std::to_string(ctx.inputs.size()) + " bound inputs");
  // frag: the ld<i> function of each bound input, over its sampler unit(s).
  std::string loaders;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const std::string& name = ctx.inputs[i];
    const std::vector<int64_t>& shape = graph.tensor(name).shape;
    const int unit = static_cast<int>(artifact.inputs.size());
    if (frag && !options.input_storage.empty() && options.input_storage[i]) {
      const Storage& storage = *options.input_storage[i];
      std::vector<TensorLayout> layouts;
      try {
        layouts = glue_frag::source_layouts(storage, product(shape), "input '" + name + "'");
      } catch (const std::invalid_argument& e) {
        fail(e.what());
      }
      artifact.inputs.insert(artifact.inputs.end(), layouts.begin(), layouts.end());
      loaders += glue_frag::source_function("ld" + num(static_cast<int64_t>(i)), storage, unit);
    } else if (frag) {
      const TensorLayout l = plain_layout(shape, limits, fail, "input '" + name + "'");
      artifact.inputs.push_back(l);
      const std::string coord = l.height == 1
                                    ? "ivec2(k, 0)"
                                    : "ivec2(k % " + num(l.width) + ", k / " + num(l.width) + ")";
      loaders += "float ld" + num(static_cast<int64_t>(i)) + "(int k) { return texelFetch(in" +
                 num(unit) + ", " + coord + ", 0).r; }\n";
    } else {
      TensorLayout layout;
      layout.shape = shape;
      layout.pack_axis = -1;
      layout.width = std::max<int64_t>(product(shape), 1);
      layout.height = 1;
      artifact.inputs.push_back(layout);
    }
  }
  const int64_t n = ctx.out_elements;
  artifact.output.rows = 1;
  artifact.output.cols = n;
  artifact.output.rows_per_item = 1;
  artifact.output.channels = 1;

  std::ostringstream s;
  const std::string header = "// webtune op " + node.op_type + " '" + node.name + "' -> " +
                             shape_text(ctx.out_shape) + " (" + std::string(target_name(target)) +
                             ")";
  const bool epilogue = is_fused(node.op_type) && !node.epilogue.empty();
  if (frag) {
    if (artifact.inputs.size() > 16)
      fail("more than 16 input textures (the texture units OpenGL ES 3.0 guarantees)");
    s << "#version 300 es\n" << header << "\n";
    s << "precision highp float;\nprecision highp int;\n";
    s << glue_frag::sampler_declarations(artifact.inputs);
    s << loaders;
    if (epilogue) s << glsl_epilogue_functions(node.epilogue);
    if (options.output_layout) {
      // The operator as a function of the output's logical index, called for each element the
      // destination texel holds (glue_frag's writer, as a relayout's).
      const TensorLayout& to = *options.output_layout;
      try {
        glue_frag::check_destination(to, n, limits, "the output layout");
      } catch (const std::invalid_argument& e) {
        fail(e.what());
      }
      s << "float op_value(int o) {\n  float v = 0.0;\n" << body.text() << "  return v;\n}\n";
      s << glue_frag::destination_main(to, "op_value", nullptr);
      artifact.output = glue_frag::destination_output(to);
    } else {
      const TensorLayout out_layout = plain_layout(ctx.out_shape, limits, fail, "the output");
      artifact.output.width = out_layout.width;
      artifact.output.height = out_layout.height;
      s << "layout(location = 0) out float o0;\n";
      s << "void main() {\n";
      s << "  ivec2 px = ivec2(gl_FragCoord.xy);\n";
      s << "  int o = px.y * " << out_layout.width << " + px.x;\n";
      if (out_layout.width * out_layout.height > n)
        s << "  if (o >= " << n << ") { o0 = 0.0; return; }\n";
      s << "  float v = 0.0;\n" << body.text() << "  o0 = v;\n}\n";
    }
  } else if (options.workgroup_reductions &&
             reduction_kernel(target, ctx, limits, header, artifact)) {
    artifact.output.width = n;
    artifact.output.height = 1;
    return artifact;
  } else {
    const int64_t threads = std::max<int64_t>(
        1, std::min<int64_t>({64, limits.max_workgroup_invocations, limits.max_workgroup_size_x}));
    const int64_t groups = (n + threads - 1) / threads;
    const int64_t gx = std::min(groups, kMaxGroups);
    const int64_t gy = (groups + gx - 1) / gx;
    if (gy > kMaxGroups) fail("the output needs more than 65535^2 workgroups");
    artifact.dispatch = {gx, gy, 1};
    artifact.workgroup = {threads, 1, 1};
    artifact.output.width = n;
    artifact.output.height = 1;
    const std::string row = num(gx * threads);
    if (lang == Lang::kGlsl) {
      s << "#version 310 es\n" << header << "\n";
      s << "precision highp float;\nprecision highp int;\n";
      s << "layout(local_size_x = " << threads << ", local_size_y = 1, local_size_z = 1) in;\n";
      for (size_t i = 0; i < ctx.inputs.size(); ++i)
        s << "layout(std430, binding = " << binding_of(static_cast<int>(i))
          << ") readonly buffer In" << i << " { float in" << i << "[]; };\n";
      s << "layout(std430, binding = 2) writeonly buffer Out { float result[]; };\n";
      for (size_t i = 0; i < ctx.inputs.size(); ++i)
        s << "float ld" << i << "(int k) { return in" << i << "[k]; }\n";
      if (epilogue) s << glsl_epilogue_functions(node.epilogue);
      s << "void main() {\n";
      s << "  int o = int(gl_GlobalInvocationID.y) * " << row
        << " + int(gl_GlobalInvocationID.x);\n";
      s << "  if (o >= " << n << ") return;\n";
      s << "  float v = 0.0;\n" << body.text() << "  result[o] = v;\n}\n";
    } else {
      s << header << "\n";
      for (size_t i = 0; i < ctx.inputs.size(); ++i)
        s << "@group(0) @binding(" << binding_of(static_cast<int>(i)) << ") var<storage, read> in"
          << i << " : array<f32>;\n";
      s << "@group(0) @binding(2) var<storage, read_write> dst : array<f32>;\n";
      for (size_t i = 0; i < ctx.inputs.size(); ++i)
        s << "fn ld" << i << "(k : i32) -> f32 { return in" << i << "[k]; }\n";
      if (epilogue) s << wgsl_epilogue_functions(node.epilogue);
      s << "@compute @workgroup_size(" << threads << ", 1, 1)\n";
      s << "fn main(@builtin(global_invocation_id) gid : vec3<u32>) {\n";
      s << "  let o : i32 = i32(gid.y) * " << row << " + i32(gid.x);\n";
      s << "  if (o >= " << n << ") { return; }\n";
      s << "  var v : f32 = 0.0;\n" << body.text() << "  dst[o] = v;\n}\n";
    }
  }
  artifact.source = s.str();
  return artifact;
}

}  // namespace webtune::deploy