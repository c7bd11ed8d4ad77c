/// \file resize.cpp
/// Reference kernel of Resize (10+) and Upsample (7 to 9), float32, on any axes of any rank
/// (each output value is the sum over the taps of every axis of the product of their weights,
/// in double, rounded once):
///  - Resize-11 and later: inputs X, roi, scales, sizes (an empty tensor or "" is absent; sizes
///    wins); `mode` nearest / linear / cubic; `coordinate_transformation_mode` half_pixel
///    (default), pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nearest (or
///    tf_half_pixel_for_nn, its name in ONNX 1.12's test models),
///    tf_crop_and_resize (with roi and `extrapolation_value`); `nearest_mode`
///    round_prefer_floor (default), round_prefer_ceil, floor, ceil; `cubic_coeff_a` (-0.75),
///    `exclude_outside`. As ONNX's reference: out = floor(in · scale) for scales, scale =
///    out / in for sizes; taps beyond the input repeat its edge.
///  - Resize-10 (inputs X, scales) and Upsample (the `scales` attribute in opset 7, input 1 in
///    9): mode nearest / linear, asymmetric coordinates; nearest takes floor(x / scale) when
///    enlarging and ceil when shrinking, as onnxruntime does (the ONNX docs leave it open).

#include <algorithm>
#include <cmath>

#include "graph/resize_plan.hpp"
#include "kernels.hpp"

namespace webtune::graph::kernels {
namespace {

using Tap = ResizeTap;

struct Options {
  std::string mode = "nearest";
  std::string transform = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool legacy = false;  ///< Resize-10 / Upsample
};

/// The four cubic convolution weights of points at distances 1 + r, r, 1 - r, 2 - r.
std::array<double, 4> cubic_weights(double r, double a) {
  auto near = [a](double t) { return ((a + 2) * t - (a + 3)) * t * t + 1; };       // |t| <= 1
  auto far = [a](double t) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; };  // 1 < |t| < 2
  return {far(r + 1), near(r), near(1 - r), far(2 - r)};
}

/// The taps of output position x along an axis of `n` input elements, or {} when it lies
/// outside the crop (tf_crop_and_resize).
std::vector<Tap> taps_of(int64_t x, int64_t n, double scale, double out_width, double roi_start,
                         double roi_end, const Options& opt) {
  double x_ori;
  const std::string& t = opt.legacy ? std::string("asymmetric") : opt.transform;
  const double xd = static_cast<double>(x);
  if (t == "half_pixel") {
    x_ori = (xd + 0.5) / scale - 0.5;
  } else if (t == "pytorch_half_pixel") {
    x_ori = out_width == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  } else if (t == "align_corners") {
    x_ori = out_width == 1 ? 0.0 : xd * static_cast<double>(n - 1) / (out_width - 1);
  } else if (t == "asymmetric") {
    x_ori = xd / scale;
  } else if (t == "tf_half_pixel_for_nearest" || t == "tf_half_pixel_for_nn") {
    x_ori = (xd + 0.5) / scale;
  } else if (t == "tf_crop_and_resize") {
    const double span = (roi_end - roi_start) * static_cast<double>(n - 1);
    x_ori = out_width == 1 ? span / 2 : xd * span / (out_width - 1);
    x_ori += roi_start * static_cast<double>(n - 1);
    if (x_ori < 0 || x_ori > static_cast<double>(n - 1)) return {};
  } else {
    fail("coordinate_transformation_mode '" + t +
         "' is not one of half_pixel, "
         "pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nearest, "
         "tf_crop_and_resize");
  }
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i, 0, n - 1); };
  // base + r = x_ori with r in (0, 1]: the reference prefers the point left of x_ori.
  const auto base = static_cast<int64_t>(std::ceil(x_ori)) - 1;
  const double r = x_ori - static_cast<double>(base);
  if (opt.mode == "nearest") {
    int64_t i;
    if (opt.legacy)
      i = scale < 1 ? static_cast<int64_t>(std::ceil(x_ori)) : static_cast<int64_t>(x_ori);
    else if (r == 1.0)
      i = base + 1;
    else if (opt.nearest == "round_prefer_floor")
      i = r <= 0.5 ? base : base + 1;
    else if (opt.nearest == "round_prefer_ceil")
      i = r < 0.5 ? base : base + 1;
    else if (opt.nearest == "floor")
      i = base;
    else if (opt.nearest == "ceil")
      i = base + 1;
    else
      fail("nearest_mode '" + opt.nearest +
           "' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil");
    return {{clamp(i), 1.0}};
  }
  if (opt.mode == "linear") {
    std::vector<Tap> taps;
    if (r != 1.0) taps.push_back({clamp(base), 1.0 - r});
    taps.push_back({clamp(base + 1), r});
    return taps;
  }
  // cubic: points base - 1 .. base + 2
  const std::array<double, 4> w = cubic_weights(r, opt.cubic_a);
  std::vector<Tap> taps;
  double sum = 0.0;
  for (int64_t k = 0; k < 4; ++k) {
    const int64_t i = base - 1 + k;
    if (opt.exclude_outside && (i < 0 || i >= n)) continue;
    taps.push_back({clamp(i), w[static_cast<size_t>(k)]});
    sum += w[static_cast<size_t>(k)];
  }
  if (opt.exclude_outside)
    for (Tap& tap : taps) tap.weight /= sum;
  return taps;
}

