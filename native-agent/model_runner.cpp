/// \file model_runner.cpp
/// A model package on the current GL context (model_runner.hpp): load once, then run the steps.
///
/// Everything a run needs is resolved at load into a flat list of Steps (GL names, not ids), so
/// that a run is only binds, draws / dispatches, one upload and one read-back. All GL objects
/// belong to one gl::GlObjects, deleted with the runner.
#include "native_agent/model_runner.hpp"

#include <EGL/egl.h>
#include <GLES3/gl32.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "codegen/json_util.hpp"
#include "codegen/kernel_artifact.hpp"
#include "deploy/package.hpp"
#include "gl_kernel.hpp"

namespace webtune {
namespace {

using deploy::Manifest;
using deploy::PackageSlot;
using deploy::PackageStep;
using deploy::Storage;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// "step 7 (kernel kernels/003.json, node '/layer1/layer1.0/conv1/Conv')", "step 0 (upload of
/// value 0 'input')": how every message about a step starts.
std::string describe_step(const Manifest& manifest, int index) {
  const PackageStep& step = manifest.steps[static_cast<size_t>(index)];
  std::string text = "step " + std::to_string(index) + " (";
  auto value_name = [&](int id) {
    std::string name = "value " + std::to_string(id);
    if (id >= 0 && id < static_cast<int>(manifest.values.size()))
      name += " '" + manifest.values[static_cast<size_t>(id)].name + "'";
    return name;
  };
  switch (step.kind) {
    case PackageStep::Kind::kUpload:
      return text + "upload of " + value_name(step.value) + ")";
    case PackageStep::Kind::kDownload:
      return text + "download of " + value_name(step.value) + ")";
    case PackageStep::Kind::kAlias:
      return text + "alias " + value_name(step.value) + ")";
    case PackageStep::Kind::kKernel:
      break;
  }
  return text + std::string(deploy::step_role_name(step.role)) + " kernel " +
         (step.kernel.empty() ? std::string("(none)") : step.kernel) + ", node '" + step.node +
         "')";
}

/// Rebuilds a row-major tensor from a texture's texels placed as `layout` says: the inverse of
/// TensorLayout::pack (packed element t at texel t, its channel c the logical element 4·p + c
/// along the packed axis).
std::vector<float> unpack_texture(const TensorLayout& layout, const std::vector<float>& texels) {
  const int64_t elements = product(layout.shape);
  std::vector<float> out(static_cast<size_t>(elements));
  if (layout.pack_axis < 0) {
    std::copy(texels.begin(), texels.begin() + elements, out.begin());
    return out;
  }
  const std::vector<int64_t> packed = layout.packed_shape();
  const int rank = static_cast<int>(layout.shape.size());
  const int axis = layout.pack_axis;
  std::vector<int64_t> stride(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * layout.shape[d + 1];
  std::vector<int64_t> coord(static_cast<size_t>(rank), 0);
  const int64_t count = layout.packed_elements();
  for (int64_t t = 0; t < count; ++t) {
    int64_t base = 0;
    for (int d = 0; d < rank; ++d) base += (d == axis ? coord[d] * 4 : coord[d]) * stride[d];
    for (int c = 0; c < 4 && coord[axis] * 4 + c < layout.shape[axis]; ++c)
      out[static_cast<size_t>(base + c * stride[axis])] = texels[static_cast<size_t>(t * 4 + c)];
    for (int d = rank - 1; d >= 0; --d) {
      if (++coord[d] < packed[d]) break;
      coord[d] = 0;
    }
  }
  return out;
}

/// One compiled kernel file, and its own scratch buffers if it asks for any (gles-compute
/// k_groups): every step that runs this kernel binds them. Steps run one after another with a
/// storage barrier between dispatches (gl::run_kernel), and the kernel leaves its counters at
/// zero after each dispatch, so the steps of one kernel can share them; two kernels never do.
struct Kernel {
  KernelArtifact artifact;
  GLuint program = 0;
  gl::ScratchBuffers scratch;
};

/// A step, resolved to GL names.
struct Step {
  PackageStep::Kind kind = PackageStep::Kind::kAlias;
  const Kernel* kernel = nullptr;
  std::vector<GLuint> textures;  ///< frag kernel: texture on unit i; upload/download: the slot(s)
  std::vector<bool> arrays;      ///< frag kernel: whether unit i's texture is a 2D array
  std::vector<GLuint> buffers;   ///< compute kernel: input i's buffer; upload/download: the slot
  GLuint framebuffer = 0;        ///< frag kernel: its render targets; download: to read them
  GLuint output_buffer = 0;      ///< compute kernel
  Storage storage;               ///< upload / download: the value's own (alias resolved)
  int64_t elements = 0;          ///< upload / download: the value's element count
};

}  // namespace

struct ModelRunner::Impl {
  std::unique_ptr<EglContext> context;
  std::string dir;
  Manifest manifest;
  bool fragment = false;
  // Nothing below owns GL names: `objects` does, and goes first (members die in reverse).
  std::map<std::string, std::unique_ptr<Kernel>> kernels;
  std::vector<Step> steps;
  std::vector<GLuint> slot_textures, slot_buffers;  ///< by slot id (0 where the kind differs)
  std::vector<GLuint> weight_textures, weight_buffers;
  GLuint vertex_array = 0;
  int kernel_steps = 0;
  int64_t runs = 0;
  bool check_every_step = false;
  gl::GlObjects objects;  // the last member, destroyed first, while the context lives

