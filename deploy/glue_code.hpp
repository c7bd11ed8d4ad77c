#pragma once
/// \file glue_code.hpp
/// Private to deploy/'s GPU op kernels (glue_kernels.hpp's op_kernel): the vocabulary every
/// operator body is written in. A body turns the flat row-major output index `o` into the
/// value `v`, reading bound input i's element k through `ld<i>(k)`; `Code` spells its
/// declarations, loops, casts and literals in GLSL ES or in WGSL, so one body serves gles-frag,
/// gles-compute and webgpu (glue_ops.cpp writes each target's frame around it). The bodies live
/// in glue_bodies_<family>.cpp, each family listing its bodies for glue_ops.cpp's registry;
/// graph/operators.cpp's table says which operators have one (kRunsOnGpu), and glue_ops.cpp
/// checks that the two agree.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/target.hpp"
#include "deploy/storage.hpp"
#include "graph/graph.hpp"

namespace webtune::deploy::glue {

using deploy::shape_text;
using graph::Graph;
using graph::Node;

inline int64_t product(const std::vector<int64_t>& shape, size_t begin = 0, size_t end = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = begin; i < std::min(end, shape.size()); ++i) n *= shape[i];
  return n;
}

inline std::string num(int64_t value) {
  return std::to_string(value);
}

/// Raised (as std::invalid_argument) with the node named.
struct NodeError {
  const Node& node;
  [[noreturn]] void operator()(const std::string& why) const {
    // An unnamed node is named by its first output, as the planner names steps.
    const std::string name = !node.name.empty() || node.outputs.empty()
                                 ? "'" + node.name + "'"
                                 : "(output '" + node.outputs[0] + "')";
    throw std::invalid_argument("op_kernel: " + node.op_type + " " + name + ": " + why);
  }
};

// ---------------------------------------------------------------------------------------------
// Code: one statement vocabulary, spelled in GLSL ES or WGSL
// ---------------------------------------------------------------------------------------------

enum class Lang { kGlsl, kWgsl };

class Code {
 public:
  explicit Code(Lang lang, int depth = 1) : lang_(lang), depth_(depth) {}

  bool wgsl() const { return lang_ == Lang::kWgsl; }
  void line(const std::string& text) {
    out_ << std::string(static_cast<size_t>(depth_) * 2, ' ') << text << '\n';
  }
  void open(const std::string& head) {
    line(head + " {");
    ++depth_;
  }
  void close() {
    --depth_;
    line("}");
  }
  /// `} else {`
  void otherwise() {
    --depth_;
    line("} else {");
    ++depth_;
  }
  void if_(const std::string& cond) { open("if (" + cond + ")"); }
  /// An immutable int.
  void let_int(const std::string& name, const std::string& expr) {
    line(wgsl() ? "let " + name + " : i32 = " + expr + ";" : "int " + name + " = " + expr + ";");
  }
  void var_int(const std::string& name, const std::string& expr) {
    line(wgsl() ? "var " + name + " : i32 = " + expr + ";" : "int " + name + " = " + expr + ";");
  }
  void let_float(const std::string& name, const std::string& expr) {
    line(wgsl() ? "let " + name + " : f32 = " + expr + ";" : "float " + name + " = " + expr + ";");
  }
  void var_float(const std::string& name, const std::string& expr) {
    line(wgsl() ? "var " + name + " : f32 = " + expr + ";" : "float " + name + " = " + expr + ";");
  }
  void var_bool(const std::string& name, const std::string& expr) {
    line(wgsl() ? "var " + name + " : bool = " + expr + ";" : "bool " + name + " = " + expr + ";");
  }
  void assign(const std::string& name, const std::string& expr) { line(name + " = " + expr + ";"); }
  /// Opens `for (var = 0; var < end; var++)`.
  void for_(const std::string& var, const std::string& end) {
    open(wgsl() ? "for (var " + var + " : i32 = 0; " + var + " < " + end + "; " + var + "++)"
                : "for (int " + var + " = 0; " + var + " < " + end + "; " + var + "++)");
  }
  std::string to_float(const std::string& expr) const {
    return (wgsl() ? "f32(" : "float(") + expr + ")";
  }
  /// A float literal with 9 significant digits (round-trips a float).
  static std::string lit(double value) {
    char text[40];
    std::snprintf(text, sizeof text, "%.8e", value);
    return text;
  }
  /// -infinity (MaxPool's value of a window with no tap inside the input). WGSL refuses a
  /// constant expression that overflows, so it is built from a runtime value (o·0).
  std::string negative_infinity() const {
    return wgsl() ? "bitcast<f32>(0xff800000u + u32(o) * 0u)" : "uintBitsToFloat(0xff800000u)";
  }
  /// +infinity and a quiet NaN, built from a runtime value as negative_infinity().
  std::string positive_infinity() const {
    return wgsl() ? "bitcast<f32>(0x7f800000u + u32(o) * 0u)" : "uintBitsToFloat(0x7f800000u)";
  }
  std::string nan() const {
    return wgsl() ? "bitcast<f32>(0x7fc00000u + u32(o) * 0u)" : "uintBitsToFloat(0x7fc00000u)";
  }
  /// Whether `x` is a NaN, from its bits (WGSL has no isnan, and GLSL compilers may assume no
  /// NaN in x != x).
  std::string is_nan(const std::string& x) const {
    return wgsl() ? "((bitcast<u32>(" + x + ") & 0x7fffffffu) > 0x7f800000u)"
                  : "((floatBitsToUint(" + x + ") & 0x7fffffffu) > 0x7f800000u)";
  }
  /// Round to nearest, ties to even (ONNX Round): GLSL's roundEven, WGSL's round.
  std::string round_even(const std::string& x) const {
    return (wgsl() ? "round(" : "roundEven(") + x + ")";
  }
  /// A table of ints, indexable by a runtime index: `name[i]`. Empty `values` get one 0.
  void int_table(const std::string& name, std::vector<int64_t> values) {
    if (values.empty()) values.push_back(0);
    std::string list;
    for (size_t i = 0; i < values.size(); ++i) list += (i ? ", " : "") + std::to_string(values[i]);
    const std::string n = std::to_string(values.size());
    line(wgsl() ? "var " + name + " : array<i32, " + n + "> = array<i32, " + n + ">(" + list + ");"
                : "const int " + name + "[" + n + "] = int[" + n + "](" + list + ");");
  }
  /// A table of floats (9 significant digits), as int_table.
  void float_table(const std::string& name, std::vector<double> values) {
    if (values.empty()) values.push_back(0.0);
    std::string list;
    for (size_t i = 0; i < values.size(); ++i) list += (i ? ", " : "") + lit(values[i]);
    const std::string n = std::to_string(values.size());
    line(wgsl() ? "var " + name + " : array<f32, " + n + "> = array<f32, " + n + ">(" + list + ");"
                : "const float " + name + "[" + n + "] = float[" + n + "](" + list + ");");
  }
  std::string text() const { return out_.str(); }

