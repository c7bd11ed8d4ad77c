/// \file package.cpp
/// The manifest of a model package: JSON out (exactly docs/package.md) and back in, with every
/// reference checked so that a runtime can index by id without checking again.
#include "deploy/package.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "codegen/json_util.hpp"

namespace webtune::deploy {

namespace bj = boost::json;

namespace {

/// Prefixes an exception's message with `where` ("manifest: steps[3]: ...").
template <typename F>
auto at(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

bj::array shape_json(const std::vector<int64_t>& shape) {
  return json::to_array(shape);
}

std::vector<int64_t> shape_from(const bj::object& o, std::string_view key) {
  std::vector<int64_t> shape = json::get_int_array(o, key);
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("'" + std::string(key) + "' has a negative dimension");
  return shape;
}

int int_field(const bj::object& o, std::string_view key) {
  const int64_t v = json::get_int(o, key);
  if (v < -1 || v > (int64_t{1} << 30))
    throw std::invalid_argument("'" + std::string(key) + "' = " + std::to_string(v) +
                                " is out of range");
  return static_cast<int>(v);
}

const bj::array& array_field(const bj::object& o, std::string_view key) {
  const bj::value& v = json::field(o, key);
  if (!v.is_array()) throw std::invalid_argument("'" + std::string(key) + "' must be an array");
  return v.as_array();
}

std::optional<double> optional_double(const bj::object& o, std::string_view key) {
  const bj::value& v = json::field(o, key);
  if (v.is_null()) return std::nullopt;
  return json::to_double(v, key);
}

/// Checks that `id` names one of `count` things called `what`.
void check_ref(int id, size_t count, const char* what) {
  if (id < 0 || static_cast<size_t>(id) >= count)
    throw std::invalid_argument(std::string(what) + " " + std::to_string(id) +
                                " does not exist (the manifest has " + std::to_string(count) + " " +
                                what + "s)");
}

bj::object step_to_json(const PackageStep& s) {
  bj::object o{{"kind", step_kind_name(s.kind)}};
  if (s.kind != PackageStep::Kind::kKernel) {
    o["value"] = s.value;
    return o;
  }
  o["role"] = step_role_name(s.role);
  o["kernel"] = s.kernel.empty() ? bj::value(nullptr) : bj::value(s.kernel);
  o["node"] = s.node;
  o["task"] = s.task.empty() ? bj::value(nullptr) : bj::value(s.task);
  bj::array inputs;
  for (const StepInput& in : s.inputs) {
    switch (in.kind) {
      case StepInput::Kind::kValue:
        inputs.push_back(bj::object{{"value", in.id}});
        break;
      case StepInput::Kind::kWeight:
        inputs.push_back(bj::object{{"weight", in.id}});
        break;
      case StepInput::Kind::kInts:
        inputs.push_back(bj::object{{"ints", json::to_array(in.ints)}});
        break;
      case StepInput::Kind::kNone:
        inputs.push_back(nullptr);
        break;
    }
  }
  o["inputs"] = std::move(inputs);
  o["output"] = s.output;
  if (s.op)
    o["op"] =
        bj::object{{"type", s.op->type}, {"attributes", s.op->attributes}, {"opset", s.op->opset}};
  return o;
}

PackageStep step_from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "a step");
  PackageStep s;
  const std::string kind = json::get_string(o, "kind");
  if (kind == "upload" || kind == "alias" || kind == "download") {
    s.kind = kind == "upload"  ? PackageStep::Kind::kUpload
             : kind == "alias" ? PackageStep::Kind::kAlias
                               : PackageStep::Kind::kDownload;
    s.value = int_field(o, "value");
    return s;
  }
  if (kind != "kernel")
    throw std::invalid_argument("unknown step kind '" + kind +
                                "' (upload, kernel, alias, download)");
  s.kind = PackageStep::Kind::kKernel;
  const std::string role = json::get_string(o, "role");
  if (role == "task")
    s.role = PackageStep::Role::kTask;
  else if (role == "relayout")
    s.role = PackageStep::Role::kRelayout;
  else if (role == "op")
    s.role = PackageStep::Role::kOp;
  else
    throw std::invalid_argument("unknown step role '" + role + "' (task, relayout, op)");
  const bj::value& kernel = json::field(o, "kernel");
  if (kernel.is_string())
    s.kernel = std::string(kernel.as_string());
  else if (!kernel.is_null())
    throw std::invalid_argument("'kernel' must be a file name or null");
  s.node = json::get_string(o, "node");
  if (const bj::value* task = o.if_contains("task"); task && !task->is_null()) {
    if (!task->is_string()) throw std::invalid_argument("'task' must be a task name or null");
    s.task = std::string(task->as_string());
  }
  const bj::array& inputs = array_field(o, "inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    at("inputs[" + std::to_string(i) + "]", [&] {
      if (inputs[i].is_null()) {
        s.inputs.push_back({StepInput::Kind::kNone, -1, {}});
        return;
      }
      const bj::object& in = json::as_object(inputs[i], "an input");
      if (in.contains("value"))
        s.inputs.push_back(StepInput::value(int_field(in, "value")));
      else if (in.contains("weight"))
        s.inputs.push_back(StepInput::weight(int_field(in, "weight")));
      else if (in.contains("ints"))
        s.inputs.push_back({StepInput::Kind::kInts, -1, json::get_int_array(in, "ints")});
      else
        throw std::invalid_argument(
            "an input is {\"value\": id}, {\"weight\": id}, "
            "{\"ints\": [...]} or null");
    });
  }
  s.output = int_field(o, "output");
  if (const bj::value* op = o.if_contains("op"); op && !op->is_null()) {
    at("op", [&] {
      const bj::object& oo = json::as_object(*op, "'op'");
      PackageOp p;
      p.type = json::get_string(oo, "type");
      p.opset = json::get_int_or(oo, "opset", 13);
      if (const bj::value* a = oo.if_contains("attributes"))
        p.attributes = json::as_object(*a, "'attributes'");
      s.op = std::move(p);
    });
  }
  if (s.kernel.empty() && !s.op)
    throw std::invalid_argument("a kernel step needs a 'kernel' file, or an 'op' (wasm op steps)");
  return s;
}

}  // namespace