  [[noreturn]] void fail(int step, const std::string& message) const {
    throw ModelRunError(
        step, step >= 0 ? describe_step(manifest, step) + ": " + message : dir + ": " + message);
  }

  const deploy::PackageValue& value(int id) const {
    return manifest.values[static_cast<size_t>(id)];
  }
  /// The value whose storage `id` shares (follows alias chains; a cycle is an error).
  const deploy::PackageValue& resolve(int step, int id) const {
    int current = id;
    for (size_t hops = 0; value(current).storage.kind == Storage::Kind::kAlias; ++hops) {
      if (hops > manifest.values.size())
        fail(step, "value " + std::to_string(id) + " aliases in a cycle");
      current = value(current).storage.alias_of;
      if (current < 0 || current >= static_cast<int>(manifest.values.size()))
        fail(step, "value " + std::to_string(id) + " aliases a value that does not exist");
    }
    return value(current);
  }

  void load() {
    try {
      manifest = deploy::read_manifest(dir);
    } catch (const std::exception& e) {
      throw ModelRunError(-1, std::string("cannot load the package: ") + e.what());
    }
    if (manifest.artifact_target != Target::kGlesFrag &&
        manifest.artifact_target != Target::kGlesCompute) {
      fail(-1, "the package's kernels are " + std::string(target_name(manifest.artifact_target)) +
                   " (target " + manifest.target +
                   "); the native runner runs gles-frag and gles-compute packages");
    }
    fragment = manifest.artifact_target == Target::kGlesFrag;
    if (manifest.inputs.size() != 1 || manifest.outputs.size() != 1) {
      fail(-1, "the native runner runs models with one input and one output; this package has " +
                   std::to_string(manifest.inputs.size()) + " inputs and " +
                   std::to_string(manifest.outputs.size()) + " outputs");
    }
    context->make_current();
    if (std::string stale = gl::drain_gl_errors(); !stale.empty()) {
      spdlog::warn("GL errors left over before loading the model were dropped: {}", stale);
    }
    try {
      create_slots();
      upload_weights();
      vertex_array = gl::create_vertex_array(objects);
      gl::check_gl("creating the slots and uploading the weights");
    } catch (const ModelRunError&) {
      throw;
    } catch (const std::exception& e) {
      fail(-1, e.what());
    }
    for (int i = 0; i < static_cast<int>(manifest.steps.size()); ++i) {
      try {
        steps.push_back(resolve_step(i));
        gl::check_gl("preparing the step");
      } catch (const ModelRunError&) {
        throw;
      } catch (const std::exception& e) {
        fail(i, e.what());
      }
    }
    spdlog::info("loaded {} ({}): {} steps, {} kernels compiled, {} slots, {} weights",
                 manifest.model.name, manifest.target, steps.size(), kernels.size(),
                 manifest.slots.size(), manifest.weights.size());
  }

  void create_slots() {
    slot_textures.assign(manifest.slots.size(), 0);
    slot_buffers.assign(manifest.slots.size(), 0);
    const int64_t max_size = context->info().limits.max_texture_size;
    for (const PackageSlot& slot : manifest.slots) {
      const std::string what = "slot " + std::to_string(slot.id);
      switch (slot.kind) {
        case PackageSlot::Kind::kTexture:
          if (!fragment) fail(-1, what + " is a texture in a gles-compute package");
          if (slot.width < 1 || slot.height < 1 || slot.width > max_size ||
              slot.height > max_size || (slot.channels != 1 && slot.channels != 4) ||
              slot.layers < 0 || slot.layers > 32 || (slot.layers > 0 && slot.channels != 4)) {
            fail(-1, what + " is a " + std::to_string(slot.width) + "x" +
                         std::to_string(slot.height) + "x" + std::to_string(slot.channels) +
                         " texture; this device takes 1.." + std::to_string(max_size) +
                         " texels a side and 1 or 4 channels (layers: 0, or 1..32 of 4)");
          }
          slot_textures[static_cast<size_t>(slot.id)] =
              slot.layers > 0 ? gl::create_array_texture(objects, GL_TEXTURE0, slot.width,
                                                         slot.height, slot.layers)
                              : gl::create_texture(objects, GL_TEXTURE0, slot.width, slot.height,
                                                   slot.channels, nullptr);
          break;
        case PackageSlot::Kind::kBuffer:
          if (fragment) fail(-1, what + " is a buffer in a gles-frag package");
          if (slot.floats < 1) fail(-1, what + " is an empty buffer");
          slot_buffers[static_cast<size_t>(slot.id)] =
              gl::create_storage_buffer(objects, slot.floats, nullptr, GL_DYNAMIC_COPY);
          break;
        case PackageSlot::Kind::kArray:
          fail(-1, what + " is a JavaScript array (wasm packages run in a page)");
      }
    }
    gl::check_gl("creating the slots");
  }

