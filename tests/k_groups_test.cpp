/// \file k_groups_test.cpp
/// gles-compute's k_groups knob: cross-workgroup split-K in one dispatch (the dispatch's z,
/// partial sums and arrival counters in scratch buffers, the tile's last group sums and stores;
/// glsl_compute_emitter.cpp says how).
///
/// KGroupsSpace.*, KGroupsArtifact.*: without a device — the knob (last, read as 1 where a
/// record lacks it, whose kernel is the old one byte for byte), its rules, the artifact's
/// dispatch and scratch fields and their JSON, the cost model's features.
/// KGroupsOnLlvmpipe.*: on Mesa llvmpipe through headless EGL (the native runtime, in a worker
/// process), dense (97×101×103 and a K whose k-tiles the groups do not divide, with an empty
/// group) and conv2d with each of issue 14's test epilogues (bias, relu, clip, hard-swish,
/// residual before and after the activation) match the CPU reference. Every trial does the
/// checked run, several timed runs and — for a kernel with scratch — one more checked run after
/// them (GlRuntime), so a counter the kernel failed to reset shows up as WRONG_ANSWER; a kernel
/// with the reset removed is caught that way. Random valid k_groups > 1 configs of odd shapes
/// match too, and the runtime refuses scratch for a kernel that is not gles-compute.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/glsl_compute_emitter.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/reference.hpp"
#include "codegen/task.hpp"
#include "codegen/template.hpp"
#include "native_agent/isolated_runtime.hpp"
#include "support/compute_epilogues.hpp"

