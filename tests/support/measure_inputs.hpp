/// \file measure_inputs.hpp
/// Measure inputs that tests send through a tracker: a dense n×n×n task's default gles-frag
/// kernel with seeded inputs and reference samples, as the MeasureInput JSON of a submit.
/// Header-only.
#pragma once

#include <boost/json.hpp>
#include <cstdint>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"

namespace webtune::testing_support {

/// MeasureInput JSON for dense n×n×n, gles-frag default config, measured with `options`.
inline boost::json::value dense_input(int64_t n, MeasureOptions options = {}, uint64_t seed = 5,
                                      int samples = 8) {
  Task task = Task::create(Workload::dense(n, n, n), Target::kGlesFrag);
  MeasureInput input;
  input.workload = task.workload;
  input.artifact = task.build(task.default_config());
  input.seed = seed;
  input.samples = reference_samples(task.workload, input.seed, samples);
  input.options = options;
  return input.to_json();
}

/// The options of `repeat` costs, each the mean of `number` runs, within `timeout_s`.
inline MeasureOptions measured(int number, int repeat, double timeout_s = 10) {
  MeasureOptions options;
  options.number = number;
  options.repeat = repeat;
  options.timeout_s = timeout_s;
  return options;
}

}  // namespace webtune::testing_support
