/// \file task_scheduler_test.cpp
/// The task schedulers of a whole-model tuning (tuner/task_scheduler.hpp) on synthetic best-cost
/// curves: warm-up, Ansor's gradient by hand, where the rounds go, ε-greedy per seed, finished
/// tasks, similarity groups, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "tuner/task_scheduler.hpp"

namespace webtune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

ScheduledTask task(std::string name, double weight, double flops = 0, std::string tag = {}) {
  return ScheduledTask{std::move(name), weight, flops, std::move(tag)};
}

/// A synthetic task: its best cost after t rounds of tuning.
using Curve = std::function<double(int)>;

/// Runs `rounds` rounds of `scheduler` against `curves` (a task whose curve returns a negative
/// number at t is finished before that round); returns the rounds each task got.
std::vector<int> simulate(TaskScheduler& scheduler, const std::vector<Curve>& curves, int rounds,
                          std::vector<size_t>* order = nullptr) {
  std::vector<int> got(curves.size(), 0);
  for (int r = 0; r < rounds; ++r) {
    const std::optional<size_t> next = scheduler.next();
    if (!next) break;
    const size_t i = *next;
    if (order) order->push_back(i);
    scheduler.record(i, curves[i](++got[i]));
  }
  return got;
}

GradientSchedulerOptions no_epsilon(uint64_t seed = 1) {
  GradientSchedulerOptions o;
  o.epsilon = 0;
  o.seed = seed;
  return o;
}

TEST(TaskScheduler, WarmUpGivesEveryTaskOneRoundInTaskOrder) {
  for (const std::string policy : {"round-robin", "gradient"}) {
    SCOPED_TRACE(policy);
    auto s = make_task_scheduler(policy, {task("a", 1), task("b", 8), task("c", 1), task("d", 3)});
    std::vector<size_t> order;
    for (int i = 0; i < 4; ++i) {
      const auto next = s->next();
      ASSERT_TRUE(next.has_value());
      order.push_back(*next);
      // Even a task that fails everything takes its turn only once in the warm-up.
      s->record(*next, *next == 1 ? kInf : 1.0);
    }
    EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(s->rounds(i), 1);
  }
}

TEST(TaskScheduler, RestoredTasksCountAsWarmedUp) {
  GradientScheduler s({task("a", 1), task("b", 1), task("c", 1)}, no_epsilon());
  s.restore(1, 5, 2.0);
  EXPECT_EQ(s.rounds(1), 5);
  EXPECT_EQ(s.history(1), std::vector<double>(5, 2.0));
  EXPECT_EQ(s.next(), 0u);
  s.record(0, 1.0);
  EXPECT_EQ(s.next(), 2u) << "task 1 was restored: no warm-up round for it";
}

TEST(TaskScheduler, RoundRobinTakesTheLiveTasksInTurn) {
  RoundRobinScheduler s({task("a", 1), task("b", 5), task("c", 1)});
  std::vector<size_t> order;
  simulate(s, {[](int) { return 1.0; }, [](int) { return 1.0; }, [](int) { return 1.0; }}, 7,
           &order);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 0, 1, 2, 0}));
  s.finish(1);
  order.clear();
  for (int r = 0; r < 4; ++r) {
    order.push_back(*s.next());
    s.record(order.back(), 1.0);
  }
  EXPECT_EQ(order, (std::vector<size_t>{2, 0, 2, 0})) << "after 0 comes 2: 1 is finished";
}

TEST(TaskScheduler, GradientMatchesAnsorsFormulaByHand) {
  GradientSchedulerOptions o = no_epsilon();
  GradientScheduler s({task("a", 2)}, o);
  for (double g : {10.0, 8.0, 6.0, 5.0}) s.record(0, g);
  // t = 4, Δt = 3: backward (5 − 10) / 3; forward −g/t = −5/4 (no similar task).
  const double expected = 2 * (0.2 * (5.0 - 10.0) / 3 + 0.8 * (-5.0 / 4));
  EXPECT_NEAR(s.gradient(0), expected, 1e-12);
  EXPECT_NEAR(s.gradient(0), -8.0 / 3, 1e-12);

  // While t ≤ Δt there is no backward window: only the forward term.
  GradientScheduler young({task("a", 3)}, o);
  young.record(0, 4.0);
  young.record(0, 2.0);
  EXPECT_NEAR(young.gradient(0), 3 * 0.8 * (-2.0 / 2), 1e-12);
}

