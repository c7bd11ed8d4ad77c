/// \file scheduler.cpp
/// Queues, leases, re-queues and quarantines; the rules are in the header.
#include "tracker/scheduler.hpp"

#include <algorithm>
#include <stdexcept>

namespace webtune::tracker {

bool key_matches(const std::string& pattern, const std::string& key) {
  if (pattern.empty() || key.size() < pattern.size()) return false;
  if (key.compare(0, pattern.size(), pattern) != 0) return false;
  return key.size() == pattern.size() || key[pattern.size()] == ':' || pattern.back() == ':';
}

Scheduler::Scheduler(SchedulerOptions options) : options_(options) {}

void Scheduler::mark_idle(AgentId id, const Agent& agent) {
  for (const std::string& key : agent.keys) idle_by_key_[key].insert(id);
}

void Scheduler::unmark_idle(AgentId id, const Agent& agent) {
  for (const std::string& key : agent.keys) {
    auto it = idle_by_key_.find(key);
    if (it == idle_by_key_.end()) continue;
    it->second.erase(id);
    if (it->second.empty()) idle_by_key_.erase(it);
  }
}

std::optional<std::pair<AgentId, std::string>> Scheduler::find_idle(const std::string& pattern,
                                                                    const std::string& avoid,
                                                                    JobKind kind) const {
  for (auto it = idle_by_key_.lower_bound(pattern); it != idle_by_key_.end(); ++it) {
    if (it->first.compare(0, pattern.size(), pattern) != 0) break;  // past the prefix range
    if (!key_matches(pattern, it->first)) continue;
    for (AgentId id : it->second) {
      const Agent& agent = agents_.at(id);
      if (!avoid.empty() && agent.name == avoid) continue;
      if (kind == JobKind::kModel ? !agent.models : !agent.kernels) continue;
      return std::make_pair(id, it->first);
    }
  }
  return std::nullopt;
}

void Scheduler::add_agent(AgentId id, std::vector<std::string> keys, TimePoint now,
                          std::string name, std::vector<JobKind> kinds) {
  if (agents_.count(id)) throw std::invalid_argument("agent id already registered");
  keys.erase(std::remove(keys.begin(), keys.end(), std::string()), keys.end());
  if (keys.empty()) throw std::invalid_argument("an agent needs at least one key");
  Agent& agent = agents_[id];
  agent.keys = std::move(keys);
  agent.name = std::move(name);
  agent.kernels = std::find(kinds.begin(), kinds.end(), JobKind::kKernel) != kinds.end();
  agent.models = std::find(kinds.begin(), kinds.end(), JobKind::kModel) != kinds.end();
  mark_idle(id, agent);
}

std::vector<Action> Scheduler::remove_agent(AgentId id, TimePoint now) {
  std::vector<Action> actions;
  auto it = agents_.find(id);
  if (it == agents_.end()) return actions;
  unmark_idle(id, it->second);
  quarantined_.erase(id);
  std::optional<JobId> job = it->second.job;
  agents_.erase(it);
  if (job) {
    ++counters_.agents_lost_jobs;
    leases_.erase(*job);
    requeue_or_fail(*job, MeasureErrorNo::kRuntimeDevice, "the agent disconnected", actions);
  }
  return actions;
}

void Scheduler::enqueue(Job& job, bool front) {
  // A re-queued job keeps its original sequence number, so it goes ahead of later submissions.
  if (!front || job.sequence == 0) job.sequence = next_sequence_++;
  queues_[{job.spec.key, job.spec.facts.kind}].emplace(
      std::make_pair(job.spec.priority, job.sequence), job.id);
}

void Scheduler::erase_job(std::map<JobId, Job>::iterator it) {
  auto load = loads_.find(it->second.client);
  if (load != loads_.end()) {
    load->second.jobs -= 1;
    load->second.bytes -= it->second.spec.payload.size();
    if (load->second.jobs == 0) loads_.erase(load);
  }
  jobs_.erase(it);
}

ClientLoad Scheduler::client_load(ClientId client) const {
  auto it = loads_.find(client);
  return it == loads_.end() ? ClientLoad{} : it->second;
}

const JobSpec* Scheduler::leased_spec(AgentId agent, JobId job) const {
  auto lease = leases_.find(job);
  if (lease == leases_.end() || lease->second.agent != agent) return nullptr;
  return &jobs_.at(job).spec;
}

int Scheduler::leased_attempt(JobId job) const {
  if (!leases_.count(job)) return 0;
  return jobs_.at(job).attempts;
}

void Scheduler::heard_from(AgentId id) {
  auto it = agents_.find(id);
  if (it == agents_.end() || !it->second.silent) return;
  it->second.silent = false;
  if (!it->second.job && !quarantined_.count(id)) mark_idle(id, it->second);
}

std::string Scheduler::leased_key(JobId job) const {
  auto lease = leases_.find(job);
  return lease == leases_.end() ? std::string() : lease->second.agent_key;
}

void Scheduler::unqueue(const Job& job) {
  auto q = queues_.find({job.spec.key, job.spec.facts.kind});
  if (q == queues_.end()) return;
  q->second.erase(std::make_pair(job.spec.priority, job.sequence));
  if (q->second.empty()) queues_.erase(q);
}

JobId Scheduler::submit(ClientId client, JobSpec spec, TimePoint now) {
  if (spec.key.empty()) throw std::invalid_argument("a job needs a key");
  const JobId id = next_job_++;
  Job& job = jobs_[id];
  job.id = id;
  job.client = client;
  job.spec = std::move(spec);
  ClientLoad& load = loads_[client];
  load.jobs += 1;
  load.bytes += job.spec.payload.size();
  enqueue(job, false);
  ++counters_.submitted;
  return id;
}

std::vector<Action> Scheduler::remove_client(ClientId client) {
  std::vector<Action> actions;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    Job& job = it->second;
    if (job.client != client) {
      ++it;
      continue;
    }
    auto lease = leases_.find(job.id);
    if (lease != leases_.end()) {
      // The agent keeps running it; its result will be discarded.
      orphaned_.insert(job.id);
      actions.push_back(Action{Action::Kind::kCancelJob, job.id, lease->second.agent});
      ++it;
    } else {
      unqueue(job);
      ++counters_.cancelled;
      erase_job(it++);
    }
  }
  return actions;
}

