/// \file tuned_artifact.cpp
/// One tuned config's artifact JSON (tuned_artifact.hpp).
#include "tuner/tuned_artifact.hpp"

#include <boost/json.hpp>

#include "codegen/reference.hpp"

namespace webtune {

namespace bj = boost::json;

bj::object tuned_artifact_json(const TuningJobInfo& job, const Task& task,
                               const ConfigEntity& entity, const TrialRecord* trial, bool best,
                               std::optional<int64_t> rank, uint64_t seed, int samples) {
  const double flops = job.workload.flops();
  bj::object out{{"job", job.id},
                 {"task", job.task_name},
                 {"target", target_name(job.target)},
                 {"device_key", job.device_key},
                 {"trials", job.trials},
                 {"config_index", entity.index()},
                 {"config", entity.to_json()},
                 {"best", best},
                 {"rank", rank ? bj::value(*rank) : bj::value(nullptr)},
                 {"workload", job.workload.to_json()},
                 {"flops", flops}};
  if (trial) {
    out["result"] = trial->result.to_json();
    out["cost_s"] = trial->result.ok() ? bj::value(trial->result.mean_cost()) : bj::value(nullptr);
    out["gflops"] = trial->result.gflops(flops);
  } else {
    out["result"] = nullptr;
    out["cost_s"] = nullptr;
    out["gflops"] = nullptr;
  }
  out["artifact"] = task.build(entity).to_json();
  out["seed"] = seed;
  out["samples"] = samples_to_json(reference_samples(job.workload, seed, samples));
  return out;
}

}  // namespace webtune
