/// \file gl_runtime.cpp
/// One trial on the current OpenGL ES context: compile, upload, run, check, time, clean up.
///
/// A trial is a throw-away object (Trial below) that owns every GL object it creates, so that any
/// early exit — a compile error, a wrong answer, a GL error — still deletes them: an agent runs
/// thousands of trials in one context and must not leak. Failures travel as MeasureError
/// exceptions inside the trial and come out of GlRuntime::measure as a MeasureResult.
///
/// Three kinds of kernel: fragment shaders (gles-frag) drawn into float render targets, vertex
/// shaders (gles-frag with output.feedback) whose outputs are captured by transform feedback
/// into one buffer, and compute shaders (gles-compute) writing a storage buffer. The first two
/// read their inputs from the same textures. The GL pieces themselves (checking the artifact,
/// compiling, textures, buffers, render targets, the run, reading back) are gl_kernel.hpp's,
/// shared with the model runner (model_runner.hpp); the trial adds its seeded inputs, the
/// reference check and the timing. A kernel with scratch buffers (gles-compute k_groups) keeps
/// them for all its runs and is checked once more after the timed runs (gl_runtime.hpp).
#include "native_agent/gl_runtime.hpp"

#include <GLES3/gl32.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/kernel_artifact.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "gl_kernel.hpp"

