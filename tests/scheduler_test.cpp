/// \file scheduler_test.cpp
/// The tracker's scheduling rules, without sockets.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "tracker/scheduler.hpp"

namespace webtune::tracker {
namespace {

using std::chrono::milliseconds;

JobSpec job(const std::string& key, int priority = 0, std::string payload = "{}",
            milliseconds lease = milliseconds(1000)) {
  JobSpec s;
  s.key = key;
  s.priority = priority;
  s.payload = std::move(payload);
  s.lease = lease;
  return s;
}

TEST(KeyMatches, PrefixEndsAtAColon) {
  EXPECT_TRUE(key_matches("gles", "gles:llvmpipe"));
  EXPECT_TRUE(key_matches("gles:llvmpipe", "gles:llvmpipe"));
  EXPECT_TRUE(key_matches("gles", "gles"));
  EXPECT_FALSE(key_matches("gles:llvm", "gles:llvmpipe"));
  EXPECT_FALSE(key_matches("gl", "gles:llvmpipe"));
  EXPECT_FALSE(key_matches("webgl2", "gles:llvmpipe"));
  EXPECT_FALSE(key_matches("", "gles"));
}

TEST(Scheduler, HigherPriorityFirstThenFifo) {
  Scheduler s;
  TimePoint t0 = Clock::now();
  JobId a = s.submit(1, job("gles", 0, "a"), t0);
  JobId b = s.submit(1, job("gles", 5, "b"), t0);
  JobId c = s.submit(1, job("gles", 0, "c"), t0);
  s.add_agent(10, {"gles:llvmpipe"}, t0);
  std::vector<JobId> order;
  for (int i = 0; i < 3; ++i) {
    auto sends = s.dispatch(t0);
    ASSERT_EQ(sends.size(), 1u);
    order.push_back(sends[0].job);
    std::vector<Action> out;
    ASSERT_TRUE(s.complete(10, sends[0].job, MeasureErrorNo::kNoError, "{}", t0, &out, nullptr));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].kind, Action::Kind::kDeliver);
    EXPECT_EQ(out[0].client, 1u);
  }
  EXPECT_EQ(order, (std::vector<JobId>{b, a, c}));
}

TEST(Scheduler, JobsGoOnlyToAgentsWithAMatchingKey) {
  Scheduler s;
  TimePoint t0 = Clock::now();
  s.add_agent(1, {"webgl2:swiftshader"}, t0);
  s.submit(7, job("gles"), t0);
  EXPECT_TRUE(s.dispatch(t0).empty());
  EXPECT_EQ(s.pending_jobs(), 1u);
  s.add_agent(2, {"gles:nvidia-h200", "webgl2:angle"}, t0);
  auto sends = s.dispatch(t0);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].agent, 2u);
  EXPECT_EQ(sends[0].attempt, 1);
  auto status = s.status(t0);
  EXPECT_EQ(status["gles:nvidia-h200"].agents_busy, 1);
  EXPECT_EQ(status["webgl2:swiftshader"].agents_idle, 1);
  EXPECT_EQ(status["gles"].jobs_leased, 1);
}

TEST(Scheduler, LostAgentRequeuesAndResultsAreDeliveredOnce) {
  Scheduler s;
  TimePoint t0 = Clock::now();
  s.add_agent(1, {"gles:a"}, t0);
  s.add_agent(2, {"gles:b"}, t0);
  JobId j = s.submit(3, job("gles"), t0);
  auto sends = s.dispatch(t0);
  ASSERT_EQ(sends.size(), 1u);
  const AgentId first = sends[0].agent;
  EXPECT_TRUE(s.remove_agent(first, t0).empty());  // re-queued, nothing delivered yet
  auto again = s.dispatch(t0);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0].agent, first);
  EXPECT_EQ(again[0].job, j);
  EXPECT_EQ(again[0].attempt, 2);
  std::vector<Action> out;
  std::string why;
  EXPECT_FALSE(s.complete(first, j, MeasureErrorNo::kNoError, "{}", t0, &out, &why));
  EXPECT_NE(why.find("not leased to this agent"), std::string::npos);
  EXPECT_TRUE(s.complete(again[0].agent, j, MeasureErrorNo::kNoError, "{\"r\":1}", t0, &out, &why));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].payload, "{\"r\":1}");
  EXPECT_FALSE(s.complete(again[0].agent, j, MeasureErrorNo::kNoError, "{}", t0, &out, &why));
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(s.counters().refused_results, 2u);
  EXPECT_EQ(s.counters().delivered, 1u);
}

