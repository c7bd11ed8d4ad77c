/// \file glue_bodies_layout.cpp
/// GPU op-kernel bodies (glue_code.hpp) of the operators that move elements: Concat, Transpose,
/// Slice, Pad, Gather (constant indices), Expand, Tile, and the copy of Reshape, Flatten,
/// Identity, Dropout (inference), Squeeze and Unsqueeze where the planner cannot alias them.
/// Parameters (starts, pads, indices, repeats, ...) are constants read at build time
/// (graph/operators.hpp's build_time_inputs); Slice's and Pad's index plans are graph/
/// index_plan.hpp's, the reference's own.
/// Semantics are graph/kernels' (the reference executor), attribute by attribute.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "glue_code.hpp"
#include "graph/index_plan.hpp"

namespace webtune::deploy::glue {
namespace {

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

/// Calls a graph/ plan function, its GraphError raised as the node's error.
template <typename F>
auto planned(const OpContext& ctx, F f) {
  try {
    return f();
  } catch (const graph::GraphError& e) {
    ctx.fail(e.what());
  }
}

/// Slice: graph::slice_box's begin and step per axis (read at build time from the attributes,
/// opset < 10, or the constant inputs starts, ends, axes, steps).
void slice_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.inputs.size() > 1) {
    auto s = ctx.ints_input(1), e = ctx.ints_input(2);
    if (!s || !e) ctx.fail("needs starts and ends");
    starts = *s;
    ends = *e;
    if (auto a = ctx.ints_input(3)) axes = *a;
    if (auto st = ctx.ints_input(4)) steps = *st;
  } else {
    if (!node.has("starts") || !node.has("ends"))
      ctx.fail("needs starts and ends (attributes before opset 10, inputs from 10 on)");
    starts = node.get_ints("starts", {});
    ends = node.get_ints("ends", {});
    axes = node.get_ints("axes", {});
  }
  const graph::SliceBox box =
      planned(ctx, [&] { return graph::slice_box(x, starts, ends, axes, steps); });
  if (box.shape != ctx.out_shape)
    ctx.fail("the graph's output shape " + shape_text(ctx.out_shape) + " differs from the " +
             shape_text(box.shape) + " of the slice");
  const std::vector<int64_t> strides = row_major_strides(x);
  int64_t base = 0;
  std::vector<int64_t> step_strides(x.size());
  for (size_t d = 0; d < x.size(); ++d) {
    base += box.begin[d] * strides[d];
    step_strides[d] = box.step[d] * strides[d];
  }
  decode(c, "o", "q", box.shape);
  c.assign("v", ctx.ld(0, num(base) + " + " + dot("q", step_strides)));
}

/// Pad: graph::pad_sources's table per padded axis (an axis without padding reads its own
/// position), the constant where a table says −1.
void pad_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const std::string mode = node.get_string("mode", "constant");
  std::vector<int64_t> pads, axes;
  double value = 0.0;
  if (node.inputs.size() > 1) {
    auto p = ctx.ints_input(1);
    if (!p) ctx.fail("needs pads");
    pads = *p;
    if (const graph::Tensor* v = ctx.constant_input(2)) {
      if (v->elements() != 1) ctx.fail("constant_value is not a scalar");
      value = v->float_data ? v->float_data->at(0) : static_cast<double>(v->int_data->at(0));
    }
    if (auto a = ctx.ints_input(3)) axes = *a;
  } else {
    if (!node.has("pads"))
      ctx.fail("needs pads (an attribute before opset 11, input 1 from 11 on)");
    pads = node.get_ints("pads", {});
    value = node.get_float("value", 0.0f);
  }
  const auto from = planned(ctx, [&] { return graph::pad_sources(x, mode, pads, axes); });
  std::vector<int64_t> out_shape;
  for (const auto& f : from) out_shape.push_back(static_cast<int64_t>(f.size()));
  if (out_shape != ctx.out_shape)
    ctx.fail("the graph's output shape " + shape_text(ctx.out_shape) + " differs from the " +
             shape_text(out_shape) + " of the padding");
  const std::vector<int64_t> strides = row_major_strides(x);
  decode(c, "o", "q", out_shape);
  std::string offset, inside;
  for (size_t d = 0; d < x.size(); ++d) {
    const std::string dn = num(static_cast<int64_t>(d));
    bool identity = static_cast<int64_t>(from[d].size()) == x[d];
    for (size_t o = 0; identity && o < from[d].size(); ++o)
      identity = from[d][o] == static_cast<int64_t>(o);
    std::string position = "q" + dn;
    if (!identity) {
      c.int_table("src" + dn, from[d]);
      position = "src" + dn + "[q" + dn + "]";
      c.let_int("p" + dn, position);
      position = "p" + dn;
      if (std::find(from[d].begin(), from[d].end(), -1) != from[d].end())
        inside += (inside.empty() ? "" : " && ") + position + " >= 0";
    }
    if (strides[d] != 0 && x[d] > 1)
      offset += (offset.empty() ? "" : " + ") + position + " * " + num(strides[d]);
  }
  if (offset.empty()) offset = "0";
  if (inside.empty()) return c.assign("v", ctx.ld(0, offset));
  c.assign("v", Code::lit(value));
  c.if_(inside);
  c.assign("v", ctx.ld(0, offset));
  c.close();
}

