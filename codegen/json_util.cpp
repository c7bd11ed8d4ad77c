/// \file json_util.cpp
/// Boost.JSON accessors that turn a missing or mistyped field into a message naming it.
#include "codegen/json_util.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace webtune::json {

namespace bj = boost::json;

const bj::object& as_object(const bj::value& value, std::string_view what) {
  if (!value.is_object()) throw std::invalid_argument(std::string(what) + " must be a JSON object");
  return value.get_object();
}

const bj::value& field(const bj::object& object, std::string_view key) {
  auto it = object.find(key);
  if (it == object.end()) throw std::invalid_argument("missing field '" + std::string(key) + "'");
  return it->value();
}

int64_t to_int(const bj::value& value, std::string_view what) {
  if (value.is_int64()) return value.get_int64();
  if (value.is_uint64()) {
    // Above INT64_MAX (Boost.JSON keeps those as uint64): refused, not wrapped to a negative.
    if (value.get_uint64() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw std::invalid_argument("'" + std::string(what) +
                                  "' = " + std::to_string(value.get_uint64()) +
                                  " is out of the 64-bit integer range");
    return static_cast<int64_t>(value.get_uint64());
  }
  if (value.is_double()) {
    double d = value.get_double();
    if (std::floor(d) == d && std::abs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  throw std::invalid_argument("'" + std::string(what) + "' must be an integer");
}

double to_double(const bj::value& value, std::string_view what) {
  if (value.is_double()) {
    // Boost.JSON 1.81 reads 0e400 as NaN (0 times an infinite power of ten): refuse it.
    if (std::isnan(value.get_double()))
      throw std::invalid_argument("'" + std::string(what) + "' is not a number (NaN)");
    return value.get_double();
  }
  if (value.is_int64()) return static_cast<double>(value.get_int64());
  if (value.is_uint64()) return static_cast<double>(value.get_uint64());
  throw std::invalid_argument("'" + std::string(what) + "' must be a number");
}

int64_t get_int(const bj::object& object, std::string_view key) {
  return to_int(field(object, key), key);
}

int64_t get_int_or(const bj::object& object, std::string_view key, int64_t fallback) {
  return object.contains(key) ? get_int(object, key) : fallback;
}

double get_double(const bj::object& object, std::string_view key) {
  return to_double(field(object, key), key);
}

double get_double_or(const bj::object& object, std::string_view key, double fallback) {
  return object.contains(key) ? get_double(object, key) : fallback;
}

std::string get_string(const bj::object& object, std::string_view key) {
  const bj::value& value = field(object, key);
  if (!value.is_string())
    throw std::invalid_argument("'" + std::string(key) + "' must be a string");
  return std::string(value.get_string());
}

std::string get_string_or(const bj::object& object, std::string_view key, std::string fallback) {
  return object.contains(key) ? get_string(object, key) : fallback;
}

std::vector<int64_t> get_int_array(const bj::object& object, std::string_view key) {
  const bj::value& value = field(object, key);
  if (!value.is_array()) throw std::invalid_argument("'" + std::string(key) + "' must be an array");
  std::vector<int64_t> out;
  for (const bj::value& item : value.get_array()) out.push_back(to_int(item, key));
  return out;
}

bj::array to_array(const std::vector<int64_t>& values) {
  bj::array out;
  for (int64_t v : values) out.emplace_back(v);
  return out;
}

bj::value read_file(const std::string& path, std::uintmax_t max_bytes) {
  // Check what the path is before opening it: a FIFO would block the open, and /dev/zero or
  // /dev/urandom would be read until memory runs out.
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw std::runtime_error("cannot open '" + path + "'" + (ec ? ": " + ec.message() : ""));
  if (!std::filesystem::is_regular_file(status))
    throw std::runtime_error("'" + path + "' is not a regular file");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes)
    throw std::runtime_error("'" + path + "' has " + std::to_string(size) +
                             " bytes, more than the limit of " + std::to_string(max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path + "'");
  // Read at most max_bytes + 1, in case the file grew since it was measured.
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw std::runtime_error("'" + path + "' has more than the limit of " +
                               std::to_string(max_bytes) + " bytes");
  }
  if (in.bad()) throw std::runtime_error("reading '" + path + "' failed");
  boost::system::error_code parse_ec;
  bj::value value = bj::parse(text, parse_ec);
  if (parse_ec) throw std::runtime_error("'" + path + "' is not valid JSON: " + parse_ec.message());
  return value;
}

}  // namespace webtune::json
