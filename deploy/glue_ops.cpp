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
/// operator's body is written once, through `Code`, which spells declarations, loops, casts and
/// literals in GLSL or in WGSL; only the frame (declarations, `ld<i>`, the index and the store)
/// differs per target. Glue kernels are a small share of a model's time, so they favour one
/// simple shape over speed: e.g. Softmax recomputes its row's maximum and sum in every
/// element's invocation (L² work for rows of length L, 10^6 for a 1000-class classifier).
///
/// On gles-frag the inputs may also be read in place from any frag storage and the output
/// written in any TensorLayout (OpKernelOptions::input_storage / output_layout): `ld<i>` is
/// then glue_frag's reader of that storage, and the body becomes `float op_value(int o)`,
/// called by glue_frag's writer for each element a destination texel holds (so an RGBA output
/// runs the operator four times per fragment).
///
/// The semantics are graph/kernels' (the reference executor), attribute by attribute; the
/// pools' window geometry (pads, strides, dilations, ceil_mode, auto_pad, count_include_pad)
/// is conv_pool.cpp's rule, repeated in pool_geometry below.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/epilogue.hpp"
#include "deploy/glue_kernels.hpp"
#include "glue_frag.hpp"

namespace webtune::deploy {
namespace {

using graph::Graph;
using graph::Node;

int64_t product(const std::vector<int64_t>& shape, size_t begin = 0, size_t end = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = begin; i < std::min(end, shape.size()); ++i) n *= shape[i];
  return n;
}

std::string num(int64_t value) {
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
  std::string text() const { return out_.str(); }

 private:
  Lang lang_;
  int depth_;
  std::ostringstream out_;
};

/// Declares `prefix`0 … `prefix`(n−1), the row-major multi-index of `flat` over `dims`.
void decode(Code& c, const std::string& flat, const std::string& prefix,
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
std::string dot(const std::string& prefix, const std::vector<int64_t>& strides) {
  std::string text;
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 0) continue;
    if (!text.empty()) text += " + ";
    text += prefix + num(static_cast<int64_t>(d));
    if (strides[d] != 1) text += " * " + num(strides[d]);
  }
  return text.empty() ? "0" : text;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
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
  /// The bound-input number of node input `i`, or −1 when it is omitted or absent.
  int bound_index(size_t i) const {
    if (i >= node.inputs.size() || node.inputs[i].empty()) return -1;
    int k = 0;
    for (size_t j = 0; j < i; ++j) k += node.inputs[j].empty() ? 0 : 1;
    return k;
  }
  std::string ld(int bound, const std::string& index) const {
    return "ld" + num(bound) + "(" + index + ")";
  }
};

// ---------------------------------------------------------------------------------------------
// Pools
// ---------------------------------------------------------------------------------------------

/// A window over the node's spatial dimensions (conv_pool.cpp's Geometry, without the padding
/// to three dimensions).
struct Window {
  std::vector<int64_t> in, k, s, d, pb, pe, out;
};