TEST(Scheduler, ExpiredLeasesRequeueThenFailAfterMaxAttempts) {
  SchedulerOptions o;
  o.max_attempts = 2;
  o.quarantine_after = 100;
  Scheduler s(o);
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t);
  JobId j = s.submit(9, job("gles", 0, "{}", milliseconds(50)), t);
  ASSERT_EQ(s.dispatch(t).size(), 1u);
  EXPECT_TRUE(s.tick(t + milliseconds(10)).empty());  // lease still running
  t += milliseconds(60);
  EXPECT_TRUE(s.tick(t).empty());  // expired: back in the queue
  EXPECT_EQ(s.counters().lease_expiries, 1u);
  EXPECT_EQ(s.pending_jobs(), 1u);
  s.heard_from(1);  // the agent answers a ping: it may take jobs again
  auto second = s.dispatch(t);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].attempt, 2);
  t += milliseconds(60);
  auto failed = s.tick(t);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].kind, Action::Kind::kDeliver);
  EXPECT_EQ(failed[0].job, j);
  ASSERT_TRUE(failed[0].error.has_value());
  EXPECT_EQ(*failed[0].error, MeasureErrorNo::kRunTimeout);
  EXPECT_NE(failed[0].message.find("2 attempts"), std::string::npos);
  EXPECT_EQ(s.pending_jobs() + s.leased_jobs(), 0u);
}

TEST(Scheduler, AgentThatKeepsFailingIsQuarantined) {
  SchedulerOptions o;
  o.quarantine_after = 2;
  o.quarantine_duration = milliseconds(1000);
  Scheduler s(o);
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t);
  for (int i = 0; i < 2; ++i) {
    s.submit(5, job("gles"), t);
    auto sends = s.dispatch(t);
    ASSERT_EQ(sends.size(), 1u);
    std::vector<Action> out;
    ASSERT_TRUE(
        s.complete(1, sends[0].job, MeasureErrorNo::kRuntimeDevice, "{}", t, &out, nullptr));
  }
  EXPECT_EQ(s.counters().quarantines, 1u);
  s.submit(5, job("gles"), t);
  EXPECT_TRUE(s.dispatch(t).empty());
  EXPECT_EQ(s.status(t)["gles:a"].agents_quarantined, 1);
  s.tick(t + milliseconds(1500));
  EXPECT_EQ(s.dispatch(t + milliseconds(1500)).size(), 1u);
}

TEST(Scheduler, WrongAnswersDoNotQuarantine) {
  SchedulerOptions o;
  o.quarantine_after = 1;
  Scheduler s(o);
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t);
  s.submit(5, job("gles"), t);
  auto sends = s.dispatch(t);
  std::vector<Action> out;
  ASSERT_TRUE(s.complete(1, sends[0].job, MeasureErrorNo::kWrongAnswer, "{}", t, &out, nullptr));
  EXPECT_EQ(s.counters().quarantines, 0u);
}

TEST(Scheduler, ClientThatLeavesHasItsJobsCancelled) {
  Scheduler s;
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t);
  JobId leased = s.submit(5, job("gles"), t);
  s.submit(5, job("gles"), t);
  s.submit(6, job("gles"), t);
  ASSERT_EQ(s.dispatch(t).size(), 1u);
  auto cancels = s.remove_client(5);
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0].kind, Action::Kind::kCancelJob);
  EXPECT_EQ(cancels[0].job, leased);
  EXPECT_EQ(s.pending_jobs(), 1u);  // client 6's job stays
  std::vector<Action> out;
  EXPECT_TRUE(s.complete(1, leased, MeasureErrorNo::kNoError, "{}", t, &out, nullptr));
  EXPECT_TRUE(out.empty());  // nobody to deliver to
  auto next = s.dispatch(t);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].client, 6u);
}