  void upload_weights() {
    const std::string path = (std::filesystem::path(dir) / "weights.bin").string();
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file) fail(-1, "cannot open " + path);
    const auto size = static_cast<int64_t>(file.tellg());
    weight_textures.assign(manifest.weights.size(), 0);
    weight_buffers.assign(manifest.weights.size(), 0);
    std::vector<float> data;
    for (const deploy::PackageWeight& weight : manifest.weights) {
      const std::string what = "weight " + std::to_string(weight.id) + " '" + weight.name + "'";
      const int64_t bytes = weight.floats * static_cast<int64_t>(sizeof(float));
      if (weight.offset < 0 || weight.floats < 1 || weight.offset + bytes > size) {
        fail(-1, what + " (" + std::to_string(weight.floats) + " floats at byte " +
                     std::to_string(weight.offset) + ") lies outside weights.bin (" +
                     std::to_string(size) + " bytes)");
      }
      data.resize(static_cast<size_t>(weight.floats));
      file.seekg(weight.offset);
      if (!file.read(reinterpret_cast<char*>(data.data()), bytes))
        fail(-1, "cannot read " + what + " from " + path);
      static_assert(std::endian::native == std::endian::little, "weights.bin is little-endian");
      if (fragment) {
        if (!weight.texture) fail(-1, what + " has no texture in a gles-frag package");
        const auto& t = *weight.texture;
        if (t.channels != 1 && t.channels != 4)
          fail(-1, what + "'s texture has " + std::to_string(t.channels) + " channels, not 1 or 4");
        const int64_t texels_floats = t.width * t.height * t.channels;
        if (t.width < 1 || t.height < 1 || weight.floats > texels_floats)
          fail(-1, what + " has " + std::to_string(weight.floats) + " floats, more than its " +
                       std::to_string(t.width) + "x" + std::to_string(t.height) + "x" +
                       std::to_string(t.channels) + " texture holds");
        data.resize(static_cast<size_t>(texels_floats), 0.0f);
        weight_textures[static_cast<size_t>(weight.id)] =
            gl::create_texture(objects, GL_TEXTURE0, t.width, t.height, t.channels, data.data());
      } else {
        weight_buffers[static_cast<size_t>(weight.id)] =
            gl::create_storage_buffer(objects, weight.floats, data.data(), GL_STATIC_DRAW);
      }
    }
    glBindTexture(GL_TEXTURE_2D, 0);
    gl::check_gl("uploading the weights");
  }

  const Kernel& kernel_for(int index, const std::string& file) {
    if (auto it = kernels.find(file); it != kernels.end()) return *it->second;
    const std::filesystem::path relative(file);
    for (const auto& part : relative) {
      if (part == "..") fail(index, "kernel file '" + file + "' leaves the package directory");
    }
    if (relative.is_absolute()) fail(index, "kernel file '" + file + "' is not relative");
    const std::string path = (std::filesystem::path(dir) / relative).string();
    auto kernel = std::make_unique<Kernel>();
    try {
      kernel->artifact = KernelArtifact::from_json(json::read_file(path));
    } catch (const std::exception& e) {
      fail(index, "cannot read the kernel: " + std::string(e.what()));
    }
    if (kernel->artifact.target != manifest.artifact_target) {
      fail(index, "the kernel's target is " + std::string(target_name(kernel->artifact.target)) +
                      ", the package's " + std::string(target_name(manifest.artifact_target)));
    }
    if (kernel->artifact.output.feedback) {
      fail(index, "vertex-stage (transform feedback) kernels are not run in packages");
    }
    gl::validate_artifact(kernel->artifact, context->info());
    kernel->program = gl::compile_program(kernel->artifact, objects);
    // Created once, counters zero-filled: the kernel resets them itself at the end of a run.
    kernel->scratch = gl::create_scratch_buffers(kernel->artifact, objects);
    const Kernel& result = *kernel;
    kernels.emplace(file, std::move(kernel));
    return result;
  }