std::string_view task_source_name(TaskSource source) {
  switch (source) {
    case TaskSource::kRecord:
      return "record";
    case TaskSource::kPrefix:
      return "prefix";
    case TaskSource::kDefault:
      return "default";
  }
  return "?";
}

TaskSource task_source_from_name(std::string_view name) {
  if (name == "record") return TaskSource::kRecord;
  if (name == "prefix") return TaskSource::kPrefix;
  if (name == "default") return TaskSource::kDefault;
  throw std::invalid_argument("unknown task source '" + std::string(name) +
                              "' (record, prefix, default)");
}

int64_t PackageSlot::bytes() const {
  return (kind == Kind::kTexture ? width * height * channels * std::max(layers, 1) : floats) *
         int64_t{4};
}

std::string_view slot_kind_name(PackageSlot::Kind kind) {
  switch (kind) {
    case PackageSlot::Kind::kBuffer:
      return "buffer";
    case PackageSlot::Kind::kArray:
      return "array";
    case PackageSlot::Kind::kTexture:
      return "texture";
  }
  return "?";
}

std::string_view step_kind_name(PackageStep::Kind kind) {
  switch (kind) {
    case PackageStep::Kind::kUpload:
      return "upload";
    case PackageStep::Kind::kKernel:
      return "kernel";
    case PackageStep::Kind::kAlias:
      return "alias";
    case PackageStep::Kind::kDownload:
      return "download";
  }
  return "?";
}

std::string_view step_role_name(PackageStep::Role role) {
  switch (role) {
    case PackageStep::Role::kTask:
      return "task";
    case PackageStep::Role::kRelayout:
      return "relayout";
    case PackageStep::Role::kOp:
      return "op";
  }
  return "?";
}

