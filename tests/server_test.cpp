/// \file server_test.cpp
/// The HTTP side (server/): the API on a real test database (lists, paging, bad parameters,
/// unknown paths), /api/workloads (best per device, speedup over the default config), the
/// downloads (AutoTVM, CSV, the best kernel's artifact), the trial feed of /api/events and its
/// server-sent events through a real port, /metrics from a live tracker state, the static root's
/// refusals (traversal, encoded traversal, symlinks out), the viewer token, and the same answers
/// through a real tracker port on loopback, in tracker mode and in records-only mode.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <poll.h>

#include "codegen/task.hpp"
#include "server/api_router.hpp"
#include "server/dashboard_handler.hpp"
#include "server/downloads.hpp"
#include "server/event_feed.hpp"
#include "server/metrics.hpp"
#include "server/static_files.hpp"
#include "server/url.hpp"
#include "server/viewer_access.hpp"
#include "support/raw_http.hpp"
#include "tracker/protocol.hpp"
#include "tracker/tracker_server.hpp"
#include "tracker/tracker_state.hpp"
#include "tuner/records.hpp"

namespace webtune::server {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using tracker::HttpRequest;
using tracker::HttpResponse;

fs::path temp_dir(const std::string& name) {
  fs::path dir =
      fs::path(::testing::TempDir()) / ("webtune_server_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string entity_json(int64_t index) {
  bj::array entity{bj::array{"tile_y", "sp", bj::array{16, index + 1}},
                   bj::array{"unroll", "ot", 4}};
  return bj::serialize(bj::object{{"index", index}, {"entity", std::move(entity)}});
}

TrialRecord trial(int64_t index, double cost_s, std::string agent = "agent-a") {
  TrialRecord t;
  t.config_index = index;
  t.config_json = entity_json(index);
  t.result.costs = {cost_s};
  t.result.all_cost = 0.1;
  t.result.timestamp = 1700000000.0 + static_cast<double>(index);
  t.agent = std::move(agent);
  return t;
}

TrialRecord failed(int64_t index, MeasureErrorNo error) {
  TrialRecord t = trial(index, 0);
  t.result = MeasureResult::failure(error, "it broke");
  return t;
}

/// Job 1: dense 64 on gles-frag with 10 trials (2 errors); job 2: conv on gles-compute, 1 trial.
/// Model run 1 ("tiny"): job 1 with weight 2 and three estimates.
std::string make_db(const fs::path& dir) {
  const std::string path = (dir / "records.db").string();
  RecordStore store(path);
  store.upsert_device("gles:llvmpipe", R"({"renderer":"llvmpipe"})");
  const int64_t dense = store.open_job(Workload::dense(64, 64, 64, "D64"), Target::kGlesFrag,
                                       "gles:llvmpipe", "D64", "random");
  std::vector<TrialRecord> trials;
  for (int64_t i = 0; i < 10; ++i) {
    if (i == 3)
      trials.push_back(failed(i, MeasureErrorNo::kWrongAnswer));
    else if (i == 7)
      trials.push_back(failed(i, MeasureErrorNo::kCompileDevice));
    else
      trials.push_back(trial(i, i == 5 ? 1e-5 : 1e-3 + 1e-4 * static_cast<double>(i)));
  }
  store.add_trials(dense, trials);
  store.set_status(dense, "done");
  const int64_t conv = store.open_job(Workload::conv2d(1, 4, 8, 8, 8, 3, 1, 1, "C8"),
                                      Target::kGlesCompute, "gles:llvmpipe", "C8", "xgb");
  store.add_trials(conv, {trial(0, 2e-4, "agent-b")});
  const int64_t run =
      store.open_model_run("tiny", Target::kGlesFrag, "gles:llvmpipe", "gradient", 48);
  store.add_model_run_job(run, dense, 2);
  store.add_model_estimate(run, {16, 1.0, 0.25, 1700000100});
  store.add_model_estimate(run, {32, 2.0, 0.125, 1700000200});
  store.add_model_estimate(run, {48, 3.0, 0.02, 1700000300});
  return path;
}

class Api : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(temp_dir("api"));
    db_ = new std::string(make_db(*dir_));
  }
  static void TearDownTestSuite() {
    delete db_;
    delete dir_;
  }
  void SetUp() override {
    store_ = std::make_unique<RecordStore>(*db_);
    router_ = std::make_unique<ApiRouter>(store_.get());
  }
  HttpResponse get(const std::string& target, const tracker::TrackerState* live = nullptr) {
    auto t = parse_target(target);
    EXPECT_TRUE(t) << target;
    return router_->route("GET", *t, live);
  }
  bj::object get_json(const std::string& target, int status = 200) {
    HttpResponse r = get(target);
    EXPECT_EQ(r.status, status) << target << ": " << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    return bj::parse(r.body).as_object();
  }

  static fs::path* dir_;
  static std::string* db_;
  std::unique_ptr<RecordStore> store_;
  std::unique_ptr<ApiRouter> router_;
};
fs::path* Api::dir_ = nullptr;
std::string* Api::db_ = nullptr;

