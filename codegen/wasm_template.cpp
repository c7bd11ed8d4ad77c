/// \file wasm_template.cpp
/// The wasm templates (wasm32 modules built with LLVM, wasm_emitter.hpp) for dense, conv2d and
/// depthwise_conv2d.
#include "codegen/wasm_emitter.hpp"
#include "template_impl.hpp"

namespace webtune::detail {
namespace {

/// What `threads` buy when `units` equal units of work are split statically (thread t owns
/// [t·units/T, (t+1)·units/T)): units over the largest share, ceil(units/T). 13 column blocks
/// over 2 threads give 13/7 = 1.86, not 2.
double parallel_speedup(int64_t units, int threads) {
  const int64_t most = (units + threads - 1) / threads;
  return most > 0 ? static_cast<double>(units) / static_cast<double>(most) : 1.0;
}

class WasmTemplate final : public Template {
 public:
  explicit WasmTemplate(OpKind op) : Template(Target::kWasm, op) {}

  std::shared_ptr<ConfigSpace> space(const Workload& workload) const override {
    return wasm_space(workload);
  }
  KernelArtifact emit(const Workload& workload, const ConfigEntity& entity) const override {
    return emit_wasm(workload, entity);
  }
  ConfigEntity default_config(const ConfigSpace& space) const override {
    return wasm_default(space);
  }

  // Read off the plan, not a built module: a build is an LLVM O3 compile and a link (tens of
  // ms), and the tuner asks for features of thousands of candidates.
  bool features_need_artifact() const override { return false; }

  std::vector<float> features(const Workload& workload, const ConfigEntity& entity,
                              const KernelArtifact* /*artifact*/) const override {
    const WasmPlan p = wasm_plan(workload, entity);  // MeasureError for a broken rule
    std::vector<float> f(kAnalyticFeatureCount, 0.0f);
    if (p.op == OpKind::kDepthwiseConv2d) {
      // The same meanings for the direct kernel: tile_h × tile_w outputs per tile, each R·S
      // step loads tile_h·tile_w/w inputs (w = 4 with simd) and one weight.
      const double tile = static_cast<double>(p.tile_h) * static_cast<double>(p.tile_w);
      const double vectors = tile / (p.simd ? 4.0 : 1.0);
      const double rs = static_cast<double>(workload.kernel_h * workload.kernel_w);
      f[0] = log2f_of(tile);
      f[1] = log2f_of(parallel_speedup(p.tasks(), p.threads));
      f[2] = log2f_of(static_cast<double>(workload.output_size()) / tile);
      f[3] = log2p1(static_cast<double>(p.scratch_bytes_per_thread));
      // Bytes loaded per output: inputs (a vector load per lane group; stride 2 gathers lanes
      // one by one) and the weight, per R·S step.
      const double lanes = p.simd && workload.stride == 1 ? 4.0 : 1.0;
      f[4] = log2p1(4.0 * rs * (1.0 / lanes + 1.0 / tile));
      // Instructions of one R·S step (loads, mul + add per accumulator, or one relaxed_madd
      // with fma), times R·S if unrolled.
      f[5] = log2f_of(((p.fma ? 2.0 : 3.0) * vectors + 1.0) * (p.unroll_rs ? rs : 1.0));
      f[6] = f[7] = f[8] = 1.0f;
      return f;
    }
    const double tile = static_cast<double>(p.mr) * static_cast<double>(p.nr);
    const double vectors = tile / (p.simd ? 4.0 : 1.0);
    f[0] = log2f_of(tile);  // outputs per tile
    // The speedup the static split allows: blocks over the most any thread gets.
    f[1] = log2f_of(parallel_speedup(p.split_rows ? p.row_blocks() : p.col_blocks(), p.threads));
    f[2] = log2f_of(static_cast<double>(workload.output_size()) / tile);  // micro-tiles
    f[3] = log2p1(static_cast<double>(p.scratch_bytes_per_thread));       // packed panel
    // A register tile of MR × NR loads MR + NR values per K step for MR·NR outputs.
    f[4] = log2p1(4.0 * static_cast<double>(p.k) * (1.0 / p.mr + 1.0 / p.nr));
    // Instructions in the K loop body: loads, splats, mul + add per accumulator (one
    // relaxed_madd with fma), times unroll.
    f[5] = log2f_of(((p.fma ? 1.0 : 2.0) * vectors + p.mr + p.nr) * p.unroll_k);
    f[6] = f[7] = f[8] = 1.0f;  // plain row-major floats
    return f;
  }
};

}  // namespace

std::vector<std::unique_ptr<Template>> make_wasm_templates() {
  std::vector<std::unique_ptr<Template>> out;
  for (OpKind op : {OpKind::kDense, OpKind::kConv2d, OpKind::kDepthwiseConv2d})
    out.push_back(std::make_unique<WasmTemplate>(op));
  return out;
}

}  // namespace webtune::detail
