/// \file memory_plan.cpp
/// Greedy slot assignment by liveness (memory_plan.hpp).
#include "deploy/memory_plan.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace webtune::deploy {

MemoryPlan plan_memory(const std::vector<ValueLifetime>& lifetimes) {
  MemoryPlan plan;
  plan.assigned.resize(lifetimes.size());
  std::vector<size_t> order(lifetimes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (size_t i = 0; i < lifetimes.size(); ++i) {
    if (lifetimes[i].last < lifetimes[i].first)
      throw std::invalid_argument("memory plan: value " + std::to_string(i) + " is read (step " +
                                  std::to_string(lifetimes[i].last) + ") before it is written (" +
                                  std::to_string(lifetimes[i].first) + ")");
    for (const PackageSlot& need : lifetimes[i].needs) plan.value_bytes += need.bytes();
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lifetimes[a].first < lifetimes[b].first; });

  std::vector<int> free_slots;            // slot ids
  std::vector<std::pair<int, int>> busy;  // (last step, slot id)
  for (size_t i : order) {
    const ValueLifetime& value = lifetimes[i];
    // Release the slots of values whose last read came before this value's step.
    for (auto it = busy.begin(); it != busy.end();) {
      if (it->first < value.first) {
        free_slots.push_back(it->second);
        it = busy.erase(it);
      } else {
        ++it;
      }
    }
    for (const PackageSlot& need : value.needs) {
      int chosen = -1;
      if (need.kind == PackageSlot::Kind::kTexture) {
        for (int id : free_slots) {
          const PackageSlot& s = plan.slots[id];
          if (s.kind == need.kind && s.width == need.width && s.height == need.height &&
              s.channels == need.channels && s.layers == need.layers) {
            chosen = id;
            break;
          }
        }
      } else {
        int largest = -1;
        for (int id : free_slots) {
          const PackageSlot& s = plan.slots[id];
          if (s.kind != need.kind) continue;
          if (s.floats >= need.floats && (chosen < 0 || s.floats < plan.slots[chosen].floats))
            chosen = id;
          if (largest < 0 || s.floats > plan.slots[largest].floats) largest = id;
        }
        if (chosen < 0 && largest >= 0) {
          chosen = largest;
          plan.slots[chosen].floats = need.floats;  // grown: created once, at its final size
        }
      }
      if (chosen >= 0) {
        free_slots.erase(std::find(free_slots.begin(), free_slots.end(), chosen));
      } else {
        PackageSlot slot = need;
        slot.id = static_cast<int>(plan.slots.size());
        plan.slots.push_back(slot);
        chosen = slot.id;
      }
      plan.assigned[i].push_back(chosen);
      busy.emplace_back(value.last, chosen);
    }
  }
  for (const PackageSlot& s : plan.slots) plan.slot_bytes += s.bytes();
  return plan;
}

}  // namespace webtune::deploy