namespace webtune {
namespace {

using gl::check_gl;
using gl::drain_gl_errors;
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string seconds_string(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

class Trial {
 public:
  Trial(const MeasureInput& input, const GlDeviceInfo& info, Clock::time_point start)
      : input_(input),
        artifact_(input.artifact),
        info_(info),
        start_(start),
        fragment_(input.artifact.target == Target::kGlesFrag),
        feedback_(fragment_ && input.artifact.output.feedback) {}

  std::vector<double> run() {
    if (std::string stale = drain_gl_errors(); !stale.empty()) {
      spdlog::warn("GL errors left over before this trial were dropped: {}", stale);
    }
    validate();
    compile();
    upload_inputs();
    if (feedback_) {
      prepare_feedback_output();
    } else {
      fragment_ ? prepare_fragment_outputs() : prepare_compute_output();
    }
    check_gl("setting up the kernel's inputs and outputs");

    // The checked run is also TVM's untimed warm-up run. Outputs start as NaN so that a kernel
    // that skips some outputs cannot pass with values left from an earlier run.
    fill_outputs_with_nan();
    run_once();
    glFinish();
    check_gl("running the kernel");
    check_output();
    check_deadline(0, 0);
    std::vector<double> costs = time_runs();
    if (has_scratch()) check_after_timed_runs();
    return costs;
  }

 private:
  [[noreturn]] static void instantiation(const std::string& message) {
    throw MeasureError(MeasureErrorNo::kInstantiation, message);
  }

  bool has_scratch() const {
    return artifact_.scratch_floats > 0 || artifact_.scratch_counters > 0;
  }

  // ---- checks before touching GL: a bad artifact is reported as such, not as a GL error ----
  void validate() {
    const Workload& workload = input_.workload;
    try {
      workload.validate();
    } catch (const std::exception& e) {
      instantiation(std::string("invalid workload: ") + e.what());
    }
    const size_t expected = static_cast<size_t>(workload.input_count());
    if (artifact_.inputs.size() != expected) {
      std::string names;
      for (int i = 0; i < workload.input_count(); ++i)
        names += (i ? ", " : "") + workload.input_name(i);
      instantiation("the artifact has " + std::to_string(artifact_.inputs.size()) +
                    " input layouts; workload " + workload.key() + " has " +
                    std::to_string(expected) + " inputs (" + names + ")");
    }
    for (int i = 0; i < workload.input_count(); ++i) {
      const TensorLayout& layout = artifact_.inputs[static_cast<size_t>(i)];
      if (layout.shape != workload.input_shape(i)) {
        instantiation("artifact input " + std::to_string(i) + " (" + workload.input_name(i) +
                      ") has shape " + shape_string(layout.shape) + " but the workload's " +
                      workload.input_name(i) + " is " + shape_string(workload.input_shape(i)));
      }
    }
    const OutputLayout& output = artifact_.output;
    if (output.elements() != workload.output_size()) {
      instantiation("the artifact's output is " + std::to_string(output.rows) + "x" +
                    std::to_string(output.cols) + " = " + std::to_string(output.elements()) +
                    " elements but the workload has " + std::to_string(workload.output_size()));
    }
    gl::validate_artifact(artifact_, info_);
  }

  void compile() {
    auto begin = Clock::now();
    program_ = gl::compile_program(artifact_, objects_);
    spdlog::trace("compiled in {:.1f} ms", 1e3 * seconds_between(begin, Clock::now()));
  }

  // ---- inputs ----
  std::vector<float> packed_input(int index, const std::vector<float>& logical) const {
    const TensorLayout& layout = artifact_.inputs[static_cast<size_t>(index)];
    std::vector<float> packed;
    try {
      packed = layout.pack(logical);
    } catch (const MeasureError&) {
      throw;
    } catch (const std::exception& e) {
      instantiation("cannot pack input " + std::to_string(index) + ": " + e.what());
    }
    return packed;
  }

  void upload_inputs() {
    const Workload& workload = input_.workload;
    const std::vector<std::vector<float>> logical = seeded_inputs(workload, input_.seed);
    for (int i = 0; i < workload.input_count(); ++i) {
      const TensorLayout& layout = artifact_.inputs[static_cast<size_t>(i)];
      if (layout.layers > 0)
        instantiation("input " + std::to_string(i) +
                      " is another kernel's quad layers, which only a model package binds");
      std::vector<float> packed = packed_input(i, logical[i]);
      if (fragment_) {
        size_t expected = static_cast<size_t>(layout.width * layout.height * layout.channels());
        if (packed.size() != expected) {
          instantiation("input " + std::to_string(i) + " packs into " +
                        std::to_string(packed.size()) + " floats, not the " +
                        std::to_string(expected) + " of its texture");
        }
        // Input i on texture unit i, where sampler in<i> reads it (bound for every run).
        gl::create_texture(objects_, GL_TEXTURE0 + static_cast<GLenum>(i), layout.width,
                           layout.height, layout.channels(), packed.data());
      } else {
        size_t needed = static_cast<size_t>(layout.packed_elements() * layout.channels());
        if (packed.size() < needed) {
          instantiation("input " + std::to_string(i) + " packs into " +
                        std::to_string(packed.size()) + " floats, fewer than its " +
                        std::to_string(needed) + " packed elements");
        }
        GLuint buffer = gl::create_storage_buffer(objects_, static_cast<int64_t>(packed.size()),
                                                  packed.data(), GL_STATIC_DRAW);
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, gl::storage_binding(i), buffer);
      }
    }
    check_gl("uploading the inputs");
  }

  // ---- outputs ----
  void prepare_fragment_outputs() {
    const OutputLayout& output = artifact_.output;
    // The first unit past the inputs for the targets, so that creating them never disturbs the
    // inputs in0 … on units 0 ….
    const GLenum unit = GL_TEXTURE0 + static_cast<GLenum>(artifact_.inputs.size());
    std::vector<GLuint> targets;
    for (int j = 0; j < output.rows_per_item; ++j) {
      targets.push_back(gl::create_texture(objects_, unit, output.width, output.height,
                                           output.channels, nullptr));
    }
    glBindTexture(GL_TEXTURE_2D, 0);
    gl::create_framebuffer(objects_, targets, output.width, output.height, output.channels);
    // All state of a run is set once here, so that a timed run is only the draw call.
    gl::set_fragment_draw_state(output.width, output.height);
    use_program();
  }

  /// Binds an empty vertex array (the kernels use gl_VertexID only) and the program (whose
  /// samplers compile_program pointed at units 0, 1, …).
  void use_program() {
    glBindVertexArray(gl::create_vertex_array(objects_));
    glUseProgram(program_);
  }

  /// Floats of the transform feedback buffer: rows_per_item varyings of `channels` per item.
  int64_t feedback_floats() const {
    const OutputLayout& output = artifact_.output;
    return output.width * output.height * output.rows_per_item * output.channels;
  }

  void prepare_feedback_output() {
    // Draw calls need a complete draw framebuffer even with the rasterizer discarding
    // everything (ES 3.0 §4.4.4.2), and a surfaceless context's default framebuffer is not: a
    // 1x1 RGBA8 target (always color-renderable) stands in for it.
    GLuint framebuffer = 0, renderbuffer = 0;
    glGenFramebuffers(1, &framebuffer);
    objects_.framebuffers.push_back(framebuffer);
    glGenRenderbuffers(1, &renderbuffer);
    objects_.renderbuffers.push_back(renderbuffer);
    glBindRenderbuffer(GL_RENDERBUFFER, renderbuffer);
    glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, 1, 1);
    glBindFramebuffer(GL_FRAMEBUFFER, framebuffer);
    glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_RENDERBUFFER, renderbuffer);
    const GLenum draw_buffer = GL_COLOR_ATTACHMENT0;
    glDrawBuffers(1, &draw_buffer);
    check_gl("creating the feedback kernel's framebuffer");
    GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
    if (status != GL_FRAMEBUFFER_COMPLETE) {
      throw MeasureError(MeasureErrorNo::kRuntimeDevice,
                         "the 1x1 RGBA8 framebuffer of a feedback kernel is incomplete: " +
                             gl::framebuffer_status_name(status));
    }

