#pragma once
/// \file model_recipe.hpp
/// Corpus skeletons (tests/data/corpus/, bench/corpus/export_corpus.py): real ONNX exports
/// whose large float initializers keep their name, dims and type but carry, instead of their
/// data, a recipe in the initializer's doc_string:
///
///     webtune-recipe uniform lo=<L> hi=<H> seed=<S>
///
/// restore_recipes() fills each such initializer with element i = L + (H − L) · u_i (computed
/// in double, rounded to float32 once), u_i = (x_i >> 40) · 2^-24 ∈ [0, 1), x_i the i-th
/// splitmix64 output (codegen/seeded_random.hpp) from state S. The exporter takes L and H from
/// the real tensor (its mean ∓ √3 · standard deviation, clamped to its min and max), so the
/// restored weights keep the scale and sign of the originals: a model restored this way runs
/// with activations of a realistic range, which a test of kernels against the CPU reference
/// needs, though its outputs are not the original's.

#include <cstdint>
#include <string>

namespace webtune::graph {

/// The prefix of a recipe doc_string.
inline constexpr const char* kRecipePrefix = "webtune-recipe ";

/// The serialized ModelProto `model_bytes` with every recipe initializer filled (raw_data,
/// little-endian) and its doc_string cleared; `restored`, when given, gets how many. A model
/// without recipes comes back unchanged in content. Throws GraphError naming `source` and the
/// initializer for bytes that are not a ModelProto, a recipe it cannot read (an unknown kind,
/// a missing or non-finite field, hi < lo), a recipe on a tensor that is not float32 or already
/// has data, and a tensor of more than 2^31 elements.
std::string restore_recipes(const std::string& model_bytes, const std::string& source,
                            int* restored = nullptr);

}  // namespace webtune::graph
