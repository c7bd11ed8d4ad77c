/// \file tune_target.cpp
/// The table of tune targets (tune_target.hpp).
#include "tuner/tune_target.hpp"

#include <stdexcept>

#include "codegen/template.hpp"

namespace webtune {

const std::vector<TuneTarget>& tune_targets() {
  static const std::vector<TuneTarget> table = {
      {"gles-frag", Target::kGlesFrag, "gles", false, "GLSL ES 3.00 fragment shaders"},
      {"gles-compute", Target::kGlesCompute, "gles", false, "GLSL ES 3.10 compute shaders"},
      {"webgl2", Target::kGlesFrag, "webgl2", true, "gles-frag kernels in browser tabs"},
      // WGSL runs only in browsers: no native agent offers a WebGPU device.
      {"webgpu", Target::kWebgpu, "webgpu", true, "WGSL, browser tabs"},
      // The wasm executor lives in browser tabs only (docs/wasm_abi.md).
      {"wasm", Target::kWasm, "wasm", true, "LLVM-built WebAssembly, browser tabs"},
  };
  return table;
}

TuneTarget tune_target_from_name(std::string_view name) {
  for (const TuneTarget& t : tune_targets())
    if (t.name == name) return t;
  throw std::invalid_argument("unknown target '" + std::string(name) +
                              "' (known: " + tune_target_names() + ")");
}

std::string_view target_key(Target kernel) {
  const TuneTarget* browser = nullptr;
  for (const TuneTarget& t : tune_targets()) {
    if (t.kernel != kernel) continue;
    if (!t.browser) return t.key;
    if (browser == nullptr) browser = &t;
  }
  return browser != nullptr ? std::string_view(browser->key) : std::string_view("unknown");
}

bool runs_natively(Target kernel) {
  for (const TuneTarget& t : tune_targets())
    if (t.kernel == kernel && !t.browser) return true;
  return false;
}

std::string tune_target_names() {
  std::string out;
  for (const TuneTarget& t : tune_targets()) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

std::string tune_target_help() {
  std::string out;
  for (const TuneTarget& t : tune_targets()) {
    std::string ops;
    for (const Template* tmpl : all_templates())
      if (tmpl->target() == t.kernel)
        ops += (ops.empty() ? "" : ", ") + std::string(op_name(tmpl->op()));
    out += (out.empty() ? "" : ", ") + t.name + " (" + t.about + "; " + ops + ")";
  }
  return out;
}

}  // namespace webtune