namespace webtune {
namespace {

// ---- helpers ---------------------------------------------------------------------------------

/// `knobs` (a JSON list of GEMM knobs without double_buffer, k_split and k_groups) with those
/// three appended, as an entity of `task`'s space; checked valid.
ConfigEntity gemm_entity(const Task& task, const std::string& knobs, int double_buffer, int k_split,
                         int k_groups) {
  const std::string json = R"({"entity":)" + knobs.substr(0, knobs.size() - 1) +
                           R"(,["double_buffer","ot",)" + std::to_string(double_buffer) +
                           R"(],["k_split","ot",)" + std::to_string(k_split) +
                           R"(],["k_groups","ot",)" + std::to_string(k_groups) + "]]}";
  const ConfigEntity e = task.space->parse(json);
  std::string why;
  EXPECT_TRUE(task.space->is_valid(e, &why)) << json << ": " << why;
  return e;
}

/// "[ceil(extent / (threads·regs)), threads, regs]" as JSON.
std::string split3(int64_t extent, int64_t threads, int64_t regs) {
  const int64_t inner = threads * regs;
  return "[" + std::to_string((extent + inner - 1) / inner) + "," + std::to_string(threads) + "," +
         std::to_string(regs) + "]";
}

/// A shared-memory GEMM entity's first six knobs: tile_y, tile_x over the view's rows and
/// columns, tile_k of depth `k_depth` over `depth`, use_shared 1, `vec4`, `unroll`.
std::string shared_knobs(int64_t rows, int64_t ty, int64_t ry, int64_t cols, int64_t tx, int64_t rx,
                         int64_t depth, int64_t k_depth, int vec4, int unroll) {
  return R"([["tile_y","sp",)" + split3(rows, ty, ry) + R"(],["tile_x","sp",)" +
         split3(cols, tx, rx) + R"(],["tile_k","sp",[)" +
         std::to_string((depth + k_depth - 1) / k_depth) + "," + std::to_string(k_depth) +
         R"(]],["use_shared","ot",1],["vec4","ot",)" + std::to_string(vec4) +
         R"(],["unroll","ot",)" + std::to_string(unroll) + "]]";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- without a device ------------------------------------------------------------------------

TEST(KGroupsSpace, IsGlesComputesLastKnobAndOnlyItsGemm) {
  const Workload dense = Workload::dense(64, 96, 48);
  const auto gles = glsl_compute_space(dense);
  ASSERT_FALSE(gles->knobs().empty());
  const Knob& last = gles->knobs().back();
  EXPECT_EQ(last.name, "k_groups");
  EXPECT_TRUE(last.absent_means_first);
  EXPECT_EQ(last.candidates,
            (std::vector<KnobValue>{int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}}));
  // Not on webgpu (its space is pinned unchanged in template_test), not on depthwise.
  for (const Workload& w : {dense, Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1)}) {
    const Task webgpu = Task::create(w, Target::kWebgpu);
    for (const Knob& k : webgpu.space->knobs()) EXPECT_NE(k.name, "k_groups");
  }
  for (const Knob& k :
       glsl_compute_space(Workload::depthwise_conv2d(1, 8, 12, 12, 3, 1, 1))->knobs())
    EXPECT_NE(k.name, "k_groups");
}

TEST(KGroupsSpace, RecordsWithoutTheKnobReadAsOneAndBuildTheSameKernel) {
  const Task task = Task::create(Workload::dense(64, 96, 48), Target::kGlesCompute);
  const std::string old_knobs =
      R"([["tile_y","sp",[1,8,8]],["tile_x","sp",[3,4,8]],["tile_k","sp",[6,8]],)"
      R"(["use_shared","ot",1],["vec4","ot",1],["unroll","ot",1],["double_buffer","ot",1],)"
      R"(["k_split","ot",2]])";
  const ConfigEntity old = task.space->parse(R"({"entity":)" + old_knobs + "}");
  EXPECT_EQ(old.get_int("k_groups"), 1);
  const ConfigEntity one =
      gemm_entity(task,
                  R"([["tile_y","sp",[1,8,8]],["tile_x","sp",[3,4,8]],["tile_k","sp",[6,8]],)"
                  R"(["use_shared","ot",1],["vec4","ot",1],["unroll","ot",1]])",
                  1, 2, 1);
  // Choice 0 of the last knob: the same index as in the space before the knob.
  EXPECT_EQ(old.index(), one.index());
  const KernelArtifact a = task.build(old);
  EXPECT_EQ(a.source, task.build(one).source);
  EXPECT_EQ(a.dispatch[2], 1);
  EXPECT_EQ(a.scratch_floats, 0);
  EXPECT_EQ(a.scratch_counters, 0);
  EXPECT_FALSE(contains(a.source, "partials"));
  EXPECT_FALSE(a.to_json().contains("scratch_floats"));
  EXPECT_FALSE(a.to_json().contains("scratch_counters"));
}

TEST(KGroupsSpace, RulesNeedSharedMemoryAndNoMoreGroupsThanKTiles) {
  const Task task = Task::create(Workload::dense(32, 32, 40), Target::kGlesCompute);
  auto why_not = [&](const std::string& knobs, int k_groups) {
    const std::string json = R"({"entity":)" + knobs.substr(0, knobs.size() - 1) +
                             R"(,["double_buffer","ot",0],["k_split","ot",1],["k_groups","ot",)" +
                             std::to_string(k_groups) + "]]}";
    std::string why;
    return task.space->is_valid(task.space->parse(json), &why) ? std::string() : why;
  };
  const std::string global =
      R"([["tile_y","sp",[4,8,1]],["tile_x","sp",[4,8,1]],["tile_k","sp",[40,1]],)"
      R"(["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1]])";
  EXPECT_EQ(why_not(global, 1), "");
  EXPECT_NE(why_not(global, 2).find("k_groups > 1 needs shared memory"), std::string::npos)
      << why_not(global, 2);
  // 40 deep in tiles of 16: 3 k-tiles, so 2 groups (2 + 1 tiles) but not 4 or 8.
  const std::string shared = shared_knobs(32, 8, 1, 32, 8, 1, 40, 16, 0, 1);
  EXPECT_EQ(why_not(shared, 2), "");
  EXPECT_NE(why_not(shared, 4).find("k_groups <= k_outer"), std::string::npos)
      << why_not(shared, 4);
  EXPECT_NE(why_not(shared, 8).find("k_groups <= k_outer"), std::string::npos);
  // Tiles of 4: 10 k-tiles, enough for 8 groups (2 each, the last group none).
  EXPECT_EQ(why_not(shared_knobs(32, 8, 1, 32, 8, 1, 40, 4, 0, 1), 8), "");
}

