/// \file tuned_artifact.hpp
/// The JSON that `webtune artifact` prints and the dashboard's `/api/artifact` serves for one
/// tuned config of a job: which job and config it is, its measured result when one is stored, the
/// kernel (KernelArtifact JSON) and reference samples, so that workload + artifact + seed +
/// samples form a MeasureInput (codegen/measure.hpp) that any agent can run.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>

#include "codegen/config_space.hpp"
#include "codegen/task.hpp"
#include "tuner/records.hpp"

namespace webtune {

/// {"job", "task", "target", "device_key", "trials", "config_index", "config", "best", "rank",
/// "workload", "flops", "result", "cost_s", "gflops", "artifact", "seed", "samples"} of `entity`
/// of job `job`, its kernel built by `task` (the job's template over the device's limits).
/// `trial`: the stored trial of that config (null when it was never measured: result, cost_s and
/// gflops are null); `rank`: its rank among the job's successful trials (null when the config was
/// named by index); `samples` reference samples (codegen/reference.hpp) for inputs of `seed`.
/// Throws what Task::build throws for a config that does not build.
boost::json::object tuned_artifact_json(const TuningJobInfo& job, const Task& task,
                                        const ConfigEntity& entity, const TrialRecord* trial,
                                        bool best, std::optional<int64_t> rank, uint64_t seed,
                                        int samples);

}  // namespace webtune
