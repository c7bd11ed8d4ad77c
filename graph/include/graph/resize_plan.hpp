#pragma once
/// \file resize_plan.hpp
/// Where each output element of a Resize / Upsample reads its input: the taps (input index and
/// weight) of every output position along every axis, as the reference executor computes them
/// (graph/kernels/resize.cpp states the semantics). The reference kernel sums over them; GPU op
/// kernels (deploy/) bake them into tables, so every target picks the same input elements and
/// weights as the reference, to the last rounding of the coordinate transform.

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace webtune::graph {

/// One input element an output position reads along one axis, with its weight.
struct ResizeTap {
  int64_t index;  ///< position along the axis of X, in [0, n)
  double weight;
};

struct ResizePlan {
  std::vector<int64_t> out_shape;
  /// taps[d][o]: the taps of output position o along axis d (1 for nearest, 1–2 for linear, up
  /// to 4 for cubic); empty where the position lies outside tf_crop_and_resize's crop, whose
  /// elements are then `extrapolation`.
  std::vector<std::vector<std::vector<ResizeTap>>> taps;
  double extrapolation = 0.0;
};

/// The plan of Resize / Upsample `node` (its attributes: mode, coordinate_transformation_mode,
/// nearest_mode, cubic_coeff_a, exclude_outside, extrapolation_value) over X of `x_shape`, with
/// the node's roi, scales and sizes (each empty when absent; Resize-10 and Upsample: scales
/// only). `opset` < 11 or Upsample: the legacy asymmetric form. Throws GraphError for modes,
/// scales or sizes it does not handle.
ResizePlan resize_plan(const Node& node, const std::vector<int64_t>& x_shape,
                       const std::vector<float>& roi, const std::vector<float>& scales,
                       const std::vector<int64_t>& sizes, int64_t opset);

}  // namespace webtune::graph
