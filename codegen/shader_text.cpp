/// \file shader_text.cpp
/// Checked knob reading for the compute-shader emitters.
#include "shader_text.hpp"

#include <exception>

#include "codegen/error_no.hpp"

namespace webtune::shader_text {

void refuse(std::string_view target, const std::string& why) {
  throw MeasureError(MeasureErrorNo::kInstantiation, std::string(target) + ": " + why);
}

std::vector<int64_t> read_split(const ConfigEntity& entity, const std::string& name, size_t parts,
                                int64_t extent, std::string_view target) {
  std::vector<int64_t> factors;
  try {
    factors = entity.split(name);
  } catch (const std::exception& e) {
    refuse(target, e.what());
  }
  int64_t product = 1;
  for (int64_t f : factors) product *= f;
  if (factors.size() != parts || product != extent)
    refuse(target,
           "split '" + name + "' does not factor this workload's extent " + std::to_string(extent));
  return factors;
}

int64_t read_int(const ConfigEntity& entity, const std::string& name, std::string_view target) {
  try {
    return entity.get_int(name);
  } catch (const std::exception& e) {
    refuse(target, e.what());
  }
}

}  // namespace webtune::shader_text