TEST(TaskScheduler, ASimilarTasksFlopRateBoundsTheForwardTerm) {
  // Same tag, same FLOPs: task 0 runs at 100 FLOP/s (cost 1 s), task 1 at 10 (cost 10 s).
  GradientScheduler s({task("fast", 1, 100, "conv2d_9"), task("slow", 1, 100, "conv2d_9"),
                       task("alone", 1, 100, "dense_9")},
                      no_epsilon());
  s.restore(0, 10, 1.0);
  s.restore(1, 10, 10.0);
  s.restore(2, 10, 10.0);
  // slow: min(−10/10, 2·100/100 − 10) = −8 (the sibling's FLOP/s says it can get far faster).
  EXPECT_NEAR(s.gradient(1), 0.8 * -8.0, 1e-12);
  // alone: nothing similar, only −g/t = −1.
  EXPECT_NEAR(s.gradient(2), 0.8 * -1.0, 1e-12);
  // fast: its own rate bounds nothing (β·C/V − g = +1 > −g/t).
  EXPECT_NEAR(s.gradient(0), 0.8 * -0.1, 1e-12);
  EXPECT_EQ(s.next(), 1u);
}

TEST(TaskScheduler, AHeavyStillImprovingTaskGetsMoreRoundsThanAConvergedOne) {
  // Task 0: weight 4, still improving as 1 + 9/t. Task 1: weight 1, converged at 1 from the
  // first round on. Task 2: weight 1, improving like task 0.
  const std::vector<Curve> curves = {[](int t) { return 1.0 + 9.0 / t; }, [](int) { return 1.0; },
                                     [](int t) { return 1.0 + 9.0 / t; }};
  std::vector<ScheduledTask> tasks = {task("heavy", 4), task("converged", 1), task("light", 1)};
  GradientScheduler gradient(tasks, no_epsilon());
  const std::vector<int> got = simulate(gradient, curves, 60);
  EXPECT_GT(got[0], got[2]) << "the heavier of two equal curves gets more rounds";
  EXPECT_GT(got[2], got[1]) << "an improving task gets more rounds than a converged one";
  EXPECT_GT(got[0], 3 * got[1]);
  EXPECT_EQ(got[0] + got[1] + got[2], 60);

  // Round-robin spreads them evenly, and ends with a worse estimated latency.
  RoundRobinScheduler robin(tasks);
  EXPECT_EQ(simulate(robin, curves, 60), (std::vector<int>{20, 20, 20}));
  ASSERT_TRUE(gradient.objective() && robin.objective());
  EXPECT_LT(*gradient.objective(), *robin.objective());
}

TEST(TaskScheduler, ATaskWithoutASuccessGoesFirst) {
  GradientScheduler s({task("a", 10), task("b", 1), task("c", 1)}, no_epsilon());
  simulate(s, {[](int t) { return 10.0 / t; }, [](int) { return kInf; }, [](int) { return 1.0; }},
           3);
  EXPECT_EQ(s.gradient(1), -kInf);
  EXPECT_FALSE(s.objective().has_value()) << "b has no cost: the latency is unknown";
  EXPECT_EQ(s.next(), 1u);
  s.record(1, 2.0);
  ASSERT_TRUE(s.objective().has_value());
  EXPECT_DOUBLE_EQ(*s.objective(), 10 * 10.0 + 1 * 2.0 + 1 * 1.0);
}

TEST(TaskScheduler, EpsilonGreedyIsReproduciblePerSeed) {
  const std::vector<Curve> curves = {[](int t) { return 1.0 + 9.0 / t; },
                                     [](int t) { return 2.0 + 1.0 / t; },
                                     [](int t) { return 1.0 + 3.0 / t; }, [](int) { return 1.0; }};
  std::vector<ScheduledTask> tasks = {task("a", 4), task("b", 1), task("c", 2), task("d", 1)};
  auto run = [&](uint64_t seed, double epsilon) {
    GradientSchedulerOptions o;
    o.seed = seed;
    o.epsilon = epsilon;
    GradientScheduler s(tasks, o);
    std::vector<size_t> order;
    simulate(s, curves, 200, &order);
    return order;
  };
  EXPECT_EQ(run(7, 0.05), run(7, 0.05));
  EXPECT_NE(run(7, 0.3), run(8, 0.3)) << "another seed draws other random picks";
  EXPECT_NE(run(7, 0.05), run(7, 0)) << "ε = 0.05 makes some picks random";
  // ε = 1: every pick after the warm-up is uniform over the live tasks.
  std::map<size_t, int> counts;
  for (size_t i : run(3, 1.0)) ++counts[i];
  for (size_t i = 0; i < 4; ++i) EXPECT_GT(counts[i], 30) << "task " << i;
}

