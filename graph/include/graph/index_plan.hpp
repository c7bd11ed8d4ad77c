#pragma once
/// \file index_plan.hpp
/// Where Slice and Pad read each output element, as the reference executor computes it
/// (graph/kernels/index_ops.cpp states the semantics): the reference kernels copy through these
/// plans, and GPU op kernels (deploy/) bake them into their index arithmetic, so clamping,
/// negative steps and reflection are written once.

#include <cstdint>
#include <string>
#include <vector>

namespace webtune::graph {

/// The box a Slice copies: output element at multi-index q reads X at begin[d] + q[d]·step[d]
/// along every axis d; the output's shape is `shape`.
struct SliceBox {
  std::vector<int64_t> begin, step, shape;
};

/// Slice's box over X of `x_shape` for `starts`, `ends`, `axes` (empty: 0, 1, …) and `steps`
/// (empty: all 1), with ONNX's rules: negative starts / ends count from the end, bounds beyond
/// the axis are clamped, negative steps run backwards. Throws GraphError for lists of different
/// lengths, an axis out of range or listed twice, a step 0.
SliceBox slice_box(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& starts,
                   const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                   std::vector<int64_t> steps);

/// Pad's source positions: result[d][o] is the position along axis d of X that output position
/// o reads, or −1 where it is the constant (mode "constant"); the output's extent along d is
/// result[d].size(). `pads` is [begin of each axis…, end of each axis…] over `axes` (empty: all
/// axes); negative pads crop; "edge" repeats the border, "reflect" mirrors about the first and
/// last element as often as needed. Throws GraphError for another mode, a pads list of the
/// wrong length, a crop beyond the axis, or edge / reflect padding of an empty axis.
std::vector<std::vector<int64_t>> pad_sources(const std::vector<int64_t>& x_shape,
                                              const std::string& mode,
                                              const std::vector<int64_t>& pads,
                                              std::vector<int64_t> axes);

}  // namespace webtune::graph
