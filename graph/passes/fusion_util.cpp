/// \file fusion_util.cpp
/// The helpers the fusion passes and task extraction share (fusion_util.hpp).

#include "passes/fusion_util.hpp"

#include <algorithm>

namespace webtune::graph::detail {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

const std::vector<int64_t>* shape_of(const Graph& graph, const std::string& name) {
  if (name.empty() || !graph.has_tensor(name)) return nullptr;
  return &graph.tensor(name).shape;
}

bool has_rank(const Graph& graph, const std::string& name, size_t rank) {
  const std::vector<int64_t>* shape = shape_of(graph, name);
  return shape != nullptr && shape->size() == rank;
}

std::optional<Node> refuse(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return std::nullopt;
}

}  // namespace

UseIndex::UseIndex(const Graph& graph) {
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    std::set<std::string> seen;
    for (const std::string& input : node.inputs)
      if (!input.empty() && seen.insert(input).second) readers[input].push_back(i);
    for (const std::string& output : node.outputs)
      if (!output.empty()) writer[output] = i;
  }
  graph_outputs.insert(graph.outputs.begin(), graph.outputs.end());
}

size_t UseIndex::reader_count(const std::string& tensor) const {
  auto it = readers.find(tensor);
  return it == readers.end() ? 0 : it->second.size();
}

std::optional<size_t> UseIndex::producer(const std::string& tensor) const {
  auto it = writer.find(tensor);
  if (it == writer.end()) return std::nullopt;
  return it->second;
}

bool UseIndex::fusable(const std::string& tensor) const {
  return reader_count(tensor) == 1 && !graph_outputs.count(tensor);
}

Sweep::Sweep(Graph& g)
    : graph(g), uses(g), dead_(g.nodes.size(), false), touched_(g.nodes.size(), false) {}

void Sweep::absorb(size_t main, size_t tail, Node fused) {
  Node& old_main = graph.nodes[main];
  Node& old_tail = graph.nodes[tail];
  orphans_.insert(old_main.inputs.begin(), old_main.inputs.end());
  orphans_.insert(old_main.outputs.begin(), old_main.outputs.end());
  orphans_.insert(old_tail.inputs.begin(), old_tail.inputs.end());
  fused.outputs = {old_tail.outputs.at(0)};
  old_tail = std::move(fused);
  dead_[main] = true;
  touched_[tail] = true;
}

void Sweep::replace(size_t index, Node node) {
  Node& old = graph.nodes[index];
  orphans_.insert(old.inputs.begin(), old.inputs.end());
  old = std::move(node);
  touched_[index] = true;
}

void Sweep::remove(size_t index) {
  const Node& old = graph.nodes[index];
  orphans_.insert(old.inputs.begin(), old.inputs.end());
  orphans_.insert(old.outputs.begin(), old.outputs.end());
  dead_[index] = true;
}

void Sweep::orphan(const std::string& tensor) {
  orphans_.insert(tensor);
}

void Sweep::finish() {
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (!dead_[i]) kept.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(kept);
  if (orphans_.empty()) return;
  std::set<std::string> referenced(graph.inputs.begin(), graph.inputs.end());
  referenced.insert(graph.outputs.begin(), graph.outputs.end());
  for (const Node& node : graph.nodes) {
    referenced.insert(node.inputs.begin(), node.inputs.end());
    referenced.insert(node.outputs.begin(), node.outputs.end());
  }
  for (const std::string& name : orphans_)
    if (!name.empty() && !referenced.count(name)) graph.tensors.erase(name);
  orphans_.clear();
}

bool is_fused_op(const Node& node) {
  return node.op_type == "FusedConv" || node.op_type == "FusedGemm" ||
         node.op_type == "FusedMatMul";
}

bool is_main_op(const Node& node) {
  return is_fused_op(node) || node.op_type == "Conv" || node.op_type == "Gemm" ||
         node.op_type == "MatMul";
}

