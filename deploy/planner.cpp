/// \file planner.cpp
/// The build planner (planner.hpp): tasks' kernels, the steps with their relayouts, the weights
/// and the memory pool of a model package.
#include "deploy/planner.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "codegen/glsl_frag_emitter.hpp"
#include "codegen/json_util.hpp"
#include "deploy/glue_kernels.hpp"
#include "deploy/memory_plan.hpp"
#include "deploy/record_selection.hpp"
#include "deploy/wasm_memory.hpp"
#include "deploy/weights.hpp"
#include "graph/operators.hpp"
#include "graph/passes.hpp"
#include "graph/task_extraction.hpp"
#include "tuner/tune_target.hpp"

namespace webtune::deploy {

namespace bj = boost::json;

namespace {

const std::vector<std::string>& build_targets() {
  static const std::vector<std::string> names = {"webgl2", "webgpu", "wasm", "gles-compute",
                                                 "gles-frag"};
  return names;
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + items[i];
  return text;
}

bj::value attribute_json(const graph::Attribute& a) {
  if (const auto* i = std::get_if<int64_t>(&a)) return *i;
  if (const auto* f = std::get_if<float>(&a)) return static_cast<double>(*f);
  if (const auto* s = std::get_if<std::string>(&a)) return bj::value(*s);
  if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) return json::to_array(*is);
  bj::array floats;
  for (float f : std::get<std::vector<float>>(a)) floats.push_back(static_cast<double>(f));
  return floats;
}

/// The storage bytes a value needs, as slots (memory_plan.hpp's needs).
std::vector<PackageSlot> slot_needs(const Storage& s, const std::vector<int64_t>& shape) {
  std::vector<PackageSlot> needs;
  PackageSlot slot;
  switch (s.kind) {
    case Storage::Kind::kBuffer:
    case Storage::Kind::kArray:
      slot.kind =
          s.kind == Storage::Kind::kBuffer ? PackageSlot::Kind::kBuffer : PackageSlot::Kind::kArray;
      slot.floats = std::max<int64_t>(shape_elements(shape), 1);
      needs.push_back(slot);
      break;
    case Storage::Kind::kTexture:
      slot.kind = PackageSlot::Kind::kTexture;
      slot.width = s.texture.width;
      slot.height = s.texture.height;
      slot.channels = s.texture.channels();
      needs.push_back(slot);
      break;
    case Storage::Kind::kTargets:
      slot.kind = PackageSlot::Kind::kTexture;
      slot.width = s.targets.width;
      slot.height = s.targets.height;
      slot.channels = s.targets.channels;
      if (s.targets.quad_layers) {  // one array texture, a layer per render target
        slot.layers = s.targets.rows_per_item;
        needs.push_back(slot);
        break;
      }
      needs.assign(static_cast<size_t>(s.targets.rows_per_item), slot);
      break;
    case Storage::Kind::kAlias:
      break;
  }
  return needs;
}

/// One value while planning: the manifest's value plus whether its storage is decided (a graph
/// input's waits for its first reader on frag targets).
struct PlanValue {
  std::string name;
  std::vector<int64_t> shape;
  Storage storage;
  bool decided = true;
};

class Planner {
 public:
  Planner(const graph::Graph& graph, const PlanOptions& options)
      : lowered_(graph), graph_(lowered_), options_(options) {
    const auto& names = build_targets();
    if (std::find(names.begin(), names.end(), options.target) == names.end())
      throw std::invalid_argument("unknown target '" + options.target +
                                  "' (targets: " + build_target_names() + ")");
    target_ = tune_target_from_name(options.target);
    frag_ = target_.kernel == Target::kGlesFrag;
    lower();
    device_key_ = options.device_key;
    if (device_key_.empty()) {
      device_key_ = default_device_key(options.records, target_);
      if (!device_key_.empty()) {
        out_.notes.push_back("device key: " + device_key_ +
                             " (none was given: the records' device of family " + target_.key +
                             " with the most tuning jobs, and its limits)");
      }
    }
    limits_ = stored_limits(options.records, device_key_);
  }

  /// Most inputs a GPU op kernel's Concat binds: 4 textures on gles-frag (16 texture units,
  /// an input read in place from render targets may take up to 4), 7 storage buffers on
  /// webgpu (8 per stage with the output) and gles-compute (the same, below llvmpipe's and
  /// desktop drivers' 16). wasm runs Concat in JavaScript: no bound.
  size_t max_concat_inputs() const {
    if (target_.kernel == Target::kGlesFrag) return 4;
    if (target_.kernel == Target::kWasm) return SIZE_MAX;
    return 7;
  }

  void lower() {
    const int splits = graph::split_to_slices(lowered_);
    const size_t most = max_concat_inputs();
    const int concats = most == SIZE_MAX ? 0 : graph::split_wide_concat(lowered_, most);
    if (splits > 0)
      out_.notes.push_back(std::to_string(splits) + " Split node(s) run as one Slice per output");
    if (concats > 0)
      out_.notes.push_back(std::to_string(concats) + " Concat node(s) of more than " +
                           std::to_string(most) + " inputs run as trees of Concats (" +
                           options_.target + " binds at most " + std::to_string(most) +
                           " inputs per kernel)");
  }

