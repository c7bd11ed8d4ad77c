/// \file reduce.cpp
/// Reference kernels that reduce over axes: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
/// ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp (opsets 1 to
/// 17). `axes` is an attribute, or the optional input 1 (ReduceSum from opset 13 on; every
/// Reduce from 18 on); no axes reduces all of them, unless `noop_with_empty_axes` (then the
/// input passes through); negative axes count from the end; `keepdims` (default 1) keeps the
/// reduced axes as 1. Float32 accumulates in double and rounds once (LogSumExp subtracts the
/// maximum first); int64 / int32 tensors reduce exactly for Sum, Prod, Max, Min, L1 and
/// SumSquare, and through double (truncated) for the others.

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace webtune::graph::kernels {

void reduce(KernelContext& ctx) {
  const Node& node = ctx.node;
  const std::string op = node.op_type.substr(6);  // "Sum", "Mean", ...
  const Value& x = ctx.input(0, "data");
  const size_t rank = x.shape.size();
  std::vector<int64_t> axes;
  if (const Value* a = ctx.optional_input(1))
    axes = int_list(*a, "axes");
  else
    axes = node.get_ints("axes", {});
  if (axes.empty() && node.get_int("noop_with_empty_axes", 0) != 0) {
    ctx.outputs[0] = x;
    return;
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    const auto i = static_cast<size_t>(normalize_axis(a, rank, "axis"));
    if (reduced[i]) fail("axis " + std::to_string(a) + " is listed twice");
    reduced[i] = true;
  }
  const bool keepdims = node.get_int("keepdims", 1) != 0;
  std::vector<int64_t> kept_shape(rank), out_shape;
  for (size_t i = 0; i < rank; ++i) {
    kept_shape[i] = reduced[i] ? 1 : x.shape[i];
    if (!reduced[i] || keepdims) out_shape.push_back(kept_shape[i]);
  }
  const auto out_n = static_cast<size_t>(product(kept_shape, 0, rank));
  const int64_t count = out_n ? x.elements() / static_cast<int64_t>(out_n) : 0;
  Value& y = ctx.outputs[0];
  y.shape = out_shape;
  y.type = x.type;

  const bool exact_int = !x.is_float() && (op == "Sum" || op == "Prod" || op == "Max" ||
                                           op == "Min" || op == "L1" || op == "SumSquare");
  if (exact_int) {
    int64_t init = 0;
    if (op == "Prod") init = 1;
    if (op == "Max") init = std::numeric_limits<int64_t>::min();
    if (op == "Min") init = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> acc(out_n, init);
    for_each_broadcast<1>(x.shape, {&kept_shape}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      const int64_t v = x.ints[i];
      int64_t& a = acc[o[0]];
      if (op == "Sum")
        a += v;
      else if (op == "Prod")
        a *= v;
      else if (op == "Max")
        a = std::max(a, v);
      else if (op == "Min")
        a = std::min(a, v);
      else if (op == "L1")
        a += v < 0 ? -v : v;
      else
        a += v * v;
    });
    y.ints.resize(out_n);
    for (size_t o = 0; o < out_n; ++o) y.ints[o] = wrap_int(acc[o], x.type);
    return;
  }

  auto value = [&](int64_t i) {
    return x.is_float() ? static_cast<double>(x.data[i]) : static_cast<double>(x.ints[i]);
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(out_n,
                          op == "Prod" ? 1.0 : (op == "Max" ? -inf : (op == "Min" ? inf : 0.0)));
  std::vector<double> shift(out_n, 0.0);
  if (op == "LogSumExp") {  // the maximum of each group first, so that exp does not overflow
    std::fill(shift.begin(), shift.end(), -inf);
    for_each_broadcast<1>(x.shape, {&kept_shape}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      shift[o[0]] = std::max(shift[o[0]], value(i));
    });
    for (double& s : shift)
      if (std::isinf(s)) s = 0.0;
  }
  for_each_broadcast<1>(x.shape, {&kept_shape}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    const double v = value(i);
    double& a = acc[o[0]];
    if (op == "Sum" || op == "Mean" || op == "LogSum")
      a += v;
    else if (op == "Prod")
      a *= v;
    else if (op == "Max")
      a = std::isnan(v) || std::isnan(a) ? NAN : std::max(a, v);
    else if (op == "Min")
      a = std::isnan(v) || std::isnan(a) ? NAN : std::min(a, v);
    else if (op == "L1")
      a += std::fabs(v);
    else if (op == "L2" || op == "SumSquare")
      a += v * v;
    else if (op == "LogSumExp")
      a += std::exp(v - shift[o[0]]);
    else
      fail("has no reduce kernel");
  });
  for (size_t o = 0; o < out_n; ++o) {
    double& a = acc[o];
    if (op == "Mean")
      a /= static_cast<double>(count);
    else if (op == "L2")
      a = std::sqrt(a);
    else if (op == "LogSum")
      a = std::log(a);
    else if (op == "LogSumExp")
      a = std::log(a) + shift[o];
  }
  if (x.is_float()) {
    y.data.resize(out_n);
    for (size_t o = 0; o < out_n; ++o) y.data[o] = static_cast<float>(acc[o]);
  } else {
    y.ints.resize(out_n);
    for (size_t o = 0; o < out_n; ++o)
      y.ints[o] = wrap_int(static_cast<int64_t>(std::trunc(acc[o])), x.type);
  }
}

}  // namespace webtune::graph::kernels
