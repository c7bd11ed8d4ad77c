/// \file reference.hpp
/// CPU reference for every workload, and the sampled check that agents apply to kernel outputs.
///
/// The reference accumulates in double. A sampled output y passes against reference r when
///   |y − r| ≤ 1e-5 + 16 · √n · 2^-24 · Σ|terms|
/// where n is the reduction length and Σ|terms| the sum of the absolute products behind that
/// output: a probabilistic fp32 rounding bound (errors of n roundings grow like √n · u, Higham,
/// "Accuracy and Stability of Numerical Algorithms", 2nd ed., §2.8) with a safety factor of 16.
/// With an epilogue (epilogue.hpp) the value is the epilogue applied to the double sum; Σ|terms|
/// then also holds |bias| and |residual|, and the tolerance is scaled by the activation's
/// Lipschitz bound (1, or 1.5 for hard-swish) and widened by 4·2^-24·|value| for the epilogue's
/// own fp32 roundings.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/workload.hpp"

namespace webtune {

/// Reference value of one output element, with the data needed for its tolerance.
struct ReferenceSample {
  int64_t index = 0;     ///< flat row-major index into the output tensor
  double value = 0;      ///< exact-ish (double-accumulated) result
  double abs_sum = 0;    ///< Σ|terms| behind it
  double tolerance = 0;  ///< the allowed |y − value|, from the formula above
};

/// The reference value of output element `index` (flat, row-major) given the workload's
/// row-major input tensors in binding order (Workload::input_count: data, weight, then the
/// epilogue's bias and residual). Throws std::out_of_range for a bad index and
/// std::invalid_argument naming the tensor when there are too few or too many tensors or one
/// has the wrong size, e.g. "reference: bias has 63 elements; the workload's bias is [64]".
ReferenceSample reference_at(const Workload& workload,
                             const std::vector<std::vector<float>>& inputs, int64_t index);
/// The same for a workload without epilogue inputs (data and weight only).
ReferenceSample reference_at(const Workload& workload, const std::vector<float>& data,
                             const std::vector<float>& weight, int64_t index);

/// The whole output, fp32 row-major, computed by reference_at (slow; for tests and small shapes).
std::vector<float> reference_output(const Workload& workload,
                                    const std::vector<std::vector<float>>& inputs);
std::vector<float> reference_output(const Workload& workload, const std::vector<float>& data,
                                    const std::vector<float>& weight);

/// The seeded inputs of a measurement: input i is seeded_tensor(seed, i, input_size(i)).
std::vector<std::vector<float>> seeded_inputs(const Workload& workload, uint64_t seed);

/// `count` reference samples at positions chosen from `seed` (always including the first and
/// the last output element), for the inputs of seeded_inputs(workload, seed).
std::vector<ReferenceSample> reference_samples(const Workload& workload, uint64_t seed, int count);

/// Outcome of comparing outputs with samples.
struct CheckResult {
  bool ok = true;
  int mismatches = 0;
  std::string message;  ///< first mismatches, "output[12] = 3.5, expected 1.25 ± 1e-4", ...
};

/// Compares `output` (row-major, workload.output_size() elements) with the samples. NaN and
/// infinities never pass.
CheckResult check_samples(const std::vector<float>& output,
                          const std::vector<ReferenceSample>& samples);

boost::json::array samples_to_json(const std::vector<ReferenceSample>& samples);
std::vector<ReferenceSample> samples_from_json(const boost::json::value& value);

}  // namespace webtune
