#pragma once
/// \file package.hpp
/// A model package's manifest (docs/package.md, format version 1) as C++ structs: what the
/// planner (planner.hpp) writes to DIR/manifest.json and what the runtimes (the native runner,
/// the JavaScript runtime's tests) read back. to_json writes exactly the format of
/// docs/package.md; from_json reads it and checks every reference (value, slot, weight ids;
/// kernel file names), throwing std::invalid_argument whose message names the field, e.g.
/// "manifest: steps[12].inputs[1]: weight 40 does not exist (the manifest has 38 weights)".
///
/// Ids are positions: values[i].id == i, slots[i].id == i, weights[i].id == i (from_json
/// refuses anything else), so a runtime indexes the vectors by id.

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/target.hpp"
#include "codegen/workload.hpp"
#include "deploy/storage.hpp"

namespace webtune::deploy {

/// The manifest's "format" and "version".
inline constexpr std::string_view kPackageFormat = "webtune-package";
inline constexpr int kPackageVersion = 1;
/// Alignment in bytes of every weight's offset in weights.bin.
inline constexpr int64_t kWeightAlignment = 256;

/// "model": the ONNX file the package was built from.
struct PackageModel {
  std::string name;    ///< the graph's name, else the file's stem ("resnet18")
  std::string file;    ///< the file name without its folder ("resnet18.onnx")
  std::string sha256;  ///< lowercase hex of the file's SHA-256 (64 characters)
};

/// One of "inputs" / "outputs": a graph input or output and the value that holds it.
struct PackageTensor {
  std::string name;
  std::vector<int64_t> shape;
  int value = -1;
};

/// Where a task's config came from: a record of the device key itself, a record of another
/// device of the same family (key prefix before ':'), or the template's default config.
enum class TaskSource { kRecord, kPrefix, kDefault };
/// "record", "prefix" or "default".
std::string_view task_source_name(TaskSource source);
/// Inverse of task_source_name; throws std::invalid_argument naming the three.
TaskSource task_source_from_name(std::string_view name);

/// One of "tasks": a tuned kernel (a graph::ExtractedTask) and the config the package runs.
struct PackageTask {
  std::string name;  ///< "conv2d_1", as graph::extract_tasks names it
  Workload workload;
  std::vector<std::string> nodes;  ///< the graph nodes that run it
  TaskSource source = TaskSource::kDefault;
  std::string record_device_key;     ///< the device key of the record used; "" for kDefault
  std::optional<int64_t> record_id;  ///< the trial's id in the records; nullopt for kDefault
  boost::json::object config;        ///< ConfigEntity::to_json of the config used
  std::optional<double> cost_ms;     ///< the record's mean cost (ms); nullopt for kDefault
};

/// One of "slots": one buffer / array / texture of the memory pool, created once at load.
struct PackageSlot {
  /// kBuffer: a storage buffer (gles-compute, webgpu); kArray: a Float32Array (wasm); kTexture:
  /// a float texture (gles-frag / webgl2; R32F with 1 channel, RGBA32F with 4).
  enum class Kind { kBuffer, kArray, kTexture };
  int id = -1;
  Kind kind = Kind::kBuffer;
  int64_t floats = 0;             ///< kBuffer, kArray: capacity in floats
  int64_t width = 0, height = 0;  ///< kTexture
  int channels = 1;               ///< kTexture: 1 or 4
  /// kTexture: 0 for a 2D texture, else a 2D array texture of this many layers (the quad
  /// layers of OutputLayout::quad_layers; JSON "layers", absent when 0).
  int layers = 0;
  /// Bytes it takes: floats · 4, or width · height · channels · max(layers, 1) · 4.
  int64_t bytes() const;
};
/// "buffer", "array" or "texture".
std::string_view slot_kind_name(PackageSlot::Kind kind);

/// One of "values": a logical row-major tensor between steps and its storage.
struct PackageValue {
  int id = -1;
  std::string name;  ///< the graph tensor's name, or a planner-made name for a relayout's copy
  std::vector<int64_t> shape;
  Storage storage;
};

/// One of "weights": a constant a kernel reads, pre-packed in its device layout in weights.bin.
struct PackageWeight {
  int id = -1;
  std::string name;    ///< the graph constant's name (with "/T" when transposed, "@layout" ...)
  int64_t offset = 0;  ///< byte offset in weights.bin, a multiple of kWeightAlignment
  int64_t floats = 0;  ///< floats stored there (texture: width · height · channels)
  struct Texture {
    int64_t width = 0, height = 0;
    int channels = 1;
  };
  std::optional<Texture> texture;  ///< frag targets only: the texture to upload it into
  /// The constant's logical shape, written only for a weight that a wasm op step reads (the
  /// JavaScript runtime broadcasts it, e.g. a [C,1,1] scale); empty: not written (1-D).
  std::vector<int64_t> shape;
};

/// One input of a kernel step, in the artifact's binding order (op steps on wasm: the node's
/// input order).
struct StepInput {
  /// kValue: {"value": id}; kWeight: {"weight": id}; kInts (wasm op steps only): {"ints":
  /// [...]}, an int64 constant operand (a Pad's pads, a Slice's starts ...), given inline;
  /// kNone (wasm op steps only): null, an omitted optional input.
  enum class Kind { kValue, kWeight, kInts, kNone };
  Kind kind = Kind::kValue;
  int id = -1;                ///< kValue, kWeight
  std::vector<int64_t> ints;  ///< kInts

