/// \file tracker_state.cpp
/// The protocol logic of the tracker: handshake, submit, results, cancel, summary.
#include "tracker/tracker_state.hpp"

#include <boost/json.hpp>

#include "codegen/error_no.hpp"
#include "tracker/model_job.hpp"
#include "tracker/secret.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

TrackerState::TrackerState(TrackerPolicy policy)
    : policy_(std::move(policy)), scheduler_(policy_.scheduler) {}

uint64_t TrackerState::on_open(std::shared_ptr<PeerConnection> peer, TimePoint now) {
  const uint64_t id = next_session_++;
  connections_[id] = std::move(peer);
  PeerInfo& info = peers_[id];
  info.connected_at = info.last_seen = std::chrono::system_clock::now();
  info.opened = now;
  ++counters_.connections;
  return id;
}

void TrackerState::send_raw(uint64_t id, std::string frame) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  ++counters_.frames_out;
  it->second->send(std::make_shared<const std::string>(std::move(frame)));
}

void TrackerState::send(uint64_t id, const bj::object& message) {
  send_raw(id, bj::serialize(message));
}

void TrackerState::protocol_error(uint64_t id, const std::string& code,
                                  const std::string& message) {
  ++counters_.protocol_errors;
  send(id, make_error(code, message));
}

void TrackerState::on_heartbeat(uint64_t id) {
  if (auto peer = peers_.find(id); peer != peers_.end()) {
    peer->second.last_seen = std::chrono::system_clock::now();
    if (peer->second.greeted && peer->second.role == Role::kAgent) {
      scheduler_.heard_from(id);
      execute({}, Clock::now());
    }
  }
}

void TrackerState::on_binary(uint64_t id, size_t bytes) {
  protocol_error(id, "bad_message",
                 "binary frames carry job payloads, which protocol 1 does not "
                 "accept from peers (" +
                     std::to_string(bytes) + " bytes)");
}

void TrackerState::on_message(uint64_t id, std::string_view text, TimePoint now) {
  auto peer = peers_.find(id);
  if (peer == peers_.end()) return;
  ++counters_.frames_in;
  peer->second.last_seen = std::chrono::system_clock::now();
  if (peer->second.greeted && peer->second.role == Role::kAgent) scheduler_.heard_from(id);
  bj::object message;
  std::string type;
  try {
    message = parse_message(text);
    type = message_type(message);
    if (!peer->second.greeted) {
      handle_hello(id, message, now);
      return;
    }
    const Role role = peer->second.role;
    if (type == "result") {
      if (role != Role::kAgent) throw ProtocolError("forbidden", "only agents send results");
      handle_result(id, message, now);
    } else if (type == "submit") {
      if (role != Role::kClient) throw ProtocolError("forbidden", "only clients submit jobs");
      handle_submit(id, message, now);
    } else if (type == "cancel") {
      if (role != Role::kClient) throw ProtocolError("forbidden", "only clients cancel jobs");
      handle_cancel(id, message);
    } else if (type == "summary") {
      bj::object reply = summary(now);
      reply["type"] = "summary";
      send(id, reply);
    } else if (type == "agents") {
      // Whether anything can serve a key pattern (a tuner that waits says why nothing runs).
      const auto key = message.find("key");
      if (key == message.end() || !key->value().is_string() || key->value().get_string().empty() ||
          key->value().get_string().size() > kMaxKeyBytes)
        throw ProtocolError("bad_message", "'agents' needs a \"key\": a key pattern of 1 to " +
                                               std::to_string(kMaxKeyBytes) + " characters");
      JobKind kind = JobKind::kKernel;
      if (auto k = message.find("kind"); k != message.end()) {
        if (k->value() == bj::value(kJobKindModel))
          kind = JobKind::kModel;
        else if (k->value() != bj::value(kJobKindKernel))
          throw ProtocolError("bad_message", "'agents' \"kind\" is \"kernel\" or \"model\"");
      }
      bj::object reply = agents_for(std::string(key->value().get_string()), kind);
      reply["type"] = "agents";
      send(id, reply);
    } else if (type == "ping") {
      bj::object pong{{"type", "pong"}};
      if (auto t = message.find("t"); t != message.end()) pong["t"] = t->value();
      send(id, pong);
    } else if (type == "hello") {
      throw ProtocolError("bad_message", "already greeted");
    } else {
      throw ProtocolError("unknown_type", "unknown message type '" + truncate_utf8(type, 32) + "'");
    }
  } catch (const ProtocolError& e) {
    if (!peer->second.greeted) {
      ++counters_.refused_handshakes;
      protocol_error(id, e.code(), e.what());
      if (auto c = connections_.find(id); c != connections_.end())
        c->second->close(1008, truncate_utf8(e.what(), kMaxCloseReasonBytes));
      return;
    }
    protocol_error(id, e.code(), e.what());
  } catch (const std::exception& e) {
    protocol_error(id, "bad_message", e.what());
  }
}

