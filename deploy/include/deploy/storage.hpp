#pragma once
/// \file storage.hpp
/// Where a value (a logical row-major tensor between two steps of a model package) lives on
/// the device: the manifest's STORAGE (docs/package.md). The planner chooses it; the runtimes
/// (JavaScript and native) follow it.

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"

namespace webtune::deploy {

struct Storage {
  enum class Kind {
    kBuffer,   ///< gles-compute, webgpu: plain row-major floats in one storage buffer
    kArray,    ///< wasm: plain row-major floats in one JavaScript-side Float32Array
    kTexture,  ///< gles-frag / webgl2: one texture placed as `texture` says
    kTargets,  ///< gles-frag / webgl2: the render targets a fragment kernel wrote (`targets`);
               ///< with targets.quad_layers the layers of one array texture (one slot)
    kAlias,    ///< the storage of value `alias_of`
  };
  Kind kind = Kind::kBuffer;
  std::vector<int> slots;  ///< pool slots: one, or one per render target for kTargets (one
                           ///< for quad layers)
  TensorLayout texture;    ///< kTexture
  OutputLayout targets;    ///< kTargets (never `feedback`)
  int alias_of = -1;       ///< kAlias

  boost::json::object to_json() const;
  /// Throws std::invalid_argument naming the missing or bad field.
  static Storage from_json(const boost::json::value& value);
};

/// Product of a shape's dimensions (1 for a scalar), in elements.
int64_t shape_elements(const std::vector<int64_t>& shape);
/// A shape as messages print it: "[1,3,224,224]".
std::string shape_text(const std::vector<int64_t>& shape);

/// The plain layout of a row-major tensor in one R32F texture on a frag target: pack_axis −1,
/// width = min(elements, limits.max_texture_size), height = ceil(elements / width). Throws
/// std::invalid_argument when the tensor needs more than max_texture_size rows.
TensorLayout plain_texture_layout(const std::vector<int64_t>& shape, const DeviceLimits& limits);

/// Whether every logical element of a tensor of `shape` sits at the same (texture, texel,
/// channel) under `from` as under `to`, so a kernel that reads `to` can bind `from`'s texture
/// as it is (no relayout). kTargets storage matches only with rows_per_item 1. Brute force over
/// the elements (build time only).
bool same_placement(const Storage& from, const TensorLayout& to);

}  // namespace webtune::deploy