  PlannedPackage run() {
    Manifest& m = out_.manifest;
    m.model = options_.model;
    m.target = options_.target;
    m.artifact_target = target_.kernel;
    m.device_key = device_key_;
    if (options_.records == nullptr)
      out_.notes.push_back("no records database: every task takes its template's default config");
    choose_tasks();

    for (const std::string& input : graph_.inputs) {
      const graph::Tensor& t = graph_.tensor(input);
      if (t.type != graph::DataType::kFloat32)
        throw std::invalid_argument("graph input '" + input + "' is " +
                                    std::string(graph::data_type_name(t.type)) +
                                    "; packages take float32 inputs");
      const int v = new_value(input, t.shape, plain_storage(t.shape));
      values_[v].decided = !frag_;  // frag: stored as its first reader wants it
      tensor_value_[input] = v;
      m.inputs.push_back({input, t.shape, v});
      PackageStep s;
      s.kind = PackageStep::Kind::kUpload;
      s.value = v;
      m.steps.push_back(s);
    }
    for (size_t i = 0; i < graph_.nodes.size(); ++i) plan_node(graph_.nodes[i], i);
    for (const std::string& output : graph_.outputs) {
      const int v = value_of(output, "graph output");
      m.outputs.push_back({output, graph_.tensor(output).shape, v});
      PackageStep s;
      s.kind = PackageStep::Kind::kDownload;
      s.value = v;
      m.steps.push_back(s);
    }
    finish();
    return std::move(out_);
  }

 private:
  // ----- tasks -----

  void choose_tasks() {
    const graph::Extraction extraction = graph::extract_tasks(graph_);
    for (const graph::ExtractedTask& t : extraction.tasks) {
      TaskChoice choice;
      try {
        choice = choose_config(options_.records, t.workload, target_, device_key_);
      } catch (const std::exception& e) {
        // No template of this target for the workload: the nodes run as op kernels, if any.
        const std::string why = "task " + t.workload.name + " (" + t.workload.key() +
                                ") has no kernel on " + options_.target + ": " + e.what();
        out_.notes.push_back(why + "; its nodes run as op steps");
        for (const std::string& node : t.nodes) failed_task_of_node_[node] = why;
        continue;
      }
      // Scratch buffers (gles-compute's k_groups) exist only in the native runner; no other
      // template asks for them, and a web runtime would refuse the kernel at load.
      if ((choice.artifact.scratch_floats > 0 || choice.artifact.scratch_counters > 0) &&
          target_.kernel != Target::kGlesCompute)
        throw std::invalid_argument("task " + t.workload.name + ": its " +
                                    std::string(target_name(target_.kernel)) +
                                    " kernel asks for scratch buffers, which only gles-compute "
                                    "packages provide");
      PackageTask task;
      task.name = t.workload.name;
      task.workload = t.workload;
      task.nodes = t.nodes;
      task.source = choice.source;
      task.record_device_key = choice.device_key;
      task.record_id = choice.record_id;
      task.config = choice.entity.to_json();
      task.cost_ms = choice.cost_ms;
      const int index = static_cast<int>(out_.manifest.tasks.size());
      for (const std::string& node : t.nodes) task_of_node_[node] = index;
      out_.manifest.tasks.push_back(std::move(task));
      out_.task_reports.push_back({choice.entity.to_string(), choice.notes});
      task_artifacts_.push_back(std::move(choice.artifact));
      task_workloads_.push_back(t.workload);
      task_entities_.push_back(choice.entity);
    }
  }

  // ----- values -----

  Storage plain_storage(const std::vector<int64_t>& shape) const {
    Storage s;
    if (frag_) {
      s.kind = Storage::Kind::kTexture;
      s.texture = plain_texture_layout(shape, limits_);
    } else {
      s.kind = target_.kernel == Target::kWasm ? Storage::Kind::kArray : Storage::Kind::kBuffer;
    }
    return s;
  }

  int new_value(const std::string& name, const std::vector<int64_t>& shape, Storage storage) {
    values_.push_back({name, shape, std::move(storage), true});
    return static_cast<int>(values_.size()) - 1;
  }

  int root(int v) const {
    while (values_[v].storage.kind == Storage::Kind::kAlias) v = values_[v].storage.alias_of;
    return v;
  }

  int value_of(const std::string& tensor, const std::string& what) const {
    const auto it = tensor_value_.find(tensor);
    if (it == tensor_value_.end())
      throw std::invalid_argument(what + " '" + tensor + "' is no value a step writes");
    return it->second;
  }

