#pragma once
/// \file window_plan.hpp
/// ConvTranspose's window as the reference executor computes it (graph/kernels/conv_pool.cpp
/// states the semantics): the reference scatters through it, and GPU op kernels (deploy/)
/// gather through it, so the output size and padding rules (pads, auto_pad, output_shape,
/// output_padding) are written once.

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace webtune::graph {

/// Per spatial axis j of X [N, C, spatial...]: input extent in[j], kernel k[j], stride s[j],
/// dilation d[j], the padding cut from the scatter's start and end, and the output extent
/// out[j]. Input position i, tap t reach output position i·s − pad_begin + t·d (when inside
/// [0, out)). pad_end < 0: the output reaches past the scatter (zeros there).
struct ConvTransposeGeometry {
  int64_t group = 1;
  std::vector<int64_t> in, k, s, d, pad_begin, pad_end, out;
};

/// The geometry of ConvTranspose `node` (attributes group, kernel_shape, strides, dilations,
/// pads, auto_pad, output_padding, output_shape) over X of `x_shape` and W of `w_shape`
/// ([C, M/group, kernel...]), 1 to 3 spatial axes. Throws GraphError for shapes or attributes
/// that do not fit, naming what.
ConvTransposeGeometry conv_transpose_geometry(const Node& node, const std::vector<int64_t>& x_shape,
                                              const std::vector<int64_t>& w_shape);

}  // namespace webtune::graph
