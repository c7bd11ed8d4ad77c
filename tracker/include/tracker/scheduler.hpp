/// \file scheduler.hpp
/// The tracker's scheduling core: queues of measurement jobs per key, a pool of agents, leases.
///
/// No networking and no clock of its own: callers pass `now` and carry out the actions it
/// returns (send a job to an agent, deliver a result to a client), which keeps every rule testable
/// without sockets. Rules:
///  - Jobs wait in one queue per requested key pattern, highest priority first, FIFO among equals.
///  - A pattern matches an agent key when it is equal to it or is a prefix that ends at a ':'
///    ("gles" matches "gles:llvmpipe"; "gles:llvm" does not).
///  - An idle agent takes the oldest highest-priority job any of its keys matches; the job is
///    leased to it until now + the job's lease timeout. A job that names an agent to avoid (a
///    re-measurement that must come from a second device) never goes to an agent of that name;
///    the queue is scanned past it (up to kDispatchScan jobs) so it does not block the jobs
///    behind it.
///  - A job goes only to an agent that runs its kind (JobFacts::kind): a model job only to an
///    agent that declared "model" in its hello, a kernel job only to one that declared "kernel"
///    (every agent older than model jobs). Each kind has its own queues, so a job that no idle
///    agent may take waits without holding up the other kind's jobs.
///  - A job whose agent goes away, or whose lease expires, goes back to the front of its queue
///    with its attempt count raised; once it has used `max_attempts` it is delivered to its client
///    as an error (RUN_TIMEOUT after an expired lease, RUNTIME_DEVICE after a lost agent), never
///    dropped.
///  - An agent that fails `quarantine_after` jobs in a row (a lost lease, or a RUNTIME_DEVICE or
///    UNKNOWN result) is quarantined for `quarantine_duration` and takes no job meanwhile. Results
///    that are the kernel's or the job's fault (WRONG_ANSWER, COMPILE_DEVICE, RUN_TIMEOUT: the
///    agent enforced the job's own time budget, ...) do not count: a client must not be able to
///    quarantine healthy agents by sending kernels that hang.
///  - An agent whose result is refused (reject(): implausible, malformed) loses the job, which is
///    re-queued (or failed) as if the agent had vanished, and is suspended: it takes no job until
///    the given time.
///  - A client that goes away has its queued jobs dropped and its leased ones forgotten: their
///    results are discarded when they come.
///  - Every job is delivered exactly once: a result for a job that is not leased to that agent is
///    refused (and counted), so a late answer after a re-queue cannot double-deliver. A result
///    that names the attempt it answers must name the current lease's attempt.
///  - An agent whose lease expired takes no job until it is heard from again (heard_from(): any
///    frame or pong): a stopped or frozen process must not be handed the job it just let expire,
///    only to answer it late as if it were the new attempt.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/error_no.hpp"
#include "tracker/job_facts.hpp"

