#pragma once
/// \file task_extraction.hpp
/// A graph's tuning tasks: the distinct codegen Workloads (codegen/workload.hpp) of its Conv /
/// Gemm / MatMul nodes, plain or fused, each with its weight (how many nodes run it), as
/// AutoTVM's `extract_from_program` and Ansor's `extract_tasks` do (Zheng et al., "Ansor",
/// OSDI 2020, §6: a task's weight multiplies its cost in the model's latency). Run it after
/// the fusion passes (passes.hpp) so that each task carries the epilogue its node fuses: a
/// conv + bias + relu is another kernel than a plain conv.
///
/// Mapping (ONNX layouts → codegen's, which are the same: NCHW data, OIHW weights):
///  - Conv / FusedConv with 4-D X [N,C,H,W] and W [M,C/group,kH,kW]: group 1 → conv2d;
///    group == C == M (W [C,1,kH,kW]) → depthwise_conv2d. Needs dilation 1, one stride for both
///    axes and one pad on all four sides (auto_pad resolved first); kH and kW may differ.
///  - Gemm / FusedGemm with transA = 0 → dense M, N, K of A[M,K]·B: transB = 1 means B is stored
///    [N,K], still dense M, N, K (the deployment transposes the weight once). alpha must be 1.
///  - MatMul / FusedMatMul with 2-D A [M,K] and B [K,N] → dense.
/// The epilogue is the fused node's. A plain node's is empty, except that its own bias is part
/// of what it computes: a Conv's B gives epilogue.bias, and so does a Gemm's C when fuse_bias
/// could make it a bias (a float constant of one value per output column, or a computed [N]
/// with beta = 1); any other C means no workload fits.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/json/fwd.hpp>

#include "codegen/workload.hpp"
#include "graph/graph.hpp"
#include "graph/onnx_import.hpp"

namespace webtune::graph {

/// The codegen workload of a (fused or plain) Conv / Gemm / MatMul node, or nullopt with `why`
/// set when it does not fit a Workload (another op type, a grouped non-depthwise conv,
/// dilation ≠ 1, strides differing per axis, asymmetric or per-axis pads, a 1-D or 3-D conv,
/// transA, alpha ≠ 1, a Gemm's C that is no per-column bias, a batched MatMul, shapes beyond
/// Workload::validate's bounds). The workload's name is left empty. Raises nothing for a valid
/// graph.
std::optional<Workload> workload_of(const Graph& graph, const Node& node,
                                    std::string* why = nullptr);

struct ExtractedTask {
  Workload workload;               ///< with its name set (see extract_tasks)
  int weight = 0;                  ///< how many nodes run it
  std::vector<std::string> nodes;  ///< those nodes' names (an unnamed one: its output's name)
};

struct Extraction {
  std::vector<ExtractedTask> tasks;
  /// Conv / Gemm / MatMul nodes (plain or fused) that no Workload fits: {node, reason}.
  std::vector<std::pair<std::string, std::string>> not_tunable;
};

/// One task per distinct Workload::key() (op, shapes, attributes, epilogue), in the order of
/// their first node. Names are the op and a counter per op, in that order: conv2d_1, conv2d_2,
/// depthwise_conv2d_1, dense_1 ...
Extraction extract_tasks(const Graph& graph);

/// The extraction's tasks as the tuner takes them (tuner/tune_session.hpp): each workload
/// (named) with its weight as `occurrences`, in extraction order.
std::vector<WorkloadFileTask> tuning_tasks(const Extraction& extraction);

/// A model file's tuning tasks, as `webtune tune --model` and `webtune import` find them:
/// import_onnx_file (onnx_import.hpp) with `options`, run_fusion_passes unless `fuse` is false,
/// then extract_tasks. Throws GraphError for a model the importer refuses.
Extraction extract_model_tasks(const std::string& path, const ImportOptions& options = {},
                               bool fuse = true);

/// The workload file of an extraction, in load_workload_file's format (codegen/workload.hpp):
/// {"name": NAME, "description": DESCRIPTION (omitted when empty), "tasks": [Workload::to_json
/// plus "occurrences" (the weight) and "nodes" (the node names; load_workload_file ignores
/// fields it does not know)]}.
boost::json::object workload_file_json(const std::string& name, const Extraction& extraction,
                                       const std::string& description = {});

/// Writes workload_file_json(...) to `path` (pretty enough to read: one task per line).
/// Throws std::runtime_error naming the path when it cannot be written.
void write_workload_file(const std::string& path, const std::string& name,
                         const Extraction& extraction, const std::string& description = {});

}  // namespace webtune::graph
