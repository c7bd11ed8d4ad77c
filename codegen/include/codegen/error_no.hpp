/// \file error_no.hpp
/// The error numbers that every measure result carries.
///
/// The numbering is AutoTVM's `MeasureErrorNo` (python/tvm/autotvm/measure/measure.py), so that
/// records exported in AutoTVM's log format keep their meaning.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace webtune {

/// Outcome of one trial, numbered as AutoTVM's MeasureErrorNo.
enum class MeasureErrorNo : int {
  kNoError = 0,        ///< ran, and its output matched the reference
  kInstantiation = 1,  ///< the config cannot be turned into a kernel (outside the space, bad knob)
  kCompileHost = 2,    ///< the host-side build (codegen, LLVM, linker) failed
  kCompileDevice = 3,  ///< the device compiler (GL driver, browser) rejected the kernel
  kRuntimeDevice = 4,  ///< the kernel failed on the device (GL error, lost context, crash)
  kWrongAnswer = 5,    ///< ran, but sampled outputs differ from the CPU reference
  kBuildTimeout = 6,   ///< the build ran past its timeout
  kRunTimeout = 7,     ///< the kernel ran past its timeout
  kUnknown = 8,        ///< anything else
};

/// AutoTVM's upper-case name of an error number, e.g. "WRONG_ANSWER".
std::string_view error_name(MeasureErrorNo error);

/// Parses an error number from its integer value; throws std::invalid_argument when out of range.
MeasureErrorNo error_from_int(int value);

/// An error that knows its error number; thrown by codegen and runtimes, caught where a trial
/// result is recorded.
class MeasureError : public std::runtime_error {
 public:
  MeasureError(MeasureErrorNo error, const std::string& message)
      : std::runtime_error(message), error_(error) {}
  MeasureErrorNo error() const { return error_; }

 private:
  MeasureErrorNo error_;
};

}  // namespace webtune
