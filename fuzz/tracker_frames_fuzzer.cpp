/// \file tracker_frames_fuzzer.cpp
/// libFuzzer harness for the tracker's frame handling: a real `TrackerState`
/// (tracker/tracker_state.hpp) with fake `PeerConnection`s, driven by a script of events.
///
/// Feeds: the input as lines, one event each (unknown lines are skipped, at most 4000 events):
///   `tokens`            (first line only) the tracker requires tokens agent-t, client-t, viewer-t
///   `o`                 a peer connects (at most 16)
///   `t<k> <text>`       peer k sends the text frame <text> (k: a digit, modulo the open peers)
///   `r<k> <e> [<cost>]` peer k answers the last job it received with error_no <e> (and a cost)
///   `x<k>`              peer k cancels the last job the tracker accepted from it
///   `b<k> <n>`          peer k sends a binary frame of <n> bytes
///   `p<k>`              a ping/pong from peer k
///   `c<k>`              peer k's connection closes
///   `k<ms>`             <ms> milliseconds pass, then the tracker's periodic tick
/// At the end every connection is closed with close_all. A close the tracker asks for through
/// PeerConnection::close reaches on_close after the event, as Beast's asynchronous close does.
///
/// Asserts, after every event: no exception escapes TrackerState; every frame the tracker sends
/// is a JSON object with a string "type"; a close has a defined code (1000, 1001, 1008, 1009,
/// 1011) and a reason of at most 123 bytes (the WebSocket limit) that is valid UTF-8; a job frame
/// goes only to a greeted agent and has lease_ms > 0; a result reaches only the client whose
/// accepted job it is, with that job's tag, at most once; open_connections() counts the peers
/// that are open; after each tick and at the end, summary() and agents_json() work.
///
/// The TrackerState is built in one place, make_tracker_state(), to follow its constructor.
///
/// Findings of this harness, fixed in the tracker (issue 13; docs/fuzzing.md): K1, a refused
/// hello's close reason longer than a close frame holds; K2, a client's lease_ms overflowing the
/// clock; K3, numbers read as infinity or NaN written back as non-JSON Infinity and NaN. Their
/// reproducers are fuzz/corpus/tracker_frames/regress_K*, replayed with the seed corpus.
#include <boost/json.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "tracker/tracker_state.hpp"

namespace bj = boost::json;
using namespace webtune::tracker;
using webtune::fuzz::check;
using webtune::fuzz::finding;

namespace {

constexpr size_t kMaxEvents = 4000;
constexpr size_t kMaxPeers = 16;
constexpr size_t kMaxCloseReasonBytes = 123;  // RFC 6455 5.5: 125-byte payload, 2 for the code

/// The tracker under test. The one place that knows TrackerState's constructor.
std::unique_ptr<TrackerState> make_tracker_state(bool tokens) {
  TrackerPolicy policy;  // the defaults of a real tracker (tracker/tracker_policy.hpp)
  if (tokens) policy.tokens = AccessTokens{"agent-t", "client-t", "viewer-t"};
  policy.scheduler.max_attempts = 3;
  policy.scheduler.quarantine_after = 3;
  policy.scheduler.quarantine_duration = std::chrono::milliseconds(30000);
  return std::make_unique<TrackerState>(policy);
}

class Harness;

/// A connection as the tracker sees it; everything it is sent goes to the harness's checks.
class FakePeer : public PeerConnection {
 public:
  FakePeer(Harness* harness) : harness_(harness) {}
  void send(std::shared_ptr<const std::string> frame) override;
  void close(int code, const std::string& reason) override;
  uint64_t id = 0;

 private:
  Harness* harness_;
};

/// What the harness knows of one peer, from the frames the tracker sent it.
struct PeerModel {
  std::shared_ptr<FakePeer> peer;
  bool open = true;                       // on_close not called yet
  bool close_asked = false;               // the tracker called close(); on_close follows the event
  std::string hello_role;                 // role of the last hello this peer sent
  std::string role;                       // set by the tracker's welcome
  std::map<uint64_t, uint64_t> accepted;  // job → tag, from "accepted" replies
  std::set<uint64_t> delivered;           // jobs whose result arrived
  std::vector<uint64_t> accepted_order;   // for `x<k>`
  uint64_t last_job = 0;                  // last job frame received (agents)
};

class Harness {
 public:
  explicit Harness(bool tokens) : state_(make_tracker_state(tokens)) {}

  void run(std::string_view script);
  void on_sent(uint64_t id, const std::string& frame);
  void on_close_asked(uint64_t id, int code, const std::string& reason);

 private:
  PeerModel* peer_for(char digit);
  void event(std::string_view line);
  void text_frame(PeerModel& p, std::string text);
  void after_event();
  /// What /metrics and the dashboard read: summary() and agents_json() (after ticks and at the
  /// end, not after every event: they cost more than the events).
  void check_views();
  template <class Fn>
  void no_throw(std::string_view call, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      finding("TrackerState::" + std::string(call) + " threw " + webtune::fuzz::type_name(e) +
              ": " + e.what());
    } catch (...) {
      finding("TrackerState::" + std::string(call) + " threw a non-std exception");
    }
  }

