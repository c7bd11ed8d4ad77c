/// \file tracker_command.cpp
/// `webtune tracker [--listen HOST:PORT] [--config FILE] [--db FILE]` runs the daemon until
/// SIGINT/SIGTERM, with the dashboard, HTTP API and /metrics on the same port (over the records
/// file when --db is given);
/// `webtune tracker status --tracker URL` prints the farm per key, like TVM's
/// query_rpc_tracker.
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "server/dashboard_handler.hpp"
#include "server_runner.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"

namespace webtune::cli {

namespace {

struct TrackerArgs {
  std::string listen, config, agent_root, models_root;
  std::string agent_token, client_token, viewer_token;
  std::string db, web_root;
  std::string tls_cert, tls_key;
  std::vector<std::string> allowed_hosts, allowed_origins;
  bool insecure_public = false;
};

struct StatusArgs {
  std::string tracker = "ws://127.0.0.1:9190/ws", token, ca_file;
};

tracker::TrackerConfig make_config(const TrackerArgs& args) {
  tracker::TrackerConfig config;
  if (!args.config.empty()) config = tracker::TrackerConfig::from_file(args.config);
  // --listen wins over the file's host and port; without either, 127.0.0.1:9190.
  if (!args.listen.empty()) apply_listen(args.listen, config);
  if (!args.tls_cert.empty()) config.tls_cert_file = args.tls_cert;
  if (!args.tls_key.empty()) config.tls_key_file = args.tls_key;
  for (const std::string& h : args.allowed_hosts) config.allowed_hosts.push_back(h);
  for (const std::string& o : args.allowed_origins) config.allowed_origins.push_back(o);
  if (args.insecure_public) config.allow_public_without_tokens = true;
  if (!args.agent_root.empty()) config.agent_root = args.agent_root;
  if (!args.models_root.empty()) config.models_root = args.models_root;
  if (!args.agent_token.empty()) config.tokens.agent = args.agent_token;
  if (!args.client_token.empty()) config.tokens.client = args.client_token;
  if (!args.viewer_token.empty()) config.tokens.viewer = args.viewer_token;
  server::DashboardOptions dashboard;
  dashboard.db = args.db;
  dashboard.web_root =
      args.web_root.empty() ? server::default_web_root() : std::filesystem::path(args.web_root);
  dashboard.viewer_token = config.tokens.viewer;
  config.http_handler = server::make_dashboard_handler(dashboard);
  return config;
}

void run_tracker(const TrackerArgs& args) {
  tracker::TrackerServer server(make_config(args));
  spdlog::info("dashboard at {}", server.http_url());
  if (!args.models_root.empty()) {
    // Each package folder is a page (tracker/agent_page.hpp); say where to open them.
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(args.models_root, ec)) {
      if (entry.is_directory(ec) && std::filesystem::exists(entry.path() / "index.html", ec))
        spdlog::info("model page at {}models/{}/", server.http_url(),
                     entry.path().filename().string());
    }
  }
  run_until_signal(server);
  spdlog::info("tracker stopped");
}

void print_status(const StatusArgs& args) {
  if (!args.ca_file.empty()) tracker::set_tracker_ca_file(args.ca_file);
  tracker::Hello hello;
  hello.role = tracker::Role::kViewer;
  hello.token = args.token;
  hello.name = "webtune tracker status";
  tracker::TrackerClient client(args.tracker, hello);
  boost::json::object s = client.summary();
  std::printf("Tracker %s: %lld agents, %lld clients\n", args.tracker.c_str(),
              static_cast<long long>(s["agents"].to_number<int64_t>()),
              static_cast<long long>(s["clients"].to_number<int64_t>()));
  std::printf("%-28s %6s %6s %6s %8s %8s\n", "key", "idle", "busy", "quar.", "pending", "leased");
  for (const auto& [key, v] : s["keys"].as_object()) {
    const auto& o = v.as_object();
    auto n = [&](const char* f) { return static_cast<long long>(o.at(f).to_number<int64_t>()); };
    std::printf("%-28s %6lld %6lld %6lld %8lld %8lld\n", std::string(key).c_str(), n("agents_idle"),
                n("agents_busy"), n("agents_quarantined"), n("jobs_pending"), n("jobs_leased"));
  }
  const auto& c = s["counters"].as_object();
  std::printf("jobs: %lld submitted, %lld delivered, %lld re-queued, %lld lease expiries\n",
              static_cast<long long>(c.at("jobs_submitted").to_number<int64_t>()),
              static_cast<long long>(c.at("jobs_delivered").to_number<int64_t>()),
              static_cast<long long>(c.at("jobs_requeued").to_number<int64_t>()),
              static_cast<long long>(c.at("lease_expiries").to_number<int64_t>()));
}

}  // namespace

