/// \file tracker_test.cpp
/// The tracker with real processes on loopback: a TrackerServer, `webtune agent` processes on
/// Mesa llvmpipe, and clients over real WebSockets.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <map>
#include <set>
#include <thread>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"
#include "support/measure_inputs.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"

extern char** environ;

namespace webtune::tracker {
namespace {

using namespace std::chrono_literals;

/// A `webtune agent` child process.
class AgentProcess {
 public:
  AgentProcess(const std::string& url, const std::string& name) {
    std::vector<std::string> args = {WEBTUNE_BINARY, "--log-level", "warn",  "agent",
                                     "--tracker",    url,           "--key", "gles",
                                     "--name",       name};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, WEBTUNE_BINARY, nullptr, nullptr, argv.data(), environ) != 0)
      throw std::runtime_error("cannot start " WEBTUNE_BINARY);
  }
  ~AgentProcess() { kill_now(); }
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

Hello hello_as(Role role, std::string token = {}, std::vector<std::string> keys = {}) {
  Hello h;
  h.role = role;
  h.token = std::move(token);
  h.keys = std::move(keys);
  h.name = "test";
  return h;
}

/// A MeasureInput for dense n×n×n, gles-frag default config, as JSON.
boost::json::value dense_input(int64_t n, int number, int repeat) {
  return testing_support::dense_input(n, testing_support::measured(number, repeat), 99, 16);
}

void wait_for_agents(TrackerClient& viewer, int count) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (viewer.summary()["agents"].to_number<int>() == count) return;
    std::this_thread::sleep_for(50ms);
  }
  FAIL() << "agents did not join within 60 s";
}

std::vector<SubmitItem> batch(const boost::json::value& input, int count, uint64_t first_tag,
                              int64_t lease_ms = 60000) {
  std::vector<SubmitItem> items;
  for (int i = 0; i < count; ++i) {
    SubmitItem item;
    item.tag = first_tag + i;
    item.key = "gles";
    item.lease_ms = lease_ms;
    item.input = input;
    items.push_back(item);
  }
  return items;
}

// Collects `count` results; fails on a duplicate tag.
std::map<uint64_t, ClientResult> collect(TrackerClient& client, size_t count,
                                         std::chrono::seconds timeout) {
  std::map<uint64_t, ClientResult> results;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (results.size() < count && std::chrono::steady_clock::now() < deadline) {
    auto r = client.next_result(1s);
    if (!r) continue;
    EXPECT_TRUE(results.emplace(r->tag, *r).second) << "tag " << r->tag << " delivered twice";
  }
  // Anything more within a short while would be a duplicate.
  if (auto extra = client.next_result(300ms)) ADD_FAILURE() << "extra result for " << extra->tag;
  return results;
}

TrackerConfig local_config() {
  TrackerConfig c;
  c.port = 0;
  return c;
}

TEST(Tracker, TwoAgentsHundredJobsEachResultExactlyOnce) {
  TrackerServer server(local_config());
  server.start_background();
  AgentProcess a(server.url(), "a"), b(server.url(), "b");
  TrackerClient viewer(server.url(), hello_as(Role::kViewer));
  wait_for_agents(viewer, 2);
  TrackerClient client(server.url(), hello_as(Role::kClient));
  auto ids = client.submit(batch(dense_input(32, 1, 1), 100, 1000));
  ASSERT_EQ(ids.size(), 100u);
  auto results = collect(client, 100, 120s);
  ASSERT_EQ(results.size(), 100u);
  for (const auto& [tag, r] : results) {
    EXPECT_GE(tag, 1000u);
    EXPECT_LT(tag, 1100u);
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0) << boost::json::serialize(r.result);
    EXPECT_GT(r.result.at("costs").as_array().at(0).to_number<double>(), 0.0);
  }
  boost::json::object s = viewer.summary();
  EXPECT_EQ(s["counters"].as_object()["jobs_delivered"].to_number<int>(), 100);
  // Both agents worked.
  int busy_agents = 0;
  server.inspect([&](const TrackerState& state) {
    for (const auto& [id, peer] : state.peers())
      if (peer.role == Role::kAgent && peer.jobs_done > 0) ++busy_agents;
  });
  EXPECT_EQ(busy_agents, 2);
}

