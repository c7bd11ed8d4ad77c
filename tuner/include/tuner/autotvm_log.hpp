/// \file autotvm_log.hpp
/// AutoTVM's JSON-lines tuning logs, out of and into a RecordStore (tuner/records.hpp).
///
/// Exports AutoTVM's JSON-lines log format (version 0.2, as TVM's python/tvm/autotvm/record.py
/// encode() writes it, and decode() / load_from_file() read it) and imports it back. One line
/// per trial:
///
///   {"input": ["webgpu -keys=webgpu -model=webgpu:nvidia-rtx:chrome-130:linux",
///              "conv2d_nchw.webgpu", ARGS, {}],
///    "config": {"index": 12, "code_hash": null, "entity": [["tile_y","sp",[-1,4]], ...]},
///    "result": [[cost_s, ...], error_no, all_cost_s, timestamp],
///    "version": 0.2, "tvm_version": "0.9.dev0",
///    "webtune": {"task": "C2", "agent": "...", "gflops": ..., "message": "...",
///                "entity": [["tile_y","sp",[16,4]], ...]}}
///
/// Target strings (docs/records.md): TVM's target kind where TVM has one, with
/// `-keys=<webtune target>` (so that an import tells gles-frag from gles-compute) and
/// `-model=<device key>` (quoted with '...' when it holds a space):
///  - webgpu:       "webgpu -keys=webgpu -model=KEY"
///  - wasm:         "llvm -keys=wasm -mtriple=wasm32-unknown-unknown-wasm -mattr=+simd128
///                   -model=KEY" (TVM's wasm target string, as web/ and tvmjs build with; the
///                   kernels may use SIMD128, a knob of the wasm templates)
///  - gles-frag, gles-compute: "opengl -keys=gles-frag -model=KEY". TVM has no target kind for
///    OpenGL ES / WebGL2 kernels today; `opengl` is the one it registered for them, and the only
///    one that fits.
///
/// Task names: "<TVM topi compute>.<key>", the pattern of TVM's own task names
/// ("conv2d_nchw.cuda", "dense.mali"): computes conv2d_nchw, depthwise_conv2d_nchw, dense; keys
/// webgpu, wasm, gles_frag, gles_compute (TVM's keys are identifiers: '_' for '-'). They are
/// deliberately none of TVM's registered templates, so that TVM's ApplyHistoryBest never applies
/// webtune's knobs to a CUDA or Mali template. The import also reads the older
/// "<compute>.<webtune target>" names ("dense.gles-frag") and target kind "opengl" for every
/// target.
///
/// ARGS follow TVM's topi signatures: conv2d and depthwise: [["TENSOR",[N,C,H,W],"float32"],
/// ["TENSOR",weight,"float32"], [stride,stride], [pad,pad,pad,pad], [1,1], "float32"] with
/// weight [K,C,R,S] (conv2d) or [C,1,R,S] (depthwise); dense: [["TENSOR",[M,K],"float32"],
/// ["TENSOR",[N,K],"float32"], null, "float32"] — TVM's dense weight layout [N,K] (webtune
/// computes A[M,K]·B[K,N]; the log carries TVM's shape). The import accepts [N,K] and the [K,N]
/// of older webtune exports (the dimension equal to the data's K tells them apart).
///
/// As AutoTVM, a failed trial's costs are written as [1e9]; the import reads them back empty.
/// AutoTVM writes −1 for the outermost factor of a split; so does the export. The exact entity,
/// the task name, the agent and the error message, which AutoTVM has no place for, go into the
/// extra top-level "webtune" object that AutoTVM ignores, so that an import restores the trial
/// exactly. Lines from other tools (no "webtune" object) import too.
///
/// The import takes lines for webtune's targets and templates: the target is the first webtune
/// target in -keys= (else the task name's suffix; both, when given, must agree), and every
/// config must be an entity of that template's config space (config_in_space), so a line of a
/// foreign template (CUDA's tile_f, Mali's ann_spatial) is never stored under a webtune job.
/// The entity stored is the space's own (a −1 factor resolved), under the space's current index
/// (an old log's index is renumbered when the space has grown since). Lines starting with '#'
/// are comments, as in TVM's load_from_file. Lines of other targets (TopHub's mali, cuda, ...)
/// are refused, skipped (skip_invalid) or kept as foreign records (keep_foreign;
/// RecordStore::foreign_trials).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>

