/// \file conv_pool.cpp
/// Reference kernels with a sliding window: Conv / FusedConv (1+), ConvTranspose (1+), MaxPool
/// (8+; 1 to 7 without Indices), AveragePool (7+), GlobalAveragePool and GlobalMaxPool (1+).
/// 1-D, 2-D and 3-D windows share one code path: the spatial dimensions are padded at the front
/// to three (size 1, kernel 1, stride 1, no padding).
///
/// Window geometry follows the ONNX operator docs (Conv-11, MaxPool-12, AveragePool-11):
///   NOTSET:  out = floor((in + pad_begin + pad_end - ((k - 1)·dilation + 1)) / stride) + 1,
///            ceil instead of floor with ceil_mode (pools), dropping a last window that would
///            start inside the end padding (PyTorch's and onnxruntime's rule, the ONNX docs' from
///            opset 19 on);
///   VALID:   no padding;
///   SAME_UPPER / SAME_LOWER: out = ceil(in / stride); total padding
///            max(0, (out - 1)·stride + (k - 1)·dilation + 1 - in), the odd one at the end
///            (UPPER) or at the beginning (LOWER).

#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/window_plan.hpp"
#include "kernels.hpp"

namespace webtune::graph::kernels {
namespace {

constexpr size_t kDims = 3;

/// A window over up to three spatial dimensions, padded at the front to three.
struct Geometry {
  size_t rank = 0;  ///< the node's spatial rank, 1 to 3
  int64_t in[kDims], k[kDims], s[kDims], d[kDims], pb[kDims], pe[kDims], out[kDims];

  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  /// The node's output spatial shape (without the front padding).
  std::vector<int64_t> out_shape() const {
    return std::vector<int64_t>(out + kDims - rank, out + kDims);
  }
};

/// Attribute `key` (default: `size` times `fill`); throws unless it has `size` values.
std::vector<int64_t> ints_of_size(const Node& node, const char* key, size_t size, int64_t fill,
                                  size_t rank) {
  std::vector<int64_t> v = node.get_ints(key, std::vector<int64_t>(size, fill));
  if (v.size() != size)
    fail(std::string("attribute '") + key + "' " + shape_text(v) + " has " +
         std::to_string(v.size()) + " values; a " + std::to_string(rank) + "-D window needs " +
         std::to_string(size));
  return v;
}

/// The window of `node` over input spatial dims `in_spatial` with kernel `kernel`; `pool` reads
/// ceil_mode.
Geometry geometry(const Node& node, const std::vector<int64_t>& in_spatial,
                  const std::vector<int64_t>& kernel, bool pool) {
  const size_t r = in_spatial.size();
  if (r < 1 || r > kDims)
    fail("the input has " + std::to_string(r) +
         " spatial dimensions; the reference executor "
         "runs 1-D, 2-D and 3-D windows");
  if (kernel.size() != r)
    fail("kernel_shape " + shape_text(kernel) + " does not match the input's " + std::to_string(r) +
         " spatial dimensions");
  const auto strides = ints_of_size(node, "strides", r, 1, r);
  const auto dilations = ints_of_size(node, "dilations", r, 1, r);
  const auto pads = ints_of_size(node, "pads", 2 * r, 0, r);
  const std::string auto_pad = node.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    fail("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  const int64_t ceil_mode = pool ? node.get_int("ceil_mode", 0) : 0;
  if (ceil_mode != 0 && ceil_mode != 1)
    fail("ceil_mode " + std::to_string(ceil_mode) + " is not 0 or 1");

  Geometry g;
  g.rank = r;
  const size_t off = kDims - r;
  for (size_t i = 0; i < kDims; ++i) {
    g.in[i] = g.k[i] = g.s[i] = g.d[i] = g.out[i] = 1;
    g.pb[i] = g.pe[i] = 0;
  }
  for (size_t j = 0; j < r; ++j) {
    const size_t i = off + j;
    g.in[i] = in_spatial[j];
    g.k[i] = kernel[j];
    g.s[i] = strides[j];
    g.d[i] = dilations[j];
    if (g.k[i] < 1) fail("kernel size " + std::to_string(g.k[i]) + " is not positive");
    if (g.s[i] < 1) fail("stride " + std::to_string(g.s[i]) + " is not positive");
    if (g.d[i] < 1) fail("dilation " + std::to_string(g.d[i]) + " is not positive");
    const int64_t eff_k = (g.k[i] - 1) * g.d[i] + 1;
    if (auto_pad == "NOTSET") {
      g.pb[i] = pads[j];
      g.pe[i] = pads[j + r];
      if (g.pb[i] < 0 || g.pe[i] < 0) fail("pads " + shape_text(pads) + " has a negative value");
      const int64_t span = g.in[i] + g.pb[i] + g.pe[i] - eff_k;
      if (span < 0)
        fail("the window (" + std::to_string(eff_k) +
             " with dilation) is larger than the padded "
             "input (" +
             std::to_string(g.in[i] + g.pb[i] + g.pe[i]) + ")");
      if (ceil_mode) {
        g.out[i] = (span + g.s[i] - 1) / g.s[i] + 1;
        if ((g.out[i] - 1) * g.s[i] >= g.in[i] + g.pb[i]) --g.out[i];
      } else {
        g.out[i] = span / g.s[i] + 1;
      }
    } else if (auto_pad == "VALID") {
      if (g.in[i] < eff_k)
        fail("the window (" + std::to_string(eff_k) + ") is larger than the input (" +
             std::to_string(g.in[i]) + ") with auto_pad VALID");
      g.out[i] = (g.in[i] - eff_k) / g.s[i] + 1;
    } else {
      g.out[i] = (g.in[i] + g.s[i] - 1) / g.s[i];
      const int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * g.s[i] + eff_k - g.in[i]);
      const int64_t small = total / 2;
      g.pb[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pe[i] = total - g.pb[i];
    }
  }
  return g;
}

/// The output positions o in [lo, hi) whose tap o·s + offset lies in [0, in).
void tap_range(int64_t offset, int64_t s, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  // o·s + offset >= 0  <=>  o >= ceil(-offset / s)
  lo = offset >= 0 ? 0 : (-offset + s - 1) / s;
  // o·s + offset <= in - 1  <=>  o <= floor((in - 1 - offset) / s)
  const int64_t last = in - 1 - offset;
  hi = last < 0 ? 0 : std::min(out, last / s + 1);
  lo = std::min(lo, hi);
}

const std::vector<int64_t> spatial_of(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

const Value& pool_input(KernelContext& ctx) {
  const Value& x = ctx.float_input(0, "X");
  if (x.shape.size() < 3)
    fail("X has shape " + shape_text(x.shape) + "; a pool needs [N, C, spatial...]");
  return x;
}

/// What MaxPool and AveragePool share: the input X [N, C, spatial...], the window geometry
/// (kernel_shape required), and the output Y [N, C, out spatial...], sized and shaped.
struct Pool {
  const Value& x;
  Geometry g;
  int64_t planes, in_size, out_size;  ///< N·C, elements of one input / output plane
  Value& y;
};

Pool pool_setup(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = pool_input(ctx);
  if (!node.has("kernel_shape")) fail("needs the attribute kernel_shape");
  const Geometry g = geometry(node, spatial_of(x.shape), node.get_ints("kernel_shape", {}), true);
  Value& y = ctx.outputs[0];
  y.shape = {x.shape[0], x.shape[1]};
  for (int64_t o : g.out_shape()) y.shape.push_back(o);
  const int64_t planes = x.shape[0] * x.shape[1];
  y.data.resize(static_cast<size_t>(planes * g.out_size()));
  return Pool{x, g, planes, g.in_size(), g.out_size(), y};
}

}  // namespace

void conv(KernelContext& ctx) {
  const Node& node = ctx.node;
  const bool fused = node.op_type == "FusedConv";
  const Value& x = ctx.float_input(0, "X");
  const Value& w = ctx.float_input(1, "W");
  if (x.shape.size() < 3 || w.shape.size() != x.shape.size())
    fail("X " + shape_text(x.shape) + " and W " + shape_text(w.shape) +
         " must be [N, C, spatial...] and [M, C/group, kernel...] of the same rank");
  const int64_t batch = x.shape[0], channels = x.shape[1], filters = w.shape[0];
  const int64_t group = node.get_int("group", 1);
  if (group < 1 || channels % group != 0 || filters % group != 0 || w.shape[1] * group != channels)
    fail("group " + std::to_string(group) + " does not fit X " + shape_text(x.shape) + " and W " +
         shape_text(w.shape) + " (C and M must divide by group, W's dim 1 must be C/group)");
  const std::vector<int64_t> kernel = spatial_of(w.shape);
  if (node.has("kernel_shape") && node.get_ints("kernel_shape", {}) != kernel)
    fail("kernel_shape " + shape_text(node.get_ints("kernel_shape", {})) +
         " differs from W's spatial dimensions " + shape_text(kernel));
  const Geometry g = geometry(node, spatial_of(x.shape), kernel, false);

  // Unfused Conv: an epilogue with just the optional bias B (Epilogue::apply adds it).
  Epilogue epilogue;
  if (fused) {
    epilogue = node.epilogue;
    epilogue.validate();
    if (node.inputs.size() != 2 + static_cast<size_t>(epilogue.extra_inputs()))
      fail("has " + std::to_string(node.inputs.size()) + " inputs; its epilogue '" +
           epilogue.suffix() + "' needs " + std::to_string(2 + epilogue.extra_inputs()));
  } else {
    epilogue.bias = ctx.optional_input(2) != nullptr;
  }
  std::vector<int64_t> out_shape = {batch, filters};
  for (int64_t o : g.out_shape()) out_shape.push_back(o);
  const auto [bias, residual] = epilogue_inputs(ctx, epilogue, filters, out_shape);

  Value& y = ctx.outputs[0];
  y.shape = out_shape;
  y.data.assign(static_cast<size_t>(product(out_shape, 0, out_shape.size())), 0.0f);
  const int64_t cg = channels / group, mg = filters / group;
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const int64_t taps = g.k[0] * g.k[1] * g.k[2];
  // One output plane accumulates in double; loops keep the output width innermost (contiguous
  // in the output, stride s[2] in the input) so that they vectorise.
  std::vector<double> acc(static_cast<size_t>(out_size));
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t m = 0; m < filters; ++m) {
      const int64_t grp = m / mg;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t c = 0; c < cg; ++c) {
        const float* xc = x.data.data() + (n * channels + grp * cg + c) * in_size;
        const float* wc = w.data.data() + (m * cg + c) * taps;
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          int64_t od_lo, od_hi;
          tap_range(kd * g.d[0] - g.pb[0], g.s[0], g.in[0], g.out[0], od_lo, od_hi);
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            int64_t oh_lo, oh_hi;
            tap_range(kh * g.d[1] - g.pb[1], g.s[1], g.in[1], g.out[1], oh_lo, oh_hi);
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const int64_t w_off = kw * g.d[2] - g.pb[2];
              int64_t ow_lo, ow_hi;
              tap_range(w_off, g.s[2], g.in[2], g.out[2], ow_lo, ow_hi);
              const double wv = wc[(kd * g.k[1] + kh) * g.k[2] + kw];
              for (int64_t od = od_lo; od < od_hi; ++od) {
                const int64_t id = od * g.s[0] + kd * g.d[0] - g.pb[0];
                for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                  const int64_t ih = oh * g.s[1] + kh * g.d[1] - g.pb[1];
                  const float* xr = xc + (id * g.in[1] + ih) * g.in[2] + w_off;
                  double* ar = acc.data() + (od * g.out[1] + oh) * g.out[2];
                  if (g.s[2] == 1) {
                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) ar[ow] += wv * xr[ow];
                  } else {
                    const int64_t sw = g.s[2];
                    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) ar[ow] += wv * xr[ow * sw];
                  }
                }
              }
            }
          }
        }
      }
      const int64_t base = (n * filters + m) * out_size;
      const double b = bias ? bias[m] : 0.0;
      for (int64_t i = 0; i < out_size; ++i)
        y.data[base + i] = static_cast<float>(
            epilogue.apply(acc[i], b, residual ? static_cast<double>(residual[base + i]) : 0.0));
    }
  }
}

