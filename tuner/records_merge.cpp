/// \file records_merge.cpp
/// merge_records (records_merge.hpp), over RecordStore's public API only: it works between any
/// two backends because each store reads and writes its own.
#include "tuner/records_merge.hpp"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace webtune {

namespace {

/// A job's identity across stores (ids differ).
using JobKey = std::tuple<std::string, std::string, std::string>;

JobKey key_of(const TuningJobInfo& job) {
  return {job.workload.key(), std::string(target_name(job.target)), job.device_key};
}

std::map<JobKey, int64_t> job_ids(const RecordStore& store) {
  std::map<JobKey, int64_t> out;
  for (const TuningJobInfo& job : store.jobs()) out.emplace(key_of(job), job.id);
  return out;
}

/// A verification's identity across stores: its trial's config index and its own fields.
using VerificationKey = std::tuple<int64_t, std::string, std::string, double, std::string>;

}  // namespace

MergeCounts merge_records(const RecordStore& from, RecordStore& into) {
  MergeCounts counts;
  // Devices first: a job created below would otherwise create its device without its info.
  for (const std::string& key : from.device_keys()) {
    const std::optional<std::string> info = from.device_info(key);
    if (!info || *info == "{}") continue;
    const std::optional<std::string> there = into.device_info(key);
    if (there && *there != "{}") continue;
    into.upsert_device(key, *info);
    ++counts.devices;
  }

  std::map<JobKey, int64_t> existing = job_ids(into);
  for (const TuningJobInfo& job : from.jobs()) {
    ++counts.jobs;
    const JobKey key = key_of(job);
    const bool created = !existing.count(key);
    ImportedJob imported;
    imported.workload = job.workload;
    imported.target = job.target;
    imported.device_key = job.device_key;
    imported.task_name = job.task_name;
    imported.tuner = job.tuner;
    imported.status = job.status;
    imported.trials = from.trials(job.id);
    const int64_t total = static_cast<int64_t>(imported.trials.size());
    std::map<int64_t, int64_t> index_of_trial;  // source trial id → config index
    for (const TrialRecord& t : imported.trials) index_of_trial.emplace(t.id, t.config_index);
    const int64_t inserted = into.import_jobs({imported});
    counts.trials += inserted;
    counts.trials_skipped += total - inserted;
    if (created) {
      ++counts.jobs_created;
      existing = job_ids(into);
    }
    const int64_t into_job = existing.at(key);

    const std::vector<VerificationRecord> verifications = from.verifications(job.id);
    if (verifications.empty()) continue;
    std::map<int64_t, int64_t> trial_at;  // destination: config index → trial id
    for (const TrialRecord& t : into.trials(into_job)) trial_at.emplace(t.config_index, t.id);
    std::map<int64_t, int64_t> index_of_into_trial;
    for (const auto& [index, id] : trial_at) index_of_into_trial.emplace(id, index);
    std::set<VerificationKey> there;
    for (const VerificationRecord& v : into.verifications(into_job))
      there.emplace(index_of_into_trial[v.trial_id], v.verdict, v.agent, v.timestamp, v.message);
    for (VerificationRecord v : verifications) {
      const int64_t index = index_of_trial.at(v.trial_id);
      if (!there.emplace(index, v.verdict, v.agent, v.timestamp, v.message).second) {
        ++counts.verifications_skipped;
        continue;
      }
      v.trial_id = trial_at.at(index);
      into.add_verification(v);
      ++counts.verifications;
    }
  }

  using MeasurementKey = std::tuple<double, std::string, std::string, std::string, std::string>;
  std::set<MeasurementKey> measured;
  for (const ModelMeasurementRecord& m : into.model_measurements())
    measured.emplace(m.created, m.model, m.manifest_sha256, m.device_key, m.agent);
  std::vector<ModelMeasurementRecord> measurements = from.model_measurements();
  // model_measurements lists newest first: copy oldest first, so that the order holds.
  for (auto it = measurements.rbegin(); it != measurements.rend(); ++it) {
    if (!measured.emplace(it->created, it->model, it->manifest_sha256, it->device_key, it->agent)
             .second) {
      ++counts.model_measurements_skipped;
      continue;
    }
    into.add_model_measurement(*it);
    ++counts.model_measurements;
  }
  return counts;
}

}  // namespace webtune
