/// \file kernel_artifact.cpp
/// Packing of inputs into device layouts, unpacking of outputs, and the artifact's JSON.
#include "codegen/kernel_artifact.hpp"

#include <boost/json.hpp>
#include <limits>
#include <stdexcept>

#include "codegen/json_util.hpp"

namespace webtune {

namespace bj = boost::json;

const char* const kFullscreenVertexShader = R"(#version 300 es
// One triangle that covers the viewport: vertices (-1,-1), (3,-1), (-1,3).
void main() {
  vec2 corner = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
  gl_Position = vec4(corner * 2.0 - 1.0, 0.0, 1.0);
}
)";

const char* const kFeedbackFragmentShader = R"(#version 300 es
// Never runs: a vertex-stage kernel draws with GL_RASTERIZER_DISCARD.
precision mediump float;
out vec4 unused;
void main() {
  unused = vec4(0.0);
}
)";

std::vector<int64_t> TensorLayout::packed_shape() const {
  std::vector<int64_t> packed = shape;
  if (pack_axis >= 0) {
    if (pack_axis >= static_cast<int>(shape.size()))
      throw std::invalid_argument("pack_axis outside the tensor's rank");
    packed[pack_axis] = (packed[pack_axis] + 3) / 4;
  }
  return packed;
}

int64_t TensorLayout::packed_elements() const {
  int64_t n = 1;
  for (int64_t d : packed_shape()) n *= d;
  return n;
}

