#pragma once
/// \file planner.hpp
/// The build planner (`webtune build`, issue 16; docs/package.md): a fused graph and the tuning
/// records in, a model package out.
///
///  1. Tasks: graph::extract_tasks; each task's config and kernel by choose_config
///     (record_selection.hpp): the device key's best record, else its family's, else the
///     template's default.
///  2. Steps, in the graph's topological order: an upload per graph input; per node a kernel
///     step (role task for a node a task covers; role op for the others: op_kernel on GPU
///     targets, the JavaScript runtime's ops on wasm, `"kernel": null`), or an alias step for
///     Reshape / Flatten / Identity / Dropout / Squeeze / Unsqueeze over plain storage; a
///     download per graph output. On frag targets (gles-frag, webgl2) a tuned kernel's output
///     stays in its render targets (storage `targets`) and a relayout step (relayout_kernel)
///     goes before each kernel input whose storage places some element elsewhere than the
///     kernel's input layout (same_placement); one relayout of a value to one layout serves
///     every later reader. A graph input is stored as its first reader wants it (the runtime
///     packs it on the CPU, no relayout).
///  3. Weights: each constant input of a kernel, packed into that input's layout (frag:
///     TensorLayout::pack; others: plain row-major), a Gemm's transB = 1 weight transposed to
///     [K, N] first, a plain Gemm's C · beta as the [N] bias (weights.hpp).
///  4. Memory: slots by liveness (memory_plan.hpp); on wasm the slots and weights then get
///     offsets in one linear memory and every task kernel is rebuilt there (wasm_memory.hpp).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_artifact.hpp"
#include "deploy/package.hpp"
#include "graph/graph.hpp"
#include "tuner/records.hpp"

namespace webtune::deploy {

/// The targets `webtune build --target` takes: webgl2 (gles-frag kernels, run in a page),
/// webgpu, wasm (pages), gles-compute, gles-frag (native, through EGL), joined with ", ".
std::string build_target_names();

/// The ONNX operators the wasm runtime's JavaScript runs as op steps (docs/package.md; the
/// runtime's ops.mjs), besides the alias operators: graph/operators.hpp's kRunsInWasmJs rows.
const std::vector<std::string>& wasm_js_operators();

/// Whether the planner aliases `op_type` (graph/operators.hpp's kRunsAsAlias: Reshape, Flatten,
/// Identity, Dropout, Squeeze, Unsqueeze): nothing to run over plain storage.
bool is_alias_operator(const std::string& op_type);

struct PlanOptions {
  std::string target;      ///< webgl2, webgpu, wasm, gles-compute, gles-frag
  std::string device_key;  ///< records of this device first, then its family; "" = family only
  const RecordStore* records = nullptr;  ///< null: every task takes its default config
  PackageModel model;                    ///< written to the manifest as it is
  int64_t opset = 13;                    ///< the model's default-domain opset (Softmax)
  /// Frag targets: a tuned convolution whose next convolution reads channel quads writes its
  /// output as quad layers (OutputLayout::quad_layers) and that reader takes them as they are,
  /// with no relayout between (docs/package.md, "Quad layers"). false: every tuned kernel
  /// writes its render targets as tuned, relayouts between (the layout of earlier builds).
  bool quad_layers = true;
  /// gles-compute / webgpu: large reductions (global pools, Reduce*) as one workgroup per
  /// output element (OpKernelOptions::workgroup_reductions). false: one invocation per output
  /// element, as before (for side-by-side benchmarks).
  bool workgroup_reductions = true;
};

/// Per task, what the report says beside the manifest's task entry.
struct TaskReport {
  std::string config_text;  ///< ConfigEntity::to_string, "tile_y=[16,4] unroll=4 ..."
  std::vector<std::string> notes;
};

/// A planned package: everything `write_package` writes.
struct PlannedPackage {
  Manifest manifest;
  /// kernels[i] is the file "kernels/NNN.json" (i zero-padded to 3 digits), deduplicated.
  std::vector<KernelArtifact> kernels;
  std::vector<float> weights;            ///< weights.bin's floats
  std::vector<TaskReport> task_reports;  ///< one per manifest.tasks entry
  std::vector<std::string> notes;        ///< for the report ("no records database: ...")
  int64_t slot_bytes = 0;                ///< Σ slots' bytes
  int64_t value_bytes = 0;               ///< Σ every non-alias value's storage bytes (no reuse)

