/// \file record_selection.cpp
/// The config of each task of a package: exact device key, then the key's family, then the
/// template's default (record_selection.hpp).
#include "deploy/record_selection.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "codegen/task.hpp"

namespace webtune::deploy {

namespace bj = boost::json;

namespace {

/// One usable trial: its job and the trial.
struct Candidate {
  const TuningJobInfo* job = nullptr;
  TrialRecord trial;
  double cost_s = 0;
};

/// True when the entity JSON of a trial chooses the vertex stage (knob "stage" = "vertex").
bool is_vertex_stage(const std::string& config_json) {
  bj::error_code ec;
  const bj::value v = bj::parse(config_json, ec);
  if (ec || !v.is_object()) return false;
  const bj::value* entity = v.as_object().if_contains("entity");
  if (!entity || !entity->is_array()) return false;
  for (const bj::value& knob : entity->as_array()) {
    if (!knob.is_array() || knob.as_array().size() != 3) continue;
    const bj::array& k = knob.as_array();
    if (k[0].is_string() && k[0].as_string() == "stage" && k[2].is_string())
      return k[2].as_string() == "vertex";
  }
  return false;
}

std::string ms_text(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g ms", ms);
  return text;
}

}  // namespace

std::string device_family(const std::string& device_key) {
  return device_key.substr(0, device_key.find(':'));
}

DeviceLimits package_tuning_limits(DeviceLimits limits, const TuneTarget& target) {
  if (target.kernel == Target::kGlesFrag) limits.max_feedback_components = 0;
  return limits;
}

std::string default_device_key(const RecordStore* store, const TuneTarget& target) {
  if (store == nullptr) return "";
  std::map<std::string, int> jobs_by_key;
  for (const TuningJobInfo& job : store->jobs()) {
    if (job.target == target.kernel && device_family(job.device_key) == target.key)
      ++jobs_by_key[job.device_key];
  }
  std::string best;
  int most = 0;
  for (const auto& [key, count] : jobs_by_key) {
    if (count > most) best = key, most = count;  // the map's order breaks ties
  }
  return best;
}

DeviceLimits stored_limits(const RecordStore* store, const std::string& device_key) {
  if (store == nullptr || device_key.empty()) return {};
  const std::optional<std::string> info = store->device_info(device_key);
  if (!info) return {};
  bj::error_code ec;
  const bj::value device = bj::parse(*info, ec);
  if (ec || !device.is_object() || !device.as_object().contains("limits")) return {};
  return DeviceLimits::from_json(device.as_object().at("limits"));
}

TaskChoice choose_config(const RecordStore* store, const Workload& workload,
                         const TuneTarget& target, const std::string& device_key) {
  TaskChoice choice;
  const bool frag = target.kernel == Target::kGlesFrag;
  const std::string family = device_key.empty() ? target.key : device_family(device_key);
  if (store != nullptr) {
    const std::string key = workload.key();
    const std::vector<TuningJobInfo> jobs = store->jobs();
    // Tier 0: the device key itself; tier 1: the rest of its family.
    std::vector<Candidate> tiers[2];
    std::optional<Candidate> fastest_vertex;
    for (const TuningJobInfo& job : jobs) {
      if (job.target != target.kernel || job.workload.key() != key) continue;
      int tier = -1;
      if (!device_key.empty() && job.device_key == device_key)
        tier = 0;
      else if (device_family(job.device_key) == family)
        tier = 1;
      if (tier < 0) continue;
      for (TrialRecord& trial : store->trials(job.id)) {
        if (!trial.result.ok() || trial.verdict == kSuspect) continue;
        Candidate c{&job, std::move(trial), 0};
        c.cost_s = c.trial.result.mean_cost();
        if (frag && is_vertex_stage(c.trial.config_json)) {
          if (!fastest_vertex || c.cost_s < fastest_vertex->cost_s) fastest_vertex = c;
          continue;
        }
        tiers[tier].push_back(std::move(c));
      }
    }
    for (int tier = 0; tier < 2; ++tier) {
      std::vector<Candidate>& list = tiers[tier];
      // Jobs come by id and trials in insertion order, so a stable sort keeps ties in order.
      std::stable_sort(list.begin(), list.end(),
                       [](const Candidate& a, const Candidate& b) { return a.cost_s < b.cost_s; });
      for (const Candidate& c : list) {
        try {
          const DeviceLimits limits = stored_limits(store, c.job->device_key);
          const Task task = Task::create(workload, target.kernel, limits);
          const ConfigEntity entity = task.space->from_json(bj::parse(c.trial.config_json),
                                                            ConfigSpace::StaleIndex::kRenumber);
          choice.artifact = task.build(entity);
          choice.entity = entity;
          choice.limits = limits;
        } catch (const std::exception& e) {
          choice.notes.push_back("record " + std::to_string(c.trial.id) + " of " +
                                 c.job->device_key + " does not build any more (" + e.what() +
                                 "); skipped");
          continue;
        }
        choice.source = tier == 0 ? TaskSource::kRecord : TaskSource::kPrefix;
        choice.device_key = c.job->device_key;
        choice.record_id = c.trial.id;
        choice.cost_ms = c.cost_s * 1e3;
        if (fastest_vertex && fastest_vertex->cost_s < c.cost_s)
          choice.notes.push_back("a vertex-stage (transform feedback) record was faster (" +
                                 ms_text(fastest_vertex->cost_s * 1e3) + ", record " +
                                 std::to_string(fastest_vertex->trial.id) +
                                 ") but packages take fragment-stage kernels only");
        return choice;
      }
    }
    if (fastest_vertex)
      choice.notes.push_back("only vertex-stage (transform feedback) records exist (fastest " +
                             ms_text(fastest_vertex->cost_s * 1e3) +
                             "); packages take fragment-stage kernels only");
  }
  // The template's default, for the given device's limits when the records know them.
  choice.source = TaskSource::kDefault;
  choice.limits = stored_limits(store, device_key);
  const Task task = Task::create(workload, target.kernel, choice.limits);
  choice.entity = task.default_config();
  if (frag && is_vertex_stage(bj::serialize(choice.entity.to_json()))) {
    // Under tight limits the template's fallback (its lowest valid index) may be a vertex-stage
    // kernel; a package needs a fragment-stage one: the first valid one.
    bool found = false;
    for (int64_t index : task.space->valid_indices()) {
      const ConfigEntity e = task.space->get(index);
      if (is_vertex_stage(bj::serialize(e.to_json()))) continue;
      choice.entity = e;
      found = true;
      break;
    }
    if (!found)
      throw std::invalid_argument(
          "no fragment-stage config of " + workload.key() +
          " fits the device's limits (packages take no vertex-stage kernels)");
    choice.notes.push_back(
        "the template's default is a vertex-stage kernel for these limits; "
        "took the first valid fragment-stage config (index " +
        std::to_string(choice.entity.index()) + ")");
  }
  choice.artifact = task.build(choice.entity);
  return choice;
}

}  // namespace webtune::deploy