TEST(Scheduler, ManyAgentsManyJobsEachDeliveredExactlyOnce) {
  Scheduler s;
  TimePoint t = Clock::now();
  for (AgentId a = 1; a <= 50; ++a) s.add_agent(a, {"k:" + std::to_string(a % 3)}, t);
  std::set<JobId> submitted, delivered;
  for (int i = 0; i < 1000; ++i) submitted.insert(s.submit(100 + i % 4, job("k", i % 3), t));
  std::mt19937 rng(1);
  while (delivered.size() < submitted.size()) {
    auto sends = s.dispatch(t);
    ASSERT_FALSE(sends.empty());
    for (const Action& a : sends) {
      std::vector<Action> out;
      if (rng() % 10 == 0) {  // an agent vanishes and comes back
        for (const Action& d : s.remove_agent(a.agent, t)) {
          ASSERT_TRUE(d.error.has_value());  // out of attempts: delivered as an error, once
          ASSERT_TRUE(delivered.insert(d.job).second) << "twice: " << d.job;
        }
        s.add_agent(a.agent, {"k:x"}, t);
        continue;
      }
      ASSERT_TRUE(s.complete(a.agent, a.job, MeasureErrorNo::kNoError, "{}", t, &out, nullptr));
      for (const Action& d : out) ASSERT_TRUE(delivered.insert(d.job).second) << "twice: " << d.job;
    }
  }
  EXPECT_EQ(delivered, submitted);
}

TEST(Scheduler, AJobThatAvoidsAnAgentWaitsForAnotherAndDoesNotBlockTheQueue) {
  Scheduler s;
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t, "first");
  JobSpec verify = job("gles", 0, "verify");
  verify.avoid_agent = "first";
  const JobId v = s.submit(7, verify, t);
  const JobId plain = s.submit(7, job("gles", 0, "plain"), t);
  // The avoided agent skips the re-measurement and takes the job behind it.
  auto sends = s.dispatch(t);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].job, plain);
  EXPECT_EQ(sends[0].agent_key, "gles:a");
  std::vector<Action> out;
  ASSERT_TRUE(s.complete(1, plain, MeasureErrorNo::kNoError, "{}", t, &out, nullptr));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].agent_key, "gles:a");  // the device class that measured it
  EXPECT_TRUE(s.dispatch(t).empty());
  EXPECT_EQ(s.pending_jobs(), 1u);
  // A second agent of another name takes it.
  s.add_agent(2, {"gles:a"}, t, "second");
  sends = s.dispatch(t);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].job, v);
  EXPECT_EQ(sends[0].agent, 2u);
}

TEST(Scheduler, KernelsThatRunPastTheirBudgetDoNotQuarantineTheAgent) {
  // A client could otherwise quarantine every healthy agent by sending kernels that hang.
  SchedulerOptions o;
  o.quarantine_after = 1;
  Scheduler s(o);
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t);
  for (int i = 0; i < 3; ++i) {
    s.submit(5, job("gles"), t);
    auto sends = s.dispatch(t);
    ASSERT_EQ(sends.size(), 1u);
    std::vector<Action> out;
    ASSERT_TRUE(s.complete(1, sends[0].job, MeasureErrorNo::kRunTimeout, "{}", t, &out, nullptr));
  }
  EXPECT_EQ(s.counters().quarantines, 0u);
  EXPECT_EQ(s.status(t)["gles:a"].agents_idle, 1);
}