  std::unique_ptr<TrackerState> state_;
  TimePoint now_ = Clock::now();
  std::map<uint64_t, PeerModel> peers_;     // by session id
  std::vector<uint64_t> order_;             // open peers, oldest first
  std::set<uint64_t> delivered_jobs_;       // every job whose result reached a client
  std::map<uint64_t, uint64_t> job_owner_;  // job → client session, from "accepted"
};

void FakePeer::send(std::shared_ptr<const std::string> frame) {
  check(frame != nullptr, "TrackerState sent a null frame");
  try {
    harness_->on_sent(id, *frame);
  } catch (const std::exception& e) {  // a field of an unexpected kind in the frame
    finding("the tracker sent a malformed frame (" + std::string(e.what()) + "): " + *frame);
  }
}

void FakePeer::close(int code, const std::string& reason) {
  harness_->on_close_asked(id, code, reason);
}

void Harness::on_close_asked(uint64_t id, int code, const std::string& reason) {
  static const std::set<int> kCodes = {1000, 1001, 1008, 1009, 1011};
  check(kCodes.count(code) == 1, "close with code " + std::to_string(code));
  check(reason.size() <= kMaxCloseReasonBytes,
        "close reason of " + std::to_string(reason.size()) +
            " bytes (a WebSocket close reason holds 123): " + reason);
  check(webtune::fuzz::valid_utf8(reason), "close reason is not valid UTF-8: " + reason);
  if (auto it = peers_.find(id); it != peers_.end()) it->second.close_asked = true;
}

void Harness::on_sent(uint64_t id, const std::string& frame) {
  auto it = peers_.find(id);
  check(it != peers_.end(), "frame to unknown session " + std::to_string(id));
  PeerModel& p = it->second;
  check(p.open, "frame to session " + std::to_string(id) + " after on_close");
  boost::system::error_code ec;
  bj::value value = bj::parse(frame, ec);
  check(!ec && value.is_object(), "the tracker sent a frame that is not a JSON object: " + frame);
  const bj::object& m = value.get_object();
  const bj::value* type = m.if_contains("type");
  check(type && type->is_string(), "the tracker sent a frame without a string type: " + frame);
  const std::string_view t = type->get_string();
  const auto u64 = [&](std::string_view key) {
    const bj::value* v = m.if_contains(key);
    check(v && (v->is_uint64() || (v->is_int64() && v->get_int64() >= 0)),
          "'" + std::string(key) + "' is not a whole number in " + frame);
    return v->to_number<uint64_t>();
  };
  if (t == "welcome") {
    p.role = p.hello_role;
  } else if (t == "job") {
    check(p.role == "agent", "a job frame to a peer greeted as '" + p.role + "': " + frame);
    const bj::value* lease = m.if_contains("lease_ms");
    check(lease && lease->is_int64() && lease->get_int64() > 0,
          "a job frame without a positive lease_ms: " + frame);
    check(m.contains("input"), "a job frame without input: " + frame);
    p.last_job = u64("job");
  } else if (t == "accepted") {
    check(p.role == "client", "'accepted' to a peer greeted as '" + p.role + "'");
    const bj::value* jobs = m.if_contains("jobs");
    check(jobs && jobs->is_array(), "'accepted' without a jobs array: " + frame);
    for (const bj::value& pair : jobs->get_array()) {
      check(pair.is_array() && pair.get_array().size() == 2 && pair.get_array()[0].is_number() &&
                pair.get_array()[1].is_number(),
            "'accepted' entry is not [tag, job]: " + frame);
      const bj::array& a = pair.get_array();
      const uint64_t tag = a[0].to_number<uint64_t>(), job = a[1].to_number<uint64_t>();
      check(job_owner_.emplace(job, id).second, "job " + std::to_string(job) + " accepted twice");
      p.accepted[job] = tag;
      p.accepted_order.push_back(job);
    }
  } else if (t == "result") {
    check(p.role == "client", "a result to a peer greeted as '" + p.role + "': " + frame);
    const uint64_t job = u64("job"), tag = u64("tag");
    auto acc = p.accepted.find(job);
    check(acc != p.accepted.end(), "client " + std::to_string(id) + " got the result of job " +
                                       std::to_string(job) + ", which is not its own: " + frame);
    check(acc->second == tag, "the result of job " + std::to_string(job) + " has tag " +
                                  std::to_string(tag) + ", submitted as " +
                                  std::to_string(acc->second));
    check(delivered_jobs_.insert(job).second,
          "the result of job " + std::to_string(job) + " was delivered twice");
    p.delivered.insert(job);
    check(m.contains("result") && m.at("result").is_object(), "a result without a result object");
  }
}

PeerModel* Harness::peer_for(char digit) {
  if (order_.empty() || digit < '0' || digit > '9') return nullptr;
  return &peers_.at(order_[static_cast<size_t>(digit - '0') % order_.size()]);
}

