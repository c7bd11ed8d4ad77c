/// \file gl_kernel.cpp
/// The GL pieces of running one KernelArtifact (gl_kernel.hpp), shared by the measuring Trial
/// and the model runner. Moved out of gl_runtime.cpp unchanged in behaviour: the Trial calls
/// them in the order it always did.
#include "gl_kernel.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "codegen/error_no.hpp"

namespace webtune::gl {
namespace {

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

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

[[noreturn]] void instantiation(const std::string& message) {
  throw MeasureError(MeasureErrorNo::kInstantiation, message);
}

/// The checks of validate_artifact, one method per kind of kernel.
class ArtifactCheck {
 public:
  ArtifactCheck(const KernelArtifact& artifact, const GlDeviceInfo& info)
      : artifact(artifact), info(info) {}

  void run() {
    const bool fragment = artifact.target == Target::kGlesFrag;
    validate_scratch();
    if (artifact.output.feedback && !fragment) {
      instantiation("a transform feedback output needs target gles-frag, not " +
                    std::string(target_name(artifact.target)));
    }
    if (fragment && artifact.output.feedback) {
      validate_feedback();
    } else if (fragment) {
      validate_fragment();
    } else {
      validate_compute();
    }
  }

 private:
  void check_texture_size(const std::string& what, int64_t width, int64_t height) {
    int64_t max = info.limits.max_texture_size;
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

  void validate_fragment() {
    if (!info.color_buffer_float && (info.major < 3 || (info.major == 3 && info.minor < 2))) {
      throw MeasureError(MeasureErrorNo::kRuntimeDevice,
                         "fragment kernels render to float textures, which needs "
                         "EXT_color_buffer_float; this device (" +
                             info.renderer + ", " + info.version + ") lacks it");
    }
    validate_texture_inputs();
    const OutputLayout& output = artifact.output;
    if (output.channels != 1 && output.channels != 4) {
      instantiation("output channels must be 1 (R32F) or 4 (RGBA32F), not " +
                    std::to_string(output.channels));
    }
    if (output.rows_per_item < 1 || output.rows_per_item > info.limits.max_draw_buffers) {
      instantiation("the output needs " + std::to_string(output.rows_per_item) +
                    " draw buffers but this device allows 1 to " +
                    std::to_string(info.limits.max_draw_buffers));
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
  void validate_texture_inputs() {
    for (size_t i = 0; i < artifact.inputs.size(); ++i) {
      const TensorLayout& layout = artifact.inputs[i];
      std::string what = "input " + std::to_string(i);
      check_texture_size(what, layout.width, layout.height);
      if (layout.layers > 0) {  // another kernel's quad layers, bound by a model package
        try {
          OutputLayout::quad_layers_source(layout);
        } catch (const std::exception& e) {
          instantiation(what + ": " + e.what());
        }
        continue;
      }
      if (layout.width * layout.height < layout.packed_elements()) {
        instantiation(what + " has " + std::to_string(layout.packed_elements()) +
                      " packed elements but its " + std::to_string(layout.width) + "x" +
                      std::to_string(layout.height) + " texture holds fewer");
      }
    }
  }

  /// A vertex-stage kernel renders nothing: its output is a buffer, so neither the texture size
  /// nor EXT_color_buffer_float limit it, but the varyings and captured components do.
  void validate_feedback() {
    validate_texture_inputs();
    const OutputLayout& output = artifact.output;
    const DeviceLimits& limits = info.limits;
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

  void validate_scratch() {
    if (artifact.scratch_floats < 0 || artifact.scratch_counters < 0) {
      instantiation("scratch_floats and scratch_counters must be >= 0");
    }
    if ((artifact.scratch_floats > 0 || artifact.scratch_counters > 0) &&
        artifact.target != Target::kGlesCompute) {
      instantiation(
          "scratch buffers (scratch_floats, scratch_counters) are for gles-compute "
          "kernels, not " +
          std::string(target_name(artifact.target)));
    }
  }

  void validate_compute() {
    if (info.major < 3 || (info.major == 3 && info.minor < 1)) {
      instantiation("compute kernels need OpenGL ES 3.1; this context is " + info.version);
    }
    const DeviceLimits& limits = info.limits;
    const auto& group = artifact.workgroup;
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
      if (artifact.dispatch[i] < 1 || artifact.dispatch[i] > max_count) {
        instantiation("dispatch count " + std::to_string(artifact.dispatch[i]) + " along axis " +
                      std::to_string(i) + " is outside this device's 1.." +
                      std::to_string(max_count));
      }
    }
    if (artifact.shared_memory_bytes > limits.max_shared_memory_bytes) {
      instantiation("the kernel declares " + std::to_string(artifact.shared_memory_bytes) +
                    " bytes of shared memory but GL_MAX_COMPUTE_SHARED_MEMORY_SIZE is " +
                    std::to_string(limits.max_shared_memory_bytes));
    }
    // Every input and the output is one storage block. OpenGL ES 3.1 guarantees only 4 per
    // compute shader, and an epilogue with bias and residual needs 5: refused here by name,
    // not left to a driver's compile log (llvmpipe and NVIDIA allow more).
    GLint max_blocks = 0;
    glGetIntegerv(GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, &max_blocks);
    const auto blocks =
        static_cast<GLint>(artifact.inputs.size() + 1 + (artifact.scratch_floats > 0 ? 1 : 0) +
                           (artifact.scratch_counters > 0 ? 1 : 0));
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
    const GLint highest = artifact.scratch_counters > 0
                              ? static_cast<GLint>(kScratchCountersBinding)
                          : artifact.scratch_floats > 0 ? static_cast<GLint>(kScratchFloatsBinding)
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
    for (size_t i = 0; i < artifact.inputs.size(); ++i) {
      const TensorLayout& layout = artifact.inputs[i];
      check_block("input " + std::to_string(i), layout.packed_elements() * layout.channels());
    }
    check_block("the output", artifact.output.elements());
    if (artifact.scratch_floats > 0) check_block("the scratch floats", artifact.scratch_floats);
    if (artifact.scratch_counters > 0)
      check_block("the scratch counters", artifact.scratch_counters);
  }

  const KernelArtifact& artifact;
  const GlDeviceInfo& info;
};

std::string shader_log(GLuint shader) {
  GLint length = 0;
  glGetShaderiv(shader, GL_INFO_LOG_LENGTH, &length);
  std::string log(static_cast<size_t>(std::max(length, 1)), '\0');
  glGetShaderInfoLog(shader, static_cast<GLsizei>(log.size()), &length, log.data());
  log.resize(static_cast<size_t>(std::max(length, 0)));
  return log;
}

std::string program_log(GLuint program) {
  GLint length = 0;
  glGetProgramiv(program, GL_INFO_LOG_LENGTH, &length);
  std::string log(static_cast<size_t>(std::max(length, 1)), '\0');
  glGetProgramInfoLog(program, static_cast<GLsizei>(log.size()), &length, log.data());
  log.resize(static_cast<size_t>(std::max(length, 0)));
  return log;
}

GLuint compile_shader(GlObjects& objects, GLenum type, const char* source, const char* stage) {
  GLuint shader = glCreateShader(type);
  if (shader == 0) {
    check_gl("creating a shader");
    throw MeasureError(MeasureErrorNo::kRuntimeDevice, "glCreateShader returned 0");
  }
  objects.shaders.push_back(shader);
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

}  // namespace

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

void check_gl(const std::string& what) {
  std::string errors = drain_gl_errors();
  if (!errors.empty()) {
    throw MeasureError(MeasureErrorNo::kRuntimeDevice, errors + " while " + what);
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

GLsizeiptr buffer_bytes(int64_t floats) {
  int64_t bytes = std::max<int64_t>(floats, 1) * static_cast<int64_t>(sizeof(float));
  return static_cast<GLsizeiptr>(ceil_div(bytes, 16) * 16);
}

GlObjects::~GlObjects() {
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
  // Units 0 … 15: a trial's inputs and its render targets' unit after them, a model's inputs
  // (a relayout of several render targets binds one unit per target).
  for (GLenum unit = GL_TEXTURE15 + 1; unit-- > GL_TEXTURE0;) {
    glActiveTexture(unit);
    glBindTexture(GL_TEXTURE_2D, 0);
  }
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, 0);
  for (GLuint index = 0; index < 8; ++index) {
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, index, 0);
  }
  for (GLuint program : programs) glDeleteProgram(program);
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
  // Unbinding SSBOs is an error on an ES 3.0 context; nothing here may leak into the next owner.
  drain_gl_errors();
}

void validate_artifact(const KernelArtifact& artifact, const GlDeviceInfo& info) {
  ArtifactCheck(artifact, info).run();
}

GLuint compile_program(const KernelArtifact& artifact, GlObjects& objects) {
  const bool fragment = artifact.target == Target::kGlesFrag;
  const bool feedback = fragment && artifact.output.feedback;
  GLuint program = glCreateProgram();
  if (program == 0) {
    check_gl("creating a program");
    throw MeasureError(MeasureErrorNo::kRuntimeDevice, "glCreateProgram returned 0");
  }
  objects.programs.push_back(program);
  if (feedback) {
    glAttachShader(program,
                   compile_shader(objects, GL_VERTEX_SHADER, artifact.source.c_str(), "vertex"));
    glAttachShader(program, compile_shader(objects, GL_FRAGMENT_SHADER, kFeedbackFragmentShader,
                                           "feedback fragment"));
    // Captured varyings are part of the link (ES 3.0 §2.15.2), so they are named before it;
    // one that the vertex shader lacks makes the link fail, with the driver's log.
    std::vector<std::string> names;
    for (int j = 0; j < artifact.output.varyings(); ++j) names.push_back("o" + std::to_string(j));
    std::vector<const char*> pointers;
    for (const std::string& name : names) pointers.push_back(name.c_str());
    glTransformFeedbackVaryings(program, static_cast<GLsizei>(pointers.size()), pointers.data(),
                                GL_INTERLEAVED_ATTRIBS);
  } else if (fragment) {
    glAttachShader(program,
                   compile_shader(objects, GL_VERTEX_SHADER, kFullscreenVertexShader, "vertex"));
    glAttachShader(
        program, compile_shader(objects, GL_FRAGMENT_SHADER, artifact.source.c_str(), "fragment"));
  } else {
    glAttachShader(program,
                   compile_shader(objects, GL_COMPUTE_SHADER, artifact.source.c_str(), "compute"));
  }
  glLinkProgram(program);
  GLint ok = GL_FALSE;
  glGetProgramiv(program, GL_LINK_STATUS, &ok);
  if (ok != GL_TRUE) {
    std::string log = program_log(program);
    throw MeasureError(
        MeasureErrorNo::kCompileDevice,
        "program failed to link: " + (log.empty() ? std::string("(the driver gave no log)") : log));
  }
  glUseProgram(program);
  if (fragment) {
    // Uniform values belong to the program: set once here, they hold for every later run.
    for (int i = 0; i < static_cast<int>(artifact.inputs.size()); ++i) {
      const std::string name = "in" + std::to_string(i);
      GLint location = glGetUniformLocation(program, name.c_str());
      if (location >= 0) {
        glUniform1i(location, i);
      } else {
        spdlog::debug("kernel has no active sampler '{}'", name);
      }
    }
  }
  check_gl("compiling the kernel");
  return program;
}

GLuint create_vertex_array(GlObjects& objects) {
  GLuint vertex_array = 0;
  glGenVertexArrays(1, &vertex_array);
  objects.vertex_arrays.push_back(vertex_array);
  return vertex_array;
}

namespace {

/// A new texture registered in `objects`, bound to `target` on texture `unit`, NEAREST and
/// clamped: kernels read with texelFetch, and float textures are not filterable without
/// OES_texture_float_linear anyway (incomplete otherwise, with mipmaps expected).
GLuint new_sampled_texture(GlObjects& objects, GLenum unit, GLenum target) {
  GLuint texture = 0;
  glGenTextures(1, &texture);
  objects.textures.push_back(texture);
  glActiveTexture(unit);
  glBindTexture(target, texture);
  glTexParameteri(target, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(target, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(target, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(target, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  return texture;
}

}  // namespace

GLuint create_texture(GlObjects& objects, GLenum unit, int64_t width, int64_t height, int channels,
                      const float* data) {
  const GLuint texture = new_sampled_texture(objects, unit, GL_TEXTURE_2D);
  glTexStorage2D(GL_TEXTURE_2D, 1, channels == 4 ? GL_RGBA32F : GL_R32F,
                 static_cast<GLsizei>(width), static_cast<GLsizei>(height));
  if (data != nullptr) upload_texture(texture, unit, width, height, channels, data);
  return texture;
}

GLuint create_array_texture(GlObjects& objects, GLenum unit, int64_t width, int64_t height,
                            int layers) {
  const GLuint texture = new_sampled_texture(objects, unit, GL_TEXTURE_2D_ARRAY);
  glTexStorage3D(GL_TEXTURE_2D_ARRAY, 1, GL_RGBA32F, static_cast<GLsizei>(width),
                 static_cast<GLsizei>(height), layers);
  return texture;
}

void upload_texture(GLuint texture, GLenum unit, int64_t width, int64_t height, int channels,
                    const float* data) {
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glBindBuffer(GL_PIXEL_UNPACK_BUFFER, 0);
  glActiveTexture(unit);
  glBindTexture(GL_TEXTURE_2D, texture);
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, static_cast<GLsizei>(width), static_cast<GLsizei>(height),
                  channels == 4 ? GL_RGBA : GL_RED, GL_FLOAT, data);
}

GLuint create_storage_buffer(GlObjects& objects, int64_t floats, const float* data, GLenum usage) {
  const GLsizeiptr bytes = buffer_bytes(floats);
  GLuint buffer = 0;
  glGenBuffers(1, &buffer);
  objects.buffers.push_back(buffer);
  glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer);
  if (data == nullptr) {
    glBufferData(GL_SHADER_STORAGE_BUFFER, bytes, nullptr, usage);
  } else {
    std::vector<float> padded(static_cast<size_t>(bytes) / sizeof(float), 0.0f);
    std::copy(data, data + std::max<int64_t>(floats, 0), padded.begin());
    glBufferData(GL_SHADER_STORAGE_BUFFER, bytes, padded.data(), usage);
  }
  return buffer;
}

ScratchBuffers create_scratch_buffers(const KernelArtifact& artifact, GlObjects& objects) {
  ScratchBuffers scratch;
  if (artifact.scratch_floats > 0) {
    scratch.floats =
        create_storage_buffer(objects, artifact.scratch_floats, nullptr, GL_DYNAMIC_COPY);
  }
  if (artifact.scratch_counters > 0) {
    // uint and float are both 4 bytes: buffer_bytes counts in 4-byte words.
    const GLsizeiptr bytes = buffer_bytes(artifact.scratch_counters);
    const std::vector<uint32_t> zeros(static_cast<size_t>(bytes) / sizeof(uint32_t), 0u);
    GLuint buffer = 0;
    glGenBuffers(1, &buffer);
    objects.buffers.push_back(buffer);
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer);
    glBufferData(GL_SHADER_STORAGE_BUFFER, bytes, zeros.data(), GL_DYNAMIC_COPY);
    scratch.counters = buffer;
  }
  check_gl("creating the scratch buffers");
  return scratch;
}

void bind_scratch_buffers(const ScratchBuffers& scratch) {
  if (scratch.floats != 0) {
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, kScratchFloatsBinding, scratch.floats);
  }
  if (scratch.counters != 0) {
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, kScratchCountersBinding, scratch.counters);
  }
}

GLuint create_framebuffer(GlObjects& objects, const std::vector<GLuint>& targets, int64_t width,
                          int64_t height, int channels) {
  GLuint framebuffer = 0;
  glGenFramebuffers(1, &framebuffer);
  objects.framebuffers.push_back(framebuffer);
  glBindFramebuffer(GL_FRAMEBUFFER, framebuffer);
  std::vector<GLenum> draw_buffers;
  for (size_t j = 0; j < targets.size(); ++j) {
    GLenum attachment = GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j);
    glFramebufferTexture2D(GL_FRAMEBUFFER, attachment, GL_TEXTURE_2D, targets[j], 0);
    draw_buffers.push_back(attachment);
  }
  glDrawBuffers(static_cast<GLsizei>(draw_buffers.size()), draw_buffers.data());
  check_gl("creating the render targets");
  GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  if (status != GL_FRAMEBUFFER_COMPLETE) {
    throw MeasureError(MeasureErrorNo::kRuntimeDevice,
                       "the framebuffer of " + std::to_string(targets.size()) + " " +
                           (channels == 1 ? "R32F" : "RGBA32F") + " " + std::to_string(width) +
                           "x" + std::to_string(height) +
                           " render targets is incomplete: " + framebuffer_status_name(status));
  }
  return framebuffer;
}

GLuint create_layer_framebuffer(GlObjects& objects, GLuint array_texture, int layers, int64_t width,
                                int64_t height) {
  GLuint framebuffer = 0;
  glGenFramebuffers(1, &framebuffer);
  objects.framebuffers.push_back(framebuffer);
  glBindFramebuffer(GL_FRAMEBUFFER, framebuffer);
  std::vector<GLenum> draw_buffers;
  for (int j = 0; j < layers; ++j) {
    const GLenum attachment = GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j);
    glFramebufferTextureLayer(GL_FRAMEBUFFER, attachment, array_texture, 0, j);
    draw_buffers.push_back(attachment);
  }
  glDrawBuffers(static_cast<GLsizei>(draw_buffers.size()), draw_buffers.data());
  check_gl("creating the render target layers");
  const GLenum status = glCheckFramebufferStatus(GL_FRAMEBUFFER);
  if (status != GL_FRAMEBUFFER_COMPLETE) {
    throw MeasureError(MeasureErrorNo::kRuntimeDevice,
                       "the framebuffer of " + std::to_string(layers) + " RGBA32F " +
                           std::to_string(width) + "x" + std::to_string(height) +
                           " layers is incomplete: " + framebuffer_status_name(status));
  }
  return framebuffer;
}

void set_fragment_draw_state(int64_t width, int64_t height) {
  glViewport(0, 0, static_cast<GLsizei>(width), static_cast<GLsizei>(height));
  glDisable(GL_BLEND);
  glDisable(GL_DEPTH_TEST);
  glDisable(GL_STENCIL_TEST);
  glDisable(GL_SCISSOR_TEST);
  glDisable(GL_DITHER);
  // Left on, it would make the draw a silent no-op (a feedback trial disables it when done).
  glDisable(GL_RASTERIZER_DISCARD);
  glColorMask(GL_TRUE, GL_TRUE, GL_TRUE, GL_TRUE);
}

void run_kernel(const KernelArtifact& artifact, bool flush) {
  if (artifact.target == Target::kGlesFrag && artifact.output.feedback) {
    // Nothing between begin and end may throw: an active transform feedback would block
    // every cleanup call. Each begin restarts writing at the buffer's start, so every run
    // overwrites the same floats.
    glBeginTransformFeedback(GL_POINTS);
    glDrawArrays(GL_POINTS, 0, static_cast<GLsizei>(artifact.output.width));
    glEndTransformFeedback();
    // As for fragment kernels: every run is submitted on its own, so runs cost the same on
    // both paths.
    if (flush) glFlush();
  } else if (artifact.target == Target::kGlesFrag) {
    glDrawArrays(GL_TRIANGLES, 0, 3);
    // Each run must really execute. llvmpipe bins draws into a scene and may drop a tile's
    // earlier commands when a later opaque draw covers it, so unflushed back-to-back draws
    // could time as one; a flush per run rules that out. (Mesa 22.3, dense 128: 16.2 ms per
    // run with or without it, so the flush costs nothing measurable there.)
    if (flush) glFlush();
  } else {
    glDispatchCompute(static_cast<GLuint>(artifact.dispatch[0]),
                      static_cast<GLuint>(artifact.dispatch[1]),
                      static_cast<GLuint>(artifact.dispatch[2]));
    // Successive runs write the same output buffer, and a model's next kernel reads it: keep
    // them ordered as the API requires.
    glMemoryBarrier(GL_SHADER_STORAGE_BARRIER_BIT);
  }
}

std::vector<std::vector<float>> read_render_targets(int count, int64_t width, int64_t height,
                                                    int channels) {
  const auto w = static_cast<GLsizei>(width);
  const auto h = static_cast<GLsizei>(height);
  const size_t texels = static_cast<size_t>(width) * static_cast<size_t>(height);
  glPixelStorei(GL_PACK_ALIGNMENT, 4);
  glBindBuffer(GL_PIXEL_PACK_BUFFER, 0);
  std::vector<std::vector<float>> targets;
  for (int j = 0; j < count; ++j) {
    glReadBuffer(GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j));
    std::vector<float> pixels(texels * static_cast<size_t>(channels));
    bool read_red = false;
    if (channels == 1) {
      // GL_RED is only guaranteed as the implementation's own choice of read format; RGBA
      // with FLOAT is what EXT_color_buffer_float always allows.
      GLint format = 0, type = 0;
      glGetIntegerv(GL_IMPLEMENTATION_COLOR_READ_FORMAT, &format);
      glGetIntegerv(GL_IMPLEMENTATION_COLOR_READ_TYPE, &type);
      read_red = format == GL_RED && type == GL_FLOAT;
    }
    if (channels == 4 || read_red) {
      glReadPixels(0, 0, w, h, channels == 4 ? GL_RGBA : GL_RED, GL_FLOAT, pixels.data());
    } else {
      std::vector<float> rgba(texels * 4);
      glReadPixels(0, 0, w, h, GL_RGBA, GL_FLOAT, rgba.data());
      for (size_t t = 0; t < texels; ++t) pixels[t] = rgba[4 * t];
    }
    targets.push_back(std::move(pixels));
  }
  glReadBuffer(GL_COLOR_ATTACHMENT0);
  check_gl("reading the render targets back");
  return targets;
}

/// Through a staging buffer: the buffer is copied into a fresh GL_STREAM_READ buffer and that
/// one is mapped, never `buffer` itself. NVIDIA's driver moves a buffer that the CPU maps for
/// reading into system memory, and the timed runs that follow the checked one then wrote their
/// output over PCIe (H100, driver 580, 2026-11-24: MobileNet-v2's first depthwise layer, 1.6 MB
/// out, timed 64 us instead of 5.6 us; dense 1000^3 186 us instead of 118 us).
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

}  // namespace webtune::gl
