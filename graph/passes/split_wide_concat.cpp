/// \file split_wide_concat.cpp
/// Lowering for model packages (passes.hpp): a GPU op kernel binds each input of a Concat, and
/// devices bound how many (WebGPU's default 8 storage buffers per stage, output included;
/// OpenGL ES 3.1 guarantees 4 compute storage blocks, desktop drivers and llvmpipe 16; 16
/// texture units for fragment kernels). DenseNet's Concats take up to 49 inputs. A Concat of
/// more than `max_inputs` inputs becomes a tree: consecutive groups of at most `max_inputs`
/// inputs are concatenated along the same axis into new values, and those (regrouped while
/// more than `max_inputs`) into the original output. Each level copies the output once more;
/// the values are the same, element for element.

#include <string>

#include "graph/passes.hpp"

namespace webtune::graph {

int split_wide_concat(Graph& graph, size_t max_inputs) {
  if (max_inputs < 2) throw std::invalid_argument("split_wide_concat: max_inputs must be >= 2");
  int rewritten = 0;
  std::vector<Node> nodes;
  nodes.reserve(graph.nodes.size());
  for (Node& node : graph.nodes) {
    bool candidate = node.op_type == "Concat" && node.inputs.size() > max_inputs &&
                     node.outputs.size() == 1 && node.has("axis");
    int64_t axis = 0;
    for (const std::string& in : node.inputs)
      candidate = candidate && !in.empty() && graph.has_tensor(in);
    if (candidate) {
      try {
        axis = node.get_int("axis", 0);
      } catch (const std::invalid_argument&) {
        candidate = false;
      }
    }
    if (candidate) {
      const auto rank = static_cast<int64_t>(graph.tensor(node.inputs[0]).shape.size());
      if (axis < 0) axis += rank;
      candidate = axis >= 0 && axis < rank;
      for (const std::string& in : node.inputs)
        candidate = candidate && graph.tensor(in).shape.size() == static_cast<size_t>(rank);
    }
    if (!candidate) {
      nodes.push_back(std::move(node));
      continue;
    }
    std::vector<std::string> level = node.inputs;
    const std::string base = node.name.empty() ? node.outputs[0] : node.name;
    int part = 0;
    while (level.size() > max_inputs) {
      std::vector<std::string> next;
      for (size_t begin = 0; begin < level.size(); begin += max_inputs) {
        const size_t end = std::min(level.size(), begin + max_inputs);
        if (end - begin == 1) {
          next.push_back(level[begin]);
          continue;
        }
        const std::string name = base + "/part" + std::to_string(part++);
        Tensor& t = graph.tensors[name];
        t = graph.tensor(level[begin]);  // type and shape, then the axis's sum
        t.name = name;
        t.float_data.reset();
        t.int_data.reset();
        int64_t size = 0;
        for (size_t i = begin; i < end; ++i)
          size += graph.tensor(level[i]).shape[static_cast<size_t>(axis)];
        t.shape[static_cast<size_t>(axis)] = size;
        Node group;
        group.name = name;
        group.op_type = "Concat";
        group.attributes["axis"] = axis;
        group.inputs.assign(level.begin() + static_cast<std::ptrdiff_t>(begin),
                            level.begin() + static_cast<std::ptrdiff_t>(end));
        group.outputs = {name};
        nodes.push_back(std::move(group));
        next.push_back(name);
      }
      level = std::move(next);
    }
    node.inputs = level;
    nodes.push_back(std::move(node));
    ++rewritten;
  }
  graph.nodes = std::move(nodes);
  return rewritten;
}

}  // namespace webtune::graph
