/// \file activations.cpp
/// Reference kernels that map each float32 value by itself, and PRelu:
///  - in float32 (as ONNX's numpy reference): Relu (6+), HardSigmoid (6+, `alpha` 0.2, `beta`
///    0.5), HardSwish (14+), LeakyRelu (6+, `alpha` 0.01), Reciprocal (6+), Floor, Ceil (6+),
///    Round (11+, half to even), Clip (6+: `min` / `max` attributes before opset 11, optional
///    inputs from 11 on), PRelu (7+, the slope broadcast to X);
///  - in double, rounded once: Sigmoid, Tanh, Exp, Log, Sqrt (6+), Erf (9+), Softplus (1+),
///    Softsign (1+), Elu (6+, `alpha` 1), Selu (6+, `alpha` 1.67326…, `gamma` 1.05070…),
///    Gelu (20, `approximate` "none" / "tanh"; the importer reads opset 17 at most, so it comes
///    from webtune's own graphs).

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace webtune::graph::kernels {
namespace {

/// The single value of a Clip bound input (a scalar or one-element tensor).
float scalar_bound(const Value& v, const char* what) {
  if (!v.is_float() || v.data.size() != 1)
    fail(std::string("Clip's ") + what + " must be a float32 scalar, not " +
         std::string(data_type_name(v.type)) + " " + shape_text(v.shape));
  return v.data[0];
}

template <typename F>
void map_float(const Value& x, Value& y, F f) {
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (size_t i = 0; i < x.data.size(); ++i) y.data[i] = f(x.data[i]);
}

/// f evaluated in double on each value, rounded once to float32.
template <typename F>
void map_double(const Value& x, Value& y, F f) {
  map_float(x, y, [&](float v) { return static_cast<float>(f(static_cast<double>(v))); });
}

}  // namespace

void unary(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = ctx.float_input(0, "X");
  Value& y = ctx.outputs[0];
  const std::string& op = node.op_type;
  if (op == "Relu") {
    map_float(x, y, [](float v) { return v > 0.0f ? v : 0.0f; });
  } else if (op == "Sigmoid") {
    map_double(x, y, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  } else if (op == "HardSigmoid") {
    const float alpha = node.get_float("alpha", 0.2f), beta = node.get_float("beta", 0.5f);
    map_float(x, y, [=](float v) { return std::max(0.0f, std::min(1.0f, alpha * v + beta)); });
  } else if (op == "HardSwish") {  // x · HardSigmoid(x) with alpha = 1/6, beta = 0.5
    map_float(x, y, [](float v) { return v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f)); });
  } else if (op == "LeakyRelu") {
    const float alpha = node.get_float("alpha", 0.01f);
    map_float(x, y, [=](float v) { return v < 0.0f ? alpha * v : v; });
  } else if (op == "Reciprocal") {
    map_float(x, y, [](float v) { return 1.0f / v; });
  } else if (op == "Floor") {
    map_float(x, y, [](float v) { return std::floor(v); });
  } else if (op == "Ceil") {
    map_float(x, y, [](float v) { return std::ceil(v); });
  } else if (op == "Round") {
    map_float(x, y, [](float v) { return std::nearbyint(v); });  // to nearest, ties to even
  } else if (op == "Tanh") {
    map_double(x, y, [](double v) { return std::tanh(v); });
  } else if (op == "Exp") {
    map_double(x, y, [](double v) { return std::exp(v); });
  } else if (op == "Log") {
    map_double(x, y, [](double v) { return std::log(v); });
  } else if (op == "Sqrt") {
    map_double(x, y, [](double v) { return std::sqrt(v); });
  } else if (op == "Erf") {
    map_double(x, y, [](double v) { return std::erf(v); });
  } else if (op == "Softplus") {  // log(1 + e^x), without overflow
    map_double(x, y, [](double v) {
      return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
    });
  } else if (op == "Softsign") {
    map_double(x, y, [](double v) { return v / (1.0 + std::fabs(v)); });
  } else if (op == "Elu") {
    const double alpha = node.get_float("alpha", 1.0f);
    map_double(x, y, [=](double v) { return v < 0 ? alpha * std::expm1(v) : v; });
  } else if (op == "Selu") {
    const double alpha = node.get_float("alpha", 1.67326319217681884765625f);
    const double gamma = node.get_float("gamma", 1.05070102214813232421875f);
    map_double(x, y, [=](double v) { return gamma * (v > 0 ? v : alpha * std::expm1(v)); });
  } else if (op == "Gelu") {
    const std::string approximate = node.get_string("approximate", "none");
    if (approximate == "none") {
      map_double(x, y, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
    } else if (approximate == "tanh") {
      const double k = std::sqrt(2.0 / M_PI);
      map_double(x, y, [=](double v) {
        return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
      });
    } else {
      fail("approximate '" + approximate + "' is not \"none\" or \"tanh\"");
    }
  } else {
    fail("has no unary kernel");  // not reached: the kernel table routes only the ops above
  }
}

void clip(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = ctx.float_input(0, "input");
  // Opset < 11: bounds are the attributes min / max; from opset 11 on: the optional inputs 1 and
  // 2 ("" = absent). A node is one or the other, so the opset is not needed to tell them apart.
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  const bool by_attribute = node.has("min") || node.has("max");
  if (by_attribute && node.inputs.size() > 1)
    fail("has both min/max attributes (opset < 11) and bound inputs (opset >= 11)");
  if (by_attribute) {
    lo = node.get_float("min", lo);
    hi = node.get_float("max", hi);
  }
  if (const Value* v = ctx.optional_input(1)) lo = scalar_bound(*v, "min");
  if (const Value* v = ctx.optional_input(2)) hi = scalar_bound(*v, "max");
  Value& y = ctx.outputs[0];
  // numpy.clip's order: with lo > hi every value becomes hi.
  map_float(x, y, [=](float v) { return std::min(std::max(v, lo), hi); });
}

void prelu(KernelContext& ctx) {
  const Value& x = ctx.float_input(0, "X");
  const Value& slope = ctx.float_input(1, "slope");
  // Unidirectional broadcast: the slope stretches to X's shape, never the other way.
  if (broadcast_shape(x.shape, slope.shape) != x.shape)
    fail("slope " + shape_text(slope.shape) + " does not broadcast to X " + shape_text(x.shape));
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for_each_broadcast<1>(x.shape, {&slope.shape}, [&](int64_t o, const std::array<int64_t, 1>& i) {
    const float v = x.data[o];
    y.data[o] = v < 0.0f ? slope.data[i[0]] * v : v;
  });
}

}  // namespace webtune::graph::kernels
