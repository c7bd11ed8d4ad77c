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
/// read their inputs from the same textures.
#include "native_agent/gl_runtime.hpp"

#include <GLES3/gl32.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/kernel_artifact.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"

namespace webtune {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string gl_error_name(GLenum code) {
  switch (code) {
    case GL_INVALID_ENUM:
      return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE:
      return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION:
      return "GL_INVALID_OPERATION";
    case GL_INVALID_FRAMEBUFFER_OPERATION:
      return "GL_INVALID_FRAMEBUFFER_OPERATION";
    case GL_OUT_OF_MEMORY:
      return "GL_OUT_OF_MEMORY";
    case GL_CONTEXT_LOST:
      return "GL_CONTEXT_LOST";
    default: {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "GL error 0x%04X", code);
      return buffer;
    }
  }
}

std::string framebuffer_status_name(GLenum status) {
  switch (status) {
    case GL_FRAMEBUFFER_INCOMPLETE_ATTACHMENT:
      return "GL_FRAMEBUFFER_INCOMPLETE_ATTACHMENT";
    case GL_FRAMEBUFFER_INCOMPLETE_MISSING_ATTACHMENT:
      return "GL_FRAMEBUFFER_INCOMPLETE_MISSING_ATTACHMENT";
    case GL_FRAMEBUFFER_INCOMPLETE_DIMENSIONS:
      return "GL_FRAMEBUFFER_INCOMPLETE_DIMENSIONS";
    case GL_FRAMEBUFFER_UNSUPPORTED:
      return "GL_FRAMEBUFFER_UNSUPPORTED";
    case GL_FRAMEBUFFER_INCOMPLETE_MULTISAMPLE:
      return "GL_FRAMEBUFFER_INCOMPLETE_MULTISAMPLE";
    default: {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "status 0x%04X", status);
      return buffer;
    }
  }
}

/// Empties the error queue; returns the names of what was in it ("" when nothing). Bounded,
/// because a lost context may report GL_CONTEXT_LOST on every call.
std::string drain_gl_errors() {
  std::string names;
  for (int i = 0; i < 16; ++i) {
    GLenum error = glGetError();
    if (error == GL_NO_ERROR) break;
    if (!names.empty()) names += ", ";
    names += gl_error_name(error);
  }
  return names;
}