  static StepInput value(int id) { return {Kind::kValue, id, {}}; }
  static StepInput weight(int id) { return {Kind::kWeight, id, {}}; }
};

/// A step's "op" (wasm op steps, which have no kernel file): the ONNX operator the runtime's
/// JavaScript runs, with the node's attributes (ints, floats, strings and their lists as JSON).
struct PackageOp {
  std::string type;  ///< ONNX op type, e.g. "MaxPool"
  boost::json::object attributes;
  int64_t opset = 13;  ///< the model's default-domain opset (Softmax's axis semantics change at 13)
};

/// One of "steps" (docs/package.md, STEP).
struct PackageStep {
  enum class Kind { kUpload, kKernel, kAlias, kDownload };
  enum class Role { kTask, kRelayout, kOp };
  Kind kind = Kind::kKernel;
  /// kUpload, kAlias, kDownload: the value uploaded, aliased or downloaded.
  int value = -1;
  // kKernel only:
  Role role = Role::kTask;
  std::string kernel;  ///< "kernels/003.json"; "" = null (wasm op steps: see `op`)
  std::string node;    ///< the graph node it runs (a relayout: the node whose input it feeds)
  std::string task;    ///< the task's name for role task; "" = null otherwise
  std::vector<StepInput> inputs;
  int output = -1;              ///< the value it writes
  std::optional<PackageOp> op;  ///< wasm op steps only
};
/// "upload", "kernel", "alias", "download" / "task", "relayout", "op".
std::string_view step_kind_name(PackageStep::Kind kind);
std::string_view step_role_name(PackageStep::Role role);

/// "wasm_memory" (wasm packages; docs/package.md "wasm linear memory"): the one WebAssembly
/// memory every kernel of the package imports. Every slot and every weight a kernel reads lives
/// in it at a fixed byte offset, and each kernel was built with its tensors at those offsets,
/// so a step reads its inputs and writes its output where they are: nothing is copied between
/// steps. Offsets are 64-byte aligned, at or past 64 KiB (the modules' stack lies below), each
/// region followed by 256 readable bytes of slack, and no two regions overlap.
struct WasmMemory {
  int64_t pages = 0;    ///< 64 KiB pages, initial = maximum
  bool shared = false;  ///< a SharedArrayBuffer memory: some kernel runs more than one thread
  std::vector<int64_t> slot_offsets;    ///< byte offset of each slot (slots[i])
  std::vector<int64_t> weight_offsets;  ///< byte offset of each weight, −1: not in the memory
  int64_t scratch_offset = 0;           ///< the kernels' scratch, past everything else
};

/// The whole manifest.json.
struct Manifest {
  PackageModel model;
  std::string target;  ///< as the user named it: webgl2, webgpu, wasm, gles-compute, gles-frag
  Target artifact_target = Target::kGlesFrag;  ///< codegen's Target of every kernel
  std::string device_key;                      ///< "" = none given
  std::vector<PackageTensor> inputs, outputs;
  std::vector<PackageTask> tasks;
  std::vector<PackageSlot> slots;
  std::vector<PackageValue> values;
  std::vector<PackageWeight> weights;
  std::vector<PackageStep> steps;
  int layout_transforms = 0;           ///< relayout steps
  std::optional<double> estimated_ms;  ///< null when some task has no recorded cost
  /// wasm packages built with the linear memory (every wasm package `webtune build` writes);
  /// absent: each kernel has a memory of its own and the runtime copies between them.
  std::optional<WasmMemory> wasm_memory;

  boost::json::object to_json() const;
  /// Parses and checks a manifest (see the file comment). Throws std::invalid_argument naming
  /// the field for a wrong format or version, a missing or mistyped field, an id that is not
  /// its position, or a reference to a value, slot, weight or task that does not exist.
  static Manifest from_json(const boost::json::value& value);
};

/// Reads DIR/manifest.json (json::read_file) and Manifest::from_json. Throws std::runtime_error
/// naming the path when it cannot be read, std::invalid_argument (prefixed with the path) when
/// it is not a valid manifest.
Manifest read_manifest(const std::string& dir);

}  // namespace webtune::deploy