namespace webtune::tracker {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using JobId = uint64_t;
using AgentId = uint64_t;
using ClientId = uint64_t;

/// True when key `pattern` asks for agent key `key` (see the file comment).
bool key_matches(const std::string& pattern, const std::string& key);

struct SchedulerOptions {
  int max_attempts = 3;                                  ///< tries of one job before it fails
  int quarantine_after = 3;                              ///< failures in a row that quarantine
  std::chrono::milliseconds quarantine_duration{30000};  ///< how long a quarantine lasts
};

/// A measurement job as the scheduler sees it; `payload` is opaque (the measure input's JSON).
struct JobSpec {
  std::string key;  ///< key pattern, e.g. "gles" or "gles:llvmpipe"
  int priority = 0;
  std::chrono::milliseconds lease{60000};  ///< lease timeout once dispatched
  std::string payload;
  uint64_t client_tag = 0;  ///< the client's own id for the job, echoed back in its result
  std::string avoid_agent;  ///< never lease to an agent of this name (empty: any agent)
  /// What the tracker read of the payload; the scheduler reads only its `kind`.
  JobFacts facts;
};

/// An instruction for the network layer.
struct Action {
  enum class Kind {
    kSendJob,    ///< send job `job` (payload, deadline) to agent `agent`
    kDeliver,    ///< send the result of `job` to client `client`
    kCancelJob,  ///< tell agent `agent` to drop job `job` (its client went away)
  };
  Kind kind;
  JobId job = 0;
  AgentId agent = 0;
  ClientId client = 0;
  uint64_t client_tag = 0;
  std::string payload;  ///< kSendJob: the job payload; kDeliver: the result JSON
  /// kSendJob, and kDeliver of an agent's result: the agent key that matched the job's pattern
  /// (the device class that measured it).
  std::string agent_key;
  TimePoint deadline{};
  int attempt = 0;  ///< kSendJob: 1 for the first try
  /// kDeliver from the scheduler itself (no agent result): the error number and message.
  std::optional<MeasureErrorNo> error;
  std::string message;
};

/// Counts for `tracker status`, per agent key.
struct KeyStatus {
  int agents_idle = 0, agents_busy = 0, agents_quarantined = 0;
  int jobs_pending = 0, jobs_leased = 0;
};

/// Agents by state, each counted once, in exactly one of idle, busy, held (quarantined or
/// suspended) and unresponsive (a lease of its expired and it has not been heard from since).
struct AgentCounts {
  int agents = 0, idle = 0, busy = 0, held = 0, unresponsive = 0;
  /// Agents that can take a job now or once their current one ends.
  int usable() const { return idle + busy; }
};

/// Which agents of a key pattern can take jobs of one kind now (Scheduler::availability), for a
/// client that must tell its user why nothing runs.
struct AgentAvailability : AgentCounts {
  /// Per agent key the pattern matches: the same counts (an agent with several matching keys
  /// counts under each).
  std::map<std::string, AgentCounts> by_key;
  /// Why the held agents are held, e.g. {"lease expired ×3": 2, "suspect (a refused result)": 1}.
  std::map<std::string, int> held_reasons;
};

/// Running totals since start.
struct SchedulerCounters {
  uint64_t submitted = 0, delivered = 0, requeued = 0, lease_expiries = 0, agents_lost_jobs = 0,
           failed_max_attempts = 0, refused_results = 0, cancelled = 0, quarantines = 0,
           rejected_results = 0;
};

/// What one client has in the scheduler (queued or leased jobs), for per-client caps.
struct ClientLoad {
  size_t jobs = 0;
  size_t bytes = 0;  ///< payload bytes of those jobs
};

class Scheduler {
 public:
  /// How many jobs of one queue dispatch looks at for one whose constraints an idle agent meets.
  static constexpr int kDispatchScan = 32;

  explicit Scheduler(SchedulerOptions options = {});

  /// Registers an agent with its keys and name (the name a job's `avoid_agent` refers to); it is
  /// idle. Throws std::invalid_argument if the id is taken or it has no key.
  /// `kinds`: the job kinds it runs (a hello's job_kinds; kernels only when not said).
  void add_agent(AgentId agent, std::vector<std::string> keys, TimePoint now, std::string name = {},
                 std::vector<JobKind> kinds = {JobKind::kKernel});
  /// Removes an agent (disconnect): its leased job is re-queued (or failed). Unknown ids are
  /// ignored.
  std::vector<Action> remove_agent(AgentId agent, TimePoint now);

  /// Queues a job for a client; returns its id. Throws std::invalid_argument for an empty key.
  JobId submit(ClientId client, JobSpec spec, TimePoint now);
  /// Drops a client's queued jobs and forgets its leased ones; returns kCancelJob actions for
  /// the agents holding them.
  std::vector<Action> remove_client(ClientId client);
  /// Cancels one job of a client (queued: dropped; leased: kCancelJob). False if unknown.
  bool cancel(ClientId client, JobId job, std::vector<Action>* actions);

  /// An agent's result for a job. Refused (returns false, `why` set) when the job is not leased
  /// to this agent — unknown, already delivered, or re-queued after its lease expired.
  /// On success the agent becomes idle and a kDeliver action is appended (unless the client left).
  /// `error` is the result's error number, for the agent's failure streak.
  bool complete(AgentId agent, JobId job, MeasureErrorNo error, std::string result_json,
                TimePoint now, std::vector<Action>* actions, std::string* why);
  /// The attempt of the lease `job` has now (1 for the first dispatch); 0 when not leased.
  int leased_attempt(JobId job) const;
  /// The agent showed it is alive (a frame or a pong): it may take jobs again after a lease of
  /// its expired. Unknown ids are ignored.
  void heard_from(AgentId agent);

  /// Refuses the result of a job leased to `agent` (it was implausible or malformed): the lease
  /// ends, the job is re-queued or, out of attempts, failed with `why`, and the agent takes no job
  /// until `suspended_until`. False (nothing changes) when the job is not leased to the agent.
  bool reject(AgentId agent, JobId job, const std::string& why, TimePoint suspended_until,
              std::vector<Action>* actions);
  /// Keeps an agent from taking jobs until `until` (its current job, if any, runs on); `why`
  /// is what availability() reports for it.
  void suspend(AgentId agent, TimePoint until, std::string why = "suspect (a refused result)");

  /// Matches idle agents with queued jobs; returns the kSendJob actions.
  std::vector<Action> dispatch(TimePoint now);
  /// Expires leases past their deadline and ends quarantines; returns deliveries of jobs that
  /// ran out of attempts. Call periodically (the tracker does every 100 ms).
  std::vector<Action> tick(TimePoint now);
  /// The earliest lease deadline, if any job is leased (for timers).
  std::optional<TimePoint> next_deadline() const;