Window pool_geometry(const OpContext& ctx, const std::vector<int64_t>& x_shape,
                     const std::vector<int64_t>& kernel, bool pool) {
  const Node& node = ctx.node;
  const size_t r = x_shape.size() - 2;
  if (kernel.size() != r)
    ctx.fail("kernel_shape " + shape_text(kernel) + " does not match the input's " + num(r) +
             " spatial dimensions");
  auto ints = [&](const char* key, size_t size, int64_t fill) {
    std::vector<int64_t> v = node.get_ints(key, std::vector<int64_t>(size, fill));
    if (v.size() != size)
      ctx.fail(std::string("attribute '") + key + "' " + shape_text(v) + " needs " + num(size) +
               " values");
    return v;
  };
  const auto strides = ints("strides", r, 1);
  const auto dilations = ints("dilations", r, 1);
  const auto pads = ints("pads", 2 * r, 0);
  const std::string auto_pad = node.get_string("auto_pad", "NOTSET");
  const int64_t ceil_mode = pool ? node.get_int("ceil_mode", 0) : 0;
  if (ceil_mode != 0 && ceil_mode != 1) ctx.fail("ceil_mode " + num(ceil_mode) + " is not 0 or 1");
  Window g;
  for (size_t j = 0; j < r; ++j) {
    const int64_t in = x_shape[2 + j], k = kernel[j], s = strides[j], d = dilations[j];
    if (k < 1 || s < 1 || d < 1) ctx.fail("kernel, strides and dilations must be positive");
    const int64_t eff = (k - 1) * d + 1;
    int64_t pb = 0, pe = 0, out = 0;
    if (auto_pad == "NOTSET") {
      pb = pads[j];
      pe = pads[j + r];
      if (pb < 0 || pe < 0) ctx.fail("pads " + shape_text(pads) + " has a negative value");
      const int64_t span = in + pb + pe - eff;
      if (span < 0) ctx.fail("the window is larger than the padded input");
      if (ceil_mode) {
        out = (span + s - 1) / s + 1;
        if ((out - 1) * s >= in + pb) --out;
      } else {
        out = span / s + 1;
      }
    } else if (auto_pad == "VALID") {
      if (in < eff) ctx.fail("the window is larger than the input with auto_pad VALID");
      out = (in - eff) / s + 1;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in);
      const int64_t small = total / 2;
      pb = auto_pad == "SAME_UPPER" ? small : total - small;
      pe = total - pb;
    } else {
      ctx.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    }
    g.in.push_back(in);
    g.k.push_back(k);
    g.s.push_back(s);
    g.d.push_back(d);
    g.pb.push_back(pb);
    g.pe.push_back(pe);
    g.out.push_back(out);
  }
  return g;
}

/// Input position of tap `k` of output position `o` along axis j: "o·s − pb + k·d".
std::string tap(const Window& g, size_t j, const std::string& o, const std::string& k) {
  std::string text = g.s[j] == 1 ? o : o + " * " + num(g.s[j]);
  if (g.pb[j] != 0) text += " - " + num(g.pb[j]);
  text += " + " + (g.d[j] == 1 ? k : k + " * " + num(g.d[j]));
  return text;
}

void pool_body(Code& c, const OpContext& ctx, bool max) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.size() < 3 || x.size() > 5)
    ctx.fail("X has shape " + shape_text(x) + "; a pool needs [N, C, spatial...] of 1 to 3 dims");
  if (!node.has("kernel_shape")) ctx.fail("needs the attribute kernel_shape");
  if (max && node.outputs.size() > 1 && !node.outputs[1].empty())
    ctx.fail("the Indices output is not computed by the glue kernel");
  const int64_t include_pad = max ? 0 : node.get_int("count_include_pad", 0);
  if (include_pad != 0 && include_pad != 1)
    ctx.fail("count_include_pad " + num(include_pad) + " is not 0 or 1");
  const Window g = pool_geometry(ctx, x, node.get_ints("kernel_shape", {}), true);
  std::vector<int64_t> expected = {x[0], x[1]};
  expected.insert(expected.end(), g.out.begin(), g.out.end());
  if (expected != ctx.out_shape)
    ctx.fail("the graph's output shape " + shape_text(ctx.out_shape) + " differs from the " +
             shape_text(expected) + " of the window");
  const size_t r = g.in.size();
  const int64_t out_size = product(g.out), in_size = product(g.in);
  c.let_int("p", "o / " + num(out_size));
  c.let_int("rest", "o - p * " + num(out_size));
  decode(c, "rest", "q", g.out);
  if (max) {
    c.var_float("best", "0.0");
    c.var_bool("found", "false");
  } else {
    c.var_float("sum", "0.0");
    c.var_int("count", "0");
  }
  // Nested loops over the taps; an axis's tap is skipped when outside the input (max, and the
  // average's sum) or outside the counted range (the average's divisor, conv_pool.cpp).
  std::string in_range;
  for (size_t j = 0; j < r; ++j) {
    const std::string kj = "k" + num(static_cast<int64_t>(j)),
                      ij = "i" + num(static_cast<int64_t>(j));
    c.for_(kj, num(g.k[j]));
    c.let_int(ij, tap(g, j, "q" + num(static_cast<int64_t>(j)), kj));
    const std::string inside = ij + " >= 0 && " + ij + " < " + num(g.in[j]);
    if (max || !include_pad) {
      c.if_(inside);
    } else {
      c.if_(ij + " >= " + num(-g.pb[j]) + " && " + ij + " < " + num(g.in[j] + g.pe[j]));
      in_range += (in_range.empty() ? "" : " && ") + inside;
    }
  }
  std::vector<int64_t> in_strides = row_major_strides(g.in);
  const std::string index = "p * " + num(in_size) + " + " + dot("i", in_strides);
  if (max) {
    c.let_float("x", ctx.ld(0, index));
    c.if_("!found || x > best");  // the first maximum wins, as in the reference
    c.assign("best", "x");
    c.assign("found", "true");
    c.close();
  } else {
    c.assign("count", "count + 1");
    if (!in_range.empty()) c.if_(in_range);
    c.assign("sum", "sum + " + ctx.ld(0, index));
    if (!in_range.empty()) c.close();
  }
  for (size_t j = 0; j < r; ++j) {
    c.close();  // if
    c.close();  // for
  }
  if (max) {
    c.if_("found");
    c.assign("v", "best");
    c.otherwise();
    c.assign("v", c.negative_infinity());
    c.close();
  } else {
    c.if_("count > 0");
    c.assign("v", "sum / " + c.to_float("count"));
    c.close();
  }
}

