/// \file reference.cpp
/// Double-accumulated CPU reference and the sampled output check.
#include "codegen/reference.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

#include "codegen/json_util.hpp"
#include "codegen/seeded_random.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

// Accumulates one output's terms in double and remembers Σ|terms| for its tolerance.
struct Accumulator {
  double sum = 0, abs_sum = 0;
  void add(double a, double b) {
    sum += a * b;
    abs_sum += std::abs(a * b);
  }
};

Accumulator dense_at(const Workload& w, const std::vector<float>& a, const std::vector<float>& b,
                     int64_t row, int64_t col) {
  Accumulator acc;
  for (int64_t kk = 0; kk < w.k; ++kk) acc.add(a[row * w.k + kk], b[kk * w.n + col]);
  return acc;
}

// One output of conv2d (depthwise: the single input channel c_out).
Accumulator conv_at(const Workload& w, const std::vector<float>& x, const std::vector<float>& wt,
                    int64_t n, int64_t c_out, int64_t oh, int64_t ow) {
  Accumulator acc;
  const bool depthwise = w.op == OpKind::kDepthwiseConv2d;
  const int64_t c_begin = depthwise ? c_out : 0;
  const int64_t c_end = depthwise ? c_out + 1 : w.in_channels;
  for (int64_t c = c_begin; c < c_end; ++c) {
    for (int64_t r = 0; r < w.kernel_h; ++r) {
      const int64_t ih = oh * w.stride + r - w.pad;
      if (ih < 0 || ih >= w.height) continue;
      for (int64_t s = 0; s < w.kernel_w; ++s) {
        const int64_t iw = ow * w.stride + s - w.pad;
        if (iw < 0 || iw >= w.width) continue;
        const float xv = x[((n * w.in_channels + c) * w.height + ih) * w.width + iw];
        const int64_t wc = depthwise ? 0 : c;
        const int64_t wchannels = depthwise ? 1 : w.in_channels;
        const float wv = wt[((c_out * wchannels + wc) * w.kernel_h + r) * w.kernel_w + s];
        acc.add(xv, wv);
      }
    }
  }
  return acc;
}

}  // namespace

namespace {

void check_inputs(const Workload& w, const std::vector<std::vector<float>>& inputs) {
  if (static_cast<int>(inputs.size()) != w.input_count())
    throw std::invalid_argument("reference: " + std::to_string(inputs.size()) +
                                " input tensors given; workload " + w.key() + " has " +
                                std::to_string(w.input_count()));
  for (int i = 0; i < w.input_count(); ++i) {
    if (static_cast<int64_t>(inputs[i].size()) == w.input_size(i)) continue;
    std::string shape;
    for (int64_t d : w.input_shape(i)) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    throw std::invalid_argument("reference: " + w.input_name(i) + " has " +
                                std::to_string(inputs[i].size()) + " elements; the workload's " +
                                w.input_name(i) + " is [" + shape + "]");
  }
}

ReferenceSample sample_at(const Workload& w, const std::vector<std::vector<float>>& in,
                          int64_t index) {
  if (index < 0 || index >= w.output_size())
    throw std::out_of_range("output index " + std::to_string(index) + " outside [0, " +
                            std::to_string(w.output_size()) + ")");
  const std::vector<float>& data = in[0];
  const std::vector<float>& weight = in[1];
  Accumulator acc;
  int64_t channel = 0;
  if (w.op == OpKind::kDense) {
    channel = index % w.n;
    acc = dense_at(w, data, weight, index / w.n, channel);
  } else {
    const int64_t ow = index % w.out_w();
    const int64_t oh = (index / w.out_w()) % w.out_h();
    channel = (index / (w.out_w() * w.out_h())) % w.out_channels;
    const int64_t n = index / (w.out_w() * w.out_h() * w.out_channels);
    acc = conv_at(w, data, weight, n, channel, oh, ow);
  }
  const Epilogue& e = w.epilogue;
  const double bias = e.bias ? in[2][static_cast<size_t>(channel)] : 0.0;
  const double residual =
      e.residual != Residual::kNone ? in[static_cast<size_t>(w.input_count() - 1)][index] : 0.0;
  ReferenceSample sample;
  sample.index = index;
  sample.value = e.apply(acc.sum, bias, residual);
  sample.abs_sum = acc.abs_sum + std::abs(bias) + std::abs(residual);
  const double unit_roundoff = std::ldexp(1.0, -24);
  sample.tolerance = (1e-5 + 16.0 * std::sqrt(static_cast<double>(w.reduction_size())) *
                                 unit_roundoff * sample.abs_sum) *
                         e.lipschitz() +
                     (e.empty() ? 0.0 : 4.0 * unit_roundoff * std::abs(sample.value));
  return sample;
}

}  // namespace

