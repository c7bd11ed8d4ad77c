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
/// Integer value of `value` (accepts integral doubles); throws std::invalid_argument.
int64_t to_int(const boost::json::value& value, std::string_view what);
/// Number value of `value`; throws std::invalid_argument for a non-number and for NaN (which
/// Boost.JSON makes of texts like 0e400). Infinities (1e999) pass.
double to_double(const boost::json::value& value, std::string_view what);
boost::json::array to_array(const std::vector<int64_t>& values);
/// Reads and parses a whole JSON file; throws std::runtime_error with the path on failure.
boost::json::value read_file(const std::string& path);

}  // namespace webtune::json
