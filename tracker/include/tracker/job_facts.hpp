/// \file job_facts.hpp
/// What the tracker reads of a job's MeasureInput when it is submitted: enough to choose the
/// job's lease and to judge the plausibility of its results (result_check.hpp), without keeping
/// the parsed input around.
#pragma once

#include <boost/json/fwd.hpp>

namespace webtune::tracker {

struct JobFacts {
  double flops = 0;      ///< floating-point operations of one run
  double bytes = 0;      ///< compulsory traffic of one run (bytes): inputs read once, output once
  int repeat = 1;        ///< costs a successful result must carry
  double timeout_s = 0;  ///< the measurement budget (MeasureOptions::timeout_s); 0 when unknown

  /// Reads a MeasureInput JSON's "workload" and "options" (codegen/measure.hpp). Throws
  /// std::invalid_argument when they are missing or invalid: such a job is refused at submit.
  static JobFacts from_input(const boost::json::value& input);
};

}  // namespace webtune::tracker