bool Scheduler::cancel(ClientId client, JobId id, std::vector<Action>* actions) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.client != client || orphaned_.count(id)) return false;
  auto lease = leases_.find(id);
  if (lease != leases_.end()) {
    orphaned_.insert(id);
    if (actions) actions->push_back(Action{Action::Kind::kCancelJob, id, lease->second.agent});
  } else {
    unqueue(it->second);
    erase_job(it);
  }
  ++counters_.cancelled;
  return true;
}

void Scheduler::hold(AgentId id, Agent& agent, TimePoint until, std::string why) {
  // The reason of the longest hold stands (a suspicion outlasts a quarantine).
  if (!quarantined_.count(id) || until >= agent.quarantined_until)
    agent.held_reason = std::move(why);
  agent.quarantined_until = std::max(agent.quarantined_until, until);
  unmark_idle(id, agent);
  quarantined_.insert(id);
}

void Scheduler::note_agent_failure(AgentId id, Agent& agent, TimePoint now,
                                   const std::string& what) {
  ++agent.streak[what];
  if (++agent.failures_in_a_row < options_.quarantine_after) return;
  // "lease expired ×3", or "RUNTIME_DEVICE ×2, lease expired ×1" for a mixed streak.
  std::string why;
  for (const auto& [name, count] : agent.streak)
    why += (why.empty() ? "" : ", ") + name + " \u00d7" + std::to_string(count);
  agent.failures_in_a_row = 0;
  agent.streak.clear();
  hold(id, agent, now + options_.quarantine_duration, std::move(why));
  ++counters_.quarantines;
}

void Scheduler::suspend(AgentId id, TimePoint until, std::string why) {
  auto it = agents_.find(id);
  if (it != agents_.end()) hold(id, it->second, until, std::move(why));
}

