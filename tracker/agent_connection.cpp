/// \file agent_connection.cpp
/// Async agent peer: connect → hello → read jobs → execute → write results, with backoff.
#include "tracker/agent_connection.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <thread>

#include "beast.hpp"
#include "client_transport.hpp"
#include "tracker/protocol.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

struct AgentConnection::Impl : std::enable_shared_from_this<Impl> {
  Impl(net::io_context& io, AgentOptions o, JobExecutor e, bool inline_exec)
      : ioc(io),
        options(std::move(o)),
        executor(std::move(e)),
        inline_executor(inline_exec),
        resolver(io),
        retry_timer(io),
        backoff(options.backoff_initial) {}

  net::io_context& ioc;
  AgentOptions options;
  JobExecutor executor;
  bool inline_executor;
  tcp::resolver resolver;
  net::steady_timer retry_timer;
  std::unique_ptr<ClientWebsocket> ws;
  beast::flat_buffer buffer;
  std::deque<std::shared_ptr<const std::string>> queue;
  bool writing = false, stopped = false, is_connected = false;
  std::chrono::milliseconds backoff;
  std::atomic<uint64_t> done{0}, handshakes{0};
  uint64_t generation = 0;  // connection attempt counter, so stale handlers do nothing
  std::thread worker;

  void start() {
    if (stopped) return;
    ++generation;
    TrackerUrl url = TrackerUrl::parse(options.url);
    try {
      ws = std::make_unique<ClientWebsocket>(net::make_strand(ioc), url);
    } catch (const std::exception& e) {  // a CA file that cannot be loaded: no use retrying
      spdlog::error("agent: {}", e.what());
      stopped = true;
      return;
    }
    buffer.clear();
    queue.clear();
    writing = false;
    auto self = shared_from_this();
    const uint64_t gen = generation;
    resolver.async_resolve(
        url.host, url.port, [self, gen, url](beast::error_code ec, tcp::resolver::results_type r) {
          if (gen != self->generation) return;
          if (ec) return self->retry("resolve: " + ec.message());
          self->ws->async_open(r, std::chrono::seconds(10),
                               [self, gen](beast::error_code ec2, const std::string& stage) {
                                 if (gen != self->generation) return;
                                 if (ec2) return self->retry(stage + ": " + ec2.message());
                                 self->say_hello();
                               });
        });
  }

  void say_hello() {
    Hello hello;
    hello.role = Role::kAgent;
    hello.token = options.token;
    hello.name = options.name;
    hello.keys = options.keys;
    hello.device = options.device;
    bj::object frame = hello.to_json();
    if (!options.job_kinds.empty()) {
      bj::array kinds;
      for (const std::string& kind : options.job_kinds) kinds.emplace_back(kind);
      frame["job_kinds"] = std::move(kinds);
    }
    send(bj::serialize(frame));
    read();
  }

  void retry(const std::string& why) {
    const bool was_connected = is_connected;
    is_connected = false;
    if (stopped) return;
    if (!options.reconnect && handshakes > 0) {
      stopped = true;
      return;
    }
    if (was_connected) backoff = options.backoff_initial;
    spdlog::debug("agent: {}; reconnecting in {} ms", why, backoff.count());
    ++generation;  // drop handlers of the old connection
    if (ws) {
      beast::error_code ignored;
      ws->tcp().socket().close(ignored);
    }
    retry_timer.expires_after(backoff);
    backoff = std::min(backoff * 2, options.backoff_max);
    auto self = shared_from_this();
    retry_timer.async_wait([self](beast::error_code ec) {
      if (!ec) self->start();
    });
  }

  void read() {
    auto self = shared_from_this();
    const uint64_t gen = generation;
    ws->visit([&](auto& s) {
      s.async_read(buffer, [self, gen](beast::error_code ec, size_t) {
        if (gen != self->generation) return;
        if (ec) return self->retry("connection lost: " + ec.message());
        std::string text = beast::buffers_to_string(self->buffer.data());
        self->buffer.consume(self->buffer.size());
        self->on_message(text);
        if (gen == self->generation) self->read();
      });
    });
  }

