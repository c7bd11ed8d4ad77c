/// \file tracker_hardening_test.cpp
/// The tracker tried as a hostile or unlucky peer would (issue 13): each test first reproduces a
/// way the tracker once crashed, lost work, trusted a fake result or held resources without
/// bound, on a real tracker on loopback with real WebSocket peers, real `webtune agent`
/// processes on llvmpipe and the real `webtune tracker` program.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"
#include "native_agent/device_class.hpp"
#include "support/measure_inputs.hpp"
#include "support/raw_http.hpp"
#include "support/webtune_process.hpp"
#include "tracker/origin_policy.hpp"
#include "tracker/protocol.hpp"
#include "tracker/secret.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"
#include "tuner/measure_pipeline.hpp"

namespace webtune::tracker {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing_support::WebtuneProcess;

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("webtune_hardening_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TrackerConfig local_config() {
  TrackerConfig c;
  c.port = 0;
  return c;
}

Hello hello_as(Role role, std::string name, std::vector<std::string> keys = {},
               bj::object device = {}, std::string token = {}) {
  Hello h;
  h.role = role;
  h.name = std::move(name);
  h.keys = std::move(keys);
  h.device = std::move(device);
  h.token = std::move(token);
  return h;
}

/// A MeasureInput for dense n×n×n, gles-frag default config, as JSON.
bj::value dense_input(int64_t n, int repeat = 1, double timeout_s = 10) {
  return testing_support::dense_input(n, testing_support::measured(1, repeat, timeout_s));
}

std::vector<SubmitItem> jobs(const bj::value& input, int count, uint64_t first_tag,
                             const std::string& key = "gles", int64_t lease_ms = 60000) {
  std::vector<SubmitItem> items;
  for (int i = 0; i < count; ++i) {
    SubmitItem item;
    item.tag = first_tag + i;
    item.key = key;
    item.lease_ms = lease_ms;
    item.input = input;
    items.push_back(item);
  }
  return items;
}

/// Waits for the next frame of `type`, skipping others; fails the test on timeout.
bj::object expect_message(TrackerClient& peer, const std::string& type,
                          std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto m = peer.next_message(200ms);
    if (m && message_type(*m) == type) return *m;
  }
  ADD_FAILURE() << "no '" << type << "' within " << timeout.count() << " ms";
  return {};
}

/// True once the tracker has closed `peer` (reading reports the close), within `timeout`.
bool closed_by_tracker(TrackerClient& peer, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      peer.next_message(100ms);
    } catch (const std::runtime_error&) {
      return true;
    }
  }
  return false;
}

int64_t counter(TrackerClient& viewer, const std::string& name) {
  return viewer.summary()["counters"].as_object().at(name).to_number<int64_t>();
}

/// Sends one raw HTTP/1.1 request to 127.0.0.1:port; returns the status line.
std::string http_status(uint16_t port, const std::string& request) {
  const std::string response = testing_support::raw_http(port, request, true);
  return response.substr(0, response.find("\r\n"));
}

std::string upgrade_request(uint16_t port, const std::string& host, const std::string& origin) {
  std::string r = "GET /ws HTTP/1.1\r\nHost: " + host +
                  "\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  if (!origin.empty()) r += "Origin: " + origin + "\r\n";
  return r + "\r\n";
}

// 1. One frame killed the tracker: a long hello field made the refusal's close reason longer
//    than a close frame holds, and Beast's std::length_error aborted the process.
TEST(TrackerHardening, LongHelloFieldsAreRefusedAndTheTrackerLivesOn) {
  for (bool tokens : {false, true}) {
    TrackerConfig config = local_config();
    if (tokens) config.tokens = {"a", "c", "v"};
    TrackerServer server(config);
    server.start_background();
    for (const std::string& frame :
         {R"({"type":"hello","protocol":1,"role":")" + std::string(90, 'r') + "\"}",
          R"({"type":"hello","protocol":")" + std::string(80, 'p') + R"(","role":"agent"})",
          R"({"type":"hello","protocol":1,"role":"agent","keys":[")" + std::string(300, 'k') +
              "\"]}",
          R"({"type":"hello","protocol":1,"role":"agent","name":")" + std::string(200, 'n') +
              R"(","keys":["gles:x"]})",
          R"({"type":")" + std::string(5000, 't') + "\"}"}) {
      auto raw = TrackerClient::connect_raw(server.url(), 5s);
      raw->send_text(frame);
      bj::object error = expect_message(*raw, "error");
      EXPECT_LE(error["message"].as_string().size(), 400u);
      EXPECT_TRUE(closed_by_tracker(*raw, 5s));
      EXPECT_EQ(raw->close_code(), 1008);
    }
    // Still alive: a new peer is served.
    TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v", {}, {}, tokens ? "v" : ""));
    EXPECT_EQ(counter(viewer, "refused_handshakes"), 5);
  }
}

