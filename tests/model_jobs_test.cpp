/// \file model_jobs_test.cpp
/// A whole compiled model as a farm job (issue 16 item 3, MODEL_JOBS.md): a real tracker on
/// loopback with fake agents and clients over real WebSockets, and fake packages on disk
/// (tests/support/model_packages.hpp). Checks who gets model jobs, which submits are refused and
/// why, and that results are judged and delivered as kernel results are.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <thread>

#include "support/measure_inputs.hpp"
#include "support/model_packages.hpp"
#include "tracker/model_job.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"

namespace webtune::tracker {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("webtune_model_jobs_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TrackerConfig config_with_models(const fs::path& models) {
  TrackerConfig c;
  c.port = 0;
  c.models_root = models.string();
  return c;
}

Hello hello_as(Role role, std::string name, std::vector<std::string> keys = {},
               std::vector<std::string> job_kinds = {"kernel"}) {
  Hello h;
  h.role = role;
  h.name = std::move(name);
  h.keys = std::move(keys);
  h.job_kinds = std::move(job_kinds);
  return h;
}

/// The model measure input of package `name` whose manifest is `manifest_text`.
ModelMeasureInput model_input(const std::string& name, const std::string& manifest_text,
                              int repeat = 3) {
  ModelMeasureInput m;
  m.model = name;
  m.manifest_sha256 = sha256_hex(manifest_text);
  m.seed = 7;
  m.samples = {{0, 0.5, 0.01}, {9, -1.25, 0.01}};
  m.options.repeat = repeat;
  m.options.timeout_s = 30;
  m.warmup = 2;
  return m;
}

SubmitItem item(uint64_t tag, const std::string& key, const bj::value& input) {
  SubmitItem i;
  i.tag = tag;
  i.key = key;
  i.input = input;
  return i;
}

/// Waits for the next frame of `type`, skipping others; nullopt on timeout.
std::optional<bj::object> next_of(TrackerClient& peer, const std::string& type,
                                  std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto m = peer.next_message(100ms);
    if (m && message_type(*m) == type) return m;
  }
  return std::nullopt;
}

std::string result_frame(uint64_t job, int attempt, const bj::array& costs) {
  return bj::serialize(bj::object{{"type", "result"},
                                  {"job", job},
                                  {"attempt", attempt},
                                  {"result", bj::object{{"error_no", 0},
                                                        {"message", ""},
                                                        {"costs", costs},
                                                        {"all_cost", 1.5},
                                                        {"timestamp", 1.7e9}}}});
}

/// What submitting `input` under `key` answers: "" when accepted, else the error's text.
std::string submit_error(TrackerClient& client, const std::string& key, const bj::value& input) {
  try {
    client.submit({item(1, key, input)});
    return "";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

TEST(ModelJobs, HelloJobKindsAreBoundedAndDefaultToKernel) {
  // Absent: kernels only.
  Hello old = Hello::from_json(
      parse_message(R"({"type":"hello","protocol":1,"role":"agent","keys":["webgl2:x"]})"));
  EXPECT_EQ(old.job_kinds, std::vector<std::string>{"kernel"});
  EXPECT_FALSE(old.takes("model"));
  Hello both = Hello::from_json(
      parse_message(R"({"type":"hello","protocol":1,"role":"agent","keys":["webgl2:x"],)"
                    R"("job_kinds":["kernel","model","model","future-kind"]})"));
  EXPECT_EQ(both.job_kinds, (std::vector<std::string>{"kernel", "model", "future-kind"}));
  EXPECT_TRUE(both.takes("model"));
  // Round trip through to_json.
  EXPECT_EQ(Hello::from_json(both.to_json()).job_kinds, both.job_kinds);
  const std::string start = R"({"type":"hello","protocol":1,"role":"agent","keys":["k"],)";
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {R"("job_kinds":"model"})", "must be an array"},
           {R"("job_kinds":["a","b","c","d","e","f","g","h","i"]})", "at most 8 job kinds"},
           {R"("job_kinds":["Model"]})", "outside [a-z0-9_-]"},
           {R"("job_kinds":[""]})", "1 to 32 characters"},
           {R"("job_kinds":[")" + std::string(33, 'm') + "\"]}", "1 to 32 characters"},
           {R"("job_kinds":["future"]})", "no kind this tracker knows"}}) {
    try {
      Hello::from_json(parse_message(start + bad));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ProtocolError& e) {
      EXPECT_EQ(e.code(), "handshake") << bad;
      EXPECT_THAT(e.what(), HasSubstr(why)) << bad;
    }
  }
}

