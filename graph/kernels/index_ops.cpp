/// \file index_ops.cpp
/// Reference kernels that pick elements by index, on any element type (float32 or int):
///  - Gather (1+; any `axis`, negative indices, int64 / int32 indices), GatherElements (11+);
///  - Slice: opset 1's attributes `starts` / `ends` / `axes`, and from opset 10 on the inputs
///    starts, ends, axes, steps (the node tells which form); negative starts / ends count from
///    the end, bounds beyond the axis (INT64_MAX, INT64_MIN) are clamped, negative steps run
///    backwards;
///  - Split (2+): `split` an attribute before opset 13, input 1 from 13 on; without it equal
///    parts, one per output (ceil-sized, the last one smaller, as opset 18 allows);
///  - Pad (2+): `mode` constant / reflect / edge; `pads` (and `value`) attributes before opset
///    11, the inputs pads, constant_value (and opset 18's axes) from 11 on; negative pads crop.

#include <algorithm>
#include <limits>

#include "graph/index_plan.hpp"
#include "kernels.hpp"

namespace webtune::graph::kernels {
namespace {

/// Calls f(in_vector, out_vector) with y given x's element type.
template <typename F>
void with_elements(const Value& x, Value& y, F f) {
  y.type = x.type;
  if (x.is_float())
    f(x.data, y.data);
  else
    f(x.ints, y.ints);
}

/// Index `i` of an axis of `n` elements, negative from the end; throws when outside.
int64_t checked_index(int64_t i, int64_t n) {
  if (i < -n || i >= n)
    fail("index " + std::to_string(i) + " is outside [" + std::to_string(-n) + ", " +
         std::to_string(n - 1) + "]");
  return i < 0 ? i + n : i;
}

/// Copies the box of `x` starting at `begin` with element steps `step` and extent `shape` into
/// y (which gets that shape).
void strided_copy(const Value& x, const std::vector<int64_t>& begin,
                  const std::vector<int64_t>& step, const std::vector<int64_t>& shape, Value& y) {
  const size_t rank = x.shape.size();
  const std::vector<int64_t> strides = strides_of(x.shape);
  y.shape = shape;
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) base += begin[d] * strides[d];
  with_elements(x, y, [&](const auto& in, auto& out) {
    out.resize(static_cast<size_t>(product(shape, 0, rank)));
    if (out.empty()) return;
    std::vector<int64_t> index(rank, 0);
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t offset = base;
      for (size_t d = 0; d < rank; ++d) offset += index[d] * step[d] * strides[d];
      out[o] = in[static_cast<size_t>(offset)];
      next_index(index, shape);
    }
  });
}

}  // namespace

void gather(KernelContext& ctx) {
  const Value& x = ctx.input(0, "data");
  const Value& idx = ctx.input(1, "indices");
  if (idx.is_float()) fail("indices must be int64 or int32, not float32");
  if (x.shape.empty()) fail("data is a scalar; Gather needs rank >= 1");
  const auto axis =
      static_cast<size_t>(normalize_axis(ctx.node.get_int("axis", 0), x.shape.size(), "axis"));
  const int64_t outer = product(x.shape, 0, axis), n = x.shape[axis];
  const int64_t inner = product(x.shape, axis + 1, x.shape.size());
  Value& y = ctx.outputs[0];
  y.shape.assign(x.shape.begin(), x.shape.begin() + static_cast<int64_t>(axis));
  y.shape.insert(y.shape.end(), idx.shape.begin(), idx.shape.end());
  y.shape.insert(y.shape.end(), x.shape.begin() + static_cast<int64_t>(axis) + 1, x.shape.end());
  std::vector<int64_t> rows(idx.ints.size());
  for (size_t k = 0; k < rows.size(); ++k) rows[k] = checked_index(idx.ints[k], n);
  with_elements(x, y, [&](const auto& in, auto& out) {
    out.resize(static_cast<size_t>(outer * static_cast<int64_t>(rows.size()) * inner));
    auto o = out.begin();
    for (int64_t r = 0; r < outer; ++r)
      for (int64_t row : rows) o = std::copy_n(in.begin() + (r * n + row) * inner, inner, o);
  });
}

