/// \file normalization.cpp
/// Reference kernels that normalise over some axes, all in double and rounded once to float32:
///  - BatchNormalization (7+, inference: `epsilon`; `training_mode` 1 and `spatial` 0 refused);
///  - InstanceNormalization (6+, `epsilon`): per (n, c) over the spatial dimensions;
///  - LayerNormalization (17, `axis` -1, `epsilon` 1e-5, `stash_type` 1; Scale and the optional
///    B broadcast to X's normalised dimensions; the optional Mean and InvStdDev outputs);
///  - Softmax and LogSoftmax: before opset 13 the input is coerced to 2-D at `axis` (default 1),
///    from opset 13 on they normalise along `axis` (default -1); the maximum is subtracted first.

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace webtune::graph::kernels {

void batch_normalization(KernelContext& ctx) {
  const Node& node = ctx.node;
  if (node.get_int("training_mode", 0) != 0)
    fail("training_mode 1 is not run (the reference executor runs inference)");
  if (node.get_int("spatial", 1) != 1)
    fail("spatial 0 (per-element statistics, opset < 9) is not supported");
  for (size_t o = 1; o < node.outputs.size(); ++o)
    if (ctx.wanted(o))
      fail("output " + std::to_string(o) + " ('" + node.outputs[o] +
           "', a training statistic) is not computed (the reference executor runs inference)");
  const Value& x = ctx.float_input(0, "X");
  if (x.shape.size() < 2) fail("X has shape " + shape_text(x.shape) + "; it needs [N, C, ...]");
  const int64_t channels = x.shape[1];
  const char* names[4] = {"scale", "B", "input_mean", "input_var"};
  const float* params[4];
  for (size_t i = 0; i < 4; ++i) {
    const Value& p = ctx.float_input(i + 1, names[i]);
    if (p.shape != std::vector<int64_t>{channels})
      fail(std::string(names[i]) + " has shape " + shape_text(p.shape) + ", expected [" +
           std::to_string(channels) + "]");
    params[i] = p.data.data();
  }
  const double epsilon = node.get_float("epsilon", 1e-5f);
  const int64_t size = product(x.shape, 2, x.shape.size());
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const double scale = params[0][c] / std::sqrt(static_cast<double>(params[3][c]) + epsilon);
      const double shift = params[1][c] - params[2][c] * scale;
      const int64_t base = (n * channels + c) * size;
      for (int64_t i = 0; i < size; ++i)
        y.data[base + i] = static_cast<float>(x.data[base + i] * scale + shift);
    }
}

void instance_normalization(KernelContext& ctx) {
  const Value& x = ctx.float_input(0, "input");
  if (x.shape.size() < 3)
    fail("input has shape " + shape_text(x.shape) + "; it needs [N, C, spatial...]");
  const int64_t channels = x.shape[1];
  const Value& scale = ctx.float_input(1, "scale");
  const Value& bias = ctx.float_input(2, "B");
  if (scale.shape != std::vector<int64_t>{channels} || bias.shape != scale.shape)
    fail("scale " + shape_text(scale.shape) + " and B " + shape_text(bias.shape) + " must be [" +
         std::to_string(channels) + "]");
  const double epsilon = ctx.node.get_float("epsilon", 1e-5f);
  const int64_t size = product(x.shape, 2, x.shape.size());
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (int64_t p = 0; p < x.shape[0] * channels; ++p) {
    const float* xp = x.data.data() + p * size;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < size; ++i) mean += xp[i];
    mean /= static_cast<double>(size);
    for (int64_t i = 0; i < size; ++i) var += (xp[i] - mean) * (xp[i] - mean);
    var /= static_cast<double>(size);
    const int64_t c = p % channels;
    const double k = scale.data[c] / std::sqrt(var + epsilon);
    for (int64_t i = 0; i < size; ++i)
      y.data[p * size + i] = static_cast<float>((xp[i] - mean) * k + bias.data[c]);
  }
}

