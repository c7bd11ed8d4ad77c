/// \file emitter_test.cpp
/// Every emitter on every test workload: random valid configs compile, run on Mesa llvmpipe
/// through headless EGL, and match the CPU reference.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "codegen/task.hpp"
#include "native_agent/isolated_runtime.hpp"

namespace webtune {
namespace {

// One worker process (and GL context) for the whole test binary.
IsolatedRuntime& runtime() {
  static IsolatedRuntime instance;
  return instance;
}

struct EmitterCase {
  Target target;
  Workload workload;
};

class EmitterOnLlvmpipe : public ::testing::TestWithParam<EmitterCase> {};

constexpr int kConfigsPerCase = 50;

TEST_P(EmitterOnLlvmpipe, RandomValidConfigsMatchTheReference) {
  const EmitterCase& c = GetParam();
  Task task = Task::create(c.workload, c.target, runtime().info().limits);
  const int64_t valid = static_cast<int64_t>(task.space->valid_indices().size());
  ASSERT_GE(valid, kConfigsPerCase) << "space too small for the test";
  std::mt19937_64 rng(20261121);
  std::vector<ConfigEntity> configs = task.space->sample_distinct(rng, kConfigsPerCase);
  configs.push_back(task.default_config());

  MeasureInput input;
  input.workload = c.workload;
  input.seed = 1234;
  input.samples = reference_samples(c.workload, input.seed, 48);
  input.options.timeout_s = 30;
  std::map<MeasureErrorNo, int> errors;
  for (const ConfigEntity& entity : configs) {
    input.artifact = task.build(entity);
    MeasureResult r = runtime().measure(input);
    EXPECT_EQ(r.error, MeasureErrorNo::kNoError)
        << "config " << entity.index() << " (" << entity.to_string() << "): " << r.message;
    if (r.ok()) {
      ASSERT_EQ(r.costs.size(), 1u);
      EXPECT_GT(r.costs[0], 0.0);
    }
    ++errors[r.error];
  }
  EXPECT_EQ(errors[MeasureErrorNo::kNoError], static_cast<int>(configs.size()));
}

std::vector<EmitterCase> emitter_cases() {
  std::vector<EmitterCase> cases;
  for (Target t : {Target::kGlesFrag, Target::kGlesCompute}) {
    cases.push_back({t, Workload::dense(64, 64, 64, "dense64")});
    cases.push_back({t, Workload::conv2d(1, 64, 56, 56, 128, 1, 2, 0, "C4")});
    cases.push_back({t, Workload::conv2d(1, 128, 28, 28, 256, 1, 2, 0, "C7")});
    cases.push_back({t, Workload::conv2d(1, 6, 10, 9, 7, 3, 1, 1, "conv3x3")});
    cases.push_back({t, Workload::depthwise_conv2d(1, 6, 10, 9, 3, 2, 1, "dw3x3")});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Emitters, EmitterOnLlvmpipe, ::testing::ValuesIn(emitter_cases()),
                         [](const auto& info) {
                           std::string t =
                               info.param.target == Target::kGlesFrag ? "Frag" : "Compute";
                           return t + "_" + info.param.workload.name;
                         });

}  // namespace
}  // namespace webtune