namespace {

/// "wasm_memory", checked against the slots and weights already read: one offset per slot and
/// per weight (−1: a weight not in the memory), each region 64-byte aligned past 64 KiB with
/// 256 bytes of slack inside the pages, no two regions overlapping, the scratch past them all.
WasmMemory wasm_memory_from(const bj::value& value, const Manifest& m) {
  const bj::object& o = json::as_object(value, "'wasm_memory'");
  WasmMemory w;
  w.pages = json::get_int(o, "pages");
  const bj::value& shared = json::field(o, "shared");
  if (!shared.is_bool()) throw std::invalid_argument("'shared' must be true or false");
  w.shared = shared.get_bool();
  w.slot_offsets = json::get_int_array(o, "slot_offsets");
  w.weight_offsets = json::get_int_array(o, "weight_offsets");
  w.scratch_offset = json::get_int(o, "scratch_offset");
  constexpr int64_t kFirst = 65536, kSlack = 256, kMaxPages = 16384;  // 1 GiB
  if (w.pages < 1 || w.pages > kMaxPages)
    throw std::invalid_argument("'pages' " + std::to_string(w.pages) + " is outside 1.." +
                                std::to_string(kMaxPages));
  if (w.slot_offsets.size() != m.slots.size())
    throw std::invalid_argument("'slot_offsets' has " + std::to_string(w.slot_offsets.size()) +
                                " offsets for " + std::to_string(m.slots.size()) + " slots");
  if (w.weight_offsets.size() != m.weights.size())
    throw std::invalid_argument("'weight_offsets' has " + std::to_string(w.weight_offsets.size()) +
                                " offsets for " + std::to_string(m.weights.size()) + " weights");
  const int64_t end = w.pages * 65536;
  std::vector<std::pair<int64_t, int64_t>> regions;  // [begin, end + slack)
  auto region = [&](const std::string& what, int64_t at, int64_t bytes) {
    if (at < kFirst || at % 64 != 0 || at + bytes + kSlack > end)
      throw std::invalid_argument(what + " at byte " + std::to_string(at) + " (" +
                                  std::to_string(bytes) +
                                  " bytes) is not 64-byte aligned past 64 KiB with 256 bytes of "
                                  "slack inside the " +
                                  std::to_string(end) + " bytes of memory");
    regions.emplace_back(at, at + bytes + kSlack);
  };
  for (size_t i = 0; i < m.slots.size(); ++i)
    region("slot " + std::to_string(i), w.slot_offsets[i], m.slots[i].bytes());
  for (size_t i = 0; i < m.weights.size(); ++i)
    if (w.weight_offsets[i] != -1)
      region("weight " + std::to_string(i), w.weight_offsets[i], m.weights[i].floats * 4);
  region("the scratch", w.scratch_offset, 0);
  std::sort(regions.begin(), regions.end());
  for (size_t i = 1; i < regions.size(); ++i)
    if (regions[i].first < regions[i - 1].second)
      throw std::invalid_argument("two regions overlap: bytes " +
                                  std::to_string(regions[i - 1].first) + ".." +
                                  std::to_string(regions[i - 1].second) + " and " +
                                  std::to_string(regions[i].first) + "..");
  for (const auto& [begin, stop] : regions)
    if (begin > w.scratch_offset)
      throw std::invalid_argument("the scratch must lie past every slot and weight");
  return w;
}

}  // namespace

