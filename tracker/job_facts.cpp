/// \file job_facts.cpp
/// Reading a job's facts from its MeasureInput JSON.
#include "tracker/job_facts.hpp"

#include <boost/json.hpp>

#include "codegen/json_util.hpp"
#include "codegen/measure.hpp"
#include "codegen/workload.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

JobFacts JobFacts::from_input(const bj::value& input) {
  const bj::object& o = json::as_object(input, "measure input");
  if (auto kind = o.find("kind"); kind != o.end() && kind->value() == "model") {
    // A whole model (MODEL_JOBS.md), passed through to agents unchanged. Interim: no FLOPs or
    // bytes (so no plausibility bound) until the tracker reads the package's manifest.
    JobFacts f;
    MeasureOptions options;
    if (auto it = o.find("options"); it != o.end())
      options = MeasureOptions::from_json(it->value());
    f.repeat = options.repeat;
    f.timeout_s = options.timeout_s;
    return f;
  }
  const Workload workload = Workload::from_json(json::field(o, "workload"));
  workload.validate();
  MeasureOptions options;
  if (auto it = o.find("options"); it != o.end()) options = MeasureOptions::from_json(it->value());
  JobFacts f;
  f.flops = workload.flops();
  // Every input (the epilogue's bias and residual too) and the output, read or written once.
  double elements = static_cast<double>(workload.output_size());
  for (int i = 0; i < workload.input_count(); ++i)
    elements += static_cast<double>(workload.input_size(i));
  f.bytes = 4.0 * elements;
  f.repeat = options.repeat;
  f.timeout_s = options.timeout_s;
  return f;
}

}  // namespace webtune::tracker