void TrackerState::handle_hello(uint64_t id, const bj::object& message, TimePoint now) {
  Hello hello = Hello::from_json(message);
  const AccessTokens& tokens = policy_.tokens;
  const std::string& expected = hello.role == Role::kAgent    ? tokens.agent
                                : hello.role == Role::kClient ? tokens.client
                                                              : tokens.viewer;
  if (!expected.empty() && !token_equals(hello.token, expected))
    throw ProtocolError("bad_token", "wrong token for role " + std::string(role_name(hello.role)));
  PeerInfo& info = peers_.at(id);
  info.greeted = true;
  info.role = hello.role;
  info.name = hello.name;
  info.keys = hello.keys;
  info.job_kinds = hello.job_kinds;
  info.device_json = bj::serialize(hello.device);
  const int heartbeat =
      hello.role == Role::kAgent ? policy_.heartbeat_ms : policy_.client_heartbeat_ms;
  if (heartbeat != policy_.heartbeat_ms)
    if (auto c = connections_.find(id); c != connections_.end())
      c->second->set_idle_timeout(std::chrono::milliseconds(heartbeat));
  send(id, make_welcome(id, heartbeat));
  if (hello.role == Role::kAgent) {
    // A tab with several executors describes each key's device under "devices".
    const bj::object* per_key = nullptr;
    if (auto d = hello.device.find("devices"); d != hello.device.end() && d->value().is_object())
      per_key = &d->value().get_object();
    for (const std::string& key : hello.keys) {
      const bj::object* device = &hello.device;
      if (per_key)
        if (auto k = per_key->find(key); k != per_key->end() && k->value().is_object())
          device = &k->value().get_object();
      info.peaks[key] = DevicePeak::estimate(key, *device, policy_.plausibility);
    }
    std::vector<JobKind> kinds;
    if (hello.takes(kJobKindKernel)) kinds.push_back(JobKind::kKernel);
    if (hello.takes(kJobKindModel)) kinds.push_back(JobKind::kModel);
    scheduler_.add_agent(id, hello.keys, now, hello.name, std::move(kinds));
    // Reconnecting does not clear a suspicion: the agent waits out the rest of it.
    if (auto s = suspects_.find(hello.name); s != suspects_.end() && s->second > now)
      scheduler_.suspend(id, s->second);
    execute({}, now);
  }
}

bool TrackerState::is_suspect(const std::string& agent_name, TimePoint now) const {
  auto it = suspects_.find(agent_name);
  return it != suspects_.end() && it->second > now;
}

void TrackerState::refuse_result(uint64_t id, uint64_t job, const std::string& why, TimePoint now) {
  PeerInfo& info = peers_.at(id);
  const TimePoint until = now + policy_.suspect_duration;
  std::vector<Action> actions;
  if (!scheduler_.reject(id, job, why, until, &actions)) return;
  ++counters_.results_implausible;
  ++counters_.suspect_marks;
  ++info.results_refused;
  TimePoint& mark = suspects_[info.name];
  mark = std::max(mark, until);
  protocol_error(id, "implausible_result",
                 "result for job " + std::to_string(job) + " refused: " + why +
                     "; this agent takes no job until the suspicion ends");
  execute(std::move(actions), now);
}

