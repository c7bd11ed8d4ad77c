/// \file tracker_load.cpp
/// bench_tracker_load: a tracker on loopback under load. N simulated agents (no-op executors, one
/// io_context thread) and M clients (one thread each, a closed loop of W jobs in flight) run for
/// `--seconds`; `--kill-fraction` of the agents drop their connections without a goodbye halfway
/// through. Prints jobs/s, the added dispatch latency (submit → result at the client, with a
/// zero-cost kernel) p50/p99, and whether every job came back exactly once.
/// Issue 3's targets on 2 cores: 2,000 agents, ≥ 10,000 jobs/s, p99 < 5 ms, nothing lost.
///
/// `--model-every N` makes every Nth job a whole-model job (docs/protocol.md "Model jobs") on a
/// small gles-compute package written to a temporary --models folder (the graph of
/// tests/support/tiny_model.hpp), so the tracker's per-submit package checks (manifest hash,
/// key family, FLOPs for plausibility) and its second queue per job kind are in the figures.
/// Agents then declare both job kinds and answer a model job as they answer a kernel.
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "deploy/planner.hpp"
#include "support/tiny_model.hpp"
#include "tracker/agent_connection.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"

using namespace webtune::tracker;
using Steady = std::chrono::steady_clock;

namespace {

void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

struct ClientStats {
  uint64_t submitted = 0, received = 0, duplicates = 0, errors = 0;
  std::vector<double> latencies_ms;
};

/// A model job's input for the package under `models`/tiny (its manifest hash `manifest_sha256`).
boost::json::object model_job_input(const std::string& manifest_sha256) {
  webtune::tracker::ModelMeasureInput in;
  in.model = "tiny";
  in.manifest_sha256 = manifest_sha256;
  in.seed = 1;
  in.options.repeat = 1;
  in.options.number = 1;
  in.options.timeout_s = 10;
  return in.to_json();
}

ClientStats run_client(const std::string& url, int window, Steady::time_point stop_at,
                       int model_every, const std::string& manifest_sha256,
                       std::atomic<bool>& failed) {
  ClientStats stats;
  try {
    Hello hello;
    hello.role = Role::kClient;
    hello.name = "load-client";
    TrackerClient client(url, hello);
    std::map<uint64_t, Steady::time_point> in_flight;  // tag → submit time
    std::set<uint64_t> seen;
    uint64_t next_tag = 1;
    auto submit = [&](int count) {
      std::vector<SubmitItem> items(count);
      const auto now = Steady::now();
      for (SubmitItem& item : items) {
        item.tag = next_tag++;
        item.lease_ms = 2000;
        if (model_every > 0 && item.tag % static_cast<uint64_t>(model_every) == 0) {
          item.key = "gles";  // the package's target family (tracker/model_job.hpp)
          item.input = model_job_input(manifest_sha256);
        } else {
          item.key = "noop";
          // The tracker reads every job's workload and options (tracker/job_facts.hpp).
          item.input = boost::json::object{
              {"workload", boost::json::object{{"op", "dense"}, {"M", 1}, {"N", 1}, {"K", 1}}},
              {"options", boost::json::object{{"repeat", 1}}}};
        }
        in_flight[item.tag] = now;
      }
      client.submit(items);
      stats.submitted += count;
    };
    submit(window);
    int owed = 0;  // completed jobs not yet replaced
    const int refill = std::max(1, window / 4);
    while (!in_flight.empty()) {
      auto r = client.next_result(std::chrono::seconds(10));
      if (!r) {
        std::fprintf(stderr, "client: %zu jobs missing after 10 s\n", in_flight.size());
        failed = true;
        break;
      }
      const auto now = Steady::now();
      if (!seen.insert(r->tag).second) {
        ++stats.duplicates;
        continue;
      }
      auto it = in_flight.find(r->tag);
      if (it == in_flight.end()) continue;
      stats.latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(now - it->second).count());
      in_flight.erase(it);
      ++stats.received;
      if (r->result.at("error_no").to_number<int>() != 0) ++stats.errors;
      if (now < stop_at && ++owed >= refill) {
        submit(owed);
        owed = 0;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "client failed: %s\n", e.what());
    failed = true;
  }
  return stats;
}

/// This process's peak resident memory (VmHWM of /proc/self/status) in MiB; 0 when unknown. The
/// tracker, the simulated agents and the clients share the process, so it bounds the tracker's.
double peak_rss_mib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib / 1024;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tracker load: simulated agents and clients on loopback"};
  int agents = 2000, clients = 4, window = 4, model_every = 0;
  double seconds = 10, kill_fraction = 0.1;
  app.add_option("--agents", agents, "simulated agents")->capture_default_str();
  app.add_option("--clients", clients, "clients, one thread each")->capture_default_str();
  app.add_option("--window", window, "jobs in flight per client")->capture_default_str();
  app.add_option("--seconds", seconds, "how long clients keep submitting")->capture_default_str();
  app.add_option("--kill-fraction", kill_fraction, "agents dropped halfway")->capture_default_str();
  app.add_option("--model-every", model_every,
                 "every Nth job is a whole-model job on a small package (0: kernel jobs only)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  raise_fd_limit();
  spdlog::set_level(spdlog::level::warn);  // 2,000 "joined" lines would drown the figures

  TrackerConfig config;
  config.port = 0;
  config.heartbeat_ms = 30000;
  config.scheduler.max_attempts = 10;
  config.scheduler.quarantine_after = 1000000;
  // Thousands of simulated agents connect at once through one io_context.
  config.max_connections = static_cast<size_t>(agents + clients) + 64;
  config.hello_timeout = std::chrono::seconds(60);
  // The model package the model jobs name, in a folder removed at exit.
  const std::filesystem::path models =
      std::filesystem::temp_directory_path() / ("bench_tracker_load_" + std::to_string(::getpid()));
  std::string manifest_sha256;
  if (model_every > 0) {
    webtune::deploy::PlanOptions plan;
    plan.target = "gles-compute";
    plan.model = {"tiny", "tiny.onnx", std::string(64, 'a')};
    webtune::deploy::write_package(
        webtune::deploy::plan_package(webtune::testing_support::tiny_graph(), plan),
        (models / "tiny").string());
    manifest_sha256 = webtune::tracker::sha256_hex(
        webtune::testing_support::read_text(models / "tiny" / "manifest.json"));
    config.models_root = models.string();
  }
  TrackerServer server(config);
  server.start_background();

  boost::asio::io_context agents_ioc;
  std::vector<std::unique_ptr<AgentConnection>> farm;
  auto noop = [](const boost::json::value&) {
    return boost::json::object{
        {"error_no", 0},
        {"message", ""},
        // A plausible cost: the tracker refuses 0 s (tracker/result_check.hpp).
        {"costs", boost::json::array{1e-3}},
        {"all_cost", 0.0},
        {"timestamp", 0.0}};
  };
  for (int i = 0; i < agents; ++i) {
    AgentOptions o;
    o.url = server.url();
    o.keys = {"noop:sim", "gles:sim"};
    o.job_kinds = {"kernel", "model"};
    o.name = "sim-" + std::to_string(i);
    o.reconnect = false;
    farm.push_back(std::make_unique<AgentConnection>(agents_ioc, o, noop, true));
    farm.back()->start();
  }
  auto guard = boost::asio::make_work_guard(agents_ioc);
  std::thread agents_thread([&] { agents_ioc.run(); });

  const auto connect_start = Steady::now();
  int connected = 0;
  while (Steady::now() - connect_start < std::chrono::seconds(60)) {
    server.inspect([&](const TrackerState& s) {
      connected = 0;
      for (const auto& [id, p] : s.peers()) connected += p.greeted && p.role == Role::kAgent;
    });
    if (connected == agents) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double connect_s = std::chrono::duration<double>(Steady::now() - connect_start).count();
  std::printf("agents connected: %d of %d in %.2f s\n", connected, agents, connect_s);

  std::atomic<bool> failed{false};
  const auto start = Steady::now();
  const auto stop_at =
      start + std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::future<ClientStats>> futures;
  for (int c = 0; c < clients; ++c)
    futures.push_back(std::async(std::launch::async, run_client, server.url(), window, stop_at,
                                 model_every, manifest_sha256, std::ref(failed)));

  // Halfway: drop a fraction of the agents, as a crash would (no close handshake).
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 2));
  const int to_kill = static_cast<int>(agents * kill_fraction);
  std::promise<void> killed;
  boost::asio::post(agents_ioc, [&] {
    for (int i = 0; i < to_kill; ++i) farm[i * (agents / std::max(1, to_kill))]->stop();
    killed.set_value();
  });
  killed.get_future().wait();

