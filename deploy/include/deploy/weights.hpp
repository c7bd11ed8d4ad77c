#pragma once
/// \file weights.hpp
/// weights.bin (docs/package.md): every constant a kernel reads, already in that kernel's input
/// layout, each at a 256-byte aligned offset, each distinct (constant, layout) pair once.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_artifact.hpp"
#include "deploy/package.hpp"

namespace webtune::deploy {

/// Collects the package's weights and the bytes of weights.bin.
class WeightTable {
 public:
  /// The id of weight `name` stored as `floats`: a new entry when `key` (the constant's name and
  /// its layout, as the caller spells it) was not added before, else the earlier entry with that
  /// key (its floats are not compared again: one key, one packing). `texture` (frag targets) is
  /// the texture the runtime uploads it into: its width · height · channels must equal
  /// floats.size(); `shape` is written to the manifest when not empty. Throws
  /// std::invalid_argument naming the weight when the texture does not hold exactly its floats.
  int add(const std::string& key, const std::string& name, std::vector<float> floats,
          std::optional<PackageWeight::Texture> texture = std::nullopt,
          std::vector<int64_t> shape = {});

  const std::vector<PackageWeight>& weights() const { return weights_; }
  /// weights.bin as floats: weight i's floats start at float weights()[i].offset / 4; the gaps
  /// that alignment leaves are zeros.
  const std::vector<float>& data() const { return data_; }

 private:
  std::vector<PackageWeight> weights_;
  std::vector<float> data_;
  std::map<std::string, int> by_key_;
};

/// A row-major [rows, cols] matrix transposed to [cols, rows] (a Gemm's B stored [N, K] with
/// transB = 1 becomes the [K, N] weight the dense templates read). Throws std::invalid_argument
/// when `matrix` does not hold rows · cols floats.
std::vector<float> transpose_matrix(const std::vector<float>& matrix, int64_t rows, int64_t cols);

}  // namespace webtune::deploy
