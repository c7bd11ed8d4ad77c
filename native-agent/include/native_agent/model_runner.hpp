/// \file model_runner.hpp
/// Runs a model package (docs/package.md) of target gles-frag or gles-compute on a headless EGL
/// context: what `webtune run --model DIR` does, the "local OpenGL" way of issue 16.
///
/// Load (the constructor), once: reads DIR/manifest.json (deploy/package.hpp), DIR/weights.bin
/// and every DIR/kernels/NNN.json a step names; creates every slot of the memory pool (storage
/// buffers of `floats` floats; R32F / RGBA32F textures of the slot's size); uploads every
/// weight into its own buffer or texture; validates and compiles every distinct kernel once,
/// creating the scratch buffers a gles-compute kernel asks for (KernelArtifact::scratch_floats /
/// scratch_counters: k_groups; one set per kernel file, counters zero-filled once, bound at
/// SSBO bindings 5 and 6 by every step that runs it);
/// and resolves each kernel step's bindings (textures on units 0, 1, … or storage buffers at
/// bindings 0, 1, 3, 4, …, the output's render targets or buffer) so that a run only binds and
/// draws / dispatches. The GL work is gl_kernel.hpp's, the same code that measures candidates.
///
/// run(input): the package's steps in order. upload packs the row-major input into its value's
/// storage (TensorLayout::pack for a texture, plain floats for a buffer); a kernel step binds its
/// value and weight inputs and writes its output value's slot(s); alias does nothing; download
/// reads the output back and unpacks it to row-major (OutputLayout::unpack for render targets,
/// the inverse of TensorLayout::pack for a texture, plain floats for a buffer). The run ends
/// with glFinish, so its wall time is the model's end-to-end latency.
///
/// Errors are ModelRunError, whose message names the step index, its kind, node and kernel file
/// (e.g. "step 7 (kernel kernels/003.json, node '/layer1/layer1.0/conv1/Conv'): fragment shader
/// failed to compile: …"), or the file or field at fault during load: a missing or unreadable
/// file, a bad manifest, a package of another target (webgpu, wasm), weights.bin shorter than a
/// weight, a binding that does not fit its kernel (count, size, kind of storage), a compile or
/// link failure, a GL error, an input of the wrong size. The first run checks glGetError after
/// every step; later runs check once at their end (and name the run), unless
/// set_check_every_step(true). Vertex-stage (transform feedback) kernels are refused: packages
/// never contain them.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "native_agent/egl_context.hpp"

namespace webtune {

namespace deploy {
struct Manifest;
}

/// A failure to load or run a package; `step()` is the step's index, or −1 when no step is
/// involved (a missing manifest, weights.bin, an input of the wrong size).
class ModelRunError : public std::runtime_error {
 public:
  ModelRunError(int step, const std::string& message) : std::runtime_error(message), step_(step) {}
  int step() const { return step_; }

 private:
  int step_;
};

class ModelRunner {
 public:
  /// Loads the package in directory `dir` onto `context` (made current on this thread; owned).
  /// Throws ModelRunError (see the file comment).
  ModelRunner(const std::string& dir, std::unique_ptr<EglContext> context);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const deploy::Manifest& manifest() const;
  const GlDeviceInfo& info() const;
  /// The graph input's shape and element count (the package has exactly one input).
  const std::vector<int64_t>& input_shape() const;
  int64_t input_elements() const;
  /// The graph output's shape (exactly one output).
  const std::vector<int64_t>& output_shape() const;
  /// Distinct kernels compiled, and kernel steps (draws / dispatches) per run.
  int kernels() const;
  int kernel_steps() const;

  /// Runs the model on `input` (row-major, input_elements() floats) and returns its output
  /// (row-major, the output shape's element count). Throws ModelRunError for an input of the
  /// wrong size or a failing step; after a failure the runner may be run again.
  std::vector<float> run(const std::vector<float>& input);

  /// Check glGetError after every step of every run (the first run always does).
  void set_check_every_step(bool on);

  /// One step's share of a profiled run.
  struct StepTime {
    int step = 0;   ///< index into manifest().steps
    double ms = 0;  ///< see RunProfile::gpu_timestamps
  };
  /// What profile() measured.
  struct RunProfile {
    std::vector<StepTime> steps;  ///< every upload, kernel and download step, in order
    /// true: each step's time is the GPU time between timestamps written before and after it
    /// (GL_EXT_disjoint_timer_query's glQueryCounterEXT), so the steps' sum leaves out the
    /// host's own time (driver calls, waiting for the read-back). false (no such extension, or
    /// the GPU reported a disjoint operation): the host time of the step run alone, glFinish
    /// after it, which includes one submit-and-wait per step.
    bool gpu_timestamps = false;
    double total_ms = 0;  ///< host time of the whole profiled run (ms)
  };
  /// Runs the model once like run(), timing every step (see RunProfile), to explain where its
  /// end-to-end latency goes beside the tasks' recorded costs. Throws as run() does.
  RunProfile profile(const std::vector<float>& input);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace webtune
