/// \file features.hpp
/// Features of a config for the cost model: the knob values plus analytic features of the kernel
/// it builds. Same length for every config of one template (target + op), so models transfer
/// between workloads of the same template.
#pragma once

#include <string>
#include <vector>

#include "codegen/task.hpp"

namespace webtune {

/// Feature vector of `entity`:
///  - per split knob, log2 of each factor; per integer knob, log2(1 + value); per string knob,
///    the candidate's position (a category index);
///  - analytic (Template::kAnalyticFeatureCount = 9): the task's template computes them
///    (Template::features; names in Template::analytic_feature_names): log2 of outputs per
///    invocation, invocations per workgroup (compute) or draw buffers (fragment), workgroups (or
///    fragments), 1 + bytes of shared memory, 1 + input bytes loaded per output (a traffic
///    estimate from the tile knobs, caches ignored), source length (a proxy for unrolling and
///    registers); then the channels (1 or 4) of the data, weight and output storage.
/// Templates whose features need the kernel (Template::features_need_artifact) get it from
/// Task::build (tens of µs; XgbTuner caches per config); wasm reads its plan instead, since a
/// build is an LLVM compile and a link. Invalid entities (MeasureError from Task::build or the
/// template) get all-zero analytic features. Throws std::logic_error if a template returns the
/// wrong number of features (a bug), std::logic_error from Task::get_template for a Task not
/// made by Task::create.
std::vector<float> config_features(const Task& task, const ConfigEntity& entity);
/// Names of the features, for logs and tests.
std::vector<std::string> feature_names(const Task& task);

}  // namespace webtune
