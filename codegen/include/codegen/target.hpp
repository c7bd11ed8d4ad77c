/// \file target.hpp
/// Targets: the kind of kernel a config space and an emitter produce, and the agents that run it.
#pragma once

#include <string>
#include <string_view>

namespace webtune {

enum class Target {
  kGlesFrag,     ///< GLSL ES 3.00 fragment shaders over float textures (OpenGL ES 3.0, WebGL2)
  kGlesCompute,  ///< GLSL ES 3.10 compute shaders over storage buffers (OpenGL ES 3.1, GL 4.3)
};

/// "gles-frag" or "gles-compute".
std::string_view target_name(Target target);
/// Inverse of target_name; throws std::invalid_argument naming the known targets.
Target target_from_name(std::string_view name);
/// The tracker key prefix of agents that run this target, e.g. "gles".
std::string_view target_key(Target target);

}  // namespace webtune