void TrackerState::handle_result(uint64_t id, const bj::object& message, TimePoint now) {
  const uint64_t job = get_u64(message, "job");
  const bj::value& result = get_field(message, "result");
  const JobSpec* spec = scheduler_.leased_spec(id, job);
  if (!spec) {
    std::string why;
    scheduler_.complete(id, job, MeasureErrorNo::kUnknown, {}, now, nullptr, &why);  // counts it
    throw ProtocolError("unknown_job", why);
  }
  // An answer to an earlier lease of this job (the agent stalled past it, and the job came back
  // to it) is stale: refuse it, the current attempt's answer is still to come.
  if (auto a = message.find("attempt"); a != message.end()) {
    const int current = scheduler_.leased_attempt(job);
    if (!a->value().is_int64() || a->value().get_int64() != current) {
      ++counters_.results_stale;
      throw ProtocolError("unknown_job",
                          "result for attempt " + truncate_utf8(bj::serialize(a->value()), 16) +
                              " of job " + std::to_string(job) + ", whose current attempt is " +
                              std::to_string(current));
    }
  }
  // Believe nothing an agent says before checking it against the job and its device.
  PeerInfo& info = peers_.at(id);
  const auto peak = info.peaks.find(scheduler_.leased_key(job));
  const CheckedResult checked =
      check_result(result, spec->facts, peak != info.peaks.end() ? peak->second : DevicePeak{});
  if (!checked.refusal.empty()) {
    refuse_result(id, job, checked.refusal, now);
    return;
  }
  const MeasureErrorNo error = checked.error;
  std::vector<Action> actions;
  std::string why;
  if (!scheduler_.complete(id, job, error, bj::serialize(result), now, &actions, &why))
    throw ProtocolError("unknown_job", why);
  ++counters_.results_by_error[static_cast<size_t>(error)];
  if (error == MeasureErrorNo::kNoError)
    ++info.jobs_done;
  else
    ++info.jobs_failed;
  execute(std::move(actions), now);
}

void TrackerState::handle_submit(uint64_t id, const bj::object& message, TimePoint now) {
  int batch_priority = 0;
  std::vector<SubmitItem> items = parse_submit(message, &batch_priority);
  // Check the whole batch before queueing any of it: a refused submit leaves nothing behind.
  std::vector<JobSpec> specs;
  ClientLoad load = scheduler_.client_load(id);
  for (size_t i = 0; i < items.size(); ++i) {
    SubmitItem& item = items[i];
    JobSpec spec;
    spec.key = item.key;
    spec.priority = item.priority.value_or(batch_priority);
    bool model = false;
    try {
      model = is_model_input(item.input);
      // A model job: the package it names must be served here, unchanged, for the key's family.
      spec.facts =
          model ? JobFacts::from_model_input(item.input, policy_.models_root, item.key, &packages_)
                : JobFacts::from_input(item.input);
    } catch (const std::exception& e) {
      throw ProtocolError(
          "bad_message",
          "batch[" + std::to_string(i) +
              "]: " + (model ? "model job refused: " : "'input' is not a valid measure input: ") +
              e.what());
    }
    // The tracker chooses the lease: the job's own time budget plus a margin, within bounds.
    spec.lease = policy_.leases.lease_for(spec.facts.timeout_s, item.lease_ms);
    spec.payload = bj::serialize(item.input);
    spec.client_tag = item.tag;
    spec.avoid_agent = std::move(item.avoid_agent);
    load.jobs += 1;
    load.bytes += spec.payload.size();
    if (load.jobs > policy_.max_jobs_per_client || load.bytes > policy_.max_bytes_per_client) {
      ++counters_.submits_over_quota;
      throw ProtocolError("over_quota", "this submit would leave " + std::to_string(load.jobs) +
                                            " jobs (" + std::to_string(load.bytes) +
                                            " bytes) queued for this client; the "
                                            "caps are " +
                                            std::to_string(policy_.max_jobs_per_client) +
                                            " jobs and " +
                                            std::to_string(policy_.max_bytes_per_client) +
                                            " bytes: wait for results before submitting more");
    }
    specs.push_back(std::move(spec));
  }
  bj::array accepted;
  for (JobSpec& spec : specs) {
    const uint64_t tag = spec.client_tag;
    const JobId job = scheduler_.submit(id, std::move(spec), now);
    accepted.push_back(bj::array{tag, job});
  }
  send(id, bj::object{{"type", "accepted"}, {"jobs", std::move(accepted)}});
  execute({}, now);
}

void TrackerState::handle_cancel(uint64_t id, const bj::object& message) {
  const uint64_t job = get_u64(message, "job");
  std::vector<Action> actions;
  if (!scheduler_.cancel(id, job, &actions))
    throw ProtocolError("unknown_job", "job " + std::to_string(job) + " is not one of yours");
  execute(std::move(actions), Clock::now());
}

