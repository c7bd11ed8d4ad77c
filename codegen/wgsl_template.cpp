/// \file wgsl_template.cpp
/// The webgpu templates (WGSL compute shaders, wgsl_emitter.hpp) for dense and conv2d.
#include "codegen/wgsl_emitter.hpp"
#include "template_impl.hpp"

namespace webtune::detail {
namespace {

class WgslTemplate final : public Template {
 public:
  explicit WgslTemplate(OpKind op) : Template(Target::kWebgpu, op) {}

  std::shared_ptr<ConfigSpace> space(const Workload& workload) const override {
    return wgsl_space(workload);
  }
  KernelArtifact emit(const Workload& workload, const ConfigEntity& entity) const override {
    return emit_wgsl(workload, entity);
  }
  ConfigEntity default_config(const ConfigSpace& space) const override {
    return wgsl_default(space);
  }
  std::vector<float> features(const Workload& workload, const ConfigEntity& entity,
                              const KernelArtifact* artifact) const override {
    if (artifact == nullptr) return std::vector<float>(kAnalyticFeatureCount, 0.0f);
    return compute_kernel_features(workload, *artifact,
                                   tiled_input_bytes_per_output(workload, entity));
  }
};

}  // namespace

std::vector<std::unique_ptr<Template>> make_wgsl_templates() {
  std::vector<std::unique_ptr<Template>> out;
  for (OpKind op : {OpKind::kDense, OpKind::kConv2d})
    out.push_back(std::make_unique<WgslTemplate>(op));
  return out;
}

}  // namespace webtune::detail
