/// \file measure_pipeline.hpp
/// AutoTVM's measure pipeline: a builder turns config entities into measure inputs (kernel
/// artifact, seed, reference samples), a runner has them measured by the farm through the
/// tracker and returns one measure result per input, in order.
///
/// The runner outlives the tracker: when its connection drops (a tracker restart, a network
/// blip) it reconnects with exponential back-off and resubmits every job whose result has not
/// arrived, matching results to inputs by its own tags (the tracker's job ids change across a
/// restart). A result for an input that already has one is ignored, so nothing is counted twice.
///
/// Results are checked before they count: one measured by an agent of another device key than
/// the runner's (a job is only ever measured on one device class), or whose measurement took
/// longer than the lease the runner asked for (all_cost > lease: the lease expired while the
/// agent held the job, so the answer is stale even if the tracker took it), is not recorded:
/// the input is submitted again, and after `max_refused_results` refusals it comes back as an
/// UNKNOWN error saying why (resubmitting forever could livelock on a fast bad agent).
///
/// The runner never waits silently for agents that are not there: while it waits for a device
/// (wait_for_device) or for results, it asks the tracker which agents can serve its key (the
/// `agents` message, docs/protocol.md; once a second) and, when none can (none connected, all
/// quarantined or unresponsive), logs why on stderr at once ("no agent connected for key
/// 'webgl2'"; "all 2 agents for key 'K' are quarantined (lease expired ×3)") and again every
/// `agent_notice_every` until one comes back; after `agent_wait` without one it throws NoAgent.
#pragma once

#include <atomic>
#include <boost/json/object.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"

namespace webtune {

namespace tracker {
class TrackerClient;
}

/// Builds measure inputs for one task. Reference samples are computed once per builder.
class Builder {
 public:
  Builder(const Task& task, uint64_t seed, int samples, MeasureOptions options);
  /// The input for `entity`, or an error result (INSTANTIATION for an invalid config,
  /// COMPILE_HOST for an emitter failure) in `error`.
  bool build(const ConfigEntity& entity, MeasureInput* input, MeasureResult* error) const;

 private:
  const Task& task_;
  uint64_t seed_;
  MeasureOptions options_;
  std::vector<ReferenceSample> samples_;
};

/// A stop was requested (a signal) while the runner or the session waited: the batch in flight
/// is dropped. `signal()` is the signal number (SIGINT, SIGTERM, SIGHUP).
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// No agent could serve the runner's key for TrackerRunner::agent_wait: none connected, or all of
/// them quarantined or unresponsive. what() says which, with the key and the wait.
class NoAgent : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Why no agent can serve key pattern `key`, from a tracker's `agents` answer (docs/protocol.md),
/// or "" when some agent is idle or busy (a busy one takes the next job when it is done):
///  - none connected: "no agent connected for key 'K'";
///  - all held: "the only agent for key 'K' is quarantined (lease expired ×3)", "all 2 agents
///    for key 'K' are quarantined (lease expired ×3)"; several reasons are listed with their
///    agent counts ("1 lease expired ×3; 1 suspect (a refused result)");
///  - all unresponsive (a lease expired, nothing heard since): "... is unresponsive" / "all N
///    agents for key 'K' are unresponsive" with "(a lease expired and it has not answered since)";
///  - a mix: "none of the 3 agents for key 'K' can take a job: 2 quarantined (...), 1
///    unresponsive".
/// Throws std::invalid_argument when a count is missing or not a number.
std::string agent_shortage(const std::string& key, const boost::json::object& answer);

/// How a runner reconnects after its tracker connection drops (or cannot be made): waits of
/// `initial`, doubling up to `max`, until the tracker has been unreachable for `give_up`; then
/// it throws std::runtime_error.
struct ReconnectPolicy {
  std::chrono::milliseconds initial{500};
  std::chrono::milliseconds max{10000};
  std::chrono::milliseconds give_up{std::chrono::minutes(10)};
};

/// One measurement as the farm delivered it.
struct RunResult {
  MeasureResult result;
  std::string agent;           ///< name of the agent that measured it (empty: none did)
  uint64_t agent_session = 0;  ///< that agent's session on the tracker (0: none did)
  int attempt = 0;             ///< the tracker's attempt number of the job
  double received = 0;         ///< Unix time (s) the runner received it
  /// False when no result came before the deadline of measure() (`result` is then an error
  /// saying so, and the job was cancelled).
  bool delivered = false;
};

/// What the runner has seen since it was created (all counts).
struct RunnerStats {
  uint64_t disconnects = 0;   ///< connections to the tracker that dropped or failed a send
  uint64_t reconnects = 0;    ///< successful reconnections after a drop
  uint64_t resubmitted = 0;   ///< jobs submitted again after a reconnect
  uint64_t duplicates = 0;    ///< results for an input that already had one (ignored)
  uint64_t foreign_keys = 0;  ///< results measured under another device key (not recorded)
  /// Results whose measurement took longer than the job's lease (all_cost > lease): the lease
  /// had expired while the agent held them (not recorded).
  uint64_t stale_results = 0;
  uint64_t late_results = 0;  ///< results for tags of earlier batches (ignored)
};

/// Called by TrackerRunner::measure as each input's result arrives (arrival order, on the
/// caller's thread, inside measure): the input's index and its result as measure() will return
/// it. Lets a tuner store every trial as it comes, so a dashboard shows it at once, while the
/// search still updates once per batch. Not called for inputs that time out at the deadline.
/// An exception thrown by it propagates out of measure().
using ResultCallback = std::function<void(size_t input, const RunResult& result)>;

/// Runs measure inputs on the farm's agents for one key. The whole batch is submitted at once,
/// so as many run in parallel as the tracker has idle agents for the key.
class TrackerRunner {
 public:
  /// Connects as a client. `key` is a key or prefix ("gles", "gles:llvmpipe"). Retries an
  /// unreachable tracker as `policy` says; throws std::runtime_error when the tracker refuses
  /// the handshake (bad token, version) or stays unreachable past `policy.give_up`, and
  /// Interrupted when `stop_flag` (see set_stop_flag) is raised meanwhile.
  TrackerRunner(const std::string& url, const std::string& token, const std::string& key,
                ReconnectPolicy policy = {}, const std::atomic<int>* stop_flag = nullptr);
  ~TrackerRunner();

