/// \file measure_pipeline.cpp
/// Builder and tracker runner (reconnects, resubmits, checks device keys).
#include "tuner/measure_pipeline.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <thread>

#include "tracker/scheduler.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// How long one wait for a result lasts before the stop flag and the deadline are checked.
constexpr milliseconds kWaitSlice{200};
/// Connect + handshake timeout of one connection attempt.
constexpr milliseconds kConnectTimeout{5000};
/// How often the runner asks the tracker whether an agent can serve its key while it waits.
constexpr milliseconds kAgentCheckEvery{1000};
/// How long wait_for_device lets a missing agent go unmentioned: an embedded farm's agents are
/// still starting.
constexpr milliseconds kDeviceGrace{1000};

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

/// True for a handshake the tracker refused with an error code (docs/protocol.md): a wrong
/// token or protocol version, which no retry can fix. TrackerClient words it
/// "the tracker refused the handshake: <code>: <message>"; a handshake that timed out ("no
/// 'welcome' ... in time") is worth a retry.
bool refused_for_good(const std::string& message) {
  const std::string prefix = "the tracker refused the handshake: ";
  if (message.rfind(prefix, 0) != 0) return false;
  for (const char* code : {"bad_token", "version", "handshake", "forbidden", "bad_message"})
    if (message.compare(prefix.size(), std::string(code).size() + 1, std::string(code) + ":") == 0)
      return true;
  return false;
}

/// True when an exception from TrackerClient means the connection is gone or stuck (so a
/// reconnect may help), rather than an `error` answer of a live tracker.
bool connection_problem(const tracker::TrackerClient& client, const std::string& message) {
  return client.closed() || message.rfind("send to tracker failed", 0) == 0 ||
         message.rfind("the tracker closed the connection", 0) == 0 ||
         message.rfind("no '", 0) == 0;  // "no 'accepted' from the tracker in time"
}

std::unique_ptr<tracker::TrackerClient> connect_once(const std::string& url,
                                                     const std::string& token) {
  tracker::Hello hello;
  hello.role = tracker::Role::kClient;
  hello.token = token;
  hello.name = "webtune tune";
  return std::make_unique<tracker::TrackerClient>(url, hello, kConnectTimeout);
}

}  // namespace

std::string agent_shortage(const std::string& key, const bj::object& answer) {
  auto count = [&](const char* name) {
    auto it = answer.find(name);
    if (it == answer.end() || !it->value().is_number())
      throw std::invalid_argument(std::string("the tracker's 'agents' answer has no count '") +
                                  name + "'");
    return it->value().to_number<int64_t>();
  };
  const int64_t agents = count("agents"), idle = count("idle"), busy = count("busy"),
                held = count("quarantined"), unresponsive = count("unresponsive");
  if (idle + busy > 0) return {};
  const std::string k = "'" + key + "'";
  if (agents <= 0) return "no agent connected for key " + k;
  // One reason alone, or each with the number of agents it holds.
  std::string reasons;
  if (auto r = answer.find("quarantine_reasons"); r != answer.end() && r->value().is_object()) {
    const bj::object& by_reason = r->value().get_object();
    for (const auto& [why, n] : by_reason) {
      if (by_reason.size() == 1) {
        reasons = std::string(why);
        break;
      }
      const int64_t agents_held = n.is_number() ? n.to_number<int64_t>() : 0;
      reasons +=
          (reasons.empty() ? "" : "; ") + std::to_string(agents_held) + " " + std::string(why);
    }
  }
  const std::string quarantined = "quarantined" + (reasons.empty() ? "" : " (" + reasons + ")");
  const std::string n = std::to_string(agents);
  if (held == agents)
    return agents == 1 ? "the only agent for key " + k + " is " + quarantined
                       : "all " + n + " agents for key " + k + " are " + quarantined;
  if (unresponsive == agents)
    return agents == 1 ? "the only agent for key " + k +
                             " is unresponsive (its lease expired and nothing was heard from it "
                             "since)"
                       : "all " + n + " agents for key " + k +
                             " are unresponsive (their leases expired and nothing was heard from "
                             "them since)";
  return "none of the " + n + " agents for key " + k + " can take a job: " + std::to_string(held) +
         " " + quarantined + ", " + std::to_string(unresponsive) + " unresponsive";
}

