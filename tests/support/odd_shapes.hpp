/// \file odd_shapes.hpp
/// Test helpers for non-divisible tiling (issue 14): shapes whose axes are primes, 7×7 output
/// planes, 3 input channels or MobileNet-like channel counts, configs whose tiles run past an
/// axis, and reference samples of every output element.
#pragma once

#include <algorithm>
#include <random>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/measure.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "codegen/task.hpp"

namespace webtune::test {

/// dense and conv2d shapes with prime and near-prime axes (the GEMM templates), each output at
/// most kMaxSamples elements so that every one of them is checked.
inline std::vector<Workload> odd_gemm_workloads() {
  return {
      // 1000³ scaled down: prime M, N and K; and N = 1000 (powers of two do not divide it).
      Workload::dense(53, 61, 97, "dense53x61x97"),
      Workload::dense(4, 1000, 100, "dense4x1000x100"),
      // 7×7 outputs from 3 input channels, 13 output channels (depth 27, 49 columns).
      Workload::conv2d(1, 3, 7, 7, 13, 3, 1, 1, "conv3to13_7x7"),
      // Stride 2 to 7×7, prime channels 5 → 7, two images.
      Workload::conv2d(2, 5, 14, 14, 7, 3, 2, 1, "conv5to7_s2_n2"),
      // Pointwise 17 → 11 on 7×7.
      Workload::conv2d(1, 17, 7, 7, 11, 1, 1, 0, "pw17to11_7x7"),
  };
}

/// depthwise conv2d with MobileNet-v2-like channel counts (24, 144, 960 = 2^6·15 scaled to 60).
inline std::vector<Workload> odd_depthwise_workloads() {
  return {
      Workload::depthwise_conv2d(1, 24, 13, 13, 3, 1, 1, "dw24_13x13"),
      Workload::depthwise_conv2d(1, 144, 7, 7, 3, 2, 1, "dw144_s2"),
      Workload::depthwise_conv2d(1, 60, 7, 7, 3, 1, 1, "dw60_7x7"),
  };
}

/// True when some split of `entity` runs past its axis (a guarded tile).
inline bool has_inexact_split(const ConfigEntity& entity) {
  for (const Knob& knob : entity.knobs())
    if (knob.kind == Knob::Kind::kSplit &&
        !split_is_exact(entity.split(knob.name), knob.split_extent))
      return true;
  return false;
}

/// `count` distinct valid configs of `task` drawn at random (seed `seed`) from those with an
/// inexact split; fewer only when the space has fewer.
inline std::vector<ConfigEntity> inexact_configs(const Task& task, int count, uint64_t seed) {
  std::vector<int64_t> inexact;
  for (int64_t index : task.space->valid_indices())
    if (has_inexact_split(task.space->get(index))) inexact.push_back(index);
  std::mt19937_64 rng(seed);
  std::shuffle(inexact.begin(), inexact.end(), rng);
  std::vector<ConfigEntity> out;
  for (size_t i = 0; i < inexact.size() && static_cast<int>(i) < count; ++i)
    out.push_back(task.space->get(inexact[i]));
  return out;
}

/// A reference sample of every output element (the output must have at most kMaxSamples).
inline std::vector<ReferenceSample> every_output(const Workload& workload, uint64_t seed) {
  const std::vector<float> data = seeded_tensor(seed, 0, workload.data_size());
  const std::vector<float> weight = seeded_tensor(seed, 1, workload.weight_size());
  std::vector<ReferenceSample> samples;
  for (int64_t i = 0; i < workload.output_size(); ++i)
    samples.push_back(reference_at(workload, data, weight, i));
  return samples;
}

}  // namespace webtune::test
