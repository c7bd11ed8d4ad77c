/// \file glsl_frag_template.cpp
/// The gles-frag templates (GLSL ES 3.00 fragment shaders, glsl_frag_emitter.hpp) for dense,
/// conv2d and depthwise conv2d.
#include "codegen/glsl_frag_emitter.hpp"
#include "template_impl.hpp"

namespace webtune::detail {
namespace {

class GlslFragTemplate final : public Template {
 public:
  explicit GlslFragTemplate(OpKind op) : Template(Target::kGlesFrag, op) {}

  std::shared_ptr<ConfigSpace> space(const Workload& workload) const override {
    return glsl_frag_space(workload);
  }
  KernelArtifact emit(const Workload& workload, const ConfigEntity& entity) const override {
    return emit_glsl_frag(workload, entity);
  }
  ConfigEntity default_config(const ConfigSpace& space) const override {
    return glsl_frag_default(space);
  }

  std::vector<float> features(const Workload& workload, const ConfigEntity& entity,
                              const KernelArtifact* artifact) const override {
    std::vector<float> f(kAnalyticFeatureCount, 0.0f);
    if (artifact == nullptr) return f;
    const KernelArtifact& a = *artifact;
    f[0] = log2f_of(static_cast<double>(a.output.rows_per_item * a.output.channels));
    f[1] = log2f_of(static_cast<double>(a.output.rows_per_item));
    f[2] = log2f_of(static_cast<double>(a.output.width * a.output.height));
    f[3] = log2p1(static_cast<double>(a.shared_memory_bytes));
    f[4] = log2p1(input_bytes_per_output(workload, entity));
    f[5] = log2f_of(static_cast<double>(a.source.size()));
    f[6] = a.inputs.size() > 0 ? static_cast<float>(a.inputs[0].channels()) : 1.0f;
    f[7] = a.inputs.size() > 1 ? static_cast<float>(a.inputs[1].channels()) : 1.0f;
    f[8] = static_cast<float>(a.output.channels);
    return f;
  }

 private:
  /// Bytes fetched per output: a fragment's block of out_rows × out_cols outputs (times the
  /// vertex stage's rows_scale × col_scale) over a reduction of length L fetches L·(a + b)
  /// values for a·b outputs; caches ignored.
  static double input_bytes_per_output(const Workload& w, const ConfigEntity& e) {
    const double reduction = static_cast<double>(w.reduction_size());
    auto rows = int_knob(e, "out_rows"), cols = int_knob(e, "out_cols");
    if (!rows || !cols) return 4.0 * 2.0 * reduction;  // every operand fetched once per use
    *rows *= int_knob(e, "rows_scale").value_or(1);    // the block of a vertex-stage kernel
    *cols *= int_knob(e, "col_scale").value_or(1);
    // Depthwise rows are different channels: only the columns (pixels) share weight fetches.
    if (w.op == OpKind::kDepthwiseConv2d)
      return 4.0 * reduction * (1.0 + 1.0 / static_cast<double>(*cols));
    return 4.0 * reduction * (1.0 / static_cast<double>(*rows) + 1.0 / static_cast<double>(*cols));
  }
};

}  // namespace

std::vector<std::unique_ptr<Template>> make_glsl_frag_templates() {
  std::vector<std::unique_ptr<Template>> out;
  for (OpKind op : {OpKind::kDense, OpKind::kConv2d, OpKind::kDepthwiseConv2d})
    out.push_back(std::make_unique<GlslFragTemplate>(op));
  return out;
}

}  // namespace webtune::detail