  /// Value `v` as a kernel input that reads `need` (frag targets): `v` itself when its storage
  /// places every element as `need` does, else a relayout of it (made once per layout).
  int bind(int v, const TensorLayout& need, const std::string& node) {
    const int r = root(v);
    PlanValue& rv = values_[r];
    if (!rv.decided) {
      // A graph input: stored as this first reader wants it (aliases of it: plain).
      rv.storage.kind = Storage::Kind::kTexture;
      rv.storage.texture = r == v ? need : plain_texture_layout(rv.shape, limits_);
      rv.decided = true;
    }
    Storage from = rv.storage;
    // Alias roots are plain textures (plan_alias makes them so), so a reshaped view is the
    // same texture seen with the alias's shape.
    if (r != v) from.texture.shape = values_[v].shape;
    if (same_placement(from, need)) return v;
    const std::string key = std::to_string(r) + "|" + bj::serialize(need.to_json());
    if (const auto it = relayout_of_.find(key); it != relayout_of_.end()) return it->second;
    KernelArtifact artifact = relayout_kernel(values_[v].shape, from, need, limits_);
    Storage to;
    to.kind = Storage::Kind::kTexture;
    to.texture = need;
    const int out = new_value(values_[v].name + "@relayout" + std::to_string(++relayouts_),
                              values_[v].shape, to);
    PackageStep s;
    s.kind = PackageStep::Kind::kKernel;
    s.role = PackageStep::Role::kRelayout;
    s.kernel = kernel_file(add_kernel(artifact));
    s.node = node;
    s.inputs = {StepInput::value(v)};
    s.output = out;
    out_.manifest.steps.push_back(std::move(s));
    relayout_of_.emplace(key, out);
    return out;
  }

  int add_kernel(const KernelArtifact& artifact) {
    const std::string text = bj::serialize(artifact.to_json());
    const auto [it, added] = kernel_of_.emplace(text, out_.kernels.size());
    if (added) out_.kernels.push_back(artifact);
    return static_cast<int>(it->second);
  }

  // ----- nodes -----

  static std::string node_name(const graph::Node& node) {
    return node.name.empty() && !node.outputs.empty() ? node.outputs[0] : node.name;
  }

  [[noreturn]] void unsupported(const graph::Node& node, size_t index,
                                const std::string& why) const {
    std::vector<std::string> runs;
    if (target_.kernel == Target::kWasm) {
      runs = wasm_js_operators();
    } else {
      for (const std::string& op : graph::supported_operators())
        if (has_op_kernel(target_.kernel, op)) runs.push_back(op);
    }
    std::vector<std::string> aliases = graph::operators_that_run(graph::kRunsAsAlias);
    // The refused operator is never listed as one the target runs: where it runs in other
    // cases (an alias of a computed value, say), the reason above says what stops it here.
    const auto drop = [&node](std::vector<std::string>& ops) {
      const auto it = std::find(ops.begin(), ops.end(), node.op_type);
      if (it == ops.end()) return false;
      ops.erase(it);
      return true;
    };
    const bool elsewhere = drop(runs) | drop(aliases);
    throw std::invalid_argument(
        node.describe(index) + " (op " + node.op_type + ") cannot be built for " + options_.target +
        ": " + why + ". Besides tuned tasks (Conv / Gemm / MatMul nodes a " + "workload fits) " +
        options_.target + " runs: " + join(runs) + "; and as aliases: " + join(aliases) +
        (elsewhere ? " (" + node.op_type + " only where the reason above does not hold)" : ""));
  }

  /// The one output of `node` (others must be unused, e.g. Dropout's mask).
  const std::string& single_output(const graph::Node& node, size_t index) const {
    if (node.outputs.empty() || node.outputs[0].empty())
      throw std::invalid_argument(node.describe(index) + " has no output");
    for (size_t i = 1; i < node.outputs.size(); ++i) {
      const std::string& extra = node.outputs[i];
      if (extra.empty()) continue;
      const bool output =
          std::find(graph_.outputs.begin(), graph_.outputs.end(), extra) != graph_.outputs.end();
      if (output || !graph_.consumers(extra).empty())
        throw std::invalid_argument(node.describe(index) + " (op " + node.op_type +
                                    "): its output '" + extra +
                                    "' is used; packages run one output per node");
    }
    const graph::Tensor& t = graph_.tensor(node.outputs[0]);
    if (t.type != graph::DataType::kFloat32)
      throw std::invalid_argument(node.describe(index) + " (op " + node.op_type + ") writes " +
                                  std::string(graph::data_type_name(t.type)) +
                                  "; packages run float32 values only");
    return node.outputs[0];
  }

  void plan_node(const graph::Node& node, size_t index) {
    const std::string name = node_name(node);
    if (is_alias_operator(node.op_type)) return plan_alias(node, index);
    if (const auto it = task_of_node_.find(name); it != task_of_node_.end())
      return plan_task(node, index, it->second);
    const auto failed = failed_task_of_node_.find(name);
    const std::string no_task =
        failed != failed_task_of_node_.end() ? failed->second : "no tuned task covers it";
    if (target_.kernel == Target::kWasm) {
      const auto& ops = wasm_js_operators();
      if (std::find(ops.begin(), ops.end(), node.op_type) == ops.end())
        unsupported(node, index,
                    no_task + ", and the wasm runtime's JavaScript runs no " + node.op_type);
      return plan_wasm_op(node, index);
    }
    if (!has_op_kernel(target_.kernel, node.op_type))
      unsupported(node, index,
                  no_task + ", and " + options_.target + " has no op kernel for " + node.op_type);
    plan_gpu_op(node, index);
  }

