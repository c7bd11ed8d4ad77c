/// \file tuner_test.cpp
/// Every tuner finds the optimum of a synthetic cost over a real config space (fixed seeds).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tuner/tuner.hpp"
#include "tuner/xgb_tuner.hpp"

namespace webtune {
namespace {

// A synthetic GFLOP/s over the gles-compute dense space: a single peak at particular register
// tiles and workgroup sizes, smooth in log2 of the factors; some configs "fail".
double synthetic_gflops(const ConfigEntity& e) {
  auto lg = [](int64_t v) { return std::log2(static_cast<double>(v)); };
  const auto& y = e.split("tile_y");
  const auto& x = e.split("tile_x");
  double d = std::pow(lg(y[2]) - 2, 2) + std::pow(lg(x[2]) - 2, 2) + std::pow(lg(y[1]) - 3, 2) +
             std::pow(lg(x[1]) - 3, 2) + 0.5 * e.get_int("unroll") / 8.0;
  return 100.0 / (1.0 + d);
}

MeasureResult synthetic_result(const Task& task, const ConfigEntity& e) {
  MeasureResult r;
  const double g = synthetic_gflops(e);
  if (e.get_int("vec4") == 1 && e.split("tile_x")[2] == 8) {  // pretend these crash
    r.error = MeasureErrorNo::kRuntimeDevice;
    return r;
  }
  r.costs = {task.workload.flops() / (g * 1e9)};
  return r;
}

struct Outcome {
  double best = 0, optimum = 0;
  int trials_to_optimum = -1;
  std::set<int64_t> proposed;
  bool duplicate = false;
};

Outcome run(Tuner& tuner, const Task& task, int budget, int batch) {
  Outcome o;
  for (int64_t i : task.space->valid_indices())
    o.optimum = std::max(o.optimum,
                         synthetic_result(task, task.space->get(i)).gflops(task.workload.flops()));
  int trials = 0;
  while (trials < budget) {
    std::vector<ConfigEntity> configs = tuner.next_batch(batch);
    if (configs.empty()) break;
    std::vector<MeasureResult> results;
    for (const ConfigEntity& c : configs) {
      EXPECT_TRUE(task.space->is_valid(c));
      if (!o.proposed.insert(c.index()).second) o.duplicate = true;
      results.push_back(synthetic_result(task, c));
    }
    tuner.update(configs, results);
    trials += static_cast<int>(configs.size());
    if (o.trials_to_optimum < 0 && tuner.best_gflops() >= o.optimum * 0.999)
      o.trials_to_optimum = trials;
  }
  o.best = tuner.best_gflops();
  return o;
}

class TunerFindsOptimum : public ::testing::TestWithParam<std::string> {};

TEST_P(TunerFindsOptimum, OnASyntheticCostOverTheDenseComputeSpace) {
  DeviceLimits limits;
  limits.max_workgroup_invocations = 256;
  limits.max_workgroup_size_x = limits.max_workgroup_size_y = 256;
  limits.max_shared_memory_bytes = 16384;
  // No k_split: the synthetic cost ignores it, and it would triple the space and so the
  // budget below (the xgb case's run time grows faster than its trial count).
  limits.max_workgroup_size_z = 1;
  Task task = Task::create(Workload::dense(128, 128, 128), Target::kGlesCompute, limits);
  // No k_groups either, for the same reason; no device limit excludes it, so a constraint does
  // (as ReplayedSpace pins a knob added after its records).
  const int k_groups = task.space->knob_index("k_groups");
  task.space->add_constraint(
      "k_groups 1 (the synthetic cost ignores it)",
      [k_groups](const ConfigEntity& e) { return e.choices()[k_groups] == 0; });
  const int64_t valid = static_cast<int64_t>(task.space->valid_indices().size());
  ASSERT_GT(valid, 1000);
  // Configs that differ only in double_buffer cost the same here: the budget counts one of each.
  int64_t distinct = 0;
  for (int64_t i : task.space->valid_indices())
    distinct += task.space->get(i).get_int("double_buffer") == 0;
  std::unique_ptr<Tuner> tuner = make_tuner(GetParam(), task, 7);
  // Grid search must sweep the whole space; the others get a third of it.
  const int budget =
      GetParam() == "grid" ? static_cast<int>(valid) : static_cast<int>(distinct / 3);
  Outcome o = run(*tuner, task, budget, 32);
  EXPECT_FALSE(o.duplicate) << "a config was proposed twice";
  EXPECT_GE(o.best, 0.999 * o.optimum)
      << GetParam() << " reached " << o.best << " of " << o.optimum;
  EXPECT_EQ(tuner->name(), GetParam());
  ASSERT_TRUE(tuner->best_config().has_value());
  EXPECT_NEAR(synthetic_gflops(*tuner->best_config()), o.best, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Tuners, TunerFindsOptimum,
                         ::testing::Values("random", "grid", "ga", "xgb"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;  // "Tuners/TunerFindsOptimum.X/xgb", not "/3"
                         });

TEST(Tuner, GridExhaustsTheSpaceWithoutRepeats) {
  Task task = Task::create(Workload::dense(16, 16, 16), Target::kGlesFrag);
  GridSearchTuner grid(task, 1);
  std::set<int64_t> seen;
  while (grid.has_next()) {
    auto batch = grid.next_batch(50);
    ASSERT_FALSE(batch.empty());
    for (const ConfigEntity& c : batch) ASSERT_TRUE(seen.insert(c.index()).second);
  }
  EXPECT_EQ(seen.size(), task.space->valid_indices().size());
  EXPECT_TRUE(grid.next_batch(10).empty());
}

TEST(Tuner, HistoryIsNeverProposedAgain) {
  Task task = Task::create(Workload::dense(16, 16, 16), Target::kGlesFrag);
  RandomTuner first(task, 3);
  auto measured = first.next_batch(40);
  std::vector<MeasureResult> results(measured.size());
  for (auto& r : results) r.costs = {1e-3};
  for (const std::string name : {"random", "ga", "xgb", "grid"}) {
    auto resumed = make_tuner(name, task, 4);
    resumed->load_history(measured, results);
    EXPECT_EQ(resumed->trials(), 40);
    std::set<int64_t> old;
    for (const auto& m : measured) old.insert(m.index());
    while (resumed->has_next()) {
      auto batch = resumed->next_batch(64);
      if (batch.empty()) break;
      for (const ConfigEntity& c : batch) ASSERT_EQ(old.count(c.index()), 0u) << name;
      std::vector<MeasureResult> rs(batch.size());
      for (auto& r : rs) r.costs = {2e-3};
      resumed->update(batch, rs);
    }
  }
}

}  // namespace
}  // namespace webtune
