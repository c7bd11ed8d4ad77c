/// \file wasm_memory.cpp
/// The linear memory of a wasm package and its placed kernels (wasm_memory.hpp).
#include "deploy/wasm_memory.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <map>
#include <stdexcept>
#include <string>

#include "codegen/task.hpp"
#include "codegen/wasm_emitter.hpp"

namespace webtune::deploy {

namespace {

namespace bj = boost::json;

constexpr int64_t kPage = 65536;
constexpr int64_t kMaxBytes = int64_t{1} << 30;  // what browsers give one memory, comfortably

int64_t align64(int64_t v) {
  return (v + 63) / 64 * 64;
}

/// The value that owns `v`'s storage (aliases followed).
int owner(const Manifest& m, int v) {
  for (size_t hops = 0; m.values[static_cast<size_t>(v)].storage.kind == Storage::Kind::kAlias;
       ++hops) {
    if (hops > m.values.size())
      throw std::invalid_argument("value " + std::to_string(v) + ": an alias cycle");
    v = m.values[static_cast<size_t>(v)].storage.alias_of;
  }
  return v;
}

const PackageTask& task_named(const Manifest& m, const std::string& name) {
  for (const PackageTask& t : m.tasks)
    if (t.name == name) return t;
  throw std::invalid_argument("step of task '" + name + "': no such task in the manifest");
}

}  // namespace

void place_wasm_memory(PlannedPackage& package, const DeviceLimits& limits) {
  Manifest& m = package.manifest;
  WasmMemory memory;
  int64_t next = kWasmFirstTensorOffset;
  auto take = [&](int64_t bytes) {
    const int64_t at = next;
    next = align64(next + bytes + kWasmTensorSlack);
    return at;
  };
  for (const PackageSlot& slot : m.slots) {
    if (slot.kind != PackageSlot::Kind::kArray)
      throw std::invalid_argument("slot " + std::to_string(slot.id) +
                                  " is not an array; a wasm package's slots are");
    memory.slot_offsets.push_back(take(slot.bytes()));
  }
  // Each task step's entity (its space rebuilt with the device's limits), and the weights that
  // kernels read: those go into the memory, the JavaScript ops' weights stay in weights.bin.
  std::map<std::string, ConfigEntity> entities;
  std::map<std::string, Workload> workloads;
  std::vector<bool> weight_read(m.weights.size(), false);
  int64_t scratch = 0;
  for (const PackageStep& s : m.steps) {
    if (s.kind != PackageStep::Kind::kKernel || s.kernel.empty()) continue;
    if (s.role != PackageStep::Role::kTask)
      throw std::invalid_argument("a wasm package has kernels only for tasks, not for node '" +
                                  s.node + "'");
    for (const StepInput& in : s.inputs)
      if (in.kind == StepInput::Kind::kWeight) weight_read[static_cast<size_t>(in.id)] = true;
    if (entities.count(s.task)) continue;
    const PackageTask& task = task_named(m, s.task);
    const Task t = Task::create(task.workload, Target::kWasm, limits);
    ConfigEntity e = t.space->from_json(task.config);
    std::string why;
    if (!t.space->is_valid(e, &why))
      throw std::invalid_argument("task " + task.name + ": config " + e.to_string() + " " + why);
    scratch = std::max(scratch, wasm_scratch_bytes(task.workload, e));
    memory.shared = memory.shared || e.get_int("threads") > 1;
    workloads.emplace(s.task, task.workload);
    entities.emplace(s.task, std::move(e));
  }
  memory.weight_offsets.assign(m.weights.size(), -1);
  for (size_t w = 0; w < m.weights.size(); ++w)
    if (weight_read[w]) memory.weight_offsets[w] = take(m.weights[w].floats * 4);
  memory.scratch_offset = next;
  const int64_t end = next + scratch;
  memory.pages = (end + kPage - 1) / kPage;
  if (memory.pages * kPage > kMaxBytes)
    throw std::invalid_argument("the wasm package's linear memory would take " +
                                std::to_string(memory.pages * kPage) +
                                " bytes (slots, weights and scratch), more than 1 GiB");

  // Every task step's kernel at its tensors' offsets; steps with the same placement share one.
  package.kernels.clear();
  std::map<std::string, size_t> kernel_of;
  for (PackageStep& s : m.steps) {
    if (s.kind != PackageStep::Kind::kKernel || s.kernel.empty()) continue;
    WasmPlacement placement;
    for (const StepInput& in : s.inputs) {
      if (in.kind == StepInput::Kind::kWeight) {
        placement.offsets.push_back(memory.weight_offsets[static_cast<size_t>(in.id)]);
      } else if (in.kind == StepInput::Kind::kValue) {
        const Storage& storage = m.values[static_cast<size_t>(owner(m, in.id))].storage;
        placement.offsets.push_back(memory.slot_offsets[static_cast<size_t>(storage.slots.at(0))]);
      } else {
        throw std::invalid_argument("task step of node '" + s.node +
                                    "' has an input that is neither a value nor a weight");
      }
    }
    const Storage& out = m.values[static_cast<size_t>(owner(m, s.output))].storage;
    placement.offsets.push_back(memory.slot_offsets[static_cast<size_t>(out.slots.at(0))]);
    placement.scratch_offset = memory.scratch_offset;
    placement.memory_pages = memory.pages;
    placement.shared_memory = memory.shared;
    const KernelArtifact artifact =
        emit_wasm_placed(workloads.at(s.task), entities.at(s.task), placement);
    const std::string text = bj::serialize(artifact.to_json());
    const auto [it, added] = kernel_of.emplace(text, package.kernels.size());
    if (added) package.kernels.push_back(artifact);
    s.kernel = kernel_file(it->second);
  }
  m.wasm_memory = std::move(memory);
}

}  // namespace webtune::deploy
