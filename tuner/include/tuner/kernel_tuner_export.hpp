/// \file kernel_tuner_export.hpp
/// One tuning job of a RecordStore as Kernel Tuner's cache file and as the T4 results JSON, so
/// that Kernel Tuner (its simulation mode, its dashboard) and the autotuning-methodology tools
/// read webtune's runs. docs/records.md shows both formats.
///
/// Kernel Tuner cache file (kernel_tuner/util.py process_cache / store_cache, written in its
/// own layout, so that Kernel Tuner can even append to it):
///
///   {"device_name": "<device key>", "kernel_name": "conv2d_nchw.webgpu",
///    "problem_size": [OW, OH, N·K],  (dense: [N, M]: the output's x, y, z extents)
///    "tune_params_keys": ["tile_y_0", "tile_y_1", "unroll", ...],
///    "tune_params": {"tile_y_0": [1, 2, ...], ...}, "objective": "time",
///    "webtune": {"job": 3, "workload": {...}, "target": "webgpu", "task": "C2", ...},
///    "cache": {"14,4,8": {"tile_y_0": 14, "tile_y_1": 4, "unroll": 8, "time": 0.41,
///                         "times": [0.40, 0.42], "compile_time": 0, "verification_time": 0,
///                         "benchmark_time": 1234.5, "strategy_time": 0, "framework_time": 0,
///                         "timestamp": "2026-11-25 20:13:39.125000+00:00", "GFLOP/s": 88.2},
///              ...}}
///
///  - Parameters are the knobs of the job's template space (Task::create), in definition order;
///    a split knob becomes one parameter per factor, outermost first ("tile_y" → tile_y_0,
///    tile_y_1, ...), its values the distinct factors of that position over the split's
///    candidates, ascending. Cache keys are the values joined by ',' in tune_params_keys order,
///    as Kernel Tuner's runners build them. The space's constraints and device limits are not
///    carried (Kernel Tuner's `restrictions` are Python code).
///  - Times are in ms: "time" is the mean of "times" (the trial's costs); "benchmark_time" is
///    the whole measurement (webtune's all_cost: build, upload and runs; webtune does not time
///    the build apart, so "compile_time" is 0), the other times 0.
///  - A failed trial is written as Kernel Tuner ≥ 1.0 writes one, "__error__" naming the error
///    class, and as older versions did, the same name as its "time": InvalidConfig
///    (INSTANTIATION_ERROR), CompilationFailedConfig (COMPILE_HOST, COMPILE_DEVICE,
///    BUILD_TIMEOUT), RuntimeFailedConfig (every other error, and a suspect trial: its cost was
///    not believed). It has no "times" nor "GFLOP/s".
///
/// T4 results (the T4 results schema 1.0.0, kernel_tuner/schema/T4/1.0.0/results-schema.json,
/// copied in tests/data/t4/; as kernel_tuner/file_utils.py get_t4_results writes it):
///   {"schema_version": "1.0.0", "results": [{"timestamp", "configuration" (the parameters
///    above), "objectives": ["time"], "times": {"compilation", "benchmark", "framework",
///    "search_algorithm", "validation" (ms), "runtimes": [ms...]}, "invalidity": "correct" |
///    "constraints" | "compile" | "runtime" | "timeout" | "correctness", "correctness": 1 (0 for
///    a WRONG_ANSWER), "measurements": [{"name": "time", "value": ms, "unit": "ms"},
///    {"name": "GFLOP/s", ...}] (empty when it failed)}, ...],
///    "metadata": {"timeunit": "milliseconds", "webtune": {...}}}
///  invalidity: INSTANTIATION_ERROR → constraints; COMPILE_HOST, COMPILE_DEVICE → compile;
///  BUILD_TIMEOUT, RUN_TIMEOUT → timeout; WRONG_ANSWER → correctness; RUNTIME_DEVICE, UNKNOWN
///  and suspect trials → runtime.
///
/// Trials are written in insertion order (the order they were measured in).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "tuner/records.hpp"

namespace webtune {

/// Kernel Tuner parameter names of `space`'s knobs (see the file comment), in order.
std::vector<std::string> kernel_tuner_param_names(const ConfigSpace& space);

/// Writes job `job_id` of `store` as a Kernel Tuner cache file; returns the entries written
/// (one per trial). Throws std::runtime_error for an unknown job, a job whose workload has no
/// template on its target, or a trial whose config is not an entity of its template's space
/// (naming the trial), and when writing fails.
int64_t export_kernel_tuner_cache(const RecordStore& store, int64_t job_id, std::ostream& out);

/// Writes job `job_id` of `store` as T4 results JSON; returns the results written. Throws as
/// export_kernel_tuner_cache.
int64_t export_t4_results(const RecordStore& store, int64_t job_id, std::ostream& out);

}  // namespace webtune
