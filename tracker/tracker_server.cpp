/// \file tracker_server.cpp
/// The listener (connection cap, back-off on accept errors, TLS), the lease tick and the
/// server's lifetime; reading the config file.
#include "tracker/tracker_server.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <future>

#include "beast.hpp"
#include "codegen/json_util.hpp"
#include "connection_slot.hpp"
#include "http_session.hpp"
#include "tracker/origin_policy.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

namespace {

std::vector<std::string> string_list(const bj::object& o, std::string_view key) {
  std::vector<std::string> out;
  auto it = o.find(key);
  if (it == o.end()) return out;
  if (!it->value().is_array())
    throw std::invalid_argument("'" + std::string(key) + "' must be an array of strings");
  for (const bj::value& v : it->value().get_array()) {
    if (!v.is_string())
      throw std::invalid_argument("'" + std::string(key) + "' must be an array of strings");
    out.emplace_back(v.get_string());
  }
  return out;
}

}  // namespace

TrackerConfig TrackerConfig::from_file(const std::string& path) {
  TrackerConfig c;
  try {
    // Keep the parsed document alive while fields are read from it.
    const bj::value document = json::read_file(path);
    const bj::object& o = json::as_object(document, "tracker config");
    static const char* const kKnown[] = {
        "host", "port", "max_frame_bytes", "max_connections", "agent_root", "models_root",
        "allowed_hosts", "allowed_origins", "tls_cert_file", "tls_key_file",
        "allow_public_without_tokens",
        // TrackerPolicy::read_json
        "tokens", "heartbeat_ms", "client_heartbeat_ms", "hello_timeout_ms", "max_attempts",
        "quarantine_after", "quarantine_ms", "lease_min_ms", "lease_max_ms", "lease_margin_ms",
        "max_jobs_per_client", "max_bytes_per_client", "suspect_ms", "plausibility"};
    for (const auto& field : o) {
      bool known = false;
      for (const char* k : kKnown) known = known || field.key() == k;
      if (!known) throw std::invalid_argument("unknown field '" + std::string(field.key()) + "'");
    }
    c.host = json::get_string_or(o, "host", c.host);
    const int64_t port = json::get_int_or(o, "port", c.port);
    if (port < 0 || port > 65535) throw std::invalid_argument("'port' must be in [0, 65535]");
    c.port = static_cast<uint16_t>(port);
    const int64_t frame = json::get_int_or(o, "max_frame_bytes", int64_t(c.max_frame_bytes));
    if (frame < 1024 || frame > (int64_t{1} << 30))
      throw std::invalid_argument("'max_frame_bytes' must be in [1024, 2^30]");
    c.max_frame_bytes = static_cast<size_t>(frame);
    const int64_t connections = json::get_int_or(o, "max_connections", int64_t(c.max_connections));
    if (connections < 1 || connections > 1'000'000)
      throw std::invalid_argument("'max_connections' must be in [1, 1000000]");
    c.max_connections = static_cast<size_t>(connections);
    c.agent_root = json::get_string_or(o, "agent_root", c.agent_root);
    c.models_root = json::get_string_or(o, "models_root", c.models_root);
    c.allowed_hosts = string_list(o, "allowed_hosts");
    c.allowed_origins = string_list(o, "allowed_origins");
    c.tls_cert_file = json::get_string_or(o, "tls_cert_file", "");
    c.tls_key_file = json::get_string_or(o, "tls_key_file", "");
    if (auto a = o.find("allow_public_without_tokens"); a != o.end()) {
      if (!a->value().is_bool())
        throw std::invalid_argument("'allow_public_without_tokens' must be true or false");
      c.allow_public_without_tokens = a->value().get_bool();
    }
    c.read_json(o);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("'" + path + "': " + e.what());
  }
  return c;
}

void TrackerConfig::check_exposure() const {
  if (tls_cert_file.empty() != tls_key_file.empty())
    throw std::invalid_argument(
        "TLS needs both a certificate file and its private key file (tls_cert_file, "
        "tls_key_file)");
  if (is_loopback_host(host) || tokens.complete()) return;
  // Without /ws (webtune serve: the dashboard over a records file) nobody can join as an agent
  // or submit jobs: the viewer token alone guards what the port serves.
  if (!websocket && !tokens.viewer.empty()) return;
  if (!allow_public_without_tokens && !websocket)
    throw std::invalid_argument(
        "refusing to listen on " + host +
        " without a viewer token: anyone who reaches this port could read the records. Set "
        "--viewer-token (or WEBTUNE_VIEWER_TOKEN), or listen on 127.0.0.1");
  if (!allow_public_without_tokens)
    throw std::invalid_argument(
        "refusing to listen on " + host +
        " without a token for every role: anyone who reaches this port could join as an agent "
        "and fake results, submit jobs, or read the records. Set the agent, client and viewer "
        "tokens (--agent-token/--client-token/--viewer-token, \"tokens\" in --config, or "
        "WEBTUNE_*_TOKEN), or listen on 127.0.0.1, or pass --insecure-public if you really mean "
        "it");
}

struct TrackerServer::Impl {
  explicit Impl(TrackerConfig c)
      : config(std::move(c)),
        state(static_cast<const TrackerPolicy&>(config)),
        acceptor(ioc),
        tick_timer(ioc),
        accept_retry(ioc),
        context{state, config, OriginPolicy{}, nullptr} {}

