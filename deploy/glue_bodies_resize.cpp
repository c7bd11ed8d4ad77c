/// \file glue_bodies_resize.cpp
/// GPU op-kernel body (glue_code.hpp) of Resize (10+) and Upsample (7–9): every mode the
/// reference runs (nearest, linear, cubic; every coordinate_transformation_mode and
/// nearest_mode; tf_crop_and_resize's extrapolation). The taps — input position and weight of
/// each output position along each axis — are graph::resize_plan's, the reference's own,
/// computed at build time in double and baked into tables, so every target reads the same
/// elements as the reference; the kernel only sums weight products over them. roi, scales and
/// sizes must be constants (graph/operators.hpp's build_time_inputs).
#include <string>
#include <vector>

#include "glue_code.hpp"
#include "graph/resize_plan.hpp"

namespace webtune::deploy::glue {
namespace {

void resize_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const size_t rank = x.size();
  const bool legacy = node.op_type == "Upsample" || ctx.opset < 11;
  std::vector<float> roi, scales;
  std::vector<int64_t> sizes;
  if (legacy) {
    if (node.inputs.size() > 1) {
      auto s = ctx.floats_input(1);
      if (!s) ctx.fail("needs scales");
      scales = *s;
    } else {
      scales = node.get_floats("scales", {});
    }
  } else {
    if (auto r = ctx.floats_input(1)) roi = *r;
    if (auto s = ctx.floats_input(2)) scales = *s;
    if (const graph::Tensor* t = ctx.constant_input(3); t && t->elements() > 0) {
      if (!t->int_data) ctx.fail("sizes is not an integer tensor");
      sizes = *t->int_data;
    }
  }
  graph::ResizePlan plan;
  try {
    plan = graph::resize_plan(node, x, roi, scales, sizes, ctx.opset);
  } catch (const graph::GraphError& e) {
    ctx.fail(e.what());
  }
  if (plan.out_shape != ctx.out_shape)
    ctx.fail("the graph's output shape " + shape_text(ctx.out_shape) + " differs from the " +
             shape_text(plan.out_shape) + " of the resize");
  const std::vector<int64_t> strides = row_major_strides(x);
  decode(c, "o", "q", plan.out_shape);
  // Per axis: nothing when each output position reads its own input position with weight 1;
  // else tables of taps (index, weight; unused taps weight 0) and, for a crop, of validity.
  std::string outside;
  std::vector<int64_t> taps_per(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    const auto& axis = plan.taps[d];
    bool identity = static_cast<int64_t>(axis.size()) == x[d];
    size_t most = 0;
    for (size_t o = 0; o < axis.size(); ++o) {
      most = std::max(most, axis[o].size());
      identity = identity && axis[o].size() == 1 && axis[o][0].index == static_cast<int64_t>(o) &&
                 axis[o][0].weight == 1.0;
    }
    if (identity) continue;
    const auto t = static_cast<int64_t>(std::max<size_t>(most, 1));
    taps_per[d] = t;
    std::vector<int64_t> index(axis.size() * static_cast<size_t>(t), 0);
    std::vector<double> weight(index.size(), 0.0);
    std::vector<int64_t> valid(axis.size(), 1);
    bool crops = false;
    for (size_t o = 0; o < axis.size(); ++o) {
      if (axis[o].empty()) {
        valid[o] = 0;
        crops = true;
      }
      for (size_t k = 0; k < axis[o].size(); ++k) {
        index[o * static_cast<size_t>(t) + k] = axis[o][k].index;
        weight[o * static_cast<size_t>(t) + k] = axis[o][k].weight;
      }
    }
    const std::string dn = num(static_cast<int64_t>(d));
    c.int_table("ti" + dn, index);
    c.float_table("tw" + dn, weight);
    if (crops) {
      c.int_table("tv" + dn, valid);
      outside += (outside.empty() ? "" : " || ") + std::string("tv") + dn + "[q" + dn + "] == 0";
    }
  }
  c.var_float("sum", "0.0");
  std::string offset, weight = "1.0";
  int opened = 0;
  for (size_t d = 0; d < rank; ++d) {
    const std::string dn = num(static_cast<int64_t>(d));
    std::string position = "q" + dn;
    if (taps_per[d] > 0) {
      c.for_("k" + dn, num(taps_per[d]));
      c.let_int("j" + dn, "q" + dn + " * " + num(taps_per[d]) + " + k" + dn);
      c.let_float("w" + dn, "tw" + dn + "[j" + dn + "]");
      c.if_("w" + dn + " != 0.0");  // an unused tap
      opened += 2;
      position = "ti" + dn + "[j" + dn + "]";
      weight += " * w" + dn;
    }
    if (x[d] > 1) offset += (offset.empty() ? "" : " + ") + position + " * " + num(strides[d]);
  }
  c.assign("sum", "sum + " + weight + " * " + ctx.ld(0, offset.empty() ? "0" : offset));
  for (int i = 0; i < opened; ++i) c.close();
  c.assign("v", "sum");
  if (!outside.empty()) {
    c.if_(outside);
    c.assign("v", Code::lit(plan.extrapolation));
    c.close();
  }
}

}  // namespace

std::vector<BodyEntry> resize_bodies() {
  return {{"Resize", resize_body}, {"Upsample", resize_body}};
}

}  // namespace webtune::deploy::glue