ReferenceSample reference_at(const Workload& w, const std::vector<std::vector<float>>& inputs,
                             int64_t index) {
  check_inputs(w, inputs);
  return sample_at(w, inputs, index);
}

ReferenceSample reference_at(const Workload& w, const std::vector<float>& data,
                             const std::vector<float>& weight, int64_t index) {
  return reference_at(w, std::vector<std::vector<float>>{data, weight}, index);
}

std::vector<float> reference_output(const Workload& w,
                                    const std::vector<std::vector<float>>& inputs) {
  check_inputs(w, inputs);
  std::vector<float> out(static_cast<size_t>(w.output_size()));
  for (int64_t i = 0; i < w.output_size(); ++i)
    out[i] = static_cast<float>(sample_at(w, inputs, i).value);
  return out;
}

std::vector<float> reference_output(const Workload& w, const std::vector<float>& data,
                                    const std::vector<float>& weight) {
  return reference_output(w, std::vector<std::vector<float>>{data, weight});
}

std::vector<std::vector<float>> seeded_inputs(const Workload& w, uint64_t seed) {
  std::vector<std::vector<float>> inputs;
  for (int i = 0; i < w.input_count(); ++i)
    inputs.push_back(seeded_tensor(seed, i, w.input_size(i)));
  return inputs;
}

std::vector<ReferenceSample> reference_samples(const Workload& w, uint64_t seed, int count) {
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, seed);
  const int64_t total = w.output_size();
  std::vector<int64_t> positions = {0, total - 1};
  std::mt19937_64 rng(seed ^ 0x5DEECE66Dull);
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  while (static_cast<int64_t>(positions.size()) < std::min<int64_t>(count, total))
    positions.push_back(pick(rng));
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  std::vector<ReferenceSample> samples;
  for (int64_t p : positions) samples.push_back(sample_at(w, inputs, p));
  return samples;
}

CheckResult check_samples(const std::vector<float>& output,
                          const std::vector<ReferenceSample>& samples) {
  CheckResult result;
  std::ostringstream msg;
  for (const ReferenceSample& s : samples) {
    if (s.index < 0 || s.index >= static_cast<int64_t>(output.size())) {
      ++result.mismatches;
      if (result.mismatches <= 4) msg << "output[" << s.index << "] missing; ";
      continue;
    }
    const double y = output[s.index];
    if (std::isfinite(y) && std::abs(y - s.value) <= s.tolerance) continue;
    ++result.mismatches;
    if (result.mismatches <= 4)
      msg << "output[" << s.index << "] = " << y << ", expected " << s.value << " ± " << s.tolerance
          << "; ";
  }
  result.ok = result.mismatches == 0;
  if (!result.ok) {
    result.message = std::to_string(result.mismatches) + " of " + std::to_string(samples.size()) +
                     " sampled outputs differ from the reference: " + msg.str();
  }
  return result;
}

bj::array samples_to_json(const std::vector<ReferenceSample>& samples) {
  bj::array out;
  for (const ReferenceSample& s : samples)
    out.push_back(bj::array{s.index, s.value, s.abs_sum, s.tolerance});
  return out;
}

std::vector<ReferenceSample> samples_from_json(const bj::value& value) {
  if (!value.is_array()) throw std::invalid_argument("'samples' must be an array");
  std::vector<ReferenceSample> out;
  for (const bj::value& item : value.get_array()) {
    if (!item.is_array() || item.get_array().size() != 4)
      throw std::invalid_argument("a reference sample is [index, value, abs_sum, tolerance]");
    const bj::array& a = item.get_array();
    out.push_back({json::to_int(a[0], "sample index"), json::to_double(a[1], "sample value"),
                   json::to_double(a[2], "sample abs_sum"),
                   json::to_double(a[3], "sample tolerance")});
  }
  return out;
}

}  // namespace webtune