TEST_F(Api, JobsListsEveryTuningJobWithCounts) {
  bj::object o = get_json("/api/jobs");
  const bj::array& jobs = o.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 2u);
  const bj::object& j = jobs[0].as_object();
  EXPECT_EQ(j.at("id").as_int64(), 1);
  EXPECT_EQ(j.at("task").as_string(), "D64");
  EXPECT_EQ(j.at("workload").at("key").as_string(), "dense_64_64_64");
  EXPECT_EQ(j.at("target").as_string(), "gles-frag");
  EXPECT_EQ(j.at("device_key").as_string(), "gles:llvmpipe");
  EXPECT_EQ(j.at("status").as_string(), "done");
  EXPECT_EQ(j.at("trials").as_int64(), 10);
  EXPECT_EQ(j.at("errors").as_int64(), 2);
  // 2*64^3 FLOP in 1e-5 s.
  EXPECT_NEAR(j.at("best_gflops").as_double(), 2.0 * 64 * 64 * 64 / 1e-5 / 1e9, 1e-6);
  EXPECT_EQ(jobs[1].at("status").as_string(), "running");
  EXPECT_EQ(get_json("/api/jobs/").at("jobs").as_array().size(), 2u);
}

TEST_F(Api, JobHasErrorsByErrorNumberAndTheBestConfigEntity) {
  bj::object j = get_json("/api/jobs/1");
  EXPECT_EQ(j.at("trials").as_int64(), 10);
  const bj::array& errors = j.at("errors_by_error_no").as_array();
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].at("error").as_string(), "NO_ERROR");
  EXPECT_EQ(errors[0].at("count").as_int64(), 8);
  EXPECT_EQ(errors[1].at("error_no").as_int64(), 3);
  EXPECT_EQ(errors[1].at("error").as_string(), "COMPILE_DEVICE");
  EXPECT_EQ(errors[2].at("error_no").as_int64(), 5);
  EXPECT_EQ(errors[2].at("count").as_int64(), 1);
  const bj::object& best = j.at("best").as_object();
  EXPECT_EQ(best.at("config_index").as_int64(), 5);
  EXPECT_EQ(best.at("number").as_int64(), 6);
  EXPECT_EQ(best.at("agent").as_string(), "agent-a");
  EXPECT_EQ(best.at("config").at("entity").as_array().size(), 2u);
  EXPECT_EQ(best.at("config").at("index").as_int64(), 5);
}

TEST_F(Api, ModelRunsListTheirJobsAndRecordedEstimates) {
  const bj::object list = get_json("/api/models");
  const bj::array& models = list.at("models").as_array();
  ASSERT_EQ(models.size(), 1u);
  const bj::object& run = models[0].as_object();
  EXPECT_EQ(run.at("id").as_int64(), 1);
  EXPECT_EQ(run.at("model").as_string(), "tiny");
  EXPECT_EQ(run.at("target").as_string(), "gles-frag");
  EXPECT_EQ(run.at("device_key").as_string(), "gles:llvmpipe");
  EXPECT_EQ(run.at("schedule").as_string(), "gradient");
  EXPECT_EQ(run.at("total_trials").as_int64(), 48);
  EXPECT_EQ(run.at("estimates").as_int64(), 3);
  EXPECT_DOUBLE_EQ(run.at("latest").at("latency_ms").as_double(), 0.02);
  const bj::array& jobs = run.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].at("job").as_int64(), 1);
  EXPECT_EQ(jobs[0].at("task").as_string(), "D64");
  EXPECT_EQ(jobs[0].at("weight").as_int64(), 2);
  EXPECT_EQ(get_json("/api/models/1"), run);

  const bj::object e = get_json("/api/models/1/estimates");
  EXPECT_EQ(e.at("run").as_int64(), 1);
  const bj::array& estimates = e.at("estimates").as_array();
  ASSERT_EQ(estimates.size(), 3u);
  const int64_t trials[] = {16, 32, 48};
  const double latency[] = {0.25, 0.125, 0.02};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(estimates[i].at("trials").as_int64(), trials[i]);
    EXPECT_DOUBLE_EQ(estimates[i].at("latency_ms").as_double(), latency[i]);
    EXPECT_DOUBLE_EQ(estimates[i].at("elapsed_s").as_double(), 1.0 + static_cast<double>(i));
    EXPECT_DOUBLE_EQ(estimates[i].at("timestamp").as_double(), 1700000100.0 + 100.0 * i);
  }
  // Each job says which model runs it belongs to, for the page.
  EXPECT_EQ(get_json("/api/jobs/1").at("model_runs"), (bj::array{1}));
  EXPECT_EQ(get_json("/api/jobs/2").at("model_runs"), bj::array());

  EXPECT_NE(get_json("/api/models/2", 404).at("error").as_string().find("no model run 2"),
            bj::string::npos);
  get_json("/api/models/2/estimates", 404);
  get_json("/api/models/1/trials", 404);
  EXPECT_NE(get_json("/api/models/one", 400).at("error").as_string().find("model run id"),
            bj::string::npos);
}

