/// \file template_impl.hpp
/// Private to codegen: the per-target template factories the registry calls, and feature helpers
/// that several templates share.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "codegen/template.hpp"

namespace webtune::detail {

/// One template per operator the target supports (glsl_frag_template.cpp, ...).
std::vector<std::unique_ptr<Template>> make_glsl_frag_templates();
std::vector<std::unique_ptr<Template>> make_glsl_compute_templates();
std::vector<std::unique_ptr<Template>> make_wgsl_templates();
std::vector<std::unique_ptr<Template>> make_wasm_templates();

/// The three functions of a compute-shader emitter (gles-compute, webgpu): its space, its
/// kernel for one entity and its default config.
struct ComputeEmitter {
  std::shared_ptr<ConfigSpace> (*space)(const Workload&);
  KernelArtifact (*emit)(const Workload&, const ConfigEntity&);
  ConfigEntity (*default_config)(const ConfigSpace&);
};

/// One template per op of `ops` for a compute-shader target: the emitter's functions, and the
/// analytic features of compute kernels (compute_kernel_features with the tiled traffic model),
/// which both compute targets share since their spaces have the same tiling knobs.
std::vector<std::unique_ptr<Template>> make_compute_templates(Target target, ComputeEmitter emitter,
                                                              std::vector<OpKind> ops);

/// log2(x), 0 for x ≤ 0.
float log2f_of(double x);
/// log2(1 + x), 0 for x ≤ 0.
float log2p1(double x);

/// The value of integer knob `name`, or nullopt when the entity has no such integer knob.
std::optional<int64_t> int_knob(const ConfigEntity& e, std::string_view name);
/// Factor `which` of split knob `name`, or nullopt when the knob is absent or shorter.
std::optional<int64_t> split_factor(const ConfigEntity& e, std::string_view name, size_t which);

/// Analytic features of a compute kernel (gles-compute, webgpu) read off its artifact: work
/// split from workgroup and dispatch, shared bytes, `input_bytes_per_output`, source length,
/// channels. See Template::features.
std::vector<float> compute_kernel_features(const Workload& workload, const KernelArtifact& a,
                                           double input_bytes_per_output);

/// Bytes fetched per output by a compute kernel whose knobs are tile_y / tile_x splits
/// [groups, threads, registers], use_shared and (depthwise) unroll: a first-order traffic
/// model, caches ignored.
double tiled_input_bytes_per_output(const Workload& workload, const ConfigEntity& e);

}  // namespace webtune::detail
