/// \file compute_template.cpp
/// The template shape that gles-compute and webgpu share: a compute-shader emitter's space,
/// kernel and default config, with the features of compute kernels (template_impl.hpp).
#include "template_impl.hpp"

namespace webtune::detail {
namespace {

class ComputeTemplate final : public Template {
 public:
  ComputeTemplate(Target target, OpKind op, ComputeEmitter emitter)
      : Template(target, op), emitter_(emitter) {}

  std::shared_ptr<ConfigSpace> space(const Workload& workload) const override {
    return emitter_.space(workload);
  }
  KernelArtifact emit(const Workload& workload, const ConfigEntity& entity) const override {
    return emitter_.emit(workload, entity);
  }
  ConfigEntity default_config(const ConfigSpace& space) const override {
    return emitter_.default_config(space);
  }
  std::vector<float> features(const Workload& workload, const ConfigEntity& entity,
                              const KernelArtifact* artifact) const override {
    if (artifact == nullptr) return std::vector<float>(kAnalyticFeatureCount, 0.0f);
    double bytes = tiled_input_bytes_per_output(workload, entity);
    // Scratch partial sums (gles-compute's k_groups): each of the k_groups workgroups of a tile
    // writes a float per output and the last one reads them all back, 8·k_groups bytes per
    // output. Its extra workgroups show in the dispatch (log2_groups, and fewer outputs per
    // invocation).
    if (artifact->scratch_floats > 0)
      bytes += 8.0 * static_cast<double>(artifact->scratch_floats) /
               static_cast<double>(workload.output_size());
    return compute_kernel_features(workload, *artifact, bytes);
  }

 private:
  ComputeEmitter emitter_;
};

}  // namespace

std::vector<std::unique_ptr<Template>> make_compute_templates(Target target, ComputeEmitter emitter,
                                                              std::vector<OpKind> ops) {
  std::vector<std::unique_ptr<Template>> out;
  for (OpKind op : ops) out.push_back(std::make_unique<ComputeTemplate>(target, op, emitter));
  return out;
}

}  // namespace webtune::detail
