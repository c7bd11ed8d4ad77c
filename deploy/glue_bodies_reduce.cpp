/// \file glue_bodies_reduce.cpp
/// GPU op-kernel bodies (glue_code.hpp) of the reductions: ReduceSum, ReduceMean, ReduceMax,
/// ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp.
/// `axes` is the attribute or the constant input 1 (read at build time), as graph/kernels/
/// reduce.cpp reads it: no axes reduces all of them unless noop_with_empty_axes, negative axes
/// count from the end, keepdims only changes the output's shape (not its element order). Each
/// output element loops over its group; float32 accumulation (the reference's is double:
/// differences are rounding only), LogSumExp subtracts the group's maximum first, Max / Min
/// propagate NaN.
#include <string>
#include <vector>

#include "glue_code.hpp"

namespace webtune::deploy::glue {
namespace {

void reduce_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::string op = node.op_type.substr(6);  // "Sum", "Mean", ...
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const size_t rank = x.size();
  std::vector<int64_t> axes;
  if (auto input = ctx.ints_input(1))
    axes = *input;
  else
    axes = node.get_ints("axes", {});
  if (axes.empty() && node.get_int("noop_with_empty_axes", 0) != 0) {
    if (product(x) != ctx.out_elements) ctx.fail("the output's size differs from the input's");
    return c.assign("v", ctx.ld(0, "o"));
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    const auto i = static_cast<size_t>(normalize_axis(ctx, a, rank));
    if (reduced[i]) ctx.fail("axis " + num(a) + " is listed twice");
    reduced[i] = true;
  }
  std::vector<int64_t> kept, kept_strides, group, group_strides;
  const std::vector<int64_t> strides = row_major_strides(x);
  for (size_t i = 0; i < rank; ++i) {
    (reduced[i] ? group : kept).push_back(x[i]);
    (reduced[i] ? group_strides : kept_strides).push_back(strides[i]);
  }
  if (product(kept) != ctx.out_elements)
    ctx.fail("the output " + shape_text(ctx.out_shape) + " does not hold the kept axes of " +
             shape_text(x));
  const int64_t count = product(group);
  if (count < 1) ctx.fail("reduces an empty group");
  decode(c, "o", "q", kept);
  c.let_int("base", dot("q", kept_strides));
  const bool max = op == "Max", min = op == "Min";
  std::string init = "0.0";
  if (op == "Prod") init = "1.0";
  if (max) init = c.negative_infinity();
  if (min) init = c.positive_infinity();
  if (op == "LogSumExp") {
    // The group's maximum first, so that exp does not overflow (an infinite one shifts by 0).
    c.var_float("shift", c.negative_infinity());
    c.for_("r", num(count));
    decode(c, "r", "g", group);
    c.assign("shift", "max(shift, " + ctx.ld(0, "base + " + dot("g", group_strides)) + ")");
    c.close();
    c.if_("shift == " + c.negative_infinity() + " || shift == " + c.positive_infinity());
    c.assign("shift", "0.0");
    c.close();
  }
  c.var_float("acc", init);
  c.var_bool("nan_seen", "false");
  c.for_("r", num(count));
  decode(c, "r", "g", group);
  c.let_float("x", ctx.ld(0, "base + " + dot("g", group_strides)));
  if (op == "Sum" || op == "Mean" || op == "LogSum") {
    c.assign("acc", "acc + x");
  } else if (op == "Prod") {
    c.assign("acc", "acc * x");
  } else if (max || min) {
    c.if_(c.is_nan("x"));
    c.assign("nan_seen", "true");
    c.close();
    c.assign("acc", std::string(max ? "max" : "min") + "(acc, x)");
  } else if (op == "L1") {
    c.assign("acc", "acc + abs(x)");
  } else if (op == "L2" || op == "SumSquare") {
    c.assign("acc", "acc + x * x");
  } else if (op == "LogSumExp") {
    c.assign("acc", "acc + exp(x - shift)");
  } else {
    ctx.fail("has no reduce body");
  }
  c.close();
  if (op == "Mean")
    c.assign("v", "acc / " + Code::lit(static_cast<double>(count)));
  else if (op == "L2")
    c.assign("v", "sqrt(acc)");
  else if (op == "LogSum")
    c.assign("v", "log(acc)");
  else if (op == "LogSumExp")
    c.assign("v", "log(acc) + shift");
  else
    c.assign("v", "acc");
  if (max || min) {
    c.if_("nan_seen");
    c.assign("v", c.nan());
    c.close();
  }
}

}  // namespace

std::vector<BodyEntry> reduce_bodies() {
  std::vector<BodyEntry> entries;
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
    entries.push_back({op, reduce_body});
  return entries;
}

}  // namespace webtune::deploy::glue
