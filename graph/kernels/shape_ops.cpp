/// \file shape_ops.cpp
/// Reference kernels that move data without computing: Identity, Dropout (inference),
/// Reshape, Flatten, Transpose and Concat. They run on any element type (float32 data or the
/// int64 / int32 / bool values in Value::ints), since shape arithmetic graphs feed them ints.

#include <algorithm>
#include <numeric>

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
      for (size_t i = rank; i-- > 0;) {
        if (++index[i] < y.shape[i]) break;
        index[i] = 0;
      }
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

}  // namespace webtune::graph::kernels
