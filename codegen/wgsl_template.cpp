/// \file wgsl_template.cpp
/// The webgpu templates (WGSL compute shaders, wgsl_emitter.hpp) for dense and conv2d.
#include "codegen/wgsl_emitter.hpp"
#include "template_impl.hpp"

namespace webtune::detail {

std::vector<std::unique_ptr<Template>> make_wgsl_templates() {
  return make_compute_templates(Target::kWebgpu, {wgsl_space, emit_wgsl, wgsl_default},
                                {OpKind::kDense, OpKind::kConv2d});
}

}  // namespace webtune::detail
