/// \file shape_ops.cpp
/// Reference kernels that move data or make shapes without computing. They run on any element
/// type (float32 data or the int64 / int32 / bool values in Value::ints), since shape arithmetic
/// graphs feed them ints:
///  - Identity (1+), Dropout (7+, inference; see dropout()), Reshape (5+, `allowzero` 14),
///    Flatten (1+), Transpose (1+), Concat (4+);
///  - Shape (1+; `start` / `end` from opset 15, clamped to [0, rank]) and Size (1+): int64;
///  - Squeeze, Unsqueeze (1+: `axes` an attribute before opset 13, input 1 from 13 on; the node
///    tells which); Expand (8+, bidirectional broadcast), Tile (6+);
///  - ConstantOfShape (9+): `value` read as a 1-element std::vector<float> or
///    std::vector<int64_t> attribute (or a float / int one), default float 0; an int value takes
///    the element type the graph gives the output (int64, int32 or bool);
///  - Range (11+): float or int, max(ceil((limit - start) / delta), 0) elements.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "kernels.hpp"

namespace webtune::graph::kernels {
namespace {

const Value& any_input(KernelContext& ctx, size_t i, const char* what) {
  return ctx.input(i, what);
}

/// `x` with a new shape of the same element count.
Value reshaped(const Value& x, std::vector<int64_t> shape) {
  Value y = x;
  y.shape = std::move(shape);
  return y;
}

/// Calls f(values_of_x, values_of_y) on the float or the int vectors, as `x`'s type says.
template <typename F>
void on_elements(const Value& x, Value& y, F f) {
  y.type = x.type;
  if (x.is_float())
    f(x.data, y.data);
  else
    f(x.ints, y.ints);
}

}  // namespace

void identity(KernelContext& ctx) {
  ctx.outputs[0] = any_input(ctx, 0, "input");
}

void dropout(KernelContext& ctx) {
  const Value& x = any_input(ctx, 0, "data");
  // Dropout-12/13: optional inputs ratio (default 0.5) and training_mode (default false). In
  // inference it is the identity with an all-true mask; in training with ratio 0 as well.
  // Earlier opsets have only the ratio attribute and is_test; the reference runs inference.
  if (const Value* training = ctx.optional_input(2)) {
    const bool on = training->is_float() ? training->data.at(0) != 0.0f : training->ints.at(0) != 0;
    double ratio = 0.5;
    if (const Value* r = ctx.optional_input(1))
      ratio = r->is_float() ? r->data.at(0) : static_cast<double>(r->ints.at(0));
    if (on && ratio != 0.0)
      fail("training_mode is true with ratio " + std::to_string(ratio) +
           ": random dropout is not run (the reference executor runs inference)");
  }
  ctx.outputs[0] = x;
  if (ctx.wanted(1)) {
    Value& mask = ctx.outputs[1];
    mask.shape = x.shape;
    mask.type = ctx.output_types[1];
    // Dropout-10 and later: a bool mask; Dropout-7: a mask of the input's type.
    if (mask.is_float())
      mask.data.assign(x.elements(), 1.0f);
    else
      mask.ints.assign(x.elements(), 1);
  }
}

void reshape(KernelContext& ctx) {
  const Value& x = any_input(ctx, 0, "data");
  const Value& s = ctx.input(1, "shape");
  if (s.is_float() || s.shape.size() != 1)
    fail("the shape input must be a 1-D int64 tensor, not " + std::string(data_type_name(s.type)) +
         " " + shape_text(s.shape));
  const bool allowzero = ctx.node.get_int("allowzero", 0) != 0;
  std::vector<int64_t> shape = s.ints;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      // 0 copies the input's dimension at the same index.
      if (i >= x.shape.size())
        fail("shape " + shape_text(s.ints) + " copies dimension " + std::to_string(i) +
             " (0), which the input " + shape_text(x.shape) + " does not have");
      shape[i] = x.shape[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) fail("shape " + shape_text(s.ints) + " has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      fail("shape " + shape_text(s.ints) + " has a negative dimension other than -1");
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.elements() % known != 0)
      fail("cannot infer the -1 of shape " + shape_text(s.ints) + " for an input of " +
           std::to_string(x.elements()) + " elements");
    shape[static_cast<size_t>(infer)] = x.elements() / known;
  }
  if (product(shape, 0, shape.size()) != x.elements())
    fail("shape " + shape_text(s.ints) + " (" + shape_text(shape) + ") does not hold the input's " +
         std::to_string(x.elements()) + " elements " + shape_text(x.shape));
  ctx.outputs[0] = reshaped(x, std::move(shape));
}