TEST(Tracker, KilledAgentsJobRunsAgainElsewhereAndArrivesOnce) {
  TrackerServer server(local_config());
  server.start_background();
  auto victim = std::make_unique<AgentProcess>(server.url(), "victim");
  AgentProcess survivor(server.url(), "survivor");
  TrackerClient viewer(server.url(), hello_as(Role::kViewer));
  wait_for_agents(viewer, 2);
  TrackerClient client(server.url(), hello_as(Role::kClient));
  // ~0.3–1 s per job on llvmpipe, so both agents are busy when the victim dies.
  client.submit(batch(dense_input(128, 8, 2), 8, 1));
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (viewer.summary()["keys"].as_object().size() > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    auto keys = viewer.summary()["keys"].as_object();
    if (keys.contains("gles") && keys["gles"].as_object()["jobs_leased"].to_number<int>() == 2)
      break;
    std::this_thread::sleep_for(20ms);
  }
  victim->kill_now();
  auto results = collect(client, 8, 180s);
  ASSERT_EQ(results.size(), 8u);
  int retried = 0;
  for (const auto& [tag, r] : results) {
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0) << boost::json::serialize(r.result);
    retried += r.attempt > 1;
  }
  EXPECT_GE(retried, 1) << "the victim's job should have run a second time";
  server.inspect([&](const TrackerState& state) {
    EXPECT_EQ(state.scheduler().counters().agents_lost_jobs, 1u);
  });
}

TEST(Tracker, AgentThatNeverAnswersLosesItsLease) {
  // The tracker chooses leases; this one caps them at 1.5 s.
  TrackerConfig config = local_config();
  config.leases.min_ms = 500;
  config.leases.max_ms = 1500;
  TrackerServer server(config);
  server.start_background();
  TrackerClient mute(server.url(), hello_as(Role::kAgent, "", {"gles:mute"}));
  TrackerClient client(server.url(), hello_as(Role::kClient));
  client.submit(batch(dense_input(16, 1, 1), 1, 7));
  auto job = mute.next_message(5s);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(message_type(*job), "job");
  // A real agent joins; once the mute agent's lease expires, the job is re-queued to it.
  AgentProcess real(server.url(), "real");
  auto results = collect(client, 1, 60s);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[7].attempt, 2);
  EXPECT_EQ(results[7].result.at("error_no").to_number<int>(), 0);
  server.inspect([&](const TrackerState& state) {
    EXPECT_EQ(state.scheduler().counters().lease_expiries, 1u);
  });
  // The mute agent's late answer is refused: the job is no longer its own.
  mute.send_text(R"({"type":"result","job":)" + std::to_string(get_u64(*job, "job")) +
                 R"(,"result":{"error_no":0,"costs":[1.0]}})");
  auto refused = mute.next_message(5s);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(message_type(*refused), "error");
  EXPECT_EQ(std::string((*refused)["code"].as_string()), "unknown_job");
}

