/// \file target.cpp
/// Target names and their tracker keys.
#include "codegen/target.hpp"

#include <stdexcept>
#include <string>

namespace webtune {

std::string_view target_name(Target target) {
  switch (target) {
    case Target::kGlesFrag:
      return "gles-frag";
    case Target::kGlesCompute:
      return "gles-compute";
    case Target::kWebgpu:
      return "webgpu";
    case Target::kWasm:
      return "wasm";
  }
  return "unknown";
}

Target target_from_name(std::string_view name) {
  if (name == "gles-frag") return Target::kGlesFrag;
  if (name == "gles-compute") return Target::kGlesCompute;
  if (name == "webgpu") return Target::kWebgpu;
  if (name == "wasm") return Target::kWasm;
  throw std::invalid_argument("unknown target '" + std::string(name) +
                              "' (known: gles-frag, gles-compute, webgpu, wasm)");
}

std::string_view target_key(Target target) {
  switch (target) {
    case Target::kGlesFrag:
    case Target::kGlesCompute:
      return "gles";
    case Target::kWebgpu:
      return "webgpu";
    case Target::kWasm:
      return "wasm";
  }
  return "unknown";
}

TuneTarget tune_target_from_name(std::string_view name) {
  TuneTarget t;
  t.name = std::string(name);
  if (name == "webgl2") {
    t.kernel = Target::kGlesFrag;
    t.key = "webgl2";
    t.browser = true;
    return t;
  }
  if (name == "webgpu") {
    // WGSL runs only in browsers: no native agent offers a WebGPU device.
    t.kernel = Target::kWebgpu;
    t.key = "webgpu";
    t.browser = true;
    return t;
  }
  if (name == "wasm") {
    // The wasm executor lives in browser tabs only (docs/wasm_abi.md).
    t.kernel = Target::kWasm;
    t.key = "wasm";
    t.browser = true;
    return t;
  }
  try {
    t.kernel = target_from_name(name);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("unknown target '" + std::string(name) +
                                "' (known: gles-frag, gles-compute, webgl2, webgpu, wasm)");
  }
  t.key = std::string(target_key(t.kernel));
  return t;
}

}  // namespace webtune
