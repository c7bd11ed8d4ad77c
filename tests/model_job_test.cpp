/// \file model_job_test.cpp
/// Model jobs on the native agent (issue 16 item 3, MODEL_JOBS.md): a real `webtune tracker
/// --models DIR` on loopback serving a small gles-compute package built here by the planner
/// (Relu → Conv 3×3 → Relu, default configs), a real `webtune agent` on llvmpipe with its own
/// cache folder, and a client that submits model jobs over the tracker protocol. Checked: a
/// measurement has `repeat` positive costs and matches reference samples of the graph's
/// reference executor on the seeded input; a wrong sample is WRONG_ANSWER; a package rebuilt
/// after the client read its hash is COMPILE_HOST "package changed: ..."; a model the tracker
/// does not serve is COMPILE_HOST naming the HTTP 404; the package is fetched once into a folder
/// named by its manifest hash and reused; kernel jobs run as ever around model jobs; a job past its
/// timeout_s is RUN_TIMEOUT. Also the input's parsing and the package path rules.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "codegen/seeded_random.hpp"
#include "deploy/package.hpp"
#include "deploy/planner.hpp"
#include "graph/executor.hpp"
#include "graph/graph.hpp"
#include "native_agent/model_job.hpp"
#include "support/measure_inputs.hpp"
#include "support/tiny_model.hpp"
#include "support/webtune_process.hpp"
#include "tracker/http_fetch.hpp"
#include "tracker/protocol.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing_support::read_text;
using testing_support::tiny_graph;
using testing_support::WebtuneProcess;
using tracker::Hello;
using tracker::ModelMeasureInput;
using tracker::Role;
using tracker::sha256_hex;
using tracker::TrackerClient;

constexpr uint64_t kSeed = 7;

Hello hello_as(Role role, std::string name) {
  Hello h;
  h.role = role;
  h.name = std::move(name);
  return h;
}

/// Writes the gles-compute package of tiny_graph() (default configs) into `dir`.
void write_tiny_package(const fs::path& dir) {
  deploy::PlanOptions options;
  options.target = "gles-compute";
  options.model = {"tiny", "tiny.onnx", std::string(64, 'a')};
  deploy::write_package(deploy::plan_package(tiny_graph(), options), dir.string());
}

