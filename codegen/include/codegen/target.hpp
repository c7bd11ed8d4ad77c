/// \file target.hpp
/// Targets: the kind of kernel a template (template.hpp) produces. Which agents run it is the
/// tuner's business (tuner/tune_target.hpp).
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
/// Inverse of target_name; throws std::invalid_argument naming the known targets
/// (template.hpp's targets()).
Target target_from_name(std::string_view name);

// Agents, tracker keys and browsers: tuner/tune_target.hpp.

}  // namespace webtune
