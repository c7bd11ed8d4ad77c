#pragma once
/// \file memory_plan.hpp
/// The package's memory pool (docs/package.md, "slots"): each value gets its slots by liveness,
/// greedily in step order, as TVM's graph executor plans its storage (a freed buffer is taken by
/// the next value that fits it) — here buffers / arrays fit by capacity and textures only with
/// the same width, height and channels.

#include <cstdint>
#include <vector>

#include "deploy/package.hpp"

namespace webtune::deploy {

/// What one value needs and when it is live.
struct ValueLifetime {
  int first = 0;  ///< the step that writes it (upload or kernel)
  int last = 0;   ///< the last step that reads it (itself or through an alias); ≥ first
  /// One entry per slot it needs (one, or one per render target), each with `kind` and its
  /// size (floats, or width / height / channels); ids are ignored.
  std::vector<PackageSlot> needs;
};

struct MemoryPlan {
  std::vector<PackageSlot> slots;          ///< ids 0, 1, … in creation order
  std::vector<std::vector<int>> assigned;  ///< per lifetime: its slot ids, one per need
  int64_t slot_bytes = 0;                  ///< Σ slots' bytes
  int64_t value_bytes = 0;                 ///< Σ every need's bytes (no reuse at all)
};

/// Assigns slots to `lifetimes`. A value's slots are free again for values written after its
/// last read: a value written at step s never gets a slot of a value read at s or later (so
/// never one of its own step's inputs), and the render targets of one value are distinct
/// slots. Buffers and arrays take the smallest free slot of their kind that is large enough,
/// else the largest free one of their kind grown to fit, else a new one; textures take a free
/// one of the same size, else a new one. Throws std::invalid_argument for a lifetime with
/// last < first.
MemoryPlan plan_memory(const std::vector<ValueLifetime>& lifetimes);

}  // namespace webtune::deploy