TEST(ModelJobs, AModelJobGoesOnlyToAnAgentThatDeclaredModelAndHoldsUpNoKernelJob) {
  const fs::path models = temp_dir("dispatch");
  const auto package = testing_support::make_model_package(models, "net-a", "webgl2");
  TrackerServer server(config_with_models(models));
  server.start_background();
  // An old agent: its hello has no job_kinds at all.
  auto old_agent = TrackerClient::connect_raw(server.url(), 5s);
  old_agent->send_text(
      R"({"type":"hello","protocol":1,"role":"agent","name":"old","keys":["webgl2:gpu-a"]})");
  ASSERT_TRUE(next_of(*old_agent, "welcome", 5s).has_value());
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  // Model jobs first (more than the scheduler's scan depth), a kernel job behind them.
  std::vector<SubmitItem> items;
  for (int i = 0; i < Scheduler::kDispatchScan + 8; ++i)
    items.push_back(item(100 + i, "webgl2", model_input("net-a", package.manifest_text).to_json()));
  items.push_back(item(2, "webgl2", testing_support::dense_input(8)));
  client.submit(items);
  auto job = next_of(*old_agent, "job", 5s);
  ASSERT_TRUE(job.has_value());
  EXPECT_FALSE(job->at("input").as_object().contains("kind")) << "the kernel job, not the model";
  // Nothing else goes to the old agent, even once it is idle again.
  old_agent->send_text(result_frame(get_u64(*job, "job"), 1, bj::array{0.01}));
  EXPECT_FALSE(next_of(*old_agent, "job", 700ms).has_value());
  // An agent that runs models takes the model job, unchanged.
  TrackerClient modern(server.url(),
                       hello_as(Role::kAgent, "modern", {"webgl2:gpu-a"}, {"kernel", "model"}));
  auto model_job = next_of(modern, "job", 5s);
  ASSERT_TRUE(model_job.has_value());
  const bj::object& input = model_job->at("input").as_object();
  EXPECT_EQ(input.at("kind").as_string(), "model");
  EXPECT_EQ(input.at("model").as_string(), "net-a");
  EXPECT_EQ(input.at("manifest_sha256").as_string(), sha256_hex(package.manifest_text));
  EXPECT_EQ(input.at("options").as_object().at("warmup").to_number<int>(), 2);
  // Its lease is the job's own budget (30 s) plus the 30 s margin.
  EXPECT_EQ(model_job->at("lease_ms").to_number<int64_t>(), 60000);
  // The agent list shows what each agent runs.
  server.inspect([&](const TrackerState& state) {
    for (const bj::value& a : state.agents_json()) {
      const bj::object& o = a.as_object();
      const size_t kinds = o.at("job_kinds").as_array().size();
      EXPECT_EQ(kinds, o.at("name").as_string() == "modern" ? 2u : 1u) << bj::serialize(o);
    }
  });
}

