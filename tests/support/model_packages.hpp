/// \file model_packages.hpp
/// Small fake model packages (docs/package.md: a manifest.json and a weights.bin, no kernels)
/// for tests of model jobs on the farm: the tracker and the client read only the manifest's
/// model, target, inputs, outputs, tasks and estimated_ms, and weights.bin's size.
/// Header-only.
#pragma once

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "codegen/workload.hpp"

namespace webtune::testing_support {

/// What make_model_package wrote.
struct FakePackage {
  std::filesystem::path dir;
  std::string manifest_text;  ///< the exact bytes of manifest.json
};

/// Writes `root`/`name`/manifest.json for `target`, one task (dense n×n×n run by `nodes` graph
/// nodes), input [1, input_elements], output [1, output_elements], `estimated_ms` (null when
/// nullopt), and a weights.bin of `weights_bytes` zero bytes.
inline FakePackage make_model_package(const std::filesystem::path& root, const std::string& name,
                                      const std::string& target, int64_t n = 256, int nodes = 2,
                                      std::optional<double> estimated_ms = 1.5,
                                      int64_t input_elements = 12, int64_t output_elements = 10,
                                      int64_t weights_bytes = 4096) {
  namespace bj = boost::json;
  FakePackage p;
  p.dir = root / name;
  std::filesystem::create_directories(p.dir);
  bj::array node_names;
  for (int i = 0; i < nodes; ++i) node_names.emplace_back("/node" + std::to_string(i));
  bj::object task{{"name", "dense_1"},
                  {"workload", Workload::dense(n, n, n, "dense_1").to_json()},
                  {"nodes", std::move(node_names)},
                  {"source", "default"},
                  {"record_id", nullptr},
                  {"cost_ms", nullptr}};
  bj::object manifest{
      {"format", "webtune-package"},
      {"version", 1},
      {"model",
       bj::object{{"name", name}, {"file", name + ".onnx"}, {"sha256", std::string(64, 'a')}}},
      {"target", target},
      {"artifact_target", target == "webgl2" ? "gles-frag" : target},
      {"device_key", ""},
      {"inputs", bj::array{bj::object{
                     {"name", "input"}, {"shape", bj::array{1, input_elements}}, {"value", 0}}}},
      {"outputs", bj::array{bj::object{
                      {"name", "output"}, {"shape", bj::array{1, output_elements}}, {"value", 1}}}},
      {"tasks", bj::array{std::move(task)}},
      {"slots", bj::array{}},
      {"values", bj::array{}},
      {"weights", bj::array{}},
      {"steps", bj::array{}},
      {"layout_transforms", 0}};
  if (estimated_ms)
    manifest["estimated_ms"] = *estimated_ms;
  else
    manifest["estimated_ms"] = nullptr;
  p.manifest_text = bj::serialize(manifest);
  std::ofstream(p.dir / "manifest.json", std::ios::binary) << p.manifest_text;
  std::ofstream(p.dir / "weights.bin", std::ios::binary) << std::string(weights_bytes, '\0');
  return p;
}

}  // namespace webtune::testing_support