std::optional<Node> fused_form(Graph& graph, const Node& node, std::string* why) {
  if (is_fused_op(node)) return node;
  if (node.outputs.size() != 1 || node.outputs[0].empty())
    return refuse(why, "it does not have exactly one output");
  const std::string& output = node.outputs[0];
  auto input = [&node](size_t i) {
    return i < node.inputs.size() ? node.inputs[i] : std::string();
  };

  if (node.op_type == "Conv") {
    if (!has_rank(graph, input(0), 4) || !has_rank(graph, input(1), 4) ||
        !has_rank(graph, output, 4))
      return refuse(why, "only 2-D convolutions (4-D input, weight and output) are fused");
    ConvGeometry geometry;
    try {
      geometry = conv_geometry(graph, node);
    } catch (const GraphError& e) {
      return refuse(why, e.what());
    }
    const int64_t out_channels = graph.tensor(input(1)).shape[0];
    Node fused = node;
    fused.op_type = "FusedConv";
    fused.inputs = {input(0), input(1)};
    if (!input(2).empty()) {
      const Tensor& bias = graph.tensor(input(2));
      if (bias.type != DataType::kFloat32 || bias.shape != std::vector<int64_t>{out_channels})
        return refuse(why, "its B input '" + bias.name + "' " + shape_text(bias.shape) +
                               " is not a float vector of its " + std::to_string(out_channels) +
                               " output channels");
      fused.inputs.push_back(input(2));
      fused.epilogue.bias = true;
    }
    fused.attributes.erase("auto_pad");
    fused.attributes["group"] = geometry.group;
    fused.attributes["kernel_shape"] = geometry.kernel;
    fused.attributes["strides"] = geometry.strides;
    fused.attributes["dilations"] = geometry.dilations;
    fused.attributes["pads"] = geometry.pads;
    return fused;
  }

  if (node.op_type == "Gemm") {
    if (!has_rank(graph, input(0), 2) || !has_rank(graph, input(1), 2) ||
        !has_rank(graph, output, 2))
      return refuse(why, "its inputs or output are not 2-D");
    float alpha = 1;
    try {
      alpha = node.get_float("alpha", 1.0f);
    } catch (const std::invalid_argument& e) {
      return refuse(why, e.what());
    }
    if (alpha != 1.0f)
      return refuse(why, "alpha = " + std::to_string(alpha) + " (a fused Gemm has alpha = 1)");
    Node fused = node;
    fused.op_type = "FusedGemm";
    fused.inputs = {input(0), input(1)};
    fused.attributes.erase("alpha");
    fused.attributes.erase("beta");
    if (!input(2).empty()) {
      const std::vector<int64_t>& out_shape = graph.tensor(output).shape;
      std::optional<GemmBias> bias = gemm_bias(graph, node, out_shape, why);
      if (!bias) return std::nullopt;
      fused.inputs.push_back(
          bias->values ? add_constant(graph, bias->tensor + "_bias", {out_shape[1]}, *bias->values)
                       : bias->tensor);
      fused.epilogue.bias = true;
    }
    return fused;
  }

  if (node.op_type == "MatMul") {
    if (!has_rank(graph, input(0), 2) || !has_rank(graph, input(1), 2))
      return refuse(why, "only a 2-D MatMul is fused (a batched one is not)");
    Node fused = node;
    fused.op_type = "FusedMatMul";
    fused.inputs = {input(0), input(1)};
    return fused;
  }
  return refuse(why, node.op_type + " is not a Conv, Gemm or MatMul");
}

std::optional<GemmBias> gemm_bias(const Graph& graph, const Node& gemm,
                                  const std::vector<int64_t>& output_shape, std::string* why) {
  auto fail = [why](std::string reason) -> std::optional<GemmBias> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (gemm.inputs.size() < 3 || gemm.inputs[2].empty() || output_shape.size() != 2)
    return fail("it has no C input");
  const Tensor& c = graph.tensor(gemm.inputs[2]);
  float beta = 1;
  try {
    beta = gemm.get_float("beta", 1.0f);
  } catch (const std::invalid_argument& e) {
    return fail(e.what());
  }
  const std::string what = "its C input '" + c.name + "' " + shape_text(c.shape);
  if (c.type != DataType::kFloat32) return fail(what + " is not float");
  const bool vector = c.shape == std::vector<int64_t>{output_shape[1]};
  if (vector && beta == 1.0f) return GemmBias{c.name, std::nullopt};
  if (!c.is_constant())
    return fail(what +
                " is computed by the graph: only a [N] vector with beta = 1 is a bias "
                "then");
  std::optional<std::vector<float>> values = per_channel_values(c, output_shape, 1);
  if (!values) return fail(what + " varies along M: it is no bias of one value per column");
  for (float& v : *values) v *= beta;
  return GemmBias{c.name, std::move(values)};
}

bool can_take_bias(const Node& node) {
  return is_main_op(node) && node.epilogue.activation == Activation::kNone &&
         node.epilogue.residual == Residual::kNone;
}

bool can_take_activation(const Node& node) {
  return is_main_op(node) && node.epilogue.activation == Activation::kNone;
}

bool can_take_residual(const Node& node) {
  return is_main_op(node) && node.epilogue.residual == Residual::kNone;
}

int channel_axis(const Node& node, size_t output_rank) {
  if (node.op_type == "Conv" || node.op_type == "FusedConv") return 1;
  return static_cast<int>(output_rank) - 1;
}

