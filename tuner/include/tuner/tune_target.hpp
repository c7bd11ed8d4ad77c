/// \file tune_target.hpp
/// Tune targets: what `webtune tune --target` (and artifact, measure, farm) name. A tune target
/// is a kernel kind (codegen's Target, whose templates build the kernels) plus the agents that
/// measure it: their tracker key prefix, and whether they are browser tabs. The same kernels can
/// run on several kinds of agent: "webgl2" is the gles-frag template (GLSL ES 3.00 fragment
/// shaders run unchanged by WebGL2) measured in browser tabs, whose keys are "webgl2:<renderer>";
/// "webgpu" is the WGSL template, run only by browser tabs ("webgpu:<adapter>"); "wasm" is the
/// LLVM-built WebAssembly template, run only by browser tabs ("wasm:threads" or "wasm:simd",
/// docs/wasm_abi.md). tune_targets() is the one table of them; help texts and checks come from it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "codegen/target.hpp"

namespace webtune {

struct TuneTarget {
  std::string name;  ///< "gles-frag", "gles-compute", "webgl2", "webgpu" or "wasm"
  Target kernel = Target::kGlesFrag;
  std::string key;       ///< tracker key prefix of its agents: "gles", "webgl2", "webgpu", "wasm"
  bool browser = false;  ///< its agents are browser tabs (a local farm runs headless Chromium)
  std::string about;     ///< a few words for help texts, e.g. "gles-frag kernels in browser tabs"
};

/// Every tune target, in help-text order: gles-frag, gles-compute, webgl2, webgpu, wasm.
const std::vector<TuneTarget>& tune_targets();

/// The entry of tune_targets() named `name`; throws std::invalid_argument naming them all.
TuneTarget tune_target_from_name(std::string_view name);

/// The tracker key prefix of the native agents of kernel kind `kernel` ("gles"), or of its
/// browser agents when no native agent runs it ("webgpu", "wasm").
std::string_view target_key(Target kernel);

/// True when a native (non-browser) agent can run kernels of kind `kernel`.
bool runs_natively(Target kernel);

/// Names of tune_targets() joined with ", ".
std::string tune_target_names();

/// Help text for --target: each tune target with its description and the operators its
/// template has, e.g. "webgpu (WGSL, browser tabs; dense, conv2d)", joined with ", ".
std::string tune_target_help();

}  // namespace webtune