void global_average_pool_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.size() < 3) ctx.fail("X has shape " + shape_text(x) + "; it needs [N, C, spatial...]");
  const int64_t size = product(x, 2);
  c.var_float("sum", "0.0");
  c.let_int("base", "o * " + num(size));
  c.for_("i", num(size));
  c.assign("sum", "sum + " + ctx.ld(0, "base + i"));
  c.close();
  c.assign("v", "sum / " + Code::lit(static_cast<double>(size)));
}

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

void unary_body(Code& c, const OpContext& ctx) {
  const std::string& op = ctx.node.op_type;
  c.let_float("x", ctx.ld(0, "o"));
  if (op == "Relu") {
    c.if_("x > 0.0");
    c.assign("v", "x");
    c.close();
  } else if (op == "Sigmoid") {
    c.assign("v", "1.0 / (1.0 + exp(-x))");
  } else if (op == "HardSigmoid") {
    const float alpha = ctx.node.get_float("alpha", 0.2f), beta = ctx.node.get_float("beta", 0.5f);
    c.assign("v", "max(0.0, min(1.0, " + Code::lit(alpha) + " * x + " + Code::lit(beta) + "))");
  } else if (op == "HardSwish") {
    c.assign("v", "x * max(0.0, min(1.0, x / 6.0 + 0.5))");
  } else if (op == "Clip") {
    const Node& node = ctx.node;
    const bool by_attribute = node.has("min") || node.has("max");
    if (by_attribute && node.inputs.size() > 1)
      ctx.fail("has both min/max attributes (opset < 11) and bound inputs (opset >= 11)");
    c.assign("v", "x");
    // numpy.clip's order, as the reference: max with the lower bound, then min with the upper.
    if (by_attribute) {
      if (node.has("min")) c.assign("v", "max(v, " + Code::lit(node.get_float("min", 0)) + ")");
      if (node.has("max")) c.assign("v", "min(v, " + Code::lit(node.get_float("max", 0)) + ")");
    }
    for (size_t i = 1; i <= 2; ++i) {
      const int b = ctx.bound_index(i);
      if (b < 0) continue;
      if (product(ctx.shape_of(static_cast<size_t>(b))) != 1)
        ctx.fail(std::string("the ") + (i == 1 ? "min" : "max") + " bound is not a scalar");
      c.assign("v", std::string(i == 1 ? "max" : "min") + "(v, " + ctx.ld(b, "0") + ")");
    }
  }
}