void TrackerState::on_close(uint64_t id, TimePoint now) {
  auto peer = peers_.find(id);
  if (peer == peers_.end()) return;
  const Role role = peer->second.role;
  const bool greeted = peer->second.greeted;
  peers_.erase(peer);
  connections_.erase(id);
  if (!greeted) return;
  if (role == Role::kAgent) execute(scheduler_.remove_agent(id, now), now);
  if (role == Role::kClient) execute(scheduler_.remove_client(id), now);
}

void TrackerState::on_tick(TimePoint now) {
  execute(scheduler_.tick(now), now);
  // Hello deadlines: a connection that never says who it is holds a socket for nothing.
  std::vector<uint64_t> silent;
  for (const auto& [id, peer] : peers_)
    if (!peer.greeted && now - peer.opened >= policy_.hello_timeout) silent.push_back(id);
  for (uint64_t id : silent) {
    auto c = connections_.find(id);
    if (c == connections_.end()) continue;
    ++counters_.hello_timeouts;
    // Forget it at once (its socket closes behind): it must not be counted or closed twice.
    std::shared_ptr<PeerConnection> peer = c->second;
    connections_.erase(c);
    peers_.erase(id);
    peer->close(1008, "no hello within " + std::to_string(policy_.hello_timeout.count()) + " ms");
  }
  for (auto it = suspects_.begin(); it != suspects_.end();)
    it = it->second <= now ? suspects_.erase(it) : std::next(it);
}

void TrackerState::close_all(int code, const std::string& reason) {
  // Copy: closing may call back into on_close, which edits the map.
  auto connections = connections_;
  for (auto& [id, peer] : connections) peer->close(code, reason);
}

void TrackerState::execute(std::vector<Action> actions, TimePoint now) {
  // Dispatch after the given actions so freed agents pick up queued work at once.
  bool dispatched = false;
  while (true) {
    for (Action& a : actions) {
      switch (a.kind) {
        case Action::Kind::kSendJob: {
          const auto lease_ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(a.deadline - now).count();
          // The payload is already JSON: splice it in rather than parse it again.
          std::string frame = R"({"type":"job","job":)" + std::to_string(a.job) + R"(,"attempt":)" +
                              std::to_string(a.attempt) + R"(,"lease_ms":)" +
                              std::to_string(lease_ms) + R"(,"input":)" + a.payload + "}";
          send_raw(a.agent, std::move(frame));
          break;
        }
        case Action::Kind::kDeliver: {
          std::string result = a.payload;
          if (a.error) {
            bj::object r{{"error_no", static_cast<int>(*a.error)},
                         {"message", a.message},
                         {"costs", bj::array{}},
                         {"all_cost", 0.0},
                         {"timestamp", 0.0}};
            result = bj::serialize(r);
          }
          // The agent's name travels with the result, for the records.
          std::string agent_name;
          if (auto p = peers_.find(a.agent); a.agent != 0 && p != peers_.end())
            agent_name = p->second.name;
          std::string frame =
              R"({"type":"result","job":)" + std::to_string(a.job) + R"(,"tag":)" +
              std::to_string(a.client_tag) + R"(,"attempt":)" + std::to_string(a.attempt) +
              R"(,"agent":)" + bj::serialize(bj::string(agent_name)) + R"(,"agent_session":)" +
              std::to_string(a.agent) + R"(,"key":)" + bj::serialize(bj::string(a.agent_key)) +
              R"(,"result":)" + result + "}";
          send_raw(a.client, std::move(frame));
          break;
        }
        case Action::Kind::kCancelJob:
          send(a.agent, bj::object{{"type", "cancel"}, {"job", a.job}});
          break;
      }
    }
    if (dispatched) break;
    actions = scheduler_.dispatch(now);
    dispatched = true;
  }
}