/// Throws RUNTIME_DEVICE naming the GL errors raised while doing `what`.
void check_gl(const std::string& what) {
  std::string errors = drain_gl_errors();
  if (!errors.empty()) {
    throw MeasureError(MeasureErrorNo::kRuntimeDevice, errors + " while " + what);
  }
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

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Bytes of a storage buffer holding `floats` floats: rounded up to 16 so that std430 arrays of
/// vec4 never read past the end, and never 0 (a zero-sized SSBO binding is an error).
GLsizeiptr buffer_bytes(int64_t floats) {
  int64_t bytes = std::max<int64_t>(floats, 1) * static_cast<int64_t>(sizeof(float));
  return static_cast<GLsizeiptr>(ceil_div(bytes, 16) * 16);
}

/// Every GL object of one trial; the destructor unbinds and deletes them all.
struct GlObjects {
  std::vector<GLuint> shaders, textures, buffers, framebuffers, renderbuffers, vertex_arrays,
      transform_feedbacks;
  GLuint program = 0;

  GlObjects() = default;
  GlObjects(const GlObjects&) = delete;
  GlObjects& operator=(const GlObjects&) = delete;
  ~GlObjects() {
    // A feedback run ends its transform feedback before anything can throw, but if one were
    // left active, the unbinding and deleting below would all fail.
    GLboolean feedback_active = GL_FALSE;
    glGetBooleanv(GL_TRANSFORM_FEEDBACK_ACTIVE, &feedback_active);
    if (feedback_active == GL_TRUE) glEndTransformFeedback();
    // Rasterizer discard would silently turn the next fragment kernel's draws into no-ops.
    glDisable(GL_RASTERIZER_DISCARD);
    glBindTransformFeedback(GL_TRANSFORM_FEEDBACK, 0);
    glBindBuffer(GL_TRANSFORM_FEEDBACK_BUFFER, 0);
    glBindBuffer(GL_COPY_READ_BUFFER, 0);
    glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
    glBindRenderbuffer(GL_RENDERBUFFER, 0);
    glUseProgram(0);
    glBindFramebuffer(GL_FRAMEBUFFER, 0);
    glBindVertexArray(0);
    // Units 0 … 4: up to four inputs and the render targets' unit after them.
    for (GLenum unit = GL_TEXTURE4 + 1; unit-- > GL_TEXTURE0;) {
      glActiveTexture(unit);
      glBindTexture(GL_TEXTURE_2D, 0);
    }
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
    // Inputs and output 0 … 4, scratch 5 and 6 (kernel_artifact.hpp).
    for (GLuint index = 0; index < 7; ++index) {
      glBindBufferBase(GL_SHADER_STORAGE_BUFFER, index, 0);
    }
    if (program != 0) glDeleteProgram(program);
    for (GLuint shader : shaders) glDeleteShader(shader);
    if (!textures.empty()) glDeleteTextures(static_cast<GLsizei>(textures.size()), textures.data());
    if (!buffers.empty()) glDeleteBuffers(static_cast<GLsizei>(buffers.size()), buffers.data());
    if (!framebuffers.empty()) {
      glDeleteFramebuffers(static_cast<GLsizei>(framebuffers.size()), framebuffers.data());
    }
    if (!renderbuffers.empty()) {
      glDeleteRenderbuffers(static_cast<GLsizei>(renderbuffers.size()), renderbuffers.data());
    }
    if (!transform_feedbacks.empty()) {
      glDeleteTransformFeedbacks(static_cast<GLsizei>(transform_feedbacks.size()),
                                 transform_feedbacks.data());
    }
    if (!vertex_arrays.empty()) {
      glDeleteVertexArrays(static_cast<GLsizei>(vertex_arrays.size()), vertex_arrays.data());
    }
    // Unbinding SSBOs is an error on an ES 3.0 context; nothing here may leak into the next trial.
    drain_gl_errors();
  }
};

/// One measurement; see the file comment of gl_runtime.hpp for its steps.
/// The first `count` floats of `buffer`, read back through a staging buffer: the buffer is
/// copied into a fresh GL_STREAM_READ buffer and that one is mapped, never `buffer` itself.
/// NVIDIA's driver moves a buffer that the CPU maps for reading into system memory, and the
/// timed runs that follow the checked one then wrote their output over PCIe (H100, driver
/// 580, 2026-11-24: MobileNet-v2's first depthwise layer, 1.6 MB out, timed 64 us instead of
/// 5.6 us; dense 1000^3 186 us instead of 118 us). Throws MeasureError (RUNTIME_DEVICE) when
/// the mapping fails or its contents are lost.
std::vector<float> read_through_staging(GLuint buffer, int64_t count, const std::string& what) {
  const auto bytes = static_cast<GLsizeiptr>(count) * static_cast<GLsizeiptr>(sizeof(float));
  GLuint staging = 0;
  glGenBuffers(1, &staging);
  struct DeleteStaging {
    GLuint buffer;
    ~DeleteStaging() {
      glBindBuffer(GL_COPY_READ_BUFFER, 0);
      glBindBuffer(GL_COPY_WRITE_BUFFER, 0);
      glDeleteBuffers(1, &buffer);
    }
  } delete_staging{staging};
  glBindBuffer(GL_COPY_READ_BUFFER, buffer);
  glBindBuffer(GL_COPY_WRITE_BUFFER, staging);
  glBufferData(GL_COPY_WRITE_BUFFER, bytes, nullptr, GL_STREAM_READ);
  glCopyBufferSubData(GL_COPY_READ_BUFFER, GL_COPY_WRITE_BUFFER, 0, 0, bytes);
  check_gl("copying the " + what + " to a staging buffer");
  const void* mapped = glMapBufferRange(GL_COPY_WRITE_BUFFER, 0, bytes, GL_MAP_READ_BIT);
  if (mapped == nullptr) {
    check_gl("mapping the " + what + "'s staging buffer");
    throw MeasureError(MeasureErrorNo::kRuntimeDevice, "glMapBufferRange returned null");
  }
  std::vector<float> values(static_cast<size_t>(count));
  std::memcpy(values.data(), mapped, static_cast<size_t>(bytes));
  if (glUnmapBuffer(GL_COPY_WRITE_BUFFER) != GL_TRUE) {
    throw MeasureError(MeasureErrorNo::kRuntimeDevice,
                       "the " + what + "'s contents were lost while mapped");
  }
  check_gl("reading the " + what + " back");
  return values;
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
    if (artifact_.scratch_floats < 0 || artifact_.scratch_counters < 0) {
      instantiation("scratch_floats and scratch_counters must be >= 0");
    }
    if (has_scratch() && artifact_.target != Target::kGlesCompute) {
      instantiation(
          "scratch buffers (scratch_floats, scratch_counters) are for gles-compute "
          "kernels, not " +
          std::string(target_name(artifact_.target)));
    }
    if (output.feedback && !fragment_) {
      instantiation("a transform feedback output needs target gles-frag, not " +
                    std::string(target_name(artifact_.target)));
    }
    if (feedback_) {
      validate_feedback();
    } else {
      fragment_ ? validate_fragment() : validate_compute();
    }
  }

  void check_texture_size(const std::string& what, int64_t width, int64_t height) const {
    int64_t max = info_.limits.max_texture_size;
    if (width <= 0 || height <= 0) {
      instantiation(what + " has an empty texture size " + std::to_string(width) + "x" +
                    std::to_string(height));
    }
    if (width > max || height > max) {
      instantiation(what + " needs a " + std::to_string(width) + "x" + std::to_string(height) +
                    " texture but this device's GL_MAX_TEXTURE_SIZE is " + std::to_string(max) +
                    " (use a wrapped layout, or filter configs with the device limits)");
    }
  }

  void validate_fragment() const {
    if (!info_.color_buffer_float && (info_.major < 3 || (info_.major == 3 && info_.minor < 2))) {
      throw MeasureError(MeasureErrorNo::kRuntimeDevice,
                         "fragment kernels render to float textures, which needs "
                         "EXT_color_buffer_float; this device (" +
                             info_.renderer + ", " + info_.version + ") lacks it");
    }
    validate_texture_inputs();
    const OutputLayout& output = artifact_.output;
    if (output.channels != 1 && output.channels != 4) {
      instantiation("output channels must be 1 (R32F) or 4 (RGBA32F), not " +
                    std::to_string(output.channels));
    }
    if (output.rows_per_item < 1 || output.rows_per_item > info_.limits.max_draw_buffers) {
      instantiation("the output needs " + std::to_string(output.rows_per_item) +
                    " draw buffers but this device allows 1 to " +
                    std::to_string(info_.limits.max_draw_buffers));
    }
    check_texture_size("the output", output.width, output.height);
    const int64_t items = output.items();
    if (output.width * output.height < items) {
      instantiation("the output has " + std::to_string(items) + " items but its " +
                    std::to_string(output.width) + "x" + std::to_string(output.height) +
                    " render targets hold fewer");
    }
  }

  /// Fragment and vertex-stage kernels read their inputs from 2D textures.
  void validate_texture_inputs() const {
    for (size_t i = 0; i < artifact_.inputs.size(); ++i) {
      const TensorLayout& layout = artifact_.inputs[i];
      std::string what = "input " + std::to_string(i);
      check_texture_size(what, layout.width, layout.height);
      if (layout.width * layout.height < layout.packed_elements()) {
        instantiation(what + " has " + std::to_string(layout.packed_elements()) +
                      " packed elements but its " + std::to_string(layout.width) + "x" +
                      std::to_string(layout.height) + " texture holds fewer");
      }
    }
  }

  /// A vertex-stage kernel renders nothing: its output is a buffer, so neither the texture size
  /// nor EXT_color_buffer_float limit it, but the varyings and captured components do.
  void validate_feedback() const {
    validate_texture_inputs();
    const OutputLayout& output = artifact_.output;
    const DeviceLimits& limits = info_.limits;
    if (output.channels != 1 && output.channels != 4 && output.channels != 8) {
      instantiation(
          "output channels must be 1 (float varyings), 4 (vec4 varyings) or 8 (two vec4 "
          "varyings per row), not " +
          std::to_string(output.channels));
    }
    if (output.rows_per_item < 1 || output.varyings() > limits.max_varying_vectors) {
      instantiation("the output needs " + std::to_string(output.varyings()) +
                    " varyings but this device allows 1 to " +
                    std::to_string(limits.max_varying_vectors) + " (GL_MAX_VARYING_VECTORS)");
    }
    int64_t components = int64_t{output.rows_per_item} * output.channels;
    if (components > limits.max_feedback_components) {
      instantiation("the output captures " + std::to_string(components) +
                    " components per item but this device's "
                    "GL_MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS is " +
                    std::to_string(limits.max_feedback_components));
    }
    if (output.height != 1) {
      instantiation("a transform feedback output has height 1 (width = items), not " +
                    std::to_string(output.height));
    }
    const int64_t items = output.items();
    if (output.width < items) {
      instantiation("the output has " + std::to_string(items) + " items but its width draws " +
                    std::to_string(output.width) + " vertices");
    }
    // glDrawArrays takes a GLsizei count.
    if (output.width > std::numeric_limits<GLsizei>::max()) {
      instantiation("the output's width " + std::to_string(output.width) +
                    " exceeds the largest draw call");
    }
  }

  void validate_compute() const {
    if (info_.major < 3 || (info_.major == 3 && info_.minor < 1)) {
      instantiation("compute kernels need OpenGL ES 3.1; this context is " + info_.version);
    }
    const DeviceLimits& limits = info_.limits;
    const auto& group = artifact_.workgroup;
    const int64_t max_size[3] = {limits.max_workgroup_size_x, limits.max_workgroup_size_y,
                                 limits.max_workgroup_size_z};
    for (int i = 0; i < 3; ++i) {
      if (group[i] < 1 || group[i] > max_size[i]) {
        instantiation("workgroup size " + std::to_string(group[i]) + " along axis " +
                      std::to_string(i) + " is outside this device's 1.." +
                      std::to_string(max_size[i]));
      }
    }
    int64_t invocations = group[0] * group[1] * group[2];
    if (invocations > limits.max_workgroup_invocations) {
      instantiation("workgroup of " + std::to_string(invocations) +
                    " invocations exceeds this device's GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS " +
                    std::to_string(limits.max_workgroup_invocations));
    }
    for (GLuint i = 0; i < 3; ++i) {
      GLint64 max_count = 0;
      glGetInteger64i_v(GL_MAX_COMPUTE_WORK_GROUP_COUNT, i, &max_count);
      if (artifact_.dispatch[i] < 1 || artifact_.dispatch[i] > max_count) {
        instantiation("dispatch count " + std::to_string(artifact_.dispatch[i]) + " along axis " +
                      std::to_string(i) + " is outside this device's 1.." +
                      std::to_string(max_count));
      }
    }
    if (artifact_.shared_memory_bytes > limits.max_shared_memory_bytes) {
      instantiation("the kernel declares " + std::to_string(artifact_.shared_memory_bytes) +
                    " bytes of shared memory but GL_MAX_COMPUTE_SHARED_MEMORY_SIZE is " +
                    std::to_string(limits.max_shared_memory_bytes));
    }
    // Every input and the output is one storage block. OpenGL ES 3.1 guarantees only 4 per
    // compute shader, and an epilogue with bias and residual needs 5: refused here by name,
    // not left to a driver's compile log (llvmpipe and NVIDIA allow more).
    GLint max_blocks = 0;
    glGetIntegerv(GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, &max_blocks);
    const auto blocks =
        static_cast<GLint>(artifact_.inputs.size() + 1 + (artifact_.scratch_floats > 0 ? 1 : 0) +
                           (artifact_.scratch_counters > 0 ? 1 : 0));
    if (max_blocks > 0 && blocks > max_blocks) {
      instantiation("the kernel binds " + std::to_string(blocks) +
                    " storage buffers (inputs, output and scratch) but "
                    "GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS is " +
                    std::to_string(max_blocks));
    }
    // Scratch sits at bindings 5 and 6, which ES 3.1 does not guarantee (its minimum
    // GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS is 4).
    GLint max_bindings = 0;
    glGetIntegerv(GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS, &max_bindings);
    const GLint highest = artifact_.scratch_counters > 0 ? 6
                          : artifact_.scratch_floats > 0 ? 5
                                                         : -1;
    if (max_bindings > 0 && highest >= max_bindings) {
      instantiation("the kernel's scratch buffers use SSBO binding " + std::to_string(highest) +
                    " but GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS is " +
                    std::to_string(max_bindings));
    }
    GLint64 max_block = 0;
    glGetInteger64v(GL_MAX_SHADER_STORAGE_BLOCK_SIZE, &max_block);
    auto check_block = [&](const std::string& what, int64_t floats) {
      if (buffer_bytes(floats) > max_block) {
        instantiation(what + " needs a " + std::to_string(buffer_bytes(floats)) +
                      "-byte storage buffer but GL_MAX_SHADER_STORAGE_BLOCK_SIZE is " +
                      std::to_string(max_block));
      }
    };
    for (size_t i = 0; i < artifact_.inputs.size(); ++i) {
      const TensorLayout& layout = artifact_.inputs[i];
      check_block("input " + std::to_string(i), layout.packed_elements() * layout.channels());
    }
    check_block("the output", artifact_.output.elements());
    if (artifact_.scratch_floats > 0) check_block("the scratch floats", artifact_.scratch_floats);
    if (artifact_.scratch_counters > 0)
      check_block("the scratch counters", artifact_.scratch_counters);
  }

  // ---- compile and link ----
  static std::string shader_log(GLuint shader) {
    GLint length = 0;
    glGetShaderiv(shader, GL_INFO_LOG_LENGTH, &length);
    std::string log(static_cast<size_t>(std::max(length, 1)), '\0');
    glGetShaderInfoLog(shader, static_cast<GLsizei>(log.size()), &length, log.data());
    log.resize(static_cast<size_t>(std::max(length, 0)));
    return log;
  }

  static std::string program_log(GLuint program) {
    GLint length = 0;
    glGetProgramiv(program, GL_INFO_LOG_LENGTH, &length);
    std::string log(static_cast<size_t>(std::max(length, 1)), '\0');
    glGetProgramInfoLog(program, static_cast<GLsizei>(log.size()), &length, log.data());
    log.resize(static_cast<size_t>(std::max(length, 0)));
    return log;
  }

  GLuint compile_shader(GLenum type, const char* source, const char* stage) {
    GLuint shader = glCreateShader(type);
    if (shader == 0) {
      check_gl("creating a shader");
      throw MeasureError(MeasureErrorNo::kRuntimeDevice, "glCreateShader returned 0");
    }
    objects_.shaders.push_back(shader);
    glShaderSource(shader, 1, &source, nullptr);
    glCompileShader(shader);
    GLint ok = GL_FALSE;
    glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
    if (ok != GL_TRUE) {
      std::string log = shader_log(shader);
      throw MeasureError(MeasureErrorNo::kCompileDevice,
                         std::string(stage) + " shader failed to compile: " +
                             (log.empty() ? "(the driver gave no log)" : log));
    }
    return shader;
  }

  void compile() {
    auto begin = Clock::now();
    GLuint program = glCreateProgram();
    objects_.program = program;
    if (feedback_) {
      glAttachShader(program, compile_shader(GL_VERTEX_SHADER, artifact_.source.c_str(), "vertex"));
      glAttachShader(program, compile_shader(GL_FRAGMENT_SHADER, kFeedbackFragmentShader,
                                             "feedback fragment"));
      // Captured varyings are part of the link (ES 3.0 §2.15.2), so they are named before it;
      // one that the vertex shader lacks makes the link fail, with the driver's log.
      std::vector<std::string> names;
      for (int j = 0; j < artifact_.output.varyings(); ++j)
        names.push_back("o" + std::to_string(j));
      std::vector<const char*> pointers;
      for (const std::string& name : names) pointers.push_back(name.c_str());
      glTransformFeedbackVaryings(program, static_cast<GLsizei>(pointers.size()), pointers.data(),
                                  GL_INTERLEAVED_ATTRIBS);
    } else if (fragment_) {
      glAttachShader(program, compile_shader(GL_VERTEX_SHADER, kFullscreenVertexShader, "vertex"));
      glAttachShader(program,
                     compile_shader(GL_FRAGMENT_SHADER, artifact_.source.c_str(), "fragment"));
    } else {
      glAttachShader(program,
                     compile_shader(GL_COMPUTE_SHADER, artifact_.source.c_str(), "compute"));
    }
    glLinkProgram(program);
    GLint ok = GL_FALSE;
    glGetProgramiv(program, GL_LINK_STATUS, &ok);
    if (ok != GL_TRUE) {
      std::string log = program_log(program);
      throw MeasureError(MeasureErrorNo::kCompileDevice,
                         "program failed to link: " +
                             (log.empty() ? std::string("(the driver gave no log)") : log));
    }
    check_gl("compiling the kernel");
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
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
    for (int i = 0; i < workload.input_count(); ++i) {
      const TensorLayout& layout = artifact_.inputs[static_cast<size_t>(i)];
      std::vector<float> packed = packed_input(i, logical[i]);
      if (fragment_) {
        size_t expected = static_cast<size_t>(layout.width * layout.height * layout.channels());
        if (packed.size() != expected) {
          instantiation("input " + std::to_string(i) + " packs into " +
                        std::to_string(packed.size()) + " floats, not the " +
                        std::to_string(expected) + " of its texture");
        }
        GLuint texture = 0;
        glGenTextures(1, &texture);
        objects_.textures.push_back(texture);
        glActiveTexture(GL_TEXTURE0 + static_cast<GLenum>(i));
        glBindTexture(GL_TEXTURE_2D, texture);
        // NEAREST and no mipmaps: kernels read with texelFetch, and float textures are not
        // filterable without OES_texture_float_linear anyway (incomplete otherwise).
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
        glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
        bool rgba = layout.channels() == 4;
        glTexStorage2D(GL_TEXTURE_2D, 1, rgba ? GL_RGBA32F : GL_R32F,
                       static_cast<GLsizei>(layout.width), static_cast<GLsizei>(layout.height));
        glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, static_cast<GLsizei>(layout.width),
                        static_cast<GLsizei>(layout.height), rgba ? GL_RGBA : GL_RED, GL_FLOAT,
                        packed.data());
      } else {
        size_t needed = static_cast<size_t>(layout.packed_elements() * layout.channels());
        if (packed.size() < needed) {
          instantiation("input " + std::to_string(i) + " packs into " +
                        std::to_string(packed.size()) + " floats, fewer than its " +
                        std::to_string(needed) + " packed elements");
        }
        GLsizeiptr bytes = buffer_bytes(static_cast<int64_t>(packed.size()));
        packed.resize(static_cast<size_t>(bytes) / sizeof(float), 0.0f);
        GLuint buffer = 0;
        glGenBuffers(1, &buffer);
        objects_.buffers.push_back(buffer);
        glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer);
        glBufferData(GL_SHADER_STORAGE_BUFFER, bytes, packed.data(), GL_STATIC_DRAW);
        // data 0, weight 1, output 2, then the epilogue's inputs 3, 4 (kernel_artifact.hpp).
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(i < 2 ? i : i + 1), buffer);
      }
    }
    check_gl("uploading the inputs");
  }

  // ---- outputs ----
  void prepare_fragment_outputs() {
    const OutputLayout& output = artifact_.output;
    GLsizei width = static_cast<GLsizei>(output.width);
    GLsizei height = static_cast<GLsizei>(output.height);
    GLuint framebuffer = 0;
    glGenFramebuffers(1, &framebuffer);
    objects_.framebuffers.push_back(framebuffer);
    glBindFramebuffer(GL_FRAMEBUFFER, framebuffer);
    std::vector<GLenum> draw_buffers;
    // The first unit past the inputs for the targets, so that binding them never disturbs the
    // inputs in0 … on units 0 ….
    glActiveTexture(GL_TEXTURE0 + static_cast<GLenum>(artifact_.inputs.size()));
    for (int j = 0; j < output.rows_per_item; ++j) {
      GLuint texture = 0;
      glGenTextures(1, &texture);
      objects_.textures.push_back(texture);
      glBindTexture(GL_TEXTURE_2D, texture);
      glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
      glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
      glTexStorage2D(GL_TEXTURE_2D, 1, output.channels == 1 ? GL_R32F : GL_RGBA32F, width, height);
      GLenum attachment = GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j);
      glFramebufferTexture2D(GL_FRAMEBUFFER, attachment, GL_TEXTURE_2D, texture, 0);
      draw_buffers.push_back(attachment);
    }
    glBindTexture(GL_TEXTURE_2D, 0);
    glDrawBuffers(static_cast<GLsizei>(draw_buffers.size()), draw_buffers.data());
    check_gl("creating the render targets");
    GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
    if (status != GL_FRAMEBUFFER_COMPLETE) {
      throw MeasureError(MeasureErrorNo::kRuntimeDevice,
                         "the framebuffer of " + std::to_string(output.rows_per_item) + " " +
                             (output.channels == 1 ? "R32F" : "RGBA32F") + " " +
                             std::to_string(width) + "x" + std::to_string(height) +
                             " render targets is incomplete: " + framebuffer_status_name(status));
    }

    // All state of a run is set once here, so that a timed run is only the draw call.
    glViewport(0, 0, width, height);
    glDisable(GL_BLEND);
    glDisable(GL_DEPTH_TEST);
    glDisable(GL_STENCIL_TEST);
    glDisable(GL_SCISSOR_TEST);
    glDisable(GL_DITHER);
    // Left on, it would make the draw a silent no-op (a feedback trial disables it when done).
    glDisable(GL_RASTERIZER_DISCARD);
    glColorMask(GL_TRUE, GL_TRUE, GL_TRUE, GL_TRUE);
    use_program_with_samplers();
  }

  /// Binds an empty vertex array (the kernels use gl_VertexID only) and the program, and points
  /// samplers in0, in1, … at texture units 0, 1, ….
  void use_program_with_samplers() {
    GLuint vertex_array = 0;
    glGenVertexArrays(1, &vertex_array);
    objects_.vertex_arrays.push_back(vertex_array);
    glBindVertexArray(vertex_array);
    glUseProgram(objects_.program);
    for (int i = 0; i < static_cast<int>(artifact_.inputs.size()); ++i) {
      const std::string name = "in" + std::to_string(i);
      GLint location = glGetUniformLocation(objects_.program, name.c_str());
      if (location >= 0) {
        glUniform1i(location, i);
      } else {
        spdlog::debug("kernel has no active sampler '{}'", name);
      }
    }
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
                             framebuffer_status_name(status));
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
    use_program_with_samplers();
  }

  void prepare_compute_output() {
    GLuint buffer = 0;
    glGenBuffers(1, &buffer);
    objects_.buffers.push_back(buffer);
    output_buffer_ = buffer;
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer);
    glBufferData(GL_SHADER_STORAGE_BUFFER, buffer_bytes(artifact_.output.elements()), nullptr,
                 GL_DYNAMIC_COPY);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 2, buffer);
    prepare_scratch();
    glUseProgram(objects_.program);
  }

  /// The artifact's scratch buffers (kernel_artifact.hpp), created once for the checked run and
  /// every timed run: floats at binding 5 (left uninitialised: the kernel writes them before it
  /// reads them in every run), uint counters at binding 6, zero-filled here once (the kernel
  /// leaves them at zero after every run).
  void prepare_scratch() {
    if (artifact_.scratch_floats > 0) {
      GLuint buffer = 0;
      glGenBuffers(1, &buffer);
      objects_.buffers.push_back(buffer);
      glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer);
      glBufferData(GL_SHADER_STORAGE_BUFFER, buffer_bytes(artifact_.scratch_floats), nullptr,
                   GL_DYNAMIC_COPY);
      glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 5, buffer);
    }
    if (artifact_.scratch_counters > 0) {
      // uint and float are both 4 bytes: buffer_bytes counts in 4-byte words.
      const GLsizeiptr bytes = buffer_bytes(artifact_.scratch_counters);
      const std::vector<uint32_t> zeros(static_cast<size_t>(bytes) / sizeof(uint32_t), 0u);
      GLuint buffer = 0;
      glGenBuffers(1, &buffer);
      objects_.buffers.push_back(buffer);
      glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer);
      glBufferData(GL_SHADER_STORAGE_BUFFER, bytes, zeros.data(), GL_DYNAMIC_COPY);
      glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 6, buffer);
    }
    check_gl("creating the scratch buffers");
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
      GLsizeiptr bytes = buffer_bytes(artifact_.output.elements());
      std::vector<float> nans(static_cast<size_t>(bytes) / sizeof(float), nan);
      glBindBuffer(GL_SHADER_STORAGE_BUFFER, output_buffer_);
      glBufferSubData(GL_SHADER_STORAGE_BUFFER, 0, bytes, nans.data());
    }
    check_gl("filling the outputs with NaN");
  }

  // ---- running ----
  void run_once() {
    if (feedback_) {
      // Nothing between begin and end may throw: an active transform feedback would block
      // every cleanup call. Each begin restarts writing at the buffer's start, so every run
      // overwrites the same floats.
      glBeginTransformFeedback(GL_POINTS);
      glDrawArrays(GL_POINTS, 0, static_cast<GLsizei>(artifact_.output.width));
      glEndTransformFeedback();
      // As for fragment kernels: every run is submitted on its own, so runs cost the same on
      // both paths.
      glFlush();
    } else if (fragment_) {
      glDrawArrays(GL_TRIANGLES, 0, 3);
      // Each run must really execute. llvmpipe bins draws into a scene and may drop a tile's
      // earlier commands when a later opaque draw covers it, so unflushed back-to-back draws
      // could time as one; a flush per run rules that out. (Mesa 22.3, dense 128: 16.2 ms per
      // run with or without it, so the flush costs nothing measurable there.)
      glFlush();
    } else {
      glDispatchCompute(static_cast<GLuint>(artifact_.dispatch[0]),
                        static_cast<GLuint>(artifact_.dispatch[1]),
                        static_cast<GLuint>(artifact_.dispatch[2]));
      // Successive runs write the same output buffer; keep them ordered as the API requires.
      glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
    }
  }

  // ---- reading back and checking ----
  std::vector<float> read_fragment_output() const {
    const OutputLayout& output = artifact_.output;
    GLsizei width = static_cast<GLsizei>(output.width);
    GLsizei height = static_cast<GLsizei>(output.height);
    size_t texels = static_cast<size_t>(width) * static_cast<size_t>(height);
    glPixelStorei(GL_PACK_ALIGNMENT, 4);
    glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
    std::vector<std::vector<float>> targets;
    for (int j = 0; j < output.rows_per_item; ++j) {
      glReadBuffer(GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j));
      std::vector<float> pixels(texels * static_cast<size_t>(output.channels));
      bool read_red = false;
      if (output.channels == 1) {
        // GL_RED is only guaranteed as the implementation's own choice of read format; RGBA
        // with FLOAT is what EXT_color_buffer_float always allows.
        GLint format = 0, type = 0;
        glGetIntegerv(GL_IMPLEMENTATION_COLOR_READ_FORMAT, &format);
        glGetIntegerv(GL_IMPLEMENTATION_COLOR_READ_TYPE, &type);
        read_red = format == GL_RED && type == GL_FLOAT;
      }
      if (output.channels == 4 || read_red) {
        glReadPixels(0, 0, width, height, output.channels == 4 ? GL_RGBA : GL_RED, GL_FLOAT,
                     pixels.data());
      } else {
        std::vector<float> rgba(texels * 4);
        glReadPixels(0, 0, width, height, GL_RGBA, GL_FLOAT, rgba.data());
        for (size_t t = 0; t < texels; ++t) pixels[t] = rgba[4 * t];
      }
      targets.push_back(std::move(pixels));
    }
    glReadBuffer(GL_COLOR_ATTACHMENT0);
    check_gl("reading the render targets back");
    return output.unpack(targets);
  }

  std::vector<float> read_compute_output() const {
    // Shader writes must be visible to the copy in read_through_staging.
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    return read_through_staging(output_buffer_, artifact_.output.elements(), "output buffer");
  }

  std::vector<float> read_feedback_output() const {
    // ES 3.0 has no glGetBufferSubData; the copy waits for the captures, which glFinish has
    // completed already anyway.
    return artifact_.output.unpack(
        {read_through_staging(output_buffer_, feedback_floats(), "transform feedback buffer")});
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
  GlObjects objects_;
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