bool Scheduler::reject(AgentId agent_id, JobId job_id, const std::string& why,
                       TimePoint suspended_until, std::vector<Action>* actions) {
  auto lease = leases_.find(job_id);
  if (lease == leases_.end() || lease->second.agent != agent_id) return false;
  leases_.erase(lease);
  Agent& agent = agents_.at(agent_id);
  agent.job.reset();
  hold(agent_id, agent, suspended_until, "suspect (a refused result)");
  ++counters_.rejected_results;
  std::vector<Action> out;
  requeue_or_fail(job_id, MeasureErrorNo::kRuntimeDevice, "a refused result (" + why + ")", out);
  if (actions) actions->insert(actions->end(), out.begin(), out.end());
  return true;
}

bool Scheduler::complete(AgentId agent_id, JobId job_id, MeasureErrorNo error,
                         std::string result_json, TimePoint now, std::vector<Action>* actions,
                         std::string* why) {
  auto lease = leases_.find(job_id);
  if (lease == leases_.end() || lease->second.agent != agent_id) {
    ++counters_.refused_results;
    if (why) *why = "job " + std::to_string(job_id) + " is not leased to this agent";
    return false;
  }
  std::string agent_key = std::move(lease->second.agent_key);
  leases_.erase(lease);
  Agent& agent = agents_.at(agent_id);
  agent.job.reset();
  // Wrong answers, rejected shaders and kernels that ran past the job's own time budget are the
  // kernel's (or the client's) fault, not the agent's.
  const bool agent_fault =
      error == MeasureErrorNo::kRuntimeDevice || error == MeasureErrorNo::kUnknown;
  if (agent_fault) {
    note_agent_failure(agent_id, agent, now, std::string(error_name(error)));
  } else {
    agent.failures_in_a_row = 0;
    agent.streak.clear();
  }
  if (!quarantined_.count(agent_id)) mark_idle(agent_id, agent);

  auto job_it = jobs_.find(job_id);
  const Job job = job_it->second;
  erase_job(job_it);
  if (orphaned_.erase(job_id)) return true;  // the client left; nobody to deliver to
  Action deliver{Action::Kind::kDeliver, job_id, agent_id, job.client, job.spec.client_tag,
                 std::move(result_json)};
  deliver.agent_key = std::move(agent_key);
  deliver.attempt = job.attempts;
  if (actions) actions->push_back(std::move(deliver));
  ++counters_.delivered;
  return true;
}

void Scheduler::requeue_or_fail(JobId id, MeasureErrorNo error, const std::string& why,
                                std::vector<Action>& actions) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  if (orphaned_.erase(id)) {  // nobody waits for it any more
    erase_job(it);
    return;
  }
  if (job.attempts < options_.max_attempts) {
    ++counters_.requeued;
    enqueue(job, true);
    return;
  }
  Action deliver{Action::Kind::kDeliver, id, 0, job.client, job.spec.client_tag};
  deliver.error = error;
  deliver.message = why + " on each of " + std::to_string(job.attempts) + " attempts";
  deliver.attempt = job.attempts;
  actions.push_back(std::move(deliver));
  ++counters_.failed_max_attempts;
  ++counters_.delivered;
  erase_job(it);
}

std::vector<Action> Scheduler::dispatch(TimePoint now) {
  std::vector<Action> actions;
  while (!queues_.empty() && !idle_by_key_.empty()) {
    // The best queued job (priority, then age) that some idle agent can take. Each queue is
    // scanned past jobs that no idle agent may take (an avoided agent), a bounded number deep.
    const Queue::value_type* best = nullptr;
    std::pair<AgentId, std::string> best_agent;
    for (const auto& [which, queue] : queues_) {
      const std::string& pattern = which.first;
      int scanned = 0;
      for (auto it = queue.begin(); it != queue.end() && scanned < kDispatchScan; ++it, ++scanned) {
        if (best && !QueueOrder()(it->first, best->first)) break;
        const JobSpec& spec = jobs_.at(it->second).spec;
        if (auto agent = find_idle(pattern, spec.avoid_agent, spec.facts.kind)) {
          best = &*it;
          best_agent = std::move(*agent);
          break;
        }
      }
    }
    if (!best) break;
    Job& job = jobs_.at(best->second);
    const AgentId agent_id = best_agent.first;
    Agent& agent = agents_.at(agent_id);
    unqueue(job);
    unmark_idle(agent_id, agent);
    agent.job = job.id;
    ++job.attempts;
    const TimePoint deadline = now + job.spec.lease;
    leases_[job.id] = Lease{agent_id, deadline, best_agent.second};
    Action send{Action::Kind::kSendJob, job.id,           agent_id,         job.client,
                job.spec.client_tag,    job.spec.payload, best_agent.second};
    send.deadline = deadline;
    send.attempt = job.attempts;
    actions.push_back(std::move(send));
  }
  return actions;
}