void max_pool(KernelContext& ctx) {
  const int64_t storage_order = ctx.node.get_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1)
    fail("storage_order " + std::to_string(storage_order) + " is not 0 or 1");
  const Pool pool = pool_setup(ctx);
  const Value& x = pool.x;
  const Geometry& g = pool.g;
  const int64_t planes = pool.planes, in_size = pool.in_size, out_size = pool.out_size;
  Value& y = pool.y;
  Value* indices = ctx.wanted(1) ? &ctx.outputs[1] : nullptr;
  if (indices) {
    indices->type = DataType::kInt64;
    indices->shape = y.shape;
    indices->ints.resize(y.data.size());
  }
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x.data.data() + p * in_size;
    int64_t o = p * out_size;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t best_at[kDims] = {0, 0, 0};
          bool found = false;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
              if (ih < 0 || ih >= g.in[1]) continue;
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                if (iw < 0 || iw >= g.in[2]) continue;
                const float v = xp[(id * g.in[1] + ih) * g.in[2] + iw];
                // The first maximum wins, as in onnxruntime.
                if (!found || v > best) {
                  best = v;
                  best_at[0] = id;
                  best_at[1] = ih;
                  best_at[2] = iw;
                  found = true;
                }
              }
            }
          }
          y.data[o] = best;
          if (indices) {
            // Indices into the flattened input: row-major (storage_order 0) or with the spatial
            // dimensions in column-major order (1); the plane offset is the same for both.
            int64_t flat = 0;
            if (storage_order == 0) {
              flat = (best_at[0] * g.in[1] + best_at[1]) * g.in[2] + best_at[2];
            } else {
              int64_t stride = 1;
              for (size_t i = kDims - g.rank; i < kDims; ++i) {
                flat += best_at[i] * stride;
                stride *= g.in[i];
              }
            }
            indices->ints[o] = p * in_size + flat;
          }
        }
  }
}

