/// \file glsl_frag_emitter.cpp
/// The gles-frag template: config spaces and GLSL ES 3.00 fragment shaders for dense, conv2d and
/// depthwise_conv2d over float textures.
///
/// How a kernel is organised
/// -------------------------
/// Every operator is computed as a matrix of outputs [rows, cols] (OutputLayout):
///   dense             rows = M,      cols = N        (C[M,N])
///   conv2d            rows = N·K,    cols = OH·OW    (Y[N,K,OH,OW]: a row is one output plane)
///   depthwise_conv2d  rows = N·C,    cols = OH·OW
/// One fragment ("item") computes a block of out_rows × out_cols outputs: out_cols consecutive
/// columns in one vec4 (or a float), out_rows consecutive rows in out_rows draw buffers. For the
/// convolutions the rows of a block are output channels that share every data fetch, and the
/// columns are output pixels that share every weight fetch, so a 4×4 block needs 8 fetches per
/// reduction step for 16 multiply-adds instead of 2 fetches per multiply-add.
///
/// Each input texture is read through a GLSL function ldN(row, col) over a row-major "view"
/// matrix of texels (dense A: [M, K]; B: [K, N]; conv data: [N·C·H, W]; conv weight:
/// [K, C·R·S]; depthwise weight: [C, R·S]; packed axes divided by 4). With the 2d layout the
/// texture width is the view's width and the fetch is texelFetch(ivec2(col, row)); with the flat
/// layout the texture is the packed tensor wrapped at kFlatWidth texels and every fetch pays
/// for a linear index and a shift/mask.
///
/// Knobs (each first candidate is the plain default)
/// -------------------------------------------------
/// out_rows  {1,2,4,8}  Output rows per fragment = draw buffers (rows_per_item). More rows reuse
///                      each fetch of the column operand (B, data) across more multiply-adds;
///                      8 needs GL_MAX_DRAW_BUFFERS ≥ 8 (device limit below).
/// out_cols  {1,4}      Output columns per fragment: one float (R32F target) or one vec4
///                      (RGBA32F target). 4 reuses each fetch of the row operand (A, weights).
/// packing   dense {none,k,kn}; conv2d / depthwise {none,c}. Which inputs are RGBA32F textures:
///             none: both R32F, scalar multiply-adds (the plain kernel);
///             k:    A and B packed four along K (the reduction), so each step is a vec4 `dot`;
///             kn:   A packed along K, B packed along N, so each k-quad is four vec4
///                   multiply-adds into the vec4 output (needs out_cols = 4);
///             c:    data and weight packed four along C. conv2d: the reduction runs over channel
///                   quads with `dot`; depthwise: the four channels of a quad are four output rows,
///                   multiplied component-wise (needs out_rows a multiple of 4).
///           Packing cuts the number of fetches by 4 and lets the reduction use vector ALUs;
///           tails that are not multiples of 4 are zero-filled by TensorLayout::pack.
/// algo      conv2d / depthwise {direct,igemm}. direct: nested loops over c, r, s (depthwise: r,
///           s); igemm (implicit GEMM): one flattened reduction loop whose indices are decoded
///           with div/mod, which unrolls across tap boundaries but pays for the decode.
/// order     conv2d {crs,rsc}. Nesting (direct) or decode order (igemm) of the reduction:
///           crs walks the weight row contiguously (the plain order); rsc puts channels innermost
///           so the padding test and the input coordinates of a tap are computed once per tap
///           instead of once per channel.
/// unroll    {1,2,4,8}  Unroll factor of the channel loop (conv2d direct), of the flattened
///           reduction loop (igemm), of the s loop (depthwise direct) or of the K loop (dense),
///           with a straight-line remainder. It trades instruction-cache pressure for fewer
///           loop branches and lets the compiler schedule fetches of several steps together.
/// layout_data, layout_weight, layout_out  {2d,flat}. 2d: texture width = the view's width,
///           no div/mod in the address, but a wide view (or a tall one) breaks
///           GL_MAX_TEXTURE_SIZE; flat: width min(elements, kFlatWidth), always fits for
///           tensors up to kFlatWidth·max_texture_size texels, costs a shift and a mask per
///           fetch. One knob per texture, because usually only one of them is too large.
/// out_wrap  {2048,sqrt}  Where a flat output texture wraps: at kFlatWidth texels (or at the
///           item count, if smaller: one row), or at ceil(√items) texels, a near-square texture
///           (a division and a modulo per fragment, by constants). The 2d layout of a
///           convolution with few output channels, and the flat one of up to 2048 items, are a
///           few texels tall: MobileNet-v2's 96→24 pointwise layer at out_rows 4 draws 784×6
///           (2d) or 2048×3 (flat). SwiftShader ran that shader alone (a draw, then a blocking
///           1-texel read) at 4.0–6.0 GFLOP/s into 784×6, and at 6.0–7.6 into textures 12 to 96
///           texels tall; batches of draws ran the same in every shape (docs/benchmarks.md,
///           "Output textures a few texels tall"). Last, and absent in older records (2048), so
///           that their indices and kernels stay what they were.
/// fetch     {texel,lod,texture}  How ldN reads a texel: texelFetch(ivec2, 0), or textureLod
///           (level 0) or texture() at the texel's centre in normalized coordinates (NEAREST
///           filtering, one level: the same value). Same result, different code in the
///           driver: on SwiftShader (Chromium's CPU WebGL) textureLod ran an 8×4 dense 512
///           kernel 1.3–1.4× faster than texelFetch, and texture() another 10–15 % faster.
///           New candidates go last, so that older records keep their indices.
/// stage     {fragment,vertex}  Where the kernel runs. fragment: one fragment per item, the
///           rows of its block in out_rows draw buffers. vertex: one vertex per item (a point
///           drawn with the rasterizer discarded), the rows in as many outputs o0, o1, …,
///           captured by transform feedback into one buffer (OutputLayout::feedback). A vertex
///           writes up to max_varying_vectors outputs instead of max_draw_buffers (31 against 8
///           on SwiftShader), so its blocks can be taller: each fetch of B feeds more
///           multiply-adds. On SwiftShader, a 16×4 vertex block of dense 512 ran 1.2–1.4× faster
///           than the best 8×4 fragment block (docs/benchmarks.md, issue 5).
/// rows_scale {1,2,3}   Output rows per item = out_rows · rows_scale; above 1 only for the
///           vertex stage (a fragment has no more draw buffers than out_rows' largest value).
/// col_scale dense {1,2}  Output columns per item = out_cols · col_scale: 2 makes an 8-column
///           block (two vec4 outputs per row), for the vertex stage with out_cols = 4 only. An
///           8×8 block fetches 16 texels per 256 multiply-adds, against 20 for 16×4 and 12 per
///           128 for the fragment stage's 8×4. (Convolutions lack it: their columns are output
///           pixels whose windows are decoded per column; not built.)
///           stage, rows_scale and col_scale came after fetch and read as fragment, 1 and 1
///           where a record lacks them.
///
/// Structural constraints
/// ----------------------
/// - packing kn needs out_cols = 4: B's texels hold 4 columns; with one output column 3/4 of
///   every fetch would be thrown away (and the kernel would need dynamic component indexing).
/// - depthwise packing c needs out_rows % 4 = 0: a texel holds 4 channels = 4 output rows.
/// - depthwise packing c with batch > 1: out_rows divides C, or C is a multiple of 4, so that
///   a channel quad (one texel) never straddles two images. (Blocks may straddle them:
///   "Non-divisible tiling" below.)
/// - out_rows < 2·rows and out_cols < 2·cols: a block that is mostly padding only wastes work.
/// - unroll ≤ the trip count of the loop it unrolls: larger factors would only duplicate the
///   kernel of a smaller one.
/// - rows_scale > 1 needs stage = vertex; stage = vertex needs layout_out = 2d (a feedback buffer
///   has one layout, so flat would only repeat the kernel); col_scale = 2 needs stage = vertex
///   and out_cols = 4.
/// - out_wrap sqrt needs layout_out = flat (with 2d it would only repeat the kernel).
/// In the constraints below "out_rows" and "out_cols" mean the rows and columns of an item,
/// out_rows · rows_scale and out_cols · col_scale.
///
/// Device limits
/// -------------
/// - width and height of the data, weight, (fragment stage) output, bias and residual
///   textures ≤ max_texture_size;
/// - fragment stage: out_rows (draw buffers) ≤ max_draw_buffers;
/// - vertex stage: outputs of an item (rows · max(1, cols/4)) ≤ max_varying_vectors and
///   rows · cols ≤ max_feedback_components (GL_MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS).
///
/// Epilogues (codegen/epilogue.hpp)
/// --------------------------------
/// The bias and the residual are inputs 2 and 3 (or 2 alone), samplers in2 / in3 on texture
/// units 2 / 3, read through loaders ld2 / ld3 like the data and the weight, once per block in
/// the output stage, after the reduction: o_j = webtune_epilogue(acc_j, bias, residual)
/// (glsl_epilogue_functions), in both stages. Layouts are chosen so that the loads are cheap:
///   bias      1-row texture. dense with vec4 blocks (out_cols ≥ 4): packed four along N, one
///             texel per output vec4; else R32F: conv2d / depthwise fetch one value per block
///             row (the row's channel, broadcast over the row's columns), dense one per column.
///   residual  packed four along its last axis where an output column quad is one texel: dense
///             with out_cols ≥ 4 (view [M, N/4]), and convolutions with out_cols = 4 and OW a
///             multiple of 4 (view [N·K·OH, OW/4]; a quad's 4 pixels are in one output row
///             since OH·OW and the quad start are multiples of 4); else R32F, viewed as the
///             output matrix [rows, cols], one fetch per output.
///   Each is 2d when its view fits kFlatWidth × kFlatWidth, else wrapped at kFlatWidth
///   (device limit: its height ≤ max_texture_size). An empty epilogue adds no text: plain
///   kernels keep their source (tests/template_test.cpp pins their hashes).
///
/// Non-divisible tiling
/// --------------------
/// No knob needs to divide an axis (except depthwise packing c with batch > 1 and C % 4 ≠ 0):
/// - output rows and columns past the end of the output matrix are padding in OutputLayout,
///   computed from clamped indices and never read back (padded edges);
/// - convolution blocks whose out_rows does not divide K (C) with batch > 1 straddle two
///   images: each row (packed depthwise: each channel quad) decodes its image and channel,
///   and conv2d then fetches the data per row
///   instead of once per block (guarded by construction; such configs cost more fetches and the
///   tuner weighs that);
/// - reductions whose length the unroll factor does not divide end with straight-line
///   remainder steps; quads past K or C (packing) read the zeros TensorLayout::pack pads with.
/// Padding (zero-filled texels) is used for the reduction axes, because a zero contributes
/// nothing to a dot product and costs no test per step; clamping for the block axes, because a
/// padded block output is discarded anyway and clamping keeps every fetch inside its texture.
///
/// Out-of-range safety: every index that can pass the end of a tensor (the last row or column
/// block, a padded quad row of B) is clamped to the last valid one, so no fetch ever leaves the
/// data; padding taps of a convolution fetch a clamped texel and multiply it by a 0/1 mask.
/// Fragments past the last item (flat output) write zeros and return; a vertex kernel is drawn
/// with exactly one vertex per item.

