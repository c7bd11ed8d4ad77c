/// \file target.cpp
/// Target names.
#include "codegen/target.hpp"

#include <stdexcept>
#include <string>

#include "codegen/template.hpp"

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
  for (Target t : targets())
    if (name == target_name(t)) return t;
  throw std::invalid_argument("unknown target '" + std::string(name) +
                              "' (known: " + target_names() + ")");
}

}  // namespace webtune