void average_pool(KernelContext& ctx) {
  const int64_t include_pad = ctx.node.get_int("count_include_pad", 0);
  if (include_pad != 0 && include_pad != 1)
    fail("count_include_pad " + std::to_string(include_pad) + " is not 0 or 1");
  const Pool pool = pool_setup(ctx);
  const Value& x = pool.x;
  const Geometry& g = pool.g;
  const int64_t planes = pool.planes, in_size = pool.in_size, out_size = pool.out_size;
  Value& y = pool.y;
  // A tap counts in the divisor when it lies in the input, or (count_include_pad) in the padded
  // input [-pad_begin, in + pad_end); taps beyond that (ceil_mode's last window) never count.
  auto counted = [&](int64_t pos, size_t i) {
    return include_pad ? pos >= -g.pb[i] && pos < g.in[i] + g.pe[i] : pos >= 0 && pos < g.in[i];
  };
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x.data.data() + p * in_size;
    int64_t o = p * out_size;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          double sum = 0.0;
          int64_t count = 0;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
            if (!counted(id, 0)) continue;
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
              if (!counted(ih, 1)) continue;
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                if (!counted(iw, 2)) continue;
                ++count;
                if (id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2])
                  sum += xp[(id * g.in[1] + ih) * g.in[2] + iw];
              }
            }
          }
          y.data[o] = count ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
        }
  }
}