TEST(KGroupsArtifact, DispatchScratchAndKernelText) {
  const Workload w = Workload::dense(97, 101, 103);
  const Task task = Task::create(w, Target::kGlesCompute);
  // 4×2 tiles of 32×64 outputs; 13 k-tiles of 8 over 8 groups: T = 2, group 7 has none.
  const ConfigEntity e =
      gemm_entity(task, shared_knobs(97, 8, 4, 101, 16, 4, 103, 8, 0, 1), 1, 1, 8);
  const KernelArtifact a = task.build(e);
  EXPECT_EQ(a.dispatch, (std::array<int64_t, 3>{2, 4, 8}));
  EXPECT_EQ(a.workgroup, (std::array<int64_t, 3>{16, 8, 1}));
  EXPECT_EQ(a.scratch_floats, 8 * 97 * 101);
  EXPECT_EQ(a.scratch_counters, 2 * 4);
  const std::string& s = a.source;
  EXPECT_TRUE(contains(s, "layout(std430, binding = 5) coherent buffer PartialBuffer"));
  EXPECT_TRUE(contains(s, "layout(std430, binding = 6) coherent buffer CounterBuffer"));
  EXPECT_TRUE(contains(s, "atomicAdd(counters[tile], 1u)"));
  EXPECT_TRUE(contains(s, "group_is_last = arrived == 7u"));
  EXPECT_TRUE(contains(s, "atomicExchange(counters[tile], 0u)"));
  EXPECT_TRUE(contains(s, "memoryBarrierBuffer();"));
  // An empty group prefetches a valid tile (the last) and runs none.
  EXPECT_TRUE(contains(s, "min(tile_begin, 12) * 8"));
  EXPECT_TRUE(contains(s, "int group_tiles = min(2, 13 - tile_begin);"));
  // The partials are summed in group order: partials[0·P + …] + … + partials[7·P + …].
  EXPECT_TRUE(contains(s, "acc[0] = partials[0 * 9797 + "));
  EXPECT_TRUE(contains(s, " + partials[7 * 9797 + "));
  EXPECT_GE(a.shared_memory_bytes, 4 * 2 * 8 * (32 + 64) + 4);

  // JSON: the fields travel, and only when non-zero.
  const boost::json::object o = a.to_json();
  EXPECT_EQ(o.at("scratch_floats").as_int64(), 8 * 97 * 101);
  EXPECT_EQ(o.at("scratch_counters").as_int64(), 8);
  const KernelArtifact back = KernelArtifact::from_json(o);
  EXPECT_EQ(back.scratch_floats, a.scratch_floats);
  EXPECT_EQ(back.scratch_counters, a.scratch_counters);
  EXPECT_EQ(back.dispatch, a.dispatch);
  boost::json::object bad = o;
  bad["scratch_counters"] = -1;
  EXPECT_THROW(KernelArtifact::from_json(bad), std::invalid_argument);
}

TEST(KGroupsArtifact, SingleBufferedAndKSplitKernelsKeepEveryInvocationAtTheBarriers) {
  const Workload w = Workload::conv2d(1, 3, 7, 7, 13, 3, 1, 1);
  const Task task = Task::create(w, Target::kGlesCompute);
  const KernelArtifact a =
      task.build(gemm_entity(task, shared_knobs(13, 4, 2, 49, 8, 2, 27, 8, 0, 1), 0, 2, 4));
  EXPECT_EQ(a.dispatch[2], 4);
  EXPECT_EQ(a.workgroup[2], 2);
  EXPECT_TRUE(contains(a.source, "for (int k0 = tile_begin * 8; k0 < tile_end * 8; k0 += 8)"));
  // k_split's slices 1.. must not return before the groups' barriers.
  const size_t last_barrier = a.source.rfind("barrier();");
  const size_t slice_return = a.source.find("if (kz > 0) return;");
  ASSERT_NE(slice_return, std::string::npos);
  EXPECT_GT(slice_return, last_barrier);
}