/// numpy's broadcast of `shape` to `out`: the input's stride of each output axis, 0 where the
/// input stretches; throws naming the node when it does not broadcast.
std::vector<int64_t> broadcast_strides(const OpContext& ctx, const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& out) {
  if (shape.size() > out.size())
    ctx.fail("input shape " + shape_text(shape) + " has a higher rank than the output " +
             shape_text(out));
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    const size_t o = i + out.size() - shape.size();
    if (shape[i] != 1 && shape[i] != out[o])
      ctx.fail("input shape " + shape_text(shape) + " does not broadcast to " + shape_text(out));
    strides[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

void binary_body(Code& c, const OpContext& ctx) {
  const std::string& op = ctx.node.op_type;
  if (ctx.inputs.size() != 2) ctx.fail("needs two inputs");
  const std::vector<int64_t>& out = ctx.out_shape;
  std::string index[2];
  bool decoded = false;
  for (int i = 0; i < 2; ++i) {
    const std::vector<int64_t>& shape = ctx.shape_of(static_cast<size_t>(i));
    const std::vector<int64_t> strides = broadcast_strides(ctx, shape, out);
    if (product(shape) == ctx.out_elements) {
      index[i] = "o";  // same elements in the same order (a stretch over 1s changes nothing)
    } else {
      if (!decoded) decode(c, "o", "q", out);
      decoded = true;
      index[i] = dot("q", strides);
    }
  }
  c.let_float("a", ctx.ld(0, index[0]));
  c.let_float("b", ctx.ld(1, index[1]));
  const char* symbol = op == "Add" ? "+" : op == "Sub" ? "-" : op == "Mul" ? "*" : "/";
  c.assign("v", std::string("a ") + symbol + " b");
}

void batch_normalization_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  if (node.get_int("training_mode", 0) != 0) ctx.fail("training_mode 1 is not supported");
  if (node.get_int("spatial", 1) != 1) ctx.fail("spatial 0 is not supported");
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (!node.outputs[o].empty()) ctx.fail("training statistics outputs are not computed");
  if (ctx.inputs.size() != 5) ctx.fail("needs X, scale, B, input_mean and input_var");
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.size() < 2) ctx.fail("X has shape " + shape_text(x) + "; it needs [N, C, ...]");
  for (size_t i = 1; i < 5; ++i)
    if (ctx.shape_of(i) != std::vector<int64_t>{x[1]})
      ctx.fail("parameter " + num(static_cast<int64_t>(i)) + " is not [C]");
  const int64_t size = product(x, 2);
  const double epsilon = node.get_float("epsilon", 1e-5f);
  c.let_int("ch", "(o / " + num(size) + ") % " + num(x[1]));
  c.let_float("scale",
              ctx.ld(1, "ch") + " / sqrt(" + ctx.ld(4, "ch") + " + " + Code::lit(epsilon) + ")");
  c.let_float("shift", ctx.ld(2, "ch") + " - " + ctx.ld(3, "ch") + " * scale");
  c.assign("v", ctx.ld(0, "o") + " * scale + shift");
}

// ---------------------------------------------------------------------------------------------
// Softmax, Concat, Transpose
// ---------------------------------------------------------------------------------------------

int64_t normalize_axis(const OpContext& ctx, int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) ctx.fail("axis " + num(axis) + " is outside the rank " + num(r));
  return axis < 0 ? axis + r : axis;
}

void softmax_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const bool coerce_2d = ctx.opset < 13;
  const auto axis = static_cast<size_t>(
      normalize_axis(ctx, ctx.node.get_int("axis", coerce_2d ? 1 : -1), x.size()));
  const int64_t length = coerce_2d ? product(x, axis) : x[axis];
  const int64_t inner = coerce_2d ? 1 : product(x, axis + 1);
  c.let_int("outer", "o / " + num(length * inner));
  c.let_int("inner", "o % " + num(inner));
  c.let_int("base", "outer * " + num(length * inner) + " + inner");
  const std::string at = inner == 1 ? "base + l" : "base + l * " + num(inner);
  // Subtract the row's maximum first so that exp does not overflow (as the reference).
  c.var_float("m", ctx.ld(0, "base"));
  c.for_("l", num(length));
  c.assign("m", "max(m, " + ctx.ld(0, at) + ")");
  c.close();
  c.var_float("sum", "0.0");
  c.for_("l", num(length));
  c.assign("sum", "sum + exp(" + ctx.ld(0, at) + " - m)");
  c.close();
  c.assign("v", "exp(" + ctx.ld(0, "o") + " - m) / sum");
}