 private:
  Lang lang_;
  int depth_;
  std::ostringstream out_;
};

/// Declares `prefix`0 … `prefix`(n−1), the row-major multi-index of `flat` over `dims`.
inline void decode(Code& c, const std::string& flat, const std::string& prefix,
                   const std::vector<int64_t>& dims) {
  const size_t n = dims.size();
  if (n == 0) return;
  std::string rest = flat;
  for (size_t d = n; d-- > 1;) {
    c.let_int(prefix + num(static_cast<int64_t>(d)), rest + " % " + num(dims[d]));
    const std::string next = prefix + "r" + num(static_cast<int64_t>(d));
    c.let_int(next, rest + " / " + num(dims[d]));
    rest = next;
  }
  c.let_int(prefix + "0", rest);
}

/// "i0 * s0 + …" with `strides` (terms with stride 0 left out), or "0".
inline std::string dot(const std::string& prefix, const std::vector<int64_t>& strides) {
  std::string text;
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 0) continue;
    if (!text.empty()) text += " + ";
    text += prefix + num(static_cast<int64_t>(d));
    if (strides[d] != 1) text += " * " + num(strides[d]);
  }
  return text.empty() ? "0" : text;
}

inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// ---------------------------------------------------------------------------------------------
// What a kernel reads and writes
// ---------------------------------------------------------------------------------------------

struct OpContext {
  const Graph& graph;
  const Node& node;
  NodeError fail;
  int64_t opset = 13;
  std::vector<std::string> inputs;  ///< the bound (non-empty) inputs, in node order
  std::vector<int64_t> out_shape;
  int64_t out_elements = 0;

  const std::vector<int64_t>& shape_of(size_t bound) const {
    return graph.tensor(inputs[bound]).shape;
  }
  /// graph/operators.hpp's build_time_inputs of the node's operator: parameters, not bound.
  uint32_t build_time = 0;

