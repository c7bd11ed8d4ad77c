/// \file tracker_client.cpp
/// Blocking tracker peer over Beast: each wait runs the private io_context for at most the
/// timeout, so reads can time out without a second thread.
#include "tracker/tracker_client.hpp"

#include "beast.hpp"
#include "client_transport.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

TrackerUrl TrackerUrl::parse(const std::string& url) {
  TrackerUrl u;
  std::string rest;
  if (url.rfind("ws://", 0) == 0) {
    rest = url.substr(5);
  } else if (url.rfind("wss://", 0) == 0) {
    rest = url.substr(6);
    u.tls = true;
  } else {
    throw std::invalid_argument("tracker URL '" + url + "' must start with ws:// or wss://");
  }
  const auto slash = rest.find('/');
  u.path = slash == std::string::npos ? "/ws" : rest.substr(slash);
  const std::string authority = rest.substr(0, slash);
  const auto colon = authority.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == authority.size())
    throw std::invalid_argument("tracker URL '" + url + "' needs host:port");
  u.host = authority.substr(0, colon);
  u.port = authority.substr(colon + 1);
  return u;
}

struct TrackerClient::Impl {
  net::io_context ioc;
  std::unique_ptr<ClientWebsocket> ws;
  beast::flat_buffer buffer;
  std::deque<bj::object> pending;
  bool is_closed = false;
  bool read_pending = false, read_done = false;
  beast::error_code read_ec;
  int code = 0;
  std::string reason;

  // Runs the io_context until `done` or the timeout; returns whether `done` became true.
  bool run_until(const bool& done, std::chrono::milliseconds timeout) {
    ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done && std::chrono::steady_clock::now() < deadline) {
      ioc.run_one_until(deadline);
      if (ioc.stopped()) ioc.restart();
    }
    return done;
  }

  void connect(const TrackerUrl& url, std::chrono::milliseconds timeout) {
    bool done = false;
    beast::error_code result;
    std::string stage;
    tcp::resolver resolver(ioc);
    auto endpoints = resolver.resolve(url.host, url.port, result);
    if (result) throw std::runtime_error("cannot resolve " + url.host + ": " + result.message());
    ws = std::make_unique<ClientWebsocket>(ioc.get_executor(), url);
    ws->async_open(endpoints, timeout, [&](beast::error_code ec, std::string where) {
      result = ec;
      stage = std::move(where);
      done = true;
    });
    if (!run_until(done, timeout + std::chrono::milliseconds(100)))
      throw std::runtime_error("timed out connecting to the tracker at " + url.host + ":" +
                               url.port);
    if (result)
      throw std::runtime_error("cannot connect to the tracker at " + url.host + ":" + url.port +
                               " (" + stage + "): " + result.message());
  }

  void write(const std::string& frame, bool text) {
    if (is_closed) throw std::runtime_error("the tracker closed the connection");
    bool done = false;
    beast::error_code result;
    ws->visit([&](auto& s) {
      s.text(text);
      s.async_write(net::buffer(frame), [&](beast::error_code ec, size_t) {
        result = ec;
        done = true;
      });
    });
    run_until(done, std::chrono::seconds(30));
    if (!done || result)
      throw std::runtime_error("send to tracker failed: " +
                               (done ? result.message() : std::string("timed out")));
  }

  // Reads one frame; nullopt on timeout. A read that times out stays pending and is picked up
  // by the next call: cancelling it would fail the WebSocket stream for good.
  std::optional<bj::object> read(std::chrono::milliseconds timeout) {
    if (!pending.empty()) {
      bj::object front = std::move(pending.front());
      pending.pop_front();
      return front;
    }
    if (is_closed) throw std::runtime_error(closed_message());
    if (!read_pending) {
      read_pending = true;
      read_done = false;
      ws->visit([this](auto& s) {
        s.async_read(buffer, [this](beast::error_code ec, size_t) {
          read_ec = ec;
          read_done = true;
        });
      });
    }
    if (!run_until(read_done, timeout)) return std::nullopt;
    read_pending = false;
    if (read_ec) {
      is_closed = true;
      ws->visit([this](auto& s) {
        code = static_cast<int>(s.reason().code);
        reason = std::string(s.reason().reason.c_str());
      });
      throw std::runtime_error(closed_message() + " (" + read_ec.message() + ")");
    }
    std::string text = beast::buffers_to_string(buffer.data());
    buffer.consume(buffer.size());
    return parse_message(text);
  }

  std::string closed_message() const {
    return "the tracker closed the connection (code " + std::to_string(code) +
           (reason.empty() ? "" : ": " + reason) + ")";
  }
};

TrackerClient::TrackerClient() : impl_(std::make_unique<Impl>()) {}

TrackerClient::TrackerClient(const std::string& url, const Hello& hello,
                             std::chrono::milliseconds timeout)
    : TrackerClient() {
  impl_->connect(TrackerUrl::parse(url), timeout);
  impl_->write(bj::serialize(hello.to_json()), true);
  try {
    bj::object welcome = await_type("welcome", timeout);
    session_ = get_u64(welcome, "session");
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("the tracker refused the handshake: ") + e.what());
  }
}