void add_tracker_command(CLI::App& app) {
  auto args = std::make_shared<TrackerArgs>();
  auto status = std::make_shared<StatusArgs>();
  CLI::App* cmd = app.add_subcommand("tracker", "Run the tracker daemon (or query it: status)");
  cmd->add_option("--listen", args->listen,
                  "HOST:PORT (default: the config file's, else 127.0.0.1:9190); beyond loopback "
                  "every role needs a token");
  cmd->add_option("--config", args->config,
                  "tracker config JSON (configs/tracker.json; docs/protocol.md lists its fields)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--agent-token", args->agent_token,
                  "token agents must present (or $WEBTUNE_AGENT_TOKEN; a token in the config "
                  "file or the environment stays out of `ps`)")
      ->envname("WEBTUNE_AGENT_TOKEN");
  cmd->add_option("--agent-root", args->agent_root,
                  "directory served as the browser agent page /agent (default: "
                  "$WEBTUNE_AGENT_ROOT or the source tree's browser-agent/)");
  cmd->add_option("--models", args->models_root,
                  "directory of built model packages (`webtune build -o DIR/<name>`), each "
                  "served as a page under /models/<name>/")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--client-token", args->client_token,
                  "token clients must present (or $WEBTUNE_CLIENT_TOKEN)")
      ->envname("WEBTUNE_CLIENT_TOKEN");
  cmd->add_option("--viewer-token", args->viewer_token,
                  "token viewers (and the dashboard, API and /metrics) must present (or "
                  "$WEBTUNE_VIEWER_TOKEN)")
      ->envname("WEBTUNE_VIEWER_TOKEN");
  cmd->add_option("--tls-cert", args->tls_cert,
                  "PEM certificate (chain): serve only https:// and wss:// (with --tls-key)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", args->tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  cmd->add_option("--allowed-host", args->allowed_hosts,
                  "a Host name (and :port) this tracker answers besides its listen address and "
                  "loopback; repeatable");
  cmd->add_option("--allowed-origin", args->allowed_origins,
                  "an Origin whose pages may use this tracker besides its own, e.g. "
                  "https://lab.example.org; repeatable");
  cmd->add_flag("--insecure-public", args->insecure_public,
                "listen beyond loopback even without a token for every role (anyone who "
                "reaches the port can fake results)");
  cmd->add_option("--db", args->db, "records file the dashboard and API show (default: none)");
  cmd->add_option("--web-root", args->web_root, "dashboard files (default: the built ones)");
  CLI::App* st = cmd->add_subcommand("status", "Print agents and jobs per key");
  st->add_option("--tracker", status->tracker, "ws://HOST:PORT/ws")->capture_default_str();
  st->add_option("--token", status->token, "viewer token (or $WEBTUNE_VIEWER_TOKEN)")
      ->envname("WEBTUNE_VIEWER_TOKEN");
  st->add_option("--ca-file", status->ca_file,
                 "CA certificate(s) that signed a wss:// tracker's certificate (or "
                 "$WEBTUNE_CA_FILE)")
      ->check(CLI::ExistingFile);
  st->callback([status] { print_status(*status); });
  cmd->callback([cmd, args] {
    if (cmd->got_subcommand("status")) return;
    run_tracker(*args);
  });
}

}  // namespace webtune::cli