Interrupted::Interrupted(int signal)
    : std::runtime_error("interrupted by signal " + std::to_string(signal)), signal_(signal) {}

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
                             const std::string& key, ReconnectPolicy policy,
                             const std::atomic<int>* stop_flag)
    : url_(url), token_(token), key_(key), policy_(policy), stop_flag_(stop_flag) {
  tracker::TrackerUrl::parse(url);  // a malformed URL is an error at once, not a retry
  try {
    client_ = connect_once(url_, token_);
  } catch (const std::runtime_error& e) {
    if (refused_for_good(e.what())) throw;
    reconnect(e.what());
    --stats_.disconnects;  // not a drop: the tracker was not there yet
    --stats_.reconnects;
  }
}

TrackerRunner::~TrackerRunner() = default;

void TrackerRunner::throw_if_stopped() const {
  if (const int signal = stop_requested()) throw Interrupted(signal);
}

void TrackerRunner::sleep_interruptibly(milliseconds d) const {
  const auto until = Clock::now() + d;
  while (true) {
    throw_if_stopped();
    const auto left = until - Clock::now();
    if (left <= Clock::duration::zero()) return;
    std::this_thread::sleep_for(std::min<Clock::duration>(left, kWaitSlice));
  }
}

void TrackerRunner::reconnect(const std::string& why) {
  ++stats_.disconnects;
  client_.reset();
  const auto start = Clock::now();
  milliseconds wait = policy_.initial;
  std::string last = why;
  spdlog::warn("tracker {}: {}; reconnecting (giving up after {:.0f} s)", url_, why,
               seconds(policy_.give_up));
  while (true) {
    throw_if_stopped();
    try {
      client_ = connect_once(url_, token_);
      ++stats_.reconnects;
      spdlog::warn("tracker {}: reconnected after {:.1f} s (session {})", url_,
                   seconds(Clock::now() - start), client_->session());
      return;
    } catch (const std::runtime_error& e) {
      if (refused_for_good(e.what()))
        throw std::runtime_error("tracker " + url_ + ": " + e.what() + " (while reconnecting)");
      last = e.what();
    }
    const auto down = Clock::now() - start;
    if (down >= policy_.give_up)
      throw std::runtime_error("tracker " + url_ + " unreachable for " +
                               std::to_string(static_cast<long long>(seconds(down))) +
                               " s, giving up (last error: " + last + ")");
    const milliseconds next =
        std::min(wait, std::chrono::duration_cast<milliseconds>(policy_.give_up - down));
    spdlog::warn("tracker {}: unreachable for {:.1f} s ({}); next try in {:.1f} s", url_,
                 seconds(down), last, seconds(next));
    sleep_interruptibly(next);
    wait = std::min(wait * 2, policy_.max);
  }
}

std::pair<std::string, std::string> TrackerRunner::wait_for_device(std::chrono::seconds timeout) {
  shortage_ = Shortage{};
  while (true) {
    throw_if_stopped();
    bj::object summary;
    try {
      summary = client_->summary(kConnectTimeout);
    } catch (const std::runtime_error& e) {
      if (!connection_problem(*client_, e.what())) throw;
      reconnect(e.what());
      shortage_ = Shortage{};  // agents rejoin a restarted tracker after a moment
      continue;
    }
    std::vector<std::pair<std::string, std::string>> matches;
    if (auto d = summary.find("devices"); d != summary.end() && d->value().is_object())
      for (const auto& [key, device] : d->value().get_object())
        if (tracker::key_matches(key_, std::string(key)))
          matches.emplace_back(std::string(key), bj::serialize(device));
    if (matches.size() == 1) {
      note_shortage({}, kDeviceGrace, timeout);
      key_ = matches[0].first;
      pinned_ = true;
      return matches[0];
    }
    if (matches.size() > 1) {
      std::string keys;
      for (const auto& m : matches) keys += " " + m.first;
      throw std::runtime_error("key '" + key_ + "' matches agents of several devices:" + keys +
                               "; pass one of them with --key");
    }
    note_shortage("no agent connected for key '" + key_ + "'", kDeviceGrace, timeout);
    sleep_interruptibly(milliseconds(100));
  }
}