std::unique_ptr<TrackerClient> TrackerClient::connect_raw(const std::string& url,
                                                          std::chrono::milliseconds timeout) {
  std::unique_ptr<TrackerClient> c(new TrackerClient());
  c->impl_->connect(TrackerUrl::parse(url), timeout);
  return c;
}

TrackerClient::~TrackerClient() {
  try {
    close();
  } catch (...) {
  }
}

bj::object TrackerClient::await_type(const std::string& type, std::chrono::milliseconds timeout) {
  std::deque<bj::object> others;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    // Buffered frames come first; those of other types are put back in order afterwards.
    std::optional<bj::object> m = impl_->read(left);
    if (!m) break;
    const std::string t = message_type(*m);
    if (t == type) {
      for (auto it = others.rbegin(); it != others.rend(); ++it) impl_->pending.push_front(*it);
      return std::move(*m);
    }
    if (t == "error") {
      for (auto it = others.rbegin(); it != others.rend(); ++it) impl_->pending.push_front(*it);
      throw std::runtime_error(std::string(m->at("code").as_string()) + ": " +
                               std::string(m->at("message").as_string()));
    }
    others.push_back(std::move(*m));
  }
  for (auto it = others.rbegin(); it != others.rend(); ++it) impl_->pending.push_front(*it);
  throw std::runtime_error("no '" + type + "' from the tracker in time");
}

std::vector<std::pair<uint64_t, uint64_t>> TrackerClient::submit(
    const std::vector<SubmitItem>& items, int priority) {
  bj::array batch;
  for (const SubmitItem& item : items) {
    bj::object o{
        {"tag", item.tag}, {"key", item.key}, {"lease_ms", item.lease_ms}, {"input", item.input}};
    if (item.priority) o["priority"] = *item.priority;
    if (!item.avoid_agent.empty()) o["avoid_agent"] = item.avoid_agent;
    batch.push_back(std::move(o));
  }
  impl_->write(bj::serialize(bj::object{
                   {"type", "submit"}, {"priority", priority}, {"batch", std::move(batch)}}),
               true);
  bj::object accepted = await_type("accepted", std::chrono::seconds(30));
  std::vector<std::pair<uint64_t, uint64_t>> ids;
  for (const bj::value& pair : accepted.at("jobs").as_array())
    ids.emplace_back(pair.as_array()[0].to_number<uint64_t>(),
                     pair.as_array()[1].to_number<uint64_t>());
  return ids;
}

std::optional<ClientResult> TrackerClient::next_result(std::chrono::milliseconds timeout) {
  bj::object m;
  try {
    m = await_type("result", timeout);
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind("no 'result'", 0) == 0) return std::nullopt;
    throw;
  }
  ClientResult r;
  r.job = get_u64(m, "job");
  r.tag = get_u64(m, "tag");
  r.attempt = static_cast<int>(get_u64(m, "attempt"));
  if (auto a = m.find("agent"); a != m.end() && a->value().is_string())
    r.agent = std::string(a->value().get_string());
  if (auto a = m.find("agent_session"); a != m.end() && a->value().is_number())
    r.agent_session = a->value().to_number<uint64_t>();
  if (auto k = m.find("key"); k != m.end() && k->value().is_string())
    r.key = std::string(k->value().get_string());
  r.result = m.at("result").as_object();
  return r;
}

bj::object TrackerClient::summary(std::chrono::milliseconds timeout) {
  impl_->write(R"({"type":"summary"})", true);
  return await_type("summary", timeout);
}

bj::object TrackerClient::agents(const std::string& key, std::chrono::milliseconds timeout) {
  impl_->write(bj::serialize(bj::object{{"type", "agents"}, {"key", key}}), true);
  return await_type("agents", timeout);
}

void TrackerClient::cancel(uint64_t job) {
  impl_->write(bj::serialize(bj::object{{"type", "cancel"}, {"job", job}}), true);
}

void TrackerClient::send_text(const std::string& text) {
  impl_->write(text, true);
}
void TrackerClient::send_binary(const std::string& bytes) {
  impl_->write(bytes, false);
}

std::optional<bj::object> TrackerClient::next_message(std::chrono::milliseconds timeout) {
  return impl_->read(timeout);
}

bool TrackerClient::closed() const {
  return impl_->is_closed;
}
int TrackerClient::close_code() const {
  return impl_->code;
}

void TrackerClient::close() {
  if (impl_->is_closed) return;
  impl_->is_closed = true;
  if (!impl_->ws) return;
  beast::error_code ec;
  impl_->ws->tcp().expires_after(std::chrono::seconds(2));
  bool done = false;
  impl_->ws->visit([&](auto& s) {
    s.async_close(websocket::close_code::normal, [&](beast::error_code e) {
      ec = e;
      done = true;
    });
  });
  impl_->run_until(done, std::chrono::seconds(2));
}

}  // namespace webtune::tracker
