/// \file elementwise.cpp
/// Reference kernels that combine tensors element by element with numpy's multidirectional
/// broadcast (ONNX "Broadcasting"), on float32 or integer tensors (int64 / int32 / bool, held in
/// Value::ints), so that shape arithmetic (Shape → Gather → Div → Concat ...) runs too:
///  - Add, Sub, Mul, Div (opset 7+), Pow (7+; 12+ base and exponent of different types, the
///    result of the base's type), Mod (10+, `fmod` 0 / 1): float32 computes in float32 as ONNX's
///    numpy reference does (Pow in double, rounded once); integers wrap (int32 to 32 bits), Div
///    truncates toward zero like C (ONNX's reference for int64), division by zero is refused;
///  - Max, Min, Sum, Mean (variadic, opset 8+; Max / Min NaN-propagating like numpy);
///  - Equal, Less, Greater (7+), LessOrEqual, GreaterOrEqual (12+): bool results;
///  - And, Or, Xor (7+), Not (1+) on bool tensors; Where (9+);
///  - Cast (6+; `to` FLOAT, INT32, INT64, BOOL; float to int truncates toward zero like numpy's
///    astype, NaN and out-of-range values give the type's minimum as on x86);
///  - Neg, Abs (6+), Sign (9+) on float or int.

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace webtune::graph::kernels {

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

namespace {

/// y[o] = op(a[ia], b[ib]) over the broadcast of a's and b's shapes; `R` is y's element type.
template <typename R, typename A, typename B, typename Op>
std::vector<R> map2(const std::vector<int64_t>& out, const Value& a, const std::vector<A>& av,
                    const Value& b, const std::vector<B>& bv, Op op) {
  std::vector<R> y(static_cast<size_t>(product(out, 0, out.size())));
  for_each_broadcast<2>(out, {&a.shape, &b.shape}, [&](int64_t o, const std::array<int64_t, 2>& i) {
    y[o] = op(av[i[0]], bv[i[1]]);
  });
  return y;
}

int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrapping_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

/// C's a / b (toward zero); b == 0 is refused, INT64_MIN / -1 wraps.
int64_t int_div(int64_t a, int64_t b) {
  if (b == 0) fail("integer division by zero");
  if (b == -1) return wrapping_sub(0, a);
  return a / b;
}

/// a mod b: the sign of b (Python's %, fmod 0) or of a (C's fmod, fmod 1).
int64_t int_mod(int64_t a, int64_t b, bool c_style) {
  if (b == 0) fail("integer modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (!c_style && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

double float_mod(double a, double b, bool c_style) {
  double r = std::fmod(a, b);
  if (!c_style && r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/// a ** b for integers; a negative exponent truncates 1 / a^|b| toward zero.
int64_t int_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 ? -1 : 1) : 0);  // a == 0: numpy errs; 0
  int64_t r = 1;
  while (b) {
    if (b & 1) r = wrapping_mul(r, a);
    a = wrapping_mul(a, a);
    b >>= 1;
  }
  return r;
}

/// The element type of an integer result of inputs of types a and b (a's, as ONNX requires them
/// equal).
DataType int_result(const Value& a) {
  return a.type == DataType::kBool ? DataType::kInt64 : a.type;
}

/// Refuses a float / int mix where ONNX requires one element type.
void same_kind(const Value& a, const Value& b, const std::string& op) {
  if (a.is_float() != b.is_float())
    fail(op + " of " + std::string(data_type_name(a.type)) + " and " +
         std::string(data_type_name(b.type)) + ": the inputs must have one element type");
}

/// One of the binary arithmetic ops on two values, into a new value.
Value arithmetic_of(const std::string& op, const Value& a, const Value& b, bool c_mod) {
  Value y;
  y.shape = broadcast_shape(a.shape, b.shape);
  if (op == "Pow") {
    // Pow-12: base and exponent may differ; the result has the base's type. In double.
    auto value = [](const Value& v, size_t i) {
      return v.is_float() ? static_cast<double>(v.data[i]) : static_cast<double>(v.ints[i]);
    };
    y.type = a.type;
    if (a.is_float()) {
      y.data.resize(static_cast<size_t>(product(y.shape, 0, y.shape.size())));
      for_each_broadcast<2>(
          y.shape, {&a.shape, &b.shape}, [&](int64_t o, const std::array<int64_t, 2>& i) {
            y.data[o] =
                static_cast<float>(std::pow(static_cast<double>(a.data[i[0]]), value(b, i[1])));
          });
    } else {
      y.ints.resize(static_cast<size_t>(product(y.shape, 0, y.shape.size())));
      for_each_broadcast<2>(
          y.shape, {&a.shape, &b.shape}, [&](int64_t o, const std::array<int64_t, 2>& i) {
            int64_t r;
            if (b.is_float()) {
              const double p = std::pow(static_cast<double>(a.ints[i[0]]), b.data[i[1]]);
              r = std::fabs(p) < 9.2e18 ? static_cast<int64_t>(p)
                                        : std::numeric_limits<int64_t>::min();
            } else {
              r = int_pow(a.ints[i[0]], b.ints[i[1]]);
            }
            y.ints[o] = wrap_int(r, y.type);
          });
    }
    return y;
  }
  same_kind(a, b, op);
  if (a.is_float()) {
    using F = float;
    if (op == "Add")
      y.data = map2<F>(y.shape, a, a.data, b, b.data, [](F p, F q) { return p + q; });
    else if (op == "Sub")
      y.data = map2<F>(y.shape, a, a.data, b, b.data, [](F p, F q) { return p - q; });
    else if (op == "Mul")
      y.data = map2<F>(y.shape, a, a.data, b, b.data, [](F p, F q) { return p * q; });
    else if (op == "Div")
      y.data = map2<F>(y.shape, a, a.data, b, b.data, [](F p, F q) { return p / q; });
    else  // Mod
      y.data = map2<F>(y.shape, a, a.data, b, b.data,
                       [c_mod](F p, F q) { return static_cast<F>(float_mod(p, q, c_mod)); });
    return y;
  }
  y.type = int_result(a);
  using I = int64_t;
  if (op == "Add")
    y.ints = map2<I>(y.shape, a, a.ints, b, b.ints, wrapping_add);
  else if (op == "Sub")
    y.ints = map2<I>(y.shape, a, a.ints, b, b.ints, wrapping_sub);
  else if (op == "Mul")
    y.ints = map2<I>(y.shape, a, a.ints, b, b.ints, wrapping_mul);
  else if (op == "Div")
    y.ints = map2<I>(y.shape, a, a.ints, b, b.ints, int_div);
  else
    y.ints =
        map2<I>(y.shape, a, a.ints, b, b.ints, [c_mod](I p, I q) { return int_mod(p, q, c_mod); });
  if (y.type == DataType::kInt32)
    for (int64_t& v : y.ints) v = wrap_int(v, y.type);
  return y;
}

template <typename T>
T max_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a < b ? b : a;
}

template <typename T>
T min_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return b < a ? b : a;
}

/// x converted to the integer type `to` as numpy's astype does on x86: toward zero, NaN and
/// values outside the type give its minimum.
int64_t float_to_int(float x, DataType to) {
  if (to == DataType::kBool) return x != 0.0f;
  const double v = x;
  if (to == DataType::kInt32) {
    if (!(v > -2147483649.0 && v < 2147483648.0)) return std::numeric_limits<int32_t>::min();
    return static_cast<int32_t>(v);
  }
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

void arithmetic(KernelContext& ctx) {
  const std::string& op = ctx.node.op_type;
  const bool c_mod = op == "Mod" && ctx.node.get_int("fmod", 0) != 0;
  ctx.outputs[0] = arithmetic_of(op, ctx.input(0, "A"), ctx.input(1, "B"), c_mod);
}

void variadic(KernelContext& ctx) {
  const std::string& op = ctx.node.op_type;
  if (ctx.node.inputs.empty()) fail("needs at least one input");
  Value acc = ctx.input(0, "data_0");
  for (size_t k = 1; k < ctx.node.inputs.size(); ++k) {
    const Value& b = ctx.input(k, "data_i");
    same_kind(acc, b, op);
    Value y;
    y.shape = broadcast_shape(acc.shape, b.shape);
    y.type = acc.type;
    if (acc.is_float()) {
      using F = float;
      if (op == "Max")
        y.data = map2<F>(y.shape, acc, acc.data, b, b.data, max_of<F>);
      else if (op == "Min")
        y.data = map2<F>(y.shape, acc, acc.data, b, b.data, min_of<F>);
      else  // Sum, Mean: summed in float32 in input order, as numpy's reference
        y.data = map2<F>(y.shape, acc, acc.data, b, b.data, [](F p, F q) { return p + q; });
    } else {
      using I = int64_t;
      if (op == "Max")
        y.ints = map2<I>(y.shape, acc, acc.ints, b, b.ints, max_of<I>);
      else if (op == "Min")
        y.ints = map2<I>(y.shape, acc, acc.ints, b, b.ints, min_of<I>);
      else
        y.ints = map2<I>(y.shape, acc, acc.ints, b, b.ints, wrapping_add);
      if (y.type == DataType::kInt32)
        for (int64_t& v : y.ints) v = wrap_int(v, y.type);
    }
    acc = std::move(y);
  }
  if (op == "Mean") {
    const auto n = static_cast<int64_t>(ctx.node.inputs.size());
    if (acc.is_float())
      for (float& v : acc.data) v /= static_cast<float>(n);
    else
      for (int64_t& v : acc.ints) v = int_div(v, n);
  }
  ctx.outputs[0] = std::move(acc);
}

void compare(KernelContext& ctx) {
  const std::string& op = ctx.node.op_type;
  const Value& a = ctx.input(0, "A");
  const Value& b = ctx.input(1, "B");
  same_kind(a, b, op);
  Value& y = ctx.outputs[0];
  y.shape = broadcast_shape(a.shape, b.shape);
  y.type = DataType::kBool;
  auto run = [&](const auto& av, const auto& bv) {
    using T = typename std::decay_t<decltype(av)>::value_type;
    if (op == "Equal")
      y.ints = map2<int64_t>(y.shape, a, av, b, bv, [](T p, T q) { return int64_t{p == q}; });
    else if (op == "Less")
      y.ints = map2<int64_t>(y.shape, a, av, b, bv, [](T p, T q) { return int64_t{p < q}; });
    else if (op == "Greater")
      y.ints = map2<int64_t>(y.shape, a, av, b, bv, [](T p, T q) { return int64_t{p > q}; });
    else if (op == "LessOrEqual")
      y.ints = map2<int64_t>(y.shape, a, av, b, bv, [](T p, T q) { return int64_t{p <= q}; });
    else
      y.ints = map2<int64_t>(y.shape, a, av, b, bv, [](T p, T q) { return int64_t{p >= q}; });
  };
  if (a.is_float())
    run(a.data, b.data);
  else
    run(a.ints, b.ints);
}

void logical(KernelContext& ctx) {
  const std::string& op = ctx.node.op_type;
  const Value& a = ctx.input(0, "A");
  const Value& b = ctx.input(1, "B");
  if (a.is_float() || b.is_float()) fail(op + " runs on bool tensors, not float32");
  Value& y = ctx.outputs[0];
  y.shape = broadcast_shape(a.shape, b.shape);
  y.type = DataType::kBool;
  using I = int64_t;
  if (op == "And")
    y.ints = map2<I>(y.shape, a, a.ints, b, b.ints, [](I p, I q) { return I{p != 0 && q != 0}; });
  else if (op == "Or")
    y.ints = map2<I>(y.shape, a, a.ints, b, b.ints, [](I p, I q) { return I{p != 0 || q != 0}; });
  else
    y.ints =
        map2<I>(y.shape, a, a.ints, b, b.ints, [](I p, I q) { return I{(p != 0) != (q != 0)}; });
}

void logical_not(KernelContext& ctx) {
  const Value& x = ctx.input(0, "X");
  if (x.is_float()) fail("Not runs on bool tensors, not float32");
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.type = DataType::kBool;
  y.ints.resize(x.ints.size());
  for (size_t i = 0; i < x.ints.size(); ++i) y.ints[i] = x.ints[i] == 0;
}

void where(KernelContext& ctx) {
  const Value& c = ctx.input(0, "condition");
  const Value& x = ctx.input(1, "X");
  const Value& yv = ctx.input(2, "Y");
  if (c.is_float()) fail("condition must be bool, not float32");
  same_kind(x, yv, "Where");
  Value& out = ctx.outputs[0];
  out.shape = broadcast_shape(broadcast_shape(c.shape, x.shape), yv.shape);
  out.type = x.type;
  auto run = [&](const auto& xv, const auto& yvv, auto& ov) {
    ov.resize(static_cast<size_t>(product(out.shape, 0, out.shape.size())));
    for_each_broadcast<3>(out.shape, {&c.shape, &x.shape, &yv.shape},
                          [&](int64_t o, const std::array<int64_t, 3>& i) {
                            ov[o] = c.ints[i[0]] ? xv[i[1]] : yvv[i[2]];
                          });
  };
  if (x.is_float())
    run(x.data, yv.data, out.data);
  else
    run(x.ints, yv.ints, out.ints);
}

void cast(KernelContext& ctx) {
  const Value& x = ctx.input(0, "input");
  const int64_t to = ctx.node.get_int("to", -1);
  // TensorProto.DataType: FLOAT 1, INT32 6, INT64 7, BOOL 9.
  DataType type;
  switch (to) {
    case 1:
      type = DataType::kFloat32;
      break;
    case 6:
      type = DataType::kInt32;
      break;
    case 7:
      type = DataType::kInt64;
      break;
    case 9:
      type = DataType::kBool;
      break;
    default:
      fail("to " + std::to_string(to) +
           " is not FLOAT (1), INT32 (6), INT64 (7) or BOOL (9), the element types the executor "
           "holds");
  }
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.type = type;
  if (type == DataType::kFloat32) {
    if (x.is_float()) {
      y.data = x.data;
    } else {
      y.data.resize(x.ints.size());
      for (size_t i = 0; i < x.ints.size(); ++i) y.data[i] = static_cast<float>(x.ints[i]);
    }
  } else if (x.is_float()) {
    y.ints.resize(x.data.size());
    for (size_t i = 0; i < x.data.size(); ++i) y.ints[i] = float_to_int(x.data[i], type);
  } else {
    y.ints.resize(x.ints.size());
    for (size_t i = 0; i < x.ints.size(); ++i) y.ints[i] = wrap_int(x.ints[i], type);
  }
}

void signed_unary(KernelContext& ctx) {
  const std::string& op = ctx.node.op_type;
  const Value& x = ctx.input(0, "X");
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.type = x.type;
  if (x.is_float()) {
    y.data.resize(x.data.size());
    for (size_t i = 0; i < x.data.size(); ++i) {
      const float v = x.data[i];
      y.data[i] = op == "Neg"   ? -v
                  : op == "Abs" ? std::fabs(v)
                                : (v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v));  // Sign (NaN stays)
    }
  } else {
    y.ints.resize(x.ints.size());
    for (size_t i = 0; i < x.ints.size(); ++i) {
      const int64_t v = x.ints[i];
      y.ints[i] = wrap_int(op == "Neg"   ? wrapping_sub(0, v)
                           : op == "Abs" ? (v < 0 ? wrapping_sub(0, v) : v)
                                         : int64_t{(v > 0) - (v < 0)},
                           x.type);
    }
  }
}

}  // namespace webtune::graph::kernels
