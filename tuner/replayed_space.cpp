/// \file replayed_space.cpp
/// Loading a fully measured space from the records, and the trials-to-target loop.
#include "tuner/replayed_space.hpp"

#include <boost/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace webtune {

namespace {

/// The space the records were made in: a knob added to the template later (allow_absent) that
/// no stored entity names did not exist then, so it is fixed at its first candidate, the
/// behaviour from before it (and the records' indices stay those of that space).
void pin_knobs_added_after(ConfigSpace& space, const std::vector<TrialRecord>& trials) {
  std::set<std::string> named;
  for (const TrialRecord& trial : trials) {
    const boost::json::value config = boost::json::parse(trial.config_json);
    if (!config.is_object() || !config.as_object().contains("entity")) continue;
    for (const boost::json::value& item : config.as_object().at("entity").as_array())
      if (item.is_array() && !item.as_array().empty() && item.as_array()[0].is_string())
        named.insert(std::string(item.as_array()[0].as_string()));
  }
  const KnobList& knobs = space.knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (!knobs[k].absent_means_first || named.count(knobs[k].name)) continue;
    space.add_constraint("knob '" + knobs[k].name + "' did not exist when these records were made",
                         [k](const ConfigEntity& e) { return e.choices()[k] == 0; });
  }
}

}  // namespace

ReplayedSpace ReplayedSpace::load(const RecordStore& store, int64_t job_id) {
  const std::optional<TuningJobInfo> job = store.job(job_id);
  if (!job) throw std::runtime_error("replay: no tuning job " + std::to_string(job_id));
  DeviceLimits limits;
  if (const std::optional<std::string> info = store.device_info(job->device_key)) {
    const boost::json::value device = boost::json::parse(*info);
    if (device.is_object() && device.as_object().contains("limits"))
      limits = DeviceLimits::from_json(device.as_object().at("limits"));
  }
  ReplayedSpace space(*job, Task::create(job->workload, job->target, limits));
  ConfigSpace& cs = *space.task_.space;
  const std::string what = "replay of job " + std::to_string(job_id) + " (" + job->workload.key() +
                           " on " + std::string(target_name(job->target)) + ")";
  const std::vector<TrialRecord> trials = store.trials(job_id);
  pin_knobs_added_after(cs, trials);
  for (const TrialRecord& trial : trials) {
    // By entity, not by the stored index: a space that grew since renumbers its configs.
    const ConfigEntity stored =
        cs.from_json(boost::json::parse(trial.config_json), ConfigSpace::StaleIndex::kRenumber);
    space.results_.emplace(stored.index(), trial.result);
    space.best_gflops_ = std::max(space.best_gflops_, trial.result.gflops(job->workload.flops()));
  }
  for (int64_t index : cs.valid_indices())
    if (!space.results_.count(index))
      throw std::runtime_error(what + ": valid config " + std::to_string(index) +
                               " was never measured; measure the whole space first (webtune "
                               "tune --tuner grid --trials " +
                               std::to_string(cs.valid_indices().size()) + ")");
  return space;
}

const MeasureResult& ReplayedSpace::result(const ConfigEntity& entity) const {
  const auto it = results_.find(entity.index());
  if (it == results_.end())
    throw std::out_of_range("replay: config " + std::to_string(entity.index()) +
                            " was never measured");
  return it->second;
}

double ReplayedSpace::gflops(const ConfigEntity& entity) const {
  return result(entity).gflops(task_.workload.flops());
}

int64_t ReplayedSpace::count_at_least(double fraction) const {
  int64_t n = 0;
  for (const auto& [index, r] : results_)
    n += r.gflops(task_.workload.flops()) >= fraction * best_gflops_;
  return n;
}

int64_t trials_to_reach(Tuner& tuner,
                        const std::function<MeasureResult(const ConfigEntity&)>& measure,
                        double target_gflops, int64_t budget, int batch) {
  const double flops = tuner.task().workload.flops();
  int64_t trials = 0;
  while (trials < budget) {
    const std::vector<ConfigEntity> configs = tuner.next_batch(batch);
    if (configs.empty()) break;
    std::vector<MeasureResult> results;
    results.reserve(configs.size());
    for (const ConfigEntity& e : configs) results.push_back(measure(e));
    tuner.update(configs, results);
    for (const MeasureResult& r : results) {
      ++trials;
      if (r.gflops(flops) >= target_gflops) return trials;
    }
  }
  return budget + 1;
}

}  // namespace webtune