  void plan_alias(const graph::Node& node, size_t index) {
    if (node.inputs.empty() || node.inputs[0].empty())
      throw std::invalid_argument(node.describe(index) + " has no data input");
    const std::string& out_name = single_output(node, index);
    if (graph_.tensor(node.inputs[0]).is_constant())
      unsupported(node, index, "its data input '" + node.inputs[0] + "' is a constant");
    int v = value_of(node.inputs[0], "input");
    if (frag_) {
      // Aliases share row-major order, so their root must be a plain texture.
      v = bind(v, plain_texture_layout(values_[v].shape, limits_), node_name(node));
    }
    Storage alias;
    alias.kind = Storage::Kind::kAlias;
    alias.alias_of = root(v);
    const graph::Tensor& out = graph_.tensor(out_name);
    if (out.elements() != shape_elements(values_[v].shape))
      throw std::invalid_argument(node.describe(index) + ": output " + shape_text(out.shape) +
                                  " has another element count than its input " +
                                  shape_text(values_[v].shape));
    const int a = new_value(out_name, out.shape, alias);
    tensor_value_[out_name] = a;
    PackageStep s;
    s.kind = PackageStep::Kind::kAlias;
    s.value = a;
    out_.manifest.steps.push_back(s);
  }

  /// The weight that input `i` of `node`, the constant `tensor`, becomes for a kernel input of
  /// layout `layout`. For task kernels (`task`), input 1 of a Gemm with transB = 1 is
  /// transposed and input 2 (the bias) of a plain Gemm is C · beta broadcast to [N].
  int weight(const graph::Node& node, size_t index, size_t i, const graph::Tensor& tensor,
             const TensorLayout& layout, bool task) {
    if (!tensor.float_data)
      throw std::invalid_argument(node.describe(index) + ": input '" + tensor.name + "' is " +
                                  std::string(graph::data_type_name(tensor.type)) +
                                  "; a kernel reads float32 weights");
    std::vector<float> data = *tensor.float_data;
    std::string name = tensor.name, transform;
    const bool gemm = node.op_type == "Gemm" || node.op_type == "FusedGemm";
    const int64_t want = shape_elements(layout.shape);
    if (task && gemm && i == 1 && node.get_int("transB", 0) != 0) {
      if (tensor.shape.size() != 2)
        throw std::invalid_argument(node.describe(index) + ": B '" + tensor.name + "' is not 2-D");
      data = transpose_matrix(data, tensor.shape[0], tensor.shape[1]);
      name += ".T";
      transform = "|T";
    }
    if (task && node.op_type == "Gemm" && i == 2) {
      const float beta = node.get_float("beta", 1.0f);
      if (data.size() == 1 && want > 1) data.assign(static_cast<size_t>(want), data[0]);
      for (float& x : data) x *= beta;
      if (beta != 1.0f) {
        name += "*beta";
        transform = "|beta" + std::to_string(beta);
      }
    }
    if (static_cast<int64_t>(data.size()) != want)
      throw std::invalid_argument(node.describe(index) + ": constant '" + tensor.name + "' " +
                                  shape_text(tensor.shape) + " does not fit the kernel's input " +
                                  std::to_string(i) + " " + shape_text(layout.shape));
    if (frag_) {
      PackageWeight::Texture texture{layout.width, layout.height, layout.channels()};
      return weights_.add(tensor.name + transform + "@" + bj::serialize(layout.to_json()), name,
                          layout.pack(data), texture);
    }
    return weights_.add(tensor.name + transform, name, std::move(data));
  }