/// Gather with constant indices (read at build time; negative ones count from the end): the
/// output's axes [axis, axis + rank(indices)) index the table of input positions.
void gather_body(Code& c, const OpContext& ctx) {
  const Node& node = ctx.node;
  const std::vector<int64_t>& x = ctx.shape_of(0);
  if (x.empty()) ctx.fail("data is a scalar; Gather needs rank >= 1");
  const graph::Tensor* idx = ctx.constant_input(1);
  if (idx == nullptr || !idx->int_data) ctx.fail("indices must be a constant int tensor");
  const auto axis = static_cast<size_t>(normalize_axis(ctx, node.get_int("axis", 0), x.size()));
  const int64_t n = x[axis];
  std::vector<int64_t> rows;
  for (int64_t i : *idx->int_data) {
    if (i < -n || i >= n)
      ctx.fail("index " + num(i) + " is outside [" + num(-n) + ", " + num(n - 1) + "]");
    rows.push_back(i < 0 ? i + n : i);
  }
  const int64_t outer = product(x, 0, axis), inner = product(x, axis + 1);
  const auto count = static_cast<int64_t>(rows.size());
  if (outer * count * inner != ctx.out_elements)
    ctx.fail("the output " + shape_text(ctx.out_shape) + " does not hold the gathered elements");
  c.let_int("outer", "o / " + num(count * inner));
  c.let_int("k", "(o / " + num(inner) + ") % " + num(count));
  c.let_int("inner", "o % " + num(inner));
  std::string row = "k";
  if (count == 1) {
    row = num(rows[0]);
  } else {
    c.int_table("rows", rows);
    row = "rows[k]";
  }
  c.assign("v", ctx.ld(0, "(outer * " + num(n) + " + " + row + ") * " + num(inner) + " + inner"));
}

/// Expand: X broadcast to the output (numpy's rule; the shape input is read by shape
/// inference, the output's shape is the graph's).
void expand_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t> strides = broadcast_strides(ctx, ctx.shape_of(0), ctx.out_shape);
  if (product(ctx.shape_of(0)) == ctx.out_elements) return c.assign("v", ctx.ld(0, "o"));
  decode(c, "o", "q", ctx.out_shape);
  c.assign("v", ctx.ld(0, dot("q", strides)));
}

/// Tile: output position q reads X at q mod X's extent along every axis.
void tile_body(Code& c, const OpContext& ctx) {
  const std::vector<int64_t>& x = ctx.shape_of(0);
  const std::vector<int64_t>& out = ctx.out_shape;
  if (out.size() != x.size()) ctx.fail("the output's rank differs from the input's");
  auto repeats = ctx.ints_input(1);
  if (!repeats || repeats->size() != x.size()) ctx.fail("needs repeats, one per axis");
  for (size_t d = 0; d < x.size(); ++d)
    if (out[d] != x[d] * (*repeats)[d]) ctx.fail("the output's shape is not X's times repeats");
  const std::vector<int64_t> strides = row_major_strides(x);
  decode(c, "o", "q", out);
  std::string offset;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 1) continue;
    const std::string q = "q" + num(static_cast<int64_t>(d));
    offset += (offset.empty() ? "" : " + ") + std::string("(") + q + " % " + num(x[d]) + ") * " +
              num(strides[d]);
  }
  c.assign("v", ctx.ld(0, offset.empty() ? "0" : offset));
}

}  // namespace

std::vector<BodyEntry> layout_bodies() {
  return {
      {"Concat", concat_body}, {"Transpose", transpose_body}, {"Reshape", copy_body},
      {"Flatten", copy_body},  {"Identity", copy_body},       {"Dropout", copy_body},
      {"Squeeze", copy_body},  {"Unsqueeze", copy_body},      {"Slice", slice_body},
      {"Pad", pad_body},       {"Gather", gather_body},       {"Expand", expand_body},
      {"Tile", tile_body},
  };
}

}  // namespace webtune::deploy::glue
