/// \file glue_bodies_normalization.cpp
/// GPU op-kernel bodies (glue_code.hpp) of the normalizations: Softmax and LogSoftmax (opset
/// < 13's 2-D coercion and 13's axis), BatchNormalization (inference), LayerNormalization and
/// InstanceNormalization. Each output element recomputes its row's statistics (L² work for
/// rows of L elements): simple, and glue is a small share of a model's time.
/// Semantics are graph/kernels' (the reference executor), attribute by attribute.
#include <string>
#include <vector>

#include "glue_code.hpp"

namespace webtune::deploy::glue {

int64_t normalize_axis(const OpContext& ctx, int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) ctx.fail("axis " + num(axis) + " is outside the rank " + num(r));
  return axis < 0 ? axis + r : axis;
}

namespace {

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
  if (ctx.node.op_type == "LogSoftmax")
    c.assign("v", ctx.ld(0, "o") + " - m - log(sum)");
  else
    c.assign("v", "exp(" + ctx.ld(0, "o") + " - m) / sum");
}

/// Declares `mean` and `inv_std` of the `size` elements ld0(start + i): two passes (the mean,
/// then the squared deviations), as the reference.
void moments(Code& c, const OpContext& ctx, const std::string& start, int64_t size,
             double epsilon) {
  c.var_float("mean", "0.0");
  c.for_("i", num(size));
  c.assign("mean", "mean + " + ctx.ld(0, start + " + i"));
  c.close();
  c.assign("mean", "mean / " + Code::lit(static_cast<double>(size)));
  c.var_float("variance", "0.0");
  c.for_("i", num(size));
  c.let_float("d", ctx.ld(0, start + " + i") + " - mean");
  c.assign("variance", "variance + d * d");
  c.close();
  c.let_float("inv_std", "1.0 / sqrt(variance / " + Code::lit(static_cast<double>(size)) + " + " +
                             Code::lit(epsilon) + ")");
}

/// LayerNormalization (17): X normalised over axes [axis, rank), times Scale, plus B; Scale and
/// B broadcast to X. Only output Y (the planner refuses a node whose Mean / InvStdDev is used).
void layer_normalization_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (node.get_int("stash_type", 1) != 1)
    ctx.fail("stash_type " + num(node.get_int("stash_type", 1)) + " is not 1 (float32)");
  if (ctx.inputs.size() < 2 || ctx.bound_index(1) != 1) ctx.fail("needs X and Scale");
  if (ctx.out_shape != x) ctx.fail("the output is not X's shape");
  const auto axis = static_cast<size_t>(normalize_axis(ctx, node.get_int("axis", -1), x.size()));
  const int64_t size = product(x, axis);
  c.let_int("row", "o / " + num(size));
  moments(c, ctx, "row * " + num(size), size, node.get_float("epsilon", 1e-5f));
  std::vector<std::string> at(ctx.inputs.size(), "o");
  bool decoded = false;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const std::vector<int64_t>& p = ctx.shape_of(i);
    if (product(p) == ctx.out_elements) continue;
    if (!decoded) decode(c, "o", "q", x);
    decoded = true;
    at[i] = dot("q", broadcast_strides(ctx, p, x));
  }
  c.assign("v", "(" + ctx.ld(0, "o") + " - mean) * inv_std * " + ctx.ld(1, at[1]));
  const int b = ctx.bound_index(2);
  if (b >= 0) c.assign("v", "v + " + ctx.ld(b, at[static_cast<size_t>(b)]));
}

/// InstanceNormalization: per (n, c) over the spatial axes, times scale[c], plus B[c].
void instance_normalization_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.size() < 3) ctx.fail("input has shape " + shape_text(x) + "; it needs [N, C, spatial...]");
  if (ctx.inputs.size() != 3) ctx.fail("needs input, scale and B");
  for (size_t i = 1; i < 3; ++i)
    if (ctx.shape_of(i) != std::vector<int64_t>{x[1]})
      ctx.fail("scale and B must be [" + num(x[1]) + "]");
  const int64_t size = product(x, 2);
  c.let_int("plane", "o / " + num(size));
  c.let_int("ch", "plane % " + num(x[1]));
  moments(c, ctx, "plane * " + num(size), size, ctx.node.get_float("epsilon", 1e-5f));
  c.assign("v", "(" + ctx.ld(0, "o") + " - mean) * inv_std * " + ctx.ld(1, "ch") + " + " +
                    ctx.ld(2, "ch"));
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

}  // namespace

std::vector<BodyEntry> normalization_bodies() {
  return {
      {"Softmax", softmax_body},
      {"LogSoftmax", softmax_body},
      {"BatchNormalization", batch_normalization_body},
      {"LayerNormalization", layer_normalization_body},
      {"InstanceNormalization", instance_normalization_body},
  };
}

}  // namespace webtune::deploy::glue
