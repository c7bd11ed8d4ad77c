/// \file result_check.hpp
/// Plausibility of an agent's measure result, before the tracker believes it.
///
/// The tracker reads what it needs of each job when it is submitted (JobFacts: the workload's
/// FLOPs and compulsory bytes, and how many costs the job asked for) and what it needs of each
/// agent when it says hello (DevicePeak: the fastest that device class could possibly be). A
/// result is refused when it is malformed (error number outside AutoTVM's 0..8, costs that are not
/// numbers), when a successful result's costs are not finite and positive or their count is not
/// the `repeat` the job asked for, or when its fastest cost would beat the device's peak FLOP rate
/// or memory bandwidth. Refused results are never delivered; the agent is marked suspect.
#pragma once

#include <boost/json/fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "codegen/error_no.hpp"
#include "tracker/job_facts.hpp"
#include "tracker/tracker_policy.hpp"

namespace webtune::tracker {

/// The fastest a device class could possibly be.
struct DevicePeak {
  double gflops = 0;  ///< GFLOP/s
  double gbps = 0;    ///< GB/s
  bool cpu = false;   ///< a CPU-backed device (bounds scale with its threads)

  /// From an agent key and the device object of its hello. CPU-backed: key family "wasm", or a
  /// key or renderer naming a software rasterizer (llvmpipe, softpipe, SwiftShader, lavapipe);
  /// their threads come from the device's "cpu_threads" (else `cpu_threads_when_unknown`).
  static DevicePeak estimate(std::string_view key, const boost::json::object& device,
                             const PlausibilityPolicy& policy);
};

/// A result as the tracker judged it.
struct CheckedResult {
  MeasureErrorNo error = MeasureErrorNo::kUnknown;
  /// Empty when plausible; otherwise why the result is refused.
  std::string refusal;
};

/// Checks an agent's MeasureResult JSON against the job and the device (see the file comment).
CheckedResult check_result(const boost::json::value& result, const JobFacts& job,
                           const DevicePeak& peak);

}  // namespace webtune::tracker
