/// \file glsl_compute_template.cpp
/// The gles-compute templates (GLSL ES 3.10 compute shaders, glsl_compute_emitter.hpp) for
/// dense, conv2d and depthwise conv2d.
#include "codegen/glsl_compute_emitter.hpp"
#include "template_impl.hpp"

namespace webtune::detail {
namespace {

class GlslComputeTemplate final : public Template {
 public:
  explicit GlslComputeTemplate(OpKind op) : Template(Target::kGlesCompute, op) {}

  std::shared_ptr<ConfigSpace> space(const Workload& workload) const override {
    return glsl_compute_space(workload);
  }
  KernelArtifact emit(const Workload& workload, const ConfigEntity& entity) const override {
    return emit_glsl_compute(workload, entity);
  }
  ConfigEntity default_config(const ConfigSpace& space) const override {
    return glsl_compute_default(space);
  }
  std::vector<float> features(const Workload& workload, const ConfigEntity& entity,
                              const KernelArtifact* artifact) const override {
    if (artifact == nullptr) return std::vector<float>(kAnalyticFeatureCount, 0.0f);
    return compute_kernel_features(workload, *artifact,
                                   tiled_input_bytes_per_output(workload, entity));
  }
};

}  // namespace

std::vector<std::unique_ptr<Template>> make_glsl_compute_templates() {
  std::vector<std::unique_ptr<Template>> out;
  for (OpKind op : {OpKind::kDense, OpKind::kConv2d, OpKind::kDepthwiseConv2d})
    out.push_back(std::make_unique<GlslComputeTemplate>(op));
  return out;
}

}  // namespace webtune::detail