void concat_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  if (!node.has("axis")) ctx.fail("needs the attribute axis");
  if (ctx.inputs.size() != node.inputs.size()) ctx.fail("has an omitted input");
  const std::vector<int64_t>& out = ctx.out_shape;
  const auto axis = static_cast<size_t>(normalize_axis(ctx, node.get_int("axis", 0), out.size()));
  const int64_t inner = product(out, axis + 1);
  int64_t total = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const std::vector<int64_t>& s = ctx.shape_of(i);
    bool fits = s.size() == out.size();
    for (size_t d = 0; fits && d < s.size(); ++d) fits = d == axis || s[d] == out[d];
    if (!fits)
      ctx.fail("input " + num(static_cast<int64_t>(i)) + " " + shape_text(s) +
               " does not concatenate into " + shape_text(out));
    total += s[axis];
  }
  if (total != out[axis]) ctx.fail("the inputs' sizes along the axis do not add up");
  c.let_int("outer", "o / " + num(out[axis] * inner));
  c.let_int("a", "(o / " + num(inner) + ") % " + num(out[axis]));
  c.let_int("inner", "o % " + num(inner));
  int64_t start = 0;
  const size_t n = ctx.inputs.size();
  for (size_t i = 0; i < n; ++i) {
    const int64_t size = ctx.shape_of(i)[axis];
    const std::string index =
        "(outer * " + num(size) + " + a - " + num(start) + ") * " + num(inner) + " + inner";
    if (i + 1 < n) {
      c.if_("a < " + num(start + size));
      c.assign("v", ctx.ld(static_cast<int>(i), index));
      c.otherwise();
    } else {
      c.assign("v", ctx.ld(static_cast<int>(i), index));
    }
    start += size;
  }
  for (size_t i = 0; i + 1 < n; ++i) c.close();
}

void transpose_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const size_t rank = x.size();
  std::vector<int64_t> reverse(rank);
  for (size_t i = 0; i < rank; ++i) reverse[i] = static_cast<int64_t>(rank - 1 - i);
  const std::vector<int64_t> perm = ctx.node.get_ints("perm", reverse);
  std::vector<int64_t> sorted = perm, iota(rank);
  std::sort(sorted.begin(), sorted.end());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) ctx.fail("perm " + shape_text(perm) + " is not a permutation");
  const std::vector<int64_t> in_strides = row_major_strides(x);
  std::vector<int64_t> strides(rank);
  for (size_t i = 0; i < rank; ++i) strides[i] = in_strides[static_cast<size_t>(perm[i])];
  decode(c, "o", "q", ctx.out_shape);
  c.assign("v", ctx.ld(0, dot("q", strides)));
}

/// Reshape, Flatten, Identity, Dropout (inference): row-major order is unchanged, so the output is
/// a copy of the data input. The planner normally aliases them (docs/package.md); the copy is
/// for where it cannot (e.g. a graph output that must have storage of its own).
void copy_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  if (product(ctx.shape_of(0)) != ctx.out_elements)
    ctx.fail("the input " + shape_text(ctx.shape_of(0)) + " and the output " +
             shape_text(ctx.out_shape) + " differ in size");
  if (node.op_type == "Dropout") {
    if (node.outputs.size() > 1 && !node.outputs[1].empty())
      ctx.fail("the mask output is not computed (inference only)");
    if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
      const graph::Tensor& mode = ctx.graph.tensor(node.inputs[2]);
      const bool off =
          (mode.int_data && mode.int_data->size() == 1 && mode.int_data->at(0) == 0) ||
          (mode.float_data && mode.float_data->size() == 1 && mode.float_data->at(0) == 0.0f);
      if (!off) ctx.fail("training_mode is not a constant false (inference only)");
    }
  }
  c.assign("v", ctx.ld(0, "o"));
}

