/// \file measure.cpp
/// JSON forms of measure inputs and results.
#include "codegen/measure.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "codegen/json_util.hpp"

namespace webtune {

namespace bj = boost::json;

bj::object MeasureOptions::to_json() const {
  return bj::object{{"number", number},
                    {"repeat", repeat},
                    {"min_repeat_ms", min_repeat_ms},
                    {"timeout_s", timeout_s}};
}

void MeasureOptions::validate() const {
  auto refuse = [](const std::string& field, const std::string& value, const std::string& range) {
    throw std::invalid_argument("measure options: " + field + " = " + value + " must be in " +
                                range);
  };
  if (number < 1 || number > kMaxNumber)
    refuse("number", std::to_string(number), "[1, " + std::to_string(kMaxNumber) + "]");
  if (repeat < 1 || repeat > kMaxRepeat)
    refuse("repeat", std::to_string(repeat), "[1, " + std::to_string(kMaxRepeat) + "]");
  if (min_repeat_ms < 0 || min_repeat_ms > kMaxMinRepeatMs)
    refuse("min_repeat_ms", std::to_string(min_repeat_ms),
           "[0, " + std::to_string(kMaxMinRepeatMs) + "]");
  // Written so that NaN fails too.
  if (!(timeout_s > 0 && timeout_s <= kMaxTimeoutS))
    refuse("timeout_s", std::to_string(timeout_s), "(0, 3600] seconds");
}

MeasureOptions MeasureOptions::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "measure options");
  MeasureOptions m;
  // Range-checked as int64 before narrowing: 2^32 + 1 must not become 1.
  auto get_int = [&o](std::string_view key, int fallback, int64_t lo, int64_t hi) {
    const int64_t v = json::get_int_or(o, key, fallback);
    if (v < lo || v > hi)
      throw std::invalid_argument("measure options: " + std::string(key) + " = " +
                                  std::to_string(v) + " must be in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]");
    return static_cast<int>(v);
  };
  m.number = get_int("number", m.number, 1, kMaxNumber);
  m.repeat = get_int("repeat", m.repeat, 1, kMaxRepeat);
  m.min_repeat_ms = get_int("min_repeat_ms", m.min_repeat_ms, 0, kMaxMinRepeatMs);
  m.timeout_s = json::get_double_or(o, "timeout_s", m.timeout_s);
  m.validate();
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
  const bj::value& samples = json::field(o, "samples");
  if (samples.is_array() && samples.get_array().size() > static_cast<size_t>(kMaxSamples))
    throw std::invalid_argument("measure input: " + std::to_string(samples.get_array().size()) +
                                " samples, more than the limit of " + std::to_string(kMaxSamples));
  m.samples = samples_from_json(samples);
  const int64_t outputs = m.workload.output_size();
  for (const ReferenceSample& s : m.samples) {
    if (s.index < 0 || s.index >= outputs)
      throw std::invalid_argument("measure input: sample index " + std::to_string(s.index) +
                                  " is outside the output's " + std::to_string(outputs) +
                                  " elements");
    if (!std::isfinite(s.value) || !std::isfinite(s.abs_sum) || !std::isfinite(s.tolerance) ||
        s.tolerance < 0)
      throw std::invalid_argument("measure input: sample " + std::to_string(s.index) +
                                  " needs a finite value, abs_sum and tolerance >= 0");
  }
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
  // Checked as int64: 2^32 must not narrow to 0, NO_ERROR.
  const int64_t error_no = json::get_int(o, "error_no");
  if (error_no < 0 || error_no > 255)
    throw std::invalid_argument("error number " + std::to_string(error_no) + " is not in 0..8");
  r.error = error_from_int(static_cast<int>(error_no));
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
