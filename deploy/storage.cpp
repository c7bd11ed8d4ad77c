/// \file storage.cpp
/// A value's storage in a model package: JSON, the plain texture layout, and the placement
/// comparison that decides where the planner needs a layout transform.
#include "deploy/storage.hpp"

#include <boost/json.hpp>
#include <stdexcept>
#include <string>

#include "codegen/json_util.hpp"

namespace webtune::deploy {

namespace bj = boost::json;

namespace {

const char* kind_name(Storage::Kind kind) {
  switch (kind) {
    case Storage::Kind::kBuffer:
      return "buffer";
    case Storage::Kind::kArray:
      return "array";
    case Storage::Kind::kTexture:
      return "texture";
    case Storage::Kind::kTargets:
      return "targets";
    case Storage::Kind::kAlias:
      return "alias";
  }
  return "?";
}

}  // namespace

int64_t shape_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

bj::object Storage::to_json() const {
  bj::object o{{"kind", kind_name(kind)}};
  switch (kind) {
    case Kind::kBuffer:
    case Kind::kArray:
      o["slot"] = slots.empty() ? -1 : slots.front();
      break;
    case Kind::kTexture:
      o["slot"] = slots.empty() ? -1 : slots.front();
      o["layout"] = texture.to_json();
      break;
    case Kind::kTargets: {
      bj::array s;
      for (int slot : slots) s.push_back(slot);
      o["slots"] = std::move(s);
      o["layout"] = targets.to_json();
      break;
    }
    case Kind::kAlias:
      o["of"] = alias_of;
      break;
  }
  return o;
}

Storage Storage::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "storage");
  const std::string kind = json::get_string(o, "kind");
  Storage s;
  auto slot = [&] {
    const int64_t id = json::get_int(o, "slot");
    if (id < 0) throw std::invalid_argument("storage: 'slot' must be >= 0");
    s.slots = {static_cast<int>(id)};
  };
  if (kind == "buffer" || kind == "array") {
    s.kind = kind == "buffer" ? Kind::kBuffer : Kind::kArray;
    slot();
  } else if (kind == "texture") {
    s.kind = Kind::kTexture;
    slot();
    s.texture = TensorLayout::from_json(json::field(o, "layout"));
  } else if (kind == "targets") {
    s.kind = Kind::kTargets;
    for (int64_t id : json::get_int_array(o, "slots")) {
      if (id < 0) throw std::invalid_argument("storage: 'slots' must be >= 0");
      s.slots.push_back(static_cast<int>(id));
    }
    s.targets = OutputLayout::from_json(json::field(o, "layout"));
    if (s.targets.feedback)
      throw std::invalid_argument("storage: a 'targets' layout cannot be transform feedback");
    if (s.targets.quad_layers && s.slots.size() != 1)
      throw std::invalid_argument(
          "storage: quad layers 'targets' live in one slot (an array "
          "texture)");
    if (!s.targets.quad_layers && static_cast<int>(s.slots.size()) != s.targets.rows_per_item)
      throw std::invalid_argument("storage: 'targets' needs one slot per render target (" +
                                  std::to_string(s.targets.rows_per_item) + ")");
  } else if (kind == "alias") {
    s.kind = Kind::kAlias;
    const int64_t of = json::get_int(o, "of");
    if (of < 0) throw std::invalid_argument("storage: alias 'of' must be >= 0");
    s.alias_of = static_cast<int>(of);
  } else {
    throw std::invalid_argument("storage: unknown kind '" + kind +
                                "' (buffer, array, texture, targets, alias)");
  }
  return s;
}

TensorLayout plain_texture_layout(const std::vector<int64_t>& shape, const DeviceLimits& limits) {
  TensorLayout layout;
  layout.shape = shape;
  layout.pack_axis = -1;
  const int64_t elements = std::max<int64_t>(shape_elements(shape), 1);
  layout.width = std::min(elements, limits.max_texture_size);
  layout.height = (elements + layout.width - 1) / layout.width;
  if (layout.height > limits.max_texture_size)
    throw std::invalid_argument("a tensor of " + std::to_string(elements) +
                                " elements does not fit one texture of at most " +
                                std::to_string(limits.max_texture_size) + " texels a side");
  return layout;
}

bool same_placement(const Storage& from, const TensorLayout& to) {
  const int64_t elements = shape_elements(to.shape);
  // Where `to` puts each logical element: position = texel · channels + channel. Packing the
  // element indices themselves gives the inverse map; indices are split into two exact float
  // halves so that tensors beyond 2^24 elements compare exactly too.
  auto positions = [elements](const auto& place) {
    std::vector<float> low(static_cast<size_t>(elements)), high(low.size());
    for (int64_t e = 0; e < elements; ++e) {
      low[e] = static_cast<float>(e % 4096);
      high[e] = static_cast<float>(e / 4096);
    }
    return std::make_pair(place(low), place(high));
  };
  if (from.kind == Storage::Kind::kTexture) {
    const TensorLayout& a = from.texture;
    if (a.layers != 0 || to.layers != 0) return false;  // layers live in quad-layer targets
    if (a.width != to.width || a.height != to.height || a.channels() != to.channels() ||
        shape_elements(a.shape) != elements)
      return false;
    if (a.pack_axis == to.pack_axis && a.shape == to.shape) return true;
    auto pa = positions([&](const std::vector<float>& v) { return a.pack(v); });
    auto pb = positions([&](const std::vector<float>& v) { return to.pack(v); });
    return pa == pb;
  }
  if (from.kind == Storage::Kind::kTargets) {
    const OutputLayout& out = from.targets;
    if (out.quad_layers || to.layers != 0) {  // the same array texture, placed the same way
      if (!out.quad_layers || to.layers == 0 || shape_elements(to.shape) != out.elements())
        return false;
      const OutputLayout need = OutputLayout::quad_layers_source(to);
      return need.rows == out.rows && need.cols == out.cols &&
             need.rows_per_item == out.rows_per_item && need.width == out.width &&
             need.height == out.height;
    }
    if (out.feedback || out.rows_per_item != 1 || out.width != to.width ||
        out.height != to.height || out.channels != to.channels() || out.elements() != elements)
      return false;
    // Texel order of `to`, unpacked as if it were the kernel's render target: the logical
    // element each position holds must come back at its own index.
    auto [low, high] = positions([&](const std::vector<float>& v) { return to.pack(v); });
    const std::vector<float> back_low = out.unpack({low});
    const std::vector<float> back_high = out.unpack({high});
    for (int64_t e = 0; e < elements; ++e) {
      if (back_low[e] != static_cast<float>(e % 4096) ||
          back_high[e] != static_cast<float>(e / 4096))
        return false;
    }
    // Padding positions of `to` must be padding of the targets too: equal texel counts and
    // every element matched imply it.
    return true;
  }
  return false;  // buffers, arrays and aliases are not frag storage
}

}  // namespace webtune::deploy