  /// Binds the inputs of a GPU or wasm kernel step: `inputs` (graph tensors) against the
  /// artifact's input layouts.
  void bind_inputs(PackageStep& s, const graph::Node& node, size_t index,
                   const std::vector<std::string>& inputs, const KernelArtifact& artifact,
                   bool task) {
    if (inputs.size() != artifact.inputs.size())
      throw std::invalid_argument(node.describe(index) + " has " + std::to_string(inputs.size()) +
                                  " inputs; its kernel binds " +
                                  std::to_string(artifact.inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const graph::Tensor& t = graph_.tensor(inputs[i]);
      if (t.is_constant()) {
        s.inputs.push_back(StepInput::weight(weight(node, index, i, t, artifact.inputs[i], task)));
        continue;
      }
      if (task && i == 1 && (node.op_type == "Gemm" || node.op_type == "FusedGemm") &&
          node.get_int("transB", 0) != 0)
        throw std::invalid_argument(node.describe(index) + ": B '" + t.name +
                                    "' is computed and transB = 1; a package transposes only "
                                    "constant weights");
      int v = value_of(inputs[i], "input");
      if (frag_) v = bind(v, artifact.inputs[i], node_name(node));
      s.inputs.push_back(StepInput::value(v));
    }
  }

  /// Frag targets: how task `task`'s kernel is wired when node `node` runs it
  /// (FragPackageOptions): its data from quad layers where the value it reads is stored so and
  /// the config can read them; its output as quad layers where its config can write them and a
  /// reader of the output (a tuned kernel's data input) would read them.
  FragPackageOptions quad_layer_wiring(const graph::Node& node, int task,
                                       const std::string& out_name) const {
    FragPackageOptions wiring;
    if (!frag_ || !options_.quad_layers) return wiring;
    const auto t = static_cast<size_t>(task);
    const Workload& w = task_workloads_[t];
    if (!node.inputs.empty() && !node.inputs[0].empty()) {
      const auto it = tensor_value_.find(node.inputs[0]);
      if (it != tensor_value_.end()) {
        const Storage& in = values_[static_cast<size_t>(root(it->second))].storage;
        if (root(it->second) == it->second && in.kind == Storage::Kind::kTargets &&
            in.targets.quad_layers && frag_can_read_quad_layers(w, task_entities_[t], in.targets))
          wiring.data_layers = in.targets;
      }
    }
    if (!frag_can_write_quad_layers(w, task_entities_[t])) return wiring;
    if (std::find(graph_.outputs.begin(), graph_.outputs.end(), out_name) != graph_.outputs.end())
      return wiring;
    OutputLayout written = task_artifacts_[t].output;
    written.quad_layers = true;
    for (size_t reader : graph_.consumers(out_name)) {
      const graph::Node& r = graph_.nodes[reader];
      const auto rt = task_of_node_.find(node_name(r));
      if (rt == task_of_node_.end() || r.inputs.empty() || r.inputs[0] != out_name) continue;
      const auto rtask = static_cast<size_t>(rt->second);
      if (frag_can_read_quad_layers(task_workloads_[rtask], task_entities_[rtask], written)) {
        wiring.quad_layers_out = true;
        break;
      }
    }
    return wiring;
  }

  void plan_task(const graph::Node& node, size_t index, int task) {
    const std::string& out_name = single_output(node, index);
    const FragPackageOptions wiring = quad_layer_wiring(node, task, out_name);
    KernelArtifact wired;
    if (wiring.quad_layers_out || wiring.data_layers)
      wired = emit_glsl_frag(task_workloads_[static_cast<size_t>(task)],
                             task_entities_[static_cast<size_t>(task)], wiring);
    const KernelArtifact& artifact = wiring.quad_layers_out || wiring.data_layers
                                         ? wired
                                         : task_artifacts_[static_cast<size_t>(task)];
    std::vector<std::string> inputs;
    for (const std::string& in : node.inputs)
      if (!in.empty()) inputs.push_back(in);
    PackageStep s;
    s.kind = PackageStep::Kind::kKernel;
    s.role = PackageStep::Role::kTask;
    s.node = node_name(node);
    s.task = out_.manifest.tasks[static_cast<size_t>(task)].name;
    bind_inputs(s, node, index, inputs, artifact, true);
    s.kernel = kernel_file(add_kernel(artifact));
    Storage storage = plain_storage(graph_.tensor(out_name).shape);
    if (frag_) {
      storage.kind = Storage::Kind::kTargets;
      storage.targets = artifact.output;
      if (artifact.output.feedback)
        throw std::logic_error("task " + s.task + " got a vertex-stage kernel");
    }
    s.output = new_value(out_name, graph_.tensor(out_name).shape, storage);
    tensor_value_[out_name] = s.output;
    out_.manifest.steps.push_back(std::move(s));
  }

  /// The layout in which a frag op kernel should write `tensor`: when its one reader is a
  /// tuned kernel that reads it as a value (and it is no graph output), that kernel's input
  /// layout, so no relayout goes between them; else nullopt (plain).
  std::optional<TensorLayout> consumer_layout(const std::string& tensor) const {
    if (std::find(graph_.outputs.begin(), graph_.outputs.end(), tensor) != graph_.outputs.end())
      return std::nullopt;
    const std::vector<size_t> readers = graph_.consumers(tensor);
    if (readers.size() != 1) return std::nullopt;
    const graph::Node& reader = graph_.nodes[readers[0]];
    const auto task = task_of_node_.find(node_name(reader));
    if (task == task_of_node_.end()) return std::nullopt;
    std::vector<std::string> inputs;
    for (const std::string& in : reader.inputs)
      if (!in.empty()) inputs.push_back(in);
    if (std::count(inputs.begin(), inputs.end(), tensor) != 1) return std::nullopt;
    const size_t j =
        static_cast<size_t>(std::find(inputs.begin(), inputs.end(), tensor) - inputs.begin());
    const KernelArtifact& artifact = task_artifacts_[static_cast<size_t>(task->second)];
    if (j >= artifact.inputs.size()) return std::nullopt;
    return artifact.inputs[j];
  }

  void plan_gpu_op(const graph::Node& node, size_t index) {
    const std::string& out_name = single_output(node, index);
    const std::vector<std::string> inputs = op_kernel_inputs(node);
    OpKernelOptions options{options_.opset, {}, std::nullopt};
    options.workgroup_reductions = options_.workgroup_reductions;
    if (frag_) {
      // Frag op kernels read their value inputs where they are (a tuned kernel's render targets,
      // a packed texture): no relayout to plain before them. Plain ones stay nullopt.
      for (const std::string& in : inputs) {
        std::optional<Storage> where;
        if (!graph_.tensor(in).is_constant()) {
          const int v = value_of(in, "input");
          const int r = root(v);
          const Storage& st = values_[r].storage;
          if (r == v && values_[r].decided &&
              !same_placement(st, plain_texture_layout(values_[r].shape, limits_)))
            where = st;
        }
        options.input_storage.push_back(std::move(where));
      }
      options.output_layout = consumer_layout(out_name);
    }
    KernelArtifact artifact;
    try {
      artifact = op_kernel(target_.kernel, graph_, node, limits_, options);
    } catch (const std::invalid_argument& e) {
      unsupported(node, index, e.what());
    }
    PackageStep s;
    s.kind = PackageStep::Kind::kKernel;
    s.role = PackageStep::Role::kOp;
    s.node = node_name(node);
    if (!frag_) {
      bind_inputs(s, node, index, inputs, artifact, false);
    } else {
      // artifact.inputs are in sampler order: one per texture, rows_per_item per render targets.
      size_t sampler = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const graph::Tensor& t = graph_.tensor(inputs[i]);
        const std::optional<Storage>& where = options.input_storage[i];
        const size_t samplers = where && where->kind == Storage::Kind::kTargets
                                    ? static_cast<size_t>(where->targets.rows_per_item)
                                    : 1;
        if (sampler + samplers > artifact.inputs.size())
          throw std::invalid_argument(node.describe(index) + ": its op kernel binds " +
                                      std::to_string(artifact.inputs.size()) +
                                      " textures, fewer than its inputs need");
        if (t.is_constant())
          s.inputs.push_back(
              StepInput::weight(weight(node, index, i, t, artifact.inputs[sampler], false)));
        else if (where)
          s.inputs.push_back(StepInput::value(value_of(inputs[i], "input")));
        else
          s.inputs.push_back(StepInput::value(
              bind(value_of(inputs[i], "input"), artifact.inputs[sampler], node_name(node))));
        sampler += samplers;
      }
    }
    s.kernel = kernel_file(add_kernel(artifact));
    const std::vector<int64_t>& shape = graph_.tensor(out_name).shape;
    Storage storage = plain_storage(shape);
    if (frag_ && options.output_layout) {
      storage.texture = *options.output_layout;  // written as its one reader reads it
    } else if (frag_) {
      Storage targets;
      targets.kind = Storage::Kind::kTargets;
      targets.targets = artifact.output;
      // An op kernel writes the plain layout; keep its output as the plain texture it is.
      if (!same_placement(targets, storage.texture)) storage = targets;
    }
    s.output = new_value(out_name, shape, storage);
    tensor_value_[out_name] = s.output;
    out_.manifest.steps.push_back(std::move(s));
  }