TEST_F(Api, TrialsArePagedInTrialNumberOrder) {
  bj::object page = get_json("/api/jobs/1/trials?limit=3&offset=2");
  EXPECT_EQ(page.at("total").as_int64(), 10);
  EXPECT_EQ(page.at("offset").as_int64(), 2);
  EXPECT_EQ(page.at("limit").as_int64(), 3);
  const bj::array& trials = page.at("trials").as_array();
  ASSERT_EQ(trials.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(trials[i].at("number").as_int64(), 3 + i);
    EXPECT_EQ(trials[i].at("config_index").as_int64(), 2 + i);
  }
  EXPECT_EQ(trials[1].at("error").as_string(), "WRONG_ANSWER");
  EXPECT_EQ(trials[1].at("gflops").as_double(), 0.0);
  EXPECT_TRUE(trials[1].at("mean_cost").is_null());
  EXPECT_EQ(trials[1].at("message").as_string(), "it broke");
  EXPECT_GT(trials[0].at("gflops").as_double(), 0.0);

  // The default page, the tail and past the end.
  EXPECT_EQ(get_json("/api/jobs/1/trials").at("trials").as_array().size(), 10u);
  EXPECT_EQ(get_json("/api/jobs/1/trials?offset=8&limit=5").at("trials").as_array().size(), 2u);
  EXPECT_EQ(get_json("/api/jobs/1/trials?offset=50").at("trials").as_array().size(), 0u);
  EXPECT_EQ(get_json("/api/jobs/1/trials?limit=0").at("trials").as_array().size(), 0u);
  // Unknown parameters (a viewer token) are ignored.
  EXPECT_EQ(get_json("/api/jobs/2/trials?token=x").at("trials").as_array().size(), 1u);
}

TEST_F(Api, BadParametersAre400WithAJsonError) {
  for (const char* target :
       {"/api/jobs/1/trials?limit=abc", "/api/jobs/1/trials?limit=-1",
        "/api/jobs/1/trials?limit=5001", "/api/jobs/1/trials?offset=2x",
        "/api/jobs/1/trials?offset=", "/api/jobs/1/trials?limit=99999999999999999999",
        "/api/jobs/abc", "/api/jobs/-1", "/api/jobs/1.5/trials", "/api/best?target=cuda"}) {
    bj::object o = get_json(target, 400);
    EXPECT_FALSE(o.at("error").as_string().empty()) << target;
  }
  EXPECT_NE(get_json("/api/jobs/1/trials?limit=abc", 400).at("error").as_string().find("limit"),
            bj::string::npos);
}

TEST_F(Api, UnknownPathsAndJobsAre404AndOnlyGetIsServed) {
  for (const char* target : {"/api/nope", "/api/jobs/99", "/api/jobs/99/trials",
                             "/api/jobs/1/bogus", "/api", "/api/jobs/1/trials/x"})
    EXPECT_TRUE(get_json(target, 404).contains("error")) << target;
  HttpResponse r = router_->route("POST", *parse_target("/api/jobs"), nullptr);
  EXPECT_EQ(r.status, 405);
}

TEST_F(Api, BestFiltersByWorkloadAndTarget) {
  EXPECT_EQ(get_json("/api/best").at("best").as_array().size(), 2u);
  bj::object o = get_json("/api/best?workload=D64&target=gles-frag");
  ASSERT_EQ(o.at("best").as_array().size(), 1u);
  EXPECT_EQ(o.at("best").at(0).at("job").at("id").as_int64(), 1);
  EXPECT_EQ(o.at("best").at(0).at("trial").at("config_index").as_int64(), 5);
  EXPECT_EQ(get_json("/api/best?target=gles-compute").at("best").as_array().size(), 1u);
  EXPECT_EQ(get_json("/api/best?workload=nothing").at("best").as_array().size(), 0u);
}

TEST_F(Api, SummaryAndAgentsWithoutATrackerComeFromTheRecords) {
  bj::object s = get_json("/api/summary");
  EXPECT_FALSE(s.at("live").as_bool());
  EXPECT_TRUE(s.at("tracker").is_null());
  EXPECT_EQ(s.at("records").at("jobs").as_int64(), 2);
  EXPECT_EQ(s.at("records").at("jobs_running").as_int64(), 1);
  EXPECT_EQ(s.at("records").at("trials").as_int64(), 11);
  EXPECT_EQ(s.at("records").at("errors").as_int64(), 2);
  bj::object a = get_json("/api/agents");
  EXPECT_TRUE(a.at("online").as_array().empty());
  const bj::array& recorded = a.at("recorded").as_array();
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0].at("name").as_string(), "agent-a");
  EXPECT_EQ(recorded[0].at("trials").as_int64(), 10);
  EXPECT_EQ(recorded[0].at("errors").as_int64(), 2);
  EXPECT_EQ(recorded[0].at("device").at("renderer").as_string(), "llvmpipe");
  EXPECT_EQ(recorded[1].at("name").as_string(), "agent-b");
}

/// A connection that records nothing: the state only needs somewhere to send.
struct NullPeer : tracker::PeerConnection {
  void send(std::shared_ptr<const std::string>) override {}
  void close(int, const std::string&) override {}
};

/// A tracker state with one greeted agent of key "gles:test" and one open, ungreeted connection.
std::unique_ptr<tracker::TrackerState> live_state() {
  auto state = std::make_unique<tracker::TrackerState>(tracker::TrackerPolicy{});
  const uint64_t agent = state->on_open(std::make_shared<NullPeer>());
  tracker::Hello hello;
  hello.role = tracker::Role::kAgent;
  hello.name = "phone-1";
  hello.keys = {"gles:test"};
  hello.device = bj::object{{"renderer", "Test GPU"}};
  state->on_message(agent, bj::serialize(hello.to_json()), tracker::Clock::now());
  state->on_open(std::make_shared<NullPeer>());
  return state;
}