// ---------------------------------------------------------------------------------------------
// Naive Conv / Gemm / MatMul (for nodes no tuned workload fits)
// ---------------------------------------------------------------------------------------------

/// Applies the node's epilogue (fused nodes) or Conv's / Gemm's own bias to the accumulator
/// `acc`; `channel` is the output channel's index expression. Fused: webtune_epilogue(acc,
/// bias[channel], residual[o]) from codegen/epilogue.hpp's functions.
void epilogue_store(Code& c, const OpContext& ctx, size_t bias_input, const std::string& channel,
                    bool fused) {
  if (fused && !ctx.node.epilogue.empty()) {
    const Epilogue& e = ctx.node.epilogue;
    std::string bias = "0.0", residual = "0.0";
    int next = static_cast<int>(bias_input);
    if (e.bias) bias = ctx.ld(next++, channel);
    if (e.residual != Residual::kNone) residual = ctx.ld(next, "o");
    c.assign("v", "webtune_epilogue(acc, " + bias + ", " + residual + ")");
    return;
  }
  c.assign("v", "acc");
  if (static_cast<int>(ctx.inputs.size()) > static_cast<int>(bias_input))
    c.assign("v", "v + " + ctx.ld(static_cast<int>(bias_input), channel));
}

void conv_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedConv";
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const std::vector<int64_t>& w = ctx.shape_of(1);
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    ctx.fail("X " + shape_text(x) + " and W " + shape_text(w) + " must be [N, C, spatial...]");
  const int64_t group = node.get_int("group", 1);
  if (group < 1 || x[1] % group != 0 || w[0] % group != 0 || w[1] * group != x[1])
    ctx.fail("group " + num(group) + " does not fit X and W");
  if (fused) {
    node.epilogue.validate();
    if (ctx.inputs.size() != 2 + static_cast<size_t>(node.epilogue.extra_inputs()))
      ctx.fail("the epilogue's inputs do not match");
  }
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  const Window g = pool_geometry(ctx, x, kernel, false);
  const size_t r = g.in.size();
  const int64_t cg = x[1] / group, mg = w[0] / group;
  const int64_t out_size = product(g.out), in_size = product(g.in), taps = product(kernel);
  std::vector<int64_t> expected = {x[0], w[0]};
  expected.insert(expected.end(), g.out.begin(), g.out.end());
  if (expected != ctx.out_shape) ctx.fail("the graph's output shape differs from the window's");
  c.let_int("plane", "o / " + num(out_size));
  c.let_int("rest", "o - plane * " + num(out_size));
  c.let_int("n", "plane / " + num(w[0]));
  c.let_int("m", "plane % " + num(w[0]));
  c.let_int("c0", "(m / " + num(mg) + ") * " + num(cg));
  decode(c, "rest", "q", g.out);
  c.var_float("acc", "0.0");
  c.for_("ci", num(cg));
  c.let_int("xbase", "(n * " + num(x[1]) + " + c0 + ci) * " + num(in_size));
  c.let_int("wbase", "(m * " + num(cg) + " + ci) * " + num(taps));
  for (size_t j = 0; j < r; ++j) {
    const std::string kj = "k" + num(static_cast<int64_t>(j)),
                      ij = "i" + num(static_cast<int64_t>(j));
    c.for_(kj, num(g.k[j]));
    c.let_int(ij, tap(g, j, "q" + num(static_cast<int64_t>(j)), kj));
    c.if_(ij + " >= 0 && " + ij + " < " + num(g.in[j]));
  }
  c.assign("acc", "acc + " + ctx.ld(0, "xbase + " + dot("i", row_major_strides(g.in))) + " * " +
                      ctx.ld(1, "wbase + " + dot("k", row_major_strides(kernel))));
  for (size_t j = 0; j < r; ++j) {
    c.close();
    c.close();
  }
  c.close();
  epilogue_store(c, ctx, 2, "m", fused);
}

