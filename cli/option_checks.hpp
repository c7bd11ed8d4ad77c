/// \file option_checks.hpp
/// CLI11 checks for the numeric options of the subcommands: a value out of range is a parse
/// error that names the option ("--trials: Value -5 not in range 1 to 1000000") and exits
/// non-zero before the command does anything.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <string>

namespace webtune::cli {

/// An integer in [lo, hi], both inclusive.
inline CLI::Range int_range(int64_t lo, int64_t hi) {
  return CLI::Range(lo, hi);
}

/// A finite number of seconds in (0, max], or [0, max] when `zero_ok`. Unlike CLI::Range it
/// refuses NaN ("nan" parses as a double and compares false with everything).
inline CLI::Validator seconds(double max, bool zero_ok = false) {
  char max_text[32];
  std::snprintf(max_text, sizeof max_text, "%g", max);
  const std::string range = std::string(zero_ok ? "[0, " : "(0, ") + max_text + "]";
  return CLI::Validator(
      [max, zero_ok, range](std::string& input) -> std::string {
        double v = 0;
        const bool number = CLI::detail::lexical_cast(input, v);
        if (number && std::isfinite(v) && (v > 0 || (zero_ok && v == 0)) && v <= max) return {};
        return "Value " + input + " is not a number of seconds in " + range;
      },
      "SECONDS in " + range);
}

}  // namespace webtune::cli