TEST_F(Api, LiveAgentsAndQueuesComeFromTheTracker) {
  auto state = live_state();
  bj::object a = bj::parse(get("/api/agents", state.get()).body).as_object();
  EXPECT_TRUE(a.at("live").as_bool());
  const bj::array& online = a.at("online").as_array();
  ASSERT_EQ(online.size(), 1u);
  EXPECT_EQ(online[0].at("name").as_string(), "phone-1");
  EXPECT_EQ(online[0].at("keys").at(0).as_string(), "gles:test");
  EXPECT_EQ(online[0].at("device").at("renderer").as_string(), "Test GPU");
  EXPECT_EQ(online[0].at("state").as_string(), "idle");
  EXPECT_EQ(online[0].at("jobs_done").as_int64(), 0);
  EXPECT_GT(online[0].at("last_seen").as_double(), 1.7e9);
  bj::object s = bj::parse(get("/api/summary", state.get()).body).as_object();
  EXPECT_EQ(s.at("tracker").at("keys").at("gles:test").at("agents_idle").as_int64(), 1);
  EXPECT_EQ(s.at("tracker").at("open_connections").as_int64(), 2);
}

/// A connection that keeps what the state sends it.
struct RecordingPeer : tracker::PeerConnection {
  void send(std::shared_ptr<const std::string> frame) override { frames.push_back(*frame); }
  void close(int, const std::string&) override {}
  std::vector<std::string> frames;
};

