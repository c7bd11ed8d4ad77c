/// \file task_extraction.cpp
/// A graph's tuning tasks: Conv / Gemm / MatMul nodes → codegen Workloads, merged by key and
/// weighted by their node count (task_extraction.hpp).

#include "graph/task_extraction.hpp"

#include <boost/json.hpp>
#include <fstream>
#include <map>

#include "graph/passes.hpp"
#include "passes/fusion_util.hpp"

namespace webtune::graph {

namespace bj = boost::json;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

std::optional<Workload> refuse(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return std::nullopt;
}

const std::vector<int64_t>& shape_of(const Graph& graph, const Node& node, size_t input) {
  if (input >= node.inputs.size() || node.inputs[input].empty())
    throw GraphError(node.op_type + " '" + detail::node_label(node) + "' lacks input " +
                     std::to_string(input));
  return graph.tensor(node.inputs[input]).shape;
}

std::optional<Workload> conv_workload(const Graph& graph, const Node& node, std::string* why) {
  const std::vector<int64_t>& x = shape_of(graph, node, 0);
  const std::vector<int64_t>& w = shape_of(graph, node, 1);
  if (x.size() != 4 || w.size() != 4)
    return refuse(why, "a convolution with a " + std::to_string(x.size()) +
                           "-D input: only 2-D convolutions (4-D NCHW tensors) are tuned");
  const detail::ConvGeometry g = detail::conv_geometry(graph, node);
  if (g.dilations != std::vector<int64_t>{1, 1})
    return refuse(why, "dilations " + shape_text(g.dilations) + ": only dilation 1 is tuned");
  if (g.strides[0] != g.strides[1])
    return refuse(
        why, "strides " + shape_text(g.strides) + " differ per axis: a tuned conv has one stride");
  for (int64_t pad : g.pads)
    if (pad != g.pads[0])
      return refuse(why, "pads " + shape_text(g.pads) +
                             " are not one pad on all four sides: a tuned conv has one "
                             "symmetric pad");
  const int64_t channels = x[1], out_channels = w[0];
  Workload wl;
  if (g.group == 1) {
    if (w[1] != channels)
      return refuse(why, "its weight " + shape_text(w) + " has " + std::to_string(w[1]) +
                             " input channels, its input " + shape_text(x) + " " +
                             std::to_string(channels));
    wl.op = OpKind::kConv2d;
  } else if (g.group == channels && out_channels == channels && w[1] == 1) {
    wl.op = OpKind::kDepthwiseConv2d;
  } else {
    return refuse(why, "group " + std::to_string(g.group) + " with C = " +
                           std::to_string(channels) + ", M = " + std::to_string(out_channels) +
                           ": only group 1 and depthwise (group == C == M) are tuned");
  }
  wl.batch = x[0];
  wl.in_channels = channels;
  wl.height = x[2];
  wl.width = x[3];
  wl.out_channels = out_channels;
  wl.kernel_h = g.kernel[0];
  wl.kernel_w = g.kernel[1];
  wl.stride = g.strides[0];
  wl.pad = g.pads[0];
  // A plain Conv's own B is part of what the node computes: the workload has a bias.
  if (node.op_type == "Conv" && node.inputs.size() > 2 && !node.inputs[2].empty()) {
    if (graph.tensor(node.inputs[2]).shape != std::vector<int64_t>{out_channels})
      return refuse(why, "its B input '" + node.inputs[2] + "' is not [" +
                             std::to_string(out_channels) + "]");
    wl.epilogue.bias = true;
  }
  return wl;
}

std::optional<Workload> dense_workload(const Graph& graph, const Node& node, std::string* why) {
  const std::vector<int64_t>& a = shape_of(graph, node, 0);
  const std::vector<int64_t>& b = shape_of(graph, node, 1);
  const bool gemm = node.op_type == "Gemm" || node.op_type == "FusedGemm";
  if (a.size() != 2 || b.size() != 2)
    return refuse(why, "inputs " + shape_text(a) + " and " + shape_text(b) +
                           ": only a 2-D product is tuned (a batched MatMul is not)");
  bool trans_b = false;
  if (gemm) {
    if (node.get_int("transA", 0) != 0)
      return refuse(why, "transA = 1: a tuned dense reads A as [M,K]");
    trans_b = node.get_int("transB", 0) != 0;
    if (node.get_float("alpha", 1.0f) != 1.0f)
      return refuse(why, "alpha = " + std::to_string(node.get_float("alpha", 1.0f)) +
                             ": a tuned dense has alpha = 1");
  }
  const int64_t m = a[0], k = a[1];
  const int64_t kb = trans_b ? b[1] : b[0], n = trans_b ? b[0] : b[1];
  if (kb != k)
    return refuse(why, "A " + shape_text(a) + " and B " + shape_text(b) +
                           (trans_b ? " (transB)" : "") + " disagree on K");
  Workload wl;
  wl.op = OpKind::kDense;
  wl.m = m;
  wl.n = n;
  wl.k = k;
  // A plain Gemm's C is part of what the node computes: a bias when fuse_bias could make it
  // one (detail::gemm_bias), else no workload fits.
  if (node.op_type == "Gemm" && node.inputs.size() > 2 && !node.inputs[2].empty()) {
    if (!detail::gemm_bias(graph, node, {m, n}, why)) return std::nullopt;
    wl.epilogue.bias = true;
  }
  return wl;
}

}  // namespace