bj::object Manifest::to_json() const {
  bj::object o{{"format", kPackageFormat}, {"version", kPackageVersion}};
  o["model"] = bj::object{{"name", model.name}, {"file", model.file}, {"sha256", model.sha256}};
  o["target"] = target;
  o["artifact_target"] = target_name(artifact_target);
  o["device_key"] = device_key;
  auto tensors = [](const std::vector<PackageTensor>& list) {
    bj::array a;
    for (const PackageTensor& t : list)
      a.push_back(bj::object{{"name", t.name}, {"shape", shape_json(t.shape)}, {"value", t.value}});
    return a;
  };
  o["inputs"] = tensors(inputs);
  o["outputs"] = tensors(outputs);
  bj::array tasks_json;
  for (const PackageTask& t : tasks) {
    bj::array nodes;
    for (const std::string& n : t.nodes) nodes.push_back(bj::value(n));
    tasks_json.push_back(
        bj::object{{"name", t.name},
                   {"workload", t.workload.to_json()},
                   {"nodes", std::move(nodes)},
                   {"source", task_source_name(t.source)},
                   {"record_device_key", t.record_device_key},
                   {"record_id", t.record_id ? bj::value(*t.record_id) : bj::value(nullptr)},
                   {"config", t.config},
                   {"cost_ms", t.cost_ms ? bj::value(*t.cost_ms) : bj::value(nullptr)}});
  }
  o["tasks"] = std::move(tasks_json);
  bj::array slots_json;
  for (const PackageSlot& s : slots) {
    bj::object so{{"id", s.id}, {"kind", slot_kind_name(s.kind)}};
    if (s.kind == PackageSlot::Kind::kTexture) {
      so["width"] = s.width;
      so["height"] = s.height;
      so["channels"] = s.channels;
      if (s.layers > 0) so["layers"] = s.layers;
    } else {
      so["floats"] = s.floats;
    }
    slots_json.push_back(std::move(so));
  }
  o["slots"] = std::move(slots_json);
  bj::array values_json;
  for (const PackageValue& v : values)
    values_json.push_back(bj::object{{"id", v.id},
                                     {"name", v.name},
                                     {"shape", shape_json(v.shape)},
                                     {"storage", v.storage.to_json()}});
  o["values"] = std::move(values_json);
  bj::array weights_json;
  for (const PackageWeight& w : weights) {
    bj::object wo{{"id", w.id}, {"name", w.name}, {"offset", w.offset}, {"floats", w.floats}};
    if (w.texture)
      wo["texture"] = bj::object{{"width", w.texture->width},
                                 {"height", w.texture->height},
                                 {"channels", w.texture->channels}};
    if (!w.shape.empty()) wo["shape"] = shape_json(w.shape);
    weights_json.push_back(std::move(wo));
  }
  o["weights"] = std::move(weights_json);
  bj::array steps_json;
  for (const PackageStep& s : steps) steps_json.push_back(step_to_json(s));
  o["steps"] = std::move(steps_json);
  o["layout_transforms"] = layout_transforms;
  o["estimated_ms"] = estimated_ms ? bj::value(*estimated_ms) : bj::value(nullptr);
  if (wasm_memory) {
    o["wasm_memory"] = bj::object{{"pages", wasm_memory->pages},
                                  {"shared", wasm_memory->shared},
                                  {"slot_offsets", json::to_array(wasm_memory->slot_offsets)},
                                  {"weight_offsets", json::to_array(wasm_memory->weight_offsets)},
                                  {"scratch_offset", wasm_memory->scratch_offset}};
  }
  return o;
}