std::vector<float> TensorLayout::pack(const std::vector<float>& logical) const {
  if (layers > 0) {
    std::vector<float> out;
    for (const std::vector<float>& layer :
         OutputLayout::quad_layers_source(*this).pack_targets(logical))
      out.insert(out.end(), layer.begin(), layer.end());
    return out;
  }
  const std::vector<int64_t> packed = packed_shape();
  const int64_t count = packed_elements();
  int64_t logical_size = 1;
  for (int64_t d : shape) logical_size *= d;
  if (static_cast<int64_t>(logical.size()) != logical_size)
    throw std::invalid_argument("pack: tensor has " + std::to_string(logical.size()) +
                                " elements, its layout expects " + std::to_string(logical_size));
  const int64_t capacity = std::max<int64_t>(width, 1) * std::max<int64_t>(height, 1);
  const int ch = channels();
  std::vector<float> out(static_cast<size_t>(std::max(capacity, count) * ch), 0.0f);
  if (pack_axis < 0) {
    std::copy(logical.begin(), logical.end(), out.begin());
    return out;
  }
  // Strides of the logical tensor; the packed axis steps by 4 logical elements per texel.
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  std::vector<int64_t> coord(rank, 0);
  for (int64_t t = 0; t < count; ++t) {
    int64_t base = 0;
    for (int d = 0; d < rank; ++d) base += (d == pack_axis ? coord[d] * 4 : coord[d]) * stride[d];
    for (int c = 0; c < 4; ++c) {
      if (coord[pack_axis] * 4 + c < shape[pack_axis])
        out[t * 4 + c] = logical[base + c * stride[pack_axis]];
    }
    for (int d = rank - 1; d >= 0; --d) {  // next packed coordinate, row-major
      if (++coord[d] < packed[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

bj::object TensorLayout::to_json() const {
  bj::object o{{"shape", json::to_array(shape)},
               {"pack_axis", pack_axis},
               {"width", width},
               {"height", height}};
  if (layers > 0) o["layers"] = layers;  // absent: a 2D texture (or a buffer)
  return o;
}

TensorLayout TensorLayout::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "tensor layout");
  TensorLayout l;
  l.shape = json::get_int_array(o, "shape");
  l.pack_axis = static_cast<int>(json::get_int_or(o, "pack_axis", -1));
  l.width = json::get_int(o, "width");
  l.height = json::get_int(o, "height");
  if (l.pack_axis >= static_cast<int>(l.shape.size()) || l.pack_axis < -1)
    throw std::invalid_argument("tensor layout: pack_axis outside the tensor's rank");
  l.layers = static_cast<int>(json::get_int_or(o, "layers", 0));
  if (l.layers != 0) OutputLayout::quad_layers_source(l);  // throws on a bad combination
  if (l.layers < 0 || l.layers % 4 != 0 || l.layers > 32)
    throw std::invalid_argument("tensor layout: layers must be 0 or a multiple of 4 up to 32");
  return l;
}

namespace {

/// Calls f(flat index, layer, float index in the layer) for every element of a quad_layers
/// output (OutputLayout's comment): element (row, col) is component row mod 4 of the texel of
/// item (row div rows_per_item)·col_blocks + col div 4 in layer 4·((row mod rows_per_item) div 4)
/// + col mod 4.
template <typename F>
void for_each_quad_layer_element(const OutputLayout& o, F&& f) {
  const int64_t col_blocks = (o.cols + 3) / 4;
  for (int64_t row = 0; row < o.rows; ++row) {
    const int64_t block = row / o.rows_per_item, in_block = row % o.rows_per_item;
    for (int64_t col = 0; col < o.cols; ++col) {
      const int64_t item = block * col_blocks + col / 4;
      f(row * o.cols + col, static_cast<size_t>(4 * (in_block / 4) + col % 4),
        item * 4 + in_block % 4);
    }
  }
}

}  // namespace

std::vector<float> OutputLayout::unpack(const std::vector<std::vector<float>>& targets) const {
  const size_t expected = feedback ? 1 : static_cast<size_t>(rows_per_item);
  if (targets.size() != expected)
    throw std::invalid_argument("unpack: expected " + std::to_string(expected) +
                                (feedback ? " feedback buffer" : " render targets") + ", got " +
                                std::to_string(targets.size()));
  const int64_t col_blocks = (cols + channels - 1) / channels;
  const int64_t items = this->items();
  // Float index of (item t, row j of the block) in its target, and how many items it holds.
  const int64_t item_stride = feedback ? int64_t{rows_per_item} * channels : channels;
  std::vector<float> out(static_cast<size_t>(elements()), std::numeric_limits<float>::quiet_NaN());
  if (quad_layers) {
    for_each_quad_layer_element(*this, [&](int64_t flat, size_t layer, int64_t at) {
      if (at < static_cast<int64_t>(targets[layer].size()))
        out[static_cast<size_t>(flat)] = targets[layer][static_cast<size_t>(at)];
    });
    return out;
  }
  for (int j = 0; j < rows_per_item; ++j) {
    const std::vector<float>& pixels = targets[feedback ? 0 : j];
    const int64_t first = feedback ? int64_t{j} * channels : 0;
    const int64_t available = static_cast<int64_t>(pixels.size()) / item_stride;
    for (int64_t t = 0; t < items && t < available; ++t) {
      const int64_t row = (t / col_blocks) * rows_per_item + j;
      if (row >= rows) continue;
      const int64_t col0 = (t % col_blocks) * channels;
      for (int c = 0; c < channels && col0 + c < cols; ++c)
        out[row * cols + col0 + c] = pixels[t * item_stride + first + c];
    }
  }
  return out;
}

std::vector<std::vector<float>> OutputLayout::pack_targets(
    const std::vector<float>& logical) const {
  if (feedback)
    throw std::invalid_argument("pack_targets: a feedback output has no render targets");
  if (static_cast<int64_t>(logical.size()) != elements())
    throw std::invalid_argument("pack_targets: tensor has " + std::to_string(logical.size()) +
                                " elements, the layout holds " + std::to_string(elements()));
  std::vector<std::vector<float>> targets(
      static_cast<size_t>(rows_per_item),
      std::vector<float>(static_cast<size_t>(width * height * channels), 0.0f));
  if (quad_layers) {
    for_each_quad_layer_element(*this, [&](int64_t flat, size_t layer, int64_t at) {
      targets[layer][static_cast<size_t>(at)] = logical[static_cast<size_t>(flat)];
    });
    return targets;
  }
  const int64_t col_blocks = (cols + channels - 1) / channels;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < cols; ++col) {
      const int64_t t = (row / rows_per_item) * col_blocks + col / channels;
      targets[static_cast<size_t>(row % rows_per_item)]
             [static_cast<size_t>(t * channels + col % channels)] =
                 logical[static_cast<size_t>(row * cols + col)];
    }
  return targets;
}

OutputLayout OutputLayout::quad_layers_source(const TensorLayout& layout) {
  if (layout.layers <= 0 || layout.shape.size() < 2 || layout.pack_axis != 1)
    throw std::invalid_argument(
        "quad_layers_source: needs layers > 0, a rank >= 2 shape and pack_axis 1");
  OutputLayout o;
  o.rows = layout.shape[0] * layout.shape[1];
  o.cols = 1;
  for (size_t d = 2; d < layout.shape.size(); ++d) o.cols *= layout.shape[d];
  o.rows_per_item = layout.layers;
  o.channels = 4;
  o.width = layout.width;
  o.height = layout.height;
  o.quad_layers = true;
  return o;
}

bj::object OutputLayout::to_json() const {
  bj::object o{{"rows", rows},         {"cols", cols},   {"rows_per_item", rows_per_item},
               {"channels", channels}, {"width", width}, {"height", height}};
  if (feedback) o["feedback"] = true;  // absent: render targets (older agents read only those)
  if (quad_layers) o["quad_layers"] = true;  // absent: one texture per target, rows in order
  return o;
}

OutputLayout OutputLayout::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "output layout");
  OutputLayout l;
  l.rows = json::get_int(o, "rows");
  l.cols = json::get_int(o, "cols");
  l.rows_per_item = static_cast<int>(json::get_int_or(o, "rows_per_item", 1));
  l.channels = static_cast<int>(json::get_int_or(o, "channels", 1));
  l.width = json::get_int(o, "width");
  l.height = json::get_int(o, "height");
  if (const bj::value* f = o.if_contains("feedback")) {
    if (!f->is_bool()) throw std::invalid_argument("output layout: 'feedback' must be a boolean");
    l.feedback = f->get_bool();
  }
  if (const bj::value* f = o.if_contains("quad_layers")) {
    if (!f->is_bool())
      throw std::invalid_argument("output layout: 'quad_layers' must be a boolean");
    l.quad_layers = f->get_bool();
  }
  if (l.quad_layers && (l.feedback || l.channels != 4 || l.rows_per_item % 4 != 0))
    throw std::invalid_argument(
        "output layout: quad_layers needs render targets, channels 4 and rows_per_item a "
        "multiple of 4");
  if (l.channels != 1 && l.channels != 4 && !(l.channels == 8 && l.feedback))
    throw std::invalid_argument("output layout: channels must be 1 or 4 (or 8 with feedback)");
  if (l.rows_per_item < 1 || l.rows_per_item > 32)
    throw std::invalid_argument("output layout: rows_per_item must be in 1..32");
  if (l.feedback && l.height != 1)
    throw std::invalid_argument("output layout: a feedback output has height 1");
  return l;
}