  void plan_wasm_op(const graph::Node& node, size_t index) {
    const std::string& out_name = single_output(node, index);
    PackageStep s;
    s.kind = PackageStep::Kind::kKernel;
    s.role = PackageStep::Role::kOp;
    s.node = node_name(node);
    PackageOp op;
    op.type = node.op_type;
    op.opset = options_.opset;
    for (const auto& [key, value] : node.attributes) op.attributes[key] = attribute_json(value);
    // A fused node's tail (codegen/epilogue.hpp's JSON), which runtime/ops.mjs applies.
    if (!node.epilogue.empty()) op.attributes["epilogue"] = node.epilogue.to_json();
    s.op = std::move(op);
    for (const std::string& in : node.inputs) {
      if (in.empty()) {
        s.inputs.push_back({StepInput::Kind::kNone, -1, {}});
        continue;
      }
      const graph::Tensor& t = graph_.tensor(in);
      if (t.int_data) {
        s.inputs.push_back({StepInput::Kind::kInts, -1, *t.int_data});
      } else if (t.float_data) {
        s.inputs.push_back(
            StepInput::weight(weights_.add("op:" + t.name, t.name, *t.float_data, std::nullopt,
                                           t.shape.empty() ? std::vector<int64_t>{1} : t.shape)));
      } else {
        s.inputs.push_back(StepInput::value(value_of(in, "input")));
      }
    }
    const std::vector<int64_t>& shape = graph_.tensor(out_name).shape;
    s.output = new_value(out_name, shape, plain_storage(shape));
    tensor_value_[out_name] = s.output;
    out_.manifest.steps.push_back(std::move(s));
  }