  void on_message(const std::string& text) {
    bj::object m;
    try {
      m = parse_message(text);
    } catch (const ProtocolError& e) {
      spdlog::warn("agent: bad frame from tracker: {}", e.what());
      return;
    }
    const std::string type = message_type(m);
    if (type == "welcome") {
      is_connected = true;
      ++handshakes;
      backoff = options.backoff_initial;
      spdlog::info("agent: joined the tracker at {} as session {}", options.url,
                   bj::serialize(m.at("session")));
    } else if (type == "job") {
      run_job(m);
    } else if (type == "error") {
      spdlog::warn("agent: tracker says {}: {}", bj::serialize(m["code"]),
                   bj::serialize(m["message"]));
    }
    // "cancel": the running kernel cannot be interrupted; the tracker discards its result.
  }

  void run_job(const bj::object& m) {
    uint64_t job = 0, attempt = 0;
    try {
      job = get_u64(m, "job");
      if (m.contains("attempt")) attempt = get_u64(m, "attempt");
    } catch (const ProtocolError&) {
      return;
    }
    bj::value input = m.contains("input") ? m.at("input") : bj::value();
    if (inline_executor) {
      finish_job(job, attempt, executor(input));
      return;
    }
    if (worker.joinable()) worker.join();  // the previous job's thread has already posted back
    auto self = shared_from_this();
    const uint64_t gen = generation;
    worker = std::thread([self, gen, job, attempt, input = std::move(input)] {
      bj::object result = self->executor(input);
      net::post(self->ioc, [self, gen, job, attempt, result = std::move(result)]() mutable {
        // A result for a connection that has since dropped is lost with it: the tracker has
        // already re-queued the job.
        if (gen == self->generation) self->finish_job(job, attempt, std::move(result));
      });
    });
  }

  // The attempt is echoed, so that the tracker can tell this answer from one to a later lease
  // of the same job.
  void finish_job(uint64_t job, uint64_t attempt, bj::object result) {
    ++done;
    bj::object message{{"type", "result"}, {"job", job}, {"result", std::move(result)}};
    if (attempt > 0) message["attempt"] = attempt;
    send(bj::serialize(message));
  }

  void send(std::string frame) {
    queue.push_back(std::make_shared<const std::string>(std::move(frame)));
    if (!writing) write();
  }

  void write() {
    writing = true;
    auto self = shared_from_this();
    const uint64_t gen = generation;
    ws->visit([&](auto& s) {
      s.text(true);
      s.async_write(net::buffer(*queue.front()), [self, gen](beast::error_code ec, size_t) {
        if (gen != self->generation) return;
        self->writing = false;
        if (ec) return self->retry("write failed: " + ec.message());
        self->queue.pop_front();
        if (!self->queue.empty()) self->write();
      });
    });
  }

  void stop() {
    stopped = true;
    is_connected = false;
    ++generation;
    retry_timer.cancel();
    resolver.cancel();
    if (ws) {
      beast::error_code ignored;
      ws->tcp().socket().close(ignored);
    }
  }
};

AgentConnection::AgentConnection(net::io_context& ioc, AgentOptions options, JobExecutor executor,
                                 bool inline_executor)
    : impl_(std::make_shared<Impl>(ioc, std::move(options), std::move(executor), inline_executor)) {
}

AgentConnection::~AgentConnection() {
  if (impl_->worker.joinable()) impl_->worker.join();
}

void AgentConnection::start() {
  auto impl = impl_;
  net::post(impl->ioc, [impl] { impl->start(); });
}

void AgentConnection::stop() {
  impl_->stop();
}
uint64_t AgentConnection::jobs_done() const {
  return impl_->done;
}
uint64_t AgentConnection::connects() const {
  return impl_->handshakes;
}
bool AgentConnection::connected() const {
  return impl_->is_connected;
}

}  // namespace webtune::tracker
