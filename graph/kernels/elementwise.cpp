/// \file elementwise.cpp
/// Reference kernels that map values: Add / Sub / Mul / Div with numpy's multidirectional
/// broadcast (ONNX "Broadcasting"), Relu, Sigmoid, HardSigmoid, HardSwish, Clip (both opset
/// styles), BatchNormalization (inference) and Softmax (both opset semantics).

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace webtune::graph::kernels {
namespace {

/// numpy broadcast of two shapes (right-aligned; a dimension of 1 stretches).
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t ad = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t bd = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (ad != bd && ad != 1 && bd != 1)
      fail("shapes " + shape_text(a) + " and " + shape_text(b) + " do not broadcast");
    out[i] = ad == 1 ? bd : ad;
  }
  return out;
}

/// Strides of `shape` (row-major) over the broadcast shape `out`: 0 where it stretches.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    const size_t o = i + out.size() - shape.size();
    strides[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

template <typename Op>
void broadcast_binary(const Value& a, const Value& b, Value& y, Op op) {
  y.shape = broadcast_shape(a.shape, b.shape);
  y.data.resize(static_cast<size_t>(product(y.shape, 0, y.shape.size())));
  if (y.data.empty()) return;
  if (y.shape.empty()) {  // both scalars
    y.data[0] = op(a.data[0], b.data[0]);
    return;
  }
  const std::vector<int64_t> sa = broadcast_strides(a.shape, y.shape);
  const std::vector<int64_t> sb = broadcast_strides(b.shape, y.shape);
  const size_t rank = y.shape.size();
  const int64_t inner = y.shape.back(), ia = sa.back(), ib = sb.back();
  std::vector<int64_t> index(rank - 1, 0);
  const int64_t rows = product(y.shape, 0, rank - 1);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t a_off = 0, b_off = 0;
    for (size_t i = 0; i + 1 < rank; ++i) {
      a_off += index[i] * sa[i];
      b_off += index[i] * sb[i];
    }
    float* out = y.data.data() + r * inner;
    const float* ap = a.data.data() + a_off;
    const float* bp = b.data.data() + b_off;
    for (int64_t j = 0; j < inner; ++j) out[j] = op(ap[j * ia], bp[j * ib]);
    for (size_t i = rank - 1; i-- > 0;) {  // odometer over the outer dimensions
      if (++index[i] < y.shape[i]) break;
      index[i] = 0;
    }
  }
}

/// The single value of a Clip bound input (a scalar or one-element tensor).
float scalar_bound(const Value& v, const char* what) {
  if (!v.is_float() || v.data.size() != 1)
    fail(std::string("Clip's ") + what + " must be a float32 scalar, not " +
         std::string(data_type_name(v.type)) + " " + shape_text(v.shape));
  return v.data[0];
}

}  // namespace

void binary(KernelContext& ctx) {
  const Value& a = ctx.float_input(0, "A");
  const Value& b = ctx.float_input(1, "B");
  Value& y = ctx.outputs[0];
  const std::string& op = ctx.node.op_type;
  if (op == "Add")
    broadcast_binary(a, b, y, [](float p, float q) { return p + q; });
  else if (op == "Sub")
    broadcast_binary(a, b, y, [](float p, float q) { return p - q; });
  else if (op == "Mul")
    broadcast_binary(a, b, y, [](float p, float q) { return p * q; });
  else
    broadcast_binary(a, b, y, [](float p, float q) { return p / q; });
}