  /// Makes every wait of this runner (results, reconnect back-off, wait_for_device) stop within
  /// ~0.2 s once `*flag` becomes non-zero, throwing Interrupted(*flag). The flag must outlive
  /// the runner; a signal handler may set it.
  void set_stop_flag(const std::atomic<int>* flag) { stop_flag_ = flag; }
  /// The signal number a stop was requested with, or 0.
  int stop_requested() const { return stop_flag_ ? stop_flag_->load() : 0; }

  /// Waits until some agent serves the runner's key (or `timeout` passes with the tracker
  /// reachable: the wait starts again after a reconnect, since agents need a moment to rejoin);
  /// returns its full key and device JSON, and pins the runner to that full key: later jobs go
  /// to agents of exactly that device class, and results from any other are not accepted.
  /// While none is there it says so (see the file comment), after a grace of 1 s (agents of an
  /// embedded farm are still starting). `timeout` 0: waits for ever. Throws NoAgent on timeout,
  /// std::runtime_error when agents of different keys match (ask for a full key then);
  /// Interrupted on a stop request.
  std::pair<std::string, std::string> wait_for_device(std::chrono::seconds timeout);

  /// Measures the inputs; results come back in input order, with the agent that measured each
  /// in `agents` (may be null). A job the tracker gives up on comes back as its error result.
  /// Throws Interrupted on a stop request, NoAgent when no agent could serve the key for
  /// agent_wait, std::runtime_error when the tracker stays unreachable past the reconnect policy.
  std::vector<MeasureResult> run(const std::vector<MeasureInput>& inputs,
                                 std::vector<std::string>* agents);

  /// The same with provenance. `avoid_agents` (empty, or one per input, "" for none) names an
  /// agent that must not measure the input (a re-measurement on a second agent). With a
  /// `deadline` (from the call), inputs without a result by then are cancelled and come back
  /// with `delivered` false. `on_result` (may be empty) sees each result as it arrives.
  std::vector<RunResult> measure(const std::vector<MeasureInput>& inputs,
                                 const std::vector<std::string>& avoid_agents = {},
                                 std::optional<std::chrono::milliseconds> deadline = {},
                                 const ResultCallback& on_result = {});

  /// The key jobs are submitted under (the full key after wait_for_device).
  const std::string& key() const { return key_; }
  const RunnerStats& stats() const { return stats_; }

  /// Lease of each job: the measure timeout plus this margin for compile and transfer.
  std::chrono::milliseconds lease_margin{30000};
  /// An input whose results are not recorded (another device key, stale) is resubmitted until
  /// this many were refused, then recorded as an error (UNKNOWN) saying why.
  int max_refused_results = 3;
  /// How long measure() waits while no agent can serve the key (none connected, all quarantined
  /// or unresponsive) before it throws NoAgent; 0: for ever (it keeps saying why). A tracker
  /// that restarts gives its agents this long again to rejoin.
  std::chrono::seconds agent_wait{120};
  /// How often the reason is logged again while no agent can serve the key.
  std::chrono::milliseconds agent_notice_every{10000};

 private:
  /// Replaces the connection, retrying per the policy; logs each attempt. Throws as the
  /// constructor does, or Interrupted.
  void reconnect(const std::string& why);
  /// Sleeps `d` in slices, throwing Interrupted on a stop request.
  void sleep_interruptibly(std::chrono::milliseconds d) const;
  void throw_if_stopped() const;
  /// Whether a result measured under agent key `key` counts: equal to the pinned full key, or
  /// (before wait_for_device) any key the runner's key or prefix matches.
  bool accepts_key(const std::string& key) const;
  /// Asks the tracker (at most once a second) whether some agent can serve the key, and notes
  /// the answer (note_shortage). An older tracker without the `agents` message ends the checks.
  void check_agents();
  /// `why` (agent_shortage's text, "" when an agent can serve) as of now: logs a shortage once it
  /// lasted `grace`, then every agent_notice_every, and its end; throws NoAgent once it lasted
  /// `wait` (0: never).
  void note_shortage(const std::string& why, std::chrono::milliseconds grace,
                     std::chrono::seconds wait);

  std::string url_, token_, key_;
  bool pinned_ = false;
  ReconnectPolicy policy_;
  std::unique_ptr<tracker::TrackerClient> client_;
  const std::atomic<int>* stop_flag_ = nullptr;
  uint64_t next_tag_ = 1;
  RunnerStats stats_;
  // The shortage of agents in progress: since when, whether and when it was last logged.
  struct Shortage {
    bool active = false, noticed = false;
    std::chrono::steady_clock::time_point since, last_notice, next_check;
    std::string why;
  };
  Shortage shortage_;
  bool agents_query_ = true;  // false once the tracker turned the `agents` message down
};

}  // namespace webtune