    // Its own transform feedback object, so that the buffer binding never lingers in the
    // context's default one.
    GLuint transform_feedback = 0;
    glGenTransformFeedbacks(1, &transform_feedback);
    objects_.transform_feedbacks.push_back(transform_feedback);
    glBindTransformFeedback(GL_TRANSFORM_FEEDBACK, transform_feedback);
    GLuint buffer = 0;
    glGenBuffers(1, &buffer);
    objects_.buffers.push_back(buffer);
    output_buffer_ = buffer;
    glBindBuffer(GL_TRANSFORM_FEEDBACK_BUFFER, buffer);
    glBufferData(
        GL_TRANSFORM_FEEDBACK_BUFFER,
        static_cast<GLsizeiptr>(feedback_floats()) * static_cast<GLsizeiptr>(sizeof(float)),
        nullptr, GL_DYNAMIC_READ);
    glBindBufferBase(GL_TRANSFORM_FEEDBACK_BUFFER, 0, buffer);
    check_gl("creating the transform feedback buffer");

    // All state of a run is set once here, so that a timed run is only the draw call; the
    // GlObjects destructor disables the discard again.
    glEnable(GL_RASTERIZER_DISCARD);
    use_program();
  }

  void prepare_compute_output() {
    output_buffer_ =
        gl::create_storage_buffer(objects_, artifact_.output.elements(), nullptr, GL_DYNAMIC_COPY);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, gl::kOutputBinding, output_buffer_);
    // Created once for the checked run and every timed run (kernel_artifact.hpp): the kernel
    // leaves its counters at zero after each run.
    gl::bind_scratch_buffers(gl::create_scratch_buffers(artifact_, objects_));
    glUseProgram(program_);
  }

  void fill_outputs_with_nan() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    if (feedback_) {
      std::vector<float> nans(static_cast<size_t>(feedback_floats()), nan);
      // The copy-write binding, so that the transform feedback bindings stay as they are.
      glBindBuffer(GL_COPY_WRITE_BUFFER, output_buffer_);
      glBufferSubData(GL_COPY_WRITE_BUFFER, 0, static_cast<GLsizeiptr>(nans.size() * sizeof(float)),
                      nans.data());
      glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
    } else if (fragment_) {
      const GLfloat value[4] = {nan, nan, nan, nan};
      for (int j = 0; j < artifact_.output.rows_per_item; ++j) glClearBufferfv(GL_COLOR, j, value);
    } else {
      GLsizeiptr bytes = gl::buffer_bytes(artifact_.output.elements());
      std::vector<float> nans(static_cast<size_t>(bytes) / sizeof(float), nan);
      glBindBuffer(GL_SHADER_STORAGE_BUFFER, output_buffer_);
      glBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, bytes, nans.data());
    }
    check_gl("filling the outputs with NaN");
  }

  // ---- running ----
  void run_once() { gl::run_kernel(artifact_); }

  // ---- reading back and checking ----
  std::vector<float> read_fragment_output() const {
    const OutputLayout& output = artifact_.output;
    return output.unpack(gl::read_render_targets(output.rows_per_item, output.width, output.height,
                                                 output.channels));
  }

  std::vector<float> read_compute_output() const {
    // Shader writes must be visible to the copy in read_through_staging.
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    return gl::read_through_staging(output_buffer_, artifact_.output.elements(), "output buffer");
  }

  std::vector<float> read_feedback_output() const {
    // ES 3.0 has no glGetBufferSubData; the copy waits for the captures, which glFinish has
    // completed already anyway.
    return artifact_.output.unpack(
        {gl::read_through_staging(output_buffer_, feedback_floats(), "transform feedback buffer")});
  }

  void check_output() {
    std::vector<float> output = feedback_   ? read_feedback_output()
                                : fragment_ ? read_fragment_output()
                                            : read_compute_output();
    if (output.size() != static_cast<size_t>(input_.workload.output_size())) {
      instantiation("the output layout unpacks into " + std::to_string(output.size()) +
                    " values, not the workload's " + std::to_string(input_.workload.output_size()));
    }
    if (input_.samples.empty()) {
      spdlog::warn("measure input has no reference samples: the output is not checked");
    }
    CheckResult check = check_samples(output, input_.samples);
    if (!check.ok) throw MeasureError(MeasureErrorNo::kWrongAnswer, check.message);
  }

  /// A kernel with scratch carries state from run to run (its counters must be back at zero):
  /// after the timed runs, one more run into a NaN-filled output must still match the reference.
  void check_after_timed_runs() {
    fill_outputs_with_nan();
    run_once();
    glFinish();
    check_gl("running the kernel after the timed runs");
    try {
      check_output();
    } catch (const MeasureError& e) {
      if (e.error() != MeasureErrorNo::kWrongAnswer) throw;
      throw MeasureError(
          MeasureErrorNo::kWrongAnswer,
          std::string("after the timed runs (scratch state carried over): ") + e.what());
    }
  }

  // ---- timing ----
  /// The soft timeout: checked between batches of runs only, since a run in flight cannot be
  /// interrupted in this process (IsolatedRuntime kills a worker for that).
  void check_deadline(int64_t timed_runs, double last_run_s) const {
    double limit = input_.options.timeout_s;
    if (limit <= 0) return;
    double elapsed = seconds_between(start_, Clock::now());
    if (elapsed <= limit) return;
    std::string message = "measurement ran past its timeout of " + seconds_string(limit) + " s (" +
                          seconds_string(elapsed) + " s";
    if (timed_runs > 0) {
      message += " after " + std::to_string(timed_runs) + " timed runs of about " +
                 seconds_string(last_run_s * 1e3) + " ms";
    }
    throw MeasureError(MeasureErrorNo::kRunTimeout, message + ")");
  }

  std::vector<double> time_runs() {
    const MeasureOptions& options = input_.options;
    int64_t number = std::max(1, options.number);
    const int repeat = std::max(1, options.repeat);
    const double min_repeat_ms = options.min_repeat_ms;
    // Far beyond any sensible batch; keeps the growth below from overflowing.
    constexpr int64_t kMaxNumber = int64_t{1} << 30;
    std::vector<double> costs;
    int64_t timed_runs = 0;
    double last_run_s = 0;
    for (int r = 0; r < repeat; ++r) {
      double duration_s = 0;
      for (;;) {
        auto begin = Clock::now();
        for (int64_t j = 0; j < number; ++j) run_once();
        glFinish();
        duration_s = seconds_between(begin, Clock::now());
        timed_runs += number;
        last_run_s = duration_s / static_cast<double>(number);
        check_gl("timing the kernel");
        check_deadline(timed_runs, last_run_s);
        if (min_repeat_ms <= 0 || duration_s * 1e3 >= min_repeat_ms || number >= kMaxNumber) {
          break;
        }
        // TVM's rule (time_evaluator): jump to the number that should fill min_repeat_ms, but
        // grow by at least the golden ratio so that noisy short batches still converge fast.
        double per_run_ms = std::max(duration_s * 1e3 / static_cast<double>(number), 1e-6);
        double next = std::max(min_repeat_ms / per_run_ms + 1, static_cast<double>(number) * 1.618);
        number = std::min<int64_t>(kMaxNumber, std::max<int64_t>(number + 1, std::llround(next)));
      }
      costs.push_back(duration_s / static_cast<double>(number));
    }
    return costs;
  }

  const MeasureInput& input_;
  const KernelArtifact& artifact_;
  const GlDeviceInfo& info_;
  Clock::time_point start_;
  bool fragment_;  ///< target gles-frag: inputs are textures
  bool feedback_;  ///< gles-frag with a vertex-stage kernel captured by transform feedback
  gl::GlObjects objects_;
  GLuint program_ = 0;
  GLuint output_buffer_ = 0;
};

}  // namespace

