/// \file autotvm_log.hpp
/// AutoTVM's JSON-lines tuning logs, out of and into a RecordStore (tuner/records.hpp).
///
/// Exports AutoTVM's JSON-lines log format (version 0.2 fields, as TVM's autotvm/record.py
/// encode() writes them) and imports it back. One line per trial:
///
///   {"input": ["opengl -keys=gles-frag -model=gles:llvmpipe", "conv2d_nchw.gles-frag",
///              ARGS, {}],
///    "config": {"index": 12, "code_hash": null, "entity": [["tile_y","sp",[-1,4]], ...]},
///    "result": [[cost_s, ...], error_no, all_cost_s, timestamp],
///    "version": 0.2, "tvm_version": "0.9.dev0",
///    "webtune": {"task": "C2", "agent": "...", "gflops": ..., "message": "...",
///                "entity": [["tile_y","sp",[16,4]], ...]}}
///
///  - The target string is "opengl -keys=<target name> -model=<device key>"; the task name is
///    "<TVM op>.<target name>" with TVM op conv2d_nchw, depthwise_conv2d_nchw or dense.
///  - ARGS follow TVM's topi signatures: conv2d and depthwise: [["TENSOR",[N,C,H,W],"float32"],
///    ["TENSOR",weight,"float32"], [stride,stride], [pad,pad,pad,pad], [1,1], "float32"] with
///    weight [K,C,R,S] (conv2d) or [C,1,R,S] (depthwise); dense: [["TENSOR",[M,K],"float32"],
///    ["TENSOR",[K,N],"float32"], null, "float32"]. Note that webtune's dense weight is [K,N]
///    while TVM's is [N,K]; the export writes webtune's layout, and the import accepts both (the
///    dimension equal to the data's K tells them apart).
///  - As AutoTVM, a failed trial's costs are written as [1e9]; the import reads them back empty.
///  - The import takes only lines for webtune's targets and templates: the target is the first
///    webtune target in -keys= (else the task name's suffix; both, when given, must agree), and
///    every config must be an entity of that template's config space (config_in_space), so a
///    foreign line (CUDA's tile_f, Mali's ann_spatial) is refused, not stored under a webtune
///    job. The entity stored is the space's own (a −1 factor resolved), under the space's current
///    index (an old log's index is renumbered when the space has grown since). Lines starting with
///    '#' are comments, as in TVM's load_from_file.
///  - AutoTVM writes −1 for the outermost factor of a split; so does the export. The exact
///    entity, the task name, the agent and the error message, which AutoTVM has no place for,
///    go into the extra top-level "webtune" object that AutoTVM ignores, so that an import
///    restores the trial exactly. Lines from other tools (no "webtune" object) import too.
#pragma once

#include <cstdint>
#include <iosfwd>
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
/// Reads AutoTVM JSON lines (see the file comment) into jobs of `device_key`; an empty
/// `device_key` takes each line's "-model=" (or "imported" when it has none). Blank lines and
/// '#' comments are skipped, config indices already stored are skipped, and new jobs get
/// status "done". Returns trials imported. Every line is checked before anything is written
/// (its workload by Workload::validate, its target, its config by config_in_space), and the
/// writes are one transaction (RecordStore::import_jobs): a bad line throws std::runtime_error
/// naming its line number and why (not JSON, longer than 4 MiB, unknown target, unknown knob
/// 'tile_f' for the template, a value outside the space, ...) and imports nothing.
int64_t import_autotvm(RecordStore& store, std::istream& in,
                       const std::string& device_key = "imported");

}  // namespace webtune