std::vector<Action> Scheduler::tick(TimePoint now) {
  std::vector<Action> actions;
  std::vector<JobId> expired;
  for (const auto& [job, lease] : leases_)
    if (lease.deadline <= now) expired.push_back(job);
  for (JobId id : expired) {
    const AgentId agent_id = leases_.at(id).agent;
    leases_.erase(id);
    ++counters_.lease_expiries;
    Agent& agent = agents_.at(agent_id);
    agent.job.reset();
    note_agent_failure(agent_id, agent, now, "lease expired");
    // Idle again only once it is heard from (heard_from): a stopped process that still holds
    // its socket would otherwise take the re-queued job back at once.
    agent.silent = true;
    requeue_or_fail(id, MeasureErrorNo::kRunTimeout, "the lease expired", actions);
  }
  for (auto it = quarantined_.begin(); it != quarantined_.end();) {
    Agent& agent = agents_.at(*it);
    if (agent.quarantined_until <= now) {
      if (!agent.job && !agent.silent) mark_idle(*it, agent);
      it = quarantined_.erase(it);
    } else {
      ++it;
    }
  }
  return actions;
}

std::optional<TimePoint> Scheduler::next_deadline() const {
  std::optional<TimePoint> next;
  for (const auto& [job, lease] : leases_)
    if (!next || lease.deadline < *next) next = lease.deadline;
  return next;
}

size_t Scheduler::pending_jobs() const {
  size_t n = 0;
  for (const auto& [which, queue] : queues_) n += queue.size();
  return n;
}

std::optional<JobId> Scheduler::job_of(AgentId agent) const {
  auto it = agents_.find(agent);
  if (it == agents_.end()) return std::nullopt;
  return it->second.job;
}

std::map<std::string, KeyStatus> Scheduler::status(TimePoint now) const {
  std::map<std::string, KeyStatus> out;
  for (const auto& [id, agent] : agents_) {
    for (const std::string& key : agent.keys) {
      KeyStatus& s = out[key];
      if (quarantined_.count(id))
        ++s.agents_quarantined;
      else if (agent.job)
        ++s.agents_busy;
      else
        ++s.agents_idle;
    }
  }
  for (const auto& [which, queue] : queues_) out[which.first].jobs_pending += queue.size();
  for (const auto& [job, lease] : leases_) out[jobs_.at(job).spec.key].jobs_leased += 1;
  return out;
}

AgentAvailability Scheduler::availability(const std::string& pattern, JobKind kind) const {
  AgentAvailability out;
  auto count = [](AgentCounts& a, int AgentCounts::*state) {
    ++a.agents;
    ++(a.*state);
  };
  for (const auto& [id, agent] : agents_) {
    if (kind == JobKind::kModel ? !agent.models : !agent.kernels) continue;
    // Held first: a quarantined agent is not usable even while its last job runs on.
    int AgentCounts::*state = quarantined_.count(id) ? &AgentCounts::held
                              : agent.job            ? &AgentCounts::busy
                              : agent.silent         ? &AgentCounts::unresponsive
                                                     : &AgentCounts::idle;
    bool matched = false;
    for (const std::string& key : agent.keys) {
      if (!key_matches(pattern, key)) continue;
      count(out.by_key[key], state);
      matched = true;
    }
    if (!matched) continue;
    count(out, state);
    if (state == &AgentCounts::held) ++out.held_reasons[agent.held_reason];
  }
  return out;
}

}  // namespace webtune::tracker
