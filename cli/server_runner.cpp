/// \file server_runner.cpp
/// The --listen parser and the signal loop of the long-running commands.
#include "server_runner.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <stdexcept>
#include <thread>

namespace webtune::cli {

void apply_listen(const std::string& listen, tracker::TrackerConfig& config) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw std::invalid_argument("--listen takes HOST:PORT, not '" + listen + "'");
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535)
    throw std::invalid_argument("--listen: bad port in '" + listen + "'");
  config.host = listen.substr(0, colon);
  config.port = static_cast<uint16_t>(port);
}

void run_until_signal(tracker::TrackerServer& server) {
  // Signals are caught on a small io_context of their own; stop() is thread-safe.
  boost::asio::io_context signals_ioc;
  boost::asio::signal_set signals(signals_ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: shutting down", signal);
    server.stop();
  });
  std::thread signal_thread([&] { signals_ioc.run(); });
  server.run();
  signals_ioc.stop();
  signal_thread.join();
}

}  // namespace webtune::cli
