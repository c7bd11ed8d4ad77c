/// \file wasm_memory.cpp
/// The linear memory of a wasm package and its placed kernels (wasm_memory.hpp).
#include "deploy/wasm_memory.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

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

/// The ints of attribute `name` of `op`, or `fallback` when absent; nullopt when it is not a
/// list of integers.
std::optional<std::vector<int64_t>> ints_or(const PackageOp& op, const char* name,
                                            std::vector<int64_t> fallback) {
  const bj::value* v = op.attributes.if_contains(name);
  if (v == nullptr) return fallback;
  if (!v->is_array()) return std::nullopt;
  std::vector<int64_t> out;
  for (const bj::value& x : v->as_array()) {
    if (!x.is_int64()) return std::nullopt;
    out.push_back(x.as_int64());
  }
  return out;
}

/// A MaxPool op step the wasm max-pool kernel runs (emit_wasm_max_pool_placed): a 4-D input, a
/// square 2-D window with one stride and one pad on every side (pad < kernel), no dilation,
/// floor rounding, no Indices output — ResNet's stem pool. Its geometry as a depthwise_conv2d
/// workload; nullopt for any other pool, which stays a JavaScript op.
std::optional<Workload> max_pool_workload(const Manifest& m, const PackageStep& s) {
  if (!s.op || s.op->type != "MaxPool" || s.inputs.size() != 1 ||
      s.inputs[0].kind != StepInput::Kind::kValue)
    return std::nullopt;
  const std::vector<int64_t>& x = m.values[static_cast<size_t>(s.inputs[0].id)].shape;
  const std::vector<int64_t>& y = m.values[static_cast<size_t>(s.output)].shape;
  if (x.size() != 4 || y.size() != 4) return std::nullopt;
  const PackageOp& op = *s.op;
  const auto kernel = ints_or(op, "kernel_shape", {});
  const auto strides = ints_or(op, "strides", {1, 1});
  const auto pads = ints_or(op, "pads", {0, 0, 0, 0});
  const auto dilations = ints_or(op, "dilations", {1, 1});
  if (!kernel || !strides || !pads || !dilations || kernel->size() != 2 || strides->size() != 2 ||
      pads->size() != 4 || dilations->size() != 2)
    return std::nullopt;
  for (const char* scalar : {"ceil_mode", "storage_order"})
    if (const bj::value* v = op.attributes.if_contains(scalar);
        v && !(v->is_int64() && v->as_int64() == 0))
      return std::nullopt;
  if (const bj::value* v = op.attributes.if_contains("auto_pad");
      v && !(v->is_string() && v->as_string() == "NOTSET"))
    return std::nullopt;
  const int64_t k = (*kernel)[0], stride = (*strides)[0], pad = (*pads)[0];
  if ((*kernel)[1] != k || (*strides)[1] != stride || (*dilations)[0] != 1 ||
      (*dilations)[1] != 1 || k < 1 || stride < 1 || pad < 0 || pad >= k)
    return std::nullopt;
  for (int64_t p : *pads)
    if (p != pad) return std::nullopt;
  Workload w = Workload::depthwise_conv2d(x[0], x[1], x[2], x[3], k, stride, pad);
  if (w.output_shape() != y) return std::nullopt;
  w.name = "max_pool";
  return w;
}

/// The max-pool kernel's config (a depthwise config): SIMD over 8 (else 4, else 1) output
/// columns, 2 (else 1) rows a tile, the window unrolled, `threads` threads (else 1).
std::optional<ConfigEntity> max_pool_config(const Task& t, int64_t threads) {
  for (int64_t th : {threads, int64_t{1}})
    for (int64_t tile_w : {8, 4, 1})
      for (int64_t tile_h : {2, 1}) {
        const std::string json =
            R"({"entity":[["tile_c","ot",1],["tile_h","ot",)" + std::to_string(tile_h) +
            R"(],["tile_w","ot",)" + std::to_string(tile_w) + R"(],["simd","ot",)" +
            (tile_w % 4 == 0 ? "1" : "0") + R"(],["unroll_rs","ot",1],["threads","ot",)" +
            std::to_string(th) + R"(],["fma","ot",0]]})";
        ConfigEntity e = t.space->from_json(bj::parse(json));
        if (t.space->is_valid(e)) return e;
      }
  return std::nullopt;
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
  // MaxPool op steps that the max-pool kernel runs (the others stay JavaScript ops): on the
  // task kernels' thread count where the memory is shared.
  std::map<size_t, std::pair<Workload, ConfigEntity>> pools;  // step index → kernel
  const int64_t pool_threads = memory.shared ? std::min<int64_t>(2, limits.max_threads) : 1;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const PackageStep& s = m.steps[i];
    if (s.kind != PackageStep::Kind::kKernel || !s.kernel.empty()) continue;
    const std::optional<Workload> w = max_pool_workload(m, s);
    if (!w) continue;
    const Task t = Task::create(*w, Target::kWasm, limits);
    std::optional<ConfigEntity> e = max_pool_config(t, pool_threads);
    if (!e) continue;
    scratch = std::max(scratch, wasm_scratch_bytes(*w, *e));
    pools.emplace(i, std::make_pair(*w, std::move(*e)));
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
  auto slot_offset = [&](int value) {
    const Storage& storage = m.values[static_cast<size_t>(owner(m, value))].storage;
    return memory.slot_offsets[static_cast<size_t>(storage.slots.at(0))];
  };
  auto add_kernel = [&](const KernelArtifact& artifact) {
    const std::string text = bj::serialize(artifact.to_json());
    const auto [it, added] = kernel_of.emplace(text, package.kernels.size());
    if (added) package.kernels.push_back(artifact);
    return kernel_file(it->second);
  };
  for (size_t i = 0; i < m.steps.size(); ++i) {
    PackageStep& s = m.steps[i];
    if (const auto pool = pools.find(i); pool != pools.end()) {
      WasmPlacement placement;
      placement.offsets = {slot_offset(s.inputs[0].id), slot_offset(s.output)};
      placement.scratch_offset = memory.scratch_offset;
      placement.memory_pages = memory.pages;
      placement.shared_memory = memory.shared;
      // The op stays in the step (the report, a reader); the kernel file runs it.
      s.kernel =
          add_kernel(emit_wasm_max_pool_placed(pool->second.first, pool->second.second, placement));
      continue;
    }
    if (s.kind != PackageStep::Kind::kKernel || s.kernel.empty()) continue;
    WasmPlacement placement;
    for (const StepInput& in : s.inputs) {
      if (in.kind == StepInput::Kind::kWeight) {
        placement.offsets.push_back(memory.weight_offsets[static_cast<size_t>(in.id)]);
      } else if (in.kind == StepInput::Kind::kValue) {
        placement.offsets.push_back(slot_offset(in.id));
      } else {
        throw std::invalid_argument("task step of node '" + s.node +
                                    "' has an input that is neither a value nor a weight");
      }
    }
    placement.offsets.push_back(slot_offset(s.output));
    placement.scratch_offset = memory.scratch_offset;
    placement.memory_pages = memory.pages;
    placement.shared_memory = memory.shared;
    s.kernel = add_kernel(emit_wasm_placed(workloads.at(s.task), entities.at(s.task), placement));
  }
  m.wasm_memory = std::move(memory);
}

}  // namespace webtune::deploy
