/// \file tiny_model.hpp
/// The small graph the model-job tests (model_job_test, model_job_browser_test) build packages
/// of: x [1,8,8,8] → Relu → Conv 3×3 (8→8, pad 1, bias) → Relu → y, i.e. one conv task and two
/// op kernels, with fixed weights. Plus reading a package file back as bytes. Header-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "tracker/model_job.hpp"

namespace webtune::testing_support {

/// The input of a model job on `model` (manifest hash `manifest_sha256`, seeded input `seed`)
/// with samples of `reference` (its output on that input) at `indices`, each within 1e-3 × max
/// |output| + 1e-5; `repeat` costs of 2 runs each after 2 warm-up runs, 60 s budget.
inline tracker::ModelMeasureInput model_input_with_samples(
    const std::string& model, const std::string& manifest_sha256, uint64_t seed,
    const std::vector<float>& reference, const std::vector<int64_t>& indices, int repeat) {
  tracker::ModelMeasureInput in;
  in.model = model;
  in.manifest_sha256 = manifest_sha256;
  in.seed = seed;
  double scale = 0;
  for (float v : reference) scale = std::max(scale, std::abs(double(v)));
  for (int64_t index : indices)
    in.samples.push_back({index, reference.at(size_t(index)), 1e-3 * scale + 1e-5});
  in.options.repeat = repeat;
  in.options.number = 2;
  in.options.timeout_s = 60;
  in.warmup = 2;
  return in;
}

/// A float tensor `name` of `shape`, a constant when `data` is given.
inline graph::Tensor float_tensor(const std::string& name, std::vector<int64_t> shape,
                                  std::optional<std::vector<float>> data = std::nullopt) {
  graph::Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.float_data = std::move(data);
  return t;
}

/// x [1,8,8,8] → Relu → Conv 3×3 (8→8, pad 1, bias) → Relu → y: one task and two op kernels.
inline graph::Graph tiny_graph() {
  graph::Graph g;
  g.name = "tiny";
  g.inputs = {"x"};
  g.outputs = {"y"};
  std::vector<float> w(8 * 8 * 9), b(8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(int(i % 7) - 3);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>(i);
  g.tensors["x"] = float_tensor("x", {1, 8, 8, 8});
  g.tensors["r"] = float_tensor("r", {1, 8, 8, 8});
  g.tensors["w"] = float_tensor("w", {8, 8, 3, 3}, w);
  g.tensors["b"] = float_tensor("b", {8}, b);
  g.tensors["c"] = float_tensor("c", {1, 8, 8, 8});
  g.tensors["y"] = float_tensor("y", {1, 8, 8, 8});
  g.nodes.push_back({"relu", "Relu", {"x"}, {"r"}, {}, {}});
  graph::Node conv{"conv", "Conv", {"r", "w", "b"}, {"c"}, {}, {}};
  conv.attributes["kernel_shape"] = std::vector<int64_t>{3, 3};
  conv.attributes["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  conv.attributes["strides"] = std::vector<int64_t>{1, 1};
  g.nodes.push_back(conv);
  g.nodes.push_back({"relu2", "Relu", {"c"}, {"y"}, {}, {}});
  g.validate();
  return g;
}

/// The bytes of `path` ("" when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace webtune::testing_support