void unary(KernelContext& ctx) {
  const Value& x = ctx.float_input(0, "X");
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  const std::string& op = ctx.node.op_type;
  const size_t n = x.data.size();
  if (op == "Relu") {
    for (size_t i = 0; i < n; ++i) y.data[i] = x.data[i] > 0.0f ? x.data[i] : 0.0f;
  } else if (op == "Sigmoid") {
    for (size_t i = 0; i < n; ++i)
      y.data[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x.data[i]))));
  } else if (op == "HardSigmoid") {
    const float alpha = ctx.node.get_float("alpha", 0.2f), beta = ctx.node.get_float("beta", 0.5f);
    for (size_t i = 0; i < n; ++i)
      y.data[i] = std::max(0.0f, std::min(1.0f, alpha * x.data[i] + beta));
  } else {  // HardSwish: x · HardSigmoid(x) with alpha = 1/6, beta = 0.5
    for (size_t i = 0; i < n; ++i)
      y.data[i] = x.data[i] * std::max(0.0f, std::min(1.0f, x.data[i] / 6.0f + 0.5f));
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
  y.shape = x.shape;
  y.data.resize(x.data.size());
  // numpy.clip's order: with lo > hi every value becomes hi.
  for (size_t i = 0; i < x.data.size(); ++i) y.data[i] = std::min(std::max(x.data[i], lo), hi);
}

void batch_normalization(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (node.get_int("training_mode", 0) != 0)
    fail("training_mode 1 is not run (the reference executor runs inference)");
  if (node.get_int("spatial", 1) != 1)
    fail("spatial 0 (per-element statistics, opset < 9) is not supported");
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (ctx.wanted(o))
      fail("output " + std::to_string(o) + " ('" + node.outputs[o] +
           "', a training statistic) is not computed (the reference executor runs inference)");
  const Value& x = ctx.float_input(0, "X");
  if (x.shape.size() < 2) fail("X has shape " + shape_text(x.shape) + "; it needs [N, C, ...]");
  const int64_t channels = x.shape[1];
  const char* names[4] = {"scale", "B", "input_mean", "input_var"};
  const float* params[4];
  for (size_t i = 0; i < 4; ++i) {
    const Value& p = ctx.float_input(i + 1, names[i]);
    if (p.shape != std::vector<int64_t>{channels})
      fail(std::string(names[i]) + " has shape " + shape_text(p.shape) + ", expected [" +
           std::to_string(channels) + "]");
    params[i] = p.data.data();
  }
  const double epsilon = node.get_float("epsilon", 1e-5f);
  const int64_t size = product(x.shape, 2, x.shape.size());
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const double scale = params[0][c] / std::sqrt(static_cast<double>(params[3][c]) + epsilon);
      const double shift = params[1][c] - params[2][c] * scale;
      const int64_t base = (n * channels + c) * size;
      for (int64_t i = 0; i < size; ++i)
        y.data[base + i] = static_cast<float>(x.data[base + i] * scale + shift);
    }
}

void softmax(KernelContext& ctx) {
  const Value& x = ctx.float_input(0, "input");
  const bool coerce_2d = ctx.opset < 13;
  const int64_t axis =
      normalize_axis(ctx.node.get_int("axis", coerce_2d ? 1 : -1), x.shape.size(), "axis");
  // Softmax-13 normalises along `axis`; Softmax-1/-11 flattens the input to 2-D
  // [prod(d[:axis]), prod(d[axis:])] and normalises each row.
  const int64_t outer = product(x.shape, 0, static_cast<size_t>(axis));
  const int64_t length = coerce_2d ? product(x.shape, static_cast<size_t>(axis), x.shape.size())
                                   : x.shape[static_cast<size_t>(axis)];
  const int64_t inner =
      coerce_2d ? 1 : product(x.shape, static_cast<size_t>(axis) + 1, x.shape.size());
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * length * inner + in;
      // Subtract the maximum first so that exp does not overflow.
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < length; ++l) max = std::max<double>(max, x.data[base + l * inner]);
      double sum = 0.0;
      for (int64_t l = 0; l < length; ++l) sum += std::exp(x.data[base + l * inner] - max);
      for (int64_t l = 0; l < length; ++l)
        y.data[base + l * inner] =
            static_cast<float>(std::exp(x.data[base + l * inner] - max) / sum);
    }
}

}  // namespace webtune::graph::kernels
