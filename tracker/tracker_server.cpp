/// \file tracker_server.cpp
/// The listener, the lease tick and the server's lifetime.
#include "tracker/tracker_server.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <future>

#include "beast.hpp"
#include "codegen/json_util.hpp"
#include "http_session.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

TrackerConfig TrackerConfig::from_file(const std::string& path) {
  TrackerConfig c;
  try {
    const bj::object& o = json::as_object(json::read_file(path), "tracker config");
    c.host = json::get_string_or(o, "host", c.host);
    c.port = static_cast<uint16_t>(json::get_int_or(o, "port", c.port));
    if (auto t = o.find("tokens"); t != o.end()) {
      const bj::object& tokens = json::as_object(t->value(), "tokens");
      c.tokens.agent = json::get_string_or(tokens, "agent", "");
      c.tokens.client = json::get_string_or(tokens, "client", "");
      c.tokens.viewer = json::get_string_or(tokens, "viewer", "");
    }
    c.max_frame_bytes =
        static_cast<size_t>(json::get_int_or(o, "max_frame_bytes", int64_t(c.max_frame_bytes)));
    c.heartbeat_ms = static_cast<int>(json::get_int_or(o, "heartbeat_ms", c.heartbeat_ms));
    c.client_heartbeat_ms =
        static_cast<int>(json::get_int_or(o, "client_heartbeat_ms", c.client_heartbeat_ms));
    c.agent_root = json::get_string_or(o, "agent_root", c.agent_root);
    c.scheduler.max_attempts =
        static_cast<int>(json::get_int_or(o, "max_attempts", c.scheduler.max_attempts));
    c.scheduler.quarantine_after =
        static_cast<int>(json::get_int_or(o, "quarantine_after", c.scheduler.quarantine_after));
    c.scheduler.quarantine_duration = std::chrono::milliseconds(
        json::get_int_or(o, "quarantine_ms", c.scheduler.quarantine_duration.count()));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("'" + path + "': " + e.what());
  }
  return c;
}

struct TrackerServer::Impl {
  explicit Impl(TrackerConfig c)
      : config(std::move(c)),
        state(config.tokens, config.scheduler, config.heartbeat_ms, config.client_heartbeat_ms),
        acceptor(ioc),
        tick_timer(ioc) {}

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
  }

  void do_accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec != net::error::operation_aborted) spdlog::warn("accept failed: {}", ec.message());
        if (!acceptor.is_open()) return;
      } else {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<HttpSession>(std::move(socket), state, config)->run();
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
  bool stopping = false;
};

TrackerServer::TrackerServer(TrackerConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {
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
  return "ws://" + impl_->config.host + ":" + std::to_string(port_) + "/ws";
}

std::string TrackerServer::http_url() const {
  return "http://" + impl_->config.host + ":" + std::to_string(port_) + "/";
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