  /// Whether node input `i` is bound (present and not a build-time parameter).
  bool is_bound(size_t i) const {
    return i < node.inputs.size() && !node.inputs[i].empty() &&
           (i >= 32 || ((build_time >> i) & 1u) == 0);
  }
  /// The bound-input number of node input `i` (its place in `inputs`), or −1 when it is not
  /// bound.
  int bound_index(size_t i) const {
    if (!is_bound(i)) return -1;
    int k = 0;
    for (size_t j = 0; j < i; ++j) k += is_bound(j) ? 1 : 0;
    return k;
  }
  /// Node input `i` when it is present and a constant (a build-time parameter), else nullptr.
  const graph::Tensor* constant_input(size_t i) const {
    if (i >= node.inputs.size() || node.inputs[i].empty()) return nullptr;
    const graph::Tensor& t = graph.tensor(node.inputs[i]);
    if (!t.is_constant())
      fail("input " + num(static_cast<int64_t>(i)) + " ('" + t.name +
           "') must be a constant: a package reads it at build time");
    return &t;
  }
  /// The integer values of constant input `i` (axes, pads, starts, ...); nullopt when absent.
  std::optional<std::vector<int64_t>> ints_input(size_t i) const {
    const graph::Tensor* t = constant_input(i);
    if (t == nullptr) return std::nullopt;
    if (t->int_data) return *t->int_data;
    fail("input " + num(static_cast<int64_t>(i)) + " ('" + t->name + "') is not an integer tensor");
  }
  /// The float values of constant input `i` (scales, a pad value); nullopt when absent.
  std::optional<std::vector<float>> floats_input(size_t i) const {
    const graph::Tensor* t = constant_input(i);
    if (t == nullptr) return std::nullopt;
    if (t->float_data) return *t->float_data;
    fail("input " + num(static_cast<int64_t>(i)) + " ('" + t->name + "') is not a float tensor");
  }
  std::string ld(int bound, const std::string& index) const {
    return "ld" + num(bound) + "(" + index + ")";
  }
};

inline constexpr int64_t kMaxGroups = 65535;  ///< per dispatch dimension (GL ES 3.1, WebGPU)

/// Storage-buffer binding of bound input `i` (glue_kernels.hpp): 0, 1, then 3, 4, … (the output
/// is binding 2, as the tuned kernels' convention).
inline int binding_of(int i) {
  return i < 2 ? i : i + 1;
}

// ---------------------------------------------------------------------------------------------
// Shared by several families
// ---------------------------------------------------------------------------------------------

/// A window over the node's spatial dimensions (conv_pool.cpp's Geometry, without the padding
/// to three dimensions).
struct Window {
  std::vector<int64_t> in, k, s, d, pb, pe, out;
};

/// The window geometry of a pool (`pool`: ceil_mode read) or a convolution over X's spatial
/// axes: conv_pool.cpp's rule for pads, strides, dilations, ceil_mode and auto_pad. Fails
/// naming the node.
Window pool_geometry(const OpContext& ctx, const std::vector<int64_t>& x_shape,
                     const std::vector<int64_t>& kernel, bool pool);

/// Input position of tap `k` of output position `o` along axis j: "o·s − pb + k·d".
std::string tap(const Window& g, size_t j, const std::string& o, const std::string& k);

/// numpy's broadcast of `shape` to `out`: the input's stride of each output axis, 0 where the
/// input stretches; fails naming the node when it does not broadcast.
std::vector<int64_t> broadcast_strides(const OpContext& ctx, const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& out);

/// `axis` in [−rank, rank) made non-negative; fails naming the node otherwise.
int64_t normalize_axis(const OpContext& ctx, int64_t axis, size_t rank);

// ---------------------------------------------------------------------------------------------
// The bodies, by family
// ---------------------------------------------------------------------------------------------

/// Writes the operator of ctx.node into `c`: assigns `v` for output element `o`.
using Body = void (*)(Code&, const OpContext&);

struct BodyEntry {
  const char* op;
  Body body;
};

std::vector<BodyEntry> pool_bodies();           ///< glue_bodies_pool.cpp
std::vector<BodyEntry> elementwise_bodies();    ///< glue_bodies_elementwise.cpp
std::vector<BodyEntry> normalization_bodies();  ///< glue_bodies_normalization.cpp
std::vector<BodyEntry> layout_bodies();         ///< glue_bodies_layout.cpp
std::vector<BodyEntry> linear_bodies();         ///< glue_bodies_linear.cpp
std::vector<BodyEntry> reduce_bodies();         ///< glue_bodies_reduce.cpp
std::vector<BodyEntry> resize_bodies();         ///< glue_bodies_resize.cpp

/// glue_reduction.cpp: on gles-compute and webgpu, a reduction over large groups
/// (GlobalAveragePool, GlobalMaxPool, Reduce* but LogSumExp, groups of 128 elements or more)
/// as one workgroup per output element. Fills artifact.source, dispatch and workgroup (the
/// caller fills inputs and output as for the element frame) and returns true; false when the
/// node does not qualify (the element frame then runs it). `header` is the source's first
/// comment line.
bool reduction_kernel(Target target, const OpContext& ctx, const DeviceLimits& limits,
                      const std::string& header, KernelArtifact& artifact);

}  // namespace webtune::deploy::glue
