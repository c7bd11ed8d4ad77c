/// \file glue_bodies_elementwise.cpp
/// GPU op-kernel bodies (glue_code.hpp) of the elementwise operators: the unary maps (Relu,
/// Clip, Sigmoid, HardSigmoid, HardSwish, LeakyRelu, Abs, Neg, Sign, Reciprocal, Floor, Ceil,
/// Round, Exp, Log, Sqrt, Tanh, Erf, Gelu, Softplus, Softsign, Elu, Selu), the broadcasting
/// binary ops (Add, Sub, Mul, Div, Pow; numpy's broadcast), PRelu, and the variadic Max, Min,
/// Sum, Mean. Float32 arithmetic; the reference rounds double results once, so transcendental
/// ops differ by rounding (erf by its approximation's 1.5e-7).
/// Semantics are graph/kernels' (the reference executor), attribute by attribute.
#include <string>
#include <vector>

#include "glue_code.hpp"

namespace webtune::deploy::glue {

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

namespace {

// ---------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------

/// Declares float `out` = erf(`x`): Abramowitz & Stegun 7.1.26 (Handbook of Mathematical
/// Functions, 1964), |error| <= 1.5e-7; neither GLSL ES nor WGSL has erf.
void erf_into(Code& c, const std::string& x, const std::string& out) {
  c.let_float(out + "_x", x);
  c.let_float(out + "_t", "1.0 / (1.0 + 0.3275911 * abs(" + out + "_x))");
  c.let_float(out + "_p", "((((1.061405429 * " + out + "_t - 1.453152027) * " + out +
                              "_t + 1.421413741) * " + out + "_t - 0.284496736) * " + out +
                              "_t + 0.254829592) * " + out + "_t");
  const std::string magnitude = "(1.0 - " + out + "_p * exp(-" + out + "_x * " + out + "_x))";
  if (out == "v")
    c.assign(out, "sign(" + out + "_x) * " + magnitude);
  else
    c.let_float(out, "sign(" + out + "_x) * " + magnitude);
}

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
  } else if (op == "LeakyRelu") {
    c.assign("v", "x");
    c.if_("x < 0.0");
    c.assign("v", Code::lit(ctx.node.get_float("alpha", 0.01f)) + " * x");
    c.close();
  } else if (op == "Abs") {
    c.assign("v", "abs(x)");
  } else if (op == "Neg") {
    c.assign("v", "-x");
  } else if (op == "Sign") {
    c.assign("v", "sign(x)");
  } else if (op == "Reciprocal") {
    c.assign("v", "1.0 / x");
  } else if (op == "Floor") {
    c.assign("v", "floor(x)");
  } else if (op == "Ceil") {
    c.assign("v", "ceil(x)");
  } else if (op == "Round") {
    c.assign("v", c.round_even("x"));
  } else if (op == "Exp") {
    c.assign("v", "exp(x)");
  } else if (op == "Log") {
    c.assign("v", "log(x)");
  } else if (op == "Sqrt") {
    c.assign("v", "sqrt(x)");
  } else if (op == "Tanh") {
    // Some drivers compute tanh as a ratio of exponentials that overflows to NaN beyond |x| ≈ 44;
    // tanh(±10) is ±1 in float32 already.
    c.assign("v", "tanh(clamp(x, -10.0, 10.0))");
  } else if (op == "Erf") {
    erf_into(c, "x", "v");
  } else if (op == "Gelu") {
    const std::string approximate = ctx.node.get_string("approximate", "none");
    if (approximate == "none") {
      erf_into(c, "x * 0.70710678118654752", "e");
      c.assign("v", "0.5 * x * (1.0 + e)");
    } else if (approximate == "tanh") {
      c.assign("v",
               "0.5 * x * (1.0 + tanh(clamp(0.79788456080286536 * (x + 0.044715 * x * x * x), "
               "-10.0, 10.0)))");
    } else {
      ctx.fail("approximate '" + approximate + "' is not \"none\" or \"tanh\"");
    }
  } else if (op == "Softplus") {  // log(1 + e^x) without overflow, as the reference
    c.if_("x > 0.0");
    c.assign("v", "x + log(1.0 + exp(-x))");
    c.otherwise();
    c.assign("v", "log(1.0 + exp(x))");
    c.close();
  } else if (op == "Softsign") {
    c.assign("v", "x / (1.0 + abs(x))");
  } else if (op == "Elu") {
    const double alpha = ctx.node.get_float("alpha", 1.0f);
    c.assign("v", "x");
    c.if_("x < 0.0");
    c.assign("v", Code::lit(alpha) + " * (exp(x) - 1.0)");
    c.close();
  } else if (op == "Selu") {
    const double alpha = ctx.node.get_float("alpha", 1.67326319217681884765625f);
    const double gamma = ctx.node.get_float("gamma", 1.05070102214813232421875f);
    c.assign("v", Code::lit(gamma) + " * x");
    c.if_("x <= 0.0");
    c.assign("v", Code::lit(gamma * alpha) + " * (exp(x) - 1.0)");
    c.close();
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

/// Index expressions of every bound input broadcast to the output (numpy's rule): "o" where an
/// input has the output's elements in its order, else its strides over the decoded output
/// index q0, q1, … (declared once, when first needed).
std::vector<std::string> broadcast_indices(Code& c, const OpContext& ctx) {
  std::vector<std::string> index(ctx.inputs.size());
  bool decoded = false;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const std::vector<int64_t>& shape = ctx.shape_of(i);
    const std::vector<int64_t> strides = broadcast_strides(ctx, shape, ctx.out_shape);
    if (product(shape) == ctx.out_elements) {
      index[i] = "o";  // same elements in the same order (a stretch over 1s changes nothing)
    } else {
      if (!decoded) decode(c, "o", "q", ctx.out_shape);
      decoded = true;
      index[i] = dot("q", strides);
    }
  }
  return index;
}

/// Pow in float32: exact squares, cubes and roots for the constant exponents exporters write
/// (x ** 2, x ** 0.5), else C's pow rules (pow(x, 0) = 1, a negative base only with an
/// integral exponent, pow(0, y < 0) = +inf), which GLSL's and WGSL's pow leave undefined.
void pow_body(Code& c, const OpContext& ctx, const std::vector<std::string>& index) {
  c.let_float("a", ctx.ld(0, index[0]));
  const graph::Tensor& exponent = ctx.graph.tensor(ctx.inputs[1]);
  if (exponent.float_data && exponent.float_data->size() == 1) {
    const float e = exponent.float_data->at(0);
    // The exponent stays bound and read: WebGPU's automatic layouts drop unread bindings, and
    // the runtime binds every input.
    c.let_float("b", ctx.ld(1, "0"));
    if (e == 1.0f) return c.assign("v", "a");
    if (e == 2.0f) return c.assign("v", "a * a");
    if (e == 3.0f) return c.assign("v", "a * a * a");
    if (e == 0.5f) return c.assign("v", "sqrt(a)");
    if (e == -1.0f) return c.assign("v", "1.0 / a");
    if (e == 0.0f) return c.assign("v", "1.0");
  }
  c.let_float("b", ctx.ld(1, index[1]));
  c.if_("b == 0.0");
  c.assign("v", "1.0");
  c.otherwise();
  c.if_("a > 0.0");
  c.assign("v", "pow(a, b)");
  c.otherwise();
  c.if_("a == 0.0");
  c.assign("v", "0.0");
  c.if_("b < 0.0");
  c.assign("v", c.positive_infinity());
  c.close();
  c.otherwise();
  c.if_("b == floor(b)");
  c.assign("v", "pow(-a, b)");
  c.if_("b - 2.0 * floor(b * 0.5) == 1.0");  // an odd exponent keeps the sign
  c.assign("v", "-v");
  c.close();
  c.otherwise();
  c.assign("v", c.nan());
  c.close();
  c.close();
  c.close();
  c.close();
}

void binary_body(Code& c, const OpContext& ctx) {
  const std::string& op = ctx.node.op_type;
  if (ctx.inputs.size() != 2) ctx.fail("needs two inputs");
  const std::vector<std::string> index = broadcast_indices(c, ctx);
  if (op == "Pow") return pow_body(c, ctx, index);
  c.let_float("a", ctx.ld(0, index[0]));
  c.let_float("b", ctx.ld(1, index[1]));
  const char* symbol = op == "Add" ? "+" : op == "Sub" ? "-" : op == "Mul" ? "*" : "/";
  c.assign("v", std::string("a ") + symbol + " b");
}

/// PRelu: the slope broadcasts to X (never the other way).
void prelu_body(Code& c, const OpContext& ctx) {
  if (ctx.inputs.size() != 2) ctx.fail("needs X and slope");
  if (ctx.shape_of(0) != ctx.out_shape)
    ctx.fail("the output " + shape_text(ctx.out_shape) + " is not X's shape " +
             shape_text(ctx.shape_of(0)));
  const std::vector<std::string> index = broadcast_indices(c, ctx);
  c.let_float("x", ctx.ld(0, "o"));
  c.assign("v", "x");
  c.if_("x < 0.0");
  c.assign("v", ctx.ld(1, index[1]) + " * x");
  c.close();
}

/// Max, Min (NaN-propagating, as numpy and the reference), Sum, Mean (summed in float32 in
/// input order, then divided): any number of inputs, broadcast together.
void variadic_body(Code& c, const OpContext& ctx) {
  const std::string& op = ctx.node.op_type;
  if (ctx.inputs.empty()) ctx.fail("needs at least one input");
  if (ctx.inputs.size() != ctx.node.inputs.size()) ctx.fail("has an omitted input");
  const std::vector<std::string> index = broadcast_indices(c, ctx);
  c.assign("v", ctx.ld(0, index[0]));
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const std::string b = "b" + num(static_cast<int64_t>(i));
    c.let_float(b, ctx.ld(static_cast<int>(i), index[i]));
    if (op == "Sum" || op == "Mean") {
      c.assign("v", "v + " + b);
    } else {
      c.if_(c.is_nan("v") + " || " + c.is_nan(b));
      c.assign("v", c.nan());
      c.otherwise();
      c.assign("v", std::string(op == "Max" ? "max" : "min") + "(v, " + b + ")");
      c.close();
    }
  }
  if (op == "Mean") c.assign("v", "v / " + Code::lit(static_cast<double>(ctx.inputs.size())));
}

}  // namespace

std::vector<BodyEntry> elementwise_bodies() {
  std::vector<BodyEntry> entries;
  for (const char* op :
       {"Relu", "Clip",       "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Abs", "Neg",
        "Sign", "Reciprocal", "Floor",   "Ceil",        "Round",     "Exp",       "Log", "Sqrt",
        "Tanh", "Erf",        "Gelu",    "Softplus",    "Softsign",  "Elu",       "Selu"})
    entries.push_back({op, unary_body});
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"}) entries.push_back({op, binary_body});
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) entries.push_back({op, variadic_body});
  entries.push_back({"PRelu", prelu_body});
  return entries;
}

}  // namespace webtune::deploy::glue