void layer_normalization(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Value& x = ctx.float_input(0, "X");
  const Value& scale = ctx.float_input(1, "Scale");
  const Value* bias = ctx.optional_input(2);
  if (bias && !bias->is_float()) fail("B must be float32");
  if (node.get_int("stash_type", 1) != 1)
    fail("stash_type " + std::to_string(node.get_int("stash_type", 1)) +
         " is not 1 (float32; the executor computes in double anyway)");
  const auto axis =
      static_cast<size_t>(normalize_axis(node.get_int("axis", -1), x.shape.size(), "axis"));
  const double epsilon = node.get_float("epsilon", 1e-5f);
  const int64_t outer = product(x.shape, 0, axis);
  const int64_t size = product(x.shape, axis, x.shape.size());
  // Scale and B broadcast (unidirectionally) to X; in practice they are X.shape[axis:].
  for (const Value* p : {&scale, bias})
    if (p && broadcast_shape(x.shape, p->shape) != x.shape)
      fail("Scale / B " + shape_text(p->shape) + " does not broadcast to X " + shape_text(x.shape));
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  std::vector<int64_t> stats_shape(x.shape.begin(), x.shape.begin() + static_cast<int64_t>(axis));
  stats_shape.resize(x.shape.size(), 1);
  std::vector<double> mean(static_cast<size_t>(outer)), inv_std(static_cast<size_t>(outer));
  for (int64_t r = 0; r < outer; ++r) {
    const float* xr = x.data.data() + r * size;
    double m = 0.0, var = 0.0;
    for (int64_t i = 0; i < size; ++i) m += xr[i];
    m /= static_cast<double>(size);
    for (int64_t i = 0; i < size; ++i) var += (xr[i] - m) * (xr[i] - m);
    var /= static_cast<double>(size);
    mean[r] = m;
    inv_std[r] = 1.0 / std::sqrt(var + epsilon);
  }
  static const std::vector<int64_t> scalar;
  for_each_broadcast<2>(x.shape, {&scale.shape, bias ? &bias->shape : &scalar},
                        [&](int64_t o, const std::array<int64_t, 2>& i) {
                          const int64_t r = o / size;
                          double v = (x.data[o] - mean[r]) * inv_std[r] * scale.data[i[0]];
                          if (bias) v += bias->data[i[1]];
                          y.data[o] = static_cast<float>(v);
                        });
  for (size_t k = 1; k <= 2; ++k)
    if (ctx.wanted(k)) {
      Value& s = ctx.outputs[k];
      s.shape = stats_shape;
      s.data.resize(static_cast<size_t>(outer));
      for (int64_t r = 0; r < outer; ++r)
        s.data[r] = static_cast<float>(k == 1 ? mean[r] : inv_std[r]);
    }
}

void softmax(KernelContext& ctx) {
  const Value& x = ctx.float_input(0, "input");
  const bool log = ctx.node.op_type == "LogSoftmax";
  const bool coerce_2d = ctx.opset < 13;
  const int64_t axis =
      normalize_axis(ctx.node.get_int("axis", coerce_2d ? 1 : -1), x.shape.size(), "axis");
  // Softmax-13 normalises along `axis`; Softmax-1/-11 flattens the input to 2-D
  // [prod(d[:axis]), prod(d[axis:])] and normalises each row.
  const int64_t outer = product(x.shape, 0, static_cast<size_t>(axis));
  const int64_t length = coerce_2d ? product(x.shape, static_cast<size_t>(axis), x.shape.size())
                                   : x.shape[static_cast<size_t>(axis)];
  const int64_t inner =
      coerce_2d ? 1 : product(x.shape, static_cast<size_t>(axis) + 1, x.shape.size());
  Value& y = ctx.outputs[0];
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * length * inner + in;
      // Subtract the maximum first so that exp does not overflow.
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < length; ++l) max = std::max<double>(max, x.data[base + l * inner]);
      double sum = 0.0;
      for (int64_t l = 0; l < length; ++l) sum += std::exp(x.data[base + l * inner] - max);
      const double log_sum = std::log(sum);
      for (int64_t l = 0; l < length; ++l) {
        const double shifted = x.data[base + l * inner] - max;
        y.data[base + l * inner] =
            static_cast<float>(log ? shifted - log_sum : std::exp(shifted) / sum);
      }
    }
}

}  // namespace webtune::graph::kernels