void flatten(KernelContext& ctx) {
  const Value& x = any_input(ctx, 0, "input");
  // Flatten-13: axis in [-r, r]; the result is [prod(d[:axis]), prod(d[axis:])].
  const auto axis =
      static_cast<size_t>(normalize_axis(ctx.node.get_int("axis", 1), x.shape.size(), "axis", 1));
  ctx.outputs[0] = reshaped(x, {product(x.shape, 0, axis), product(x.shape, axis, x.shape.size())});
}

void transpose(KernelContext& ctx) {
  const Value& x = any_input(ctx, 0, "data");
  const size_t rank = x.shape.size();
  std::vector<int64_t> reverse(rank);
  for (size_t i = 0; i < rank; ++i) reverse[i] = static_cast<int64_t>(rank - 1 - i);
  const std::vector<int64_t> perm = ctx.node.get_ints("perm", reverse);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(rank);
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota)
    fail("perm " + shape_text(perm) + " is not a permutation of the input's " +
         std::to_string(rank) + " axes");
  std::vector<int64_t> in_strides(rank, 1);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * x.shape[i];
  Value& y = ctx.outputs[0];
  y.shape.resize(rank);
  std::vector<int64_t> strides(rank);  // input stride of each output axis
  for (size_t i = 0; i < rank; ++i) {
    y.shape[i] = x.shape[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  on_elements(x, y, [&](const auto& in, auto& out) {
    out.resize(in.size());
    std::vector<int64_t> index(rank, 0);
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t offset = 0;
      for (size_t i = 0; i < rank; ++i) offset += index[i] * strides[i];
      out[o] = in[static_cast<size_t>(offset)];
      next_index(index, y.shape);
    }
  });
}

void concat(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (node.inputs.empty()) fail("has no inputs");
  if (!node.has("axis")) fail("needs the attribute axis");
  const Value& first = any_input(ctx, 0, "inputs");
  const size_t rank = first.shape.size();
  const auto axis = static_cast<size_t>(normalize_axis(node.get_int("axis", 0), rank, "axis"));
  std::vector<int64_t> out_shape = first.shape;
  out_shape[axis] = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Value& v = any_input(ctx, i, "inputs");
    bool fits = v.shape.size() == rank && v.is_float() == first.is_float();
    for (size_t d = 0; fits && d < rank; ++d) fits = d == axis || v.shape[d] == first.shape[d];
    if (!fits)
      fail("input " + std::to_string(i) + " " + std::string(data_type_name(v.type)) + " " +
           shape_text(v.shape) + " does not concatenate with input 0 " +
           std::string(data_type_name(first.type)) + " " + shape_text(first.shape) +
           " along axis " + std::to_string(axis));
    out_shape[axis] += v.shape[axis];
  }
  const int64_t outer = product(first.shape, 0, axis);
  Value& y = ctx.outputs[0];
  y.shape = out_shape;
  on_elements(first, y, [&](const auto& /*in*/, auto& out) {
    out.resize(static_cast<size_t>(product(out_shape, 0, rank)));
    size_t o = 0;
    for (int64_t r = 0; r < outer; ++r)
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const Value& v = *ctx.inputs[i];
        const int64_t block = product(v.shape, axis, rank);
        const auto& values = [&]() -> const auto& {
          if constexpr (std::is_same_v<std::decay_t<decltype(out)>, std::vector<float>>)
            return v.data;
          else
            return v.ints;
        }
        ();
        std::copy_n(values.begin() + r * block, block, out.begin() + static_cast<int64_t>(o));
        o += static_cast<size_t>(block);
      }
  });
}

