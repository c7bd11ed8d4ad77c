/// \file glue_relayout.cpp
/// Layout transforms on frag targets (relayout_kernel, glue_kernels.hpp): a GLSL ES 3.00
/// fragment shader that gathers every texel of the destination TensorLayout from wherever the
/// source storage (one texture placed as a TensorLayout, or a fragment kernel's render targets
/// placed as an OutputLayout) holds its elements.
///
/// One fragment per destination texel t = y·width + x: t is a packed element of `to`
/// (kernel_artifact.hpp's TensorLayout), decoded into its packed multi-index; each of its
/// channels c is the logical element with index pack_axis = 4·q + c (positions past the axis,
/// and texels past the packed elements, are padding and get 0, as TensorLayout::pack writes
/// them). The logical element's row-major flat index e is the bridge to the source, whose shape
/// may differ from `to`'s (a Reshape or Flatten alias in between keeps row-major order):
///   kTexture  e decoded over the source's shape, re-encoded over its packed shape → texel
///             (p mod width, p div width), component e's index along its pack axis mod 4;
///             (Same shape and pack axis, another width: the whole texel is copied, one fetch.)
///   kTargets  e = row·cols + col of the output matrix; render target row mod rows_per_item,
///             item (row div rows_per_item)·ceil(cols/channels) + col div channels at texel
///             (item mod width, item div width), component col mod channels (OutputLayout).
/// Render targets into a packed texture, the relayout between two tuned frag kernels (a conv's
/// output matrix [N·K, OH·OW] into the next one's data packed along C), skip most of that: when
/// the pack axis's logical stride is a whole number d of output-matrix rows, the four channels
/// of a destination texel are rows row0 + c·d of one column, so the column's texel and component
/// are decoded once, not once per channel. When moreover d = 1, the axis is a multiple of 4 and
/// rows_per_item is too, the four rows are consecutive render targets 4i … 4i+3 of one item: one
/// texel coordinate, four fetches, one branch over i. Two more shortcuts serve residual inputs:
/// a layout packed along the last axis, that axis and the matrix's columns multiples of 4, copies
/// one whole texel of one render target; a plain layout reads one element, with no division
/// where a texture row is one matrix row. On SwiftShader (Chromium's CPU WebGL) the
/// per-channel decode cost 4–5 integer divisions per channel; MobileNet-v2's 62 relayouts took
/// half of its end-to-end latency (docs/benchmarks.md, "Relayouts between webgl2 kernels").
/// Integers stay below 2^28 (Workload bounds), so highp int (32-bit in ES 3.00) never overflows.
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "deploy/glue_kernels.hpp"
#include "glue_frag.hpp"