/// Gemm (transA, transB, alpha, beta, C broadcast) and FusedGemm: Y[M, N].
void gemm_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedGemm";
  const std::vector<int64_t>& a = ctx.shape_of(0);
  const std::vector<int64_t>& b = ctx.shape_of(1);
  if (a.size() != 2 || b.size() != 2) ctx.fail("A and B must be 2-D");
  const bool ta = node.get_int("transA", 0) != 0, tb = node.get_int("transB", 0) != 0;
  const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  const int64_t n = tb ? b[0] : b[1];
  if ((tb ? b[1] : b[0]) != k) ctx.fail("A and B do not multiply");
  if (ctx.out_shape != std::vector<int64_t>{m, n}) ctx.fail("the output is not [M, N]");
  if (fused) {
    node.epilogue.validate();
    if (ctx.inputs.size() != 2 + static_cast<size_t>(node.epilogue.extra_inputs()))
      ctx.fail("the epilogue's inputs do not match");
  }
  c.let_int("row", "o / " + num(n));
  c.let_int("col", "o % " + num(n));
  c.var_float("acc", "0.0");
  c.for_("kk", num(k));
  const std::string ai = ta ? "kk * " + num(m) + " + row" : "row * " + num(k) + " + kk";
  const std::string bi = tb ? "col * " + num(k) + " + kk" : "kk * " + num(n) + " + col";
  c.assign("acc", "acc + " + ctx.ld(0, ai) + " * " + ctx.ld(1, bi));
  c.close();
  if (fused) {
    epilogue_store(c, ctx, 2, "col", true);
    return;
  }
  const double alpha = node.get_float("alpha", 1.0f), beta = node.get_float("beta", 1.0f);
  c.assign("v", Code::lit(alpha) + " * acc");
  if (ctx.inputs.size() > 2) {
    const std::vector<int64_t> strides = broadcast_strides(ctx, ctx.shape_of(2), {m, n});
    std::string index;
    if (strides[0]) index = "row" + (strides[0] == 1 ? "" : " * " + num(strides[0]));
    if (strides[1]) index += (index.empty() ? "" : " + ") + std::string("col");
    c.assign("v", "v + " + Code::lit(beta) + " * " + ctx.ld(2, index.empty() ? "0" : index));
  }
}

/// MatMul / FusedMatMul with numpy's batch broadcasting over the leading axes.
void matmul_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedMatMul";
  std::vector<int64_t> a = ctx.shape_of(0), b = ctx.shape_of(1);
  if (a.empty() || b.empty()) ctx.fail("A and B must not be scalars");
  // 1-D operands: A [K] is [1, K], B [K] is [K, 1]; their axes are dropped from the output.
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k) ctx.fail("A and B do not multiply");
  const size_t batch_rank = std::max(a.size(), b.size()) - 2;
  std::vector<int64_t> batch(batch_rank, 1);
  for (size_t i = 0; i < batch_rank; ++i) {
    const size_t ia = i + (a.size() - 2) - batch_rank, ib = i + (b.size() - 2) - batch_rank;
    const int64_t da = i + a.size() - 2 >= batch_rank ? a[ia] : 1;
    const int64_t db = i + b.size() - 2 >= batch_rank ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) ctx.fail("batch axes do not broadcast");
    batch[i] = da == 1 ? db : da;
  }
  if (product(batch) * m * n != ctx.out_elements) ctx.fail("the output size does not match");
  if (fused) {
    node.epilogue.validate();
    if (ctx.inputs.size() != 2 + static_cast<size_t>(node.epilogue.extra_inputs()))
      ctx.fail("the epilogue's inputs do not match");
  }
  const std::vector<int64_t> a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  const std::vector<int64_t> sa = broadcast_strides(ctx, a_batch, batch);
  const std::vector<int64_t> sb = broadcast_strides(ctx, b_batch, batch);
  c.let_int("bi", "o / " + num(m * n));
  c.let_int("row", "(o / " + num(n) + ") % " + num(m));
  c.let_int("col", "o % " + num(n));
  decode(c, "bi", "q", batch);
  std::vector<int64_t> sa_scaled = sa, sb_scaled = sb;
  for (auto& s : sa_scaled) s *= m * k;
  for (auto& s : sb_scaled) s *= k * n;
  c.let_int("abase", dot("q", sa_scaled));
  c.let_int("bbase", dot("q", sb_scaled));
  c.var_float("acc", "0.0");
  c.for_("kk", num(k));
  c.assign("acc", "acc + " + ctx.ld(0, "abase + row * " + num(k) + " + kk") + " * " +
                      ctx.ld(1, "bbase + kk * " + num(n) + " + col"));
  c.close();
  if (fused)
    epilogue_store(c, ctx, 2, "col", true);
  else
    c.assign("v", "acc");
}

