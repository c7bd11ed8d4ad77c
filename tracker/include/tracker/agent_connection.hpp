/// \file agent_connection.hpp
/// The agent side of the tracker protocol: connect, say hello with keys and device info, take
/// one job at a time, hand it to an executor, send the result back; reconnect with exponential
/// backoff whenever the tracker goes away. Used by `webtune agent` (executor: the isolated GL
/// runtime) and by bench/tracker_load (thousands of no-op agents on one io_context).
#pragma once

#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace webtune::tracker {

struct AgentOptions {
  std::string url;  ///< ws://host:port/ws
  std::vector<std::string> keys;
  std::string token, name;
  boost::json::object device;
  /// The job kinds said in the hello ("job_kinds", MODEL_JOBS.md), e.g. {"kernel", "model"};
  /// empty: the field is left out (the tracker takes it as {"kernel"}).
  std::vector<std::string> job_kinds;
  std::chrono::milliseconds backoff_initial{200}, backoff_max{5000};
  bool reconnect = true;  ///< false: stop after the first disconnect
};

/// Runs one job: gets the job's "input" (MeasureInput JSON) and returns the MeasureResult JSON.
/// Must not throw (wrap errors into a result).
using JobExecutor = std::function<boost::json::object(const boost::json::value& input)>;

class AgentConnection {
 public:
  /// `inline_executor`: run the executor on the io_context thread (cheap no-op executors);
  /// otherwise on a worker thread of this connection, so heartbeats keep flowing while a kernel
  /// runs.
  AgentConnection(boost::asio::io_context& ioc, AgentOptions options, JobExecutor executor,
                  bool inline_executor = false);
  ~AgentConnection();
  AgentConnection(const AgentConnection&) = delete;
  AgentConnection& operator=(const AgentConnection&) = delete;

  /// Starts connecting (asynchronously, on the io_context).
  void start();
  /// Closes the connection and stops reconnecting. Call on the io_context's thread, or post it.
  void stop();

  uint64_t jobs_done() const;
  uint64_t connects() const;  ///< successful handshakes so far
  bool connected() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace webtune::tracker