namespace webtune::deploy {
namespace {

/// GLSL lines declaring `prefix`0 … `prefix`(n−1): the multi-index of flat index `flat` over
/// `dims` (row-major), by constant div / mod from the last axis.
void decode(std::ostringstream& s, const std::string& indent, const std::string& flat,
            const std::string& prefix, const std::vector<int64_t>& dims) {
  const size_t n = dims.size();
  if (n == 0) return;
  std::string rest = flat;
  for (size_t d = n; d-- > 1;) {
    s << indent << "int " << prefix << d << " = " << rest << " % " << dims[d] << ";\n";
    s << indent << "int " << prefix << "r" << d << " = " << rest << " / " << dims[d] << ";\n";
    rest = prefix + "r" + std::to_string(d);
  }
  s << indent << "int " << prefix << "0 = " << rest << ";\n";
}

/// "a0 * s0 + a1 * s1 + …" over the row-major strides of `dims`, index d replaced by
/// `index(d)`.
template <typename Index>
std::string encode(const std::vector<int64_t>& dims, Index index) {
  std::string text;
  int64_t stride = 1;
  std::vector<std::string> terms(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    terms[d] = stride == 1 ? index(d) : "(" + index(d) + ") * " + std::to_string(stride);
    stride *= dims[d];
  }
  for (size_t d = 0; d < dims.size(); ++d) text += (d ? " + " : "") + terms[d];
  return text.empty() ? "0" : text;
}

std::string texel_coord(const std::string& index, int64_t width, int64_t height) {
  if (height == 1) return "ivec2(" + index + ", 0)";
  return "ivec2(" + index + " % " + std::to_string(width) + ", " + index + " / " +
         std::to_string(width) + ")";
}

/// GLSL that reads the texel coordinate `at` of render-target item (rb, cb) of `o`: (cb, rb)
/// when each row block fills one texture row, else item rb·col_blocks + cb wrapped at the width.
std::string target_item_coord(const OutputLayout& o, const std::string& rb, const std::string& cb) {
  const int64_t col_blocks = (o.cols + o.channels - 1) / o.channels;
  if (o.width == col_blocks) return "ivec2(" + cb + ", " + rb + ")";
  return texel_coord("(" + rb + " * " + std::to_string(col_blocks) + " + " + cb + ")", o.width,
                     o.height);
}

/// `x / k` for a non-negative int expression, a shift where k is a power of two (SwiftShader's
/// shader compiler divides by other constants with a real division).
std::string div_by(const std::string& x, int64_t k) {
  if (k == 1) return x;
  if ((k & (k - 1)) == 0) {
    int shift = 0;
    while ((int64_t{1} << shift) < k) ++shift;
    return "(" + x + " >> " + std::to_string(shift) + ")";
  }
  return "(" + x + " / " + std::to_string(k) + ")";
}

/// `x mod k` for a non-negative int expression x whose quotient `quotient` (= div_by(x, k)) is
/// at hand: a mask where k is a power of two, else x − quotient·k.
std::string mod_by(const std::string& x, int64_t k, const std::string& quotient) {
  if (k == 1) return "0";
  if ((k & (k - 1)) == 0) return "(" + x + " & " + std::to_string(k - 1) + ")";
  return "(" + x + " - " + quotient + " * " + std::to_string(k) + ")";
}

/// GLSL lines (at `indent`) that set `lhs` to texel item (row div rows_per_item, `cb`) of render
/// target row mod rows_per_item of `o`, swizzled by `comp` ("" for the whole texel); `row` and
/// `cb` are int expressions. Samplers in0 ….
void fetch_target_texel(std::ostringstream& s, const OutputLayout& o, const std::string& indent,
                        const std::string& row, const std::string& cb, const std::string& lhs,
                        const std::string& comp) {
  const int64_t r = o.rows_per_item;
  s << indent << "int rb = " << div_by(row, r) << ";\n";
  s << indent << "int j = " << mod_by(row, r, "rb") << ";\n";
  s << indent << "ivec2 at = " << target_item_coord(o, "rb", cb) << ";\n";
  // Samplers cannot be indexed dynamically in GLSL ES 3.00: one branch per render target.
  for (int64_t j = 0; j < r; ++j) {
    s << indent << (j ? "else " : "");
    if (j + 1 < r) s << "if (j == " << j << ") ";
    s << lhs << " = texelFetch(in" << j << ", at, 0)" << comp << ";\n";
  }
}

/// Whether `from` is render targets a relayout reads texel by texel (not transform feedback).
bool plain_targets(const Storage* from) {
  return from != nullptr && from->kind == Storage::Kind::kTargets && !from->targets.feedback &&
         !from->targets.quad_layers && from->targets.cols > 0;
}

/// Whether `from` is quad-layer render targets (OutputLayout::quad_layers): one array texture.
bool quad_layer_targets(const Storage* from) {
  return from != nullptr && from->kind == Storage::Kind::kTargets && from->targets.quad_layers &&
         from->targets.cols > 0;
}

/// GLSL: the texel of quad-layer targets `o` (sampler `sampler`, a sampler2DArray) that holds
/// output-matrix rows (row0 … row0+3, row0 a multiple of 4) at column `col`
/// (OutputLayout::quad_layers): layer 4·((row0 mod R) div 4) + col mod 4 of item
/// (row0 div R)·col_blocks + col div 4. Shifts and masks only: R is 4 or 8.
std::string quad_layer_texel(const OutputLayout& o, const std::string& sampler,
                             const std::string& row0, const std::string& col) {
  const int64_t r = o.rows_per_item;
  const std::string rb = div_by(row0, r);
  const std::string layer = "(" + mod_by(row0, r, rb) + " | (" + col + " & 3))";
  return "texelFetch(" + sampler + ", ivec3(" + target_item_coord(o, rb, div_by(col, 4)) + ", " +
         layer + "), 0)";
}

/// Whether destination_main copies whole quad-layer texels into `to`: packed along an axis
/// whose logical stride is the source matrix's columns (a convolution's channels, its pixels
/// after it) and a multiple of 4 long, so each destination texel is one source texel.
bool whole_texels_from_quad_layers(const TensorLayout& to, const Storage* from) {
  if (!quad_layer_targets(from) || to.pack_axis < 0) return false;
  const auto a = static_cast<size_t>(to.pack_axis);
  int64_t stride = 1;
  for (size_t d = a + 1; d < to.shape.size(); ++d) stride *= to.shape[d];
  return stride == from->targets.cols && to.shape[a] % 4 == 0;
}

/// Whether destination_main writes `to` from render targets `from` by targets_into_quads: a
/// packed destination whose pack axis steps over whole output-matrix rows of the source.
bool quads_from_targets(const TensorLayout& to, const Storage* from) {
  if (!plain_targets(from) || to.pack_axis < 0) return false;
  int64_t stride = 1;  // logical stride of the pack axis
  for (size_t d = static_cast<size_t>(to.pack_axis) + 1; d < to.shape.size(); ++d)
    stride *= to.shape[d];
  return stride % from->targets.cols == 0;
}

/// Whether destination_main copies whole render-target texels into `to`: packed along its last
/// axis, that axis and the source's matrix columns multiples of 4 (a residual's layout).
bool whole_texels_from_targets(const TensorLayout& to, const Storage* from) {
  return plain_targets(from) && to.pack_axis >= 0 &&
         static_cast<size_t>(to.pack_axis) + 1 == to.shape.size() && from->targets.channels == 4 &&
         from->targets.cols % 4 == 0 && to.shape.back() % 4 == 0;
}

/// Whether destination_main calls the element-wise gather (source_function) for `to` from
/// `from`; not where render targets are read by one of the shortcuts above.
bool gathers_elements(const TensorLayout& to, const Storage* from) {
  if (to.pack_axis < 0) return !plain_targets(from);
  return !quads_from_targets(to, from) && !whole_texels_from_targets(to, from) &&
         !whole_texels_from_quad_layers(to, from);
}

/// The destination_main body for render targets `o` into `to` (pack axis a, logical stride
/// `stride` of that axis) when stride is a multiple of o.cols (file comment): writes `r` for the
/// texel whose packed multi-index is q0 … (declared), quad index `qa`. A texel's first channel
/// is logical element e = outer·stride + inner (outer over the axes up to a, the quad's first
/// index 4·qa; inner < stride over the axes after a), so its output-matrix row is
/// outer·rows_apart + inner div cols and its column inner mod cols: no division at all where
/// rows_apart is 1. Samplers in0 ….
void targets_into_quads(std::ostringstream& s, const OutputLayout& o, const TensorLayout& to,
                        int64_t stride, const std::string& qa) {
  const int64_t rows_apart = stride / o.cols;
  const auto a = static_cast<size_t>(to.pack_axis);
  const int64_t axis = to.shape[a];
  const int64_t r = o.rows_per_item;
  const std::string comp = o.channels == 1 ? ".r" : "[ch]";
  const std::vector<int64_t> outer_dims(to.shape.begin(),
                                        to.shape.begin() + static_cast<long>(a) + 1);
  const std::vector<int64_t> inner_dims(to.shape.begin() + static_cast<long>(a) + 1,
                                        to.shape.end());
  const std::string outer =
      encode(outer_dims, [&](size_t d) { return d == a ? qa + " * 4" : "q" + std::to_string(d); });
  const std::string inner =
      encode(inner_dims, [&](size_t d) { return "q" + std::to_string(a + 1 + d); });
  if (rows_apart == 1) {
    s << "    int row0 = " << outer << ";\n";
    s << "    int col = " << inner << ";\n";
  } else {
    s << "    int inner = " << inner << ";\n";
    s << "    int row0 = (" << outer << ") * " << rows_apart << " + " << div_by("inner", o.cols)
      << ";\n";
    s << "    int col = " << mod_by("inner", o.cols, div_by("inner", o.cols)) << ";\n";
  }
  if (o.channels == 1) {
    s << "    int cb = col;\n";
  } else {
    s << "    int cb = " << div_by("col", o.channels) << ";\n";
    s << "    int ch = " << mod_by("col", o.channels, "cb") << ";\n";
  }
  if (rows_apart == 1 && axis % 4 == 0 && r % 4 == 0) {
    // row0 is a multiple of 4 (the quad's first channel), so rows row0 … row0+3 sit in one
    // item, in render targets j0 … j0+3.
    s << "    int rb = " << div_by("row0", r) << ";\n";
    s << "    int j0 = " << mod_by("row0", r, "rb") << ";\n";
    s << "    ivec2 at = " << target_item_coord(o, "rb", "cb") << ";\n";
    for (int64_t j0 = 0; j0 < r; j0 += 4) {
      s << "    " << (j0 ? "else " : "");
      if (j0 + 4 < r) s << "if (j0 == " << j0 << ") ";
      s << "r = vec4(";
      for (int c = 0; c < 4; ++c)
        s << (c ? ", " : "") << "texelFetch(in" << j0 + c << ", at, 0)" << comp;
      s << ");\n";
    }
    return;
  }
  const char* xyzw = "xyzw";
  for (int c = 0; c < 4; ++c) {
    s << "    if (" << qa << " * 4 + " << c << " < " << axis << ") {\n";
    s << "      int row = row0 + " << c * rows_apart << ";\n";
    fetch_target_texel(s, o, "      ", "row", "cb", std::string("r.") + xyzw[c], comp);
    s << "    }\n";
  }
}

}  // namespace

namespace glue_frag {

std::string sampler_declarations(const std::vector<TensorLayout>& inputs) {
  std::ostringstream s;
  bool arrays = false;
  for (const TensorLayout& l : inputs) arrays = arrays || l.layers > 0;
  s << "precision highp sampler2D;\n";
  if (arrays) s << "precision highp sampler2DArray;\n";
  for (size_t j = 0; j < inputs.size(); ++j)
    s << "uniform highp " << (inputs[j].layers > 0 ? "sampler2DArray" : "sampler2D") << " in" << j
      << ";\n";
  return s.str();
}

std::string source_function(const std::string& name, const Storage& from, int first_sampler) {
  std::ostringstream s;
  const auto sampler = [&](int j) { return "in" + std::to_string(first_sampler + j); };
  s << "float " << name << "(int e) {\n";
  if (from.kind == Storage::Kind::kTexture) {
    const TensorLayout& f = from.texture;
    if (f.pack_axis < 0) {
      s << "  return texelFetch(" << sampler(0) << ", " << texel_coord("e", f.width, f.height)
        << ", 0).r;\n";
    } else {
      const std::vector<int64_t> packed = f.packed_shape();
      decode(s, "  ", "e", "s", f.shape);
      const std::string axis = "s" + std::to_string(f.pack_axis);
      const std::string p = encode(packed, [&](size_t d) {
        return static_cast<int>(d) == f.pack_axis ? axis + " / 4" : "s" + std::to_string(d);
      });
      s << "  int p = " << p << ";\n";
      s << "  return texelFetch(" << sampler(0) << ", " << texel_coord("p", f.width, f.height)
        << ", 0)[" << axis << " % 4];\n";
    }
  } else if (from.targets.quad_layers) {
    const OutputLayout& o = from.targets;
    s << "  int row = e / " << o.cols << ";\n";
    s << "  int col = e - row * " << o.cols << ";\n";
    s << "  int row0 = row & ~3;\n";
    s << "  return " << quad_layer_texel(o, sampler(0), "row0", "col") << "[row & 3];\n";
  } else {
    const OutputLayout& o = from.targets;
    const int64_t col_blocks = (o.cols + o.channels - 1) / o.channels;
    s << "  int row = e / " << o.cols << ";\n";
    s << "  int col = e - row * " << o.cols << ";\n";
    s << "  int rb = row / " << o.rows_per_item << ";\n";
    s << "  int j = row - rb * " << o.rows_per_item << ";\n";
    s << "  int cb = col / " << o.channels << ";\n";
    s << "  int ch = col - cb * " << o.channels << ";\n";
    s << "  int t = rb * " << col_blocks << " + cb;\n";
    s << "  ivec2 at = " << texel_coord("t", o.width, o.height) << ";\n";
    const std::string component = o.channels == 1 ? ".r" : "[ch]";
    // Samplers cannot be indexed dynamically in GLSL ES 3.00: one branch per render target.
    for (int j = 0; j + 1 < o.rows_per_item; ++j)
      s << "  if (j == " << j << ") return texelFetch(" << sampler(j) << ", at, 0)" << component
        << ";\n";
    s << "  return texelFetch(" << sampler(o.rows_per_item - 1) << ", at, 0)" << component << ";\n";
  }
  s << "}\n";
  return s.str();
}

std::vector<TensorLayout> source_layouts(const Storage& from, int64_t elements,
                                         const std::string& what) {
  std::vector<TensorLayout> layouts;
  if (from.kind == Storage::Kind::kTexture) {
    const TensorLayout& f = from.texture;
    if (shape_elements(f.shape) != elements)
      throw std::invalid_argument(what + ": the source layout's shape " + shape_text(f.shape) +
                                  " has another element count");
    if (f.pack_axis >= static_cast<int>(f.shape.size()) || f.pack_axis < -1)
      throw std::invalid_argument(what + ": source pack_axis " + std::to_string(f.pack_axis) +
                                  " is outside its rank");
    if (f.width < 1 || f.height < 1 || f.width * f.height < f.packed_elements())
      throw std::invalid_argument(what + ": the source texture " + std::to_string(f.width) + "x" +
                                  std::to_string(f.height) + " is too small for its layout");
    layouts.push_back(f);
  } else if (from.kind == Storage::Kind::kTargets) {
    const OutputLayout& o = from.targets;
    if (o.feedback)
      throw std::invalid_argument(what + ": the source is a transform feedback buffer");
    if (o.elements() != elements)
      throw std::invalid_argument(what + ": the source render targets hold " +
                                  std::to_string(o.elements()) + " elements, not " +
                                  std::to_string(elements));
    if (o.rows_per_item < 1 || (o.channels != 1 && o.channels != 4) ||
        o.width * o.height < o.items())
      throw std::invalid_argument(what + ": the source render targets' layout is inconsistent");
    if (o.quad_layers) {  // one array texture: the layers are the render targets
      TensorLayout t;
      t.shape = {1, o.rows, o.cols};
      t.pack_axis = 1;
      t.width = o.width;
      t.height = o.height;
      t.layers = o.rows_per_item;
      layouts.push_back(t);
      return layouts;
    }
    // Each render target, bound as a texture: the output matrix's rows of target j, as R32F or
    // RGBA32F texels of targets.width × targets.height (described, not packed by the runtime).
    for (int j = 0; j < o.rows_per_item; ++j) {
      TensorLayout t;
      t.shape = {o.width * o.height * o.channels};
      t.pack_axis = o.channels == 4 ? 0 : -1;
      t.width = o.width;
      t.height = o.height;
      layouts.push_back(t);
    }
  } else {
    throw std::invalid_argument(what + ": the source must be a texture or render targets");
  }
  return layouts;
}

void check_destination(const TensorLayout& to, int64_t elements, const DeviceLimits& limits,
                       const std::string& what) {
  if (shape_elements(to.shape) != elements)
    throw std::invalid_argument(what + ": the destination layout's shape " + shape_text(to.shape) +
                                " has another element count");
  if (to.pack_axis >= static_cast<int>(to.shape.size()) || to.pack_axis < -1)
    throw std::invalid_argument(what + ": destination pack_axis " + std::to_string(to.pack_axis) +
                                " is outside its rank");
  if (to.width < 1 || to.height < 1 || to.width > limits.max_texture_size ||
      to.height > limits.max_texture_size)
    throw std::invalid_argument(what + ": the destination texture " + std::to_string(to.width) +
                                "x" + std::to_string(to.height) +
                                " is empty or over the device's max texture size " +
                                std::to_string(limits.max_texture_size));
  if (to.width * to.height < to.packed_elements())
    throw std::invalid_argument(what + ": the destination texture " + std::to_string(to.width) +
                                "x" + std::to_string(to.height) + " holds fewer than its " +
                                std::to_string(to.packed_elements()) + " packed elements");
}

std::string destination_main(const TensorLayout& to, const std::string& value,
                             const Storage* same_source) {
  const int channels = to.channels();
  const std::vector<int64_t> packed = to.packed_shape();
  std::ostringstream s;
  s << "layout(location = 0) out " << (channels == 4 ? "vec4" : "float") << " o0;\n";
  s << "void main() {\n";
  s << "  ivec2 px = ivec2(gl_FragCoord.xy);\n";
  s << "  int t = px.y * " << to.width << " + px.x;\n";
  s << "  " << (channels == 4 ? "vec4 r = vec4(0.0);" : "float r = 0.0;") << "\n";
  s << "  if (t < " << to.packed_elements() << ") {\n";
  const bool same_packing =
      same_source != nullptr && same_source->kind == Storage::Kind::kTexture && channels == 4 &&
      same_source->texture.pack_axis == to.pack_axis && same_source->texture.shape == to.shape;
  if (channels == 1 && plain_targets(same_source)) {
    // Element t of the output matrix: row px.y and column px.x where a texture row is one
    // matrix row, else one division.
    const OutputLayout& o = same_source->targets;
    if (to.width == o.cols) {
      s << "    int row = px.y;\n";
      s << "    int col = px.x;\n";
    } else {
      s << "    int row = t / " << o.cols << ";\n";
      s << "    int col = t - row * " << o.cols << ";\n";
    }
    s << "    int cb = " << div_by("col", o.channels) << ";\n";
    if (o.channels == 4) s << "    int ch = " << mod_by("col", o.channels, "cb") << ";\n";
    fetch_target_texel(s, o, "    ", "row", "cb", "r", o.channels == 1 ? ".r" : "[ch]");
  } else if (channels == 1) {
    s << "    r = " << value << "(t);\n";  // plain: packed element t is logical element t
  } else if (same_packing) {
    // Same packed tensor, only wrapped at another width: packed element t is the source's
    // texel t, whole. Positions past the packed axis's end are zeroed again (a source's
    // padding is 0 whoever wrote it, but this costs one compare per texel).
    const TensorLayout& f = same_source->texture;
    s << "    r = texelFetch(in0, " << texel_coord("t", f.width, f.height) << ", 0);\n";
    const auto a = static_cast<size_t>(to.pack_axis);
    if (to.shape[a] % 4 != 0) {
      int64_t inner = 1;  // packed elements per step of the pack axis
      for (size_t d = a + 1; d < packed.size(); ++d) inner *= packed[d];
      s << "    int qa = (t / " << inner << ") % " << packed[a] << ";\n";
      s << "    if (qa == " << packed[a] - 1 << ") r = vec4(";
      const char* comp = "xyzw";
      for (int c = 0; c < 4; ++c) {
        s << (c ? ", " : "");
        if ((packed[a] - 1) * 4 + c < to.shape[a])
          s << "r." << comp[c];
        else
          s << "0.0";  // a select, not a product: 0 · inf would be NaN
      }
      s << ");\n";
    }
  } else {
    if (to.width == packed.back() && packed.size() > 1) {
      // Each texture row is one run of the last axis: no division for it.
      std::vector<int64_t> outer(packed.begin(), packed.end() - 1);
      decode(s, "    ", "px.y", "q", outer);
      s << "    int q" << packed.size() - 1 << " = px.x;\n";
    } else {
      decode(s, "    ", "t", "q", packed);
    }
    const int a = to.pack_axis;
    const std::string qa = "q" + std::to_string(a);
    int64_t stride = 1;  // logical stride of the pack axis
    for (size_t d = static_cast<size_t>(a) + 1; d < to.shape.size(); ++d) stride *= to.shape[d];
    if (whole_texels_from_quad_layers(to, same_source)) {
      // The channel quad of one pixel: rows 4·qa … of column `inner`, one whole texel.
      const auto a = static_cast<size_t>(to.pack_axis);
      const std::vector<int64_t> outer_dims(to.shape.begin(),
                                            to.shape.begin() + static_cast<long>(a) + 1);
      const std::vector<int64_t> inner_dims(to.shape.begin() + static_cast<long>(a) + 1,
                                            to.shape.end());
      s << "    int row0 = " << encode(outer_dims, [&](size_t d) {
        return d == a ? qa + " * 4" : "q" + std::to_string(d);
      }) << ";\n";
      s << "    int col = "
        << encode(inner_dims, [&](size_t d) { return "q" + std::to_string(a + 1 + d); }) << ";\n";
      s << "    r = " << quad_layer_texel(same_source->targets, "in0", "row0", "col") << ";\n";
      s << "  }\n";
      s << "  o0 = r;\n";
      s << "}\n";
      return s.str();
    }
    if (quads_from_targets(to, same_source)) {
      targets_into_quads(s, same_source->targets, to, stride, qa);
      s << "  }\n";
      s << "  o0 = r;\n";
      s << "}\n";
      return s.str();
    }
    s << "    int e = " << encode(to.shape, [&](size_t d) {
      return static_cast<int>(d) == a ? qa + " * 4" : "q" + std::to_string(d);
    }) << ";\n";
    if (whole_texels_from_targets(to, same_source)) {
      // Packed along the last axis (a residual's layout): e is a multiple of 4 and its quad is
      // one texel of one render target, whole.
      const OutputLayout& o = same_source->targets;
      s << "    int row = e / " << o.cols << ";\n";
      s << "    int cb = (e - row * " << o.cols << ") >> 2;\n";
      fetch_target_texel(s, o, "    ", "row", "cb", "r", "");
      s << "  }\n";
      s << "  o0 = r;\n";
      s << "}\n";
      return s.str();
    }
    const char* comp = "xyzw";
    for (int c = 0; c < 4; ++c) {
      s << "    if (" << qa << " * 4 + " << c << " < " << to.shape[static_cast<size_t>(a)] << ") r."
        << comp[c] << " = " << value << "(e + " << c * stride << ");\n";
    }
  }
  s << "  }\n";
  s << "  o0 = r;\n";
  s << "}\n";
  return s.str();
}

OutputLayout destination_output(const TensorLayout& to) {
  OutputLayout out;
  out.rows = 1;
  out.cols = to.width * to.height * to.channels();
  out.rows_per_item = 1;
  out.channels = to.channels();
  out.width = to.width;
  out.height = to.height;
  return out;
}

}  // namespace glue_frag

KernelArtifact relayout_kernel(const std::vector<int64_t>& shape, const Storage& from,
                               const TensorLayout& to, const DeviceLimits& limits) {
  const std::string what = "relayout of a tensor " + shape_text(shape);
  const int64_t elements = shape_elements(shape);
  glue_frag::check_destination(to, elements, limits, what);
  KernelArtifact artifact;
  artifact.target = Target::kGlesFrag;
  artifact.inputs = glue_frag::source_layouts(from, elements, what);
  std::ostringstream s;
  s << "#version 300 es\n";
  s << "// webtune relayout " << shape_text(shape) << " -> pack_axis " << to.pack_axis << " "
    << to.width << "x" << to.height << "\n";
  s << "precision highp float;\nprecision highp int;\n";
  s << glue_frag::sampler_declarations(artifact.inputs);
  // The element-wise gather, unless the render targets are read by a shortcut (file comment).
  if (gathers_elements(to, &from)) s << glue_frag::source_function("src", from, 0);
  s << glue_frag::destination_main(to, "src", &from);
  artifact.source = s.str();
  // The destination texels as they are: one render target of to.width × to.height, read back
  // (OutputLayout::unpack) as the flat texel array that TensorLayout::pack makes.
  artifact.output = glue_frag::destination_output(to);
  return artifact;
}

}  // namespace webtune::deploy
