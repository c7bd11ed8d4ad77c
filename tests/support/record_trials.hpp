/// \file record_trials.hpp
/// Trials and workloads the record-store suites (records_test on SQLite, records_pg_test on both
/// backends) store and read back: an entity per config index, a successful and a failed trial,
/// ResNet-18's C2 and a small dense. Header-only.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/workload.hpp"
#include "tuner/records.hpp"

namespace webtune::testing_support {

/// A config JSON whose entity differs per `index` (not an entity of any real template).
inline std::string entity_json(int64_t index) {
  namespace bj = boost::json;
  bj::array entity{bj::array{"tile_y", "sp", bj::array{16, index + 1, 2}},
                   bj::array{"unroll", "ot", 4}, bj::array{"layout", "ot", "2d"}};
  return bj::serialize(bj::object{{"index", index}, {"entity", std::move(entity)}});
}

/// A successful trial of config `index` with `costs` (s), all_cost 0.25 + 0.001·index s and
/// timestamp 1700000000.125 + index, measured by `agent`.
inline TrialRecord ok_trial(int64_t index, std::vector<double> costs,
                            std::string agent = "agent-1") {
  TrialRecord t;
  t.config_index = index;
  t.config_json = entity_json(index);
  t.result.costs = std::move(costs);
  t.result.all_cost = 0.25 + 0.001 * static_cast<double>(index);
  t.result.timestamp = 1700000000.125 + static_cast<double>(index);
  t.agent = std::move(agent);
  return t;
}

/// A failed trial of config `index` (`error`, `message`) measured by "agent-2".
inline TrialRecord error_trial(int64_t index, MeasureErrorNo error, std::string message) {
  TrialRecord t;
  t.config_index = index;
  t.config_json = entity_json(index);
  t.result = MeasureResult::failure(error, std::move(message));
  t.result.all_cost = 0.5;
  t.result.timestamp = 1700000100.5 + static_cast<double>(index);
  t.agent = "agent-2";
  return t;
}

/// ResNet-18's C2 (conv2d 64→64 3×3 on 56×56).
inline Workload conv_c2() {
  return Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2");
}
/// dense 64×128×256, named M1.
inline Workload dense_m() {
  return Workload::dense(64, 128, 256, "M1");
}

}  // namespace webtune::testing_support