#include "tuner/records.hpp"

namespace webtune {

/// Writes every trial matching the filters (as best()'s) as one AutoTVM JSON line, by job
/// then insertion order; returns lines written. A suspect trial is written as a failure
/// (UNKNOWN_ERROR, cost 1e9, its costs in "webtune"."suspect_costs"), so that no reader of
/// the log takes it for a result. Configs are written as recorded: import_autotvm refuses,
/// naming the line, one that a damaged records file holds outside its template's space.
int64_t export_autotvm(const RecordStore& store, std::ostream& out,
                       const std::string& workload_filter = {},
                       const std::string& target_filter = {});
/// The TVM target string of webtune target `target` measured on `device_key` (see the file
/// comment); no -model= when `device_key` is empty.
std::string tvm_target_string(Target target, const std::string& device_key);
/// The TVM task name of `op` on `target`, e.g. "conv2d_nchw.gles_frag" (see the file comment).
std::string tvm_task_name(OpKind op, Target target);

/// How import_autotvm treats lines it cannot store as webtune trials.
struct AutoTvmImportOptions {
  /// Device key of the imported jobs; empty: each line's -model= (else "imported").
  std::string device_key = "imported";
  /// Skip bad lines and count them by reason (AutoTvmImportReport::skipped) instead of stopping
  /// at the first one.
  bool skip_invalid = false;
  /// Store lines of other targets (TopHub's mali, cuda, ...) as foreign records
  /// (RecordStore::add_foreign_records) instead of refusing or skipping them.
  bool keep_foreign = false;
  /// Recorded with every foreign record (e.g. the log's file name).
  std::string source;
};

/// What import_autotvm did.
struct AutoTvmImportReport {
  int64_t lines = 0;        ///< lines read that are not blank or '#' comments
  int64_t imported = 0;     ///< trials inserted (lines whose config was already stored count not)
  int64_t foreign = 0;      ///< lines of other targets kept (keep_foreign)
  int64_t foreign_new = 0;  ///< of those, the ones not already stored
  /// Lines skipped, by reason (skip_invalid): "not JSON", "line too long", "malformed record",
  /// "foreign target 'cuda'" (the foreign task name's suffix, else its target kind), "-keys= and
  /// task name disagree", "unsupported workload", "config outside its template's space".
  std::map<std::string, int64_t> skipped;
  int64_t skipped_total() const;
};

/// Reads AutoTVM JSON lines (see the file comment) into `store`. Blank lines and '#' comments
/// are skipped, config indices already stored are skipped, and new jobs get status "done".
/// Every line is checked before anything is written; the trials are one transaction
/// (RecordStore::import_jobs), the foreign records a second one after it (both skip what is
/// already stored, so importing a log again after a failure completes it). Without
/// skip_invalid, a bad line throws std::runtime_error naming its line number and why (not JSON,
/// longer than 4 MiB, a target that is not webtune's and no keep_foreign, unknown knob 'tile_f'
/// for the template, a value outside the space, ...) and imports nothing.
AutoTvmImportReport import_autotvm(RecordStore& store, std::istream& in,
                                   const AutoTvmImportOptions& options);
/// The strict import: import_autotvm(store, in, {device_key}).imported — every line must be a
/// trial of webtune's (its workload by Workload::validate, its target, its config by
/// config_in_space); the first bad one throws std::runtime_error naming it, and nothing is
/// imported. Returns trials imported.
int64_t import_autotvm(RecordStore& store, std::istream& in,
                       const std::string& device_key = "imported");

}  // namespace webtune
