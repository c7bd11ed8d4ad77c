/// \file gl_harness.hpp
/// A test-only way to run one KernelArtifact on a headless EGL context with inputs given as
/// raw device data: textures' texels (already placed) or buffers' floats, and to read back the
/// raw outputs (each render target's texels, or the output buffer). GlRuntime (native-agent)
/// only runs Workloads with seeded inputs; the glue kernels (deploy/glue_kernels.hpp) are not
/// Workloads and a relayout reads render targets that no TensorLayout::pack makes, so their
/// tests need this lower level. Throws std::runtime_error with the driver's log on a compile or
/// link error, and on any GL error.
#pragma once

#include <GLES3/gl32.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/kernel_artifact.hpp"
#include "native_agent/egl_context.hpp"

namespace webtune::test {

class GlHarness {
 public:
  GlHarness() : context_(EglContext::create()) {}

  const GlDeviceInfo& info() const { return context_->info(); }

  /// Runs a fragment kernel (gles-frag, not feedback): input i is a texture of
  /// artifact.inputs[i].width × height × channels() holding `texels[i]` (at least that many
  /// floats; with TensorLayout::layers a 2D array texture, layer by layer); returns each render
  /// target's width·height·channels floats (quad layers come back as one target per layer).
  std::vector<std::vector<float>> run_fragment(const KernelArtifact& artifact,
                                               const std::vector<std::vector<float>>& texels) {
    Objects objects;
    objects.program = link(artifact, objects);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    for (size_t i = 0; i < artifact.inputs.size(); ++i) {
      const TensorLayout& l = artifact.inputs[i];
      if (l.layers > 0) {  // quad layers: a 2D array texture, texels layer by layer
        if (texels.at(i).size() < static_cast<size_t>(l.width * l.height * 4 * l.layers))
          throw std::runtime_error("input " + std::to_string(i) + " has too few texels");
        new_input_texture(objects, i, GL_TEXTURE_2D_ARRAY);
        glTexStorage3D(GL_TEXTURE_2D_ARRAY, 1, GL_RGBA32F, static_cast<GLsizei>(l.width),
                       static_cast<GLsizei>(l.height), l.layers);
        glTexSubImage3D(GL_TEXTURE_2D_ARRAY, 0, 0, 0, 0, static_cast<GLsizei>(l.width),
                        static_cast<GLsizei>(l.height), l.layers, GL_RGBA, GL_FLOAT,
                        texels[i].data());
        continue;
      }
      const bool rgba = l.channels() == 4;
      const size_t needed = static_cast<size_t>(l.width * l.height * l.channels());
      if (texels.at(i).size() < needed)
        throw std::runtime_error("input " + std::to_string(i) + " has too few texels");
      new_input_texture(objects, i, GL_TEXTURE_2D);
      glTexStorage2D(GL_TEXTURE_2D, 1, rgba ? GL_RGBA32F : GL_R32F, static_cast<GLsizei>(l.width),
                     static_cast<GLsizei>(l.height));
      glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, static_cast<GLsizei>(l.width),
                      static_cast<GLsizei>(l.height), rgba ? GL_RGBA : GL_RED, GL_FLOAT,
                      texels[i].data());
    }
    check("uploading the input textures");
    const OutputLayout& out = artifact.output;
    const auto width = static_cast<GLsizei>(out.width), height = static_cast<GLsizei>(out.height);
    GLuint framebuffer = 0;
    glGenFramebuffers(1, &framebuffer);
    objects.framebuffers.push_back(framebuffer);
    glBindFramebuffer(GL_FRAMEBUFFER, framebuffer);
    glActiveTexture(GL_TEXTURE0 + static_cast<GLenum>(artifact.inputs.size()));
    std::vector<GLenum> draw_buffers;
    for (int j = 0; j < out.rows_per_item; ++j) {
      GLuint texture = 0;
      glGenTextures(1, &texture);
      objects.textures.push_back(texture);
      glBindTexture(GL_TEXTURE_2D, texture);
      glTexStorage2D(GL_TEXTURE_2D, 1, out.channels == 1 ? GL_R32F : GL_RGBA32F, width, height);
      const GLenum attachment = GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j);
      glFramebufferTexture2D(GL_FRAMEBUFFER, attachment, GL_TEXTURE_2D, texture, 0);
      draw_buffers.push_back(attachment);
    }
    glDrawBuffers(static_cast<GLsizei>(draw_buffers.size()), draw_buffers.data());
    if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
      throw std::runtime_error("incomplete framebuffer");
    glViewport(0, 0, width, height);
    glDisable(GL_BLEND);
    glDisable(GL_DITHER);
    GLuint vertex_array = 0;
    glGenVertexArrays(1, &vertex_array);
    objects.vertex_arrays.push_back(vertex_array);
    glBindVertexArray(vertex_array);
    glUseProgram(objects.program);
    for (size_t i = 0; i < artifact.inputs.size(); ++i) {
      const GLint location =
          glGetUniformLocation(objects.program, ("in" + std::to_string(i)).c_str());
      if (location >= 0) glUniform1i(location, static_cast<GLint>(i));
    }
    // NaN first, so that a texel the kernel does not write shows.
    const GLfloat nan[4] = {NAN, NAN, NAN, NAN};
    for (int j = 0; j < out.rows_per_item; ++j) glClearBufferfv(GL_COLOR, j, nan);
    glDrawArrays(GL_TRIANGLES, 0, 3);
    check("drawing");
    std::vector<std::vector<float>> targets;
    const size_t texel_count = static_cast<size_t>(width) * static_cast<size_t>(height);
    for (int j = 0; j < out.rows_per_item; ++j) {
      glReadBuffer(GL_COLOR_ATTACHMENT0 + static_cast<GLenum>(j));
      std::vector<float> rgba(texel_count * 4);
      glReadPixels(0, 0, width, height, GL_RGBA, GL_FLOAT, rgba.data());
      std::vector<float> pixels(texel_count * static_cast<size_t>(out.channels));
      for (size_t t = 0; t < texel_count; ++t)
        for (int c = 0; c < out.channels; ++c)
          pixels[t * static_cast<size_t>(out.channels) + static_cast<size_t>(c)] = rgba[t * 4 + c];
      targets.push_back(std::move(pixels));
    }
    check("reading the render targets");
    return targets;
  }

  /// Runs a compute kernel (gles-compute): input i's floats at storage binding `bindings[i]`,
  /// the output (artifact.output.elements() floats) at binding 2; returns the output buffer.
  std::vector<float> run_compute(const KernelArtifact& artifact,
                                 const std::vector<std::vector<float>>& buffers,
                                 const std::vector<int>& bindings) {
    Objects objects;
    objects.program = link(artifact, objects);
    auto make_buffer = [&](const std::vector<float>& data, size_t floats) {
      std::vector<float> padded(std::max<size_t>((floats + 3) / 4 * 4, 4), 0.0f);
      std::copy(data.begin(), data.end(), padded.begin());
      GLuint buffer = 0;
      glGenBuffers(1, &buffer);
      objects.buffers.push_back(buffer);
      glBindBuffer(GL_SHADER_STORAGE_BUFFER, buffer);
      glBufferData(GL_SHADER_STORAGE_BUFFER, static_cast<GLsizeiptr>(padded.size() * 4),
                   padded.data(), GL_DYNAMIC_COPY);
      return buffer;
    };
    for (size_t i = 0; i < buffers.size(); ++i)
      glBindBufferBase(GL_SHADER_STORAGE_BUFFER, static_cast<GLuint>(bindings.at(i)),
                       make_buffer(buffers[i], buffers[i].size()));
    const auto elements = static_cast<size_t>(artifact.output.elements());
    const GLuint output = make_buffer(std::vector<float>(elements, NAN), elements);
    glBindBufferBase(GL_SHADER_STORAGE_BUFFER, 2, output);
    glUseProgram(objects.program);
    glDispatchCompute(static_cast<GLuint>(artifact.dispatch[0]),
                      static_cast<GLuint>(artifact.dispatch[1]),
                      static_cast<GLuint>(artifact.dispatch[2]));
    glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    check("dispatching");
    glBindBuffer(GL_SHADER_STORAGE_BUFFER, output);
    const void* mapped = glMapBufferRange(GL_SHADER_STORAGE_BUFFER, 0,
                                          static_cast<GLsizeiptr>(elements * 4), GL_MAP_READ_BIT);
    if (mapped == nullptr) throw std::runtime_error("mapping the output failed");
    std::vector<float> values(elements);
    std::copy_n(static_cast<const float*>(mapped), elements, values.data());
    glUnmapBuffer(GL_SHADER_STORAGE_BUFFER);
    check("reading the output");
    return values;
  }

 private:
  struct Objects {
    GLuint program = 0;
    std::vector<GLuint> shaders, textures, buffers, framebuffers, vertex_arrays;
    ~Objects() {
      glUseProgram(0);
      glBindFramebuffer(GL_FRAMEBUFFER, 0);
      glBindVertexArray(0);
      for (GLuint s : shaders) glDeleteShader(s);
      if (program) glDeleteProgram(program);
      if (!textures.empty())
        glDeleteTextures(static_cast<GLsizei>(textures.size()), textures.data());
      if (!buffers.empty()) glDeleteBuffers(static_cast<GLsizei>(buffers.size()), buffers.data());
      if (!framebuffers.empty())
        glDeleteFramebuffers(static_cast<GLsizei>(framebuffers.size()), framebuffers.data());
      if (!vertex_arrays.empty())
        glDeleteVertexArrays(static_cast<GLsizei>(vertex_arrays.size()), vertex_arrays.data());
      while (glGetError() != GL_NO_ERROR) {
      }
    }
  };

  /// A NEAREST-filtered texture for input `i`, bound to `target` on unit i and kept in `objects`.
  static void new_input_texture(Objects& objects, size_t i, GLenum target) {
    GLuint texture = 0;
    glGenTextures(1, &texture);
    objects.textures.push_back(texture);
    glActiveTexture(GL_TEXTURE0 + static_cast<GLenum>(i));
    glBindTexture(target, texture);
    glTexParameteri(target, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(target, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  }

  static void check(const std::string& what) {
    const GLenum error = glGetError();
    if (error != GL_NO_ERROR)
      throw std::runtime_error("GL error " + std::to_string(error) + " while " + what);
  }

  static GLuint compile(GLenum type, const std::string& source, Objects& objects) {
    const GLuint shader = glCreateShader(type);
    objects.shaders.push_back(shader);
    const char* text = source.c_str();
    glShaderSource(shader, 1, &text, nullptr);
    glCompileShader(shader);
    GLint ok = GL_FALSE;
    glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
    if (ok != GL_TRUE) {
      char log[4096] = {};
      glGetShaderInfoLog(shader, sizeof log, nullptr, log);
      throw std::runtime_error(std::string("shader failed to compile: ") + log + "\n" + source);
    }
    return shader;
  }

  static GLuint link(const KernelArtifact& artifact, Objects& objects) {
    const GLuint program = glCreateProgram();
    if (artifact.target == Target::kGlesFrag) {
      glAttachShader(program, compile(GL_VERTEX_SHADER, kFullscreenVertexShader, objects));
      glAttachShader(program, compile(GL_FRAGMENT_SHADER, artifact.source, objects));
    } else {
      glAttachShader(program, compile(GL_COMPUTE_SHADER, artifact.source, objects));
    }
    glLinkProgram(program);
    GLint ok = GL_FALSE;
    glGetProgramiv(program, GL_LINK_STATUS, &ok);
    if (ok != GL_TRUE) {
      char log[4096] = {};
      glGetProgramInfoLog(program, sizeof log, nullptr, log);
      glDeleteProgram(program);
      throw std::runtime_error(std::string("program failed to link: ") + log);
    }
    return program;
  }

  std::unique_ptr<EglContext> context_;
};

}  // namespace webtune::test