TEST(ModelJobs, BadModelSubmitsAreRefusedSayingWhy) {
  const fs::path models = temp_dir("refusals");
  const auto web = testing_support::make_model_package(models, "net-web", "webgl2");
  const auto native = testing_support::make_model_package(models, "net-gles", "gles-compute");
  TrackerServer server(config_with_models(models));
  server.start_background();
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));

  ModelMeasureInput wrong_hash = model_input("net-web", web.manifest_text);
  wrong_hash.manifest_sha256 = sha256_hex("another manifest");
  EXPECT_THAT(submit_error(client, "webgl2", wrong_hash.to_json()),
              HasSubstr("bad_message: batch[0]: model job refused: package 'net-web' changed: "
                        "manifest sha256 " +
                        sha256_hex(web.manifest_text) + " != " + wrong_hash.manifest_sha256));
  EXPECT_THAT(submit_error(client, "webgl2", model_input("net-nope", web.manifest_text).to_json()),
              HasSubstr("no package 'net-nope' under the models folder"));
  EXPECT_THAT(
      submit_error(client, "gles:llvmpipe", model_input("net-web", web.manifest_text).to_json()),
      HasSubstr("is for target webgl2, which agents of key family 'webgl2' run, not "
                "'gles'"));
  EXPECT_THAT(
      submit_error(client, "webgl2", model_input("net-gles", native.manifest_text).to_json()),
      HasSubstr("is for target gles-compute, which agents of key family 'gles' run"));
  bj::object climb = model_input("net-web", web.manifest_text).to_json();
  climb["model"] = "../net-web";
  EXPECT_THAT(submit_error(client, "webgl2", climb), HasSubstr("'model' must be 1 to 100"));
  ModelMeasureInput outside = model_input("net-web", web.manifest_text);
  outside.samples.push_back({10, 0, 0.1});  // the output has 10 elements
  EXPECT_THAT(submit_error(client, "webgl2", outside.to_json()),
              HasSubstr("sample index 10 is outside the model's output of 10 elements"));
  bj::object warm = model_input("net-web", web.manifest_text).to_json();
  warm["options"].as_object()["warmup"] = 101;
  EXPECT_THAT(submit_error(client, "webgl2", warm), HasSubstr("warmup = 101 must be in [0, 100]"));
  bj::object odd_kind = model_input("net-web", web.manifest_text).to_json();
  odd_kind["kind"] = "graph";
  EXPECT_THAT(submit_error(client, "webgl2", odd_kind),
              HasSubstr("'kind' must be \"kernel\" or \"model\""));
  // The right package, hash and family passes (gles-compute under any gles key too).
  EXPECT_EQ(submit_error(client, "webgl2", model_input("net-web", web.manifest_text).to_json()),
            "");
  EXPECT_EQ(submit_error(client, "gles:nvidia-h100",
                         model_input("net-gles", native.manifest_text).to_json()),
            "");

  // A tracker without --models refuses every model job.
  TrackerConfig bare;
  bare.port = 0;
  TrackerServer no_models(bare);
  no_models.start_background();
  TrackerClient other(no_models.url(), hello_as(Role::kClient, "c"));
  EXPECT_THAT(submit_error(other, "webgl2", model_input("net-web", web.manifest_text).to_json()),
              HasSubstr("bad_message: batch[0]: model job refused: this tracker serves no models "
                        "(start it with --models DIR)"));
}

TEST(ModelJobs, APackageIsReadOnceUntilItChanges) {
  const fs::path models = temp_dir("cache");
  const auto first = testing_support::make_model_package(models, "net-c", "webgl2");
  TrackerServer server(config_with_models(models));
  server.start_background();
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  const bj::object input = model_input("net-c", first.manifest_text).to_json();
  client.submit({item(1, "webgl2", input), item(2, "webgl2", input), item(3, "webgl2", input)});
  size_t reads = 0;
  server.inspect([&](const TrackerState& state) { reads = state.model_packages().reads(); });
  EXPECT_EQ(reads, 1u);
  // Rebuilt (another estimate, a larger weights.bin): read again, and the old hash is refused.
  std::this_thread::sleep_for(20ms);
  const auto second =
      testing_support::make_model_package(models, "net-c", "webgl2", 256, 2, 2.5, 12, 10, 8192);
  ASSERT_NE(second.manifest_text, first.manifest_text);
  EXPECT_THAT(submit_error(client, "webgl2", input), HasSubstr("package 'net-c' changed"));
  EXPECT_EQ(submit_error(client, "webgl2", model_input("net-c", second.manifest_text).to_json()),
            "");
  server.inspect([&](const TrackerState& state) { reads = state.model_packages().reads(); });
  EXPECT_EQ(reads, 2u);
}