Manifest Manifest::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "manifest");
  Manifest m;
  at("manifest", [&] {
    if (json::get_string(o, "format") != kPackageFormat)
      throw std::invalid_argument("'format' must be \"" + std::string(kPackageFormat) + "\"");
    const int64_t version = json::get_int(o, "version");
    if (version != kPackageVersion)
      throw std::invalid_argument("version " + std::to_string(version) +
                                  " is not supported (this webtune reads version " +
                                  std::to_string(kPackageVersion) + ")");
    at("model", [&] {
      const bj::object& mo = json::as_object(json::field(o, "model"), "'model'");
      m.model.name = json::get_string(mo, "name");
      m.model.file = json::get_string(mo, "file");
      m.model.sha256 = json::get_string(mo, "sha256");
    });
    m.target = json::get_string(o, "target");
    m.artifact_target = target_from_name(json::get_string(o, "artifact_target"));
    m.device_key = json::get_string(o, "device_key");
    auto tensors = [&](std::string_view key, std::vector<PackageTensor>& out) {
      const bj::array& a = array_field(o, key);
      for (size_t i = 0; i < a.size(); ++i)
        at(std::string(key) + "[" + std::to_string(i) + "]", [&] {
          const bj::object& t = json::as_object(a[i], "a tensor");
          out.push_back(
              {json::get_string(t, "name"), shape_from(t, "shape"), int_field(t, "value")});
        });
    };
    tensors("inputs", m.inputs);
    tensors("outputs", m.outputs);

    const bj::array& tasks = array_field(o, "tasks");
    for (size_t i = 0; i < tasks.size(); ++i)
      at("tasks[" + std::to_string(i) + "]", [&] {
        const bj::object& t = json::as_object(tasks[i], "a task");
        PackageTask task;
        task.name = json::get_string(t, "name");
        task.workload = Workload::from_json(json::field(t, "workload"));
        for (const bj::value& n : array_field(t, "nodes")) {
          if (!n.is_string()) throw std::invalid_argument("'nodes' must hold strings");
          task.nodes.emplace_back(n.as_string());
        }
        task.source = task_source_from_name(json::get_string(t, "source"));
        task.record_device_key = json::get_string_or(t, "record_device_key", "");
        if (const bj::value& id = json::field(t, "record_id"); !id.is_null())
          task.record_id = json::to_int(id, "record_id");
        task.config = json::as_object(json::field(t, "config"), "'config'");
        task.cost_ms = optional_double(t, "cost_ms");
        if (task.source != TaskSource::kDefault && !task.record_id)
          throw std::invalid_argument("a task from a record needs its 'record_id'");
        m.tasks.push_back(std::move(task));
      });

    const bj::array& slots = array_field(o, "slots");
    for (size_t i = 0; i < slots.size(); ++i)
      at("slots[" + std::to_string(i) + "]", [&] {
        const bj::object& s = json::as_object(slots[i], "a slot");
        PackageSlot slot;
        slot.id = int_field(s, "id");
        if (slot.id != static_cast<int>(i))
          throw std::invalid_argument("'id' must be its position " + std::to_string(i));
        const std::string kind = json::get_string(s, "kind");
        if (kind == "texture") {
          slot.kind = PackageSlot::Kind::kTexture;
          slot.width = json::get_int(s, "width");
          slot.height = json::get_int(s, "height");
          slot.channels = int_field(s, "channels");
          if (slot.width < 1 || slot.height < 1 || (slot.channels != 1 && slot.channels != 4))
            throw std::invalid_argument("a texture needs width, height >= 1 and 1 or 4 channels");
          slot.layers = static_cast<int>(json::get_int_or(s, "layers", 0));
          if (slot.layers < 0 || slot.layers > 32 || (slot.layers > 0 && slot.channels != 4))
            throw std::invalid_argument("a texture's 'layers' must be 0..32, with 4 channels");
        } else if (kind == "buffer" || kind == "array") {
          slot.kind = kind == "buffer" ? PackageSlot::Kind::kBuffer : PackageSlot::Kind::kArray;
          slot.floats = json::get_int(s, "floats");
          if (slot.floats < 0) throw std::invalid_argument("'floats' must be >= 0");
        } else {
          throw std::invalid_argument("unknown slot kind '" + kind + "' (buffer, array, texture)");
        }
        m.slots.push_back(slot);
      });

    const bj::array& values = array_field(o, "values");
    for (size_t i = 0; i < values.size(); ++i)
      at("values[" + std::to_string(i) + "]", [&] {
        const bj::object& v = json::as_object(values[i], "a value");
        PackageValue pv;
        pv.id = int_field(v, "id");
        if (pv.id != static_cast<int>(i))
          throw std::invalid_argument("'id' must be its position " + std::to_string(i));
        pv.name = json::get_string(v, "name");
        pv.shape = shape_from(v, "shape");
        pv.storage = at("storage", [&] { return Storage::from_json(json::field(v, "storage")); });
        m.values.push_back(std::move(pv));
      });

    const bj::array& weights = array_field(o, "weights");
    for (size_t i = 0; i < weights.size(); ++i)
      at("weights[" + std::to_string(i) + "]", [&] {
        const bj::object& w = json::as_object(weights[i], "a weight");
        PackageWeight pw;
        pw.id = int_field(w, "id");
        if (pw.id != static_cast<int>(i))
          throw std::invalid_argument("'id' must be its position " + std::to_string(i));
        pw.name = json::get_string(w, "name");
        pw.offset = json::get_int(w, "offset");
        pw.floats = json::get_int(w, "floats");
        if (pw.offset < 0 || pw.offset % kWeightAlignment != 0)
          throw std::invalid_argument("'offset' " + std::to_string(pw.offset) +
                                      " is not a multiple of " + std::to_string(kWeightAlignment));
        if (pw.floats < 0) throw std::invalid_argument("'floats' must be >= 0");
        if (const bj::value* t = w.if_contains("texture"); t && !t->is_null()) {
          const bj::object& to = json::as_object(*t, "'texture'");
          PackageWeight::Texture tex{json::get_int(to, "width"), json::get_int(to, "height"),
                                     int_field(to, "channels")};
          if (tex.width * tex.height * tex.channels != pw.floats)
            throw std::invalid_argument("'texture' holds " +
                                        std::to_string(tex.width * tex.height * tex.channels) +
                                        " floats, not 'floats' = " + std::to_string(pw.floats));
          pw.texture = tex;
        }
        if (w.contains("shape")) pw.shape = shape_from(w, "shape");
        m.weights.push_back(std::move(pw));
      });

    const bj::array& steps = array_field(o, "steps");
    for (size_t i = 0; i < steps.size(); ++i)
      at("steps[" + std::to_string(i) + "]", [&] { m.steps.push_back(step_from_json(steps[i])); });
    m.layout_transforms = int_field(o, "layout_transforms");
    m.estimated_ms = optional_double(o, "estimated_ms");
    if (const bj::value* w = o.if_contains("wasm_memory"); w && !w->is_null())
      m.wasm_memory = at("wasm_memory", [&] { return wasm_memory_from(*w, m); });

    // References, now that every list is known.
    for (size_t i = 0; i < m.inputs.size(); ++i)
      at("inputs[" + std::to_string(i) + "]",
         [&] { check_ref(m.inputs[i].value, m.values.size(), "value"); });
    for (size_t i = 0; i < m.outputs.size(); ++i)
      at("outputs[" + std::to_string(i) + "]",
         [&] { check_ref(m.outputs[i].value, m.values.size(), "value"); });
    for (size_t i = 0; i < m.values.size(); ++i)
      at("values[" + std::to_string(i) + "].storage", [&] {
        const Storage& s = m.values[i].storage;
        if (s.kind == Storage::Kind::kAlias) {
          check_ref(s.alias_of, m.values.size(), "value");
          if (s.alias_of == static_cast<int>(i))
            throw std::invalid_argument("a value cannot alias itself");
        }
        for (int slot : s.slots) check_ref(slot, m.slots.size(), "slot");
      });
    for (size_t i = 0; i < m.steps.size(); ++i)
      at("steps[" + std::to_string(i) + "]", [&] {
        const PackageStep& s = m.steps[i];
        if (s.kind != PackageStep::Kind::kKernel) {
          check_ref(s.value, m.values.size(), "value");
          return;
        }
        check_ref(s.output, m.values.size(), "value");
        for (size_t j = 0; j < s.inputs.size(); ++j)
          at("inputs[" + std::to_string(j) + "]", [&] {
            if (s.inputs[j].kind == StepInput::Kind::kValue)
              check_ref(s.inputs[j].id, m.values.size(), "value");
            else if (s.inputs[j].kind == StepInput::Kind::kWeight)
              check_ref(s.inputs[j].id, m.weights.size(), "weight");
          });
        if (!s.task.empty()) {
          bool found = false;
          for (const PackageTask& t : m.tasks) found = found || t.name == s.task;
          if (!found) throw std::invalid_argument("task '" + s.task + "' is not in 'tasks'");
        }
        if (!s.kernel.empty() && (s.kernel.find("..") != std::string::npos || s.kernel[0] == '/'))
          throw std::invalid_argument("'kernel' must be a path inside the package, not '" +
                                      s.kernel + "'");
      });
  });
  return m;
}

Manifest read_manifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  const bj::value value = json::read_file(path);
  try {
    return Manifest::from_json(value);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

}  // namespace webtune::deploy