  /// The step's upload / download storage: texture or buffer (render targets: download only).
  Step data_step(int index, const PackageStep& source) {
    Step step;
    step.kind = source.kind;
    const deploy::PackageValue& shown = value(source.value);
    const deploy::PackageValue& own = resolve(index, source.value);
    step.storage = own.storage;
    step.elements = product(shown.shape);
    const Storage& storage = own.storage;
    switch (storage.kind) {
      case Storage::Kind::kBuffer: {
        const int slot = storage.slots.at(0);
        if (slot_buffers[static_cast<size_t>(slot)] == 0)
          fail(index, "slot " + std::to_string(slot) + " is not a buffer");
        if (manifest.slots[static_cast<size_t>(slot)].floats < step.elements)
          fail(index, "slot " + std::to_string(slot) + " holds fewer floats than the value's " +
                          std::to_string(step.elements));
        step.buffers = {slot_buffers[static_cast<size_t>(slot)]};
        break;
      }
      case Storage::Kind::kTexture: {
        const TensorLayout& layout = storage.texture;
        if (product(layout.shape) != step.elements)
          fail(index, "the texture layout's shape " + shape_string(layout.shape) +
                          " does not hold the value's " + shape_string(shown.shape));
        step.textures = {slot_texture(index, storage.slots.at(0), layout.width, layout.height,
                                      layout.channels())};
        break;
      }
      case Storage::Kind::kTargets: {
        if (source.kind == PackageStep::Kind::kUpload)
          fail(index, "an input cannot be uploaded into render targets");
        const OutputLayout& layout = storage.targets;
        if (layout.elements() != step.elements)
          fail(index, "the render targets hold " + std::to_string(layout.elements()) +
                          " elements, the value " + std::to_string(step.elements));
        if (layout.quad_layers) {
          if (storage.slots.size() != 1) fail(index, "quad layers live in one slot");
          step.textures = {slot_texture(index, storage.slots[0], layout.width, layout.height,
                                        layout.channels, layout.rows_per_item)};
          break;
        }
        if (static_cast<int>(storage.slots.size()) != layout.rows_per_item)
          fail(index, "the value has " + std::to_string(storage.slots.size()) + " slots for " +
                          std::to_string(layout.rows_per_item) + " render targets");
        for (int slot : storage.slots)
          step.textures.push_back(
              slot_texture(index, slot, layout.width, layout.height, layout.channels));
        break;
      }
      default:
        fail(index, "the value's storage is a JavaScript array (wasm)");
    }
    if (source.kind == PackageStep::Kind::kDownload && fragment) {
      const int64_t width =
          storage.kind == Storage::Kind::kTexture ? storage.texture.width : storage.targets.width;
      const int64_t height =
          storage.kind == Storage::Kind::kTexture ? storage.texture.height : storage.targets.height;
      const int channels = storage.kind == Storage::Kind::kTexture ? storage.texture.channels()
                                                                   : storage.targets.channels;
      step.framebuffer =
          storage.kind == Storage::Kind::kTargets && storage.targets.quad_layers
              ? gl::create_layer_framebuffer(objects, step.textures[0],
                                             storage.targets.rows_per_item, width, height)
              : gl::create_framebuffer(objects, step.textures, width, height, channels);
      glBindFramebuffer(GL_FRAMEBUFFER, 0);
    }
    return step;
  }

  /// The texture of `slot`, checked to be width × height with `channels` (and `layers`: 0 for
  /// a 2D texture).
  GLuint slot_texture(int index, int slot, int64_t width, int64_t height, int channels,
                      int layers = 0) const {
    if (slot < 0 || slot >= static_cast<int>(manifest.slots.size()) ||
        slot_textures[static_cast<size_t>(slot)] == 0)
      fail(index, "slot " + std::to_string(slot) + " is not a texture");
    const PackageSlot& s = manifest.slots[static_cast<size_t>(slot)];
    if (s.width != width || s.height != height || s.channels != channels || s.layers != layers) {
      fail(index, "slot " + std::to_string(slot) + " is a " + std::to_string(s.width) + "x" +
                      std::to_string(s.height) + "x" + std::to_string(s.channels) + " texture of " +
                      std::to_string(s.layers) + " layers; the step needs " +
                      std::to_string(width) + "x" + std::to_string(height) + "x" +
                      std::to_string(channels) + " of " + std::to_string(layers));
    }
    return slot_textures[static_cast<size_t>(slot)];
  }

