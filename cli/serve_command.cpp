/// \file serve_command.cpp
/// `webtune serve --db webtune.db [--listen 127.0.0.1:9191] [--viewer-token T] [--web-root DIR]`:
/// the dashboard, the HTTP API and /metrics over a records file alone, without a tracker (no
/// WebSocket on /ws, no live agents).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.hpp"
#include "server/dashboard_handler.hpp"
#include "server_runner.hpp"
#include "tuner/records.hpp"

namespace webtune::cli {

namespace {

struct ServeArgs {
  std::string db = "webtune.db", listen = "127.0.0.1:9191", viewer_token, web_root;
};

void run_serve(const ServeArgs& args) {
  // Serving records that are not there is a typo, not a new empty database.
  if (!is_postgres_url(args.db) && !std::filesystem::exists(args.db))
    throw std::runtime_error("no records file '" + args.db + "' (webtune tune --db writes one)");
  tracker::TrackerConfig config;
  apply_listen(args.listen, config);
  config.websocket = false;
  config.tokens.viewer = args.viewer_token;
  server::DashboardOptions options;
  options.db = args.db;
  options.web_root =
      args.web_root.empty() ? server::default_web_root() : std::filesystem::path(args.web_root);
  options.viewer_token = args.viewer_token;
  config.http_handler = server::make_dashboard_handler(options);
  tracker::TrackerServer server(config);
  std::printf("dashboard: %s (records %s)\n", server.http_url().c_str(), args.db.c_str());
  std::fflush(stdout);
  run_until_signal(server);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd =
      app.add_subcommand("serve", "Serve the dashboard and HTTP API over a records file");
  cmd->add_option("--db", args->db, "records: an SQLite file or postgresql://user@host/db")
      ->capture_default_str();
  cmd->add_option("--listen", args->listen, "HOST:PORT")->capture_default_str();
  cmd->add_option("--viewer-token", args->viewer_token, "token the API and the page ask for");
  cmd->add_option("--web-root", args->web_root, "dashboard files (default: the built ones)");
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace webtune::cli