  std::map<std::string, KeyStatus> status(TimePoint now) const;
  /// The agents whose keys `pattern` matches (key_matches) and that run jobs of `kind`, by
  /// state, with the reasons of those held (see AgentAvailability).
  AgentAvailability availability(const std::string& pattern, JobKind kind) const;
  const SchedulerCounters& counters() const { return counters_; }
  size_t pending_jobs() const;
  size_t leased_jobs() const { return leases_.size(); }
  bool has_agent(AgentId agent) const { return agents_.count(agent) > 0; }
  /// The job an agent holds, if any.
  std::optional<JobId> job_of(AgentId agent) const;
  /// The spec of `job` when it is leased to `agent`, else nullptr. Valid until the next call that
  /// changes the scheduler.
  const JobSpec* leased_spec(AgentId agent, JobId job) const;
  /// The agent key a leased job runs under (the device class); empty when it is not leased.
  std::string leased_key(JobId job) const;
  /// Whether an agent is quarantined or suspended now (takes no job).
  bool is_held(AgentId agent) const { return quarantined_.count(agent) > 0; }
  /// Queued and leased jobs of a client.
  ClientLoad client_load(ClientId client) const;

 private:
  struct Job {
    JobId id;
    ClientId client;
    JobSpec spec;
    int attempts = 0;       // dispatches so far
    uint64_t sequence = 0;  // FIFO order among equal priorities
  };
  struct Agent {
    std::vector<std::string> keys;
    std::string name;
    bool kernels = true, models = false;  // the job kinds it runs
    std::optional<JobId> job;
    int failures_in_a_row = 0;
    /// The failures of the current streak by name ("lease expired", "RUNTIME_DEVICE"), and
    /// why the agent is held (when it is): the streak that quarantined it, or the suspicion.
    std::map<std::string, int> streak;
    std::string held_reason;
    TimePoint quarantined_until{};
    bool silent = false;  // a lease expired and nothing has been heard from it since
  };
  struct Lease {
    AgentId agent;
    TimePoint deadline;
    std::string agent_key;  // the agent's key that matched the job's pattern
  };
  // Queue order: higher priority first, then lower sequence (older) first.
  struct QueueOrder {
    bool operator()(const std::pair<int, uint64_t>& a, const std::pair<int, uint64_t>& b) const {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    }
  };
  using Queue = std::map<std::pair<int, uint64_t>, JobId, QueueOrder>;

  void enqueue(Job& job, bool front);
  /// Removes a job from jobs_ and from its client's load.
  void erase_job(std::map<JobId, Job>::iterator it);
  /// Takes an agent out of dispatch until `until` (quarantine and suspension alike).
  void hold(AgentId id, Agent& agent, TimePoint until, std::string why);
  void unqueue(const Job& job);
  /// A leased job lost its agent (gone or lease expired): re-queue, or fail it when out of tries.
  void requeue_or_fail(JobId job, MeasureErrorNo error, const std::string& why,
                       std::vector<Action>& actions);
  /// One more failure (`what`: "lease expired", an error name) in the agent's streak; the
  /// `quarantine_after`-th in a row quarantines it.
  void note_agent_failure(AgentId id, Agent& agent, TimePoint now, const std::string& what);
  void mark_idle(AgentId id, const Agent& agent);
  void unmark_idle(AgentId id, const Agent& agent);
  /// An idle agent with a key that `pattern` matches, a name other than `avoid` (when not
  /// empty) and that runs jobs of `kind`, and that key; nullopt if none.
  std::optional<std::pair<AgentId, std::string>> find_idle(const std::string& pattern,
                                                           const std::string& avoid,
                                                           JobKind kind) const;

  SchedulerOptions options_;
  JobId next_job_ = 1;
  uint64_t next_sequence_ = 1;
  std::map<JobId, Job> jobs_;  // queued or leased, not yet delivered
  // By key pattern and job kind: jobs of a kind that no idle agent runs (model jobs before any
  // agent that runs models joined) sit in a queue of their own, never in front of the others.
  std::map<std::pair<std::string, JobKind>, Queue> queues_;
  std::map<JobId, Lease> leases_;
  std::map<AgentId, Agent> agents_;
  // Agents ready for a job (not busy, not quarantined), indexed by each of their keys, so a
  // key pattern finds them with one ordered-map range scan.
  std::map<std::string, std::set<AgentId>> idle_by_key_;
  std::set<AgentId> quarantined_;
  std::set<JobId> orphaned_;  // leased jobs whose client left
  std::map<ClientId, ClientLoad> loads_;
  SchedulerCounters counters_;
};

}  // namespace webtune::tracker