  Step resolve_step(int index) {
    const PackageStep& source = manifest.steps[static_cast<size_t>(index)];
    switch (source.kind) {
      case PackageStep::Kind::kUpload:
      case PackageStep::Kind::kDownload:
        return data_step(index, source);
      case PackageStep::Kind::kAlias: {
        Step step;
        step.kind = source.kind;
        return step;
      }
      case PackageStep::Kind::kKernel:
        break;
    }
    if (source.kernel.empty()) fail(index, "a kernel step without a kernel file");
    Step step;
    step.kind = source.kind;
    const Kernel& kernel = kernel_for(index, source.kernel);
    step.kernel = &kernel;
    const KernelArtifact& artifact = kernel.artifact;
    ++kernel_steps;

    // The output first: inputs must not share its storage.
    const deploy::PackageValue& out = resolve(index, source.output);
    std::vector<GLuint> targets;
    if (fragment) {
      const OutputLayout& o = artifact.output;
      const Storage& storage = out.storage;
      if (storage.kind != Storage::Kind::kTargets && storage.kind != Storage::Kind::kTexture)
        fail(index, "a fragment kernel's output value needs texture or targets storage");
      if (o.quad_layers != (storage.kind == Storage::Kind::kTargets && storage.targets.quad_layers))
        fail(index, "the kernel and its output value disagree on quad layers");
      if (o.quad_layers) {
        if (storage.slots.size() != 1) fail(index, "quad layers live in one slot");
        targets = {
            slot_texture(index, storage.slots[0], o.width, o.height, o.channels, o.rows_per_item)};
        step.framebuffer =
            gl::create_layer_framebuffer(objects, targets[0], o.rows_per_item, o.width, o.height);
      } else if (static_cast<int>(storage.slots.size()) != o.rows_per_item)
        fail(index, "the kernel writes " + std::to_string(o.rows_per_item) +
                        " render targets; its output value has " +
                        std::to_string(storage.slots.size()) + " slots");
      if (!o.quad_layers) {
        for (int slot : storage.slots)
          targets.push_back(slot_texture(index, slot, o.width, o.height, o.channels));
        step.framebuffer = gl::create_framebuffer(objects, targets, o.width, o.height, o.channels);
      }
    } else {
      const Storage& storage = out.storage;
      if (storage.kind != Storage::Kind::kBuffer)
        fail(index, "a compute kernel's output value needs buffer storage");
      const int slot = storage.slots.at(0);
      if (slot_buffers[static_cast<size_t>(slot)] == 0)
        fail(index, "slot " + std::to_string(slot) + " is not a buffer");
      if (manifest.slots[static_cast<size_t>(slot)].floats < artifact.output.elements())
        fail(index, "the kernel writes " + std::to_string(artifact.output.elements()) +
                        " floats; slot " + std::to_string(slot) + " holds " +
                        std::to_string(manifest.slots[static_cast<size_t>(slot)].floats));
      step.output_buffer = slot_buffers[static_cast<size_t>(slot)];
    }

    // Inputs in binding order; a value in render targets takes one unit per target.
    for (size_t i = 0; i < source.inputs.size(); ++i) {
      const deploy::StepInput& input = source.inputs[i];
      const std::string what = "input " + std::to_string(i);
      std::vector<GLuint> textures;
      GLuint buffer = 0;
      int64_t buffer_floats = 0;
      if (input.kind == deploy::StepInput::Kind::kWeight) {
        const auto id = static_cast<size_t>(input.id);
        textures = {weight_textures[id]};
        buffer = weight_buffers[id];
        buffer_floats = manifest.weights[id].floats;
        if (fragment && textures[0] == 0) fail(index, what + ": the weight has no texture");
      } else if (input.kind == deploy::StepInput::Kind::kValue) {
        const Storage& storage = resolve(index, input.id).storage;
        if (fragment) {
          if (storage.kind == Storage::Kind::kTexture) {
            textures = {slot_textures.at(static_cast<size_t>(storage.slots.at(0)))};
          } else if (storage.kind == Storage::Kind::kTargets && storage.targets.quad_layers) {
            textures = {slot_textures.at(static_cast<size_t>(storage.slots.at(0)))};
          } else if (storage.kind == Storage::Kind::kTargets) {
            for (int slot : storage.slots)
              textures.push_back(slot_textures.at(static_cast<size_t>(slot)));
          } else {
            fail(index, what + ": a fragment kernel reads textures, not this value's storage");
          }
        } else {
          if (storage.kind != Storage::Kind::kBuffer)
            fail(index, what + ": a compute kernel reads buffers, not this value's storage");
          const int slot = storage.slots.at(0);
          buffer = slot_buffers.at(static_cast<size_t>(slot));
          buffer_floats = manifest.slots[static_cast<size_t>(slot)].floats;
        }
      } else {
        fail(index, what + " is neither a value nor a weight");
      }
      if (fragment) {
        for (GLuint texture : textures) {
          if (texture == 0) fail(index, what + " has no texture");
          if (std::find(targets.begin(), targets.end(), texture) != targets.end())
            fail(index, what + " shares a texture with the kernel's output");
          // Each unit's texture must be what the artifact's input layout says.
          const size_t unit = step.textures.size();
          bool array = false;
          if (unit < artifact.inputs.size()) {
            const TensorLayout& layout = artifact.inputs[unit];
            check_texture(index, what, texture, layout.width, layout.height, layout.channels(),
                          layout.layers);
            array = layout.layers > 0;
          }
          step.textures.push_back(texture);
          step.arrays.push_back(array);
        }
      } else {
        if (buffer == 0) fail(index, what + " has no buffer");
        if (buffer == step.output_buffer)
          fail(index, what + " shares a buffer with the kernel's output");
        const size_t binding = step.buffers.size();
        if (binding < artifact.inputs.size()) {
          const TensorLayout& layout = artifact.inputs[binding];
          const int64_t needed = layout.packed_elements() * layout.channels();
          if (buffer_floats < needed)
            fail(index, what + " holds " + std::to_string(buffer_floats) +
                            " floats; the kernel's input " + std::to_string(binding) + " reads " +
                            std::to_string(needed));
        }
        step.buffers.push_back(buffer);
      }
    }
    const size_t bound = fragment ? step.textures.size() : step.buffers.size();
    if (bound != artifact.inputs.size()) {
      fail(index, "the step binds " + std::to_string(bound) +
                      (fragment ? " textures" : " buffers") + "; the kernel has " +
                      std::to_string(artifact.inputs.size()) + " inputs");
    }
    return step;
  }