/// One tracker, one agent and the packages for the whole suite (an agent start costs seconds).
class ModelJob : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::path(::testing::TempDir()) /
                         ("webtune_model_job_" + std::to_string(::getpid())));
    fs::remove_all(*root_);
    fs::create_directories(*root_ / "models");
    const graph::Graph g = tiny_graph();
    write_tiny_package(*root_ / "models" / "tiny-gles");
    write_tiny_package(*root_ / "models" / "tiny-rebuilt");
    // A package whose step names a kernel file outside itself.
    write_tiny_package(*root_ / "models" / "tiny-escapes");
    {
      const fs::path path = *root_ / "models" / "tiny-escapes" / "manifest.json";
      bj::value manifest = bj::parse(read_text(path));
      for (bj::value& step : manifest.at("steps").as_array())
        if (step.at("kind") == "kernel")
          step.as_object()["kernel"] = "../tiny-gles/kernels/000.json";
      std::ofstream(path, std::ios::trunc) << bj::serialize(manifest);
    }

    // The graph's reference executor on the seeded input: the client's samples.
    graph::ValueMap inputs;
    inputs["x"] = graph::Value::floats({1, 8, 8, 8}, seeded_tensor(kSeed, 0, 512));
    const graph::ValueMap outputs = graph::execute(g, inputs, {});
    reference_ = new std::vector<float>(outputs.at("y").data);

    const uint16_t port = testing_support::free_port();
    url_ = new std::string("ws://127.0.0.1:" + std::to_string(port) + "/ws");
    tracker_ = new WebtuneProcess({"tracker", "--listen", "127.0.0.1:" + std::to_string(port),
                                   "--models", (*root_ / "models").string()},
                                  (*root_ / "tracker.log").string());
    agent_ = new WebtuneProcess({"agent", "--tracker", *url_, "--key", "gles", "--name",
                                 "model-agent", "--cache-dir", (*root_ / "cache").string()},
                                (*root_ / "agent.log").string());
  }
  static void TearDownTestSuite() {
    delete agent_;
    delete tracker_;
    delete reference_;
    delete url_;
    fs::remove_all(*root_);
    delete root_;
  }

  /// A client connected to the tracker (retried while the tracker starts).
  static std::unique_ptr<TrackerClient> client() {
    for (int i = 0; i < 100; ++i) {
      try {
        return std::make_unique<TrackerClient>(*url_, hello_as(Role::kClient, "test"));
      } catch (const std::runtime_error&) {
        std::this_thread::sleep_for(100ms);
      }
    }
    ADD_FAILURE() << "no tracker at " << *url_ << "\n" << tracker_->log();
    return nullptr;
  }

  static std::string manifest_sha256(const std::string& model) {
    return sha256_hex(read_text(*root_ / "models" / model / "manifest.json"));
  }

  /// The input of a model job on `model` with samples at a few places of the reference output.
  static ModelMeasureInput input_for(const std::string& model, int repeat = 5) {
    return testing_support::model_input_with_samples(model, manifest_sha256(model), kSeed,
                                                     *reference_, {0, 1, 77, 300, 511}, repeat);
  }

  /// Submits one job and waits for its result (the MeasureResult JSON). `after_submit` runs
  /// once the tracker accepted the job.
  static bj::object measure(const bj::value& input,
                            const std::function<void()>& after_submit = {}) {
    std::unique_ptr<TrackerClient> c = client();
    if (!c) return {};
    tracker::SubmitItem item;
    item.tag = 1;
    item.key = "gles";
    item.input = input;
    c->submit({item});
    if (after_submit) after_submit();
    std::optional<tracker::ClientResult> r = c->next_result(120s);
    if (!r) {
      ADD_FAILURE() << "no result\nagent log:\n" << agent_->log();
      return {};
    }
    EXPECT_EQ(r->agent, "model-agent");
    return r->result;
  }

  static int error_no(const bj::object& result) {
    return result.contains("error_no") ? result.at("error_no").to_number<int>() : -1;
  }
  static std::string message(const bj::object& result) {
    const bj::value* m = result.if_contains("message");
    return m != nullptr && m->is_string() ? std::string(m->get_string()) : std::string();
  }

  static fs::path* root_;
  static std::vector<float>* reference_;
  static std::string* url_;
  static WebtuneProcess* tracker_;
  static WebtuneProcess* agent_;
};

fs::path* ModelJob::root_ = nullptr;
std::vector<float>* ModelJob::reference_ = nullptr;
std::string* ModelJob::url_ = nullptr;
WebtuneProcess* ModelJob::tracker_ = nullptr;
WebtuneProcess* ModelJob::agent_ = nullptr;

TEST_F(ModelJob, MeasuresThePackageEndToEndAndCachesItByHash) {
  const ModelMeasureInput in = input_for("tiny-gles", 5);
  for (int round = 0; round < 2; ++round) {
    const bj::object result = measure(in.to_json());
    ASSERT_EQ(error_no(result), 0) << message(result) << "\n" << agent_->log();
    const bj::array& costs = result.at("costs").as_array();
    ASSERT_EQ(costs.size(), 5u);
    double sum = 0;
    for (const bj::value& cost : costs) {
      EXPECT_GT(cost.to_number<double>(), 0);
      EXPECT_LT(cost.to_number<double>(), 10);
      sum += cost.to_number<double>();
    }
    // all_cost is the whole job: download, load, warm-up and 5 × 2 timed inferences.
    EXPECT_GT(result.at("all_cost").to_number<double>(), 2 * sum);
  }
  // One folder, named by the manifest's hash, holding what the steps name; no leftovers.
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(*root_ / "cache"))
    entries.push_back(e.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{in.manifest_sha256});
  const fs::path cached = *root_ / "cache" / in.manifest_sha256;
  EXPECT_EQ(read_text(cached / "manifest.json"),
            read_text(*root_ / "models" / "tiny-gles" / "manifest.json"));
  EXPECT_EQ(read_text(cached / "weights.bin"),
            read_text(*root_ / "models" / "tiny-gles" / "weights.bin"));
  EXPECT_TRUE(fs::exists(cached / "kernels" / "000.json"));
  // Only what the manifest names: no page, no runtime.
  EXPECT_FALSE(fs::exists(cached / "report.txt"));
  EXPECT_NE(agent_->log().find("from the cache"), std::string::npos) << agent_->log();
}

