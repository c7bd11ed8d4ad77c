/// \file weights.cpp
/// The weight table of a package: aligned offsets in weights.bin, one entry per (constant,
/// layout).
#include "deploy/weights.hpp"

#include <stdexcept>

namespace webtune::deploy {

int WeightTable::add(const std::string& key, const std::string& name, std::vector<float> floats,
                     std::optional<PackageWeight::Texture> texture, std::vector<int64_t> shape) {
  if (const auto it = by_key_.find(key); it != by_key_.end()) return it->second;
  if (texture &&
      texture->width * texture->height * texture->channels != static_cast<int64_t>(floats.size()))
    throw std::invalid_argument(
        "weight '" + name + "': a texture of " + std::to_string(texture->width) + "x" +
        std::to_string(texture->height) + "x" + std::to_string(texture->channels) +
        " does not hold its " + std::to_string(floats.size()) + " floats");
  constexpr size_t kAlignFloats = kWeightAlignment / sizeof(float);
  data_.resize((data_.size() + kAlignFloats - 1) / kAlignFloats * kAlignFloats, 0.0f);
  PackageWeight w;
  w.id = static_cast<int>(weights_.size());
  w.name = name;
  w.offset = static_cast<int64_t>(data_.size() * sizeof(float));
  w.floats = static_cast<int64_t>(floats.size());
  w.texture = texture;
  w.shape = std::move(shape);
  data_.insert(data_.end(), floats.begin(), floats.end());
  weights_.push_back(std::move(w));
  by_key_.emplace(key, weights_.back().id);
  return weights_.back().id;
}

std::vector<float> transpose_matrix(const std::vector<float>& matrix, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0 || static_cast<int64_t>(matrix.size()) != rows * cols)
    throw std::invalid_argument("transpose: " + std::to_string(matrix.size()) + " floats are no [" +
                                std::to_string(rows) + "," + std::to_string(cols) + "] matrix");
  std::vector<float> out(matrix.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = matrix[r * cols + c];
  return out;
}

}  // namespace webtune::deploy