  /// Checks that `texture` (a slot's or a weight's) is width × height × channels.
  void check_texture(int index, const std::string& what, GLuint texture, int64_t width,
                     int64_t height, int channels, int layers = 0) const {
    int64_t w = 0, h = 0;
    int c = 0, l = 0;
    for (size_t s = 0; s < slot_textures.size(); ++s) {
      if (slot_textures[s] == texture) {
        const PackageSlot& slot = manifest.slots[s];
        w = slot.width, h = slot.height, c = slot.channels, l = slot.layers;
      }
    }
    if (l != layers)
      fail(index, what + " is a texture of " + std::to_string(l) + " layers; the kernel reads " +
                      std::to_string(layers));
    for (size_t k = 0; k < weight_textures.size(); ++k) {
      if (weight_textures[k] == texture && manifest.weights[k].texture) {
        const auto& t = *manifest.weights[k].texture;
        w = t.width, h = t.height, c = t.channels;
      }
    }
    if (w != width || h != height || c != channels) {
      fail(index, what + " is a " + std::to_string(w) + "x" + std::to_string(h) + "x" +
                      std::to_string(c) + " texture; the kernel reads " + std::to_string(width) +
                      "x" + std::to_string(height) + "x" + std::to_string(channels));
    }
  }

  // ---- running ----
  void upload(const Step& step, const std::vector<float>& input) {
    if (step.storage.kind == Storage::Kind::kBuffer) {
      glBindBuffer(GL_SHADER_STORAGE_BUFFER, step.buffers[0]);
      glBufferSubData(GL_SHADER_STORAGE_BUFFER, 0,
                      static_cast<GLsizeiptr>(input.size() * sizeof(float)), input.data());
      return;
    }
    const TensorLayout& layout = step.storage.texture;
    const std::vector<float> packed = layout.pack(input);
    if (packed.size() < static_cast<size_t>(layout.width * layout.height * layout.channels()))
      throw std::runtime_error("the input packs into fewer floats than its texture holds");
    gl::upload_texture(step.textures[0], GL_TEXTURE0, layout.width, layout.height,
                       layout.channels(), packed.data());
  }

  std::vector<float> download(const Step& step) {
    if (step.storage.kind == Storage::Kind::kBuffer) {
      // Shader writes must be visible to the copy in read_through_staging.
      glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
      return gl::read_through_staging(step.buffers[0], step.elements, "output buffer");
    }
    glBindFramebuffer(GL_FRAMEBUFFER, step.framebuffer);
    if (step.storage.kind == Storage::Kind::kTexture) {
      const TensorLayout& layout = step.storage.texture;
      auto pixels = gl::read_render_targets(1, layout.width, layout.height, layout.channels());
      return unpack_texture(layout, pixels[0]);
    }
    const OutputLayout& layout = step.storage.targets;
    return layout.unpack(gl::read_render_targets(layout.rows_per_item, layout.width, layout.height,
                                                 layout.channels));
  }

  int bound_units = 0;  ///< texture units the previous fragment step bound

