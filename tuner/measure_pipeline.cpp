/// \file measure_pipeline.cpp
/// Builder and tracker runner.
#include "tuner/measure_pipeline.hpp"

#include <map>
#include <thread>

#include "tracker/scheduler.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune {

namespace bj = boost::json;

Builder::Builder(const Task& task, uint64_t seed, int samples, MeasureOptions options)
    : task_(task),
      seed_(seed),
      options_(options),
      samples_(reference_samples(task.workload, seed, samples)) {}

bool Builder::build(const ConfigEntity& entity, MeasureInput* input, MeasureResult* error) const {
  try {
    input->workload = task_.workload;
    input->artifact = task_.build(entity);
    input->seed = seed_;
    input->samples = samples_;
    input->options = options_;
    return true;
  } catch (const MeasureError& e) {
    *error = MeasureResult::failure(e.error(), e.what());
  } catch (const std::exception& e) {
    *error = MeasureResult::failure(MeasureErrorNo::kCompileHost, e.what());
  }
  return false;
}

TrackerRunner::TrackerRunner(const std::string& url, const std::string& token,
                             const std::string& key)
    : key_(key) {
  tracker::Hello hello;
  hello.role = tracker::Role::kClient;
  hello.token = token;
  hello.name = "webtune tune";
  client_ = std::make_unique<tracker::TrackerClient>(url, hello);
}

TrackerRunner::~TrackerRunner() = default;

std::pair<std::string, std::string> TrackerRunner::wait_for_device(std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bj::object summary = client_->summary();
    std::vector<std::pair<std::string, std::string>> matches;
    for (const auto& [key, device] : summary["devices"].as_object())
      if (tracker::key_matches(key_, std::string(key)))
        matches.emplace_back(std::string(key), bj::serialize(device));
    if (matches.size() == 1) return matches[0];
    if (matches.size() > 1) {
      std::string keys;
      for (const auto& m : matches) keys += " " + m.first;
      throw std::runtime_error("key '" + key_ + "' matches agents of several devices:" + keys +
                               "; pass one of them with --key");
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("no agent serves key '" + key_ + "' after " +
                               std::to_string(timeout.count()) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<MeasureResult> TrackerRunner::run(const std::vector<MeasureInput>& inputs,
                                              std::vector<std::string>* agents) {
  std::vector<MeasureResult> results(inputs.size());
  if (agents) agents->assign(inputs.size(), "");
  if (inputs.empty()) return results;
  std::vector<tracker::SubmitItem> items;
  std::map<uint64_t, size_t> slot_of_tag;
  for (size_t i = 0; i < inputs.size(); ++i) {
    tracker::SubmitItem item;
    item.tag = next_tag_++;
    item.key = key_;
    item.lease_ms = static_cast<int64_t>(inputs[i].options.timeout_s * 1000) + lease_margin.count();
    item.input = inputs[i].to_json();
    slot_of_tag[item.tag] = i;
    items.push_back(std::move(item));
  }
  client_->submit(items);
  size_t received = 0;
  while (received < inputs.size()) {
    // The tracker owns every job until it delivers it, so waiting here cannot hang on a lost
    // agent: leases expire and jobs come back as errors after max_attempts.
    std::optional<tracker::ClientResult> r = client_->next_result(std::chrono::seconds(60));
    if (!r) continue;
    auto slot = slot_of_tag.find(r->tag);
    if (slot == slot_of_tag.end()) continue;  // a late answer from an earlier batch
    try {
      results[slot->second] = MeasureResult::from_json(r->result);
    } catch (const std::exception& e) {
      results[slot->second] =
          MeasureResult::failure(MeasureErrorNo::kUnknown, std::string("bad result: ") + e.what());
    }
    if (agents) (*agents)[slot->second] = r->agent;
    slot_of_tag.erase(slot);
    ++received;
  }
  return results;
}

}  // namespace webtune