TEST(ModelJobs, AnImplausiblyFastModelResultIsRefusedAndAPlausibleOneArrivesOnce) {
  const fs::path models = temp_dir("plausibility");
  // dense 1024³ run by 2 nodes: 4.3 GFLOP per inference.
  const auto package = testing_support::make_model_package(models, "net-big", "webgpu", 1024, 2);
  const ModelPackageFacts facts = read_model_package(package.dir.string());
  EXPECT_DOUBLE_EQ(facts.flops, 2 * 2.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(facts.bytes, 4096 + 4.0 * (12 + 10));
  TrackerServer server(config_with_models(models));
  server.start_background();
  TrackerClient liar(server.url(), hello_as(Role::kAgent, "liar", {"webgpu:gpu"}, {"model"}));
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  client.submit({item(5, "webgpu", model_input("net-big", package.manifest_text, 2).to_json())});
  auto job = next_of(liar, "job", 5s);
  ASSERT_TRUE(job.has_value());
  const uint64_t id = get_u64(*job, "job");
  // 1 µs per inference would be 4300 TFLOP/s, beyond any GPU's 250 TFLOP/s bound.
  liar.send_text(result_frame(id, 1, bj::array{1e-6, 2e-6}));
  auto refused = next_of(liar, "error", 5s);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->at("code").as_string(), "implausible_result");
  EXPECT_THAT(std::string(refused->at("message").as_string()), HasSubstr("GFLOP/s"));
  // An agent that runs models takes the re-queued job and answers plausibly (12 ms).
  TrackerClient honest(server.url(),
                       hello_as(Role::kAgent, "honest", {"webgpu:gpu"}, {"kernel", "model"}));
  auto again = next_of(honest, "job", 5s);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(get_u64(*again, "job"), id);
  EXPECT_EQ(again->at("attempt").to_number<int>(), 2);
  honest.send_text(result_frame(id, 2, bj::array{0.012, 0.013}));
  auto result = client.next_result(5s);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->tag, 5u);
  EXPECT_EQ(result->agent, "honest");
  EXPECT_EQ(result->key, "webgpu:gpu");
  EXPECT_EQ(result->attempt, 2);
  EXPECT_EQ(result->result.at("error_no").to_number<int>(), 0);
  EXPECT_DOUBLE_EQ(result->result.at("costs").as_array().at(1).to_number<double>(), 0.013);
  EXPECT_FALSE(client.next_result(500ms).has_value()) << "delivered twice";
}

TEST(ModelJobs, AModelResultWithTheWrongNumberOfCostsIsRefused) {
  const fs::path models = temp_dir("repeat");
  const auto package = testing_support::make_model_package(models, "net-r", "wasm");
  TrackerServer server(config_with_models(models));
  server.start_background();
  TrackerClient agent(server.url(),
                      hello_as(Role::kAgent, "a", {"wasm:threads:chrome-1:linux:4t"}, {"model"}));
  TrackerClient client(server.url(), hello_as(Role::kClient, "c"));
  client.submit({item(1, "wasm", model_input("net-r", package.manifest_text, 3).to_json())});
  auto job = next_of(agent, "job", 5s);
  ASSERT_TRUE(job.has_value());
  agent.send_text(result_frame(get_u64(*job, "job"), 1, bj::array{0.5}));
  auto refused = next_of(agent, "error", 5s);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->at("code").as_string(), "implausible_result");
  EXPECT_THAT(std::string(refused->at("message").as_string()), HasSubstr("must carry 3 cost(s)"));
  EXPECT_FALSE(client.next_result(300ms).has_value());
}

TEST(ModelJobs, TheModelMeasureInputRoundTripsAndTheKindIsRecognised) {
  ModelMeasureInput m;
  m.model = "resnet18-webgl2";
  m.manifest_sha256 = std::string(64, 'f');
  m.seed = 123;
  m.samples = {{57, 3.14, 0.004}};
  m.options.number = 2;
  m.options.repeat = 20;
  m.options.timeout_s = 120;
  m.warmup = 0;
  const bj::object json = m.to_json();
  EXPECT_TRUE(is_model_input(json));
  EXPECT_FALSE(is_model_input(testing_support::dense_input(8)));
  const ModelMeasureInput back = ModelMeasureInput::from_json(json);
  EXPECT_EQ(back.model, m.model);
  EXPECT_EQ(back.seed, 123u);
  ASSERT_EQ(back.samples.size(), 1u);
  EXPECT_EQ(back.samples[0].index, 57);
  EXPECT_DOUBLE_EQ(back.samples[0].tolerance, 0.004);
  EXPECT_EQ(back.options.number, 2);
  EXPECT_EQ(back.options.repeat, 20);
  EXPECT_EQ(back.warmup, 0);
  // A default warm-up when options say none.
  bj::object no_warmup = json;
  no_warmup["options"].as_object().erase("warmup");
  EXPECT_EQ(ModelMeasureInput::from_json(no_warmup).warmup, 3);
  bj::object upper = json;
  upper["manifest_sha256"] = std::string(64, 'F');
  EXPECT_THROW(ModelMeasureInput::from_json(upper), std::invalid_argument);
  EXPECT_EQ(key_family_for_target("gles-frag"), "gles");
  EXPECT_EQ(key_family("webgl2:swiftshader:chromium-1"), "webgl2");
  EXPECT_THROW(key_family_for_target("cuda"), std::invalid_argument);
  // SHA-256 of "abc" (FIPS 180-2's example).
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace webtune::tracker