TEST(KGroupsArtifact, FeaturesCountTheExtraWorkgroupsAndThePartialsTraffic) {
  const Workload w = Workload::dense(64, 64, 64);
  const Task task = Task::create(w, Target::kGlesCompute);
  const std::string knobs = shared_knobs(64, 8, 4, 64, 8, 4, 64, 8, 0, 1);
  const ConfigEntity one = gemm_entity(task, knobs, 1, 1, 1);
  const ConfigEntity four = gemm_entity(task, knobs, 1, 1, 4);
  const KernelArtifact a1 = task.build(one), a4 = task.build(four);
  const std::vector<float> f1 = task.kernel_template->features(w, one, &a1);
  const std::vector<float> f4 = task.kernel_template->features(w, four, &a4);
  const std::vector<std::string>& names = Template::analytic_feature_names();
  auto at = [&](const std::vector<float>& f, const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return f[i];
    ADD_FAILURE() << name;
    return 0.0f;
  };
  EXPECT_FLOAT_EQ(at(f4, "log2_groups"), at(f1, "log2_groups") + 2.0f);
  EXPECT_FLOAT_EQ(at(f4, "log2_outputs_per_invocation"),
                  at(f1, "log2_outputs_per_invocation") - 2.0f);
  // 4·64·(1/32 + 1/32) = 16 bytes of inputs per output, plus 8·k_groups of partials.
  EXPECT_FLOAT_EQ(at(f1, "log2_input_bytes_per_output"), static_cast<float>(std::log2(1.0 + 16)));
  EXPECT_FLOAT_EQ(at(f4, "log2_input_bytes_per_output"),
                  static_cast<float>(std::log2(1.0 + 16 + 32)));
}

// ---- on llvmpipe -----------------------------------------------------------------------------

// One worker process (and GL context) for the whole test binary.
IsolatedRuntime& runtime() {
  static IsolatedRuntime instance;
  return instance;
}

/// A measure input of `w` (seed `seed`) with several timed runs: the checked run, `runs` × 2
/// timed runs and, for a kernel with scratch, the runtime's check after them.
MeasureInput timed_input(const Workload& w, uint64_t seed, int runs = 2) {
  MeasureInput input;
  input.workload = w;
  input.seed = seed;
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, seed);
  if (w.output_size() <= kMaxSamples) {
    input.samples = test::every_output_with_epilogue(w, seed);
  } else {
    // Every third output (the stride crosses rows and columns, so every tile is sampled), and
    // the whole last 64 outputs (the guarded corner tile).
    for (int64_t i = 0; i < w.output_size(); ++i)
      if ((i % 3 == 0 || i >= w.output_size() - 64) &&
          static_cast<int64_t>(input.samples.size()) < kMaxSamples)
        input.samples.push_back(reference_at(w, inputs, i));
  }
  input.options.timeout_s = 60;
  input.options.number = runs;
  input.options.repeat = 2;
  return input;
}

void expect_matches(const Task& task, const ConfigEntity& e, uint64_t seed, int runs = 2) {
  MeasureInput input = timed_input(task.workload, seed, runs);
  input.artifact = task.build(e);
  ASSERT_GT(input.artifact.scratch_counters, 0) << e.to_string();
  const MeasureResult r = runtime().measure(input);
  EXPECT_EQ(r.error, MeasureErrorNo::kNoError)
      << task.workload.key() << " " << e.to_string() << ": " << r.message;
  if (r.ok()) EXPECT_EQ(r.costs.size(), 2u);
}