static bj::array triple(const std::array<int64_t, 3>& v) {
  return bj::array{v[0], v[1], v[2]};
}

static std::array<int64_t, 3> triple_from(const bj::object& o, std::string_view key) {
  std::vector<int64_t> v = json::get_int_array(o, key);
  if (v.size() != 3) throw std::invalid_argument("'" + std::string(key) + "' needs 3 numbers");
  return {v[0], v[1], v[2]};
}

bj::object WasmModuleInfo::to_json() const {
  bj::object o{{"threads", threads},
               {"memory_pages", memory_pages},
               {"offsets", json::to_array(offsets)},
               {"simd", simd}};
  if (relaxed_simd) o["relaxed_simd"] = true;
  if (shared_memory) o["shared_memory"] = true;
  return o;
}

WasmModuleInfo WasmModuleInfo::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "wasm module info");
  WasmModuleInfo w;
  w.threads = static_cast<int>(json::get_int(o, "threads"));
  w.memory_pages = json::get_int(o, "memory_pages");
  w.offsets = json::get_int_array(o, "offsets");
  // Every input (1 to 4: data, weight, the epilogue's bias and residual; a package's max pool
  // has its data alone), then the output.
  if (w.offsets.size() < 2 || w.offsets.size() > 5)
    throw std::invalid_argument("wasm: 'offsets' needs 2 to 5 numbers (inputs, then output)");
  const bj::value& simd = json::field(o, "simd");
  if (!simd.is_bool()) throw std::invalid_argument("wasm: 'simd' must be true or false");
  w.simd = simd.get_bool();
  if (const bj::value* relaxed = o.if_contains("relaxed_simd")) {
    if (!relaxed->is_bool())
      throw std::invalid_argument("wasm: 'relaxed_simd' must be true or false");
    w.relaxed_simd = relaxed->get_bool();
  }
  if (const bj::value* shared = o.if_contains("shared_memory")) {
    if (!shared->is_bool())
      throw std::invalid_argument("wasm: 'shared_memory' must be true or false");
    w.shared_memory = shared->get_bool();
  }
  // 65536 pages = 4 GiB, all that wasm32 addresses.
  if (w.threads < 1 || w.threads > 64) throw std::invalid_argument("wasm: threads must be 1..64");
  if (w.memory_pages < 1 || w.memory_pages > 65536)
    throw std::invalid_argument("wasm: memory_pages must be 1..65536");
  for (int64_t offset : w.offsets)
    if (offset < 0 || offset % 64 != 0 || offset >= w.memory_pages * 65536)
      throw std::invalid_argument("wasm: offsets must be 64-byte aligned and inside the memory");
  return w;
}