void TrackerRunner::note_shortage(const std::string& why, milliseconds grace,
                                  std::chrono::seconds wait) {
  const auto now = Clock::now();
  Shortage& s = shortage_;
  if (why.empty()) {
    if (s.noticed)
      spdlog::info("an agent for key '{}' can take jobs now (after {:.0f} s without one)", key_,
                   seconds(now - s.since));
    s.active = s.noticed = false;
    s.why.clear();
    return;
  }
  if (!s.active) {
    s.active = true;
    s.noticed = false;
    s.since = now;
  }
  const auto lasted = now - s.since;
  if (wait.count() > 0 && lasted >= wait)
    throw NoAgent(why + " for " + std::to_string(static_cast<long long>(seconds(lasted))) +
                  " s; giving up (--agent-wait " + std::to_string(wait.count()) + ")");
  if (lasted < grace) return;
  if (s.noticed && why == s.why && now - s.last_notice < agent_notice_every) return;
  const std::string limit =
      wait.count() > 0 ? "giving up after " + std::to_string(wait.count()) + " s (--agent-wait)"
                       : "waiting for ever (--agent-wait 0)";
  if (!s.noticed)
    spdlog::warn("{}; waiting for one, {}", why, limit);
  else
    spdlog::warn("{} (for {:.0f} s; {})", why, seconds(lasted), limit);
  s.noticed = true;
  s.last_notice = now;
  s.why = why;
}

void TrackerRunner::check_agents() {
  if (!agents_query_) return;
  const auto now = Clock::now();
  if (now < shortage_.next_check) return;
  shortage_.next_check = now + kAgentCheckEvery;
  std::string why;
  try {
    why = agent_shortage(key_, client_->agents(key_, kConnectTimeout));
  } catch (const std::runtime_error& e) {
    if (connection_problem(*client_, e.what())) throw;
    // A tracker older than the `agents` message ("unknown_type: ..."): wait as before. Another
    // error that came in meanwhile skips this check only.
    if (std::string(e.what()).rfind("unknown_type:", 0) == 0) agents_query_ = false;
    spdlog::debug("tracker {}: no agent check ({})", url_, e.what());
    return;
  } catch (const std::invalid_argument& e) {
    agents_query_ = false;
    spdlog::debug("tracker {}: no agent checks ({})", url_, e.what());
    return;
  }
  note_shortage(why, milliseconds(0), agent_wait);
}

bool TrackerRunner::accepts_key(const std::string& key) const {
  return pinned_ ? key == key_ : tracker::key_matches(key_, key);
}

std::vector<MeasureResult> TrackerRunner::run(const std::vector<MeasureInput>& inputs,
                                              std::vector<std::string>* agents) {
  std::vector<RunResult> measured = measure(inputs);
  std::vector<MeasureResult> results;
  results.reserve(measured.size());
  if (agents) agents->clear();
  for (RunResult& r : measured) {
    results.push_back(std::move(r.result));
    if (agents) agents->push_back(std::move(r.agent));
  }
  return results;
}