bj::object TrackerState::summary(TimePoint now) const {
  bj::object keys;
  for (const auto& [key, s] : scheduler_.status(now)) {
    keys[key] = bj::object{{"agents_idle", s.agents_idle},
                           {"agents_busy", s.agents_busy},
                           {"agents_quarantined", s.agents_quarantined},
                           {"jobs_pending", s.jobs_pending},
                           {"jobs_leased", s.jobs_leased}};
  }
  const SchedulerCounters& c = scheduler_.counters();
  bj::object counters{{"connections", counters_.connections},
                      {"protocol_errors", counters_.protocol_errors},
                      {"refused_handshakes", counters_.refused_handshakes},
                      {"jobs_submitted", c.submitted},
                      {"jobs_delivered", c.delivered},
                      {"jobs_requeued", c.requeued},
                      {"lease_expiries", c.lease_expiries},
                      {"jobs_failed_max_attempts", c.failed_max_attempts},
                      {"results_refused", c.refused_results},
                      {"jobs_cancelled", c.cancelled},
                      {"quarantines", c.quarantines},
                      {"results_rejected", c.rejected_results},
                      {"hello_timeouts", counters_.hello_timeouts},
                      {"submits_over_quota", counters_.submits_over_quota},
                      {"results_implausible", counters_.results_implausible},
                      {"suspect_marks", counters_.suspect_marks},
                      {"connections_refused", counters_.connections_refused},
                      {"origins_refused", counters_.origins_refused},
                      {"results_stale", counters_.results_stale}};
  int agents = 0, clients = 0, viewers = 0;
  bj::object devices;  // one device description per agent key, for limits and records
  for (const auto& [id, p] : peers_) {
    if (!p.greeted) continue;
    if (p.role == Role::kAgent)
      for (const std::string& key : p.keys)
        if (!devices.contains(key)) devices[key] = bj::parse(p.device_json);
    agents += p.role == Role::kAgent;
    clients += p.role == Role::kClient;
    viewers += p.role == Role::kViewer;
  }
  bj::object by_error;
  for (size_t e = 0; e < counters_.results_by_error.size(); ++e)
    by_error[error_name(static_cast<MeasureErrorNo>(e))] = counters_.results_by_error[e];
  return bj::object{{"keys", std::move(keys)},
                    {"devices", std::move(devices)},
                    {"counters", std::move(counters)},
                    {"results_by_error_no", std::move(by_error)},
                    {"open_connections", connections_.size()},
                    {"agents", agents},
                    {"clients", clients},
                    {"viewers", viewers}};
}

bj::object TrackerState::agents_for(const std::string& pattern, JobKind kind) const {
  const AgentAvailability a = scheduler_.availability(pattern, kind);
  auto counts = [](const AgentCounts& c) {
    return bj::object{{"agents", c.agents},
                      {"idle", c.idle},
                      {"busy", c.busy},
                      {"quarantined", c.held},
                      {"unresponsive", c.unresponsive}};
  };
  bj::object out = counts(a);
  out["key"] = pattern;
  out["kind"] = kind == JobKind::kModel ? kJobKindModel : kJobKindKernel;
  bj::object keys;
  for (const auto& [key, c] : a.by_key) keys[key] = counts(c);
  out["keys"] = std::move(keys);
  bj::object reasons;
  for (const auto& [why, n] : a.held_reasons) reasons[why] = n;
  out["quarantine_reasons"] = std::move(reasons);
  return out;
}

namespace {

double unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

const char* TrackerState::agent_state(uint64_t id, const PeerInfo& peer) const {
  // Held first, as Scheduler::status counts it: a quarantined agent whose last job is still
  // leased to it must not read "busy" here while the key's row says "quarantined".
  if (scheduler_.is_held(id))
    return is_suspect(peer.name, Clock::now()) ? "suspect" : "quarantined";
  if (scheduler_.job_of(id)) return "busy";
  return "idle";
}

bj::array TrackerState::agents_json() const {
  bj::array out;
  for (const auto& [id, p] : peers_) {
    if (!p.greeted || p.role != Role::kAgent) continue;
    bj::array keys;
    for (const std::string& key : p.keys) keys.emplace_back(key);
    bj::array kinds;
    for (const std::string& kind : p.job_kinds) kinds.emplace_back(kind);
    out.push_back(bj::object{{"session", id},
                             {"name", p.name},
                             {"keys", std::move(keys)},
                             {"job_kinds", std::move(kinds)},
                             {"device", bj::parse(p.device_json)},
                             {"state", agent_state(id, p)},
                             {"jobs_done", p.jobs_done},
                             {"jobs_failed", p.jobs_failed},
                             {"results_refused", p.results_refused},
                             {"connected_at", unix_seconds(p.connected_at)},
                             {"last_seen", unix_seconds(p.last_seen)}});
  }
  return out;
}

}  // namespace webtune::tracker
