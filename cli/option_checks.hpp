/// \file option_checks.hpp
/// CLI11 checks for the numeric options of the subcommands: a value out of range is a parse
/// error that names the option ("--trials: Value -5 not in range 1 to 1000000") and exits
/// non-zero before the command does anything.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

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

/// `--dim NAME=VALUE` (a symbolic ONNX input dimension bound to VALUE, an integer in
/// [1, 2^24]; `*=VALUE` binds every one not named), as `import` and `tune --model` take it.
inline CLI::Validator dim_binding() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const size_t eq = text.find('=');
        if (eq == std::string::npos || eq == 0)
          return "'" + text +
                 "' is not NAME=VALUE (e.g. batch_size=1, or *=1 for every symbolic dim)";
        const std::string value = text.substr(eq + 1);
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != value.size() || v < 1 || v > (int64_t{1} << 24))
          return "'" + text + "': the value must be an integer in [1, 16777216]";
        return {};
      },
      "NAME=VALUE");
}

/// One of `names` (`what` names the kind in the refusal): "'bayes' is not a known tuner (known:
/// xgb, ga, random, grid)".
inline CLI::Validator one_of(std::vector<std::string> names, const std::string& what) {
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  return CLI::Validator(
      [names, what, list](std::string& input) -> std::string {
        if (std::find(names.begin(), names.end(), input) != names.end()) return {};
        return "'" + input + "' is not a known " + what + " (known: " + list + ")";
      },
      "{" + list + "}");
}

/// A value that `parse` (which throws std::invalid_argument with the reason) accepts; the
/// reason is the refusal. For names whose table lives elsewhere (tune targets).
template <typename Parse>
CLI::Validator parses_as(Parse parse, const std::string& description) {
  return CLI::Validator(
      [parse](std::string& input) -> std::string {
        try {
          parse(input);
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
        return {};
      },
      description);
}

/// A finite number in [lo, hi] (unlike CLI::Range, NaN is refused).
inline CLI::Validator number_in(double lo, double hi) {
  char range[64];
  std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
  return CLI::Validator(
      [lo, hi, text = std::string(range)](std::string& input) -> std::string {
        double v = 0;
        if (CLI::detail::lexical_cast(input, v) && std::isfinite(v) && v >= lo && v <= hi)
          return {};
        return "Value " + input + " is not a number in " + text;
      },
      std::string("NUMBER in ") + range);
}

/// The bindings of dim_binding()-checked options, by name.
inline std::map<std::string, int64_t> symbolic_dims(const std::vector<std::string>& bindings) {
  std::map<std::string, int64_t> dims;
  for (const std::string& b : bindings) {
    const size_t eq = b.find('=');
    dims[b.substr(0, eq)] = std::stoll(b.substr(eq + 1));
  }
  return dims;
}

}  // namespace webtune::cli
