/// \file executor.cpp
/// The reference executor's driver (executor.hpp): checks the inputs, finds a kernel per node
/// (graph/kernels/), runs the nodes in order, checks each output's shape against the graph's,
/// and frees intermediates after their last reader.

#include "graph/executor.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "graph/operators.hpp"
#include "kernels/kernels.hpp"

namespace webtune::graph {

int64_t Value::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Value Value::floats(std::vector<int64_t> shape, std::vector<float> data) {
  Value v;
  v.shape = std::move(shape);
  v.data = std::move(data);
  return v;
}

Value Value::constant(const Tensor& t) {
  Value v;
  v.shape = t.shape;
  v.type = t.type;
  if (t.float_data)
    v.data = *t.float_data;
  else if (t.int_data)
    v.ints = *t.int_data;
  return v;
}

Value Value::int64s(std::vector<int64_t> shape, std::vector<int64_t> ints) {
  Value v;
  v.shape = std::move(shape);
  v.ints = std::move(ints);
  v.type = DataType::kInt64;
  return v;
}

namespace kernels {

void fail(const std::string& message) {
  throw GraphError(message);
}

EpilogueInputs epilogue_inputs(const KernelContext& ctx, const Epilogue& epilogue, int64_t channels,
                               const std::vector<int64_t>& out_shape,
                               const std::string& channels_note) {
  EpilogueInputs bound;
  if (epilogue.bias) {
    const Value& b = ctx.float_input(2, "bias");
    if (b.shape != std::vector<int64_t>{channels})
      fail("bias has shape " + shape_text(b.shape) + ", expected [" + std::to_string(channels) +
           "]" + channels_note);
    bound.bias = b.data.data();
  }
  if (epilogue.residual != Residual::kNone) {
    const Value& r = ctx.float_input(epilogue.bias ? 3 : 2, "residual");
    if (r.shape != out_shape)
      fail("residual has shape " + shape_text(r.shape) + ", expected the output's " +
           shape_text(out_shape));
    bound.residual = r.data.data();
  }
  return bound;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) n *= shape[i];
  return n;
}

void next_index(std::vector<int64_t>& index, const std::vector<int64_t>& shape) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < shape[d]) return;
    index[d] = 0;
  }
}

int64_t normalize_axis(int64_t axis, size_t rank, const char* what, int64_t extra) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r + extra)
    fail(std::string(what) + " " + std::to_string(axis) + " is outside [" + std::to_string(-r) +
         ", " + std::to_string(r + extra - 1) + "] for a rank-" + std::to_string(r) + " input");
  return axis < 0 ? axis + r : axis;
}

std::vector<int64_t> int_list(const Value& v, const char* what) {
  if (v.is_float() || v.shape.size() > 1)
    fail(std::string(what) + " must be an integer tensor of rank 0 or 1, not " +
         std::string(data_type_name(v.type)) + " " + shape_text(v.shape));
  return v.ints;
}

int64_t wrap_int(int64_t v, DataType type) {
  if (type == DataType::kInt32) return static_cast<int32_t>(v);  // modular (C++20)
  if (type == DataType::kBool) return v != 0;
  return v;
}

double scalar_of(const Value& v, const char* what) {
  if (v.elements() != 1)
    fail(std::string(what) + " must hold one value, not " + shape_text(v.shape));
  return v.is_float() ? static_cast<double>(v.data.at(0)) : static_cast<double>(v.ints.at(0));
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

const Value& KernelContext::input(size_t i, const char* what) const {
  if (i >= inputs.size() || inputs[i] == nullptr)
    fail(std::string("needs input ") + std::to_string(i) + " (" + what + ")");
  return *inputs[i];
}

const Value& KernelContext::float_input(size_t i, const char* what) const {
  const Value& v = input(i, what);
  if (!v.is_float())
    fail(std::string("input ") + std::to_string(i) + " (" + what + ", '" + node.inputs[i] +
         "') is " + std::string(data_type_name(v.type)) + "; this operator runs on float32");
  return v;
}

}  // namespace kernels

namespace {

bool is_int_type(DataType type) {
  return type != DataType::kFloat32;
}

/// Checks that `v` is a well-formed value of `t`'s shape and element kind; `what` names it.
void check_value(const Value& v, const Tensor& t, const std::string& what) {
  if (v.shape != t.shape)
    throw GraphError(what + " has shape " + kernels::shape_text(v.shape) + " but the graph says " +
                     kernels::shape_text(t.shape));
  if (is_int_type(v.type) != is_int_type(t.type))
    throw GraphError(what + " is " + std::string(data_type_name(v.type)) + " but the graph says " +
                     std::string(data_type_name(t.type)));
  const size_t size = v.is_float() ? v.data.size() : v.ints.size();
  if (static_cast<int64_t>(size) != v.elements())
    throw GraphError(what + " holds " + std::to_string(size) + " values but its shape " +
                     kernels::shape_text(v.shape) + " has " + std::to_string(v.elements()));
}

}  // namespace