TEST(Metrics, ResultsCountByErrorNumberAndAgentsCountTheirFailures) {
  // The tracker reads each job's workload and options (tracker/job_facts.hpp).
  const std::string kInput =
      R"({"workload":{"op":"dense","M":8,"N":8,"K":8},"options":{"repeat":1}})";
  auto state = live_state();  // agent session 1, "phone-1"
  auto agent = std::make_shared<RecordingPeer>();
  const uint64_t agent_id = state->on_open(agent);
  tracker::Hello hello;
  hello.role = tracker::Role::kAgent;
  hello.name = "phone-2";
  hello.keys = {"gles:other"};
  state->on_message(agent_id, bj::serialize(hello.to_json()), tracker::Clock::now());
  const uint64_t client = state->on_open(std::make_shared<NullPeer>());
  hello = tracker::Hello{};
  hello.role = tracker::Role::kClient;
  state->on_message(client, bj::serialize(hello.to_json()), tracker::Clock::now());
  state->on_message(client,
                    R"({"type":"submit","batch":[{"tag":1,"key":"gles:other","input":)" + kInput +
                        R"(},{"tag":2,"key":"gles:other","input":)" + kInput + "}]}",
                    tracker::Clock::now());
  // The agent answers each job it gets: the first WRONG_ANSWER, the second fine.
  for (int error_no : {5, 0}) {
    uint64_t job = 0;
    for (const std::string& f : agent->frames)
      if (auto o = bj::parse(f).as_object(); o.at("type") == "job")
        job = o.at("job").to_number<uint64_t>();
    ASSERT_NE(job, 0u);
    agent->frames.clear();
    state->on_message(agent_id,
                      R"({"type":"result","job":)" + std::to_string(job) +
                          R"(,"result":{"error_no":)" + std::to_string(error_no) + R"(,"costs":)" +
                          (error_no == 0 ? "[0.001]" : "[]") + R"(,"all_cost":0,"timestamp":0}})",
                      tracker::Clock::now());
  }
  const bj::object summary = state->summary(tracker::Clock::now());
  const std::string text = prometheus_text(&summary, nullptr);
  EXPECT_NE(text.find("webtune_measure_results_total{error_no=\"5\",error=\"WRONG_ANSWER\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("webtune_measure_results_total{error_no=\"0\",error=\"NO_ERROR\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("webtune_jobs_delivered_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("webtune_results_implausible_total 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("webtune_origins_refused_total 0\n"), std::string::npos);
  int found = 0;
  for (const bj::value& a : state->agents_json())
    if (a.at("name") == "phone-2") {
      ++found;
      EXPECT_EQ(a.at("jobs_done").to_number<int64_t>(), 1);
      EXPECT_EQ(a.at("jobs_failed").to_number<int64_t>(), 1);
    }
  EXPECT_EQ(found, 1);
}

TEST(Metrics, PrometheusTextHasAgentsQueuesErrorsLeasesAndConnections) {
  auto state = live_state();
  const bj::object summary = state->summary(tracker::Clock::now());
  const fs::path dir = temp_dir("metrics");
  RecordStore store(make_db(dir));
  const std::string text = prometheus_text(&summary, &store);
  for (const char* line : {
           "# TYPE webtune_agents gauge\n",
           "webtune_agents{key=\"gles:test\",state=\"idle\"} 1\n",
           "webtune_agents{key=\"gles:test\",state=\"busy\"} 0\n",
           "webtune_queue_depth{key=\"gles:test\"} 0\n",
           "# TYPE webtune_measure_results_total counter\n",
           "webtune_measure_results_total{error_no=\"5\",error=\"WRONG_ANSWER\"} 0\n",
           "webtune_lease_expiries_total 0\n",
           "webtune_websocket_connections 2\n",
           "webtune_websocket_connections_total 2\n",
           "webtune_peers{role=\"agent\"} 1\n",
           "webtune_records_jobs{status=\"done\"} 1\n",
           "webtune_records_trials{error_no=\"0\",error=\"NO_ERROR\"} 9\n",
           "webtune_records_trials{error_no=\"3\",error=\"COMPILE_DEVICE\"} 1\n",
           "webtune_up 1\n",
       })
    EXPECT_NE(text.find(line), std::string::npos) << line << "in\n" << text;
  // Every sample line is NAME{LABELS} VALUE or NAME VALUE; every family has HELP and TYPE.
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    if (l.starts_with("#")) {
      EXPECT_TRUE(l.starts_with("# HELP webtune_") || l.starts_with("# TYPE webtune_")) << l;
      continue;
    }
    EXPECT_TRUE(l.starts_with("webtune_")) << l;
    EXPECT_NE(l.rfind(' '), std::string::npos) << l;
  }
  EXPECT_EQ(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_NE(prometheus_text(nullptr, nullptr).find("webtune_up 0\n"), std::string::npos);
}

TEST(Url, TargetsSplitAndDecode) {
  auto t = parse_target("/api/best?workload=dense%5F64&target=gles-frag&x&flag=a+b");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->path, "/api/best");
  EXPECT_EQ(t->query.at("workload"), "dense_64");
  EXPECT_EQ(t->query.at("target"), "gles-frag");
  EXPECT_EQ(t->query.at("x"), "");
  EXPECT_EQ(t->query.at("flag"), "a b");
  EXPECT_EQ(parse_target("/a%2Fb")->path, "/a/b");
  EXPECT_FALSE(parse_target("http://host/x"));
  EXPECT_FALSE(parse_target("/bad%2"));
  EXPECT_FALSE(parse_target("/bad%zz"));
  EXPECT_FALSE(parse_target("/nul%00"));
  EXPECT_FALSE(parse_target("/x?q=%"));
}

class Static : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir("static");
    fs::create_directories(dir_ / "root" / "vendor");
    std::ofstream(dir_ / "root" / "index.html") << "<html>dash</html>";
    std::ofstream(dir_ / "root" / "vendor" / "lib.js") << "export {}";
    std::ofstream(dir_ / "secret.txt") << "secret";
    fs::create_symlink(dir_ / "secret.txt", dir_ / "root" / "escape.txt");
    fs::create_directory_symlink(dir_, dir_ / "root" / "up");
    fs::create_symlink(dir_ / "root" / "index.html", dir_ / "root" / "alias.html");
  }
  fs::path dir_;
};

TEST_F(Static, ServesFilesUnderTheRootWithTheirTypes) {
  StaticFiles files(dir_ / "root");
  auto index = files.serve("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->body, "<html>dash</html>");
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  auto js = files.serve("/vendor/lib.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  // A symlink that stays inside the root is fine.
  EXPECT_TRUE(files.resolve("/alias.html"));
}

TEST_F(Static, NoPathEscapesTheRoot) {
  StaticFiles files(dir_ / "root");
  for (const char* path : {"/../secret.txt", "/vendor/../../secret.txt", "/./index.html",
                           "//secret.txt", "/vendor//lib.js", "/..\\secret.txt", "/escape.txt",
                           "/up/secret.txt", "/vendor", "/missing.js", "secret.txt", ""})
    EXPECT_FALSE(files.resolve(path)) << path;
  // Percent-encoded traversal decodes to ".." first, and is refused the same way.
  for (const char* target : {"/%2e%2e/secret.txt", "/%2E%2E%2Fsecret.txt", "/vendor/%2e./x"}) {
    auto t = parse_target(target);
    ASSERT_TRUE(t) << target;
    EXPECT_FALSE(files.resolve(t->path)) << target;
  }
  EXPECT_FALSE(StaticFiles(dir_ / "no-such-root").resolve("/index.html"));
}

HttpRequest request(std::string target, std::vector<std::pair<std::string, std::string>> h = {}) {
  return HttpRequest{"GET", std::move(target), std::move(h)};
}

TEST(Dashboard, ViewerTokenGuardsTheApiMetricsAndPage) {
  const fs::path dir = temp_dir("token");
  fs::create_directories(dir / "web");
  std::ofstream(dir / "web" / "index.html") << "<html></html>";
  DashboardOptions options;
  options.db = make_db(dir);
  options.web_root = dir / "web";
  options.viewer_token = "s3cret";
  tracker::HttpHandler handler = make_dashboard_handler(options);
  for (const char* target : {"/", "/api/jobs", "/metrics", "/index.html"}) {
    auto r = handler(request(target), nullptr);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << target;
    EXPECT_TRUE(bj::parse(r->body).as_object().contains("error"));
    EXPECT_EQ(handler(request(std::string(target) + "?token=wrong"), nullptr)->status, 401);
  }
  EXPECT_EQ(handler(request("/api/jobs", {{"authorization", "Bearer s3cret"}}), nullptr)->status,
            200);
  EXPECT_EQ(handler(request("/metrics", {{"authorization", "Bearer s3cre"}}), nullptr)->status,
            401);
  auto page = handler(request("/?token=s3cret"), nullptr);
  EXPECT_EQ(page->status, 200);
  bool cookie_set = false;
  for (const auto& [name, value] : page->headers)
    if (name == "Set-Cookie") {
      cookie_set = true;
      EXPECT_TRUE(value.starts_with("webtune_viewer=s3cret;")) << value;
      EXPECT_NE(value.find("HttpOnly"), std::string::npos);
    }
  EXPECT_TRUE(cookie_set);
  EXPECT_EQ(
      handler(request("/api/summary", {{"cookie", "a=b; webtune_viewer=s3cret"}}), nullptr)->status,
      200);
}

TEST(Dashboard, RoutesApiMetricsAndFilesAndAnswersErrorsAsJson) {
  const fs::path dir = temp_dir("routes");
  fs::create_directories(dir / "web");
  std::ofstream(dir / "web" / "index.html") << "<html></html>";
  std::ofstream(dir / "secret.txt") << "secret";
  DashboardOptions options;
  options.db = make_db(dir);
  options.web_root = dir / "web";
  tracker::HttpHandler handler = make_dashboard_handler(options);
  EXPECT_EQ(handler(request("/"), nullptr)->body, "<html></html>");
  auto metrics = handler(request("/metrics"), nullptr);
  EXPECT_EQ(metrics->content_type, kPrometheusContentType);
  EXPECT_NE(metrics->body.find("webtune_up 0"), std::string::npos);
  for (const char* target : {"/nothing.js", "/%2e%2e/secret.txt", "/../secret.txt"}) {
    auto r = handler(request(target), nullptr);
    EXPECT_EQ(r->status, 404) << target;
    EXPECT_EQ(r->content_type, "application/json");
  }
  EXPECT_EQ(handler(request("/x%zz"), nullptr)->status, 400);
  HttpRequest post{"POST", "/", {}};
  EXPECT_EQ(handler(post, nullptr)->status, 405);
}

/// One HTTP/1.1 GET over a real socket; returns the status line and the body.
std::pair<std::string, std::string> http_get(uint16_t port, const std::string& target,
                                             const std::string& extra_headers = {}) {
  const std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                          "\r\n" + extra_headers + "Connection: close\r\n\r\n";
  const std::string response = testing_support::raw_http(port, req);
  if (response == "connect failed") return {response, ""};
  const size_t line_end = response.find("\r\n");
  const size_t body = response.find("\r\n\r\n");
  return {response.substr(0, line_end), body == std::string::npos ? "" : response.substr(body + 4)};
}

TEST(TrackerPort, ServesTheApiBesideTheWebSocket) {
  const fs::path dir = temp_dir("port");
  fs::create_directories(dir / "web");
  std::ofstream(dir / "web" / "index.html") << "<html>dashboard</html>";
  tracker::TrackerConfig config;
  config.port = 0;
  DashboardOptions options;
  options.db = make_db(dir);
  options.web_root = dir / "web";
  config.http_handler = make_dashboard_handler(options);
  tracker::TrackerServer server(config);
  server.start_background();
  auto [status, body] = http_get(server.port(), "/api/summary");
  EXPECT_EQ(status, "HTTP/1.1 200 OK");
  bj::object s = bj::parse(body).as_object();
  EXPECT_TRUE(s.at("live").as_bool());
  EXPECT_TRUE(s.at("tracker").as_object().contains("keys"));
  EXPECT_EQ(http_get(server.port(), "/").second, "<html>dashboard</html>");
  EXPECT_EQ(http_get(server.port(), "/api/jobs/1/trials?limit=x").first,
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(http_get(server.port(), "/nope").first, "HTTP/1.1 404 Not Found");
  EXPECT_NE(http_get(server.port(), "/metrics").second.find("webtune_websocket_connections 0"),
            std::string::npos);
  server.stop();
}

TEST(TrackerPort, RecordsOnlyModeRefusesTheWebSocket) {
  const fs::path dir = temp_dir("serve");
  tracker::TrackerConfig config;
  config.port = 0;
  config.websocket = false;
  DashboardOptions options;
  options.db = make_db(dir);
  options.web_root = dir / "web";
  config.http_handler = make_dashboard_handler(options);
  tracker::TrackerServer server(config);
  server.start_background();
  auto [status, body] = http_get(server.port(), "/api/summary");
  EXPECT_EQ(status, "HTTP/1.1 200 OK");
  EXPECT_FALSE(bj::parse(body).at("live").as_bool());
  const std::string upgrade =
      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
  EXPECT_EQ(http_get(server.port(), "/ws", upgrade).first, "HTTP/1.1 404 Not Found");
  server.stop();
}

}  // namespace
}  // namespace webtune::server

namespace webtune::server {
namespace {

/// A trial of a real config of `task` (`entity`), `cost_s` per run.
TrialRecord real_trial(const ConfigEntity& entity, double cost_s, double timestamp) {
  TrialRecord t;
  t.config_index = entity.index();
  t.config_json = bj::serialize(entity.to_json());
  t.result.costs = {cost_s, cost_s};
  t.result.all_cost = 0.05;
  t.result.timestamp = timestamp;
  t.agent = "agent-a";
  return t;
}

/// One workload (dense 32) tuned twice: job 1 on gles-frag by a native agent, its default config
/// measured first (2 ms) then 3 others, one of them the best (0.5 ms); job 2 as `--target
/// webgl2` (gles-frag kernels, a browser tab's key), 2 trials, default never measured.
struct TwoDevices {
  std::string db;
  int64_t native = 0, browser = 0;
  int64_t default_index = 0, best_index = 0;
  double flops = 0;
};

TwoDevices make_two_devices(const fs::path& dir) {
  TwoDevices out;
  out.db = (dir / "two.db").string();
  RecordStore store(out.db);
  const Workload w = Workload::dense(32, 32, 32, "d32");
  out.flops = w.flops();
  const Task task = Task::create(w, Target::kGlesFrag);
  const ConfigEntity def = task.default_config();
  out.default_index = def.index();
  std::mt19937_64 rng(7);
  std::vector<ConfigEntity> others;
  for (const ConfigEntity& e : task.space->sample_distinct(rng, 8))
    if (e.index() != def.index() && others.size() < 5) others.push_back(e);
  out.native = store.open_job(w, Target::kGlesFrag, "gles:llvmpipe", "d32", "random");
  store.add_trials(
      out.native,
      {real_trial(def, 2e-3, 1700000000), real_trial(others[0], 1e-3, 1700000001),
       real_trial(others[1], 5e-4, 1700000002), real_trial(others[2], 4e-3, 1700000003)});
  out.best_index = others[1].index();
  out.browser = store.open_job(w, Target::kGlesFrag,
                               "webgl2:ANGLE (Mesa, llvmpipe (LLVM 15.0.6 256 bits), OpenGL 4.5)",
                               "d32", "xgb");
  store.add_trials(out.browser, {real_trial(others[3], 8e-4, 1700000010),
                                 real_trial(others[4], 9e-4, 1700000011)});
  return out;
}

HttpResponse route(const RecordStore& store, const std::string& target) {
  ApiRouter router(&store);
  return router.route("GET", *parse_target(target), nullptr);
}

TEST(TargetLabel, TheTargetIsNamedAsTheUserNamedIt) {
  EXPECT_EQ(tune_target_label(Target::kGlesFrag, "webgl2:ANGLE (Mesa)"), "webgl2");
  EXPECT_EQ(tune_target_label(Target::kGlesFrag, "gles:llvmpipe"), "gles-frag");
  EXPECT_EQ(tune_target_label(Target::kGlesCompute, "gles:llvmpipe"), "gles-compute");
  EXPECT_EQ(tune_target_label(Target::kGlesFrag, "imported"), "gles-frag");
}

TEST(Workloads, BestPerDeviceWithTheSpeedupOverTheDefaultConfig) {
  const TwoDevices d = make_two_devices(temp_dir("workloads"));
  RecordStore store(d.db);
  const bj::object jobs = bj::parse(route(store, "/api/jobs").body).as_object();
  ASSERT_EQ(jobs.at("jobs").as_array().size(), 2u);
  EXPECT_EQ(jobs.at("jobs").as_array()[0].at("target").as_string(), "gles-frag");
  EXPECT_EQ(jobs.at("jobs").as_array()[1].at("target").as_string(), "webgl2");
  EXPECT_EQ(jobs.at("jobs").as_array()[1].at("kernel").as_string(), "gles-frag");

  const HttpResponse r = route(store, "/api/workloads");
  ASSERT_EQ(r.status, 200) << r.body;
  const bj::array workloads = bj::parse(r.body).at("workloads").as_array();
  ASSERT_EQ(workloads.size(), 1u);
  EXPECT_EQ(workloads[0].at("key").as_string(), Workload::dense(32, 32, 32).key());
  const bj::array rows = workloads[0].at("devices").as_array();
  ASSERT_EQ(rows.size(), 2u);
  // Fastest first: the native job's 0.5 ms beats the tab's 0.8 ms.
  const bj::object& native = rows[0].as_object();
  EXPECT_EQ(native.at("job").to_number<int64_t>(), d.native);
  EXPECT_EQ(native.at("device_key").as_string(), "gles:llvmpipe");
  EXPECT_EQ(native.at("target").as_string(), "gles-frag");
  EXPECT_NEAR(native.at("best_gflops").to_number<double>(), d.flops / 5e-4 / 1e9, 1e-9);
  EXPECT_NEAR(native.at("best_ms").to_number<double>(), 0.5, 1e-9);
  EXPECT_EQ(native.at("default_config_index").to_number<int64_t>(), d.default_index);
  EXPECT_NEAR(native.at("default_gflops").to_number<double>(), d.flops / 2e-3 / 1e9, 1e-9);
  EXPECT_NEAR(native.at("speedup").to_number<double>(), 4.0, 1e-9);
  const bj::object& browser = rows[1].as_object();
  EXPECT_EQ(browser.at("job").to_number<int64_t>(), d.browser);
  EXPECT_EQ(browser.at("target").as_string(), "webgl2");
  EXPECT_NEAR(browser.at("best_ms").to_number<double>(), 0.8, 1e-9);
  EXPECT_TRUE(browser.at("default_gflops").is_null()) << "the default was never measured";
  EXPECT_TRUE(browser.at("speedup").is_null());
}

TEST(Downloads, ExportsOneJobAsAutoTvmLinesAndCsvAndItsBestKernel) {
  const TwoDevices d = make_two_devices(temp_dir("downloads"));
  RecordStore store(d.db);
  const std::string id = std::to_string(d.native);

  const HttpResponse log = route(store, "/api/export?job=" + id + "&format=autotvm");
  ASSERT_EQ(log.status, 200) << log.body;
  std::istringstream lines(log.body);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const bj::object o = bj::parse(line).as_object();
    EXPECT_EQ(o.at("input").as_array()[0].as_string(),
              "opengl -keys=gles-frag -model=gles:llvmpipe")
        << "only this job's lines, not the webgl2 job's";
    ++n;
  }
  EXPECT_EQ(n, 4) << "one line per trial of the job";
  bool attachment = false;
  for (const auto& [name, value] : log.headers)
    attachment |= name == "Content-Disposition" && value.find("attachment") != std::string::npos;
  EXPECT_TRUE(attachment);

  const HttpResponse csv = route(store, "/api/export?job=" + id + "&format=csv");
  ASSERT_EQ(csv.status, 200) << csv.body;
  EXPECT_EQ(csv.content_type, "text/csv; charset=utf-8");
  std::vector<std::string> rows;
  std::istringstream in(csv.body);
  while (std::getline(in, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 5u) << csv.body;
  EXPECT_EQ(rows[0].rfind("number,trial_id,config_index,error_no,error,gflops,mean_cost_s", 0), 0u);
  EXPECT_EQ(rows[1].rfind("1,", 0), 0u);
  EXPECT_NE(rows[1].find("," + std::to_string(d.default_index) + ",0,NO_ERROR,"), std::string::npos)
      << rows[1];

  const HttpResponse art = route(store, "/api/artifact?job=" + id);
  ASSERT_EQ(art.status, 200) << art.body;
  const bj::object a = bj::parse(art.body).as_object();
  EXPECT_EQ(a.at("config_index").to_number<int64_t>(), d.best_index);
  EXPECT_TRUE(a.at("best").as_bool());
  EXPECT_NEAR(a.at("cost_s").to_number<double>(), 5e-4, 1e-12);
  EXPECT_FALSE(a.at("artifact").at("source").as_string().empty());
  EXPECT_FALSE(a.at("samples").as_array().empty()) << "reference samples to check it against";

  EXPECT_EQ(route(store, "/api/export?job=" + id + "&format=xml").status, 400);
  EXPECT_EQ(route(store, "/api/export?format=csv").status, 400);
  EXPECT_EQ(route(store, "/api/export?job=99&format=csv").status, 404);
  EXPECT_EQ(route(store, "/api/artifact?job=x").status, 400);
}

TEST(Events, TheFeedSendsOnlyNewTrialsEachOnce) {
  const TwoDevices d = make_two_devices(temp_dir("feed"));
  RecordStore reader(d.db);
  TrialFeed feed(reader, d.db);
  const std::string first = feed.poll();
  EXPECT_EQ(first.rfind("event: jobs\ndata: {\"jobs\":[", 0), 0u) << first;
  EXPECT_EQ(first.find("event: trials"), std::string::npos) << "history is not streamed";
  EXPECT_EQ(feed.poll(), "") << "nothing committed since";

  // Another connection (a tuner) stores one trial of the webgl2 job.
  {
    RecordStore writer(d.db);
    const Task task = Task::create(Workload::dense(32, 32, 32, "d32"), Target::kGlesFrag);
    writer.add_trials(d.browser, {real_trial(task.default_config(), 3e-3, 1700000020)});
  }
  const std::string next = feed.poll();
  ASSERT_NE(next.find("event: trials\nid: " + std::to_string(d.browser) + ":3\ndata: "),
            std::string::npos)
      << next;
  const size_t data = next.find("data: ") + 6;
  const bj::object event = bj::parse(next.substr(data, next.find('\n', data) - data)).as_object();
  EXPECT_EQ(event.at("job").to_number<int64_t>(), d.browser);
  ASSERT_EQ(event.at("trials").as_array().size(), 1u);
  EXPECT_EQ(event.at("trials").as_array()[0].at("number").to_number<int64_t>(), 3);
  EXPECT_NE(next.find("event: jobs"), std::string::npos) << "the counts changed";
  EXPECT_EQ(feed.poll(), "");
  EXPECT_EQ(sse_event("x", "a\nb", "7"), "event: x\nid: 7\ndata: a\ndata: b\n\n");
}

/// Reads from `fd` until `text` was seen (true) or 20 s passed (false); appends to `got`.
bool read_until(int fd, const std::string& text, std::string& got) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got.find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > until) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return false;
    got.append(buffer, static_cast<size_t>(n));
  }
  return true;
}

TEST(TrackerPort, EventsStreamATrialStoredAfterTheyOpened) {
  const fs::path dir = temp_dir("sse");
  const TwoDevices d = make_two_devices(dir);
  tracker::TrackerConfig config;
  config.port = 0;
  config.websocket = false;
  DashboardOptions options;
  options.db = d.db;
  options.web_root = dir / "web";
  config.http_handler = make_dashboard_handler(options);
  tracker::TrackerServer server(config);
  server.start_background();

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string req =
      "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n\r\n";
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string got;
  ASSERT_TRUE(read_until(fd, "event: jobs", got)) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Type: text/event-stream\r\n"), std::string::npos) << got;
  EXPECT_EQ(got.find("Content-Length"), std::string::npos) << got;
  EXPECT_EQ(got.find("event: trials"), std::string::npos);
  {
    RecordStore writer(d.db);
    const Task task = Task::create(Workload::dense(32, 32, 32, "d32"), Target::kGlesFrag);
    writer.add_trials(d.browser, {real_trial(task.default_config(), 3e-3, 1700000020)});
  }
  EXPECT_TRUE(read_until(fd, "event: trials\nid: " + std::to_string(d.browser) + ":3\n", got))
      << got;
  ::close(fd);
  server.stop();
}

}  // namespace
}  // namespace webtune::server