namespace {

/// GlobalAveragePool / GlobalMaxPool: `reduce(first, size)` of each [N, C] plane's `size`
/// values; the output keeps the input's rank with 1s for the spatial axes.
template <typename Reduce>
void global_pool(KernelContext& ctx, Reduce reduce) {
  const Value& x = pool_input(ctx);
  const int64_t planes = x.shape[0] * x.shape[1];
  const int64_t size = product(x.shape, 2, x.shape.size());
  Value& y = ctx.outputs[0];
  y.shape = {x.shape[0], x.shape[1]};
  y.shape.resize(x.shape.size(), 1);
  y.data.resize(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) y.data[p] = reduce(x.data.data() + p * size, size);
}

}  // namespace

void global_average_pool(KernelContext& ctx) {
  global_pool(ctx, [](const float* v, int64_t size) {
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i) sum += v[i];
    return static_cast<float>(sum / static_cast<double>(size));
  });
}

void global_max_pool(KernelContext& ctx) {
  global_pool(ctx, [](const float* v, int64_t size) {
    float best = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < size; ++i) best = std::max(best, v[i]);
    return best;
  });
}

void conv_transpose(KernelContext& ctx) {
  // ConvTranspose-11: X [N, C, spatial...], W [C, M/group, kernel...], optional B [M]. Each
  // input position i scatters x · w[k] to output position i·stride + k·dilation - pad_begin.
  // Output size: stride·(in - 1) + output_padding + (k - 1)·dilation + 1 - pad_begin - pad_end;
  // with output_shape (or auto_pad SAME_*, output in·stride) the total padding follows from it
  // and is split as the ONNX doc says: SAME_UPPER puts the odd one at the end, otherwise at the
  // beginning; an output larger than the scatter reaches (negative total) ends in zeros.
  const Node& node = ctx.node;
  const Value& x = ctx.float_input(0, "X");
  const Value& w = ctx.float_input(1, "W");
  const ConvTransposeGeometry t = conv_transpose_geometry(node, x.shape, w.shape);
  const size_t r = t.in.size();
  const int64_t batch = x.shape[0], channels = x.shape[1];
  const int64_t group = t.group, mg = w.shape[1], filters = mg * group, cg = channels / group;
  Geometry g;
  g.rank = r;
  for (size_t i = 0; i < kDims; ++i) {
    g.in[i] = g.k[i] = g.s[i] = g.d[i] = g.out[i] = 1;
    g.pb[i] = g.pe[i] = 0;
  }
  const size_t off = kDims - r;
  for (size_t j = 0; j < r; ++j) {
    const size_t i = off + j;
    g.in[i] = t.in[j];
    g.k[i] = t.k[j];
    g.s[i] = t.s[j];
    g.d[i] = t.d[j];
    g.pb[i] = t.pad_begin[j];
    g.pe[i] = t.pad_end[j];
    g.out[i] = t.out[j];
  }
  Epilogue epilogue;
  epilogue.bias = ctx.optional_input(2) != nullptr;
  std::vector<int64_t> out_shape = {batch, filters};
  for (int64_t o : g.out_shape()) out_shape.push_back(o);
  const auto bound = epilogue_inputs(ctx, epilogue, filters, out_shape);

  Value& y = ctx.outputs[0];
  y.shape = out_shape;
  y.data.assign(static_cast<size_t>(product(out_shape, 0, out_shape.size())), 0.0f);
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const int64_t taps = g.k[0] * g.k[1] * g.k[2];
  std::vector<double> acc(static_cast<size_t>(out_size));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t m = 0; m < filters; ++m) {
      const int64_t grp = m / mg, ml = m % mg;
      std::fill(acc.begin(), acc.end(), bound.bias ? static_cast<double>(bound.bias[m]) : 0.0);
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t ch = grp * cg + c;
        const float* xc = x.data.data() + (n * channels + ch) * in_size;
        const float* wc = w.data.data() + (ch * mg + ml) * taps;
        for (int64_t id = 0; id < g.in[0]; ++id)
          for (int64_t ih = 0; ih < g.in[1]; ++ih)
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              const double xv = xc[(id * g.in[1] + ih) * g.in[2] + iw];
              for (int64_t kd = 0; kd < g.k[0]; ++kd) {
                const int64_t od = id * g.s[0] + kd * g.d[0] - g.pb[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                  const int64_t oh = ih * g.s[1] + kh * g.d[1] - g.pb[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                    const int64_t ow = iw * g.s[2] + kw * g.d[2] - g.pb[2];
                    if (ow < 0 || ow >= g.out[2]) continue;
                    acc[(od * g.out[1] + oh) * g.out[2] + ow] +=
                        xv * wc[(kd * g.k[1] + kh) * g.k[2] + kw];
                  }
                }
              }
            }
      }
      float* yp = y.data.data() + (n * filters + m) * out_size;
      for (int64_t i = 0; i < out_size; ++i) yp[i] = static_cast<float>(acc[i]);
    }
}

}  // namespace webtune::graph::kernels

