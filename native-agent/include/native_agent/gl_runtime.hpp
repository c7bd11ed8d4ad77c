/// \file gl_runtime.hpp
/// Runs and checks one candidate on the current GL context, in this process.
///
/// Steps of GlRuntime::measure: compile and link (failure: COMPILE_DEVICE with the driver's log),
/// generate the seeded inputs and upload them in the artifact's layouts, run once untimed
/// (TVM's warm-up), read back and compare against the input's reference samples (WRONG_ANSWER
/// otherwise), then time `repeat` × `number` runs with glFinish and a steady clock (GL timer
/// queries are wrong on llvmpipe). A compute kernel with scratch buffers (KernelArtifact::
/// scratch_floats / scratch_counters, bindings 5 and 6, created once per trial, counters
/// zero-filled once) keeps them for all its runs, and is run and checked once more after the
/// timed runs, into a NaN-filled output: state the kernel fails to reset shows up as
/// WRONG_ANSWER. GL errors are RUNTIME_DEVICE. It cannot interrupt a kernel
/// that hangs: IsolatedRuntime does that.
#pragma once

#include <memory>

#include "codegen/measure.hpp"
#include "native_agent/egl_context.hpp"

namespace webtune {

class GlRuntime {
 public:
  /// Takes ownership of a current context. Throws std::runtime_error if it is older than ES 3.0.
  explicit GlRuntime(std::unique_ptr<EglContext> context);
  ~GlRuntime();

  const GlDeviceInfo& info() const;
  /// Measures one input. Never throws for a bad kernel: every failure is a MeasureResult
  /// with its error number and message.
  MeasureResult measure(const MeasureInput& input);

 private:
  std::unique_ptr<EglContext> context_;
};

}  // namespace webtune