std::vector<Value> run_node(const Node& node, size_t index, const std::vector<const Value*>& inputs,
                            const std::vector<DataType>& output_types, int64_t opset) {
  const OperatorInfo* info = find_operator(node.op_type);
  if (info == nullptr)
    throw GraphError(node.describe(index) + ": operator '" + node.op_type +
                     "' is not supported by the reference executor (graph/operators.hpp)");
  kernels::KernelContext ctx{node, inputs, {}, output_types, opset};
  ctx.outputs.resize(node.outputs.size());
  ctx.output_types.resize(node.outputs.size(), DataType::kFloat32);
  try {
    info->reference(ctx);
  } catch (const std::exception& e) {
    // GraphError from kernels, std::invalid_argument from Node::get_* (wrong attribute kind).
    throw GraphError(node.describe(index) + ": " + e.what());
  }
  return std::move(ctx.outputs);
}

bool has_kernel(const std::string& op_type) {
  return find_operator(op_type) != nullptr;
}

std::vector<std::string> executable_operators() {
  return supported_operators();  // the table is sorted
}

ValueMap execute(const Graph& graph, const ValueMap& inputs, const ExecuteOptions& options) {
  graph.validate();
  // Refuse unsupported operators before running anything (a model's first Conv may take a while).
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (find_operator(graph.nodes[i].op_type) == nullptr)
      throw GraphError(graph.nodes[i].describe(i) + ": operator '" + graph.nodes[i].op_type +
                       "' is not supported by the reference executor (graph/operators.hpp)");

  std::map<std::string, Value> env;
  for (const std::string& name : graph.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw GraphError("graph input '" + name + "' is missing");
    check_value(it->second, graph.tensor(name), "graph input '" + name + "'");
    env[name] = it->second;
  }
  for (const auto& [name, value] : inputs)
    if (std::find(graph.inputs.begin(), graph.inputs.end(), name) == graph.inputs.end())
      throw GraphError("'" + name + "' is not an input of the graph" +
                       (graph.has_tensor(name) && graph.tensor(name).is_constant()
                            ? " (it is a constant)"
                            : ""));

  // Last reader of every tensor, so intermediates can be dropped once read for the last time.
  std::map<std::string, size_t> last_use;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (const std::string& in : graph.nodes[i].inputs) last_use[in] = i;
  const std::set<std::string> outputs(graph.outputs.begin(), graph.outputs.end());

  // Constants are turned into Values when first read and kept (they may be read again).
  auto lookup = [&](const std::string& name) -> const Value* {
    auto it = env.find(name);
    if (it != env.end()) return &it->second;
    const Tensor& t = graph.tensor(name);
    if (!t.is_constant()) return nullptr;
    return &env.emplace(name, Value::constant(t)).first->second;
  };

  ValueMap result;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    std::vector<const Value*> args;
    for (const std::string& in : node.inputs) {
      if (in.empty()) {
        args.push_back(nullptr);
        continue;
      }
      const Value* v = lookup(in);
      if (!v) throw GraphError(node.describe(i) + ": input '" + in + "' has no value");
      args.push_back(v);
    }
    std::vector<DataType> types;
    for (const std::string& out : node.outputs)
      types.push_back(out.empty() ? DataType::kFloat32 : graph.tensor(out).type);
    std::vector<Value> outs = run_node(node, i, args, types, options.opset);
    for (size_t o = 0; o < node.outputs.size(); ++o)
      if (!node.outputs[o].empty()) {
        try {
          check_value(outs[o], graph.tensor(node.outputs[o]),
                      "output " + std::to_string(o) + " ('" + node.outputs[o] + "')");
        } catch (const GraphError& e) {
          throw GraphError(node.describe(i) + ": " + e.what());
        }
      }
    for (size_t o = 0; o < node.outputs.size(); ++o)
      if (!node.outputs[o].empty()) env[node.outputs[o]] = std::move(outs[o]);
    if (options.keep_intermediates)
      for (const std::string& out : node.outputs)
        if (!out.empty()) result[out] = env.at(out);
    // Drop what no later node reads (graph outputs stay; a constant would be made again).
    for (const std::string& in : node.inputs)
      if (!in.empty() && last_use[in] == i && !outputs.count(in)) env.erase(in);
  }
  for (const std::string& name : graph.outputs) {
    const Value* v = lookup(name);
    if (!v) throw GraphError("graph output '" + name + "' has no value");
    result[name] = *v;
  }
  return result;
}

}  // namespace webtune::graph
