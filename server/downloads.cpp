/// \file downloads.cpp
/// The job downloads: AutoTVM lines through export_autotvm over a one-job copy, CSV, and the
/// best config's kernel artifact.
#include "server/downloads.hpp"

#include <boost/json.hpp>
#include <map>
#include <sstream>

#include "codegen/reference.hpp"
#include "codegen/task.hpp"
#include "tuner/autotvm_log.hpp"
#include "tuner/tuned_artifact.hpp"

namespace webtune::server {

namespace bj = boost::json;

namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string number(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

DeviceLimits recorded_limits(const RecordStore& store, const std::string& device_key) {
  if (const std::optional<std::string> info = store.device_info(device_key)) {
    boost::system::error_code ec;
    const bj::value device = bj::parse(*info, ec);
    if (!ec && device.is_object() && device.as_object().contains("limits"))
      return DeviceLimits::from_json(device.as_object().at("limits"));
  }
  return {};
}

}  // namespace

std::string export_job_autotvm(const RecordStore& store, int64_t job_id) {
  const std::optional<TuningJobInfo> job = store.job(job_id);
  if (!job) throw std::runtime_error("no tuning job " + std::to_string(job_id));
  // export_autotvm selects jobs by workload substring and target, which may take in other
  // devices' jobs: copy this one job (and its verdicts) into a store of its own and export that.
  RecordStore one(":memory:");
  ImportedJob copy{job->workload, job->target, job->device_key, job->task_name,
                   store.trials(job_id)};
  one.import_jobs({copy});
  const std::vector<TuningJobInfo> jobs = one.jobs();
  if (!jobs.empty()) {
    std::map<int64_t, int64_t> trial_of_index;
    for (const TrialRecord& t : one.trials(jobs[0].id)) trial_of_index[t.config_index] = t.id;
    std::map<int64_t, int64_t> index_of_trial;
    for (const TrialRecord& t : copy.trials) index_of_trial[t.id] = t.config_index;
    for (VerificationRecord v : store.verifications(job_id)) {
      v.trial_id = trial_of_index.at(index_of_trial.at(v.trial_id));
      one.add_verification(v);
    }
  }
  std::ostringstream out;
  export_autotvm(one, out);
  return out.str();
}

std::string export_job_csv(const RecordStore& store, int64_t job_id) {
  std::string out =
      "number,trial_id,config_index,error_no,error,gflops,mean_cost_s,costs_s,all_cost_s,"
      "timestamp,agent,verdict,config\r\n";
  int64_t n = 0;
  for (const TrialRecord& t : store.trials(job_id)) {
    std::string costs;
    for (double c : t.result.costs) costs += (costs.empty() ? "" : " ") + number(c);
    const bool ok = t.result.ok() && !t.result.costs.empty();
    out += std::to_string(++n) + "," + std::to_string(t.id) + "," + std::to_string(t.config_index) +
           "," + std::to_string(static_cast<int>(t.result.error)) + "," +
           csv_field(std::string(error_name(t.result.error))) + "," + number(t.gflops) + "," +
           (ok ? number(t.result.mean_cost()) : "") + "," + csv_field(costs) + "," +
           number(t.result.all_cost) + "," + number(t.result.timestamp) + "," + csv_field(t.agent) +
           "," + csv_field(t.verdict) + "," + csv_field(t.config_json) + "\r\n";
  }
  return out;
}

bj::object best_artifact_json(const RecordStore& store, const TuningJobInfo& job) {
  const std::optional<TrialRecord> best = store.best_trial(job.id);
  if (!best)
    throw std::runtime_error("job " + std::to_string(job.id) + " (" + job.workload.key() +
                             ") has no successful trial");
  const Task task = Task::create(job.workload, job.target, recorded_limits(store, job.device_key));
  // The stored entity, renumbered into the space as it is now (config_in_space).
  const ConfigEntity entity = [&] {
    try {
      return config_in_space(*task.space, job.workload, job.target, best->config_json, true);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("job " + std::to_string(job.id) + ": the best trial's config " +
                               std::to_string(best->config_index) + " is unusable: " + e.what());
    }
  }();
  return tuned_artifact_json(job, task, entity, &*best, true, 1, 1, 64);
}

int64_t default_config_index(const RecordStore& store, const TuningJobInfo& job) {
  try {
    const Task task =
        Task::create(job.workload, job.target, recorded_limits(store, job.device_key));
    return task.default_config().index();
  } catch (const std::exception&) {
    return -1;  // no template for it (a foreign import)
  }
}

}  // namespace webtune::server
