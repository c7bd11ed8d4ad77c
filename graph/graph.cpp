/// \file graph.cpp
/// The graph IR's accessors, its invariant check and its topological sort.

#include "graph/graph.hpp"

#include <deque>
#include <set>

namespace webtune::graph {

std::string_view data_type_name(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kInt64:
      return "int64";
    case DataType::kInt32:
      return "int32";
    case DataType::kBool:
      return "bool";
  }
  return "?";
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

template <typename T>
T get_attribute(const Node& node, const std::string& key, T fallback, const char* kind) {
  auto it = node.attributes.find(key);
  if (it == node.attributes.end()) return fallback;
  if (const T* value = std::get_if<T>(&it->second)) return *value;
  throw std::invalid_argument(node.op_type + " '" + node.name + "': attribute '" + key +
                              "' is not " + kind);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

int64_t Node::get_int(const std::string& key, int64_t fallback) const {
  return get_attribute<int64_t>(*this, key, fallback, "an int");
}
float Node::get_float(const std::string& key, float fallback) const {
  return get_attribute<float>(*this, key, fallback, "a float");
}
std::string Node::get_string(const std::string& key, const std::string& fallback) const {
  return get_attribute<std::string>(*this, key, fallback, "a string");
}
std::vector<int64_t> Node::get_ints(const std::string& key, std::vector<int64_t> fallback) const {
  return get_attribute<std::vector<int64_t>>(*this, key, std::move(fallback), "a list of ints");
}
std::vector<float> Node::get_floats(const std::string& key, std::vector<float> fallback) const {
  return get_attribute<std::vector<float>>(*this, key, std::move(fallback), "a list of floats");
}

std::string Node::describe(size_t index) const {
  return op_type + (name.empty() ? " #" + std::to_string(index) : " '" + name + "'");
}

const Tensor& Graph::tensor(const std::string& tensor_name) const {
  auto it = tensors.find(tensor_name);
  if (it == tensors.end()) throw GraphError("no tensor named '" + tensor_name + "'");
  return it->second;
}

Tensor& Graph::tensor(const std::string& tensor_name) {
  auto it = tensors.find(tensor_name);
  if (it == tensors.end()) throw GraphError("no tensor named '" + tensor_name + "'");
  return it->second;
}

void Graph::validate() const {
  std::set<std::string> available;
  for (const auto& [tensor_name, t] : tensors) {
    if (!t.shape_known)
      throw GraphError("tensor '" + tensor_name + "' has a shape that is not known");
    for (int64_t d : t.shape)
      if (d < 0)
        throw GraphError("tensor '" + tensor_name + "' has an unknown or negative dimension " +
                         shape_text(t.shape));
    if (t.is_constant()) {
      const size_t size = t.float_data ? t.float_data->size() : t.int_data->size();
      if (static_cast<int64_t>(size) != t.elements())
        throw GraphError("constant '" + tensor_name + "' holds " + std::to_string(size) +
                         " values but its shape " + shape_text(t.shape) + " has " +
                         std::to_string(t.elements()));
      available.insert(tensor_name);
    }
  }
  for (const std::string& input : inputs) {
    if (!has_tensor(input)) throw GraphError("graph input '" + input + "' has no tensor");
    available.insert(input);
  }
  std::set<std::string> produced;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    for (const std::string& input : node.inputs) {
      if (input.empty()) continue;
      if (!available.count(input))
        throw GraphError(node.describe(i) + " reads '" + input +
                         "', which is neither a graph input, a constant nor the output of an "
                         "earlier node (unknown tensor, or a cycle)");
    }
    for (const std::string& output : node.outputs) {
      if (output.empty()) continue;
      if (!has_tensor(output))
        throw GraphError(node.describe(i) + " writes '" + output + "', which has no tensor");
      if (available.count(output) || !produced.insert(output).second)
        throw GraphError(node.describe(i) + " writes '" + output +
                         "', which is already a graph input, a constant or another node's "
                         "output");
      available.insert(output);
    }
  }
  for (const std::string& output : outputs)
    if (!available.count(output))
      throw GraphError("graph output '" + output + "' is not produced by any node");
}

void Graph::sort_topologically() {
  // Which node writes each tensor; inputs and constants have none.
  std::map<std::string, size_t> writer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const std::string& output : nodes[i].outputs)
      if (!output.empty()) writer[output] = i;
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> readers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> sources;
    for (const std::string& input : nodes[i].inputs) {
      auto it = writer.find(input);
      if (it != writer.end()) sources.insert(it->second);
    }
    pending[i] = static_cast<int>(sources.size());
    for (size_t s : sources) readers[s].push_back(i);
  }
  // Ready nodes in their original order, so that an already sorted graph stays as it is.
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t r : readers[i])
      if (--pending[r] == 0) ready.insert(r);
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (pending[i] > 0) throw GraphError("the graph has a cycle through " + nodes[i].describe(i));
  }
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  for (size_t i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
}

std::vector<size_t> Graph::consumers(const std::string& tensor_name) const {
  std::vector<size_t> result;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const std::string& input : nodes[i].inputs)
      if (input == tensor_name) {
        result.push_back(i);
        break;
      }
  return result;
}

std::optional<size_t> Graph::producer(const std::string& tensor_name) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const std::string& output : nodes[i].outputs)
      if (output == tensor_name) return i;
  return std::nullopt;
}

std::map<std::string, int> Graph::op_counts() const {
  std::map<std::string, int> counts;
  for (const Node& node : nodes) ++counts[node.op_type];
  return counts;
}

}  // namespace webtune::graph