TEST(KGroupsOnLlvmpipe, OddDenseWithEveryGroupCountAndAnEmptyGroupMatches) {
  // 97×101×103: 13 k-tiles of 8 (the last guarded: 104 for 103); over 2, 4, 8 groups that is
  // 7 + 6, 4 + 4 + 4 + 1, and 2 × 6 + 1 + 0 (an empty group).
  const Task odd = Task::create(Workload::dense(97, 101, 103, "dense97x101x103"),
                                Target::kGlesCompute, runtime().info().limits);
  const std::string knobs = shared_knobs(97, 8, 4, 101, 16, 4, 103, 8, 0, 1);
  for (int k_groups : {2, 4, 8})
    for (int double_buffer : {0, 1})
      expect_matches(odd, gemm_entity(odd, knobs, double_buffer, 1, k_groups), 11);
  // k_split 2 inside each group, unroll 2, and 16-deep tiles (7 k-tiles over 4 groups: 2,2,2,1).
  expect_matches(odd, gemm_entity(odd, shared_knobs(97, 8, 2, 101, 8, 4, 103, 16, 0, 2), 1, 2, 4),
                 12);
  expect_matches(odd, gemm_entity(odd, shared_knobs(97, 8, 2, 101, 8, 4, 103, 16, 0, 2), 0, 2, 2),
                 13);

  // vec4 (A rows four at a time, vec4 columns and partials), K = 40: 5 k-tiles of 8 over 4
  // groups: 2, 2, 1, 0.
  const Task vec4 = Task::create(Workload::dense(64, 96, 40, "dense64x96x40"), Target::kGlesCompute,
                                 runtime().info().limits);
  for (int k_groups : {2, 4}) {
    const ConfigEntity e =
        gemm_entity(vec4, shared_knobs(64, 8, 4, 96, 8, 4, 40, 8, 1, 1), 1, 1, k_groups);
    EXPECT_TRUE(
        contains(vec4.build(e).source, "coherent buffer PartialBuffer { vec4 partials[]; }"));
    expect_matches(vec4, e, 14);
  }
  expect_matches(vec4, gemm_entity(vec4, shared_knobs(64, 4, 4, 96, 8, 4, 40, 8, 1, 1), 1, 2, 4),
                 15);
}

TEST(KGroupsOnLlvmpipe, Conv2dWithEveryEpilogueMatches) {
  struct Case {
    Workload workload;
    std::string knobs;
    int double_buffer, k_split, k_groups;
  };
  const Workload regular = Workload::conv2d(2, 4, 6, 6, 8, 3, 1, 1, "conv4to8_6x6_n2");
  const Workload odd = Workload::conv2d(1, 3, 7, 7, 13, 3, 1, 1, "conv3to13_7x7");
  const std::vector<Case> cases = {
      // depth 36 in 5 tiles of 8 (guarded: 40): 4 groups get 2, 2, 1, 0; vec4 A reads.
      {regular, shared_knobs(8, 4, 2, 72, 8, 4, 36, 8, 1, 1), 1, 2, 4},
      // rows 13 of 16, columns 49 of 64, depth 27 of 32 (4 tiles): 4 groups of 1, 2 of 2.
      {odd, shared_knobs(13, 4, 2, 49, 8, 2, 27, 8, 0, 1), 1, 1, 4},
      {odd, shared_knobs(13, 4, 2, 49, 8, 2, 27, 8, 0, 1), 0, 2, 2},
      // 4-deep tiles: 7 k-tiles over 8 groups is too many; over 4: 2, 2, 2, 1.
      {odd, shared_knobs(13, 2, 4, 49, 16, 1, 27, 4, 0, 2), 1, 2, 4},
  };
  int runs = 0;
  for (const Case& c : cases)
    for (const test::NamedEpilogue& ep : test::kTestEpilogues) {
      const Workload w = test::with_epilogue_suffix(c.workload, ep.suffix);
      const Task task = Task::create(w, Target::kGlesCompute, runtime().info().limits);
      const ConfigEntity e = gemm_entity(task, c.knobs, c.double_buffer, c.k_split, c.k_groups);
      EXPECT_TRUE(contains(task.build(e).source, "= webtune_epilogue(")) << ep.label;
      expect_matches(task, e, 21 + runs);
      ++runs;
    }
  EXPECT_EQ(runs, static_cast<int>(cases.size() * std::size(test::kTestEpilogues)));
}

