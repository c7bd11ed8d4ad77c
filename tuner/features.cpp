/// \file features.cpp
/// Feature vectors of configs for the XGBoost cost model (see features.hpp).
///
/// AutoTVM's XGBoostCostModel offers "itervar", "knob" and "curve" features; the itervar and
/// curve kinds come from lowering the TIR loop nest, which webtune does not have. The knob
/// features here are AutoTVM's "knob" kind with values instead of choice indices: split factors
/// as log2, so that the same factor means the same feature on every workload of a template
/// (choice indices differ between workloads, since the candidate lists depend on the extents),
/// which is what transfer learning needs. The analytic features stand in for the itervar ones:
/// a handful of numbers read off the built artifact that say how the work is parallelised and
/// how much data each output costs. Everything is log-scaled, as AutoTVM's itervar features
/// are, because performance depends on ratios of sizes rather than on differences.
#include "tuner/features.hpp"

#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>
#include <variant>

#include "codegen/error_no.hpp"
#include "codegen/wasm_emitter.hpp"

namespace webtune {

namespace {

/// Names of the analytic features, in vector order; they follow the knob features.
constexpr const char* kAnalyticNames[] = {
    "log2_outputs_per_invocation",  // register tile (compute) or outputs per fragment
    "log2_invocations_per_group",   // workgroup size (compute) or draw buffers (fragment)
    "log2_groups",                  // workgroups dispatched (compute) or fragments drawn
    "log2_shared_bytes",            // log2(1 + bytes of shared memory)
    "log2_input_bytes_per_output",  // log2(1 + estimated bytes fetched per output)
    "log2_source_length",           // GLSL characters: unrolling and register pressure
    "channels_data",                // 1 (R32F / float) or 4 (RGBA32F / vec4 packing)
    "channels_weight",
    "channels_output",
};
constexpr size_t kAnalyticCount = std::size(kAnalyticNames);

float log2f_of(double x) {
  return static_cast<float>(std::log2(x > 0 ? x : 1.0));
}
float log2p1(double x) {
  return static_cast<float>(std::log2(1.0 + (x > 0 ? x : 0.0)));
}

/// Number of features one knob contributes: a split one per factor, others one.
size_t knob_width(const Knob& knob) {
  if (knob.kind == Knob::Kind::kSplit && !knob.candidates.empty())
    return std::get<std::vector<int64_t>>(knob.candidates.front()).size();
  return 1;
}

// Knob lookups by name that tolerate absent knobs (other templates), without exceptions.
const Knob* find_knob(const ConfigEntity& e, std::string_view name, size_t* position) {
  const KnobList& knobs = e.knobs();
  for (size_t i = 0; i < knobs.size(); ++i) {
    if (knobs[i].name == name) {
      *position = i;
      return &knobs[i];
    }
  }
  return nullptr;
}

std::optional<int64_t> int_knob(const ConfigEntity& e, std::string_view name) {
  size_t i = 0;
  const Knob* knob = find_knob(e, name, &i);
  if (knob == nullptr || knob->kind != Knob::Kind::kInt) return std::nullopt;
  return std::get<int64_t>(knob->candidates[e.choices()[i]]);
}

/// Factor `which` of split `name`, or nullopt when the knob is absent or shorter.
std::optional<int64_t> split_factor(const ConfigEntity& e, std::string_view name, size_t which) {
  size_t i = 0;
  const Knob* knob = find_knob(e, name, &i);
  if (knob == nullptr || knob->kind != Knob::Kind::kSplit) return std::nullopt;
  const auto& factors = std::get<std::vector<int64_t>>(knob->candidates[e.choices()[i]]);
  if (which >= factors.size()) return std::nullopt;
  return factors[which];
}

/// Bytes of input fetched from buffers or textures per output element: a first-order traffic
/// model from the knobs (caches ignored). A register (or fragment) tile of a×b outputs over a
/// reduction of length L fetches L·(a + b) values for a·b outputs; with shared memory the
/// workgroup's tile takes the place of the invocation's. Depthwise windows overlap instead.
double input_bytes_per_output(const Task& task, const ConfigEntity& e) {
  const Workload& w = task.workload;
  const double reduction = static_cast<double>(w.reduction_size());
  const double no_reuse = 4.0 * 2.0 * reduction;  // every operand fetched once per use
  const bool depthwise = w.op == OpKind::kDepthwiseConv2d;
  if (task.target == Target::kGlesFrag) {
    auto rows = int_knob(e, "out_rows"), cols = int_knob(e, "out_cols");
    if (!rows || !cols) return no_reuse;
    *rows *= int_knob(e, "rows_scale").value_or(1);  // the block of a vertex-stage kernel
    *cols *= int_knob(e, "col_scale").value_or(1);
    // Depthwise rows are different channels: only the columns (pixels) share weight fetches.
    if (depthwise) return 4.0 * reduction * (1.0 + 1.0 / static_cast<double>(*cols));
    return 4.0 * reduction * (1.0 / static_cast<double>(*rows) + 1.0 / static_cast<double>(*cols));
  }
  const bool shared = int_knob(e, "use_shared").value_or(0) != 0;
  const auto ty = split_factor(e, "tile_y", 1), ry = split_factor(e, "tile_y", 2);
  const auto tx = split_factor(e, "tile_x", 1), rx = split_factor(e, "tile_x", 2);
  if (!ty || !ry || !tx || !rx) return no_reuse;
  if (!depthwise) {
    const double a = static_cast<double>(shared ? *ty * *ry : *ry);
    const double b = static_cast<double>(shared ? *tx * *rx : *rx);
    return 4.0 * reduction * (1.0 / a + 1.0 / b);
  }
  const double r = static_cast<double>(w.kernel_h), s = static_cast<double>(w.kernel_w);
  const double stride = static_cast<double>(w.stride);
  const bool unrolled = int_knob(e, "unroll").value_or(0) != 0;
  // The window of input pixels behind an h×w block of outputs.
  auto window = [&](double h, double wd) {
    return ((h - 1) * stride + r) * ((wd - 1) * stride + s);
  };
  const double bh = static_cast<double>(shared ? *ty * *ry : *ry);
  const double bw = static_cast<double>(shared ? *tx * *rx : *rx);
  if (!shared && !unrolled) return no_reuse;  // run-time r, s loops: a fetch per tap
  return 4.0 * (window(bh, bw) + r * s) / (bh * bw);
}

}  // namespace

std::vector<float> config_features(const Task& task, const ConfigEntity& entity) {
  std::vector<float> features;
  const KnobList& knobs = entity.knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    const Knob& knob = knobs[k];
    const KnobValue& value = knob.candidates.at(entity.choices().at(k));
    switch (knob.kind) {
      case Knob::Kind::kSplit:
        for (int64_t factor : std::get<std::vector<int64_t>>(value))
          features.push_back(log2f_of(static_cast<double>(factor)));
        break;
      case Knob::Kind::kInt:
        features.push_back(log2p1(static_cast<double>(std::get<int64_t>(value))));
        break;
      case Knob::Kind::kString:
        // Category index: candidate lists of string knobs are the same on every workload of a
        // template, so positions transfer; trees split on them as on any ordinal.
        features.push_back(static_cast<float>(entity.choices()[k]));
        break;
    }
  }

