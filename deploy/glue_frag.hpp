#pragma once
/// \file glue_frag.hpp
/// Private to deploy/'s glue kernels: the GLSL ES 3.00 pieces that read a tensor from any frag
/// storage (a texture placed as a TensorLayout, or a fragment kernel's render targets placed as
/// an OutputLayout) and write one placed as a TensorLayout. relayout_kernel is a source and a
/// destination with nothing between; op kernels with OpKernelOptions::input_storage /
/// output_layout put their operator between them. glue_relayout.cpp says how placement works.

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "deploy/storage.hpp"

namespace webtune::deploy::glue_frag {

/// The artifact inputs (sampler units in order) that bind `from`: its texture, or one texture
/// per render target ([width·height·channels], pack_axis 0 for RGBA). Throws
/// std::invalid_argument ("<what>: why") unless `from` is consistent frag storage of
/// `elements` elements.
std::vector<TensorLayout> source_layouts(const Storage& from, int64_t elements,
                                         const std::string& what);

/// GLSL `float <name>(int e)`: logical (row-major) element e of `from`, whose textures are the
/// samplers in<first_sampler> … (declared elsewhere).
std::string source_function(const std::string& name, const Storage& from, int first_sampler);

/// The sampler declarations of `inputs` (in0 …): sampler2D, or sampler2DArray for a
/// TensorLayout with layers (quad-layer render targets), with the precision lines they need.
std::string sampler_declarations(const std::vector<TensorLayout>& inputs);

/// Throws std::invalid_argument ("<what>: why") unless `to` places `elements` elements in a
/// texture within the device limits.
void check_destination(const TensorLayout& to, int64_t elements, const DeviceLimits& limits,
                       const std::string& what);

/// The output declaration and `void main()` that write each texel of `to` from `value(int e)`
/// (logical element e), padding 0. `same_source` (relayouts only; nullptr elsewhere): when it is
/// a texture of `to`'s shape and pack axis (sampler in0), whole texels are copied instead; when
/// it is render targets (samplers in0 …) whose output-matrix rows the pack axis steps over, each
/// texel's column is decoded once and `value` is not called (glue_relayout.cpp).
std::string destination_main(const TensorLayout& to, const std::string& value,
                             const Storage* same_source);

/// The artifact output of a kernel that writes `to`: one render target, rows 1, cols =
/// width·height·channels (its unpack gives the texels as they are).
OutputLayout destination_output(const TensorLayout& to);

}  // namespace webtune::deploy::glue_frag