GlRuntime::GlRuntime(std::unique_ptr<EglContext> context) : context_(std::move(context)) {
  if (context_ == nullptr) throw std::runtime_error("GlRuntime needs an EGL context");
  const GlDeviceInfo& info = context_->info();
  if (info.major < 3) {
    throw std::runtime_error("GlRuntime needs OpenGL ES 3.0 or later; the context is " +
                             info.version);
  }
  context_->make_current();
}

GlRuntime::~GlRuntime() = default;

const GlDeviceInfo& GlRuntime::info() const {
  return context_->info();
}

MeasureResult GlRuntime::measure(const MeasureInput& input) {
  const auto start = Clock::now();
  MeasureResult result;
  try {
    // Cheap when already current; lets a caller move the runtime to another thread.
    context_->make_current();
    Trial trial(input, context_->info(), start);
    result.costs = trial.run();
  } catch (const MeasureError& e) {
    result = MeasureResult::failure(e.error(), e.what());
  } catch (const std::bad_alloc&) {
    result = MeasureResult::failure(MeasureErrorNo::kRuntimeDevice,
                                    "out of host memory while preparing or reading the kernel");
  } catch (const std::exception& e) {
    result = MeasureResult::failure(MeasureErrorNo::kUnknown, e.what());
  }
  result.all_cost = seconds_between(start, Clock::now());
  result.timestamp =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (result.ok()) {
    spdlog::debug("measured: mean {:.3f} ms over {} repeats, {:.1f} ms in all",
                  1e3 * result.mean_cost(), result.costs.size(), 1e3 * result.all_cost);
  } else {
    spdlog::debug("trial failed: {}: {}", error_name(result.error), result.message);
  }
  return result;
}

}  // namespace webtune
