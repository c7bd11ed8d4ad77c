/// \file measure.hpp
/// Measure input and measure result: what a builder hands to a runner (agent), and what comes
/// back. Both travel as JSON between tuner, tracker and agents.
///
/// Timing follows TVM's time_evaluator (src/runtime/rpc/rpc_module.cc): one untimed warm-up
/// run, then `repeat` measurements, each the mean of `number` runs; when `min_repeat_ms` > 0
/// `number` grows until one measurement lasts at least that long. Costs are in seconds.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/error_no.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/reference.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// Bounds of MeasureOptions and of the reference samples of a MeasureInput. They arrive over
/// the network at agents, so from_json enforces them; the CLI's options use the same ones.
inline constexpr int kMaxNumber = 1'000'000;    ///< runs per measurement
inline constexpr int kMaxRepeat = 1000;         ///< measurements (costs) per trial
inline constexpr int kMaxMinRepeatMs = 60'000;  ///< min_repeat_ms, in ms (one minute)
inline constexpr double kMaxTimeoutS = 3600;    ///< timeout_s, in s (one hour)
inline constexpr int kMaxSamples = 4096;        ///< reference samples per input

struct MeasureOptions {
  int number = 1;         ///< runs averaged into one cost, in [1, kMaxNumber]
  int repeat = 1;         ///< costs reported, in [1, kMaxRepeat]
  int min_repeat_ms = 0;  ///< grow `number` until a measurement takes this long (ms), in
                          ///< [0, kMaxMinRepeatMs]
  double timeout_s = 10;  ///< wall-clock budget of one whole measurement (s); RUN_TIMEOUT past
                          ///< it; finite, in (0, kMaxTimeoutS]

  /// Throws std::invalid_argument naming the first field outside its bounds (above).
  void validate() const;
  boost::json::object to_json() const;
  /// Missing fields keep their defaults; throws std::invalid_argument on a mistyped field or a
  /// value outside the bounds (validate()).
  static MeasureOptions from_json(const boost::json::value& value);
};

/// One trial to run: a built kernel, the seed of its inputs (see seeded_random.hpp) and the
/// reference samples its output must match.
struct MeasureInput {
  Workload workload;
  KernelArtifact artifact;
  uint64_t seed = 0;
  std::vector<ReferenceSample> samples;
  MeasureOptions options;

  boost::json::object to_json() const;
  /// Throws std::invalid_argument on a missing or mistyped field, a workload out of bounds
  /// (Workload::validate), options out of bounds (MeasureOptions::validate), more than
  /// kMaxSamples samples, or a sample whose index is outside the output or whose value or
  /// tolerance is not finite (a negative tolerance too).
  static MeasureInput from_json(const boost::json::value& value);
};

/// The outcome of one trial.
struct MeasureResult {
  MeasureErrorNo error = MeasureErrorNo::kNoError;
  std::string message;        ///< driver log, mismatch report, ...; empty on success
  std::vector<double> costs;  ///< seconds per run, one per repeat; empty on error
  double all_cost = 0;        ///< seconds the whole measurement took (compile, upload, runs)
  double timestamp = 0;       ///< Unix time (s) when it finished

  bool ok() const { return error == MeasureErrorNo::kNoError; }
  /// Mean of costs (s); +inf on error.
  double mean_cost() const;
  /// GFLOP/s of the mean cost for `flops` operations; 0 on error.
  double gflops(double flops) const;

  static MeasureResult failure(MeasureErrorNo error, std::string message);

  boost::json::object to_json() const;
  /// Throws std::invalid_argument for a missing error_no, a field of the wrong type, an
  /// unknown error number or a cost that is not a finite number.
  static MeasureResult from_json(const boost::json::value& value);
};

}  // namespace webtune