  void run_kernel_step(const Step& step) {
    const KernelArtifact& artifact = step.kernel->artifact;
    glUseProgram(step.kernel->program);
    if (fragment) {
      glBindFramebuffer(GL_FRAMEBUFFER, step.framebuffer);
      glViewport(0, 0, static_cast<GLsizei>(artifact.output.width),
                 static_cast<GLsizei>(artifact.output.height));
      const int units = static_cast<int>(step.textures.size());
      for (int u = 0; u < std::max(units, bound_units); ++u) {
        glActiveTexture(GL_TEXTURE0 + static_cast<GLenum>(u));
        // Units past this step's inputs are emptied: one may hold this step's render target.
        // Each unit binds its texture to its own target (2D or 2D array) and empties the other.
        const GLuint texture = u < units ? step.textures[static_cast<size_t>(u)] : 0;
        const bool array = u < units && step.arrays[static_cast<size_t>(u)];
        glBindTexture(GL_TEXTURE_2D, array ? 0 : texture);
        glBindTexture(GL_TEXTURE_2D_ARRAY, array ? texture : 0);
      }
      bound_units = units;
    } else {
      for (size_t i = 0; i < step.buffers.size(); ++i)
        glBindBufferBase(GL_SHADER_STORAGE_BUFFER, gl::storage_binding(static_cast<int>(i)),
                         step.buffers[i]);
      glBindBufferBase(GL_SHADER_STORAGE_BUFFER, gl::kOutputBinding, step.output_buffer);
      gl::bind_scratch_buffers(step.kernel->scratch);
    }
    // No flush per draw: a model's draws depend on each other through textures, which the
    // driver orders; the flush matters only when timing one kernel drawn again and again into
    // the same targets. The read-back at the end submits everything.
    gl::run_kernel(artifact, /*flush=*/false);
  }

  /// GL_EXT_disjoint_timer_query's entry points, or null where the context lacks it.
  /// (Its names and values from the extension's specification, not from gl2ext.h, which does
  /// not compile after gl32.h.)
  static constexpr GLenum kTimestampExt = 0x8E28;
  static constexpr GLenum kGpuDisjointExt = 0x8FBB;
  struct TimerQueries {
    void (*query_counter)(GLuint id, GLenum target) = nullptr;
    void (*get_ui64)(GLuint id, GLenum name, GLuint64* value) = nullptr;
  };
  static TimerQueries timer_queries() {
    TimerQueries t;
    const auto* extensions = reinterpret_cast<const char*>(glGetString(GL_EXTENSIONS));
    if (extensions == nullptr || std::strstr(extensions, "GL_EXT_disjoint_timer_query") == nullptr)
      return t;
    t.query_counter =
        reinterpret_cast<decltype(t.query_counter)>(eglGetProcAddress("glQueryCounterEXT"));
    t.get_ui64 =
        reinterpret_cast<decltype(t.get_ui64)>(eglGetProcAddress("glGetQueryObjectui64vEXT"));
    if (t.query_counter == nullptr || t.get_ui64 == nullptr) t = {};
    return t;
  }