TEST(Tracker, BadPeersGetClearErrorsAndOthersAreUndisturbed) {
  TrackerConfig config = local_config();
  config.tokens.agent = "agent-secret";
  config.tokens.client = "client-secret";
  config.max_frame_bytes = 1 << 20;
  TrackerServer server(config);
  server.start_background();
  TrackerClient good(server.url(), hello_as(Role::kClient, "client-secret"));

  // Wrong token: refused at the handshake.
  try {
    TrackerClient wrong(server.url(), hello_as(Role::kClient, "guess"));
    FAIL() << "a wrong token was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad_token"), std::string::npos) << e.what();
  }
  // A first frame that is not a hello, and a wrong protocol version.
  auto raw = TrackerClient::connect_raw(server.url(), 5s);
  raw->send_text(R"({"type":"summary"})");
  auto refused = raw->next_message(5s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(std::string((*refused)["code"].as_string()), "handshake");
  auto old = TrackerClient::connect_raw(server.url(), 5s);
  old->send_text(R"({"type":"hello","protocol":0,"role":"client","token":"client-secret"})");
  auto version = old->next_message(5s);
  ASSERT_TRUE(version);
  EXPECT_EQ(std::string((*version)["code"].as_string()), "version");

  // Invalid JSON, unknown type, a malformed submit and a forbidden message: errors, no close.
  TrackerClient sloppy(server.url(), hello_as(Role::kClient, "client-secret"));
  auto expect_error = [&](const std::string& frame, const std::string& code) {
    sloppy.send_text(frame);
    auto m = sloppy.next_message(5s);
    ASSERT_TRUE(m) << frame;
    EXPECT_EQ(message_type(*m), "error") << frame;
    EXPECT_EQ(std::string((*m)["code"].as_string()), code) << frame;
    EXPECT_FALSE((*m)["message"].as_string().empty());
  };
  expect_error("{not json", "invalid_json");
  expect_error(R"({"type":"fly"})", "unknown_type");
  expect_error(R"({"no_type":1})", "bad_message");
  expect_error(R"({"type":"submit","batch":[{"tag":1}]})", "bad_message");
  expect_error(R"({"type":"result","job":1,"result":{}})", "forbidden");
  expect_error(R"({"type":"cancel","job":12345})", "unknown_job");
  EXPECT_FALSE(sloppy.closed());
  EXPECT_EQ(sloppy.summary()["clients"].to_number<int>(), 2);

  // An agent's result for a job it never had.
  TrackerClient agent(server.url(), hello_as(Role::kAgent, "agent-secret", {"gles:fake"}));
  agent.send_text(R"({"type":"result","job":424242,"result":{"error_no":0}})");
  auto unknown = agent.next_message(5s);
  ASSERT_TRUE(unknown);
  EXPECT_EQ(std::string((*unknown)["code"].as_string()), "unknown_job");

  // An oversized frame closes that connection with 1009, and only that one. The tracker may
  // close while the client is still writing the 2 MiB; then the write fails (broken pipe or
  // reset) before the client has read the close frame, so only a client whose write went
  // through can see the code. Either way the connection is gone.
  TrackerClient big(server.url(), hello_as(Role::kClient, "client-secret"));
  bool write_failed = false;
  try {
    big.send_text(std::string(2 << 20, 'x'));
  } catch (const std::runtime_error& e) {
    write_failed = true;
    EXPECT_NE(std::string(e.what()).find("send to tracker failed"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      {
        for (int i = 0; i < 10; ++i) big.next_message(1s);
      },
      std::runtime_error);
  EXPECT_TRUE(big.closed());
  if (!write_failed) {
    EXPECT_EQ(big.close_code(), 1009);
  }

  // The well-behaved client still gets service, and the tracker counted what went wrong.
  boost::json::object s = good.summary();
  EXPECT_GE(s["counters"].as_object()["protocol_errors"].to_number<int>(), 8);
  EXPECT_GE(s["counters"].as_object()["refused_handshakes"].to_number<int>(), 3);
  EXPECT_EQ(s["agents"].to_number<int>(), 1);
}

TEST(Tracker, ClientThatLeavesCancelsItsQueuedJobs) {
  TrackerServer server(local_config());
  server.start_background();
  {
    TrackerClient client(server.url(), hello_as(Role::kClient));
    client.submit(batch(dense_input(16, 1, 1), 5, 1));
  }
  TrackerClient viewer(server.url(), hello_as(Role::kViewer));
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  int cancelled = 0;
  while (std::chrono::steady_clock::now() < deadline && cancelled < 5) {
    cancelled = viewer.summary()["counters"].as_object()["jobs_cancelled"].to_number<int>();
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(cancelled, 5);
  EXPECT_TRUE(viewer.summary()["keys"].as_object().empty());
}

// A tuner does not read while it builds a batch or fits its cost model, so it cannot answer
// pings; the tracker must keep it (a dropped client loses its jobs: "send to tracker failed:
// Broken pipe" while tuning wasm on a loaded machine), yet still drop a silent agent quickly.
TEST(Tracker, SilentClientIsKeptWhileASilentAgentIsDropped) {
  TrackerConfig config = local_config();
  config.heartbeat_ms = 400;
  config.client_heartbeat_ms = 30000;
  TrackerServer server(config);
  server.start_background();
  TrackerClient agent(server.url(), hello_as(Role::kAgent, {}, {"gles:test"}));
  TrackerClient client(server.url(), hello_as(Role::kClient));
  std::this_thread::sleep_for(2s);  // neither reads: no pongs, no frames
  EXPECT_THROW(
      {
        for (int i = 0; i < 20; ++i) agent.next_message(100ms);
      },
      std::runtime_error);
  boost::json::object summary = client.summary(5s);
  EXPECT_EQ(summary["agents"].to_number<int>(), 0);
  auto ids = client.submit(batch(dense_input(16, 1, 1), 2, 1));
  EXPECT_EQ(ids.size(), 2u);
}

TEST(Tracker, AgentsAnswersWhoCanServeAKeyAndWhyTheOthersCannot) {
  // Leases of 0.5 s, and one lost lease quarantines an agent for a minute.
  TrackerConfig config = local_config();
  config.leases.min_ms = 500;
  config.leases.max_ms = 500;
  config.scheduler.quarantine_after = 1;
  config.scheduler.quarantine_duration = 60s;
  TrackerServer server(config);
  server.start_background();
  TrackerClient client(server.url(), hello_as(Role::kClient));
  auto counts = [](const boost::json::object& a) {
    std::vector<int> out;
    for (const char* name : {"agents", "idle", "busy", "quarantined", "unresponsive"})
      out.push_back(a.at(name).to_number<int>());
    return out;
  };
  boost::json::object none = client.agents("gles");
  EXPECT_EQ(std::string(none.at("key").as_string()), "gles");
  EXPECT_EQ(std::string(none.at("kind").as_string()), "kernel");
  EXPECT_EQ(counts(none), (std::vector<int>{0, 0, 0, 0, 0}));
  EXPECT_TRUE(none.at("keys").as_object().empty());

  TrackerClient mute(server.url(), hello_as(Role::kAgent, "", {"gles:mute"}));
  boost::json::object idle = client.agents("gles");
  EXPECT_EQ(counts(idle), (std::vector<int>{1, 1, 0, 0, 0}));
  EXPECT_EQ(idle.at("keys").at("gles:mute").at("idle").to_number<int>(), 1);
  EXPECT_EQ(counts(client.agents("webgl2")), (std::vector<int>{0, 0, 0, 0, 0}));

  client.submit(batch(dense_input(16, 1, 1), 1, 7));  // leased to the mute agent at once
  EXPECT_EQ(counts(client.agents("gles:mute")), (std::vector<int>{1, 0, 1, 0, 0}));
  // It never answers: the lease expires and the agent is quarantined, with the reason.
  boost::json::object held;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    held = client.agents("gles");
    if (held.at("quarantined").to_number<int>() == 1) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(counts(held), (std::vector<int>{1, 0, 0, 1, 0}));
  const boost::json::object& reasons = held.at("quarantine_reasons").as_object();
  EXPECT_EQ(reasons.size(), 1u) << boost::json::serialize(reasons);
  ASSERT_TRUE(reasons.contains("lease expired \u00d71")) << boost::json::serialize(reasons);
  EXPECT_EQ(reasons.at("lease expired \u00d71").to_number<int>(), 1);

  // A viewer may ask too; a question without a key, or of an unknown kind, is a bad message.
  Hello viewer_hello = hello_as(Role::kViewer);
  TrackerClient viewer(server.url(), viewer_hello);
  EXPECT_EQ(viewer.agents("gles").at("quarantined").to_number<int>(), 1);
  for (const char* bad : {R"({"type":"agents"})", R"({"type":"agents","key":""})",
                          R"({"type":"agents","key":"gles","kind":"gpu"})"}) {
    viewer.send_text(bad);
    auto error = viewer.next_message(5s);
    ASSERT_TRUE(error.has_value()) << bad;
    EXPECT_EQ(message_type(*error), "error") << bad;
    EXPECT_EQ(std::string((*error)["code"].as_string()), "bad_message") << bad;
  }
}

}  // namespace
}  // namespace webtune::tracker
