/// \file compute_epilogues.hpp
/// Test helpers for epilogues on the compute-shader GEMM and depthwise templates (issue 14,
/// gles-compute and webgpu): issue 14's four test epilogues, the small shapes they run on (a
/// regular one and an odd one per op), configs that mix guarded (inexact) and exact tilings, and
/// reference samples of every output element with every epilogue input. Header-only.
#pragma once

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/epilogue.hpp"
#include "codegen/measure.hpp"
#include "codegen/reference.hpp"
#include "codegen/task.hpp"
#include "support/odd_shapes.hpp"

namespace webtune::test {

/// `w` with the epilogue of suffix `suffix` ("+bias+relu", as Epilogue::suffix writes it).
inline Workload with_epilogue_suffix(Workload w, const std::string& suffix) {
  std::vector<std::string> tokens;
  size_t start = 1;  // after the leading '+'
  while (start <= suffix.size()) {
    const size_t end = std::min(suffix.find('+', start), suffix.size());
    tokens.push_back(suffix.substr(start, end - start));
    start = end + 1;
  }
  w.epilogue = Epilogue::parse(tokens);
  return w;
}

/// One of issue 14's test epilogues: a readable label for test names, and its suffix.
struct NamedEpilogue {
  const char* label;
  const char* suffix;
};

inline constexpr NamedEpilogue kTestEpilogues[] = {
    {"BiasRelu", "+bias+relu"},
    {"BiasClip06", "+bias+clip(0,6)"},
    {"BiasResidualBeforeRelu", "+bias+residual+relu"},
    {"BiasHardSwishResidualAfter", "+bias+hard_swish+residual"},
    {"BiasSiluResidualAfter", "+bias+silu+residual"},
    {"BiasSigmoid", "+bias+sigmoid"},
    {"BiasResidualBeforeHardSigmoid", "+bias+residual+hard_sigmoid"},
};

/// The shapes one op's epilogue cases run on: a regular one (axes that vec4 paths accept,
/// batch 2 where the op has images, so that bias channels and residual indices cross images)
/// and an odd one (prime axes, 7×7 outputs, 3 input channels).
struct EpilogueShapes {
  const char* op;  ///< "Dense", "Conv2d", "Depthwise": test names
  Workload regular;
  Workload odd;
};

inline std::vector<EpilogueShapes> epilogue_gemm_shapes() {
  return {
      // dense: N and K multiples of 4 (vec4 columns, four biases per vec4); then all prime.
      {"Dense", Workload::dense(16, 32, 24, "dense16x32x24"),
       Workload::dense(11, 13, 17, "dense11x13x17")},
      // conv2d: depth 36 and 36 pixels per image (vec4 paths), two images; then 7×7 outputs
      // from 3 input channels into 13 (prime) output channels.
      {"Conv2d", Workload::conv2d(2, 4, 6, 6, 8, 3, 1, 1, "conv4to8_6x6_n2"),
       Workload::conv2d(1, 3, 7, 7, 13, 3, 1, 1, "conv3to13_7x7")},
  };
}

inline EpilogueShapes epilogue_depthwise_shapes() {
  // Two images of 8 channels; then 13 (prime) channels on 7×7, stride 2.
  return {"Depthwise", Workload::depthwise_conv2d(2, 8, 9, 8, 3, 1, 1, "dw8_9x8_n2"),
          Workload::depthwise_conv2d(1, 13, 7, 7, 3, 2, 1, "dw13_7x7_s2")};
}

/// Whether `entity` reads vec4s with vec4-wide register columns (a vec4 knob at 1 and regs_x,
/// tile_x's inner factor, a multiple of 4): the vec4 store paths where the target has them.
inline bool has_vec4_columns(const ConfigEntity& entity) {
  for (const Knob& knob : entity.knobs())
    if (knob.name == "vec4")
      return entity.get_int("vec4") == 1 && entity.split("tile_x")[2] % 4 == 0;
  return false;
}

/// `count` distinct valid configs of `task` (seed `seed`): a fifth with vec4 columns where the
/// space has them (has_vec4_columns), then up to half with tiles past an axis (guarded edges),
/// the rest at random from the whole valid space. Fewer only when the space has fewer.
inline std::vector<ConfigEntity> mixed_configs(const Task& task, int count, uint64_t seed) {
  std::vector<int64_t> valid = task.space->valid_indices();
  std::mt19937_64 rng(seed);
  std::shuffle(valid.begin(), valid.end(), rng);
  std::vector<ConfigEntity> out;
  std::set<int64_t> taken;
  const auto take = [&](int until, auto&& wanted) {
    for (size_t i = 0; i < valid.size() && static_cast<int>(out.size()) < until; ++i) {
      if (taken.count(valid[i])) continue;
      const ConfigEntity e = task.space->get(valid[i]);
      if (!wanted(e)) continue;
      taken.insert(valid[i]);
      out.push_back(e);
    }
  };
  take(count / 5, has_vec4_columns);
  take(count / 2, has_inexact_split);
  take(count, [](const ConfigEntity&) { return true; });
  return out;
}

/// The reference at every output element, with every input of the workload (epilogue
/// included); the output must have at most kMaxSamples elements.
inline std::vector<ReferenceSample> every_output_with_epilogue(const Workload& w, uint64_t seed) {
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, seed);
  std::vector<ReferenceSample> samples;
  for (int64_t i = 0; i < w.output_size(); ++i) samples.push_back(reference_at(w, inputs, i));
  return samples;
}

}  // namespace webtune::test
