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

}  // namespace

namespace glue_frag {

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
  if (channels == 1) {
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
    decode(s, "    ", "t", "q", packed);
    const int a = to.pack_axis;
    const std::string qa = "q" + std::to_string(a);
    s << "    int e = " << encode(to.shape, [&](size_t d) {
      return static_cast<int>(d) == a ? qa + " * 4" : "q" + std::to_string(d);
    }) << ";\n";
    int64_t stride = 1;  // logical stride of the pack axis
    for (size_t d = static_cast<size_t>(a) + 1; d < to.shape.size(); ++d) stride *= to.shape[d];
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
  s << "precision highp float;\nprecision highp int;\nprecision highp sampler2D;\n";
  for (size_t j = 0; j < artifact.inputs.size(); ++j)
    s << "uniform highp sampler2D in" << j << ";\n";
  s << glue_frag::source_function("src", from, 0);
  s << glue_frag::destination_main(to, "src", &from);
  artifact.source = s.str();
  // The destination texels as they are: one render target of to.width × to.height, read back
  // (OutputLayout::unpack) as the flat texel array that TensorLayout::pack makes.
  artifact.output = glue_frag::destination_output(to);
  return artifact;
}

}  // namespace webtune::deploy