TEST(KGroupsOnLlvmpipe, DenseEpiloguesAfterTheGroupSumMatch) {
  // The epilogue runs once, on the sum of the groups (bias per column, a vec4 of four biases).
  for (const test::NamedEpilogue& ep : test::kTestEpilogues) {
    const Workload w =
        test::with_epilogue_suffix(Workload::dense(16, 32, 24, "dense16x32x24"), ep.suffix);
    const Task task = Task::create(w, Target::kGlesCompute, runtime().info().limits);
    expect_matches(task, gemm_entity(task, shared_knobs(16, 4, 4, 32, 8, 4, 24, 4, 1, 1), 1, 1, 4),
                   31);
    const Workload odd =
        test::with_epilogue_suffix(Workload::dense(11, 13, 17, "dense11x13x17"), ep.suffix);
    const Task odd_task = Task::create(odd, Target::kGlesCompute, runtime().info().limits);
    expect_matches(odd_task,
                   gemm_entity(odd_task, shared_knobs(11, 4, 2, 13, 4, 2, 17, 4, 0, 1), 0, 1, 2),
                   32);
  }
}

TEST(KGroupsOnLlvmpipe, RandomGroupedConfigsOfOddShapesMatch) {
  const Workload shapes[] = {
      Workload::dense(29, 31, 37, "dense29x31x37"),
      test::with_epilogue_suffix(Workload::conv2d(1, 3, 7, 7, 13, 3, 1, 1, "conv3to13_7x7"),
                                 "+bias+relu"),
  };
  std::map<int64_t, int> by_groups;
  for (const Workload& w : shapes) {
    const Task task = Task::create(w, Target::kGlesCompute, runtime().info().limits);
    // Rejection sampling over the raw space (enumerating the valid one takes seconds).
    std::mt19937_64 rng(20261125);
    std::uniform_int_distribution<int64_t> index(0, task.space->raw_size() - 1);
    std::set<int64_t> taken;
    for (int tries = 0; taken.size() < 6 && tries < 1000000; ++tries) {
      const ConfigEntity e = task.space->get(index(rng));
      if (e.get_int("k_groups") == 1 || taken.count(e.index()) || !task.space->is_valid(e))
        continue;
      taken.insert(e.index());
      ++by_groups[e.get_int("k_groups")];
      expect_matches(task, e, 40 + taken.size(), 1);
    }
    EXPECT_EQ(taken.size(), 6u) << w.key();
  }
  EXPECT_GE(by_groups.size(), 2u);
}

TEST(KGroupsOnLlvmpipe, AKernelThatDoesNotResetItsCountersIsCaughtAfterTheTimedRuns) {
  const Task task = Task::create(Workload::dense(64, 96, 40, "dense64x96x40"), Target::kGlesCompute,
                                 runtime().info().limits);
  MeasureInput input = timed_input(task.workload, 5);
  input.artifact =
      task.build(gemm_entity(task, shared_knobs(64, 8, 4, 96, 8, 4, 40, 8, 1, 1), 1, 1, 4));
  const std::string reset = "if (group_is_last == 1u) atomicExchange(counters[tile], 0u);";
  const size_t at = input.artifact.source.find(reset);
  ASSERT_NE(at, std::string::npos);
  input.artifact.source.erase(at, reset.size());
  // The checked run starts from zeroed counters and passes; the later runs find no last group.
  const MeasureResult r = runtime().measure(input);
  EXPECT_EQ(r.error, MeasureErrorNo::kWrongAnswer) << r.message;
  EXPECT_NE(r.message.find("after the timed runs"), std::string::npos) << r.message;
}

TEST(KGroupsOnLlvmpipe, ScratchIsRefusedForAKernelThatIsNotGlesCompute) {
  const Workload w = Workload::dense(16, 16, 16);
  const Task frag = Task::create(w, Target::kGlesFrag, runtime().info().limits);
  MeasureInput input = timed_input(w, 3);
  input.artifact = frag.build(frag.default_config());
  input.artifact.scratch_floats = 256;
  MeasureResult r = runtime().measure(input);
  EXPECT_EQ(r.error, MeasureErrorNo::kInstantiation) << r.message;
  EXPECT_NE(r.message.find("scratch buffers"), std::string::npos) << r.message;
  // The same kernel without scratch runs.
  input.artifact.scratch_floats = 0;
  r = runtime().measure(input);
  EXPECT_EQ(r.error, MeasureErrorNo::kNoError) << r.message;
}

}  // namespace
}  // namespace webtune