std::optional<Workload> workload_of(const Graph& graph, const Node& node, std::string* why) {
  const bool conv = node.op_type == "Conv" || node.op_type == "FusedConv";
  const bool dense = node.op_type == "Gemm" || node.op_type == "FusedGemm" ||
                     node.op_type == "MatMul" || node.op_type == "FusedMatMul";
  if (!conv && !dense) return refuse(why, node.op_type + " is not a Conv, Gemm or MatMul");
  try {
    std::optional<Workload> wl =
        conv ? conv_workload(graph, node, why) : dense_workload(graph, node, why);
    if (!wl) return wl;
    if (detail::is_fused_op(node)) wl->epilogue = node.epilogue;
    wl->validate();
    // The graph's output shape must be the workload's: a check of the mapping above.
    if (node.outputs.empty() || node.outputs[0].empty() ||
        graph.tensor(node.outputs[0]).shape != wl->output_shape())
      return refuse(why, "its output shape " +
                             shape_text(node.outputs.empty() || node.outputs[0].empty()
                                            ? std::vector<int64_t>{}
                                            : graph.tensor(node.outputs[0]).shape) +
                             " is not the workload's " + shape_text(wl->output_shape()));
    return wl;
  } catch (const std::invalid_argument& e) {
    return refuse(why, e.what());
  } catch (const GraphError& e) {
    return refuse(why, e.what());
  }
}

Extraction extract_tasks(const Graph& graph) {
  Extraction extraction;
  std::map<std::string, size_t> by_key;
  std::map<OpKind, int> counters;
  for (const Node& node : graph.nodes) {
    if (!detail::is_main_op(node)) continue;
    const std::string label =
        node.name.empty() && !node.outputs.empty() ? node.outputs[0] : node.name;
    std::string why;
    std::optional<Workload> wl = workload_of(graph, node, &why);
    if (!wl) {
      extraction.not_tunable.emplace_back(detail::node_label(node), why);
      continue;
    }
    const std::string key = wl->key();
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      wl->name = std::string(op_name(wl->op)) + "_" + std::to_string(++counters[wl->op]);
      by_key.emplace(key, extraction.tasks.size());
      extraction.tasks.push_back({std::move(*wl), 1, {label}});
    } else {
      ExtractedTask& task = extraction.tasks[it->second];
      ++task.weight;
      task.nodes.push_back(label);
    }
  }
  return extraction;
}

bj::object workload_file_json(const std::string& name, const Extraction& extraction,
                              const std::string& description) {
  bj::object file;
  file["name"] = name;
  if (!description.empty()) file["description"] = description;
  bj::array tasks;
  for (const ExtractedTask& task : extraction.tasks) {
    bj::object o = task.workload.to_json();
    o["occurrences"] = task.weight;
    bj::array nodes;
    for (const std::string& n : task.nodes) nodes.emplace_back(n);
    o["nodes"] = std::move(nodes);
    tasks.emplace_back(std::move(o));
  }
  file["tasks"] = std::move(tasks);
  return file;
}

void write_workload_file(const std::string& path, const std::string& name,
                         const Extraction& extraction, const std::string& description) {
  const bj::object file = workload_file_json(name, extraction, description);
  // One field per line at the top, one task per line: readable and diffable.
  std::string text = "{\n";
  for (const auto& [key, value] : file) {
    if (text.size() > 2) text += ",\n";
    text += " " + bj::serialize(bj::string(key)) + ": ";
    if (key == "tasks") {
      text += "[";
      const bj::array& tasks = value.get_array();
      for (size_t i = 0; i < tasks.size(); ++i)
        text += std::string(i ? "," : "") + "\n  " + bj::serialize(tasks[i]);
      text += tasks.empty() ? "]" : "\n ]";
    } else {
      text += bj::serialize(value);
    }
  }
  text += "\n}\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write the workload file '" + path + "'");
  out << text;
  out.close();
  if (!out)
    throw std::runtime_error("cannot write the workload file '" + path + "' (write failed)");
}

std::vector<WorkloadFileTask> tuning_tasks(const Extraction& extraction) {
  std::vector<WorkloadFileTask> tasks;
  for (const ExtractedTask& t : extraction.tasks) tasks.push_back({t.workload, t.weight});
  return tasks;
}

Extraction extract_model_tasks(const std::string& path, const ImportOptions& options, bool fuse) {
  Graph graph = import_onnx_file(path, options);
  if (fuse) run_fusion_passes(graph);
  return extract_tasks(graph);
}

}  // namespace webtune::graph
