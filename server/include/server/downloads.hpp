/// \file downloads.hpp
/// What the dashboard offers to download for one tuning job, as the API serves it:
///  - GET /api/export?job=ID&format=autotvm: the job's trials as AutoTVM JSON lines, exactly as
///    `webtune log export --format autotvm` writes them (tuner/autotvm_log.hpp: export_autotvm),
///    one line per trial, suspect trials as failures.
///  - GET /api/export?job=ID&format=csv: the job's trials as CSV (RFC 4180), one header line then
///    one row per trial in trial order: number, trial_id, config_index, error_no, error, gflops,
///    mean_cost_s, costs_s (space-separated), all_cost_s, timestamp, agent, verdict, config (the
///    entity JSON).
///  - GET /api/artifact?job=ID: the job's best config's kernel (its best trial as
///    RecordStore::best_trial picks it) as `webtune artifact` prints it: {"job", "task",
///    "target", "device_key", "trials", "config_index", "config", "best": true, "rank": 1,
///    "workload", "flops", "result", "cost_s", "gflops", "artifact" (KernelArtifact JSON),
///    "seed": 1, "samples"}; the kernel is built by the job's template (Task::build) over the
///    device limits recorded for its device.
#pragma once

#include <cstdint>
#include <string>

#include <boost/json/fwd.hpp>

#include "tuner/records.hpp"

namespace webtune::server {

/// The AutoTVM JSON lines of job `job_id` (the job must exist). Throws what export_autotvm
/// throws for a damaged trial.
std::string export_job_autotvm(const RecordStore& store, int64_t job_id);

/// The CSV of job `job_id`'s trials (see the file comment).
std::string export_job_csv(const RecordStore& store, int64_t job_id);

/// The best config's artifact JSON of job `job`; throws std::runtime_error when it has no
/// successful trial, or its stored config no longer fits the template.
boost::json::object best_artifact_json(const RecordStore& store, const TuningJobInfo& job);

/// The template's default config index of `job` (Task::default_config over the recorded device
/// limits), or -1 when no template builds the job's workload on its target.
int64_t default_config_index(const RecordStore& store, const TuningJobInfo& job);

}  // namespace webtune::server
