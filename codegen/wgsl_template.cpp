/// \file wgsl_template.cpp
/// The webgpu templates (WGSL compute shaders): dense and conv2d (wgsl_emitter.hpp, through
/// ComputeTemplate) and depthwise_conv2d (wgsl_depthwise_emitter.hpp, its own Template).
#include "codegen/wgsl_emitter.hpp"
#include "template_impl.hpp"

namespace webtune::detail {

/// Defined in wgsl_depthwise_emitter.cpp: the template "depthwise_conv2d_nchw.webgpu".
std::unique_ptr<Template> make_wgsl_depthwise_template();

std::vector<std::unique_ptr<Template>> make_wgsl_templates() {
  auto templates = make_compute_templates(Target::kWebgpu, {wgsl_space, emit_wgsl, wgsl_default},
                                          {OpKind::kDense, OpKind::kConv2d});
  templates.push_back(make_wgsl_depthwise_template());
  return templates;
}

}  // namespace webtune::detail
