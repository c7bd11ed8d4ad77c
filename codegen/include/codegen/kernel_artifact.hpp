/// \file kernel_artifact.hpp
/// A built kernel: its source plus everything an agent needs to feed it and read it back.
///
/// Agents never see config knobs: the artifact says how each logical row-major tensor is laid
/// out on the device, so a runtime (C++ over EGL, or JavaScript in a browser) only follows it.
#pragma once

#include <array>
#include <boost/json/fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/target.hpp"

namespace webtune {

/// How one logical row-major input tensor of `shape` is stored on the device.
///
/// Packing: with pack_axis = a ≥ 0, the tensor is viewed with dims[a] replaced by
/// ceil(dims[a]/4); each element of that packed tensor is one RGBA texel (or one vec4 of a
/// buffer) holding the 4 consecutive elements along axis a, zero-padded past the end. With
/// pack_axis = −1 each element is one R texel (or one float).
/// Placement: packed element t (flat, row-major over the packed shape) sits at texel
/// (t mod width, t div width); so width = packed last dim gives the natural 2D layout, and any
/// other width a linear ("wrapped") layout for tensors wider than the max texture size.
/// Buffers (compute targets) ignore width/height and store packed elements contiguously.
///
/// Layers (`layers` > 0, gles-frag model packages only): the tensor is a convolution's output
/// kept where a fragment kernel with OutputLayout::quad_layers wrote it, one 2D array texture of
/// `layers` layers of width × height RGBA32F texels; it is placed as that OutputLayout says with
/// rows = shape[0]·shape[1], cols = the product of the other dims, rows_per_item = layers and
/// channels = 4 (OutputLayout::quad_layers_source). pack_axis is then 1: every texel holds a
/// channel quad.
struct TensorLayout {
  std::vector<int64_t> shape;
  int pack_axis = -1;
  int64_t width = 0;   ///< texels per texture row
  int64_t height = 0;  ///< texture rows
  int layers = 0;      ///< 0: a 2D texture; else the layers of a 2D array texture (see above)

  int channels() const { return pack_axis >= 0 ? 4 : 1; }
  /// The shape with the packed axis divided (rounded up) by 4.
  std::vector<int64_t> packed_shape() const;
  int64_t packed_elements() const;
  /// Rearranges a row-major tensor into width·height·channels floats (zero-filled tail) in
  /// texel order, ready for glTexImage2D / a buffer upload; with `layers`, layers·width·height·4
  /// floats, layer by layer (glTexImage3D order).
  std::vector<float> pack(const std::vector<float>& logical) const;

  boost::json::object to_json() const;
  static TensorLayout from_json(const boost::json::value& value);
};

/// How the output tensor comes back.
///
/// The output tensor (row-major, `elements` floats) is viewed as a matrix [rows, cols] with
/// flat index = row·cols + col. A fragment (or, for buffers, a vec4 slot) covers `rows_per_item`
/// consecutive rows × `channels` consecutive cols. Items are numbered column-block fastest:
/// item t covers row block t div ceil(cols/channels) and col block t mod ceil(cols/channels).
/// Render target j (0 ≤ j < rows_per_item) holds row (row block · rows_per_item + j); item t
/// sits at texel (t mod width, t div width). Positions past rows or cols are padding.
/// For compute targets rows_per_item = channels = 1 and the buffer is the plain tensor.
///
/// Quad layers (`quad_layers`, gles-frag kernels in model packages only; never with feedback):
/// the rows_per_item render targets are the layers of one 2D array texture, and a block's values
/// are stored transposed, as channel quads: layer 4·g + p (0 ≤ g < rows_per_item/4, 0 ≤ p < 4)
/// holds at item t the vec4 of rows (row block · rows_per_item + 4·g + i, i = 0…3) at column
/// (col block · 4 + p). For a convolution (rows = channels, cols = output pixels) every texel is
/// then the channel quad of one pixel, what the next kernel's packed data reads, so no layout
/// transform goes between them (deploy/planner.cpp). Needs channels = 4 and rows_per_item a
/// multiple of 4.
///
/// Transform feedback (`feedback`, target gles-frag with a vertex-stage kernel): the source is a
/// vertex shader run once per item (gl_VertexID = t, 0 ≤ t < width·height, drawn as GL_POINTS
/// with GL_RASTERIZER_DISCARD), and its outputs o0 … o(varyings()−1) are captured in one buffer
/// with GL_INTERLEAVED_ATTRIBS: a float per row when channels = 1, else channels/4 vec4s per
/// row (channels 4, or 8 for two column quads), row j's before row j+1's, so that row j of item
/// t is at floats (t·rows_per_item + j)·channels … +channels−1. Then width = items and
/// height = 1, and unpack takes that one buffer as its only "target". (OpenGL ES 3.0 §2.15,
/// transform feedback.)
struct OutputLayout {
  int64_t rows = 0, cols = 0;
  int rows_per_item = 1;  ///< draw buffers used (fragment targets), or varyings (feedback)
  int channels = 1;       ///< 1 (R32F) or 4 (RGBA32F); with feedback also 8 (two vec4s)
  int64_t width = 0, height = 0;
  bool feedback = false;     ///< outputs come back through transform feedback (see above)
  bool quad_layers = false;  ///< render targets are layers holding channel quads (see above)

