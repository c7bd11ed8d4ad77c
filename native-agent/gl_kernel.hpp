/// \file gl_kernel.hpp
/// The GL pieces that run one KernelArtifact on the current OpenGL ES context, shared by the
/// measuring Trial (gl_runtime.cpp) and the model runner (model_runner.cpp): ONE implementation
/// of checking an artifact against the device, compiling its program, creating and filling
/// textures and storage buffers, render targets, the run itself (a draw for gles-frag, a
/// dispatch for gles-compute) and reading results back. Private to the native agent library.
///
/// Errors are MeasureError (codegen/error_no.hpp): INSTANTIATION for an artifact that cannot run
/// on this device, COMPILE_DEVICE with the driver's log, RUNTIME_DEVICE for GL errors. The model
/// runner adds the step, node and kernel file to the message.
///
/// Binding contract (kernel_artifact.hpp): fragment and vertex-stage kernels read input i from
/// sampler "in<i>" on texture unit i; compute kernels from storage buffer binding
/// storage_binding(i) (0, 1, then 3, 4, …) and write binding kOutputBinding (2); a compute
/// kernel with scratch (KernelArtifact::scratch_floats / scratch_counters) also binds
/// kScratchFloatsBinding (5) and kScratchCountersBinding (6).
#pragma once

#include <GLES3/gl32.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_artifact.hpp"
#include "native_agent/egl_context.hpp"

namespace webtune::gl {

/// Names of the GL errors in the queue, comma-separated, and empties it ("" when none).
/// Bounded, because a lost context may report GL_CONTEXT_LOST on every call.
std::string drain_gl_errors();
/// Throws MeasureError(RUNTIME_DEVICE) naming the GL errors raised while doing `what`.
void check_gl(const std::string& what);
/// "GL_FRAMEBUFFER_INCOMPLETE_ATTACHMENT", …, for a glCheckFramebufferStatus value.
std::string framebuffer_status_name(GLenum status);

/// Bytes of a storage buffer holding `floats` floats: rounded up to 16 so that std430 arrays of
/// vec4 never read past the end, and never 0 (a zero-sized SSBO binding is an error).
GLsizeiptr buffer_bytes(int64_t floats);
/// The storage buffer binding of compute input `input`: data 0, weight 1, then 3, 4, … (the
/// output keeps binding 2).
inline GLuint storage_binding(int input) {
  return static_cast<GLuint>(input < 2 ? input : input + 1);
}
inline constexpr GLuint kOutputBinding = 2;
/// Scratch storage of a kernel that asks for it (kernel_artifact.hpp): floats, uint counters.
inline constexpr GLuint kScratchFloatsBinding = 5;
inline constexpr GLuint kScratchCountersBinding = 6;

/// Every GL object some owner (a trial, a loaded model) created; the destructor unbinds
/// everything a kernel run may have bound and deletes them all, so an early exit leaks nothing
/// (an agent runs thousands of trials in one context).
struct GlObjects {
  std::vector<GLuint> programs, shaders, textures, buffers, framebuffers, renderbuffers,
      vertex_arrays, transform_feedbacks;

