/// \file target.hpp
/// Targets: the kind of kernel a config space and an emitter produce, and the agents that run it.
#pragma once

#include <string>
#include <string_view>

namespace webtune {

enum class Target {
  kGlesFrag,     ///< GLSL ES 3.00 fragment shaders over float textures (OpenGL ES 3.0, WebGL2)
  kGlesCompute,  ///< GLSL ES 3.10 compute shaders over storage buffers (OpenGL ES 3.1, GL 4.3)
  kWebgpu,       ///< WGSL compute shaders over storage buffers (WebGPU, browser agents)
  kWasm,         ///< wasm32 modules built with LLVM and lld (docs/wasm_abi.md, browser agents)
};

/// "gles-frag", "gles-compute", "webgpu" or "wasm".
std::string_view target_name(Target target);
/// Inverse of target_name; throws std::invalid_argument naming the known targets.
Target target_from_name(std::string_view name);
/// The tracker key prefix of agents that run this target: "gles", "webgpu" or "wasm".
std::string_view target_key(Target target);

/// A target as `webtune tune --target` names it: the kernel kind that the config space and
/// emitter produce, and the key prefix of the agents its jobs go to. The same kernels can run on
/// several kinds of agent: "webgl2" is the gles-frag template (GLSL ES 3.00 fragment shaders run
/// unchanged by WebGL2) measured in browser tabs, whose keys are "webgl2:<renderer>"; "webgpu"
/// is the WGSL template (wgsl_emitter.hpp), run only by browser tabs ("webgpu:<adapter>");
/// "wasm" is the LLVM-built WebAssembly template (wasm_emitter.hpp), run only by browser tabs
/// ("wasm:threads" or "wasm:simd", docs/wasm_abi.md).
struct TuneTarget {
  std::string name;  ///< as given: "gles-frag", "gles-compute", "webgl2", "webgpu" or "wasm"
  Target kernel = Target::kGlesFrag;
  std::string key;       ///< "gles", "webgl2", "webgpu" or "wasm"
  bool browser = false;  ///< its agents are browser tabs (a local farm runs headless Chromium)
};

/// Resolves "gles-frag", "gles-compute", "webgl2", "webgpu" or "wasm"; throws
/// std::invalid_argument naming them.
TuneTarget tune_target_from_name(std::string_view name);

}  // namespace webtune