void Harness::text_frame(PeerModel& p, std::string text) {
  boost::system::error_code ec;
  const bj::value v = bj::parse(text, ec);
  if (!ec && v.is_object()) {
    // Remember the role a hello asks for: the welcome that follows confirms it.
    if (const bj::value* role = v.get_object().if_contains("role");
        p.role.empty() && role && role->is_string())
      p.hello_role = role->get_string();
  }
  no_throw("on_message", [&] { state_->on_message(p.peer->id, text, now_); });
}

void Harness::event(std::string_view line) {
  if (line.empty()) return;
  const char kind = line[0];
  if (kind == 'o') {
    if (order_.size() >= kMaxPeers) return;
    auto peer = std::make_shared<FakePeer>(this);
    uint64_t id = 0;
    no_throw("on_open", [&] { id = state_->on_open(peer, now_); });
    check(peers_.count(id) == 0, "on_open reused session id " + std::to_string(id));
    peer->id = id;
    peers_[id].peer = peer;
    order_.push_back(id);
    return;
  }
  if (kind == 'k') {
    int64_t ms = 0;
    for (char c : line.substr(1)) {
      if (c < '0' || c > '9') break;
      ms = std::min<int64_t>(ms * 10 + (c - '0'), 1'000'000'000);  // at most ~11 days a tick
    }
    now_ += std::chrono::milliseconds(ms);
    no_throw("on_tick", [&] { state_->on_tick(now_); });
    check_views();
    return;
  }
  if (line.size() < 2) return;
  PeerModel* p = peer_for(line[1]);
  if (!p) return;
  const std::string_view rest = line.size() > 2 ? line.substr(3) : std::string_view();
  const uint64_t id = p->peer->id;
  switch (kind) {
    case 't':
      text_frame(*p, std::string(rest));
      break;
    case 'r': {
      // A well-formed result for the job this peer holds: deep sequences without guessing ids.
      int error_no = rest.empty() ? 0 : rest[0] - '0';
      std::string cost = "0.001";
      if (auto space = rest.find(' '); space != std::string_view::npos)
        cost = std::string(rest.substr(space + 1));
      text_frame(*p, R"({"type":"result","job":)" + std::to_string(p->last_job) +
                         R"(,"result":{"error_no":)" + std::to_string(error_no) +
                         R"(,"message":"","costs":[)" + cost +
                         R"(],"all_cost":0.5,"timestamp":1700000000}})");
      break;
    }
    case 'x': {
      const uint64_t job = p->accepted_order.empty() ? 0 : p->accepted_order.back();
      text_frame(*p, R"({"type":"cancel","job":)" + std::to_string(job) + "}");
      break;
    }
    case 'b': {
      size_t bytes = 0;
      for (char c : rest) {
        if (c < '0' || c > '9') break;
        bytes = std::min<size_t>(bytes * 10 + static_cast<size_t>(c - '0'), 1u << 30);
      }
      no_throw("on_binary", [&] { state_->on_binary(id, bytes); });
      break;
    }
    case 'p':
      no_throw("on_heartbeat", [&] { state_->on_heartbeat(id); });
      break;
    case 'c':
      p->close_asked = true;
      break;
    default:
      break;
  }
}

void Harness::after_event() {
  // Closes the tracker asked for (or the peer made) land now, as Beast's would.
  for (auto it = order_.begin(); it != order_.end();) {
    PeerModel& p = peers_.at(*it);
    if (!p.close_asked) {
      ++it;
      continue;
    }
    const uint64_t id = *it;
    p.open = false;
    it = order_.erase(it);
    no_throw("on_close", [&] { state_->on_close(id, now_); });
  }
  check(state_->open_connections() == order_.size(),
        "open_connections() is " + std::to_string(state_->open_connections()) + ", " +
            std::to_string(order_.size()) + " peers are open");
}

void Harness::check_views() {
  no_throw("summary", [&] { (void)bj::serialize(state_->summary(now_)); });
  no_throw("agents_json", [&] { (void)bj::serialize(state_->agents_json()); });
}

void Harness::run(std::string_view script) {
  size_t events = 0;
  size_t begin = 0;
  while (begin <= script.size() && events < kMaxEvents) {
    size_t end = script.find('\n', begin);
    if (end == std::string_view::npos) end = script.size();
    event(script.substr(begin, end - begin));
    after_event();
    ++events;
    begin = end + 1;
  }
  check_views();
  no_throw("close_all", [&] { state_->close_all(1001, "tracker shutting down"); });
  for (uint64_t id : order_) peers_.at(id).close_asked = true;
  after_event();
  check(state_->open_connections() == 0, "connections left after close_all");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view script(reinterpret_cast<const char*>(data), size);
  const bool tokens = script.substr(0, 7) == "tokens\n";
  if (tokens) script.remove_prefix(7);
  Harness harness(tokens);
  harness.run(script);
  return 0;
}