TEST(Scheduler, ARejectedResultRequeuesTheJobElsewhereAndSuspendsTheAgent) {
  Scheduler s;
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t, "rogue");
  const JobId j = s.submit(5, job("gles"), t);
  auto sends = s.dispatch(t);
  ASSERT_EQ(sends.size(), 1u);
  std::vector<Action> out;
  EXPECT_FALSE(s.reject(2, j, "not leased to it", t + milliseconds(60000), &out));
  ASSERT_TRUE(s.reject(1, j, "cost beyond the peak", t + milliseconds(60000), &out));
  EXPECT_TRUE(out.empty());  // re-queued, not failed: attempts are left
  EXPECT_EQ(s.counters().rejected_results, 1u);
  EXPECT_TRUE(s.is_held(1));
  // Its late answer is refused, the suspended agent takes nothing, an honest one takes the job.
  EXPECT_FALSE(s.complete(1, j, MeasureErrorNo::kNoError, "{}", t, &out, nullptr));
  EXPECT_TRUE(s.dispatch(t).empty());
  s.add_agent(2, {"gles:a"}, t, "honest");
  sends = s.dispatch(t);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].agent, 2u);
  EXPECT_EQ(sends[0].attempt, 2);
  // The suspension outlasts ticks before its end and ends after it.
  s.tick(t + milliseconds(30000));
  EXPECT_TRUE(s.is_held(1));
  s.tick(t + milliseconds(60001));
  EXPECT_FALSE(s.is_held(1));
}

TEST(Scheduler, ClientLoadCountsQueuedAndLeasedJobsUntilTheyAreGone) {
  Scheduler s;
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t);
  const JobId a = s.submit(5, job("gles", 0, std::string(100, 'x')), t);
  const JobId b = s.submit(5, job("gles", 0, std::string(50, 'y')), t);
  s.submit(6, job("gles", 0, "z"), t);
  EXPECT_EQ(s.client_load(5).jobs, 2u);
  EXPECT_EQ(s.client_load(5).bytes, 150u);
  auto sends = s.dispatch(t);
  ASSERT_EQ(sends.size(), 1u);
  ASSERT_EQ(sends[0].job, a);
  EXPECT_EQ(s.client_load(5).jobs, 2u);  // leased still counts
  std::vector<Action> out;
  ASSERT_TRUE(s.complete(1, a, MeasureErrorNo::kNoError, "{}", t, &out, nullptr));
  EXPECT_EQ(s.client_load(5).jobs, 1u);
  EXPECT_EQ(s.client_load(5).bytes, 50u);
  ASSERT_TRUE(s.cancel(5, b, &out));
  EXPECT_EQ(s.client_load(5).jobs, 0u);
  EXPECT_EQ(s.client_load(5).bytes, 0u);
  s.remove_client(6);
  EXPECT_EQ(s.client_load(6).jobs, 0u);
}

TEST(Scheduler, AnAgentWhoseLeaseExpiredWaitsForASignOfLife) {
  SchedulerOptions o;
  o.quarantine_after = 100;
  Scheduler s(o);
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t);
  const JobId j = s.submit(5, job("gles", 0, "{}", milliseconds(100)), t);
  ASSERT_EQ(s.dispatch(t).size(), 1u);
  EXPECT_EQ(s.leased_attempt(j), 1);
  s.tick(t + milliseconds(200));  // expired: re-queued, but not to the frozen agent
  EXPECT_TRUE(s.dispatch(t + milliseconds(200)).empty());
  EXPECT_EQ(s.pending_jobs(), 1u);
  EXPECT_EQ(s.leased_attempt(j), 0);
  s.heard_from(1);
  auto sends = s.dispatch(t + milliseconds(300));
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].attempt, 2);
  EXPECT_EQ(s.leased_attempt(j), 2);
}