  // ----- memory, the manifest's lists -----

  void finish() {
    Manifest& m = out_.manifest;
    for (PlanValue& v : values_)
      if (!v.decided) {  // a graph input nothing reads
        v.storage = plain_storage(v.shape);
        v.decided = true;
      }
    // Liveness: written at `first`, read last at `last` (aliases count for their root).
    const int end = static_cast<int>(m.steps.size());
    std::vector<int> first(values_.size(), -1), last(values_.size(), -1);
    auto read = [&](int v, int step) {
      const int r = root(v);
      last[r] = std::max(last[r], step);
    };
    for (int i = 0; i < end; ++i) {
      const PackageStep& s = m.steps[i];
      switch (s.kind) {
        case PackageStep::Kind::kUpload:
          first[s.value] = i;
          break;
        case PackageStep::Kind::kKernel:
          for (const StepInput& in : s.inputs)
            if (in.kind == StepInput::Kind::kValue) read(in.id, i);
          first[s.output] = i;
          break;
        case PackageStep::Kind::kDownload:
          read(s.value, i);
          break;
        case PackageStep::Kind::kAlias:
          break;
      }
    }
    for (const PackageTensor& out : m.outputs) read(out.value, end);  // live to the end
    std::vector<ValueLifetime> lifetimes;
    std::vector<int> lifetime_value;
    for (size_t v = 0; v < values_.size(); ++v) {
      if (values_[v].storage.kind == Storage::Kind::kAlias) continue;
      ValueLifetime life;
      life.first = first[v];
      life.last = std::max(last[v], first[v]);
      life.needs = slot_needs(values_[v].storage, values_[v].shape);
      lifetimes.push_back(std::move(life));
      lifetime_value.push_back(static_cast<int>(v));
    }
    const MemoryPlan plan = plan_memory(lifetimes);
    for (size_t i = 0; i < lifetimes.size(); ++i)
      values_[lifetime_value[i]].storage.slots = plan.assigned[i];
    m.slots = plan.slots;
    out_.slot_bytes = plan.slot_bytes;
    out_.value_bytes = plan.value_bytes;

    for (size_t v = 0; v < values_.size(); ++v)
      m.values.push_back(
          {static_cast<int>(v), values_[v].name, values_[v].shape, values_[v].storage});
    m.weights = weights_.weights();
    out_.weights = weights_.data();
    m.layout_transforms = relayouts_;
    double total = 0;
    bool known = true;
    for (const PackageStep& s : m.steps) {
      if (s.kind != PackageStep::Kind::kKernel || s.role != PackageStep::Role::kTask) continue;
      for (const PackageTask& t : m.tasks)
        if (t.name == s.task) {
          if (t.cost_ms)
            total += *t.cost_ms;
          else
            known = false;
        }
    }
    if (known) m.estimated_ms = total;
    // wasm: one linear memory for every kernel, each rebuilt at its tensors' offsets.
    if (target_.kernel == Target::kWasm) place_wasm_memory(out_, limits_);
  }

  /// The caller's graph after the package lowering (graph/passes.hpp): Splits as Slices, wide
  /// Concats as trees the target's bindings allow.
  graph::Graph lowered_;
  const graph::Graph& graph_;
  const PlanOptions& options_;
  std::string device_key_;  ///< options_.device_key, or default_device_key() when that is empty
  TuneTarget target_;
  bool frag_ = false;
  DeviceLimits limits_;
  PlannedPackage out_;
  std::vector<KernelArtifact> task_artifacts_;              // per manifest task
  std::vector<Workload> task_workloads_;                    // per manifest task
  std::vector<ConfigEntity> task_entities_;                 // per manifest task
  std::map<std::string, int> task_of_node_;                 // node name → manifest task
  std::map<std::string, std::string> failed_task_of_node_;  // node → why its task has no kernel
  std::vector<PlanValue> values_;
  std::map<std::string, int> tensor_value_;  // graph tensor → value
  std::map<std::string, int> relayout_of_;   // "root|layout" → relayouted value
  std::map<std::string, size_t> kernel_of_;  // artifact JSON → kernel index
  WeightTable weights_;
  int relayouts_ = 0;
};

std::string bytes_text(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

std::string build_target_names() {
  return join(build_targets());
}

const std::vector<std::string>& wasm_js_operators() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> names;
    for (const graph::OperatorInfo& info : graph::operator_table())
      if ((info.runs & graph::kRunsInWasmJs) && !(info.runs & graph::kRunsAsAlias))
        names.emplace_back(info.name);
    return names;
  }();
  return ops;
}

bool is_alias_operator(const std::string& op_type) {
  const graph::OperatorInfo* info = graph::find_operator(op_type);
  return info != nullptr && (info->runs & graph::kRunsAsAlias) != 0;
}