void gather_elements(KernelContext& ctx) {
  const Value& x = ctx.input(0, "data");
  const Value& idx = ctx.input(1, "indices");
  if (idx.is_float()) fail("indices must be int64 or int32, not float32");
  const size_t rank = x.shape.size();
  if (idx.shape.size() != rank)
    fail("indices " + shape_text(idx.shape) + " and data " + shape_text(x.shape) +
         " must have one rank");
  const auto axis = static_cast<size_t>(normalize_axis(ctx.node.get_int("axis", 0), rank, "axis"));
  for (size_t d = 0; d < rank; ++d)
    if (d != axis && idx.shape[d] > x.shape[d])
      fail("indices " + shape_text(idx.shape) + " is larger than data " + shape_text(x.shape) +
           " on axis " + std::to_string(d));
  const std::vector<int64_t> strides = strides_of(x.shape);
  Value& y = ctx.outputs[0];
  y.shape = idx.shape;
  with_elements(x, y, [&](const auto& in, auto& out) {
    out.resize(idx.ints.size());
    std::vector<int64_t> index(rank, 0);
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d)
        offset += (d == axis ? checked_index(idx.ints[o], x.shape[d]) : index[d]) * strides[d];
      out[o] = in[static_cast<size_t>(offset)];
      next_index(index, idx.shape);
    }
  });
}

void slice(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = ctx.input(0, "data");
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.inputs.size() > 1) {  // Slice-10 and later: inputs
    starts = int_list(ctx.input(1, "starts"), "starts");
    ends = int_list(ctx.input(2, "ends"), "ends");
    if (const Value* a = ctx.optional_input(3)) axes = int_list(*a, "axes");
    if (const Value* s = ctx.optional_input(4)) steps = int_list(*s, "steps");
  } else {  // Slice-1: attributes
    if (!node.has("starts") || !node.has("ends"))
      fail("needs starts and ends (attributes before opset 10, inputs from 10 on)");
    starts = node.get_ints("starts", {});
    ends = node.get_ints("ends", {});
    axes = node.get_ints("axes", {});
  }
  const SliceBox box = slice_box(x.shape, starts, ends, axes, steps);
  strided_copy(x, box.begin, box.step, box.shape, ctx.outputs[0]);
}

void split(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = ctx.input(0, "input");
  const auto axis =
      static_cast<size_t>(normalize_axis(node.get_int("axis", 0), x.shape.size(), "axis"));
  const int64_t dim = x.shape[axis];
  const size_t parts = node.outputs.size();
  std::vector<int64_t> sizes;
  if (const Value* s = ctx.optional_input(1))
    sizes = int_list(*s, "split");
  else
    sizes = node.get_ints("split", {});
  if (sizes.empty()) {  // equal parts: ceil(dim / parts) each, the last one what remains
    const int64_t chunk = (dim + static_cast<int64_t>(parts) - 1) / static_cast<int64_t>(parts);
    for (size_t k = 0; k < parts; ++k)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * static_cast<int64_t>(k))));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail("split " + shape_text(sizes) + " has a negative size");
    total += s;
  }
  if (sizes.size() != parts || total != dim)
    fail("split " + shape_text(sizes) + " does not cut axis " + std::to_string(axis) + " (" +
         std::to_string(dim) + ") into the node's " + std::to_string(parts) + " outputs");
  std::vector<int64_t> begin(x.shape.size(), 0), step(x.shape.size(), 1), shape = x.shape;
  for (size_t k = 0; k < parts; ++k) {
    shape[axis] = sizes[k];
    if (ctx.wanted(k)) strided_copy(x, begin, step, shape, ctx.outputs[k]);
    begin[axis] += sizes[k];
  }
}