TEST(TaskScheduler, FinishedTasksAreNeverPicked) {
  for (const std::string policy : {"round-robin", "gradient"}) {
    SCOPED_TRACE(policy);
    GradientSchedulerOptions o;
    o.epsilon = 0.5;  // random picks too must skip finished tasks
    std::unique_ptr<TaskScheduler> s =
        policy == "gradient"
            ? std::unique_ptr<TaskScheduler>(std::make_unique<GradientScheduler>(
                  std::vector<ScheduledTask>{task("a", 9), task("b", 1), task("c", 1)}, o))
            : make_task_scheduler(policy, {task("a", 9), task("b", 1), task("c", 1)});
    s->finish(2);  // finished before its warm-up round: it never gets one
    for (int r = 0; r < 50; ++r) {
      const auto next = s->next();
      ASSERT_TRUE(next.has_value());
      ASSERT_NE(*next, 2u);
      if (r == 10) s->finish(0);
      if (r > 10) {
        ASSERT_EQ(*next, 1u) << "round " << r;
      }
      s->record(*next, 10.0 / (r + 1));
    }
    EXPECT_EQ(s->rounds(2), 0);
    s->finish(1);
    EXPECT_FALSE(s->next().has_value());
  }
}

TEST(TaskScheduler, ASlowTaskLeavesItsSimilarityGroup) {
  GradientScheduler s({task("fast", 1, 100, "g"), task("slow", 1, 100, "g")}, no_epsilon());
  s.record(0, 1.0);
  for (int r = 0; r < 6; ++r) s.record(1, 10.0);
  EXPECT_EQ(s.similar(1), (std::vector<size_t>{0, 1})) << "6 rounds: only 5 more than fast";
  s.record(1, 10.0);  // 7 rounds, still 10× slower than its sibling
  EXPECT_TRUE(s.similar(1).empty());
  EXPECT_EQ(s.similar(0), (std::vector<size_t>{0}));
  EXPECT_NEAR(s.gradient(1), 0.8 * -10.0 / 7, 1e-12) << "no sibling bound any more";
}

TEST(TaskScheduler, SimilarityTagsGroupOpAndFlopScale) {
  const Workload c2 = Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1);
  const Workload c5 = Workload::conv2d(1, 128, 28, 28, 128, 3, 1, 1);  // the same FLOPs
  const Workload c4 = Workload::conv2d(1, 64, 56, 56, 128, 1, 2, 0);   // 1x1: 18x fewer
  const Workload dense = Workload::dense(1, 1000, 512);
  EXPECT_EQ(similarity_tag(c2), similarity_tag(c5));
  EXPECT_NE(similarity_tag(c2), similarity_tag(c4));
  EXPECT_EQ(similarity_tag(c2).rfind("conv2d_", 0), 0u) << similarity_tag(c2);
  EXPECT_EQ(similarity_tag(dense).rfind("dense_", 0), 0u) << similarity_tag(dense);
  const double bucket = std::floor(std::log(c2.flops() + 1) / std::log(1.618));
  EXPECT_EQ(similarity_tag(c2), "conv2d_" + std::to_string(static_cast<int>(bucket)));
}

TEST(TaskScheduler, BadInputIsRefusedWithTheTaskNamed) {
  EXPECT_THROW(RoundRobinScheduler(std::vector<ScheduledTask>{}), std::invalid_argument);
  try {
    RoundRobinScheduler s({task("C2", 0)});
    FAIL() << "a zero weight was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'C2'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RoundRobinScheduler({task("a", 1, -5)}), std::invalid_argument);
  GradientSchedulerOptions o;
  o.backward_window = 0;
  EXPECT_THROW(GradientScheduler({task("a", 1)}, o), std::invalid_argument);
  RoundRobinScheduler s({task("a", 1)});
  EXPECT_THROW(s.record(1, 1.0), std::out_of_range);
  EXPECT_THROW(s.record(0, std::nan("")), std::invalid_argument);
  EXPECT_THROW(s.record(0, -1.0), std::invalid_argument);
  EXPECT_THROW(make_task_scheduler("fastest-first", {task("a", 1)}), std::invalid_argument);
  EXPECT_EQ(make_task_scheduler("latency", {task("a", 1)})->name(), "gradient");
  EXPECT_EQ(make_task_scheduler("round-robin", {task("a", 1)})->name(), "round-robin");
}

}  // namespace
}  // namespace webtune