// The model runs on a context of its own in the agent's GL worker: kernel jobs before and after
// it are measured as ever.
TEST_F(ModelJob, KernelJobsStillRunAroundAModelJob) {
  const bj::value kernel = testing_support::dense_input(16, testing_support::measured(1, 3));
  EXPECT_EQ(error_no(measure(kernel)), 0);
  EXPECT_EQ(error_no(measure(input_for("tiny-gles", 2).to_json())), 0);
  const bj::object after = measure(kernel);
  EXPECT_EQ(error_no(after), 0) << message(after);
  EXPECT_EQ(after.at("costs").as_array().size(), 3u);
}

// timeout_s is the whole job's budget: download, load, warm-up and runs.
TEST_F(ModelJob, AJobPastItsTimeoutIsRunTimeout) {
  ModelMeasureInput in = input_for("tiny-gles", 1000);
  in.options.number = 1000;
  in.options.timeout_s = 0.002;
  const bj::object result = measure(in.to_json());
  EXPECT_EQ(error_no(result), 7) << message(result);
  EXPECT_NE(message(result).find("timeout"), std::string::npos) << message(result);
  EXPECT_LT(result.at("all_cost").to_number<double>(), 5.0);
}

TEST_F(ModelJob, AWrongSampleIsAWrongAnswer) {
  ModelMeasureInput in = input_for("tiny-gles", 2);
  in.samples[2].value += 1.0;
  const bj::object result = measure(in.to_json());
  EXPECT_EQ(error_no(result), 5) << message(result);
  EXPECT_NE(message(result).find("output[77]"), std::string::npos) << message(result);
  EXPECT_TRUE(result.at("costs").as_array().empty());
}

TEST_F(ModelJob, APackageRebuiltAfterSubmitIsNotMeasured) {
  const ModelMeasureInput in = input_for("tiny-rebuilt", 2);
  const std::string want = in.manifest_sha256;
  std::string got;
  // The agent is held (SIGSTOP) while the job is submitted and the package "rebuilt": the
  // tracker then serves other manifest bytes under the same name.
  agent_->signal(SIGSTOP);
  const bj::object result = measure(in.to_json(), [&] {
    const fs::path manifest = *root_ / "models" / "tiny-rebuilt" / "manifest.json";
    std::ofstream(manifest, std::ios::app) << "\n";
    got = manifest_sha256("tiny-rebuilt");
    agent_->signal(SIGCONT);
  });
  agent_->signal(SIGCONT);
  ASSERT_NE(got, want);
  EXPECT_EQ(error_no(result), 2) << message(result);
  EXPECT_EQ(message(result), "package changed: manifest sha256 " + got + " != " + want);
}

TEST_F(ModelJob, AKernelPathOutsideThePackageIsRefused) {
  const bj::object result = measure(input_for("tiny-escapes", 1).to_json());
  EXPECT_EQ(error_no(result), 2) << message(result);
  // The manifest's own check (deploy/package.hpp) says it first; package_files is the second.
  EXPECT_NE(message(result).find("must be a path inside the package, not "
                                 "'../tiny-gles/kernels/000.json'"),
            std::string::npos)
      << message(result);
  EXPECT_FALSE(fs::exists(*root_ / "cache" / manifest_sha256("tiny-escapes")));
}

// The tracker (tracker/job_facts.cpp) refuses a model it does not serve at submit; a package
// removed after the submit reaches the agent's own fetch, which answers COMPILE_HOST naming the
// HTTP 404.
TEST_F(ModelJob, AModelTheTrackerDoesNotServeIsACompileHostError) {
  ModelMeasureInput in = input_for("tiny-gles", 1);
  in.model = "no-such-model";
  std::unique_ptr<TrackerClient> c = client();
  ASSERT_TRUE(c);
  tracker::SubmitItem item;
  item.tag = 1;
  item.key = "gles";
  item.input = in.to_json();
  try {
    c->submit({item});
    ADD_FAILURE() << "the tracker took a model it does not serve";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("no package 'no-such-model'"), std::string::npos)
        << e.what();
  }
  const fs::path cache = *root_ / "cache-404";
  try {
    fetch_model_package(*url_, in, cache.string(), 10);
    ADD_FAILURE() << "a package the tracker does not serve was fetched";
  } catch (const ModelJobError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kCompileHost);
    EXPECT_NE(std::string(e.what()).find("/models/no-such-model/manifest.json: HTTP 404"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(cache / in.manifest_sha256));
}