  GlObjects() = default;
  GlObjects(const GlObjects&) = delete;
  GlObjects& operator=(const GlObjects&) = delete;
  ~GlObjects();
};

/// Checks `artifact` against the device `info` before any GL object is made, so that a bad
/// artifact is reported as such, not as a GL error: texture sizes and GL_MAX_TEXTURE_SIZE, draw
/// buffers, varyings and feedback components, workgroup size and count, shared memory, storage
/// blocks and their size, EXT_color_buffer_float for fragment kernels, ES 3.1 for compute;
/// scratch buffers only on compute kernels, non-negative, their bindings and sizes within the
/// device's GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS and GL_MAX_SHADER_STORAGE_BLOCK_SIZE.
/// Throws MeasureError (INSTANTIATION, or RUNTIME_DEVICE for a missing device feature).
void validate_artifact(const KernelArtifact& artifact, const GlDeviceInfo& info);

/// Compiles and links the artifact's program (fragment kernels with kFullscreenVertexShader,
/// vertex-stage kernels with kFeedbackFragmentShader and their varyings o0 … captured
/// interleaved, compute kernels alone), registers it and its shaders in `objects`, and for
/// fragment and vertex-stage kernels points samplers in0, in1, … at texture units 0, 1, …
/// (the program is left in use). Throws MeasureError: COMPILE_DEVICE with the driver's log,
/// RUNTIME_DEVICE on a GL error.
GLuint compile_program(const KernelArtifact& artifact, GlObjects& objects);

/// An empty vertex array (the kernels use gl_VertexID only), registered in `objects`.
GLuint create_vertex_array(GlObjects& objects);

/// A width × height texture, R32F (channels 1) or RGBA32F (channels 4), one level, NEAREST,
/// clamped, created on texture `unit` (GL_TEXTUREi) and left bound there. With `data` (width ·
/// height · channels floats, texel order) it is filled. Registered in `objects`.
GLuint create_texture(GlObjects& objects, GLenum unit, int64_t width, int64_t height, int channels,
                      const float* data);
/// A 2D array texture of `layers` layers of width × height RGBA32F texels, one level, NEAREST,
/// clamped, created on texture `unit` and left bound there (GL_TEXTURE_2D_ARRAY): the quad
/// layers a fragment kernel with OutputLayout::quad_layers renders into, read by the next kernel
/// as a sampler2DArray. Registered in `objects`.
GLuint create_array_texture(GlObjects& objects, GLenum unit, int64_t width, int64_t height,
                            int layers);
/// Replaces the whole contents of `texture` (bound on texture `unit`) with width · height ·
/// channels floats in texel order.
void upload_texture(GLuint texture, GLenum unit, int64_t width, int64_t height, int channels,
                    const float* data);

/// A storage buffer of buffer_bytes(floats) bytes, bound to GL_SHADER_STORAGE_BUFFER; with
/// `data`, its first `floats` floats are copied from it and the rest are zero. Registered in
/// `objects`.
GLuint create_storage_buffer(GlObjects& objects, int64_t floats, const float* data, GLenum usage);

/// The scratch storage buffers of one kernel (0 where it asks for none).
struct ScratchBuffers {
  GLuint floats = 0;
  GLuint counters = 0;
};

/// Creates the scratch buffers `artifact` asks for (none when scratch_floats and
/// scratch_counters are 0), registered in `objects`: scratch_floats floats left uninitialised
/// (the kernel writes them before it reads them in every run) and scratch_counters uints
/// zero-filled (the kernel leaves them at zero after every run, so they are created once per
/// kernel and kept for all its runs; two kernels never share them). Throws
/// MeasureError(RUNTIME_DEVICE) on a GL error.
ScratchBuffers create_scratch_buffers(const KernelArtifact& artifact, GlObjects& objects);
/// Binds the non-zero buffers of `scratch` at kScratchFloatsBinding and kScratchCountersBinding.
void bind_scratch_buffers(const ScratchBuffers& scratch);

/// A framebuffer with `targets` attached as color attachments 0, 1, … (all width × height,
/// R32F or RGBA32F as `channels` says, for the message only) and drawn to all of them, left
/// bound to GL_FRAMEBUFFER. Throws MeasureError(RUNTIME_DEVICE) when it is incomplete.
GLuint create_framebuffer(GlObjects& objects, const std::vector<GLuint>& targets, int64_t width,
                          int64_t height, int channels);

/// A framebuffer with layers 0 … layers−1 of `array_texture` (create_array_texture) attached as
/// color attachments 0, 1, … and drawn to all of them, left bound to GL_FRAMEBUFFER. Throws
/// MeasureError(RUNTIME_DEVICE) when it is incomplete.
GLuint create_layer_framebuffer(GlObjects& objects, GLuint array_texture, int layers, int64_t width,
                                int64_t height);

/// The fixed-function state a fragment kernel's draw needs: viewport width × height, no blend,
/// depth, stencil, scissor, dither or rasterizer discard, all color channels written.
void set_fragment_draw_state(int64_t width, int64_t height);

/// Runs the artifact once with everything bound: a full-screen triangle (gles-frag), a point per
/// item under transform feedback (vertex stage), or glDispatchCompute followed by a shader
/// storage barrier (gles-compute). With `flush`, fragment and feedback draws are flushed so that
/// every timed run really executes (see the comment in gl_kernel.cpp); a model's steps each
/// draw into other targets and need no flush between them. Raises no exception (check_gl after).
void run_kernel(const KernelArtifact& artifact, bool flush = true);

/// The pixels of color attachments 0 … count−1 of the bound read framebuffer, width × height ×
/// channels floats each (channels 1 or 4), in texel order. Throws MeasureError(RUNTIME_DEVICE).
std::vector<std::vector<float>> read_render_targets(int count, int64_t width, int64_t height,
                                                    int channels);

/// The first `count` floats of `buffer`, read back through a staging buffer (never by mapping
/// `buffer` itself: see gl_kernel.cpp). Throws MeasureError(RUNTIME_DEVICE) when the mapping
/// fails or its contents are lost.
std::vector<float> read_through_staging(GLuint buffer, int64_t count, const std::string& what);

}  // namespace webtune::gl