std::vector<RunResult> TrackerRunner::measure(const std::vector<MeasureInput>& inputs,
                                              const std::vector<std::string>& avoid_agents,
                                              std::optional<milliseconds> deadline,
                                              const ResultCallback& on_result) {
  const size_t n = inputs.size();
  std::vector<RunResult> out(n);
  if (n == 0) return out;
  if (!avoid_agents.empty() && avoid_agents.size() != n)
    throw std::invalid_argument("TrackerRunner::measure: one avoid_agent per input, or none");
  throw_if_stopped();

  // The items without tags: a tag is given per submission, so that a resubmitted job can be
  // told from its earlier copy.
  std::vector<tracker::SubmitItem> items(n);
  for (size_t i = 0; i < n; ++i) {
    items[i].key = key_;
    items[i].lease_ms =
        static_cast<int64_t>(inputs[i].options.timeout_s * 1000) + lease_margin.count();
    items[i].input = inputs[i].to_json();
    if (!avoid_agents.empty()) items[i].avoid_agent = avoid_agents[i];
  }
  std::map<uint64_t, size_t> slot_of_tag;
  std::vector<uint64_t> job_of_slot(n, 0);  // the tracker's job id of the latest submission
  std::vector<int> refused(n, 0);           // results of each input not recorded
  std::vector<bool> done(n, false);
  size_t received = 0;
  std::vector<size_t> to_submit(n);
  for (size_t i = 0; i < n; ++i) to_submit[i] = i;
  const auto until = deadline ? Clock::now() + *deadline : Clock::time_point::max();

  auto submit = [&] {
    std::vector<tracker::SubmitItem> batch;
    for (size_t slot : to_submit) {
      tracker::SubmitItem item = items[slot];
      item.tag = next_tag_++;
      slot_of_tag[item.tag] = slot;
      batch.push_back(std::move(item));
    }
    for (const auto& [tag, job] : client_->submit(batch))
      if (auto s = slot_of_tag.find(tag); s != slot_of_tag.end()) job_of_slot[s->second] = job;
    to_submit.clear();
  };

  auto accept = [&](const tracker::ClientResult& r) {
    auto slot = slot_of_tag.find(r.tag);
    if (slot == slot_of_tag.end()) {
      ++stats_.late_results;  // a late answer from an earlier batch
      return;
    }
    const size_t s = slot->second;
    if (done[s]) {
      ++stats_.duplicates;
      spdlog::debug("tracker {}: a second result for input {} (tag {}) ignored", url_, s, r.tag);
      return;
    }
    // A job the tracker failed by itself (lost agents, expired leases) has no agent and no key.
    const bool from_agent = r.agent_session != 0 || !r.agent.empty();
    MeasureResult result;
    try {
      result = MeasureResult::from_json(r.result);
    } catch (const std::exception& e) {
      result =
          MeasureResult::failure(MeasureErrorNo::kUnknown, std::string("bad result: ") + e.what());
    }
    // Why an agent's result is not recorded: measured on another device class, or over a time
    // longer than the lease asked for, which no lease that was still valid can hold (a stale
    // result: the agent stalled past its lease, and the tracker took the answer anyway).
    std::string refusal;
    const double lease_s = static_cast<double>(items[s].lease_ms) / 1000;
    if (from_agent && !accepts_key(r.key)) {
      ++stats_.foreign_keys;
      refusal = "measured under device key '" + r.key + "', not '" + key_ + "'";
    } else if (from_agent && result.all_cost > lease_s) {
      ++stats_.stale_results;
      refusal = "measured over " + std::to_string(result.all_cost).substr(0, 5) +
                " s, longer than its lease of " + std::to_string(lease_s).substr(0, 5) +
                " s (a stale result)";
    }
    if (!refusal.empty()) {
      ++refused[s];
      spdlog::warn(
          "tracker {}: a result by agent '{}' (session {}, attempt {}) is not recorded: {} "
          "({} of {})",
          url_, r.agent, r.agent_session, r.attempt, refusal, refused[s], max_refused_results);
      if (refused[s] < max_refused_results) {
        to_submit.push_back(s);
        return;
      }
      out[s].result = MeasureResult::failure(
          MeasureErrorNo::kUnknown, refusal + " (" + std::to_string(refused[s]) + " times)");
      out[s].received = now_unix();
    } else {
      out[s].result = std::move(result);
      out[s].agent = r.agent;
      out[s].agent_session = r.agent_session;
      out[s].attempt = r.attempt;
      out[s].received = now_unix();
      out[s].delivered = true;
    }
    done[s] = true;
    ++received;
    if (on_result) on_result(s, out[s]);
  };

  while (received < n) {
    throw_if_stopped();
    try {
      if (!to_submit.empty()) submit();
      check_agents();
      const auto now = Clock::now();
      if (now >= until) break;
      const auto slice = std::min<Clock::duration>(kWaitSlice, until - now);
      std::optional<tracker::ClientResult> r =
          client_->next_result(std::chrono::duration_cast<milliseconds>(slice) + milliseconds(1));
      if (r) accept(*r);
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const Interrupted*>(&e) || dynamic_cast<const NoAgent*>(&e)) throw;
      if (!client_ || !connection_problem(*client_, e.what()))
        throw std::runtime_error("tracker " + url_ + " refused the batch: " + e.what());
      reconnect(e.what());
      shortage_ = Shortage{};  // agents rejoin a restarted tracker after a moment
      // Every job without a result is submitted again: the old connection's jobs were
      // cancelled with it (or died with the tracker).
      to_submit.clear();
      for (size_t i = 0; i < n; ++i)
        if (!done[i]) to_submit.push_back(i);
      stats_.resubmitted += to_submit.size();
      spdlog::warn("tracker {}: resubmitting {} job(s) of the batch that had no result", url_,
                   to_submit.size());
    }
  }
  if (received < n) {
    // The deadline passed: cancel what is left (best effort) and say so.
    for (size_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      if (job_of_slot[i] != 0) {
        try {
          client_->cancel(job_of_slot[i]);
        } catch (const std::exception&) {
          // The connection is gone: the tracker cancelled the job with it.
        }
      }
      out[i].result = MeasureResult::failure(
          MeasureErrorNo::kRunTimeout,
          "no result within " + std::to_string(static_cast<long long>(deadline->count() / 1000)) +
              " s");
    }
  }
  return out;
}

}  // namespace webtune