#include "codegen/glsl_frag_emitter.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/error_no.hpp"

namespace webtune {
namespace {

/// Width of a flat (wrapped) texture: a power of two so that the address is a shift and a mask,
/// and WebGL2's minimum MAX_TEXTURE_SIZE, so a flat texture is never too wide.
constexpr int64_t kFlatWidth = 2048;
constexpr int kFlatShift = 11;
static_assert((int64_t{1} << kFlatShift) == kFlatWidth);

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// The least w ≥ 1 with w·w ≥ n (n ≥ 1), in integers: a double's sqrt may be one off.
int64_t ceil_sqrt(int64_t n) {
  auto w = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
  while (w * w < n) ++w;
  while (w > 1 && (w - 1) * (w - 1) >= n) --w;
  return std::max<int64_t>(w, 1);
}

// ---------------------------------------------------------------------------------------------
// Knobs
// ---------------------------------------------------------------------------------------------

/// The knobs of one entity; knobs an operator does not have keep these defaults.
struct FragKnobs {
  int out_rows = 1;  ///< rows of an item: knob out_rows times knob rows_scale
  int out_cols = 1;  ///< columns of an item: knob out_cols times knob col_scale (1, 4 or 8)
  std::string packing = "none";
  std::string algo = "direct";
  std::string order = "crs";
  int unroll = 1;
  bool data_2d = true;
  bool weight_2d = true;
  bool out_2d = true;
  bool out_sqrt = false;        // knob out_wrap: a flat output wraps at ceil(√items) texels
  std::string fetch = "texel";  // knob fetch: texelFetch, textureLod or texture
  bool vertex = false;          // knob stage: vertex (transform feedback) or fragment
  int rows_scale = 1;
  int col_scale = 1;
};

bool has_knob(const ConfigEntity& entity, const std::string& name) {
  for (const Knob& knob : entity.knobs())
    if (knob.name == name) return true;
  return false;
}

FragKnobs read_knobs(const ConfigEntity& entity) {
  FragKnobs k;
  k.out_rows = static_cast<int>(entity.get_int("out_rows"));
  k.out_cols = static_cast<int>(entity.get_int("out_cols"));
  k.packing = entity.get_string("packing");
  if (has_knob(entity, "algo")) k.algo = entity.get_string("algo");
  if (has_knob(entity, "order")) k.order = entity.get_string("order");
  k.unroll = static_cast<int>(entity.get_int("unroll"));
  k.data_2d = entity.get_string("layout_data") == "2d";
  k.weight_2d = entity.get_string("layout_weight") == "2d";
  k.out_2d = entity.get_string("layout_out") == "2d";
  // Records from before the fetch knob existed read texels with texelFetch.
  if (has_knob(entity, "fetch")) k.fetch = entity.get_string("fetch");
  if (has_knob(entity, "stage")) k.vertex = entity.get_string("stage") == "vertex";
  if (has_knob(entity, "rows_scale")) k.rows_scale = static_cast<int>(entity.get_int("rows_scale"));
  if (has_knob(entity, "col_scale")) k.col_scale = static_cast<int>(entity.get_int("col_scale"));
  if (has_knob(entity, "out_wrap")) k.out_sqrt = entity.get_string("out_wrap") == "sqrt";
  k.out_rows *= k.rows_scale;
  k.out_cols *= k.col_scale;
  return k;
}

bool is_conv(const Workload& w) {
  return w.op == OpKind::kConv2d;
}
bool is_depthwise(const Workload& w) {
  return w.op == OpKind::kDepthwiseConv2d;
}
bool packs_data(const FragKnobs& k) {
  return k.packing != "none";
}

/// Taller blocks than out_rows only for vertices: a fragment has no more draw buffers.
bool rows_scale_fits_stage(const FragKnobs& k) {
  return k.rows_scale == 1 || k.vertex;
}

/// 8-column blocks (two vec4 outputs per row) only for vertices, from 4-column ones.
bool col_scale_fits_stage(const FragKnobs& k) {
  return k.col_scale == 1 || (k.vertex && k.out_cols == 8);
}

/// vec4 accumulators (and outputs) per block row: 2 for 8-column blocks, else 1.
int col_quads(const FragKnobs& k) {
  return k.out_cols > 4 ? k.out_cols / 4 : 1;
}

// ---------------------------------------------------------------------------------------------
// Geometry: output matrix, texture views and layouts
// ---------------------------------------------------------------------------------------------

int64_t output_rows(const Workload& w) {
  switch (w.op) {
    case OpKind::kDense:
      return w.m;
    case OpKind::kConv2d:
      return w.batch * w.out_channels;
    case OpKind::kDepthwiseConv2d:
      return w.batch * w.in_channels;
  }
  return 0;
}

int64_t output_cols(const Workload& w) {
  return w.op == OpKind::kDense ? w.n : w.out_h() * w.out_w();
}

/// Channels as the shader iterates them: quads when the data is packed along C.
int64_t channel_steps(const Workload& w, const FragKnobs& k) {
  return packs_data(k) ? ceil_div(w.in_channels, 4) : w.in_channels;
}

/// Steps of the dense K loop: scalars, or quads when A is packed along K.
int64_t dense_k_steps(const Workload& w, const FragKnobs& k) {
  return packs_data(k) ? ceil_div(w.k, 4) : w.k;
}

int data_pack_axis(const Workload& w, const FragKnobs& k) {
  if (!packs_data(k)) return -1;
  return 1;  // A[M,K] along K; X[N,C,H,W] along C
}

int weight_pack_axis(const Workload& w, const FragKnobs& k) {
  if (!packs_data(k)) return -1;
  if (w.op == OpKind::kDense) return k.packing == "k" ? 0 : 1;  // B[K,N] along K or N
  if (is_depthwise(w)) return 0;                                // W[C,1,R,S] along C
  return 1;                                                     // W[K,C,R,S] along C
}

/// Width of the data view in texels (see the file comment).
int64_t data_view_width(const Workload& w, const FragKnobs& k) {
  if (w.op == OpKind::kDense) return dense_k_steps(w, k);
  return w.width;
}

/// Width of the weight view in texels.
int64_t weight_view_width(const Workload& w, const FragKnobs& k) {
  switch (w.op) {
    case OpKind::kDense:
      return k.packing == "kn" ? ceil_div(w.n, 4) : w.n;
    case OpKind::kConv2d:
      return channel_steps(w, k) * w.kernel_h * w.kernel_w;
    case OpKind::kDepthwiseConv2d:
      return w.kernel_h * w.kernel_w;
  }
  return 0;
}

TensorLayout input_layout(std::vector<int64_t> shape, int pack_axis, int64_t view_width,
                          bool two_d) {
  TensorLayout layout;
  layout.shape = std::move(shape);
  layout.pack_axis = pack_axis;
  int64_t elements = 1;
  for (size_t d = 0; d < layout.shape.size(); ++d)
    elements *= static_cast<int>(d) == pack_axis ? ceil_div(layout.shape[d], 4) : layout.shape[d];
  layout.width = two_d ? view_width : std::min(elements, kFlatWidth);
  layout.height = ceil_div(elements, layout.width);
  return layout;
}

/// How the epilogue's residual is read (see "Epilogues" in the file comment).
enum class ResidualRead {
  kScalar,      ///< R32F, view [rows, cols] of the output matrix: one fetch per output
  kColumnQuad,  ///< RGBA32F packed along the last axis; one texel = one output column quad
};

/// Everything about an entity that does not depend on GLSL text: the layouts and block counts.
struct FragPlan {
  Workload w;
  FragKnobs k;
  TensorLayout data, weight;
  int64_t data_view = 0, weight_view = 0;  ///< view widths (texels per view row)
  OutputLayout out;
  int64_t row_blocks = 0, col_blocks = 0;
  // The epilogue's inputs (absent: bias_index / residual_index = -1).
  int bias_index = -1, residual_index = -1;  ///< input (and sampler in<i>) numbers
  TensorLayout bias, residual;
  int64_t bias_view = 0, residual_view = 0;  ///< view widths, as data_view
  ResidualRead residual_read = ResidualRead::kScalar;
  // A model package's wiring (FragPackageOptions): output as quad layers; data from them.
  bool quad_layers_out = false;
  std::optional<OutputLayout> data_layers;
};

/// Layout of an epilogue input whose view is [view_rows, view_width] texels: the natural 2d
/// layout (texture width = view width) when both fit kFlatWidth (WebGL2's minimum
/// MAX_TEXTURE_SIZE), else wrapped at kFlatWidth like a flat data texture.
TensorLayout epilogue_layout(std::vector<int64_t> shape, int pack_axis, int64_t view_rows,
                             int64_t view_width) {
  TensorLayout layout;
  layout.shape = std::move(shape);
  layout.pack_axis = pack_axis;
  const int64_t elements = view_rows * view_width;
  const bool two_d = view_width <= kFlatWidth && view_rows <= kFlatWidth;
  layout.width = two_d ? view_width : std::min(elements, kFlatWidth);
  layout.height = ceil_div(elements, layout.width);
  return layout;
}

/// The bias ([C_out], packed four along C_out when a dense block's columns are a vec4 of
/// consecutive output channels) and the residual (the output's shape; see ResidualRead).
void plan_epilogue(FragPlan& p) {
  const Workload& w = p.w;
  const Epilogue& e = w.epilogue;
  int next = 2;
  if (e.bias) {
    p.bias_index = next++;
    const int64_t channels = w.input_shape(p.bias_index)[0];
    const bool packed = w.op == OpKind::kDense && p.k.out_cols >= 4;
    p.bias_view = packed ? ceil_div(channels, 4) : channels;
    p.bias = epilogue_layout({channels}, packed ? 0 : -1, 1, p.bias_view);
  }
  if (e.residual == Residual::kNone) return;
  p.residual_index = next++;
  std::vector<int64_t> shape = w.input_shape(p.residual_index);
  const int64_t last = shape.back();
  const int last_axis = static_cast<int>(shape.size()) - 1;
  // A column quad of the output is 4 consecutive elements of one row of the last axis when the
  // output matrix's columns are that axis (dense) or when the last axis (OW) holds whole quads.
  const bool quads = p.k.out_cols >= 4 && (w.op == OpKind::kDense || last % 4 == 0);
  if (quads) {
    p.residual_read = ResidualRead::kColumnQuad;
    p.residual_view = ceil_div(last, 4);
    int64_t view_rows = 1;
    for (int d = 0; d < last_axis; ++d) view_rows *= shape[d];
    p.residual = epilogue_layout(std::move(shape), last_axis, view_rows, p.residual_view);
  } else {
    p.residual_read = ResidualRead::kScalar;
    p.residual_view = p.out.cols;
    p.residual = epilogue_layout(std::move(shape), -1, p.out.rows, p.out.cols);
  }
}

FragPlan make_plan(const Workload& w, const FragKnobs& k) {
  FragPlan p;
  p.w = w;
  p.k = k;
  p.data_view = data_view_width(w, k);
  p.weight_view = weight_view_width(w, k);
  p.data = input_layout(w.data_shape(), data_pack_axis(w, k), p.data_view, k.data_2d);
  p.weight = input_layout(w.weight_shape(), weight_pack_axis(w, k), p.weight_view, k.weight_2d);
  p.out.rows = output_rows(w);
  p.out.cols = output_cols(w);
  p.out.rows_per_item = k.out_rows;
  p.out.channels = k.out_cols;
  p.row_blocks = ceil_div(p.out.rows, k.out_rows);
  p.col_blocks = ceil_div(p.out.cols, k.out_cols);
  plan_epilogue(p);
  const int64_t items = p.row_blocks * p.col_blocks;
  if (k.vertex) {  // one vertex per item, captured in item order
    p.out.feedback = true;
    p.out.width = items;
    p.out.height = 1;
    return p;
  }
  p.out.width = k.out_2d     ? p.col_blocks
                : k.out_sqrt ? ceil_sqrt(items)
                             : std::min(items, kFlatWidth);
  p.out.height = ceil_div(items, p.out.width);
  return p;
}

/// Trip count of the loop that `unroll` applies to.
int64_t unrolled_trip_count(const Workload& w, const FragKnobs& k) {
  const int64_t taps = w.kernel_h * w.kernel_w;
  switch (w.op) {
    case OpKind::kDense:
      return dense_k_steps(w, k);
    case OpKind::kConv2d:
      return k.algo == "igemm" ? channel_steps(w, k) * taps : channel_steps(w, k);
    case OpKind::kDepthwiseConv2d:
      return k.algo == "igemm" ? taps : w.kernel_w;
  }
  return 1;
}

/// Rows of one image in the output matrix (conv: K, depthwise: C); 0 for dense.
int64_t rows_per_image(const Workload& w) {
  if (is_conv(w)) return w.out_channels;
  if (is_depthwise(w)) return w.in_channels;
  return 0;
}

/// Whether a block of the convolution's output rows can straddle two images (batch > 1 and
/// out_rows not dividing the rows of one image): then every row decodes its own image and
/// channel, and conv2d fetches the data of each row separately (see "Non-divisible tiling").
bool straddles_images(const Workload& w, const FragKnobs& k) {
  return w.op != OpKind::kDense && w.batch != 1 && rows_per_image(w) % k.out_rows != 0;
}

/// Why an entity cannot be built, or empty when it can (the structural constraints).
std::string structural_problem(const Workload& w, const FragKnobs& k) {
  if (k.packing == "kn" && k.out_cols < 4) return "packing kn needs out_cols = 4";
  if (!rows_scale_fits_stage(k)) return "rows_scale above 1 needs stage = vertex";
  if (!col_scale_fits_stage(k)) return "col_scale 2 needs stage = vertex and out_cols = 4";
  if (is_depthwise(w) && k.packing == "c" && k.out_rows % 4 != 0)
    return "depthwise packing c needs out_rows a multiple of 4";
  if (is_depthwise(w) && k.packing == "c" && straddles_images(w, k) && w.in_channels % 4 != 0)
    return "depthwise packing c with batch > 1 needs out_rows to divide C or C % 4 = 0";
  return {};
}

// ---------------------------------------------------------------------------------------------
// GLSL text
// ---------------------------------------------------------------------------------------------

/// Lines of GLSL with indentation; `open` and `close` bracket a block.
class ShaderWriter {
 public:
  template <typename... Parts>
  void line(const Parts&... parts) {
    out_ << std::string(2 * depth_, ' ');
    (out_ << ... << parts);
    out_ << '\n';
  }
  template <typename... Parts>
  void open(const Parts&... parts) {
    line(parts..., "{");
    ++depth_;
  }
  void close() {
    --depth_;
    line("}");
  }
  /// One line as is, without indentation (text made elsewhere, e.g. the epilogue functions).
  void raw(const std::string& text) { out_ << text << '\n'; }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  int depth_ = 0;
};

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

/// A GLSL float literal of `value` with 9 significant digits (enough to round-trip a float).
std::string float_literal(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.8e", value);
  return text;
}

/// "a, b, c" (or with another separator) from a generator of n parts.
std::string join(int n, const std::function<std::string(int)>& part,
                 std::string_view separator = ", ") {
  std::string text;
  for (int i = 0; i < n; ++i) {
    if (i) text += separator;
    text += part(i);
  }
  return text;
}

const char* component(int index) {
  static constexpr std::array<const char*, 4> kNames = {"x", "y", "z", "w"};
  return kNames[index];
}

/// `expr`, or min(expr, last) when the index can pass the end of its axis.
std::string clamped(const std::string& expr, int64_t last, bool may_overflow) {
  return may_overflow ? cat("min(", expr, ", ", last, ")") : expr;
}

/// "base + offset", without "+ 0".
std::string offset(const std::string& base, int64_t amount) {
  return amount == 0 ? base : cat(base, " + ", amount);
}

/// Index of element `offset_in_block` of block `block` of `size` elements.
std::string block_index(const std::string& block, int64_t size, int64_t offset_in_block) {
  return offset(size == 1 ? block : cat(block, " * ", size), offset_in_block);
}

/// A plain loop over [0, extent), or a block with a constant when the extent is 1.
void open_loop(ShaderWriter& s, const std::string& var, int64_t extent) {
  if (extent == 1) {
    s.open("");
    s.line("const int ", var, " = 0;");
  } else {
    s.open("for (int ", var, " = 0; ", var, " < ", extent, "; ++", var, ") ");
  }
}

/// A loop over [0, trip) of `var`, unrolled `unroll` times; the remainder is straight-line code
/// with constant indices. `body` emits one step for an index expression.
void emit_unrolled_loop(ShaderWriter& s, const std::string& var, int64_t trip, int unroll,
                        const std::function<void(const std::string&)>& body) {
  if (unroll <= 1) {
    open_loop(s, var, trip);
    body(var);
    s.close();
    return;
  }
  const int64_t main_trip = trip / unroll * unroll;
  if (main_trip > 0) {
    s.open("for (int ", var, " = 0; ", var, " < ", main_trip, "; ", var, " += ", unroll, ") ");
    for (int u = 0; u < unroll; ++u) {
      s.open("");
      body(u == 0 ? var : cat("(", var, " + ", u, ")"));
      s.close();
    }
    s.close();
  }
  for (int64_t step = main_trip; step < trip; ++step) {
    s.open("");
    body(std::to_string(step));
    s.close();
  }
}

void emit_prelude(ShaderWriter& s, const FragPlan& p, const ConfigEntity& entity) {
  s.line("#version 300 es");
  s.line("// webtune gles-frag (", p.k.vertex ? "vertex" : "fragment", " stage) ", p.w.key(), ": ",
         entity.to_string());
  s.line("precision highp float;");
  s.line("precision highp int;");
  s.line("precision highp sampler2D;");
  if (p.data_layers) {
    s.line("precision highp sampler2DArray;");
    s.line("uniform highp sampler2DArray in0;  // data: another kernel's quad layers");
  } else {
    s.line("uniform highp sampler2D in0;  // data");
  }
  s.line("uniform highp sampler2D in1;  // weight");
  if (p.bias_index >= 0) s.line("uniform highp sampler2D in", p.bias_index, ";  // bias");
  if (p.residual_index >= 0)
    s.line("uniform highp sampler2D in", p.residual_index, ";  // residual");
  const char* out_type = p.k.out_cols == 1 ? "float" : "vec4";
  const int quads = col_quads(p.k);
  for (int j = 0; j < p.k.out_rows; ++j) {
    if (!p.k.vertex) {
      s.line("layout(location = ", j, ") out ", out_type, " o", j, ";");
      continue;
    }
    // Captured by name (o0, o1, … in this order) through transform feedback: row j's column
    // quads are o(j·quads) … o(j·quads + quads − 1) (OutputLayout::varyings).
    for (int q = 0; q < quads; ++q) s.line("out ", out_type, " o", j * quads + q, ";");
  }
}

/// Emits `ldN(row, col)`: the texel at (row, col) of the input's view, read with texelFetch
/// (`fetch` "texel") or, at the texel's centre in normalized coordinates, with textureLod at
/// level 0 ("lod") or texture ("texture"). Every texture is NEAREST-filtered with one level, so
/// all three read the same texel whatever level of detail texture() derives (even where the
/// derivatives are undefined, past a flat output's early return). The reciprocal texture
/// sizes are literals: (c + 0.5) * (1/W) is within W * 2^-23 texels of c + 0.5, far from a
/// texel edge for any W the device allows.
void emit_loader(ShaderWriter& s, int index, const TensorLayout& layout, int64_t view_width,
                 const std::string& fetch) {
  const bool vec = layout.channels() == 4;
  s.open(vec ? "vec4" : "float", " ld", index, "(int row, int col) ");
  std::string coord;
  if (layout.width == view_width) {
    coord = "ivec2(col, row)";
  } else {
    s.line("int i = row * ", view_width, " + col;");
    if (layout.height == 1)
      coord = "ivec2(i, 0)";
    else if (layout.width == kFlatWidth)  // i ≥ 0, so a mask and a shift are mod and div
      coord = cat("ivec2(i & ", kFlatWidth - 1, ", i >> ", kFlatShift, ")");
    else
      coord = cat("ivec2(i % ", layout.width, ", i / ", layout.width, ")");
  }
  if (fetch == "texel") {
    s.line("return texelFetch(in", index, ", ", coord, ", 0)", vec ? "" : ".r", ";");
  } else {
    const std::string centre = cat("(vec2(", coord, ") + 0.5) * vec2(",
                                   float_literal(1.0 / static_cast<double>(layout.width)), ", ",
                                   float_literal(1.0 / static_cast<double>(layout.height)), ")");
    if (fetch == "lod")
      s.line("return textureLod(in", index, ", ", centre, ", 0.0)", vec ? "" : ".r", ";");
    else
      s.line("return texture(in", index, ", ", centre, ")", vec ? "" : ".r", ";");
  }
  s.close();
}

/// Emits `vec4 ld0(int c, int y, int x)`: channel quad c of input pixel (y, x), read from the
/// quad layers another kernel wrote (OutputLayout::quad_layers; its rows are the C channels, its
/// columns the H·W pixels). With g = rows_per_item / 4 quads per item (1 or 2, so shifts and
/// masks): pixel P = y·W + x sits in item (c div g)·col_blocks + P div 4, layer 4·(c mod g) +
/// P mod 4. A producer with the 2d output layout has width = col_blocks, so the item is the
/// texel (P div 4, c div g) with no division at all.
void emit_layers_loader(ShaderWriter& s, const FragPlan& p) {
  const OutputLayout& o = *p.data_layers;
  const int quads = o.rows_per_item / 4;
  const int64_t col_blocks = ceil_div(o.cols, 4);
  const std::string block = quads == 1 ? "c" : "(c >> 1)";
  s.open("vec4 ld0(int c, int y, int x) ");
  s.line("int pix = y * ", p.w.width, " + x;");
  s.line("int layer = ", quads == 1 ? "pix & 3" : "((c & 1) << 2) | (pix & 3)", ";");
  std::string coord;
  if (o.width == col_blocks) {
    coord = cat("ivec2(pix >> 2, ", block, ")");
  } else {
    s.line("int t = ", block, " * ", col_blocks, " + (pix >> 2);");
    if (o.width == kFlatWidth)
      coord = cat("ivec2(t & ", kFlatWidth - 1, ", t >> ", kFlatShift, ")");
    else
      coord = cat("ivec2(t % ", o.width, ", t / ", o.width, ")");
  }
  if (p.k.fetch == "texel") {
    s.line("return texelFetch(in0, ivec3(", coord, ", layer), 0);");
  } else {
    const std::string centre = cat(
        "vec3((vec2(", coord, ") + 0.5) * vec2(", float_literal(1.0 / static_cast<double>(o.width)),
        ", ", float_literal(1.0 / static_cast<double>(o.height)), "), float(layer))");
    if (p.k.fetch == "lod")
      s.line("return textureLod(in0, ", centre, ", 0.0);");
    else
      s.line("return texture(in0, ", centre, ");");
  }
  s.close();
}

/// Declares `rb` (row block) and `cb` (column block) of this fragment or vertex; fragments past
/// the last item write zeros and return.
void emit_item_decode(ShaderWriter& s, const FragPlan& p) {
  if (p.k.vertex) {  // vertex t is item t; exactly one vertex per item is drawn
    s.line("int t = gl_VertexID;");
    s.line("int rb = t / ", p.col_blocks, ";");
    s.line("int cb = t - rb * ", p.col_blocks, ";");
    return;
  }
  s.line("ivec2 px = ivec2(gl_FragCoord.xy);");
  if (p.k.out_2d) {
    s.line("int rb = px.y;");
    s.line("int cb = px.x;");
    return;
  }
  const int64_t items = p.row_blocks * p.col_blocks;
  s.line("int t = px.y * ", p.out.width, " + px.x;");
  if (p.out.width * p.out.height > items) {
    s.open("if (t >= ", items, ") ");
    const char* zero = p.k.out_cols == 4 ? "vec4(0.0)" : "0.0";
    for (int j = 0; j < p.k.out_rows; ++j) s.line("o", j, " = ", zero, ";");
    s.line("return;");
    s.close();
  }
  s.line("int rb = t / ", p.col_blocks, ";");
  s.line("int cb = t - rb * ", p.col_blocks, ";");
}

/// The accumulator of block row j, column quad q: accj, or accj_q for 8-column blocks.
std::string acc(const FragPlan& p, int j, int q = 0) {
  return col_quads(p.k) == 1 ? cat("acc", j) : cat("acc", j, "_", q);
}

void emit_accumulators(ShaderWriter& s, const FragPlan& p) {
  for (int j = 0; j < p.k.out_rows; ++j)
    for (int q = 0; q < col_quads(p.k); ++q)
      s.line(p.k.out_cols == 1 ? "float " : "vec4 ", acc(p, j, q), " = ",
             p.k.out_cols == 1 ? "0.0" : "vec4(0.0)", ";");
}

/// The epilogue's operands of block row j, column quad q (bias `eb`, residual `er`), and the
/// stored value webtune_epilogue(acc, eb, er). Rows and columns past the output are clamped to
/// the last one: their outputs are padding (OutputLayout), and no fetch leaves a texture.
std::string emit_epilogue_value(ShaderWriter& s, const FragPlan& p, int j, int q) {
  const Workload& w = p.w;
  const bool vec = p.k.out_cols > 1;
  const int quads = col_quads(p.k);
  const std::string suffix = cat(j, "_", q);
  const auto column = [&](int i) { return cat("ec", 4 * q + i); };
  const auto fetch_row = [&](int index, const std::string& row,
                             const std::function<std::string(int)>& col) {
    return vec ? cat("vec4(",
                     join(4, [&](int i) { return cat("ld", index, "(", row, ", ", col(i), ")"); }),
                     ")")
               : cat("ld", index, "(", row, ", ", col(0), ")");
  };
  std::string bias = vec ? "vec4(0.0)" : "0.0", residual = bias;
  if (p.bias_index >= 0) {
    bias = cat("eb", suffix);
    if (w.op != OpKind::kDense) {  // one channel per row: the row's bias for every column
      s.line("float ", bias, " = ld", p.bias_index, "(0, ech", j, ");");
      if (vec) bias = cat("vec4(", bias, ")");
    } else if (p.bias.pack_axis == 0) {  // a texel holds the block's 4 columns
      s.line("vec4 ", bias, " = ld", p.bias_index, "(0, ",
             clamped(block_index("cb", quads, q), p.bias_view - 1, p.bias_view % quads != 0), ");");
    } else {
      s.line(vec ? "vec4 " : "float ", bias, " = ", fetch_row(p.bias_index, "0", column), ";");
    }
  }
  if (p.residual_index >= 0) {
    residual = cat("er", suffix);
    if (p.residual_read == ResidualRead::kScalar) {
      s.line(vec ? "vec4 " : "float ", residual, " = ",
             fetch_row(p.residual_index, cat("erow", j), column), ";");
    } else if (w.op == OpKind::kDense) {  // view [M, N/4]
      s.line(
          "vec4 ", residual, " = ld", p.residual_index, "(erow", j, ", ",
          clamped(block_index("cb", quads, q), p.residual_view - 1, p.residual_view % quads != 0),
          ");");
    } else {  // view [N·K·OH, OW/4]: the quad's pixels share an output row oh
      s.line("vec4 ", residual, " = ld", p.residual_index, "(erow", j, " * ", w.out_h(),
             " + eoh, eowq);");
    }
  }
  return cat("webtune_epilogue(", acc(p, j, q), ", ", bias, ", ", residual, ")");
}

/// Indices the epilogue's fetches share: clamped output rows erow_j, their channels ech_j
/// (convolutions), clamped output columns ec_i, and the column quad's output pixel (eoh, eowq).
void emit_epilogue_indices(ShaderWriter& s, const FragPlan& p) {
  const Workload& w = p.w;
  const bool row_overflow = p.out.rows % p.k.out_rows != 0;
  for (int j = 0; j < p.k.out_rows; ++j) {
    s.line("int erow", j, " = ",
           clamped(block_index("rb", p.k.out_rows, j), p.out.rows - 1, row_overflow), ";");
    if (w.op == OpKind::kDense || p.bias_index < 0) continue;
    const int64_t channels = rows_per_image(w);
    if (w.batch == 1)
      s.line("int ech", j, " = erow", j, ";");
    else
      s.line("int ech", j, " = erow", j, " - erow", j, " / ", channels, " * ", channels, ";");
  }
  const bool scalar_columns =
      (p.bias_index >= 0 && w.op == OpKind::kDense && p.bias.pack_axis < 0) ||
      (p.residual_index >= 0 && p.residual_read == ResidualRead::kScalar);
  if (scalar_columns) {
    const bool overflow = p.out.cols % p.k.out_cols != 0;
    for (int i = 0; i < p.k.out_cols; ++i)
      s.line("int ec", i, " = ",
             clamped(block_index("cb", p.k.out_cols, i), p.out.cols - 1, overflow), ";");
  }
  if (p.residual_index >= 0 && p.residual_read == ResidualRead::kColumnQuad &&
      w.op != OpKind::kDense) {
    s.line("int ep = cb * 4;");  // cols is a multiple of 4 here (OW is), so ep < cols
    s.line("int eoh = ep / ", w.out_w(), ";");
    s.line("int eowq = (ep - eoh * ", w.out_w(), ") / 4;");
  }
}

void emit_stores(ShaderWriter& s, const FragPlan& p) {
  const int quads = col_quads(p.k);
  if (!p.w.epilogue.empty()) emit_epilogue_indices(s, p);
  if (p.quad_layers_out) {  // transposed: layer 4·g + i gets pixel i of rows 4·g … 4·g + 3
    for (int j = 0; j < p.k.out_rows; ++j)
      s.line("vec4 v", j, " = ",
             p.w.epilogue.empty() ? acc(p, j, 0) : emit_epilogue_value(s, p, j, 0), ";");
    for (int g = 0; g < p.k.out_rows / 4; ++g)
      for (int i = 0; i < 4; ++i)
        s.line("o", 4 * g + i, " = vec4(",
               join(4, [&](int r) { return cat("v", 4 * g + r, ".", component(i)); }), ");");
    return;
  }
  for (int j = 0; j < p.k.out_rows; ++j)
    for (int q = 0; q < quads; ++q) {
      const std::string value =
          p.w.epilogue.empty() ? acc(p, j, q) : emit_epilogue_value(s, p, j, q);
      s.line("o", j * quads + q, " = ", value, ";");
    }
  if (p.k.vertex) {  // the point is discarded before rasterization; ES still wants a position
    s.line("gl_Position = vec4(0.0, 0.0, 0.0, 1.0);");
    s.line("gl_PointSize = 1.0;");
  }
}

/// Column indices `name0..` of the block, clamped when the last block passes the end.
void emit_block_columns(ShaderWriter& s, const FragPlan& p, const std::string& name) {
  const bool overflow = p.out.cols % p.k.out_cols != 0;
  for (int i = 0; i < p.k.out_cols; ++i)
    s.line("int ", name, i, " = ",
           clamped(block_index("cb", p.k.out_cols, i), p.out.cols - 1, overflow), ";");
}

// ---------------------------------------------------------------------------------------------
// dense: C[M,N] = A[M,K] · B[K,N]
// ---------------------------------------------------------------------------------------------

/// One K step of the dense kernel at step index `kx` (a scalar k, or a k-quad when packed).
void emit_dense_step(ShaderWriter& s, const FragPlan& p, const std::string& kx) {
  const int rows = p.k.out_rows, cols = p.k.out_cols, quads = col_quads(p.k);
  const Workload& w = p.w;
  if (p.k.packing == "none" && cols == 8) {  // one A fetch per row for both column quads
    for (int q = 0; q < quads; ++q)
      s.line("vec4 b", q, " = vec4(",
             join(4, [&](int i) { return cat("ld1(", kx, ", n", 4 * q + i, ")"); }), ");");
    for (int j = 0; j < rows; ++j) {
      s.line("float a", j, " = ld0(m", j, ", ", kx, ");");
      for (int q = 0; q < quads; ++q) s.line(acc(p, j, q), " += a", j, " * b", q, ";");
    }
    return;
  }
  if (p.k.packing == "none") {
    if (cols == 4)
      s.line("vec4 b = vec4(", join(4, [&](int i) { return cat("ld1(", kx, ", n", i, ")"); }),
             ");");
    else
      s.line("float b = ld1(", kx, ", n0);");
    for (int j = 0; j < rows; ++j) s.line("acc", j, " += ld0(m", j, ", ", kx, ") * b;");
    return;
  }
  for (int j = 0; j < rows; ++j) s.line("vec4 a", j, " = ld0(m", j, ", ", kx, ");");
  if (p.k.packing == "k") {
    for (int i = 0; i < cols; ++i) s.line("vec4 b", i, " = ld1(", kx, ", n", i, ");");
    for (int j = 0; j < rows; ++j) {
      if (cols == 1) {
        s.line("acc", j, " += dot(a", j, ", b0);");
        continue;
      }
      for (int q = 0; q < quads; ++q)
        s.line(acc(p, j, q), " += vec4(",
               join(4, [&](int i) { return cat("dot(a", j, ", b", 4 * q + i, ")"); }), ");");
    }
    return;
  }
  // kn: rows 4·kx + q of B, each a vec4 of 4 output columns. Rows past K (only in the last quad)
  // are clamped; their A components are the zero padding, so they add nothing.
  // With 8 columns, quad c of the block reads texel column nb<c> into b<r>_<c>.
  const bool overflow = w.k % 4 != 0;
  const auto b_name = [&](int r, int c) { return quads == 1 ? cat("b", r) : cat("b", r, "_", c); };
  for (int c = 0; c < quads; ++c)
    for (int r = 0; r < 4; ++r) {
      const std::string row = r == 0 ? cat("4 * ", kx) : cat("4 * ", kx, " + ", r);
      s.line("vec4 ", b_name(r, c), " = ld1(", clamped(row, w.k - 1, overflow && r > 0), ", ",
             quads == 1 ? std::string("nb") : cat("nb", c), ");");
    }
  for (int j = 0; j < rows; ++j)
    for (int c = 0; c < quads; ++c)
      s.line(
          acc(p, j, c), " += ",
          join(
              4, [&](int r) { return cat("a", j, ".", component(r), " * ", b_name(r, c)); }, " + "),
          ";");
}

void emit_dense_main(ShaderWriter& s, const FragPlan& p) {
  const Workload& w = p.w;
  const bool row_overflow = w.m % p.k.out_rows != 0;
  for (int j = 0; j < p.k.out_rows; ++j)
    s.line("int m", j, " = ", clamped(block_index("rb", p.k.out_rows, j), w.m - 1, row_overflow),
           ";");
  if (p.k.packing == "kn" && col_quads(p.k) == 1) {
    s.line("int nb = cb;");
  } else if (p.k.packing == "kn") {  // texel columns of B (4 output columns each) of the block
    const int quads = col_quads(p.k);
    const int64_t texel_cols = ceil_div(w.n, 4);
    for (int c = 0; c < quads; ++c)
      s.line("int nb", c, " = ",
             clamped(block_index("cb", quads, c), texel_cols - 1, texel_cols % quads != 0), ";");
  } else {
    emit_block_columns(s, p, "n");
  }
  emit_accumulators(s, p);
  emit_unrolled_loop(s, "k", dense_k_steps(w, p.k), p.k.unroll,
                     [&](const std::string& kx) { emit_dense_step(s, p, kx); });
}

// ---------------------------------------------------------------------------------------------
// Convolutions: shared pieces
// ---------------------------------------------------------------------------------------------

/// Output pixel of each block column: ih_i / iw_i = top-left input coordinate of its window.
void emit_window_origins(ShaderWriter& s, const FragPlan& p) {
  const Workload& w = p.w;
  emit_block_columns(s, p, "p");
  for (int i = 0; i < p.k.out_cols; ++i) {
    s.line("int oh", i, " = p", i, " / ", w.out_w(), ";");
    s.line("int ih", i, " = oh", i, " * ", w.stride, " - ", w.pad, ";");
    s.line("int iw", i, " = (p", i, " - oh", i, " * ", w.out_w(), ") * ", w.stride, " - ", w.pad,
           ";");
  }
}

/// For tap (r, s) and each block column i: dy_i (input row, clamped), dx_i (input column,
/// clamped) and, with padding, m_i = 1 inside the image and 0 on a padding tap.
void emit_tap_coordinates(ShaderWriter& s, const FragPlan& p, const std::string& r,
                          const std::string& c) {
  const Workload& w = p.w;
  for (int i = 0; i < p.k.out_cols; ++i) {
    if (w.pad == 0) {  // windows never leave the image
      s.line("int dy", i, " = ih", i, " + ", r, ";");
      s.line("int dx", i, " = iw", i, " + ", c, ";");
      continue;
    }
    s.line("int ty", i, " = ih", i, " + ", r, ";");
    s.line("int tx", i, " = iw", i, " + ", c, ";");
    s.line("float m", i, " = (ty", i, " >= 0 && ty", i, " < ", w.height, " && tx", i, " >= 0 && tx",
           i, " < ", w.width, ") ? 1.0 : 0.0;");
    s.line("int dy", i, " = clamp(ty", i, ", 0, ", w.height - 1, ");");
    s.line("int dx", i, " = clamp(tx", i, ", 0, ", w.width - 1, ");");
  }
}

/// " * m_i" when padding taps exist.
std::string mask(const FragPlan& p, int i) {
  return p.w.pad > 0 ? cat(" * m", i) : "";
}

/// "row0" decomposed into image n and first row of the block within the image.
void emit_block_image(ShaderWriter& s, const FragPlan& p, const std::string& first) {
  s.line("int row0 = ", block_index("rb", p.k.out_rows, 0), ";");
  if (p.w.batch == 1) {
    s.line("const int n = 0;");
    s.line("int ", first, " = row0;");
  } else {
    s.line("int n = row0 / ", rows_per_image(p.w), ";");
    s.line("int ", first, " = row0 - n * ", rows_per_image(p.w), ";");
  }
}

/// For a block that can straddle two images: each row j's image n<j> and channel <channel>j,
/// from its output row (clamped to the last row; rows past it are padding).
void emit_row_images(ShaderWriter& s, const FragPlan& p, const std::string& channel) {
  const int64_t image_rows = rows_per_image(p.w);
  const bool overflow = p.out.rows % p.k.out_rows != 0;
  for (int j = 0; j < p.k.out_rows; ++j) {
    s.line("int row", j, " = ",
           clamped(block_index("rb", p.k.out_rows, j), p.out.rows - 1, overflow), ";");
    s.line("int n", j, " = row", j, " / ", image_rows, ";");
    s.line("int ", channel, j, " = row", j, " - n", j, " * ", image_rows, ";");
  }
}

// ---------------------------------------------------------------------------------------------
// conv2d: Y[N,K,OH,OW] = X[N,C,H,W] ⊛ W[K,C,R,S]
// ---------------------------------------------------------------------------------------------

/// Multiply-adds of channel step `cx` at the current tap (dy_i, dx_i, m_i declared); the weight
/// column is `wcol`. Data view row = (n·Cq + c)·H + y.
void emit_conv_step(ShaderWriter& s, const FragPlan& p, const std::string& cx,
                    const std::string& wcol) {
  const Workload& w = p.w;
  const int rows = p.k.out_rows, cols = p.k.out_cols;
  const auto data_of = [&](const std::string& xbase, int i) {
    if (p.data_layers) return cat("ld0(", cx, ", dy", i, ", dx", i, ")");  // batch 1
    return cat("ld0(", xbase, " + ", cx, " * ", w.height, " + dy", i, ", dx", i, ")");
  };
  const auto data_at = [&](int i) { return data_of("xbase", i); };
  const std::string masks = p.w.pad > 0 ? " * vec4(m0, m1, m2, m3)" : "";
  if (straddles_images(w, p.k)) {  // each row reads the data of its own image
    for (int j = 0; j < rows; ++j) {
      const std::string xbase = cat("xbase", j);
      const auto row_data = [&](int i) { return data_of(xbase, i); };
      if (packs_data(p.k)) {
        for (int i = 0; i < cols; ++i)
          s.line("vec4 xv", j, "_", i, " = ", row_data(i), mask(p, i), ";");
        s.line("vec4 w", j, " = ld1(k", j, ", ", wcol, ");");
        s.line(
            "acc", j, " += ",
            cols == 4
                ? cat("vec4(",
                      join(4, [&](int i) { return cat("dot(xv", j, "_", i, ", w", j, ")"); }), ")")
                : cat("dot(xv", j, "_0, w", j, ")"),
            ";");
      } else if (cols == 4) {
        s.line("acc", j, " += ld1(k", j, ", ", wcol, ") * vec4(", join(4, row_data), ")", masks,
               ";");
      } else {
        s.line("acc", j, " += ld1(k", j, ", ", wcol, ") * ", row_data(0), mask(p, 0), ";");
      }
    }
    return;
  }
  if (packs_data(p.k)) {
    for (int i = 0; i < cols; ++i) s.line("vec4 xv", i, " = ", data_at(i), mask(p, i), ";");
    for (int j = 0; j < rows; ++j) {
      s.line("vec4 w", j, " = ld1(k", j, ", ", wcol, ");");
      if (cols == 4)
        s.line("acc", j, " += vec4(",
               join(4, [&](int i) { return cat("dot(xv", i, ", w", j, ")"); }), ");");
      else
        s.line("acc", j, " += dot(xv0, w", j, ");");
    }
    return;
  }
  if (cols == 4) {
    s.line("vec4 x = vec4(", join(4, data_at), ")", p.w.pad > 0 ? " * vec4(m0, m1, m2, m3)" : "",
           ";");
  } else {
    s.line("float x = ", data_at(0), mask(p, 0), ";");
  }
  for (int j = 0; j < rows; ++j) s.line("acc", j, " += ld1(k", j, ", ", wcol, ") * x;");
}

void emit_conv_direct(ShaderWriter& s, const FragPlan& p) {
  const Workload& w = p.w;
  const int64_t cq = channel_steps(w, p.k), taps = w.kernel_h * w.kernel_w;
  if (p.k.order == "rsc") {  // tap loops outside: coordinates and mask once per tap
    open_loop(s, "r", w.kernel_h);
    open_loop(s, "s", w.kernel_w);
    emit_tap_coordinates(s, p, "r", "s");
    s.line("int wrs = r * ", w.kernel_w, " + s;");
    emit_unrolled_loop(s, "c", cq, p.k.unroll, [&](const std::string& cx) {
      emit_conv_step(s, p, cx, cat(cx, " * ", taps, " + wrs"));
    });
    s.close();
    s.close();
    return;
  }
  emit_unrolled_loop(s, "c", cq, p.k.unroll, [&](const std::string& cx) {
    open_loop(s, "r", w.kernel_h);
    open_loop(s, "s", w.kernel_w);
    emit_tap_coordinates(s, p, "r", "s");
    emit_conv_step(s, p, cx, cat(cx, " * ", taps, " + r * ", w.kernel_w, " + s"));
    s.close();
    s.close();
  });
}

void emit_conv_igemm(ShaderWriter& s, const FragPlan& p) {
  const Workload& w = p.w;
  const int64_t cq = channel_steps(w, p.k), taps = w.kernel_h * w.kernel_w;
  emit_unrolled_loop(s, "l", cq * taps, p.k.unroll, [&](const std::string& lx) {
    // Decode the flat reduction index into channel step c and tap (r, s).
    if (taps == 1) {
      s.line("int c = ", lx, ";");
      s.line("const int r = 0, s = 0;");
    } else if (p.k.order == "crs") {  // l = c·R·S + r·S + s: also the weight column
      s.line("int c = ", lx, " / ", taps, ";");
      s.line("int rs = ", lx, " - c * ", taps, ";");
    } else {  // l = (r·S + s)·Cq + c
      s.line("int rs = ", lx, " / ", cq, ";");
      s.line("int c = ", lx, " - rs * ", cq, ";");
    }
    if (taps != 1) {
      s.line("int r = rs / ", w.kernel_w, ";");
      s.line("int s = rs - r * ", w.kernel_w, ";");
    }
    emit_tap_coordinates(s, p, "r", "s");
    const std::string wcol = p.k.order == "crs" || taps == 1 ? lx : cat("c * ", taps, " + rs");
    emit_conv_step(s, p, "c", wcol);
  });
}

void emit_conv_main(ShaderWriter& s, const FragPlan& p) {
  const Workload& w = p.w;
  const int64_t xstride = channel_steps(w, p.k) * w.height;  // data view rows per image
  if (straddles_images(w, p.k)) {
    emit_row_images(s, p, "k");
    for (int j = 0; j < p.k.out_rows; ++j) s.line("int xbase", j, " = n", j, " * ", xstride, ";");
  } else {
    emit_block_image(s, p, "kfirst");
    const bool row_overflow = w.out_channels % p.k.out_rows != 0;  // only with batch 1
    for (int j = 0; j < p.k.out_rows; ++j)
      s.line("int k", j, " = ", clamped(offset("kfirst", j), w.out_channels - 1, row_overflow),
             ";");
    s.line("int xbase = n * ", xstride, ";");
  }
  emit_window_origins(s, p);
  emit_accumulators(s, p);
  if (p.k.algo == "igemm")
    emit_conv_igemm(s, p);
  else
    emit_conv_direct(s, p);
}

// ---------------------------------------------------------------------------------------------
// depthwise_conv2d: Y[N,C,OH,OW] = X[N,C,H,W] ⊛ W[C,1,R,S]
// ---------------------------------------------------------------------------------------------

/// Multiply-adds of tap (r, s) at the current coordinates. Unpacked: row j is channel ch_j with
/// data rows from drow_j. Packed: quad q holds channels 4q..4q+3 of the block, and a_q_i is a vec4
/// over those channels for block column i.
void emit_depthwise_tap(ShaderWriter& s, const FragPlan& p, const std::string& wcol) {
  const int cols = p.k.out_cols;
  if (packs_data(p.k)) {
    for (int q = 0; q < p.k.out_rows / 4; ++q) {
      s.line("vec4 w", q, " = ld1(cq", q, ", ", wcol, ");");
      for (int i = 0; i < cols; ++i)
        s.line("a", q, "_", i, " += ",
               p.data_layers ? cat("ld0(cq", q, ", dy", i, ", dx", i, ")")
                             : cat("ld0(drow", q, " + dy", i, ", dx", i, ")"),
               mask(p, i), " * w", q, ";");
    }
    return;
  }
  const std::string masks = p.w.pad > 0 ? " * vec4(m0, m1, m2, m3)" : "";
  for (int j = 0; j < p.k.out_rows; ++j) {
    const auto data_at = [&](int i) { return cat("ld0(drow", j, " + dy", i, ", dx", i, ")"); };
    if (cols == 4)
      s.line("acc", j, " += ld1(ch", j, ", ", wcol, ") * vec4(", join(4, data_at), ")", masks, ";");
    else
      s.line("acc", j, " += ld1(ch", j, ", ", wcol, ") * ", data_at(0), mask(p, 0), ";");
  }
}

void emit_depthwise_main(ShaderWriter& s, const FragPlan& p) {
  const Workload& w = p.w;
  const int64_t channels = w.in_channels;
  if (straddles_images(w, p.k) && packs_data(p.k)) {  // C % 4 = 0 (structural_problem)
    // Quad q covers rows row0 + 4q … + 3: four channels of one image, since C and row0 are
    // multiples of 4. Quads past the last row are clamped to the last quad (padding rows).
    const int64_t cq = channels / 4;
    s.line("int row0 = ", block_index("rb", p.k.out_rows, 0), ";");
    for (int q = 0; q < p.k.out_rows / 4; ++q) {
      s.line("int qrow", q, " = ", clamped(offset("row0", 4 * q), p.out.rows - 4, true), ";");
      s.line("int n", q, " = qrow", q, " / ", channels, ";");
      s.line("int cq", q, " = (qrow", q, " - n", q, " * ", channels, ") / 4;");
      s.line("int drow", q, " = (n", q, " * ", cq, " + cq", q, ") * ", w.height, ";");
    }
  } else if (straddles_images(w, p.k)) {
    emit_row_images(s, p, "ch");
    for (int j = 0; j < p.k.out_rows; ++j)
      s.line("int drow", j, " = (n", j, " * ", channels, " + ch", j, ") * ", w.height, ";");
  } else if (packs_data(p.k)) {
    emit_block_image(s, p, "chfirst");
    const int quads = p.k.out_rows / 4;
    const int64_t cq = ceil_div(channels, 4);
    const bool overflow = cq % quads != 0;  // only with batch 1
    for (int q = 0; q < quads; ++q) {
      s.line("int cq", q, " = ", clamped(offset("chfirst / 4", q), cq - 1, overflow), ";");
      s.line("int drow", q, " = (n * ", cq, " + cq", q, ") * ", w.height, ";");
    }
  } else {
    emit_block_image(s, p, "chfirst");
    const bool overflow = channels % p.k.out_rows != 0;  // only with batch 1
    for (int j = 0; j < p.k.out_rows; ++j) {
      s.line("int ch", j, " = ", clamped(offset("chfirst", j), channels - 1, overflow), ";");
      s.line("int drow", j, " = (n * ", channels, " + ch", j, ") * ", w.height, ";");
    }
  }
  emit_window_origins(s, p);
  if (packs_data(p.k)) {
    for (int q = 0; q < p.k.out_rows / 4; ++q)
      for (int i = 0; i < p.k.out_cols; ++i) s.line("vec4 a", q, "_", i, " = vec4(0.0);");
  } else {
    emit_accumulators(s, p);
  }

  const int64_t taps = w.kernel_h * w.kernel_w;
  if (p.k.algo == "igemm") {
    emit_unrolled_loop(s, "l", taps, p.k.unroll, [&](const std::string& lx) {
      s.line("int r = ", lx, " / ", w.kernel_w, ";");
      s.line("int s = ", lx, " - r * ", w.kernel_w, ";");
      emit_tap_coordinates(s, p, "r", "s");
      emit_depthwise_tap(s, p, lx);
    });
  } else {
    open_loop(s, "r", w.kernel_h);
    emit_unrolled_loop(s, "s", w.kernel_w, p.k.unroll, [&](const std::string& sx) {
      emit_tap_coordinates(s, p, "r", sx);
      emit_depthwise_tap(s, p, cat("r * ", w.kernel_w, " + ", sx));
    });
    s.close();
  }

  if (packs_data(p.k)) {  // transpose: quad component jj is output row 4q + jj
    for (int q = 0; q < p.k.out_rows / 4; ++q)
      for (int jj = 0; jj < 4; ++jj) {
        const int j = 4 * q + jj;
        if (p.k.out_cols == 4)
          s.line("vec4 acc", j, " = vec4(",
                 join(4, [&](int i) { return cat("a", q, "_", i, ".", component(jj)); }), ");");
        else
          s.line("float acc", j, " = a", q, "_0.", component(jj), ";");
      }
  }
}

std::string emit_source(const FragPlan& p, const ConfigEntity& entity) {
  ShaderWriter s;
  emit_prelude(s, p, entity);
  if (p.data_layers)
    emit_layers_loader(s, p);
  else
    emit_loader(s, 0, p.data, p.data_view, p.k.fetch);
  emit_loader(s, 1, p.weight, p.weight_view, p.k.fetch);
  if (p.bias_index >= 0) emit_loader(s, p.bias_index, p.bias, p.bias_view, p.k.fetch);
  if (p.residual_index >= 0)
    emit_loader(s, p.residual_index, p.residual, p.residual_view, p.k.fetch);
  if (!p.w.epilogue.empty()) {
    std::istringstream functions(glsl_epilogue_functions(p.w.epilogue));
    for (std::string text; std::getline(functions, text);) s.raw(text);
  }
  s.open("void main() ");
  emit_item_decode(s, p);
  switch (p.w.op) {
    case OpKind::kDense:
      emit_dense_main(s, p);
      break;
    case OpKind::kConv2d:
      emit_conv_main(s, p);
      break;
    case OpKind::kDepthwiseConv2d:
      emit_depthwise_main(s, p);
      break;
  }
  emit_stores(s, p);
  s.close();
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// Space
// ---------------------------------------------------------------------------------------------

bool fits(const TensorLayout& layout, const DeviceLimits& limits) {
  return layout.width <= limits.max_texture_size && layout.height <= limits.max_texture_size;
}

void add_constraints(ConfigSpace& space, const Workload& w) {
  if (w.op == OpKind::kDense)
    space.add_constraint("packing kn needs out_cols = 4", [](const ConfigEntity& e) {
      return e.get_string("packing") != "kn" || e.get_int("out_cols") == 4;
    });
  if (is_depthwise(w))
    space.add_constraint("packing c needs out_rows a multiple of 4", [](const ConfigEntity& e) {
      return e.get_string("packing") != "c" || read_knobs(e).out_rows % 4 == 0;
    });
  if (is_depthwise(w) && w.batch != 1)
    space.add_constraint("depthwise packing c with batch > 1 needs out_rows | C or C % 4 = 0",
                         [w](const ConfigEntity& e) {
                           const FragKnobs k = read_knobs(e);
                           return k.packing != "c" || !straddles_images(w, k) ||
                                  w.in_channels % 4 == 0;
                         });
  space.add_constraint("rows_scale above 1 needs stage = vertex", [](const ConfigEntity& e) {
    const FragKnobs k = read_knobs(e);
    return rows_scale_fits_stage(k);
  });
  space.add_constraint("stage vertex needs layout_out = 2d", [](const ConfigEntity& e) {
    const FragKnobs k = read_knobs(e);
    return !k.vertex || k.out_2d;
  });
  space.add_constraint("out_wrap sqrt needs layout_out = flat", [](const ConfigEntity& e) {
    const FragKnobs k = read_knobs(e);
    return !k.out_sqrt || !k.out_2d;
  });
  const int64_t rows = output_rows(w), cols = output_cols(w);
  space.add_constraint("out_rows < 2 * output rows",
                       [rows](const ConfigEntity& e) { return read_knobs(e).out_rows < 2 * rows; });
  space.add_constraint("out_cols < 2 * output cols",
                       [cols](const ConfigEntity& e) { return read_knobs(e).out_cols < 2 * cols; });
  if (w.op == OpKind::kDense)
    space.add_constraint("col_scale 2 needs stage = vertex and out_cols = 4",
                         [](const ConfigEntity& e) {
                           const FragKnobs k = read_knobs(e);
                           return col_scale_fits_stage(k);
                         });
  space.add_constraint("unroll <= trip count of the unrolled loop", [w](const ConfigEntity& e) {
    return e.get_int("unroll") <= unrolled_trip_count(w, read_knobs(e));
  });
}

void add_device_limits(ConfigSpace& space, const Workload& w) {
  space.add_device_limit("data texture within max_texture_size",
                         [w](const ConfigEntity& e, const DeviceLimits& limits) {
                           return fits(make_plan(w, read_knobs(e)).data, limits);
                         });
  space.add_device_limit("weight texture within max_texture_size",
                         [w](const ConfigEntity& e, const DeviceLimits& limits) {
                           return fits(make_plan(w, read_knobs(e)).weight, limits);
                         });
  space.add_device_limit("output textures within max_texture_size",
                         [w](const ConfigEntity& e, const DeviceLimits& limits) {
                           const OutputLayout out = make_plan(w, read_knobs(e)).out;
                           return out.feedback || (out.width <= limits.max_texture_size &&
                                                   out.height <= limits.max_texture_size);
                         });
  if (!w.epilogue.empty())
    space.add_device_limit("bias and residual textures within max_texture_size",
                           [w](const ConfigEntity& e, const DeviceLimits& limits) {
                             const FragPlan p = make_plan(w, read_knobs(e));
                             return (p.bias_index < 0 || fits(p.bias, limits)) &&
                                    (p.residual_index < 0 || fits(p.residual, limits));
                           });
  space.add_device_limit("out_rows <= max_draw_buffers",
                         [](const ConfigEntity& e, const DeviceLimits& limits) {
                           const FragKnobs k = read_knobs(e);
                           return k.vertex || k.out_rows <= limits.max_draw_buffers;
                         });
  space.add_device_limit("vertex outputs within max_varying_vectors and max_feedback_components",
                         [](const ConfigEntity& e, const DeviceLimits& limits) {
                           const FragKnobs k = read_knobs(e);
                           return !k.vertex ||
                                  (k.out_rows * col_quads(k) <= limits.max_varying_vectors &&
                                   k.out_rows * k.out_cols <= limits.max_feedback_components);
                         });
}

/// Default value of every knob of the template, by name (candidate 0 of each knob too).
const std::vector<std::pair<std::string, KnobValue>>& default_values() {
  static const std::vector<std::pair<std::string, KnobValue>> kDefaults = {
      {"out_rows", int64_t{1}},           {"out_cols", int64_t{1}},
      {"packing", std::string("none")},   {"algo", std::string("direct")},
      {"order", std::string("crs")},      {"unroll", int64_t{1}},
      {"layout_data", std::string("2d")}, {"layout_weight", std::string("2d")},
      {"layout_out", std::string("2d")},  {"fetch", std::string("texel")},
      {"stage", std::string("fragment")}, {"rows_scale", int64_t{1}},
      {"col_scale", int64_t{1}},          {"out_wrap", std::string("2048")},
  };
  return kDefaults;
}

int candidate_index(const Knob& knob, const KnobValue& value) {
  for (size_t i = 0; i < knob.candidates.size(); ++i)
    if (knob.candidates[i] == value) return static_cast<int>(i);
  return 0;
}

}  // namespace

std::shared_ptr<ConfigSpace> glsl_frag_space(const Workload& workload) {
  workload.validate();
  auto space = std::make_shared<ConfigSpace>();
  space->define_knob("out_rows", std::vector<int64_t>{1, 2, 4, 8});
  space->define_knob("out_cols", std::vector<int64_t>{1, 4});
  switch (workload.op) {
    case OpKind::kDense:
      space->define_knob("packing", std::vector<std::string>{"none", "k", "kn"});
      break;
    case OpKind::kConv2d:
      space->define_knob("packing", std::vector<std::string>{"none", "c"});
      space->define_knob("algo", std::vector<std::string>{"direct", "igemm"});
      space->define_knob("order", std::vector<std::string>{"crs", "rsc"});
      break;
    case OpKind::kDepthwiseConv2d:
      space->define_knob("packing", std::vector<std::string>{"none", "c"});
      space->define_knob("algo", std::vector<std::string>{"direct", "igemm"});
      break;
    default:
      throw std::invalid_argument("gles-frag has no template for this operator");
  }
  space->define_knob("unroll", std::vector<int64_t>{1, 2, 4, 8});
  for (const char* name : {"layout_data", "layout_weight", "layout_out"})
    space->define_knob(name, std::vector<std::string>{"2d", "flat"});
  // Last, so that the config indices of records made before it keep their meaning (texel).
  space->define_knob("fetch", std::vector<std::string>{"texel", "lod", "texture"});
  space->allow_absent("fetch");
  // After fetch for the same reason: records without them ran fragment kernels of out_rows rows.
  space->define_knob("stage", std::vector<std::string>{"fragment", "vertex"});
  space->allow_absent("stage");
  space->define_knob("rows_scale", std::vector<int64_t>{1, 2, 3});
  space->allow_absent("rows_scale");
  if (workload.op == OpKind::kDense) {
    space->define_knob("col_scale", std::vector<int64_t>{1, 2});
    space->allow_absent("col_scale");
  }
  // Last of all: records without it wrapped a flat output at kFlatWidth.
  space->define_knob("out_wrap", std::vector<std::string>{"2048", "sqrt"});
  space->allow_absent("out_wrap");
  add_constraints(*space, workload);
  add_device_limits(*space, workload);
  return space;
}

KernelArtifact emit_glsl_frag(const Workload& workload, const ConfigEntity& entity) {
  return emit_glsl_frag(workload, entity, FragPackageOptions{});
}

bool frag_can_write_quad_layers(const Workload& w, const ConfigEntity& entity) {
  if (w.op == OpKind::kDense || w.batch != 1 || rows_per_image(w) % 4 != 0) return false;
  const FragKnobs k = read_knobs(entity);
  return !k.vertex && k.out_cols == 4 && (k.out_rows == 4 || k.out_rows == 8);
}

bool frag_can_read_quad_layers(const Workload& w, const ConfigEntity& entity,
                               const OutputLayout& source) {
  if (w.op == OpKind::kDense || w.batch != 1) return false;
  const FragKnobs k = read_knobs(entity);
  return !k.vertex && k.packing == "c" && source.quad_layers && !source.feedback &&
         source.channels == 4 && (source.rows_per_item == 4 || source.rows_per_item == 8) &&
         source.rows == w.in_channels && source.cols == w.height * w.width &&
         source.width * source.height >= source.items();
}

KernelArtifact emit_glsl_frag(const Workload& workload, const ConfigEntity& entity,
                              const FragPackageOptions& options) {
  FragKnobs knobs;
  try {
    knobs = read_knobs(entity);
  } catch (const std::exception& e) {
    throw MeasureError(MeasureErrorNo::kInstantiation,
                       std::string("gles-frag: entity does not fit the template: ") + e.what());
  }
  if (const std::string problem = structural_problem(workload, knobs); !problem.empty())
    throw MeasureError(MeasureErrorNo::kInstantiation, "gles-frag: " + problem);
  FragPlan plan = make_plan(workload, knobs);
  if (options.quad_layers_out) {
    if (!frag_can_write_quad_layers(workload, entity))
      throw std::invalid_argument("gles-frag: " + entity.to_string() + " of " + workload.key() +
                                  " cannot write quad layers (a fragment conv2d / depthwise of "
                                  "batch 1, K % 4 = 0, out_cols 4, out_rows 4 or 8 can)");
    plan.quad_layers_out = true;
    plan.out.quad_layers = true;
  }
  if (options.data_layers) {
    if (!frag_can_read_quad_layers(workload, entity, *options.data_layers))
      throw std::invalid_argument("gles-frag: " + entity.to_string() + " of " + workload.key() +
                                  " cannot read its data from quad layers of " +
                                  std::to_string(options.data_layers->rows) + " x " +
                                  std::to_string(options.data_layers->cols));
    plan.data_layers = options.data_layers;
    plan.data.width = options.data_layers->width;
    plan.data.height = options.data_layers->height;
    plan.data.layers = options.data_layers->rows_per_item;
    plan.data.pack_axis = 1;
  }
  KernelArtifact artifact;
  artifact.target = Target::kGlesFrag;
  artifact.source = emit_source(plan, entity);
  artifact.inputs = {plan.data, plan.weight};
  if (plan.bias_index >= 0) artifact.inputs.push_back(plan.bias);
  if (plan.residual_index >= 0) artifact.inputs.push_back(plan.residual);
  artifact.output = plan.out;
  return artifact;
}

ConfigEntity glsl_frag_default(const ConfigSpace& space) {
  const KnobList& knobs = space.knobs();
  std::vector<int> choices(knobs.size(), 0);
  for (const auto& [name, value] : default_values()) {
    for (size_t i = 0; i < knobs.size(); ++i)
      if (knobs[i].name == name) choices[i] = candidate_index(knobs[i], value);
  }
  // Prefer the natural 2d layout; give it up for as few textures as the limits demand.
  const std::array<const char*, 3> layout_knobs = {"layout_data", "layout_weight", "layout_out"};
  std::vector<unsigned> flat_masks;  // bit t set: texture t flat; fewest flat textures first
  for (int flats = 0; flats <= 3; ++flats)
    for (unsigned mask = 0; mask < 8; ++mask)
      if (std::popcount(mask) == flats) flat_masks.push_back(mask);
  ConfigEntity plain = space.from_choices(choices);
  for (unsigned flat_mask : flat_masks) {
    std::vector<int> trial = choices;
    for (int t = 0; t < 3; ++t) {
      const int index = space.knob_index(layout_knobs[t]);
      const std::string layout = (flat_mask >> t) & 1 ? "flat" : "2d";
      trial[index] = candidate_index(knobs[index], layout);
    }
    ConfigEntity entity = space.from_choices(trial);
    if (space.is_valid(entity)) return entity;
  }
  // The plain kernel fits this device in no layout (e.g. an R32F texture taller than the limit):
  // take the valid entity of lowest index; every knob's first candidate is its plain one.
  if (!space.valid_indices().empty()) return space.get(space.valid_indices().front());
  return plain;
}

}  // namespace webtune