  ClientStats total;
  for (auto& f : futures) {
    ClientStats s = f.get();
    total.submitted += s.submitted;
    total.received += s.received;
    total.duplicates += s.duplicates;
    total.errors += s.errors;
    total.latencies_ms.insert(total.latencies_ms.end(), s.latencies_ms.begin(),
                              s.latencies_ms.end());
  }
  const double elapsed = std::chrono::duration<double>(Steady::now() - start).count();
  SchedulerCounters counters;
  server.inspect([&](const TrackerState& s) { counters = s.scheduler().counters(); });

  const double p50 = percentile(total.latencies_ms, 0.50);
  const double p99 = percentile(total.latencies_ms, 0.99);
  const double rate = total.received / elapsed;
  std::printf("agents %d (killed %d mid-run), clients %d, window %d, model job every %d\n", agents,
              to_kill, clients, window, model_every);
  std::printf("jobs: %llu submitted, %llu received, %llu duplicates, %llu errors, %llu re-queued\n",
              static_cast<unsigned long long>(total.submitted),
              static_cast<unsigned long long>(total.received),
              static_cast<unsigned long long>(total.duplicates),
              static_cast<unsigned long long>(total.errors),
              static_cast<unsigned long long>(counters.requeued));
  std::printf("throughput: %.0f jobs/s over %.1f s (target >= 10000: ratio %.2f)\n", rate, elapsed,
              rate / 10000.0);
  std::printf("added latency: p50 %.3f ms, p99 %.3f ms (target p99 < 5 ms: ratio %.2f)\n", p50, p99,
              p99 / 5.0);
  const bool lost = total.received != total.submitted || total.duplicates != 0 || failed;
  std::printf("every job exactly once: %s\n", lost ? "NO" : "yes");
  std::printf("peak resident memory (tracker + agents + clients): %.1f MiB\n", peak_rss_mib());

  boost::asio::post(agents_ioc, [&] {
    for (auto& a : farm) a->stop();
    agents_ioc.stop();
  });
  agents_thread.join();
  server.stop();
  std::error_code ignored;
  std::filesystem::remove_all(models, ignored);
  return lost ? 1 : 0;
}