std::string kernel_file(size_t index) {
  char text[32];
  std::snprintf(text, sizeof text, "kernels/%03zu.json", index);
  return text;
}

PlannedPackage plan_package(const graph::Graph& graph, const PlanOptions& options) {
  return Planner(graph, options).run();
}

std::string PlannedPackage::report() const {
  const Manifest& m = manifest;
  std::string r;
  char line[512];
  auto add = [&](const std::string& text) { r += text + "\n"; };
  add("webtune build: model " + m.model.name + " (" + m.model.file + ", sha256 " + m.model.sha256 +
      ")");
  add("target: " + m.target + " (" + std::string(target_name(m.artifact_target)) +
      " kernels); device key: " + (m.device_key.empty() ? "(none given)" : m.device_key));
  int counts[3] = {0, 0, 0};
  for (const PackageTask& t : m.tasks) ++counts[static_cast<int>(t.source)];
  std::snprintf(line, sizeof line,
                "\ntasks: %zu (%d from a record of the device key, %d from another device of "
                "its family, %d default)",
                m.tasks.size(), counts[0], counts[1], counts[2]);
  add(line);
  std::snprintf(line, sizeof line, "  %-20s %5s %-8s %8s %-24s %10s  %s", "task", "nodes", "source",
                "record", "record device", "cost_ms", "config");
  add(line);
  for (size_t i = 0; i < m.tasks.size(); ++i) {
    const PackageTask& t = m.tasks[i];
    const std::string record = t.record_id ? std::to_string(*t.record_id) : "-";
    char cost[32] = "-";
    if (t.cost_ms) std::snprintf(cost, sizeof cost, "%.4f", *t.cost_ms);
    std::snprintf(line, sizeof line, "  %-20s %5zu %-8s %8s %-24s %10s  %s", t.name.c_str(),
                  t.nodes.size(), std::string(task_source_name(t.source)).c_str(), record.c_str(),
                  t.record_device_key.empty() ? "-" : t.record_device_key.c_str(), cost,
                  i < task_reports.size() ? task_reports[i].config_text.c_str() : "");
    add(line);
    if (i < task_reports.size())
      for (const std::string& note : task_reports[i].notes) add("      note: " + note);
  }
  int uploads = 0, downloads = 0, aliases = 0, roles[3] = {0, 0, 0};
  for (const PackageStep& s : m.steps) {
    if (s.kind == PackageStep::Kind::kUpload) ++uploads;
    if (s.kind == PackageStep::Kind::kDownload) ++downloads;
    if (s.kind == PackageStep::Kind::kAlias) ++aliases;
    if (s.kind == PackageStep::Kind::kKernel) ++roles[static_cast<int>(s.role)];
  }
  std::snprintf(line, sizeof line,
                "\nsteps: %zu (%d upload, %d task, %d op, %d relayout, %d alias, %d download); "
                "%zu distinct kernels",
                m.steps.size(), uploads, roles[0], roles[2], roles[1], aliases, downloads,
                kernels.size());
  add(line);
  // What the relayouts move per run (their outputs' texels): they were never measured.
  int64_t relayout_bytes = 0;
  for (const PackageStep& s : m.steps)
    if (s.kind == PackageStep::Kind::kKernel && s.role == PackageStep::Role::kRelayout) {
      const TensorLayout& to = m.values[static_cast<size_t>(s.output)].storage.texture;
      relayout_bytes += to.width * to.height * to.channels() * int64_t{4};
    }
  add("layout transforms: " + std::to_string(m.layout_transforms) +
      (m.layout_transforms > 0 ? " (writing " + bytes_text(relayout_bytes) +
                                     " per run; not measured, not in estimated_ms)"
                               : ""));
  add("memory: " + bytes_text(slot_bytes) + " in " + std::to_string(m.slots.size()) +
      " slots (the " + std::to_string(m.values.size()) + " values take " + bytes_text(value_bytes) +
      " without reuse)");
  add("weights: " + std::to_string(m.weights.size()) + " (" +
      bytes_text(static_cast<int64_t>(weights.size() * sizeof(float))) + " in weights.bin)");
  if (m.wasm_memory) {
    add("wasm linear memory: " + bytes_text(m.wasm_memory->pages * 65536) + " (" +
        std::to_string(m.wasm_memory->pages) + " pages, " +
        (m.wasm_memory->shared ? "shared" : "not shared") +
        "): the slots, the weights kernels read, and " +
        bytes_text(m.wasm_memory->pages * 65536 - m.wasm_memory->scratch_offset) +
        " of scratch; no copies between steps");
  }
  if (m.estimated_ms) {
    std::snprintf(line, sizeof line,
                  "estimated_ms: %.4f (sum over task steps of their record's mean cost)",
                  *m.estimated_ms);
    add(line);
  } else {
    add("estimated_ms: null (a task has no recorded cost)");
  }
  if (!notes.empty()) {
    add("\nnotes:");
    for (const std::string& note : notes) add("  " + note);
  }
  return r;
}

}  // namespace webtune::deploy
