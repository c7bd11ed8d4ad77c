/// \file glsl_compute_template.cpp
/// The gles-compute templates (GLSL ES 3.10 compute shaders, glsl_compute_emitter.hpp) for
/// dense, conv2d and depthwise conv2d.
#include "codegen/glsl_compute_emitter.hpp"
#include "template_impl.hpp"

namespace webtune::detail {

std::vector<std::unique_ptr<Template>> make_glsl_compute_templates() {
  return make_compute_templates(Target::kGlesCompute,
                                {glsl_compute_space, emit_glsl_compute, glsl_compute_default},
                                {OpKind::kDense, OpKind::kConv2d, OpKind::kDepthwiseConv2d});
}

}  // namespace webtune::detail