// A number too large for a double was read as infinity and written back as `Infinity`: a hello's
// device with 1e999 made every later summary throw (found by the frame-handling fuzzer).
TEST(TrackerHardening, NumbersThatAreNotFiniteAreRefusedAtTheDoor) {
  TrackerServer server(local_config());
  server.start_background();
  auto raw = TrackerClient::connect_raw(server.url(), 5s);
  raw->send_text(R"({"type":"hello","protocol":1,"role":"agent","keys":["gles:x"],)"
                 R"("device":{"renderer":"r","cpu_threads":1e999}})");
  bj::object error = expect_message(*raw, "error");
  EXPECT_EQ(error["code"].as_string(), "bad_message");
  TrackerClient agent(server.url(), hello_as(Role::kAgent, "a", {"gles:x"}));
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  client.submit(jobs(dense_input(8), 1, 1, "gles:x"));
  bj::object job = expect_message(agent, "job");
  agent.send_text(R"({"type":"result","job":)" + std::to_string(get_u64(job, "job")) +
                  R"(,"result":{"error_no":4,"costs":[-1e999],"all_cost":0,"timestamp":0}})");
  EXPECT_EQ(expect_message(agent, "error")["code"].as_string(), "bad_message");
  // The summary still works and nothing was delivered.
  TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v"));
  EXPECT_EQ(counter(viewer, "jobs_delivered"), 0);
  EXPECT_EQ(viewer.summary()["agents"].to_number<int>(), 1);
}

TEST(TrackerHardening, CloseReasonsAreCutToWhatACloseFrameHolds) {
  EXPECT_EQ(truncate_utf8("short", 123), "short");
  const std::string cut = truncate_utf8(std::string(300, 'x'), kMaxCloseReasonBytes);
  EXPECT_EQ(cut.size(), kMaxCloseReasonBytes);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  // Never splits a UTF-8 sequence; invalid bytes become '?'.
  const std::string euros = truncate_utf8(std::string(60, 'a') + std::string(30, '\0') +
                                              std::string("\xe2\x82\xac") + std::string(60, 'b'),
                                          70);
  EXPECT_LE(euros.size(), 70u);
  EXPECT_EQ(truncate_utf8("a\xff"
                          "b",
                          10),
            "a?b");
  EXPECT_EQ(truncate_utf8("\xe2\x82\xac\xe2\x82\xac", 5), "...");  // no room for 3 + "..."
  EXPECT_EQ(truncate_utf8("\xe2\x82\xac\xe2\x82\xac", 6), "\xe2\x82\xac\xe2\x82\xac");
}