// ---------------------------------------------------------------------------------------------
// The operator table and the per-target frame
// ---------------------------------------------------------------------------------------------

using Body = void (*)(Code&, const OpContext&);

void max_pool_body(Code& c, const OpContext& ctx) {
  pool_body(c, ctx, true);
}
void average_pool_body(Code& c, const OpContext& ctx) {
  pool_body(c, ctx, false);
}

struct OpEntry {
  const char* op;
  Body body;
};

constexpr OpEntry kOps[] = {
    {"MaxPool", max_pool_body},
    {"AveragePool", average_pool_body},
    {"GlobalAveragePool", global_average_pool_body},
    {"Relu", unary_body},
    {"Clip", unary_body},
    {"Sigmoid", unary_body},
    {"HardSigmoid", unary_body},
    {"HardSwish", unary_body},
    {"Add", binary_body},
    {"Sub", binary_body},
    {"Mul", binary_body},
    {"Div", binary_body},
    {"Concat", concat_body},
    {"Softmax", softmax_body},
    {"Transpose", transpose_body},
    {"BatchNormalization", batch_normalization_body},
    {"Conv", conv_body},
    {"FusedConv", conv_body},
    {"Gemm", gemm_body},
    {"FusedGemm", gemm_body},
    {"MatMul", matmul_body},
    {"FusedMatMul", matmul_body},
    {"Reshape", copy_body},
    {"Flatten", copy_body},
    {"Identity", copy_body},
    {"Dropout", copy_body},
};

/// Operators whose only tensor input is the data (the others are shapes, ratios, modes).
bool reads_data_only(const std::string& op_type) {
  return op_type == "Reshape" || op_type == "Flatten" || op_type == "Identity" ||
         op_type == "Dropout";
}

const OpEntry* find_op(const std::string& op_type) {
  for (const OpEntry& e : kOps)
    if (op_type == e.op) return &e;
  return nullptr;
}

bool is_fused(const std::string& op_type) {
  return op_type == "FusedConv" || op_type == "FusedGemm" || op_type == "FusedMatMul";
}

constexpr int64_t kMaxGroups = 65535;  // per dispatch dimension (GL ES 3.1 and WebGPU minimum)

/// Storage-buffer binding of bound input `i` (glue_kernels.hpp): 0, 1, then 3, 4, … (the output
/// is binding 2, as the tuned kernels' convention).
int binding_of(int i) {
  return i < 2 ? i : i + 1;
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
  return find_op(op_type) != nullptr;
}

std::vector<std::string> op_kernel_inputs(const graph::Node& node) {
  if (reads_data_only(node.op_type))
    return node.inputs.empty() ? std::vector<std::string>{}
                               : std::vector<std::string>{node.inputs[0]};
  std::vector<std::string> inputs;
  for (const std::string& name : node.inputs)
    if (!name.empty()) inputs.push_back(name);
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
  const OpEntry* entry = find_op(node.op_type);
  if (entry == nullptr) fail("no glue kernel for this operator");
  if (node.outputs.empty() || node.outputs[0].empty()) fail("has no output");
  if (!node.epilogue.empty() && !is_fused(node.op_type))
    fail("an unfused operator carries an epilogue");

  OpContext ctx{graph, node, fail, options.opset, op_kernel_inputs(node), {}, 0};
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
  entry->body(body, ctx);

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
