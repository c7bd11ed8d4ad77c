/// \file fuzz_common.hpp
/// What the libFuzzer harnesses under fuzz/ share: how a finding is reported, and a check that a
/// call throws only the exception types its header documents.
///
/// A finding is anything a harness's contract does not allow: an exception of an undocumented
/// type, a broken invariant. It prints "webtune-fuzz finding: ..." to stderr and aborts, which
/// libFuzzer reports as a crash and saves the input as crash-<sha1> (docs/fuzzing.md). The
/// sanitizers (ASan, UBSan) abort the same way on memory errors and undefined behaviour.
#pragma once

#include <cxxabi.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>

namespace webtune::fuzz {

/// Prints `what` as a finding and aborts the process.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "webtune-fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Aborts with `what` when `condition` is false.
inline void check(bool condition, const std::string& what) {
  if (!condition) finding(what);
}

/// The demangled dynamic type name of an exception, e.g. "std::out_of_range".
inline std::string type_name(const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : typeid(e).name();
}

namespace detail {
template <class... Allowed>
bool is_one_of(const std::exception& e) {
  return (... || (dynamic_cast<const Allowed*>(&e) != nullptr));
}
}  // namespace detail

/// Runs `fn`. Returns true when it returned normally, false when it threw one of `Allowed`
/// (or a type derived from one); any other exception is a finding that names `call`, the
/// exception's type and its message. `on_error`, when given, sees the allowed exception.
template <class... Allowed, class Fn>
bool throws_only(std::string_view call, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    if (detail::is_one_of<Allowed...>(e)) {
      check(e.what() != nullptr && e.what()[0] != '\0',
            std::string(call) + " threw " + type_name(e) + " with an empty message");
      return false;
    }
    finding(std::string(call) + " threw " + type_name(e) + ": " + e.what());
  } catch (...) {
    finding(std::string(call) + " threw something that is not a std::exception");
  }
}

/// True when `value` holds a NaN or an infinity anywhere. Boost.JSON 1.81 reads 1e999 as
/// infinity and 0e400 as NaN, and bj::serialize writes them as Infinity and NaN, which are not
/// JSON.
inline bool has_non_finite(const boost::json::value& value) {
  switch (value.kind()) {
    case boost::json::kind::double_:
      return !std::isfinite(value.get_double());
    case boost::json::kind::array:
      for (const boost::json::value& v : value.get_array())
        if (has_non_finite(v)) return true;
      return false;
    case boost::json::kind::object:
      for (const auto& kv : value.get_object())
        if (has_non_finite(kv.value())) return true;
      return false;
    default:
      return false;
  }
}

/// Equal JSON values, doubles within a relative 1e-12 (NaN equal to NaN): Boost.JSON 1.81 parses
/// doubles without precise rounding by default, so a number written and read again may move by
/// an ulp, and it reads 0e400 as NaN.
inline bool json_close(const boost::json::value& a, const boost::json::value& b) {
  if (a.is_number() && b.is_number() && (a.is_double() || b.is_double())) {
    const double x = a.to_number<double>(), y = b.to_number<double>();
    return x == y || (std::isnan(x) && std::isnan(y)) ||
           std::fabs(x - y) <= 1e-12 * std::max(std::fabs(x), std::fabs(y));
  }
  if (a.kind() != b.kind()) return false;
  if (a.is_array()) {
    const auto &x = a.get_array(), &y = b.get_array();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!json_close(x[i], y[i])) return false;
    return true;
  }
  if (a.is_object()) {
    const auto &x = a.get_object(), &y = b.get_object();
    if (x.size() != y.size()) return false;
    for (const auto& kv : x) {
      const boost::json::value* other = y.if_contains(kv.key());
      if (!other || !json_close(kv.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

/// True when `text` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
inline bool valid_utf8(std::string_view text) {
  size_t i = 0;
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  while (i < text.size()) {
    const unsigned char c = byte(i);
    size_t extra = 0;
    unsigned min = 0, cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3, min = 0x10000, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;  // the sequence is cut short
    for (size_t k = 1; k <= extra; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

}  // namespace webtune::fuzz