void shape(KernelContext& ctx) {
  const Value& x = ctx.input(0, "data");
  const auto rank = static_cast<int64_t>(x.shape.size());
  // Shape-15: start / end, negative from the end, clamped to [0, rank].
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamp(ctx.node.get_int("start", 0));
  const int64_t end = clamp(ctx.node.get_int("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x.shape[static_cast<size_t>(i)]);
  const auto n = static_cast<int64_t>(dims.size());
  ctx.outputs[0] = Value::int64s({n}, std::move(dims));
}

void size(KernelContext& ctx) {
  ctx.outputs[0] = Value::int64s({}, {ctx.input(0, "data").elements()});
}

namespace {

/// Squeeze's / Unsqueeze's axes: input 1 (opset 13 on) or the attribute (before 13).
std::vector<int64_t> axes_of(const KernelContext& ctx, bool required) {
  if (const Value* a = ctx.optional_input(1)) return int_list(*a, "axes");
  if (required && !ctx.node.has("axes"))
    fail("needs axes (the attribute, or input 1 from opset 13)");
  return ctx.node.get_ints("axes", {});
}

}  // namespace

void squeeze(KernelContext& ctx) {
  const Value& x = ctx.input(0, "data");
  const std::vector<int64_t> axes = axes_of(ctx, false);
  std::vector<bool> drop(x.shape.size(), false);
  for (int64_t a : axes) {
    const auto i = static_cast<size_t>(normalize_axis(a, x.shape.size(), "axis"));
    if (x.shape[i] != 1)
      fail("axis " + std::to_string(a) + " of " + shape_text(x.shape) + " is not 1");
    drop[i] = true;
  }
  std::vector<int64_t> shape;
  for (size_t i = 0; i < x.shape.size(); ++i)
    if (!(axes.empty() ? x.shape[i] == 1 : drop[i])) shape.push_back(x.shape[i]);
  ctx.outputs[0] = reshaped(x, std::move(shape));
}

void unsqueeze(KernelContext& ctx) {
  const Value& x = ctx.input(0, "data");
  const std::vector<int64_t> axes = axes_of(ctx, true);
  const size_t rank = x.shape.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    const auto i = static_cast<size_t>(normalize_axis(a, rank, "axis"));
    if (inserted[i]) fail("axis " + std::to_string(a) + " is listed twice");
    inserted[i] = true;
  }
  std::vector<int64_t> shape;
  size_t next = 0;
  for (size_t i = 0; i < rank; ++i) shape.push_back(inserted[i] ? 1 : x.shape[next++]);
  ctx.outputs[0] = reshaped(x, std::move(shape));
}

void expand(KernelContext& ctx) {
  const Value& x = ctx.input(0, "input");
  const std::vector<int64_t> target = int_list(ctx.input(1, "shape"), "shape");
  Value& y = ctx.outputs[0];
  y.shape = broadcast_shape(x.shape, target);  // bidirectional: a 1 in `shape` keeps x's dim
  on_elements(x, y, [&](const auto& in, auto& out) {
    out.resize(static_cast<size_t>(product(y.shape, 0, y.shape.size())));
    for_each_broadcast<1>(y.shape, {&x.shape},
                          [&](int64_t o, const std::array<int64_t, 1>& i) { out[o] = in[i[0]]; });
  });
}

void tile(KernelContext& ctx) {
  const Value& x = ctx.input(0, "input");
  const std::vector<int64_t> repeats = int_list(ctx.input(1, "repeats"), "repeats");
  const size_t rank = x.shape.size();
  if (repeats.size() != rank)
    fail("repeats " + shape_text(repeats) + " has " + std::to_string(repeats.size()) +
         " values for a rank-" + std::to_string(rank) + " input");
  Value& y = ctx.outputs[0];
  y.shape.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (repeats[i] < 0) fail("repeats " + shape_text(repeats) + " has a negative value");
    y.shape[i] = x.shape[i] * repeats[i];
  }
  const std::vector<int64_t> in_strides = strides_of(x.shape);
  on_elements(x, y, [&](const auto& in, auto& out) {
    out.resize(static_cast<size_t>(product(y.shape, 0, rank)));
    std::vector<int64_t> index(rank, 0);
    for (size_t o = 0; o < out.size(); ++o) {
      int64_t offset = 0;
      for (size_t i = 0; i < rank; ++i) offset += (index[i] % x.shape[i]) * in_strides[i];
      out[o] = in[static_cast<size_t>(offset)];
      next_index(index, y.shape);
    }
  });
}