/// A float list input, or {} when absent or empty.
std::vector<float> float_list(const Value* v, const char* what) {
  if (!v) return {};
  if (!v->is_float()) fail(std::string(what) + " must be float32");
  return v->data;
}

}  // namespace

}  // namespace webtune::graph::kernels

namespace webtune::graph {

ResizePlan resize_plan(const Node& node, const std::vector<int64_t>& x_shape,
                       const std::vector<float>& roi, const std::vector<float>& scales,
                       const std::vector<int64_t>& sizes, int64_t opset) {
  using namespace kernels;
  const size_t rank = x_shape.size();
  Options opt;
  opt.legacy = node.op_type == "Upsample" || opset < 11;
  opt.mode = node.get_string("mode", "nearest");
  if (opt.legacy && opt.mode == "bilinear") opt.mode = "linear";
  if (opt.mode != "nearest" && opt.mode != "linear" && (opt.legacy || opt.mode != "cubic"))
    fail("mode '" + opt.mode + "' is not one of nearest, linear" + (opt.legacy ? "" : ", cubic"));
  if (!opt.legacy) {
    opt.transform = node.get_string("coordinate_transformation_mode", "half_pixel");
    opt.nearest = node.get_string("nearest_mode", "round_prefer_floor");
    opt.cubic_a = node.get_float("cubic_coeff_a", -0.75f);
    opt.exclude_outside = node.get_int("exclude_outside", 0) != 0;
  }
  if (sizes.empty() && scales.empty()) fail("needs scales or sizes");
  if (!sizes.empty() && sizes.size() != rank)
    fail("sizes " + shape_text(sizes) + " does not have one value per axis of X " +
         shape_text(x_shape));
  if (sizes.empty() && scales.size() != rank)
    fail("scales has " + std::to_string(scales.size()) + " values for X " + shape_text(x_shape));
  const bool crop = !opt.legacy && opt.transform == "tf_crop_and_resize";
  if (crop && roi.size() != 2 * rank)
    fail("tf_crop_and_resize needs roi of " + std::to_string(2 * rank) + " values");
  ResizePlan plan;
  plan.extrapolation = node.get_float("extrapolation_value", 0.0f);
  plan.out_shape.resize(rank);
  plan.taps.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = x_shape[d];
    double scale, out_width;
    if (!sizes.empty()) {
      plan.out_shape[d] = sizes[d];
      scale = static_cast<double>(sizes[d]) / static_cast<double>(n);
      out_width = static_cast<double>(sizes[d]);
    } else {
      scale = scales[d];
      if (!(scale > 0)) fail("scale " + std::to_string(scale) + " is not positive");
      out_width = scale * static_cast<double>(n);
      plan.out_shape[d] = static_cast<int64_t>(std::floor(out_width));
    }
    if (plan.out_shape[d] < 0 || (n == 0 && plan.out_shape[d] > 0))
      fail("cannot resize axis " + std::to_string(d) + " of " + std::to_string(n) + " to " +
           std::to_string(plan.out_shape[d]));
    for (int64_t o = 0; o < plan.out_shape[d]; ++o)
      plan.taps[d].push_back(
          taps_of(o, n, scale, out_width, crop ? roi[d] : 0.0, crop ? roi[d + rank] : 1.0, opt));
  }
  return plan;
}

}  // namespace webtune::graph

namespace webtune::graph::kernels {

void resize(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = ctx.float_input(0, "X");
  const size_t rank = x.shape.size();
  const bool legacy = node.op_type == "Upsample" || ctx.opset < 11;
  std::vector<float> scales, roi;
  std::vector<int64_t> sizes;
  if (legacy) {
    scales = node.inputs.size() > 1 ? float_list(&ctx.input(1, "scales"), "scales")
                                    : node.get_floats("scales", {});
  } else {
    roi = float_list(ctx.optional_input(1), "roi");
    scales = float_list(ctx.optional_input(2), "scales");
    if (const Value* s = ctx.optional_input(3)) sizes = int_list(*s, "sizes");
  }
  const ResizePlan plan = resize_plan(node, x.shape, roi, scales, sizes, ctx.opset);
  const auto& taps = plan.taps;
  const double extrapolation = plan.extrapolation;
  Value& y = ctx.outputs[0];
  y.shape = plan.out_shape;
  const std::vector<int64_t> strides = strides_of(x.shape);
  y.data.resize(static_cast<size_t>(product(y.shape, 0, rank)));
  if (y.data.empty()) return;
  std::vector<int64_t> index(rank, 0);
  std::vector<const std::vector<Tap>*> at(rank);
  std::vector<size_t> k(rank);
  for (size_t o = 0; o < y.data.size(); ++o) {
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) {
      at[d] = &taps[d][static_cast<size_t>(index[d])];
      outside = outside || at[d]->empty();
    }
    double sum = 0.0;
    if (outside) {
      sum = extrapolation;
    } else {
      // Every combination of one tap per axis (an odometer over the taps).
      std::fill(k.begin(), k.end(), 0);
      while (true) {
        double w = 1.0;
        int64_t offset = 0;
        for (size_t d = 0; d < rank; ++d) {
          const Tap& tap = (*at[d])[k[d]];
          w *= tap.weight;
          offset += tap.index * strides[d];
        }
        sum += w * x.data[static_cast<size_t>(offset)];
        size_t d = rank;
        while (d-- > 0) {
          if (++k[d] < at[d]->size()) break;
          k[d] = 0;
        }
        if (d == static_cast<size_t>(-1)) break;
      }
    }
    y.data[o] = static_cast<float>(sum);
    next_index(index, y.shape);
  }
}

}  // namespace webtune::graph::kernels