// 2. `webtune tracker --config FILE` segfaulted for every file (a reference into a destroyed
//    temporary), so tokens could only be given as arguments, visible in `ps`.
TEST(TrackerHardening, TheTrackerProgramReadsItsConfigFile) {
  const fs::path dir = temp_dir("config");
  const uint16_t port = testing_support::free_port();
  {
    std::ofstream(dir / "tracker.json")
        << R"({"host":"127.0.0.1","port":)" << port
        << R"(,"tokens":{"agent":"A","client":"C","viewer":"V"},"heartbeat_ms":10000,)"
        << R"("max_attempts":3,"lease_max_ms":120000})";
    std::ofstream(dir / "empty.json") << "{}";
    std::ofstream(dir / "typo.json") << R"({"heartbeat_msec": 5})";
  }
  WebtuneProcess tracker({"tracker", "--config", (dir / "tracker.json").string()},
                         (dir / "tracker.log").string());
  const std::string url = "ws://127.0.0.1:" + std::to_string(port) + "/ws";
  std::unique_ptr<TrackerClient> viewer;
  for (int i = 0; i < 100 && !viewer; ++i) {
    try {
      viewer = std::make_unique<TrackerClient>(url, hello_as(Role::kViewer, "v", {}, {}, "V"));
    } catch (const std::runtime_error&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(viewer) << tracker.log();
  // The file's tokens are in force.
  EXPECT_THROW(TrackerClient(url, hello_as(Role::kClient, "c", {}, {}, "wrong")),
               std::runtime_error);
  TrackerClient client(url, hello_as(Role::kClient, "c", {}, {}, "C"));
  EXPECT_EQ(viewer->summary()["clients"].to_number<int>(), 1);
  tracker.signal(SIGTERM);
  const int status = tracker.wait_for_exit(10s);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << "\n" << tracker.log();
  EXPECT_EQ(WEXITSTATUS(status), 0);

  // An empty file is the defaults; an unknown field is named, not ignored.
  WebtuneProcess empty({"tracker", "--config", (dir / "empty.json").string(), "--listen",
                        "127.0.0.1:" + std::to_string(testing_support::free_port())},
                       (dir / "empty.log").string());
  std::this_thread::sleep_for(500ms);
  empty.signal(SIGTERM);
  const int empty_status = empty.wait_for_exit(10s);
  EXPECT_TRUE(WIFEXITED(empty_status) && WEXITSTATUS(empty_status) == 0) << empty.log();
  WebtuneProcess typo({"tracker", "--config", (dir / "typo.json").string()},
                      (dir / "typo.log").string());
  const int typo_status = typo.wait_for_exit(10s);
  EXPECT_TRUE(WIFEXITED(typo_status) && WEXITSTATUS(typo_status) == 1) << typo.log();
  EXPECT_NE(typo.log().find("unknown field 'heartbeat_msec'"), std::string::npos) << typo.log();
}

// 3. Clients chose leases: `lease_ms: 1` expired on healthy agents three times and quarantined
//    them; `lease_ms: 1e13` overflowed the clock arithmetic (the agent saw a negative lease).
TEST(TrackerHardening, TheTrackerChoosesLeasesWithinItsBounds) {
  TrackerServer server(local_config());
  server.start_background();
  TrackerClient agent(server.url(), hello_as(Role::kAgent, "mute", {"gles:mute"}));
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  const LeasePolicy bounds;
  // The job's own budget (timeout_s = 10) plus the margin, whatever the client asked.
  for (int64_t asked : {int64_t{1}, int64_t{10'000'000'000'000}}) {
    client.submit(jobs(dense_input(8, 1, 10), 1, 1, "gles", asked));
    bj::object job = expect_message(agent, "job");
    const int64_t lease = job["lease_ms"].to_number<int64_t>();
    if (asked == 1) {
      EXPECT_NEAR(lease, 10'000 + bounds.margin_ms, 50);
    } else {
      EXPECT_NEAR(lease, bounds.max_ms, 50);
    }
    agent.send_text(R"({"type":"result","job":)" + std::to_string(get_u64(job, "job")) +
                    R"(,"result":{"error_no":0,"costs":[0.01],"all_cost":0.1,"timestamp":1}})");
    auto result = client.next_result(10s);
    ASSERT_TRUE(result.has_value());
    EXPECT_EQ(result->result.at("error_no").to_number<int>(), 0);
  }
  // No lease expired: a healthy agent is never punished for a client's lease.
  server.inspect([](const TrackerState& s) {
    EXPECT_EQ(s.scheduler().counters().lease_expiries, 0u);
    EXPECT_EQ(s.scheduler().counters().quarantines, 0u);
  });
  EXPECT_EQ(bounds.lease_for(std::nan(""), 0).count(), bounds.max_ms);
  EXPECT_EQ(bounds.lease_for(1e300, 0).count(), bounds.max_ms);
  EXPECT_EQ(bounds.lease_for(0.001, -5).count(), bounds.margin_ms + 1);
  EXPECT_EQ(bounds.lease_for(0, 0).count(), bounds.margin_ms);
}

// 4a. Results were trusted as sent: a rogue agent's costs [1e-12] became a job's best at
//     4.19e9 GFLOP/s, and [], [0], [-1] were stored as NO_ERROR.
TEST(TrackerHardening, ImplausibleResultsAreRefusedAndTheirAgentIsSuspect) {
  // Each refusal costs the job an attempt; leave enough for the honest agent at the end.
  TrackerConfig config = local_config();
  config.scheduler.max_attempts = 20;
  TrackerServer server(config);
  server.start_background();
  const bj::object llvmpipe{{"renderer", "llvmpipe (LLVM 15.0.6, 256 bits)"}, {"cpu_threads", 2}};
  TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v"));
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  const bj::value input = dense_input(64, 2);
  const std::vector<std::string> fakes = {
      R"({"error_no":0,"costs":[1e-12,1e-12],"all_cost":1,"timestamp":1})",  // 524 TFLOP/s
      R"({"error_no":0,"costs":[],"all_cost":1,"timestamp":1})",
      R"({"error_no":0,"costs":[0,0],"all_cost":1,"timestamp":1})",
      R"({"error_no":0,"costs":[-1,-1],"all_cost":1,"timestamp":1})",
      R"({"error_no":0,"costs":[0.001],"all_cost":1,"timestamp":1})",  // repeat is 2
      R"({"error_no":0,"costs":["fast","fast"],"all_cost":1,"timestamp":1})",
      R"({"error_no":42,"costs":[],"all_cost":1,"timestamp":1})",
      R"({"error_no":0,"costs":[0.01,0.01],"all_cost":-5,"timestamp":1})"};
  int refused = 0;
  std::vector<std::unique_ptr<TrackerClient>> reconnected;
  for (size_t i = 0; i < fakes.size(); ++i) {
    // A fresh name each time: a suspect agent takes no job, even after reconnecting.
    TrackerClient rogue(server.url(), hello_as(Role::kAgent, "rogue-" + std::to_string(i),
                                               {"gles:llvmpipe"}, llvmpipe));
    client.submit(jobs(input, 1, 100 + i, "gles:llvmpipe"));
    bj::object job = expect_message(rogue, "job");
    rogue.send_text(R"({"type":"result","job":)" + std::to_string(get_u64(job, "job")) +
                    R"(,"result":)" + fakes[i] + "}");
    bj::object error = expect_message(rogue, "error");
    EXPECT_EQ(error["code"].as_string(), "implausible_result") << fakes[i];
    ++refused;
    // The rogue reconnects under the same name: still no job for it.
    rogue.close();
    reconnected.push_back(std::make_unique<TrackerClient>(
        server.url(),
        hello_as(Role::kAgent, "rogue-" + std::to_string(i), {"gles:llvmpipe"}, llvmpipe)));
    EXPECT_FALSE(reconnected.back()->next_message(300ms).has_value());
  }
  EXPECT_EQ(counter(viewer, "results_implausible"), refused);
  EXPECT_EQ(counter(viewer, "jobs_delivered"), 0);
  // An honest agent measures every one of those jobs; none of the fakes reached the client.
  WebtuneProcess honest({"--log-level", "warn", "agent", "--tracker", server.url(), "--key", "gles",
                         "--name", "honest"});
  std::map<uint64_t, ClientResult> results;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (results.size() < fakes.size() && std::chrono::steady_clock::now() < deadline)
    if (auto r = client.next_result(1s)) results.emplace(r->tag, *r);
  ASSERT_EQ(results.size(), fakes.size());
  int refusals = 0;  // each refusal cost its job one attempt
  for (const auto& [tag, r] : results) refusals += r.attempt - 1;
  EXPECT_EQ(refusals, static_cast<int>(fakes.size()));
  for (const auto& [tag, r] : results) {
    EXPECT_EQ(r.agent, "honest");
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0) << bj::serialize(r.result);
    const double cost = r.result.at("costs").as_array()[0].to_number<double>();
    EXPECT_GT(cost, 1e-6);  // 524 kFLOP on llvmpipe: microseconds at least, never picoseconds
  }
  // The dashboard's agent list says who is suspect.
  int suspects = 0;
  server.inspect([&](const TrackerState& s) {
    for (const bj::value& a : s.agents_json()) suspects += a.at("state").as_string() == "suspect";
  });
  EXPECT_EQ(suspects, static_cast<int>(fakes.size()));
}

TEST(TrackerHardening, DevicePeaksFollowTheDeviceClass) {
  const PlausibilityPolicy policy;
  const DevicePeak gpu = DevicePeak::estimate("gles:nvidia-h200",
                                              bj::object{{"renderer", "NVIDIA H200/PCIe"}}, policy);
  EXPECT_FALSE(gpu.cpu);
  EXPECT_EQ(gpu.gflops, policy.gpu_gflops);
  const DevicePeak cpu = DevicePeak::estimate(
      "webgl2:swiftshader", bj::object{{"renderer", "SwiftShader"}, {"cpu_threads", 4}}, policy);
  EXPECT_TRUE(cpu.cpu);
  EXPECT_EQ(cpu.gflops, 4 * policy.cpu_gflops_per_thread);
  const DevicePeak wasm = DevicePeak::estimate("wasm:threads", bj::object{}, policy);
  EXPECT_TRUE(wasm.cpu);
  EXPECT_EQ(wasm.gflops, policy.cpu_threads_when_unknown * policy.cpu_gflops_per_thread);
  // A real H200 figure passes; a claimed petaflop does not.
  JobFacts dense4096;
  dense4096.flops = 2.0 * 4096 * 4096 * 4096;
  dense4096.bytes = 3.0 * 4096 * 4096 * 4;
  dense4096.repeat = 1;
  EXPECT_TRUE(check_result(bj::parse(R"({"error_no":0,"costs":[0.0045]})"), dense4096, gpu)
                  .refusal.empty());
  EXPECT_FALSE(check_result(bj::parse(R"({"error_no":0,"costs":[0.0001]})"), dense4096, gpu)
                   .refusal.empty());
  // Failures claim no speed: their costs are not judged.
  EXPECT_TRUE(
      check_result(bj::parse(R"({"error_no":7,"costs":[1e9]})"), dense4096, gpu).refusal.empty());
}

// 4b. Origins were not checked: a hello with `Origin: http://evil.example` was welcomed, and the
//     API answered a `Host:` of another site (DNS rebinding).
TEST(TrackerHardening, ForeignOriginsAndHostsAreRefused) {
  TrackerServer server(local_config());
  server.start_background();
  const uint16_t port = server.port();
  const std::string self = "127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(http_status(port, upgrade_request(port, self, "http://evil.example")),
            "HTTP/1.1 403 Forbidden");
  EXPECT_EQ(http_status(port, upgrade_request(port, "evil.example:" + std::to_string(port),
                                              "http://evil.example:" + std::to_string(port))),
            "HTTP/1.1 403 Forbidden");
  EXPECT_EQ(http_status(port, "GET /agent HTTP/1.1\r\nHost: evil.example:" + std::to_string(port) +
                                  "\r\nConnection: close\r\n\r\n"),
            "HTTP/1.1 403 Forbidden");
  // The tracker's own page, and peers without an Origin (native agents, tuners), are served.
  EXPECT_EQ(http_status(port, upgrade_request(port, self, "http://" + self)),
            "HTTP/1.1 101 Switching Protocols");
  EXPECT_EQ(http_status(port, upgrade_request(port, "localhost:" + std::to_string(port), "")),
            "HTTP/1.1 101 Switching Protocols");
  TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v"));
  EXPECT_EQ(counter(viewer, "origins_refused"), 3);

  OriginPolicy wildcard;
  wildcard.listen_host = "0.0.0.0";
  wildcard.port = 9190;
  EXPECT_TRUE(wildcard.host_allowed("farm.example.org:9190"));
  wildcard.allowed_hosts = {"farm.example.org"};
  EXPECT_TRUE(wildcard.host_allowed("FARM.example.org:9190"));
  EXPECT_FALSE(wildcard.host_allowed("evil.example:9190"));
  EXPECT_TRUE(wildcard.origin_allowed("http://farm.example.org:9190", "farm.example.org:9190"));
  EXPECT_FALSE(wildcard.origin_allowed("null", "farm.example.org:9190"));
}

// 4c. Beyond loopback, every role needs a token (or the operator says loudly that it does not).
TEST(TrackerHardening, ListeningBeyondLoopbackNeedsATokenForEveryRole) {
  TrackerConfig config = local_config();
  config.host = "0.0.0.0";
  EXPECT_THROW(config.check_exposure(), std::invalid_argument);
  config.tokens = {"a", "c", ""};
  EXPECT_THROW(config.check_exposure(), std::invalid_argument);
  config.tokens.viewer = "v";
  EXPECT_NO_THROW(config.check_exposure());
  config.tokens = {};
  config.allow_public_without_tokens = true;
  EXPECT_NO_THROW(config.check_exposure());
  config.tls_cert_file = "cert.pem";
  EXPECT_THROW(config.check_exposure(), std::invalid_argument);  // the key is missing
  // Without /ws (webtune serve) nobody can join or submit: the viewer token is enough.
  TrackerConfig serve = local_config();
  serve.host = "0.0.0.0";
  serve.websocket = false;
  try {
    serve.check_exposure();
    ADD_FAILURE() << "a public dashboard without a viewer token was allowed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("without a viewer token"), std::string::npos) << e.what();
  }
  serve.tokens.viewer = "v";
  EXPECT_NO_THROW(serve.check_exposure());
  const fs::path dir = temp_dir("public");
  WebtuneProcess refused({"tracker", "--listen", "0.0.0.0:0"}, (dir / "t.log").string());
  const int status = refused.wait_for_exit(10s);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << refused.log();
  EXPECT_NE(refused.log().find("without a token for every role"), std::string::npos)
      << refused.log();
}

// 5a. No hello deadline: 200 silent connections were held, tokens on.
TEST(TrackerHardening, SilentConnectionsAreClosedAtTheHelloDeadline) {
  TrackerConfig config = local_config();
  config.tokens = {"a", "c", "v"};
  config.hello_timeout = 500ms;
  TrackerServer server(config);
  server.start_background();
  std::vector<std::unique_ptr<TrackerClient>> silent;
  for (int i = 0; i < 50; ++i) silent.push_back(TrackerClient::connect_raw(server.url(), 5s));
  for (auto& peer : silent) {
    EXPECT_TRUE(closed_by_tracker(*peer, 5s));
    EXPECT_EQ(peer->close_code(), 1008);
  }
  TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v", {}, {}, "v"));
  EXPECT_EQ(counter(viewer, "hello_timeouts"), 50);
  EXPECT_EQ(viewer.summary()["open_connections"].to_number<int>(), 1);
}

// 5b. No connection cap.
TEST(TrackerHardening, ConnectionsPastTheCapAreClosedAndTheTrackerRecovers) {
  TrackerConfig config = local_config();
  config.max_connections = 8;
  TrackerServer server(config);
  server.start_background();
  std::vector<std::unique_ptr<TrackerClient>> peers;
  int refused = 0;
  for (int i = 0; i < 12; ++i) {
    try {
      peers.push_back(
          std::make_unique<TrackerClient>(server.url(), hello_as(Role::kViewer, "v"), 2s));
    } catch (const std::runtime_error&) {
      ++refused;
    }
  }
  EXPECT_EQ(peers.size(), 8u);
  EXPECT_EQ(refused, 4);
  peers.clear();
  // Slots come back when connections end.
  std::unique_ptr<TrackerClient> later;
  for (int i = 0; i < 50 && !later; ++i) {
    try {
      later = std::make_unique<TrackerClient>(server.url(), hello_as(Role::kViewer, "v"), 2s);
    } catch (const std::runtime_error&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(later);
  EXPECT_GE(counter(*later, "connections_refused"), 4);
}

// 5c. No cap on queued jobs per client (+143 MB).
TEST(TrackerHardening, APerClientCapRefusesTheWholeSubmit) {
  TrackerConfig config = local_config();
  config.max_jobs_per_client = 10;
  TrackerServer server(config);
  server.start_background();
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v"));
  const bj::value input = dense_input(8);
  EXPECT_EQ(client.submit(jobs(input, 6, 1)).size(), 6u);
  try {
    client.submit(jobs(input, 5, 100));
    ADD_FAILURE() << "an 11th job was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("over_quota"), std::string::npos) << e.what();
  }
  // Nothing of the refused batch is queued; the connection goes on.
  EXPECT_EQ(
      viewer.summary()["keys"].as_object()["gles"].as_object()["jobs_pending"].to_number<int>(), 6);
  EXPECT_EQ(client.submit(jobs(input, 4, 200)).size(), 4u);
  EXPECT_EQ(counter(viewer, "submits_over_quota"), 1);
}

// 5d. When file descriptors ran out, the accept loop spun without back-off and wrote 5.3 M log
//     lines (376 MB) in 25 s.
TEST(TrackerHardening, RunningOutOfFileDescriptorsBacksOffQuietly) {
  const fs::path dir = temp_dir("fds");
  const uint16_t port = testing_support::free_port();
  WebtuneProcess tracker({"tracker", "--listen", "127.0.0.1:" + std::to_string(port)},
                         (dir / "tracker.log").string(), /*max_files=*/32);
  const std::string url = "ws://127.0.0.1:" + std::to_string(port) + "/ws";
  std::vector<std::unique_ptr<TrackerClient>> peers;
  for (int i = 0; i < 200 && peers.empty(); ++i) {
    try {
      peers.push_back(TrackerClient::connect_raw(url, 1s));
    } catch (const std::runtime_error&) {
      std::this_thread::sleep_for(50ms);
    }
  }
  ASSERT_FALSE(peers.empty()) << tracker.log();
  // More connections than the tracker has descriptors for; hold them for 3 s.
  std::vector<int> sockets;
  for (int i = 0; i < 60; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    sockets.push_back(fd);
  }
  std::this_thread::sleep_for(3s);
  for (int fd : sockets) ::close(fd);
  peers.clear();
  // The log stays small, and the tracker serves again once descriptors are free.
  EXPECT_LT(tracker.log().size(), 20'000u) << tracker.log().substr(0, 2000);
  EXPECT_NE(tracker.log().find("accept failed"), std::string::npos) << tracker.log();
  std::unique_ptr<TrackerClient> viewer;
  for (int i = 0; i < 100 && !viewer; ++i) {
    try {
      viewer = std::make_unique<TrackerClient>(url, hello_as(Role::kViewer, "v"), 2s);
    } catch (const std::runtime_error&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(viewer) << tracker.log();
  EXPECT_EQ(viewer->summary()["viewers"].to_number<int>(), 1);
}

// 6. Token hygiene: a failed HTTP request logged its full URL with `?token=...`; the hello
//    token was compared with `!=`.
TEST(TrackerHardening, TokensNeverReachTheLogAndCompareInConstantTime) {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  {
    TrackerConfig config = local_config();
    config.http_handler = [](const HttpRequest&,
                             const TrackerState*) -> std::optional<HttpResponse> {
      throw std::runtime_error("the records file went away");
    };
    TrackerServer server(config);
    server.start_background();
    const uint16_t port = server.port();
    EXPECT_EQ(
        http_status(port, "GET /api/summary?token=SECRET-42&x=1 HTTP/1.1\r\nHost: 127.0.0.1:" +
                              std::to_string(port) + "\r\nConnection: close\r\n\r\n"),
        "HTTP/1.1 500 Internal Server Error");
    server.stop();
  }
  spdlog::set_default_logger(previous);
  EXPECT_NE(captured.str().find("token=***&x=1"), std::string::npos) << captured.str();
  EXPECT_EQ(captured.str().find("SECRET-42"), std::string::npos) << captured.str();
  EXPECT_EQ(redact_secrets("/agent?name=a&token=abc#frag"), "/agent?name=a&token=***#frag");
  EXPECT_EQ(redact_secrets("/x?agent_token=abc"), "/x?agent_token=abc");
  EXPECT_TRUE(token_equals("s3cret", "s3cret"));
  EXPECT_FALSE(token_equals("s3cret", "s3cre"));
  EXPECT_FALSE(token_equals("", "s3cret"));
  EXPECT_FALSE(token_equals(std::string("s3cret\0x", 8), "s3cret"));
}

/// A self-signed certificate for 127.0.0.1 (Debian's openssl command).
void make_certificate(const fs::path& dir) {
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
      "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
      (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// 6b. No TLS: wss:// was refused.
TEST(TrackerHardening, TlsCarriesTheProtocolAndAnAgentsJobs) {
  const fs::path dir = temp_dir("tls");
  make_certificate(dir);
  TrackerConfig config = local_config();
  config.tls_cert_file = (dir / "cert.pem").string();
  config.tls_key_file = (dir / "key.pem").string();
  TrackerServer server(config);
  server.start_background();
  ASSERT_EQ(server.url().rfind("wss://", 0), 0u) << server.url();
  set_tracker_ca_file((dir / "cert.pem").string());
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  WebtuneProcess agent({"--log-level", "warn", "agent", "--tracker", server.url(), "--key", "gles",
                        "--name", "tls-agent", "--ca-file", (dir / "cert.pem").string()});
  client.submit(jobs(dense_input(16), 2, 1));
  std::map<uint64_t, ClientResult> results;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (results.size() < 2 && std::chrono::steady_clock::now() < deadline)
    if (auto r = client.next_result(1s)) results.emplace(r->tag, *r);
  ASSERT_EQ(results.size(), 2u);
  for (const auto& [tag, r] : results) {
    EXPECT_EQ(r.agent, "tls-agent");
    EXPECT_EQ(r.result.at("error_no").to_number<int>(), 0);
  }
  // Plain ws:// to a TLS port fails, and so does a tracker whose certificate is not trusted.
  std::string plain_url = server.url();
  plain_url.replace(0, 3, "ws");
  EXPECT_THROW(TrackerClient(plain_url, hello_as(Role::kViewer, "v"), 3s), std::runtime_error);
  const fs::path other = temp_dir("tls-other");
  make_certificate(other);
  set_tracker_ca_file((other / "cert.pem").string());
  EXPECT_THROW(TrackerClient(server.url(), hello_as(Role::kViewer, "v"), 3s), std::runtime_error);
  set_tracker_ca_file({});
}

// 8. Results from different devices were mixed in one job: a Firefox and a Chromium tab both
//    advertised `wasm:threads`. Keys now name a device class, results say which class measured
//    them, and a tuner refuses a key that matches several classes.
TEST(TrackerHardening, AJobIsMeasuredOnOneDeviceClassOnly) {
  const GlDeviceInfo llvmpipe_info = [] {
    GlDeviceInfo d;
    d.renderer = "llvmpipe (LLVM 15.0.6, 256 bits)";
    d.version = "OpenGL ES 3.2 Mesa 22.3.6";
    return d;
  }();
  HostInfo host;
  host.os = "linux-x86_64";
  host.cpu_model = slug("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz");
  host.cpu_threads = 2;
  EXPECT_EQ(device_class_key("gles", llvmpipe_info, host),
            "gles:llvmpipe:mesa-22.3.6:linux-x86_64:intel-xeon-platinum-8481c:2t");
  GlDeviceInfo h200;
  h200.renderer = "NVIDIA H200/PCIe/SSE2";
  h200.version = "OpenGL ES 3.2 NVIDIA 550.90.07";
  EXPECT_EQ(device_class_key("gles", h200, host), "gles:nvidia-h200:nvidia-550.90.07:linux-x86_64");

  TrackerServer server(local_config());
  server.start_background();
  // A real agent (its class from this machine) and one that claims another CPU.
  WebtuneProcess real({"--log-level", "warn", "agent", "--tracker", server.url(), "--key", "gles",
                       "--name", "real"});
  WebtuneProcess other({"--log-level", "warn", "agent", "--tracker", server.url(), "--key",
                        "gles:llvmpipe:mesa-0.0:linux-x86_64:other-cpu:64t", "--name", "other"});
  TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v"));
  std::string real_key;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    bj::object devices = viewer.summary()["devices"].as_object();
    if (devices.size() == 2) {
      for (const auto& [key, device] : devices)
        if (key.find("other-cpu") == bj::string_view::npos) real_key = std::string(key);
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(real_key.rfind("gles:llvmpipe:", 0), 0u) << real_key;
  EXPECT_EQ(real_key, device_class_key(
                          "gles", GlDeviceInfo::from_json(viewer.summary()["devices"].at(real_key)),
                          HostInfo::current()));
  // A tuner asking for "gles" must choose; one asking for the full key gets only that class.
  TrackerRunner ambiguous(server.url(), "", "gles");
  EXPECT_THROW(ambiguous.wait_for_device(std::chrono::seconds(5)), std::runtime_error);
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  client.submit(jobs(dense_input(16), 12, 1, real_key));
  for (int i = 0; i < 12; ++i) {
    auto r = client.next_result(60s);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->key, real_key);
    EXPECT_EQ(r->agent, "real");
  }
}

// A stalled agent (stopped past its lease, found by bench/chaos) was handed the same job again,
// and its late answer to the first lease was taken as the second attempt's result.
TEST(TrackerHardening, ALateAnswerNeverPassesForTheNextAttempt) {
  TrackerConfig config = local_config();
  config.leases.min_ms = 300;
  config.leases.max_ms = 600;
  TrackerServer server(config);
  server.start_background();
  TrackerClient agent(server.url(), hello_as(Role::kAgent, "stalls", {"gles:x"}));
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  client.submit(jobs(dense_input(8), 1, 1, "gles:x"));
  bj::object first = expect_message(agent, "job");
  EXPECT_EQ(first["attempt"].to_number<int>(), 1);
  const std::string job = std::to_string(get_u64(first, "job"));
  // Stalled past the lease: the job is re-queued, but not handed back to the silent agent.
  std::this_thread::sleep_for(1000ms);
  int leased = -1;
  server.inspect(
      [&](const TrackerState& s) { leased = static_cast<int>(s.scheduler().leased_jobs()); });
  EXPECT_EQ(leased, 0);
  // Its connection shows a sign of life (as a native agent's does while its worker thread is
  // stuck in a kernel): it gets the job again as attempt 2. Then the answer to the first lease
  // arrives: refused as stale; the second attempt's answer is the one delivered.
  agent.send_text(R"({"type":"ping","t":1})");
  bj::object second = expect_message(agent, "job");
  EXPECT_EQ(second["attempt"].to_number<int>(), 2);
  agent.send_text(
      R"({"type":"result","job":)" + job +
      R"(,"attempt":1,"result":{"error_no":0,"costs":[0.5],"all_cost":1,"timestamp":1}})");
  EXPECT_EQ(expect_message(agent, "error")["code"].as_string(), "unknown_job");
  agent.send_text(
      R"({"type":"result","job":)" + job +
      R"(,"attempt":2,"result":{"error_no":0,"costs":[0.001],"all_cost":0.1,"timestamp":2}})");
  auto r = client.next_result(5s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->attempt, 2);
  EXPECT_EQ(r->result.at("costs").as_array()[0].to_number<double>(), 0.001);
  TrackerClient viewer(server.url(), hello_as(Role::kViewer, "v"));
  EXPECT_EQ(counter(viewer, "results_stale"), 1);
}

}  // namespace
}  // namespace webtune::tracker
