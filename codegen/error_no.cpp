/// \file error_no.cpp
/// Names of AutoTVM's measure error numbers.
#include "codegen/error_no.hpp"

#include <array>

namespace webtune {

namespace {
constexpr std::array<std::string_view, 9> kNames = {
    "NO_ERROR",     "INSTANTIATION_ERROR", "COMPILE_HOST", "COMPILE_DEVICE", "RUNTIME_DEVICE",
    "WRONG_ANSWER", "BUILD_TIMEOUT",       "RUN_TIMEOUT",  "UNKNOWN_ERROR"};
}  // namespace

std::string_view error_name(MeasureErrorNo error) {
  auto i = static_cast<size_t>(error);
  return i < kNames.size() ? kNames[i] : "UNKNOWN_ERROR";
}

MeasureErrorNo error_from_int(int value) {
  if (value < 0 || value >= static_cast<int>(kNames.size()))
    throw std::invalid_argument("error number " + std::to_string(value) + " is not in 0..8");
  return static_cast<MeasureErrorNo>(value);
}

}  // namespace webtune