  const size_t start = features.size();
  features.resize(start + kAnalyticCount, 0.0f);
  if (task.target == Target::kWasm) {
    // Read off the plan, not a built module: a build is an LLVM O3 compile and a link (tens of
    // ms), and the tuner asks for features of thousands of candidates.
    WasmPlan p;
    try {
      p = wasm_plan(task.workload, entity);
    } catch (const MeasureError&) {
      return features;
    }
    float* a = features.data() + start;
    const double tile = static_cast<double>(p.mr) * static_cast<double>(p.nr);
    const double vectors = tile / (p.simd ? 4.0 : 1.0);
    a[0] = log2f_of(tile);                                                     // outputs per tile
    a[1] = log2f_of(static_cast<double>(p.threads));                           // run(tid) calls
    a[2] = log2f_of(static_cast<double>(task.workload.output_size()) / tile);  // micro-tiles
    a[3] = log2p1(static_cast<double>(p.scratch_bytes_per_thread));            // packed panel
    // A register tile of MR × NR loads MR + NR values per K step for MR·NR outputs.
    a[4] = log2p1(4.0 * static_cast<double>(p.k) * (1.0 / p.mr + 1.0 / p.nr));
    // Instructions in the K loop body: loads, splats, mul + add per accumulator, times unroll.
    a[5] = log2f_of((2.0 * vectors + p.mr + p.nr) * p.unroll_k);
    a[6] = a[7] = a[8] = 1.0f;  // plain row-major floats
    return features;
  }
  KernelArtifact artifact;
  try {
    artifact = task.build(entity);
  } catch (const MeasureError&) {
    return features;  // invalid here: analytic features stay 0, as features.hpp promises
  }
  float* a = features.data() + start;
  const double outputs = static_cast<double>(task.workload.output_size());
  // Compute kernels (GLSL ES 3.10 and WGSL) share the workgroup/dispatch features.
  if (artifact.target == Target::kGlesCompute || artifact.target == Target::kWebgpu) {
    const double invocations =
        static_cast<double>(artifact.workgroup[0] * artifact.workgroup[1] * artifact.workgroup[2]);
    const double groups =
        static_cast<double>(artifact.dispatch[0] * artifact.dispatch[1] * artifact.dispatch[2]);
    a[0] = log2f_of(outputs / (invocations * groups));
    a[1] = log2f_of(invocations);
    a[2] = log2f_of(groups);
  } else {
    a[0] = log2f_of(static_cast<double>(artifact.output.rows_per_item * artifact.output.channels));
    a[1] = log2f_of(static_cast<double>(artifact.output.rows_per_item));
    a[2] = log2f_of(static_cast<double>(artifact.output.width * artifact.output.height));
  }
  a[3] = log2p1(static_cast<double>(artifact.shared_memory_bytes));
  a[4] = log2p1(input_bytes_per_output(task, entity));
  a[5] = log2f_of(static_cast<double>(artifact.source.size()));
  // Compute buffers are plain floats in the artifact (pack_axis −1); their vec4 views show up
  // in the vec4 knob instead.
  a[6] = artifact.inputs.size() > 0 ? static_cast<float>(artifact.inputs[0].channels()) : 1.0f;
  a[7] = artifact.inputs.size() > 1 ? static_cast<float>(artifact.inputs[1].channels()) : 1.0f;
  a[8] = static_cast<float>(artifact.output.channels);
  return features;
}

std::vector<std::string> feature_names(const Task& task) {
  std::vector<std::string> names;
  for (const Knob& knob : task.space->knobs()) {
    if (knob.kind == Knob::Kind::kSplit) {
      const size_t width = knob_width(knob);
      for (size_t i = 0; i < width; ++i)
        names.push_back("log2_" + knob.name + "[" + std::to_string(i) + "]");
    } else if (knob.kind == Knob::Kind::kInt) {
      names.push_back("log2p1_" + knob.name);
    } else {
      names.push_back(knob.name + "_index");
    }
  }
  for (const char* name : kAnalyticNames) names.emplace_back(name);
  return names;
}

}  // namespace webtune
