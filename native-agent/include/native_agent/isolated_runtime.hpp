/// \file isolated_runtime.hpp
/// A GlRuntime in a worker process, so a kernel that hangs or crashes the driver costs one trial
/// and not the agent.
///
/// The worker is forked at construction (before this process touches EGL), creates its own
/// context and serves length-prefixed JSON requests over a pipe pair. A measurement that
/// outlives its timeout gets the worker SIGKILLed and is RUN_TIMEOUT; a worker that dies is
/// RUNTIME_DEVICE; either way a fresh worker is forked for the next candidate.
#pragma once

#include <sys/types.h>

#include <string>

#include "codegen/measure.hpp"
#include "native_agent/egl_context.hpp"

namespace webtune {

class IsolatedRuntime {
 public:
  /// Forks the worker and waits for its device info; throws std::runtime_error when the worker
  /// cannot create a context (the message is the worker's).
  IsolatedRuntime();
  ~IsolatedRuntime();
  IsolatedRuntime(const IsolatedRuntime&) = delete;
  IsolatedRuntime& operator=(const IsolatedRuntime&) = delete;

  const GlDeviceInfo& info() const { return info_; }
  /// Measures one input in the worker; never throws for a bad kernel.
  MeasureResult measure(const MeasureInput& input);
  /// How many times the worker was replaced after a timeout or a crash.
  int restarts() const { return restarts_; }

 private:
  void start_worker();
  void stop_worker();

  pid_t pid_ = -1;
  int to_worker_ = -1, from_worker_ = -1;
  GlDeviceInfo info_;
  int restarts_ = 0;
};

}  // namespace webtune
