/// \file isolated_runtime.hpp
/// A GlRuntime in a worker process, so a kernel that hangs or crashes the driver costs one trial
/// and not the agent.
///
/// The worker is forked at construction (before this process touches EGL), creates its own
/// context and serves length-prefixed JSON requests over a pipe pair. A measurement that
/// outlives its timeout gets the worker SIGKILLed and is RUN_TIMEOUT; a worker that dies is
/// RUNTIME_DEVICE; either way a fresh worker is forked for the next candidate.
///
/// Protocol (both directions): a uint32 little-endian byte count, then that many bytes of JSON.
/// The worker's first message is {"info": GlDeviceInfo} or {"error": "why no context"}; then
/// each request is MeasureInput::to_json and each reply MeasureResult::to_json. A request that is
/// an object with a "kind" field (a model job, native_agent/model_job.hpp) goes instead to the
/// WorkerRequestHandler given at construction, in the worker, under the same deadline and kill
/// rules (run_request).
/// The "pipe pair" is one AF_UNIX stream socketpair: send() with MSG_NOSIGNAL lets the parent
/// survive a dead worker without changing its process-wide SIGPIPE disposition.
///
/// The hard deadline of a measurement is options.timeout_s plus a margin for compiling; a
/// timeout_s ≤ 0 means no deadline. fork() is safe from a multithreaded process: the child only
/// runs the worker loop and leaves with _exit. Not thread-safe itself: one measure() at a time.
#pragma once

#include <sys/types.h>

#include <boost/json/fwd.hpp>
#include <functional>
#include <string>

#include "codegen/measure.hpp"
#include "native_agent/egl_context.hpp"

namespace webtune {

/// Runs a request other than a kernel measurement in the worker process, on its own thread of
/// control (the worker's GlRuntime context is made current again before the next kernel). Must
/// not throw: failures are results.
using WorkerRequestHandler = std::function<MeasureResult(const boost::json::object& request)>;

class IsolatedRuntime {
 public:
  /// Forks the worker and waits for its device info; throws std::runtime_error when the worker
  /// cannot create a context (the message is the worker's), or when this process holds a live
  /// EglContext (a forked worker would inherit the driver's state without its threads and hang).
  /// `other_requests`: the worker's handler of requests with a "kind" (none: such requests are
  /// answered UNKNOWN).
  explicit IsolatedRuntime(WorkerRequestHandler other_requests = {});
  ~IsolatedRuntime();
  IsolatedRuntime(const IsolatedRuntime&) = delete;
  IsolatedRuntime& operator=(const IsolatedRuntime&) = delete;

  const GlDeviceInfo& info() const { return info_; }
  /// Measures one input in the worker; never throws for a bad kernel.
  MeasureResult measure(const MeasureInput& input);
  /// Sends `request` (an object with a "kind") to the worker's WorkerRequestHandler and waits
  /// for its result, at most `timeout_s` + the hard-deadline margin (≤ 0: no deadline); past it
  /// the worker is SIGKILLed and replaced and the result is RUN_TIMEOUT, naming `what` ("model
  /// job"). Never throws for a failing request.
  MeasureResult run_request(const boost::json::object& request, double timeout_s,
                            const std::string& what);
  /// How many times the worker was replaced after a timeout or a crash.
  int restarts() const { return restarts_; }

 private:
  /// Forks a worker and waits for its hello; throws std::runtime_error on failure.
  void start_worker();
  /// Closes the channel, lets the worker exit (SIGKILL after a grace period) and reaps it.
  void stop_worker();
  /// SIGKILLs (when `kill_now`) or waits a little for the worker, reaps it, closes the channel
  /// and says how it ended ("was killed by signal 11 (Segmentation fault)", ...).
  std::string reap_worker(bool kill_now);
  /// Sends one request body and waits for the reply (see measure and run_request).
  MeasureResult exchange(const std::string& body, double timeout_s, const std::string& what);
  /// After a timeout or a crash: counts a restart and forks a fresh worker (a failure is logged
  /// and retried at the next measure()).
  void restart_worker();

  pid_t pid_ = -1;
  int channel_ = -1;  ///< the parent's end of the socketpair
  GlDeviceInfo info_;
  int restarts_ = 0;
  WorkerRequestHandler other_requests_;
};

}  // namespace webtune