/// A self-signed certificate for 127.0.0.1 (Debian's openssl command), as the tracker tests make.
void make_certificate(const fs::path& dir) {
  fs::create_directories(dir);
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
      "/CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout " +
      (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// Over wss:// the package comes over https:// from the same port, with the certificate verified
// against the agent's --ca-file (an untrusted one is refused); http_get bounds the body.
TEST(ModelJobTls, PackagesComeOverHttpsFromTheVerifiedTracker) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("webtune_model_job_tls_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  make_certificate(dir / "cert");
  make_certificate(dir / "other");
  write_tiny_package(dir / "models" / "tiny-gles");
  const std::string cert = (dir / "cert" / "cert.pem").string();
  const uint16_t port = testing_support::free_port();
  const std::string url = "wss://127.0.0.1:" + std::to_string(port) + "/ws";
  WebtuneProcess tracker_process({"tracker", "--listen", "127.0.0.1:" + std::to_string(port),
                                  "--models", (dir / "models").string(), "--tls-cert", cert,
                                  "--tls-key", (dir / "cert" / "key.pem").string()},
                                 (dir / "tracker.log").string());
  tracker::set_tracker_ca_file(cert);
  const std::string manifest = read_text(dir / "models" / "tiny-gles" / "manifest.json");
  std::string got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    try {
      got = tracker::http_get(url, "/models/tiny-gles/manifest.json", 1 << 20, 5s);
    } catch (const tracker::HttpFetchError&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_EQ(got, manifest) << tracker_process.log();
  try {
    tracker::http_get(url, "/models/tiny-gles/manifest.json", 100, 5s);
    ADD_FAILURE() << "a body over the limit was taken";
  } catch (const tracker::HttpFetchError& e) {
    EXPECT_EQ(e.status(), 0);
    EXPECT_NE(std::string(e.what()).find("longer than the limit of 100 bytes"), std::string::npos)
        << e.what();
  }
  try {
    tracker::http_get(url, "/models/absent/manifest.json", 1 << 20, 5s);
    ADD_FAILURE() << "a missing file was answered";
  } catch (const tracker::HttpFetchError& e) {
    EXPECT_EQ(e.status(), 404) << e.what();
  }

  WebtuneProcess agent({"agent", "--tracker", url, "--key", "gles", "--name", "tls-agent",
                        "--ca-file", cert, "--cache-dir", (dir / "cache").string()},
                       (dir / "agent.log").string());
  TrackerClient client(url, hello_as(Role::kClient, "test"));
  ModelMeasureInput in;
  in.model = "tiny-gles";
  in.manifest_sha256 = sha256_hex(manifest);
  in.seed = kSeed;
  in.options.repeat = 3;
  tracker::SubmitItem item;
  item.tag = 1;
  item.key = "gles";
  item.input = in.to_json();
  client.submit({item});
  std::optional<tracker::ClientResult> r = client.next_result(60s);
  ASSERT_TRUE(r) << agent.log();
  EXPECT_EQ(r->result.at("error_no").to_number<int>(), 0) << bj::serialize(r->result);
  EXPECT_EQ(r->result.at("costs").as_array().size(), 3u);

  // A tracker whose certificate is not the trusted one is never fetched from.
  tracker::set_tracker_ca_file((dir / "other" / "cert.pem").string());
  try {
    tracker::http_get(url, "/models/tiny-gles/manifest.json", 1 << 20, 5s);
    ADD_FAILURE() << "an untrusted tracker was fetched from";
  } catch (const tracker::HttpFetchError& e) {
    EXPECT_NE(std::string(e.what()).find("TLS handshake failed"), std::string::npos) << e.what();
  }
  tracker::set_tracker_ca_file({});
  fs::remove_all(dir);
}

// The agent reads a model job through the tracker's parser (tracker/model_job.hpp); these are
// the refusals it answers INSTANTIATION for.
TEST(ModelJobInput, ReadsTheContractsJsonAndRefusesBadFields) {
  const bj::value json = bj::parse(
      R"({"kind":"model","model":"resnet18-webgl2","manifest_sha256":")" + std::string(64, 'f') +
      R"(","seed":7,"samples":[{"index":57,"value":3.14,"tolerance":0.004}],)"
      R"("options":{"number":1,"repeat":20,"min_repeat_ms":0,"timeout_s":120,"warmup":4}})");
  ASSERT_TRUE(tracker::is_model_input(json));
  const ModelMeasureInput in = ModelMeasureInput::from_json(json);
  EXPECT_EQ(in.model, "resnet18-webgl2");
  EXPECT_EQ(in.seed, 7u);
  ASSERT_EQ(in.samples.size(), 1u);
  EXPECT_EQ(in.samples[0].index, 57);
  EXPECT_DOUBLE_EQ(in.samples[0].tolerance, 0.004);
  EXPECT_EQ(in.options.repeat, 20);
  EXPECT_EQ(in.warmup, 4);
  EXPECT_EQ(ModelMeasureInput::from_json(in.to_json()).to_json(), in.to_json());
  EXPECT_FALSE(tracker::is_model_input(bj::parse(R"({"kind":"kernel"})")));
  EXPECT_FALSE(tracker::is_model_input(bj::parse(R"({"workload":{}})")));

  auto refused = [&](const std::string& key, bj::value value) {
    bj::object o = json.as_object();
    if (key.rfind("options.", 0) == 0)
      o["options"].as_object()[key.substr(8)] = value;
    else
      o[key] = value;
    try {
      ModelMeasureInput::from_json(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused("model", "../etc").find("'model'"), std::string::npos);
  EXPECT_NE(refused("model", ".hidden").find("'model'"), std::string::npos);
  EXPECT_NE(refused("manifest_sha256", bj::string(std::string(64, 'F'))).find("manifest_sha256"),
            std::string::npos);
  EXPECT_NE(refused("options.warmup", 101).find("warmup"), std::string::npos);
  EXPECT_NE(refused("options.repeat", 0).find("repeat"), std::string::npos);
  // The tracker's messages: "samples[0]: 'index' must be >= 0" (the agent's own parser said
  // "samples[0].index is negative").
  EXPECT_NE(refused("samples", bj::parse(R"([{"index":-1,"value":0,"tolerance":0}])"))
                .find("samples[0]: 'index'"),
            std::string::npos);
  // Stricter than the agent's own parser was: a negative seed is refused, not wrapped to 2^64 - 1,
  // and a `kind` other than "kernel" or "model" is an error rather than a kernel input.
  EXPECT_NE(refused("seed", -1).find("'seed'"), std::string::npos);
  EXPECT_THROW(tracker::is_model_input(bj::parse(R"({"kind":"graph"})")), std::invalid_argument);
}

TEST(ModelJobInput, PackagePathsStayInsideThePackage) {
  deploy::Manifest escaping;
  deploy::PackageStep step;
  step.kind = deploy::PackageStep::Kind::kKernel;
  step.node = "conv";
  step.kernel = "kernels/../../x.json";
  escaping.steps = {step};
  try {
    package_files(escaping);
    ADD_FAILURE() << "an escaping kernel path was taken";
  } catch (const ModelJobError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kCompileHost);
    EXPECT_NE(std::string(e.what()).find("step 0 (node 'conv')"), std::string::npos) << e.what();
  }
  step.kernel = "kernels/000.json";
  escaping.steps = {step, step};
  EXPECT_EQ(package_files(escaping), (std::vector<std::string>{"weights.bin", "kernels/000.json"}));
  for (const char* good : {"weights.bin", "kernels/003.json", "a/b-c_d.e"})
    EXPECT_TRUE(safe_package_path(good)) << good;
  for (const char* bad : {"", "/etc/passwd", "../x", "kernels/../../x", "kernels/.x", "a//b", "a/",
                          "a\\b", "kernels/0 1.json", "./a"})
    EXPECT_FALSE(safe_package_path(bad)) << bad;
  EXPECT_FALSE(safe_package_path(std::string(201, 'a')));
  // A component follows the package folder name rule (tracker::valid_model_name): ≤ 100 chars.
  EXPECT_FALSE(safe_package_path("kernels/" + std::string(101, 'a')));
  EXPECT_TRUE(safe_package_path("kernels/" + std::string(100, 'a')));
}

}  // namespace
}  // namespace webtune
