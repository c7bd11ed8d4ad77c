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
///  - analytic (9): log2 of outputs per invocation, invocations per workgroup (compute) or draw
///    buffers (fragment), workgroups (or fragments), 1 + bytes of shared memory, 1 + input
///    bytes loaded per output (a traffic estimate from the tile knobs, caches ignored), GLSL
///    source length (a proxy for unrolling and registers); then the channels (1 or 4) of the
///    data, weight and output textures (compute buffers: 1, their vec4 views are a knob).
/// Builds the artifact to read those off (tens of µs; XgbTuner caches per config); invalid
/// entities (MeasureError from Task::build) get all-zero analytic features. Target wasm reads
/// them off wasm_plan() instead, since a build is an LLVM compile and a link: outputs per
/// micro-tile, threads, micro-tiles, scratch bytes per thread, the register-tile traffic
/// estimate, and the size of the K-loop body; channels are 1.
std::vector<float> config_features(const Task& task, const ConfigEntity& entity);
/// Names of the features, for logs and tests.
std::vector<std::string> feature_names(const Task& task);

}  // namespace webtune
