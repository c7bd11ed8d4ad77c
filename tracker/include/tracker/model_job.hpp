/// \file model_job.hpp
/// A whole compiled model as a farm job (issue 16 item 3; MODEL_JOBS.md, docs/protocol.md
/// "Model jobs"): the model measure input a client submits, and what the farm reads of a built
/// model package (docs/package.md) to check and judge such a job. No networking here; the
/// package is read from the file system.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/measure.hpp"

namespace webtune::tracker {

/// Untimed runs of a model job before its measurements, at most.
inline constexpr int kMaxModelWarmup = 100;
/// A package's manifest.json larger than this is refused (a ResNet-18's is ~100 KiB).
inline constexpr std::uintmax_t kMaxManifestBytes = std::uintmax_t{64} << 20;

/// One reference sample of a model's output: a flat row-major index into the first output, the
/// CPU reference executor's value there, and the absolute tolerance an agent allows.
struct ModelSample {
  int64_t index = 0;
  double value = 0;
  double tolerance = 0;
};

/// A submit item's `input` for a model job:
/// {"kind":"model","model":NAME,"manifest_sha256":HEX,"seed":S,"samples":[{"index","value",
/// "tolerance"}],"options":{MeasureOptions...,"warmup":W}}.
struct ModelMeasureInput {
  std::string model;            ///< the package's folder name under the tracker's --models DIR
  std::string manifest_sha256;  ///< 64 lowercase hex digits: SHA-256 of its manifest.json bytes
  uint64_t seed = 0;            ///< the input is seeded_tensor(seed, 0, input elements)
  std::vector<ModelSample> samples;  ///< at most kMaxSamples
  MeasureOptions options;            ///< timeout_s: the whole job's budget
  int warmup = 3;                    ///< untimed runs first, in [0, kMaxModelWarmup]

  boost::json::object to_json() const;
  /// Reads and bounds every field (docs/protocol.md "Model jobs"): `kind` must be "model",
  /// `model` a valid_model_name, `manifest_sha256` 64 lowercase hex digits, `seed` a whole
  /// number ≥ 0, `samples` (optional) at most kMaxSamples objects with an index ≥ 0 and a finite
  /// value and tolerance ≥ 0, `options` (optional) as MeasureOptions::from_json plus `warmup`.
  /// Throws std::invalid_argument naming the field.
  static ModelMeasureInput from_json(const boost::json::value& value);
};

/// True when a submit item's input is a model measure input (`"kind":"model"`); false for a
/// kernel MeasureInput (no `kind`, or `"kind":"kernel"`). Throws std::invalid_argument for any
/// other `kind` (or one that is not a string).
bool is_model_input(const boost::json::value& input);

/// 1 to 100 characters of [A-Za-z0-9._-], not starting with '.': a package folder name that
/// cannot climb out of the models folder.
bool valid_model_name(std::string_view name);

/// The device-key family that runs packages of a manifest's `target`: webgl2 → "webgl2", webgpu
/// → "webgpu", wasm → "wasm", gles-compute and gles-frag → "gles". Throws std::invalid_argument
/// for another target.
std::string key_family_for_target(std::string_view target);

/// The family of a key or key pattern: its text before the first ':' (all of it when none).
std::string key_family(std::string_view key);

/// Lowercase hex of the SHA-256 of `bytes` (OpenSSL).
std::string sha256_hex(std::string_view bytes);

/// What the farm reads of a built package (docs/package.md).
struct ModelPackageFacts {
  std::string dir;              ///< the package folder read
  std::string manifest_sha256;  ///< of manifest.json's bytes
  std::string model_name;       ///< manifest "model"."name"
  std::string model_sha256;     ///< manifest "model"."sha256": the ONNX file's hash
  std::string target;           ///< manifest "target" (webgl2, webgpu, wasm, gles-frag, ...)
  std::string device_key;       ///< manifest "device_key" ("" when none was given)
  std::string input_name, output_name;             ///< of the first input and first output
  std::vector<int64_t> input_shape, output_shape;  ///< of the first input and first output
  int64_t input_elements = 0, output_elements = 0;
  int64_t weights_bytes = 0;  ///< size of weights.bin (0 when absent)
  /// Σ over manifest tasks of Workload::flops() × len(nodes): the main ops of one inference
  /// (glue kernels not counted).
  double flops = 0;
  /// Compulsory bytes of one inference: weights.bin + 4 × (input + output elements).
  double bytes = 0;
  std::optional<double> estimated_ms;  ///< manifest "estimated_ms" (null: a task has no cost)
};

/// Reads `dir`/manifest.json (at most kMaxManifestBytes) and the size of `dir`/weights.bin.
/// Throws std::invalid_argument naming the file and the field, e.g. "package 'x': manifest.json:
/// tasks[3].workload: ...", when a file cannot be read or the manifest is not a format-1
/// webtune package.
ModelPackageFacts read_model_package(const std::string& dir);

/// Package facts by folder, read again only when manifest.json or weights.bin changed (size or
/// modification time): a submit of many model jobs, or of a large manifest, must not hash the
/// same file over and over on the tracker's one thread. Holds at most kMaxEntries packages
/// (forgets them all past that). Not thread-safe.
class ModelPackageCache {
 public:
  static constexpr size_t kMaxEntries = 64;
  /// read_model_package(dir), from the cache when the files are unchanged; throws as it does.
  const ModelPackageFacts& get(const std::string& dir);
  size_t reads() const { return reads_; }  ///< packages read from disk so far

 private:
  struct Entry {
    std::string stamp;  // sizes and modification times of the two files
    ModelPackageFacts facts;
  };
  std::map<std::string, Entry> entries_;
  size_t reads_ = 0;
};

}  // namespace webtune::tracker