void constant_of_shape(KernelContext& ctx) {
  const std::vector<int64_t> shape = int_list(ctx.input(0, "input"), "input");
  for (int64_t d : shape)
    if (d < 0) fail("shape " + shape_text(shape) + " has a negative dimension");
  Value& y = ctx.outputs[0];
  y.shape = shape;
  const auto n = static_cast<size_t>(product(shape, 0, shape.size()));
  // The TENSOR attribute `value` arrives as a one-element list (or a single number).
  const auto it = ctx.node.attributes.find("value");
  if (it == ctx.node.attributes.end()) {
    y.data.assign(n, 0.0f);
    return;
  }
  const Attribute& a = it->second;
  auto one = [](const auto& list) {
    if (list.size() != 1)
      fail("value has " + std::to_string(list.size()) + " elements; it must have one");
    return list[0];
  };
  if (const auto* f = std::get_if<float>(&a)) {
    y.data.assign(n, *f);
  } else if (const auto* fs = std::get_if<std::vector<float>>(&a)) {
    y.data.assign(n, one(*fs));
  } else {
    int64_t v;
    if (const auto* i = std::get_if<int64_t>(&a))
      v = *i;
    else if (const auto* is = std::get_if<std::vector<int64_t>>(&a))
      v = one(*is);
    else
      fail("value is a string; it must be a one-element tensor");
    y.type = is_int(ctx.output_types[0]) ? ctx.output_types[0] : DataType::kInt64;
    y.ints.assign(n, wrap_int(v, y.type));
  }
}

void range(KernelContext& ctx) {
  const Value& start = ctx.input(0, "start");
  const Value& limit = ctx.input(1, "limit");
  const Value& delta = ctx.input(2, "delta");
  if (start.is_float() != limit.is_float() || start.is_float() != delta.is_float())
    fail("start, limit and delta must have one element type");
  Value& y = ctx.outputs[0];
  y.type = start.type;
  if (start.is_float()) {
    const float s = static_cast<float>(scalar_of(start, "start"));
    const float l = static_cast<float>(scalar_of(limit, "limit"));
    const float d = static_cast<float>(scalar_of(delta, "delta"));
    if (d == 0.0f) fail("delta is 0");
    // The spec's number of elements, in float32: max(ceil((limit - start) / delta), 0).
    const double n = std::max(std::ceil((l - s) / d), 0.0f);
    if (!(n < 1e9)) fail("would have " + std::to_string(n) + " elements");
    y.shape = {static_cast<int64_t>(n)};
    // As ONNX's loop: each value is the previous one plus delta, in float32.
    y.data.resize(static_cast<size_t>(n));
    float v = s;
    for (float& out : y.data) {
      out = v;
      v += d;
    }
  } else {
    if (start.elements() != 1 || limit.elements() != 1 || delta.elements() != 1)
      fail("start, limit and delta must be scalars");
    const int64_t s = start.ints[0], l = limit.ints[0], d = delta.ints[0];
    if (d == 0) fail("delta is 0");
    // ceil((l - s) / d) in integers, without overflow for the ranges a shape can have.
    const int64_t span = l - s;
    int64_t n = span / d;
    if (span % d != 0 && ((span < 0) == (d < 0))) ++n;
    n = std::max<int64_t>(n, 0);
    if (n > (int64_t{1} << 30)) fail("would have " + std::to_string(n) + " elements");
    y.shape = {n};
    y.ints.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) y.ints[i] = wrap_int(s + i * d, y.type);
  }
}

}  // namespace webtune::graph::kernels