  void load_tls() {
    if (!config.tls()) return;
    tls.emplace(ssl::context::tls_server);
    tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                     ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    beast::error_code ec;
    tls->use_certificate_chain_file(config.tls_cert_file, ec);
    if (ec)
      throw std::runtime_error("cannot load the TLS certificate '" + config.tls_cert_file +
                               "': " + ec.message());
    tls->use_private_key_file(config.tls_key_file, ssl::context::pem, ec);
    if (ec)
      throw std::runtime_error("cannot load the TLS private key '" + config.tls_key_file +
                               "': " + ec.message());
    context.tls = &*tls;
  }

  void listen() {
    beast::error_code ec;
    tcp::endpoint endpoint(net::ip::make_address(config.host, ec), config.port);
    if (ec) throw std::runtime_error("bad listen address '" + config.host + "': " + ec.message());
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    // Child processes (local agents, a browser farm) must not inherit the listener: they would
    // keep the port bound after the tracker is gone, and a restarted tracker could not listen.
    if (!ec) ::fcntl(acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (ec)
      throw std::runtime_error("cannot listen on " + config.host + ":" +
                               std::to_string(config.port) + ": " + ec.message());
    context.origins.listen_host = config.host;
    context.origins.port = acceptor.local_endpoint().port();
    context.origins.tls = config.tls();
    context.origins.allowed_hosts = config.allowed_hosts;
    context.origins.allowed_origins = config.allowed_origins;
  }

  void do_accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
        // Out of file descriptors (or another transient error): accepting again at once would
        // spin and flood the log. Wait, doubling the pause up to 1 s, and log once per pause.
        accept_backoff = accept_backoff.count() == 0
                             ? std::chrono::milliseconds(10)
                             : std::min(accept_backoff * 2, std::chrono::milliseconds(1000));
        ++accept_errors;
        if (accept_errors == 1 || accept_errors % 50 == 0)
          spdlog::warn("accept failed ({} so far): {}; retrying in {} ms", accept_errors,
                       ec.message(), accept_backoff.count());
        accept_retry.expires_after(accept_backoff);
        accept_retry.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec && !stopping) do_accept();
        });
        return;
      }
      accept_backoff = std::chrono::milliseconds(0);
      if (open_connections >= config.max_connections) {
        // Over the cap: close at once (cheaper than any answer), log now and then.
        if (state.note_refused_connection() % 100 == 1)
          spdlog::warn("connection cap of {} reached: refusing connections ({} so far)",
                       config.max_connections, state.counters().connections_refused);
        beast::error_code ignored;
        socket.close(ignored);
      } else {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        start_session(std::move(socket), context, ConnectionSlot(&open_connections));
      }
      do_accept();
    });
  }

  void schedule_tick() {
    tick_timer.expires_after(std::chrono::milliseconds(100));
    tick_timer.async_wait([this](beast::error_code ec) {
      if (ec || stopping) return;
      state.on_tick(Clock::now());
      schedule_tick();
    });
  }

  TrackerConfig config;
  net::io_context ioc{1};
  TrackerState state;
  tcp::acceptor acceptor;
  net::steady_timer tick_timer;
  net::steady_timer accept_retry;
  std::chrono::milliseconds accept_backoff{0};
  uint64_t accept_errors = 0;
  size_t open_connections = 0;
  std::optional<ssl::context> tls;
  ListenerContext context;
  bool stopping = false;
};

TrackerServer::TrackerServer(TrackerConfig config) {
  config.check_exposure();
  if (!is_loopback_host(config.host) && !config.tokens.complete())
    spdlog::warn(
        "listening on {} WITHOUT a token for every role (allow_public_without_tokens): anyone "
        "who reaches this port can join as an agent and fake results, or read the records",
        config.host);
  if (!is_loopback_host(config.host) && !config.tls())
    spdlog::warn(
        "listening on {} without TLS: tokens and results cross the network in clear "
        "text (set tls_cert_file and tls_key_file)",
        config.host);
  impl_ = std::make_unique<Impl>(std::move(config));
  impl_->load_tls();
  impl_->listen();
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->do_accept();
  impl_->schedule_tick();
}

TrackerServer::~TrackerServer() {
  stop();
  if (thread_.joinable()) thread_.join();
}

std::string TrackerServer::url() const {
  return std::string(impl_->config.tls() ? "wss://" : "ws://") + impl_->config.host + ":" +
         std::to_string(port_) + "/ws";
}

std::string TrackerServer::http_url() const {
  return std::string(impl_->config.tls() ? "https://" : "http://") + impl_->config.host + ":" +
         std::to_string(port_) + "/";
}

void TrackerServer::run() {
  if (impl_->config.websocket)
    spdlog::info("tracker listening on {}", url());
  else
    spdlog::info("serving HTTP on {}", http_url());
  impl_->ioc.run();
}

void TrackerServer::start_background() {
  thread_ = std::thread([this] { run(); });
}

void TrackerServer::stop() {
  net::post(impl_->ioc, [this] {
    if (impl_->stopping) return;
    impl_->stopping = true;
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->tick_timer.cancel();
    impl_->accept_retry.cancel();
    // Say goodbye (close code 1001) and give the close frames a moment before stopping.
    impl_->state.close_all(1001, "tracker shutting down");
    impl_->tick_timer.expires_after(std::chrono::milliseconds(200));
    impl_->tick_timer.async_wait([this](beast::error_code) { impl_->ioc.stop(); });
  });
}

void TrackerServer::inspect(const std::function<void(const TrackerState&)>& fn) {
  if (impl_->ioc.stopped()) {
    fn(impl_->state);
    return;
  }
  std::promise<void> done;
  net::post(impl_->ioc, [&] {
    fn(impl_->state);
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace webtune::tracker