std::optional<std::vector<float>> per_channel_values(const Tensor& tensor,
                                                     const std::vector<int64_t>& output_shape,
                                                     int axis) {
  if (!tensor.float_data || axis < 0 || static_cast<size_t>(axis) >= output_shape.size() ||
      tensor.shape.size() > output_shape.size())
    return std::nullopt;
  const size_t offset = output_shape.size() - tensor.shape.size();
  const int64_t channels = output_shape[axis];
  bool along_axis = false;
  for (size_t j = 0; j < tensor.shape.size(); ++j) {
    const int64_t d = tensor.shape[j];
    if (d == 1) continue;
    if (j + offset != static_cast<size_t>(axis) || d != channels) return std::nullopt;
    along_axis = true;
  }
  const std::vector<float>& data = *tensor.float_data;
  if (along_axis) return data;
  if (data.size() != 1) return std::nullopt;
  return std::vector<float>(static_cast<size_t>(channels), data[0]);
}

std::optional<float> scalar_constant(const Graph& graph, const std::string& name) {
  if (!graph.has_tensor(name)) return std::nullopt;
  const Tensor& t = graph.tensor(name);
  if (!t.float_data || t.float_data->size() != 1) return std::nullopt;
  return (*t.float_data)[0];
}

std::string fresh_name(const Graph& graph, const std::string& base) {
  if (!graph.has_tensor(base)) return base;
  for (int i = 2;; ++i) {
    std::string name = base + "_" + std::to_string(i);
    if (!graph.has_tensor(name)) return name;
  }
}

std::string add_constant(Graph& graph, const std::string& base, std::vector<int64_t> shape,
                         std::vector<float> data) {
  Tensor t;
  t.name = fresh_name(graph, base);
  t.type = DataType::kFloat32;
  t.shape = std::move(shape);
  t.float_data = std::move(data);
  std::string name = t.name;
  graph.tensors.emplace(name, std::move(t));
  return name;
}

ConvGeometry conv_geometry(const Graph& graph, const Node& node) {
  const std::string label = node_label(node);
  if (node.inputs.size() < 2 || !has_rank(graph, node.inputs[0], 4) ||
      !has_rank(graph, node.inputs[1], 4))
    throw GraphError(node.op_type + " '" + label +
                     "': only 2-D convolutions (4-D input and weight) are handled");
  const std::vector<int64_t>& x = graph.tensor(node.inputs[0]).shape;
  const std::vector<int64_t>& w = graph.tensor(node.inputs[1]).shape;
  ConvGeometry g;
  try {
    g.group = node.get_int("group", 1);
    g.kernel = {w[2], w[3]};
    const std::vector<int64_t> kernel_shape = node.get_ints("kernel_shape", g.kernel);
    if (kernel_shape != g.kernel)
      throw GraphError(node.op_type + " '" + label + "': kernel_shape " + shape_text(kernel_shape) +
                       " disagrees with the weight " + shape_text(w));
    g.strides = node.get_ints("strides", {1, 1});
    g.dilations = node.get_ints("dilations", {1, 1});
    g.pads = node.get_ints("pads", {0, 0, 0, 0});
    if (g.strides.size() != 2 || g.dilations.size() != 2 || g.pads.size() != 4)
      throw GraphError(node.op_type + " '" + label + "': strides " + shape_text(g.strides) +
                       ", dilations " + shape_text(g.dilations) + ", pads " + shape_text(g.pads) +
                       " do not fit a 2-D convolution (2, 2 and 4 values)");
    for (int64_t v : g.strides)
      if (v < 1) throw GraphError(node.op_type + " '" + label + "': a stride below 1");
    for (int64_t v : g.dilations)
      if (v < 1) throw GraphError(node.op_type + " '" + label + "': a dilation below 1");
    const std::string auto_pad = node.get_string("auto_pad", "NOTSET");
    if (auto_pad == "VALID") {
      g.pads = {0, 0, 0, 0};
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (int axis = 0; axis < 2; ++axis) {
        const int64_t in = x[2 + axis], stride = g.strides[axis];
        const int64_t out = (in + stride - 1) / stride;
        const int64_t extent = (g.kernel[axis] - 1) * g.dilations[axis] + 1;
        const int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
        const int64_t small = total / 2, large = total - small;
        g.pads[axis] = auto_pad == "SAME_UPPER" ? small : large;
        g.pads[axis + 2] = auto_pad == "SAME_UPPER" ? large : small;
      }
    } else if (auto_pad != "NOTSET") {
      throw GraphError(node.op_type + " '" + label + "': unknown auto_pad '" + auto_pad + "'");
    }
  } catch (const std::invalid_argument& e) {
    throw GraphError(e.what());
  }
  return g;
}

std::string node_label(const Node& node) {
  if (!node.name.empty()) return node.name;
  return node.op_type + " writing '" + (node.outputs.empty() ? "" : node.outputs[0]) + "'";
}

}  // namespace webtune::graph::detail