  int64_t elements() const { return rows * cols; }
  /// Items (fragments or vertices): ceil(rows / rows_per_item) · ceil(cols / channels).
  int64_t items() const {
    return (rows + rows_per_item - 1) / rows_per_item * ((cols + channels - 1) / channels);
  }
  /// Captured outputs o0, o1, … of a feedback kernel: rows_per_item · max(1, channels / 4).
  int varyings() const { return rows_per_item * (channels > 4 ? channels / 4 : 1); }
  /// Rebuilds the row-major output from the render targets' pixels: `targets[j]` holds
  /// width·height·channels floats read back from draw buffer j; with `feedback`, `targets` is
  /// the one captured buffer. Positions no item covers are NaN. Throws std::invalid_argument
  /// for the wrong number of targets.
  std::vector<float> unpack(const std::vector<std::vector<float>>& targets) const;
  /// The inverse of unpack for render targets (not feedback): `logical` (elements() floats)
  /// as rows_per_item targets of width·height·channels floats, padding zero. Throws
  /// std::invalid_argument for the wrong element count.
  std::vector<std::vector<float>> pack_targets(const std::vector<float>& logical) const;
  /// The layout a TensorLayout with `layers` describes (see TensorLayout): quad_layers set.
  static OutputLayout quad_layers_source(const TensorLayout& layout);

  boost::json::object to_json() const;
  static OutputLayout from_json(const boost::json::value& value);
};

/// How a wasm module (target wasm) sits in linear memory and is run; docs/wasm_abi.md.
struct WasmModuleInfo {
  int threads = 1;           ///< T: the calls run(0) … run(T−1) that make one execution
  int64_t memory_pages = 0;  ///< P: 64 KiB pages of the imported memory (initial = maximum)
  /// Byte offsets in linear memory of every input in binding order (data, weight, then the
  /// epilogue's bias and residual: Workload::input_count), then of the output, last (64-byte
  /// aligned, inside P pages).
  std::vector<int64_t> offsets = {0, 0, 0};
  bool simd = false;  ///< the module uses SIMD128
  /// The module uses relaxed SIMD (f32x4.relaxed_madd, the fma knob). JSON "relaxed_simd",
  /// written only when true, so modules without it keep their JSON; false if absent.
  bool relaxed_simd = false;
  /// The module imports a shared memory although T = 1: a model package's kernel placed in the
  /// package's one linear memory, which threaded kernels share (wasm_emitter.hpp,
  /// emit_wasm_placed). JSON "shared_memory", written only when true; false if absent.
  bool shared_memory = false;

  boost::json::object to_json() const;
  /// Throws std::invalid_argument on a missing or out-of-range field.
  static WasmModuleInfo from_json(const boost::json::value& value);
};

/// Everything an agent needs to run one candidate.
struct KernelArtifact {
  Target target = Target::kGlesFrag;
  /// GLSL ES (fragment shaders pair with the fixed full-screen vertex shader; a gles-frag
  /// kernel whose output.feedback is set is a vertex shader instead and pairs with
  /// kFeedbackFragmentShader), WGSL, or for target wasm the linked module in base64 (standard
  /// alphabet, padded).
  std::string source;
  /// Inputs in binding order (Workload::input_count): 0 = data (sampler "in0" on texture unit
  /// 0, or SSBO binding 0), 1 = weight ("in1" / binding 1), then the epilogue's bias and
  /// residual: sampler "in<i>" on texture unit i, or SSBO bindings 3 and 4. The output is SSBO
  /// binding 2 for compute targets (kept there so plain kernels bind as before epilogues);
  /// scratch buffers, if any, are bindings 5 and 6 (see scratch_floats).
  std::vector<TensorLayout> inputs;
  OutputLayout output;
  /// glDispatchCompute group counts (compute targets).
  std::array<int64_t, 3> dispatch = {1, 1, 1};
  /// Workgroup size declared in the source (compute targets), for logs and limit checks.
  std::array<int64_t, 3> workgroup = {1, 1, 1};
  /// Bytes of `shared` (workgroup) memory the source declares (compute targets).
  int64_t shared_memory_bytes = 0;
  /// Scratch storage buffers the kernel needs besides its inputs and output (gles-compute only,
  /// e.g. the GEMM's k_groups: cross-workgroup split-K in one dispatch). The runtime creates
  /// them once per kernel (per trial, or per step of a model) and keeps them for every run:
  ///  - scratch_floats: floats at SSBO binding 5, uninitialised (the kernel writes before it
  ///    reads within each run);
  ///  - scratch_counters: uints at SSBO binding 6, zero-filled once when created; the kernel
  ///    leaves them at zero at the end of every run, so that the next run starts clean.
  /// 0 = none. In the JSON only when non-zero, so older artifacts and agents are unchanged; an
  /// agent that cannot provide them (the browser agent's executors) must refuse the artifact.
  int64_t scratch_floats = 0;
  int64_t scratch_counters = 0;
  /// Target wasm only: memory layout and threads; serialized as "wasm" only for wasm artifacts.
  WasmModuleInfo wasm;

  boost::json::object to_json() const;
  /// Throws std::invalid_argument on a missing or malformed field (e.g. negative scratch).
  static KernelArtifact from_json(const boost::json::value& value);
};

/// The vertex shader that every fragment kernel is drawn with: one triangle covering the
/// viewport, no attributes (GLSL ES 3.00, uses gl_VertexID).
extern const char* const kFullscreenVertexShader;

/// The fragment shader that every vertex-stage (transform feedback) kernel is linked with: it
/// never runs (GL_RASTERIZER_DISCARD), but ES programs need both stages (GLSL ES 3.00).
extern const char* const kFeedbackFragmentShader;

}  // namespace webtune