void pad(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = ctx.input(0, "data");
  const size_t rank = x.shape.size();
  const std::string mode = node.get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    fail("mode '" + mode + "' is not constant, reflect or edge");
  std::vector<int64_t> pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (node.inputs.size() > 1) {  // Pad-11 and later
    pads = int_list(ctx.input(1, "pads"), "pads");
    if (const Value* v = ctx.optional_input(2)) value = scalar_of(*v, "constant_value");
    if (const Value* a = ctx.optional_input(3)) axes = int_list(*a, "axes");
  } else {
    if (!node.has("pads")) fail("needs pads (an attribute before opset 11, input 1 from 11 on)");
    pads = node.get_ints("pads", {});
    value = node.get_float("value", 0.0f);
  }
  std::vector<std::vector<int64_t>> from = pad_sources(x.shape, mode, pads, axes);
  Value& y = ctx.outputs[0];
  y.shape.resize(rank);
  for (size_t d = 0; d < rank; ++d) y.shape[d] = static_cast<int64_t>(from[d].size());
  const std::vector<int64_t> strides = strides_of(x.shape);
  with_elements(x, y, [&](const auto& in, auto& out) {
    using T = typename std::decay_t<decltype(out)>::value_type;
    const T fill = static_cast<T>(value);
    out.resize(static_cast<size_t>(product(y.shape, 0, rank)));
    if (out.empty()) return;
    std::vector<int64_t> index(rank, 0);
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t offset = 0;
      bool inside = true;
      for (size_t d = 0; d < rank && inside; ++d) {
        const int64_t i = from[d][static_cast<size_t>(index[d])];
        inside = i >= 0;
        offset += i * strides[d];
      }
      out[o] = inside ? in[static_cast<size_t>(offset)] : fill;
      next_index(index, y.shape);
    }
  });
}

}  // namespace webtune::graph::kernels

namespace webtune::graph {

SliceBox slice_box(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& starts,
                   const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                   std::vector<int64_t> steps) {
  using namespace kernels;
  const size_t rank = x_shape.size();
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail("starts " + shape_text(starts) + ", ends " + shape_text(ends) + ", axes " +
         shape_text(axes) + " and steps " + shape_text(steps) + " must have one length");
  std::vector<int64_t> begin(rank, 0), step(rank, 1), shape = x_shape;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    const auto a = static_cast<size_t>(normalize_axis(axes[i], rank, "axis"));
    if (seen[a]) fail("axis " + std::to_string(axes[i]) + " is listed twice");
    seen[a] = true;
    const int64_t dim = x_shape[a], s = steps[i];
    if (s == 0) fail("step 0 on axis " + std::to_string(axes[i]));
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t length;
    if (s > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      length = end > start ? (end - start + s - 1) / s : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      length = start > end ? (start - end + (-s) - 1) / (-s) : 0;
    }
    begin[a] = length ? start : 0;
    step[a] = s;
    shape[a] = length;
  }
  return {begin, step, shape};
}

std::vector<std::vector<int64_t>> pad_sources(const std::vector<int64_t>& x_shape,
                                              const std::string& mode,
                                              const std::vector<int64_t>& pads,
                                              std::vector<int64_t> axes) {
  using namespace kernels;
  const size_t rank = x_shape.size();
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    fail("mode '" + mode + "' is not constant, reflect or edge");
  if (axes.empty())
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  if (pads.size() != 2 * axes.size())
    fail("pads " + shape_text(pads) + " has " + std::to_string(pads.size()) + " values; " +
         std::to_string(axes.size()) + " axes need " + std::to_string(2 * axes.size()));
  std::vector<int64_t> pb(rank, 0), pe(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(normalize_axis(axes[i], rank, "axis"));
    pb[a] = pads[i];
    pe[a] = pads[i + axes.size()];
  }
  // For each axis, the input position of every output position (-1: the constant).
  std::vector<std::vector<int64_t>> from(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = x_shape[d], out = n + pb[d] + pe[d];
    if (out < 0)
      fail("pads " + shape_text(pads) + " crop more than axis " + std::to_string(d) + " has");
    for (int64_t o = 0; o < out; ++o) {
      int64_t i = o - pb[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          i = -1;
        } else if (n == 0) {
          fail("mode " + mode + " pads an empty axis " + std::to_string(d));
        } else if (mode == "edge" || n == 1) {
          i = std::clamp<int64_t>(i, 0, n - 1);
        } else {  // reflect, mirrored about the first and last element as often as needed
          const int64_t period = 2 * (n - 1);
          i %= period;
          if (i < 0) i += period;
          if (i >= n) i = period - i;
        }
      }
      from[d].push_back(i);
    }
  }
  return from;
}

}  // namespace webtune::graph
