/// \file json_util.hpp
/// Small helpers for reading Boost.JSON objects with clear errors.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace webtune::json {

/// The object inside `value`; throws std::invalid_argument("<what> must be a JSON object").
const boost::json::object& as_object(const boost::json::value& value, std::string_view what);
/// Field `key` of `object`; throws std::invalid_argument("missing field 'key'").
const boost::json::value& field(const boost::json::object& object, std::string_view key);
/// Integer field (accepts integral doubles); throws std::invalid_argument on a wrong type.
int64_t get_int(const boost::json::object& object, std::string_view key);
int64_t get_int_or(const boost::json::object& object, std::string_view key, int64_t fallback);
double get_double(const boost::json::object& object, std::string_view key);
double get_double_or(const boost::json::object& object, std::string_view key, double fallback);
std::string get_string(const boost::json::object& object, std::string_view key);
std::string get_string_or(const boost::json::object& object, std::string_view key,
                          std::string fallback);
std::vector<int64_t> get_int_array(const boost::json::object& object, std::string_view key);
/// Integer value of `value` (accepts integral doubles below 9e15); throws std::invalid_argument
/// for another type or a value outside int64 (an unsigned above 2^63 − 1 is not wrapped).
int64_t to_int(const boost::json::value& value, std::string_view what);
/// Number value of `value`; throws std::invalid_argument for a non-number and for NaN (which
/// Boost.JSON makes of texts like 0e400). Infinities (1e999) pass.
double to_double(const boost::json::value& value, std::string_view what);
boost::json::array to_array(const std::vector<int64_t>& values);
/// The largest file read_file reads: 64 MiB (a workload or config file is a few KiB).
inline constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{64} << 20;
/// Reads and parses a whole JSON file. Throws std::runtime_error naming the path when it cannot
/// be opened, is not a regular file (a directory, /dev/zero, a FIFO), is larger than
/// `max_bytes` (checked before reading, and again while reading), or is not valid JSON.
boost::json::value read_file(const std::string& path, std::uintmax_t max_bytes = kMaxFileBytes);

}  // namespace webtune::json