  /// The build report (report.txt, also printed by `webtune build`): model, target, device key;
  /// per task its source, record id, config and recorded cost; the steps by role, relayouts,
  /// slot memory against the values' total, weights, estimated_ms; the notes. docs/package.md
  /// ("The report") shows an example.
  std::string report() const;
};

/// The file name of kernel `index`: "kernels/007.json".
std::string kernel_file(size_t index);

/// Plans the package of `graph` (imported, fused or not; validate()d) for `options`. Throws
/// std::invalid_argument for an unknown target (naming the known ones), and for a model the
/// target cannot run, naming the node and its op: an op that no task and no op kernel covers
/// (the message lists what the target runs), a non-float graph input, a Gemm's transposed B
/// that is not a constant.
PlannedPackage plan_package(const graph::Graph& graph, const PlanOptions& options);

/// What `webtune build` takes.
struct BuildOptions {
  std::string model_path;  ///< an ONNX file
  std::string db_path;     ///< "" = no records (every task its default config; the report says so)
  std::string target;
  std::string device_key;
  std::map<std::string, int64_t> symbolic_dims;  ///< --dim bindings (graph::ImportOptions)
  bool fuse = true;                              ///< false: --no-fusion
  bool quad_layers = true;                       ///< false: --no-quad-layers (PlanOptions)
  bool workgroup_reductions = true;              ///< false: --no-workgroup-reductions (PlanOptions)
  std::string out_dir;
};

/// Lowercase hex SHA-256 of a file's bytes (OpenSSL). Throws std::runtime_error naming the path
/// when it cannot be read.
std::string file_sha256(const std::string& path);

/// Imports options.model_path (graph::import_onnx_file), runs the fusion passes unless
/// !options.fuse, opens the records (a missing --db file is an error; no --db at all means
/// defaults), plans the package and writes it to options.out_dir (write_package). Returns the
/// plan. Throws graph::GraphError for a model the importer refuses, std::runtime_error for a
/// records file that does not exist or an output folder it may not write, and what
/// plan_package throws.
PlannedPackage build_package(const BuildOptions& options);

/// Writes `package` into `dir`: manifest.json, weights.bin, kernels/NNN.json, report.txt, and
/// for web targets (webgl2, webgpu, wasm) the JavaScript runtime (copy_web_runtime). `dir` is
/// created when absent; an existing folder must be empty or hold an earlier package (a
/// manifest.json of format webtune-package), whose files (those named above, kernels/,
/// runtime/, model.mjs, index.html) are replaced; anything else throws std::runtime_error
/// naming the folder, and nothing is written.
void write_package(const PlannedPackage& package, const std::string& dir);

/// The names of the runtime files embedded into webtune at build time: the repository's
/// runtime/*.mjs (not runtime/test/), e.g. "model.mjs", "webgl2.mjs"; empty when the checkout
/// had no runtime/ folder when webtune was built.
std::vector<std::string> web_runtime_files();

/// Writes the embedded runtime files into DIR/runtime/ and DIR/model.mjs (one line, `export {
/// load } from './runtime/model.mjs';`, docs/package.md "Runtimes"). Returns how many runtime
/// files it wrote: 0 when none were embedded (then it writes no model.mjs either and the
/// caller's report says so). Throws std::runtime_error naming a file it cannot write.
int copy_web_runtime(const std::string& dir);

}  // namespace webtune::deploy