  RunProfile profile(const std::vector<float>& input) {
    context->make_current();
    const TimerQueries timers = timer_queries();
    RunProfile profile;
    std::vector<GLuint> queries;
    std::vector<int> timed;  // step indices, in order
    if (timers.query_counter != nullptr) {
      for (size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].kind != PackageStep::Kind::kAlias) timed.push_back(static_cast<int>(i));
      }
      queries.resize(timed.size() + 1);
      glGenQueries(static_cast<GLsizei>(queries.size()), queries.data());
      glGetError();  // kGpuDisjointExt is read through glGetIntegerv; clear the flag first
      GLint disjoint = 0;
      glGetIntegerv(kGpuDisjointExt, &disjoint);
    }
    size_t next = 0;
    using Clock = std::chrono::steady_clock;
    Clock::time_point step_start;
    const auto start = Clock::now();
    run(input, [&](size_t index, bool before) {
      if (steps[index].kind == PackageStep::Kind::kAlias) return;
      if (!queries.empty()) {
        // One timestamp before the first step, then one after each: step k's time is the
        // difference of timestamps k and k+1.
        if (before && next == 0) timers.query_counter(queries[next++], kTimestampExt);
        if (!before) timers.query_counter(queries[next++], kTimestampExt);
        return;
      }
      if (before) {
        glFinish();
        step_start = Clock::now();
      } else {
        glFinish();
        profile.steps.push_back(
            {static_cast<int>(index),
             std::chrono::duration<double, std::milli>(Clock::now() - step_start).count()});
      }
    });
    profile.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (!queries.empty()) {
      GLint disjoint = 0;
      glGetIntegerv(kGpuDisjointExt, &disjoint);
      std::vector<GLuint64> stamps(queries.size(), 0);
      for (size_t q = 0; q < queries.size(); ++q)
        timers.get_ui64(queries[q], GL_QUERY_RESULT, &stamps[q]);
      glDeleteQueries(static_cast<GLsizei>(queries.size()), queries.data());
      if (disjoint == 0 && next == queries.size()) {
        profile.gpu_timestamps = true;
        for (size_t k = 0; k < timed.size(); ++k) {
          profile.steps.push_back({timed[k], static_cast<double>(stamps[k + 1] - stamps[k]) / 1e6});
        }
        return profile;
      }
      // A disjoint operation (clock change, power state) makes the timestamps meaningless:
      // fall back to timing each step alone.
      spdlog::warn("the GPU reported a disjoint operation: timing each step alone instead");
      queries.clear();
      return profile_host(input);
    }
    return profile;
  }

  RunProfile profile_host(const std::vector<float>& input) {
    RunProfile profile;
    using Clock = std::chrono::steady_clock;
    Clock::time_point step_start;
    const auto start = Clock::now();
    run(input, [&](size_t index, bool before) {
      if (steps[index].kind == PackageStep::Kind::kAlias) return;
      glFinish();
      if (before) {
        step_start = Clock::now();
      } else {
        profile.steps.push_back(
            {static_cast<int>(index),
             std::chrono::duration<double, std::milli>(Clock::now() - step_start).count()});
      }
    });
    profile.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return profile;
  }

  /// `around_step(i, before)` is called before and after step i (profile()); null in plain runs.
  std::vector<float> run(const std::vector<float>& input,
                         const std::function<void(size_t, bool)>& around_step = nullptr) {
    const int64_t expected = product(manifest.inputs[0].shape);
    if (static_cast<int64_t>(input.size()) != expected) {
      throw ModelRunError(-1, "the input has " + std::to_string(input.size()) +
                                  " floats; the model's input '" + manifest.inputs[0].name + "' " +
                                  shape_string(manifest.inputs[0].shape) + " has " +
                                  std::to_string(expected));
    }
    context->make_current();
    const bool checked = runs == 0 || check_every_step;
    ++runs;
    if (std::string stale = gl::drain_gl_errors(); !stale.empty()) {
      spdlog::warn("GL errors left over before this run were dropped: {}", stale);
    }
    glBindVertexArray(vertex_array);
    if (fragment) gl::set_fragment_draw_state(1, 1);
    bound_units = 0;
    std::optional<std::vector<float>> output;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& step = steps[i];
      if (around_step) around_step(i, true);
      try {
        switch (step.kind) {
          case PackageStep::Kind::kUpload:
            upload(step, input);
            break;
          case PackageStep::Kind::kKernel:
            run_kernel_step(step);
            break;
          case PackageStep::Kind::kAlias:
            break;
          case PackageStep::Kind::kDownload:
            if (output) throw std::runtime_error("a second download (one output only)");
            output = download(step);
            break;
        }
        if (checked) gl::check_gl("running it");
        if (around_step) around_step(i, false);
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception& e) {
        fail(static_cast<int>(i), e.what());
      }
    }
    glFinish();
    if (std::string errors = gl::drain_gl_errors(); !errors.empty()) {
      throw ModelRunError(-1, dir + ": " + errors + " during run " + std::to_string(runs) +
                                  " (set_check_every_step names the step)");
    }
    if (!output) throw ModelRunError(-1, dir + ": the package has no download step");
    return std::move(*output);
  }
};

ModelRunner::ModelRunner(const std::string& dir, std::unique_ptr<EglContext> context)
    : impl_(std::make_unique<Impl>()) {
  if (context == nullptr) throw std::invalid_argument("ModelRunner needs an EGL context");
  impl_->context = std::move(context);
  impl_->dir = dir;
  impl_->load();
}

ModelRunner::~ModelRunner() {
  if (impl_ && impl_->context) impl_->context->make_current();
}

const deploy::Manifest& ModelRunner::manifest() const {
  return impl_->manifest;
}
const GlDeviceInfo& ModelRunner::info() const {
  return impl_->context->info();
}
const std::vector<int64_t>& ModelRunner::input_shape() const {
  return impl_->manifest.inputs[0].shape;
}
int64_t ModelRunner::input_elements() const {
  return product(input_shape());
}
const std::vector<int64_t>& ModelRunner::output_shape() const {
  return impl_->manifest.outputs[0].shape;
}
int ModelRunner::kernels() const {
  return static_cast<int>(impl_->kernels.size());
}
int ModelRunner::kernel_steps() const {
  return impl_->kernel_steps;
}
std::vector<float> ModelRunner::run(const std::vector<float>& input) {
  return impl_->run(input);
}
ModelRunner::RunProfile ModelRunner::profile(const std::vector<float>& input) {
  return impl_->profile(input);
}
void ModelRunner::set_check_every_step(bool on) {
  impl_->check_every_step = on;
}

}  // namespace webtune
