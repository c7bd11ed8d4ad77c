/// \file measure.cpp
/// JSON forms of measure inputs and results.
#include "codegen/measure.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <numeric>

#include "codegen/json_util.hpp"

namespace webtune {

namespace bj = boost::json;

bj::object MeasureOptions::to_json() const {
  return bj::object{{"number", number},
                    {"repeat", repeat},
                    {"min_repeat_ms", min_repeat_ms},
                    {"timeout_s", timeout_s}};
}

MeasureOptions MeasureOptions::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "measure options");
  MeasureOptions m;
  // Read as int64 and range-checked: a narrowing cast would turn 2^32 + 1 runs into 1.
  auto count = [&o](std::string_view key, int fallback) {
    const int64_t v = json::get_int_or(o, key, fallback);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      throw std::invalid_argument("measure options: '" + std::string(key) + "' is out of range");
    return static_cast<int>(v);
  };
  m.number = count("number", m.number);
  m.repeat = count("repeat", m.repeat);
  m.min_repeat_ms = count("min_repeat_ms", m.min_repeat_ms);
  m.timeout_s = json::get_double_or(o, "timeout_s", m.timeout_s);
  if (m.number < 1 || m.repeat < 1 || m.min_repeat_ms < 0 || m.timeout_s <= 0)
    throw std::invalid_argument("measure options: number, repeat and timeout_s must be > 0");
  return m;
}

bj::object MeasureInput::to_json() const {
  return bj::object{{"workload", workload.to_json()},
                    {"artifact", artifact.to_json()},
                    {"seed", seed},
                    {"samples", samples_to_json(samples)},
                    {"options", options.to_json()}};
}

MeasureInput MeasureInput::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "measure input");
  MeasureInput m;
  m.workload = Workload::from_json(json::field(o, "workload"));
  m.artifact = KernelArtifact::from_json(json::field(o, "artifact"));
  const bj::value& seed = json::field(o, "seed");
  if (seed.is_uint64())
    m.seed = seed.get_uint64();
  else
    m.seed = static_cast<uint64_t>(json::to_int(seed, "seed"));
  m.samples = samples_from_json(json::field(o, "samples"));
  if (o.contains("options")) m.options = MeasureOptions::from_json(o.at("options"));
  return m;
}

double MeasureResult::mean_cost() const {
  if (!ok() || costs.empty()) return std::numeric_limits<double>::infinity();
  return std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
}

double MeasureResult::gflops(double flops) const {
  const double cost = mean_cost();
  if (!(cost > 0) || cost == std::numeric_limits<double>::infinity()) return 0;
  return flops / cost / 1e9;
}

MeasureResult MeasureResult::failure(MeasureErrorNo error, std::string message) {
  MeasureResult r;
  r.error = error;
  r.message = std::move(message);
  return r;
}

bj::object MeasureResult::to_json() const {
  bj::array c;
  for (double v : costs) c.emplace_back(v);
  return bj::object{{"error_no", static_cast<int>(error)},
                    {"message", message},
                    {"costs", std::move(c)},
                    {"all_cost", all_cost},
                    {"timestamp", timestamp}};
}

MeasureResult MeasureResult::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "measure result");
  MeasureResult r;
  r.error = error_from_int(static_cast<int>(json::get_int(o, "error_no")));
  r.message = json::get_string_or(o, "message", "");
  if (o.contains("costs")) {
    const bj::value& c = o.at("costs");
    if (!c.is_array()) throw std::invalid_argument("'costs' must be an array");
    for (const bj::value& v : c.get_array()) {
      // 1e999 reads as infinity; stored, it would be written back as the non-JSON Infinity.
      const double cost = json::to_double(v, "costs");
      if (!std::isfinite(cost)) throw std::invalid_argument("'costs' must be finite numbers");
      r.costs.push_back(cost);
    }
  }
  r.all_cost = json::get_double_or(o, "all_cost", 0);
  r.timestamp = json::get_double_or(o, "timestamp", 0);
  return r;
}

}  // namespace webtune