TEST(Scheduler, AvailabilityCountsEachAgentOnceAndSaysWhyTheHeldAreHeld) {
  SchedulerOptions o;
  o.quarantine_after = 2;
  o.quarantine_duration = milliseconds(60000);
  o.max_attempts = 100;
  Scheduler s(o);
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t, "leases");
  s.add_agent(2, {"gles:a"}, t, "mixed");
  s.add_agent(3, {"gles:b", "webgl2:b"}, t, "busy");
  s.add_agent(4, {"gles:a"}, t, "models", {JobKind::kModel});  // never counted for kernels
  s.add_agent(5, {"webgl2:c"}, t, "elsewhere");
  AgentAvailability a = s.availability("gles", JobKind::kKernel);
  EXPECT_EQ(a.agents, 3);
  EXPECT_EQ(a.idle, 3);
  EXPECT_EQ(a.usable(), 3);

  // Jobs go to the lowest idle id that runs kernels. Each job that loses its lease is dropped
  // (its client leaves) so that the next one goes where the test says.
  auto lease_one = [&](AgentId expected) -> JobId {
    s.submit(9, job("gles:a", 0, "{}", milliseconds(100)), t);
    auto sends = s.dispatch(t);
    EXPECT_EQ(sends.size(), 1u);
    EXPECT_EQ(sends.empty() ? 0 : sends[0].agent, expected);
    return sends.empty() ? 0 : sends[0].job;
  };
  auto expire = [&] {
    t += milliseconds(200);
    s.tick(t);
    s.remove_client(9);
  };
  // Agent 1 loses two leases in a row (it answers pings in between): quarantined.
  for (int i = 0; i < 2; ++i) {
    lease_one(1);
    expire();
    s.heard_from(1);
  }
  // Agent 2 fails a job (RUNTIME_DEVICE), then loses a lease: quarantined too.
  std::vector<Action> out;
  const JobId failed = lease_one(2);
  ASSERT_TRUE(s.complete(2, failed, MeasureErrorNo::kRuntimeDevice, "{}", t, &out, nullptr));
  lease_one(2);
  expire();
  // Agent 3 holds a job.
  s.submit(9, job("gles:b"), t);
  ASSERT_EQ(s.dispatch(t).size(), 1u);

  a = s.availability("gles", JobKind::kKernel);
  EXPECT_EQ(a.agents, 3);
  EXPECT_EQ(a.idle, 0);
  EXPECT_EQ(a.busy, 1);
  EXPECT_EQ(a.held, 2);
  EXPECT_EQ(a.unresponsive, 0);
  EXPECT_EQ(a.held_reasons,
            (std::map<std::string, int>{{"lease expired \u00d72", 1},
                                        {"RUNTIME_DEVICE \u00d71, lease expired \u00d71", 1}}));
  EXPECT_EQ(a.by_key.at("gles:a").held, 2);
  EXPECT_EQ(a.by_key.at("gles:b").busy, 1);
  EXPECT_EQ(a.by_key.count("webgl2:b"), 0u);
  // A narrower pattern sees only its key; the model kind sees only the model agent.
  EXPECT_EQ(s.availability("gles:b", JobKind::kKernel).agents, 1);
  EXPECT_EQ(s.availability("gles", JobKind::kModel).agents, 1);
  EXPECT_EQ(s.availability("webgl2", JobKind::kKernel).agents, 2);
  EXPECT_EQ(s.availability("wasm", JobKind::kKernel).agents, 0);
}

TEST(Scheduler, AvailabilityTellsUnresponsiveAndSuspectAgentsApart) {
  SchedulerOptions o;
  o.quarantine_after = 100;
  Scheduler s(o);
  TimePoint t = Clock::now();
  s.add_agent(1, {"gles:a"}, t, "frozen");
  s.add_agent(2, {"gles:a"}, t, "rogue");
  s.submit(5, job("gles", 0, "{}", milliseconds(100)), t);
  ASSERT_EQ(s.dispatch(t).size(), 1u);  // to agent 1
  s.tick(t + milliseconds(200));        // its lease expired; the job goes to agent 2
  auto sends = s.dispatch(t + milliseconds(200));
  ASSERT_EQ(sends.size(), 1u);
  ASSERT_EQ(sends[0].agent, 2u);
  std::vector<Action> out;
  ASSERT_TRUE(s.reject(2, sends[0].job, "too fast", t + milliseconds(60000), &out));
  AgentAvailability a = s.availability("gles", JobKind::kKernel);
  EXPECT_EQ(a.agents, 2);
  EXPECT_EQ(a.unresponsive, 1);
  EXPECT_EQ(a.held, 1);
  EXPECT_EQ(a.usable(), 0);
  EXPECT_EQ(a.held_reasons, (std::map<std::string, int>{{"suspect (a refused result)", 1}}));
  s.heard_from(1);  // a sign of life: idle again
  a = s.availability("gles", JobKind::kKernel);
  EXPECT_EQ(a.unresponsive, 0);
  EXPECT_EQ(a.usable(), 1);
}

}  // namespace
}  // namespace webtune::tracker