bj::object KernelArtifact::to_json() const {
  bj::array in;
  for (const TensorLayout& l : inputs) in.push_back(l.to_json());
  bj::object o{{"target", std::string(target_name(target))},
               {"source", source},
               {"inputs", std::move(in)},
               {"output", output.to_json()},
               {"dispatch", triple(dispatch)},
               {"workgroup", triple(workgroup)},
               {"shared_memory_bytes", shared_memory_bytes}};
  // Only when present: older agents never see the fields (and must not: see the header).
  if (scratch_floats != 0) o["scratch_floats"] = scratch_floats;
  if (scratch_counters != 0) o["scratch_counters"] = scratch_counters;
  if (target == Target::kWasm) o["wasm"] = wasm.to_json();
  return o;
}

KernelArtifact KernelArtifact::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "kernel artifact");
  KernelArtifact a;
  a.target = target_from_name(json::get_string(o, "target"));
  a.source = json::get_string(o, "source");
  const bj::value& in = json::field(o, "inputs");
  if (!in.is_array()) throw std::invalid_argument("'inputs' must be an array");
  for (const bj::value& l : in.get_array()) a.inputs.push_back(TensorLayout::from_json(l));
  a.output = OutputLayout::from_json(json::field(o, "output"));
  if (o.contains("dispatch")) a.dispatch = triple_from(o, "dispatch");
  if (o.contains("workgroup")) a.workgroup = triple_from(o, "workgroup");
  a.shared_memory_bytes = json::get_int_or(o, "shared_memory_bytes", 0);
  a.scratch_floats = json::get_int_or(o, "scratch_floats", 0);
  a.scratch_counters = json::get_int_or(o, "scratch_counters", 0);
  if (a.scratch_floats < 0 || a.scratch_counters < 0)
    throw std::invalid_argument(
        "kernel artifact: scratch_floats and scratch_counters must be >= 0");
  if (a.target == Target::kWasm) a.wasm = WasmModuleInfo::from_json(json::field(o, "wasm"));
  return a;
}

}  // namespace webtune