namespace webtune::graph {

ConvTransposeGeometry conv_transpose_geometry(const Node& node, const std::vector<int64_t>& x_shape,
                                              const std::vector<int64_t>& w_shape) {
  using namespace kernels;
  if (x_shape.size() < 3 || w_shape.size() != x_shape.size())
    fail("X " + shape_text(x_shape) + " and W " + shape_text(w_shape) +
         " must be [N, C, spatial...] and [C, M/group, kernel...] of the same rank");
  const size_t r = x_shape.size() - 2;
  if (r > kDims)
    fail("the input has " + std::to_string(r) +
         " spatial dimensions; the reference executor runs 1-D, 2-D and 3-D windows");
  const int64_t channels = x_shape[1];
  const int64_t group = node.get_int("group", 1);
  if (group < 1 || channels % group != 0 || w_shape[0] != channels)
    fail("group " + std::to_string(group) + " does not fit X " + shape_text(x_shape) + " and W " +
         shape_text(w_shape) + " (C must divide by group, W's dim 0 must be C)");
  const std::vector<int64_t> kernel = spatial_of(w_shape);
  if (node.has("kernel_shape") && node.get_ints("kernel_shape", {}) != kernel)
    fail("kernel_shape " + shape_text(node.get_ints("kernel_shape", {})) +
         " differs from W's spatial dimensions " + shape_text(kernel));
  const auto strides = ints_of_size(node, "strides", r, 1, r);
  const auto dilations = ints_of_size(node, "dilations", r, 1, r);
  const auto out_pad = ints_of_size(node, "output_padding", r, 0, r);
  const auto pads = ints_of_size(node, "pads", 2 * r, 0, r);
  std::vector<int64_t> out_shape_attr = node.get_ints("output_shape", {});
  if (out_shape_attr.size() == r + 2)  // some exporters give N and C too
    out_shape_attr.erase(out_shape_attr.begin(), out_shape_attr.begin() + 2);
  if (!out_shape_attr.empty() && out_shape_attr.size() != r)
    fail("output_shape " + shape_text(out_shape_attr) + " does not have " + std::to_string(r) +
         " spatial dimensions");
  const std::string auto_pad = node.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    fail("auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");

  ConvTransposeGeometry g;
  g.group = group;
  g.in.resize(r);
  g.k.resize(r);
  g.s.resize(r);
  g.d.resize(r);
  g.pad_begin.resize(r);
  g.pad_end.resize(r);
  g.out.resize(r);
  for (size_t j = 0; j < r; ++j) {
    const size_t i = j;
    g.in[i] = x_shape[2 + j];
    g.k[i] = kernel[j];
    g.s[i] = strides[j];
    g.d[i] = dilations[j];
    if (g.k[i] < 1 || g.s[i] < 1 || g.d[i] < 1)
      fail("kernel, strides and dilations must be positive");
    const int64_t full = g.s[i] * (g.in[i] - 1) + out_pad[j] + (g.k[i] - 1) * g.d[i] + 1;
    if (!out_shape_attr.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[i] = out_shape_attr.empty() ? g.in[i] * g.s[i] : out_shape_attr[j];
      const int64_t total = full - g.out[i];
      if (total < 0) {  // an output larger than the scatter reaches: zeros at the end
        g.pad_begin[i] = 0;
        g.pad_end[i] = total;
      } else {
        g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        g.pad_end[i] = total - g.pad_begin[i];
      }
    } else {
      if (auto_pad == "NOTSET") {
        g.pad_begin[i] = pads[j];
        g.pad_end[i] = pads[j + r];
      }
      g.out[i] = full - g.pad_begin[i] - g.pad_end[i];
    }
    if (g.out[i] < 1) fail("the output would have a dimension of " + std::to_string(g.out[i]));
  }
  return g;
}

}  // namespace webtune::graph
