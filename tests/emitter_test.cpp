/// \file emitter_test.cpp
/// Every emitter on every test workload: random valid configs compile, run on Mesa llvmpipe
/// through headless EGL, and match the CPU reference.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <map>
#include <ostream>
#include <random>
#include <string>

#include "codegen/task.hpp"
#include "native_agent/isolated_runtime.hpp"
#include "support/odd_shapes.hpp"

namespace webtune {
namespace {

// One worker process (and GL context) for the whole test binary.
IsolatedRuntime& runtime() {
  static IsolatedRuntime instance;
  return instance;
}

/// A measure input for `workload` on inputs of `seed`, checked at `samples` reference points,
/// with a 30 s timeout; the caller adds the artifact.
MeasureInput checked_input(const Workload& workload, uint64_t seed, int samples) {
  MeasureInput input;
  input.workload = workload;
  input.seed = seed;
  input.samples = reference_samples(workload, seed, samples);
  input.options.timeout_s = 30;
  return input;
}

struct EmitterCase {
  Target target;
  Workload workload;
};

/// "Frag_dense64", "Compute_C4": the test name suffix, and what gtest prints for GetParam().
std::string case_name(const EmitterCase& c) {
  return std::string(c.target == Target::kGlesFrag ? "Frag" : "Compute") + "_" + c.workload.name;
}
void PrintTo(const EmitterCase& c, std::ostream* os) {
  *os << case_name(c);
}

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

  MeasureInput input = checked_input(c.workload, 1234, 48);
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

/// The GPU-oriented GEMM knobs, which random samples hit only now and then: double-buffered
/// shared tiles, vec4 shared reads of A (regs_y % 4 == 0), k_split slices (with and without
/// shared memory), and loads that the invocations do not divide evenly.
TEST(ComputeGemmKnobs, DoubleBufferVec4AndKSplitMatchTheReference) {
  struct Case {
    Workload workload;
    const char* entity;
  };
  const Case cases[] = {
      // dense 64: 8×8 invocations of 8×8 (a_rows_vec4), k_depth 8, double buffered.
      {Workload::dense(64, 64, 64, "dense64"),
       R"([["tile_y","sp",[1,8,8]],["tile_x","sp",[1,8,8]],["tile_k","sp",[8,8]],)"
       R"(["use_shared","ot",1],["vec4","ot",1],["unroll","ot",1],["double_buffer","ot",1],)"
       R"(["k_split","ot",2]])"},
      // dense 64: scalar, k_split 4; 64 A items for 128 invocations (guarded loads).
      {Workload::dense(64, 64, 64, "dense64"),
       R"([["tile_y","sp",[8,4,2]],["tile_x","sp",[2,8,4]],["tile_k","sp",[8,8]],)"
       R"(["use_shared","ot",1],["vec4","ot",0],["unroll","ot",2],["double_buffer","ot",1],)"
       R"(["k_split","ot",4]])"},
      // dense 64 without shared memory, k_split 4 over the whole depth.
      {Workload::dense(64, 64, 64, "dense64"),
       R"([["tile_y","sp",[8,4,2]],["tile_x","sp",[4,4,4]],["tile_k","sp",[64,1]],)"
       R"(["use_shared","ot",0],["vec4","ot",1],["unroll","ot",2],["double_buffer","ot",0],)"
       R"(["k_split","ot",4]])"},
      // conv 3×3 with padding (depth 54): vec4 off, double buffered, k_split 2.
      {Workload::conv2d(1, 6, 10, 9, 8, 3, 1, 1, "conv3x3"),
       R"([["tile_y","sp",[1,2,4]],["tile_x","sp",[3,6,5]],["tile_k","sp",[9,6]],)"
       R"(["use_shared","ot",1],["vec4","ot",0],["unroll","ot",1],["double_buffer","ot",1],)"
       R"(["k_split","ot",2]])"},
      // C4 (1×1, stride 2, depth 64): vec4 weights read four rows at a time, double buffered.
      {Workload::conv2d(1, 64, 56, 56, 128, 1, 2, 0, "C4"),
       R"([["tile_y","sp",[4,4,8]],["tile_x","sp",[28,7,4]],["tile_k","sp",[4,16]],)"
       R"(["use_shared","ot",1],["vec4","ot",1],["unroll","ot",1],["double_buffer","ot",1],)"
       R"(["k_split","ot",4]])"},
  };
  for (const Case& c : cases) {
    Task task = Task::create(c.workload, Target::kGlesCompute, runtime().info().limits);
    const ConfigEntity entity = task.space->parse(std::string(R"({"entity":)") + c.entity + "}");
    std::string why;
    ASSERT_TRUE(task.space->is_valid(entity, &why)) << c.entity << ": " << why;
    MeasureInput input = checked_input(c.workload, 99, 64);
    input.artifact = task.build(entity);
    const MeasureResult r = runtime().measure(input);
    EXPECT_EQ(r.error, MeasureErrorNo::kNoError) << c.entity << ": " << r.message;
  }
}

/// gles-frag's fetch knob: with "lod" or "texture" every texel is read at its centre in
/// normalized coordinates (textureLod, texture), and the kernels still match the reference,
/// including flat layouts whose heights are not powers of two (C4's data: 2048 × 25 texels),
/// where 1/height is inexact.
TEST(FragFetchKnob, NormalizedCoordinateKernelsReadTheSameTexelsAsTexelFetch) {
  const Workload workloads[] = {Workload::dense(64, 64, 64, "dense64"),
                                Workload::conv2d(1, 64, 56, 56, 128, 1, 2, 0, "C4"),
                                Workload::conv2d(1, 6, 10, 9, 7, 3, 1, 1, "conv3x3"),
                                Workload::depthwise_conv2d(1, 6, 10, 9, 3, 2, 1, "dw3x3")};
  const std::map<std::string, std::string> call = {
      {"texel", "texelFetch("}, {"lod", "textureLod("}, {"texture", "texture("}};
  std::mt19937_64 rng(20261122);
  std::map<std::string, int> runs_by_fetch;
  int flat_runs = 0;
  for (const Workload& w : workloads) {
    Task task = Task::create(w, Target::kGlesFrag, runtime().info().limits);
    MeasureInput input = checked_input(w, 77, 48);
    std::map<std::string, int> runs;
    for (const ConfigEntity& entity : task.space->sample_distinct(rng, 90)) {
      const std::string fetch = entity.get_string("fetch");
      input.artifact = task.build(entity);
      for (const auto& [name, text] : call)
        EXPECT_EQ(input.artifact.source.find(text) != std::string::npos, name == fetch)
            << entity.to_string();
      if (fetch == "texel" || runs[fetch] == 3) continue;
      ++runs[fetch];
      ++runs_by_fetch[fetch];
      flat_runs += entity.get_string("layout_data") == "flat" ||
                   entity.get_string("layout_weight") == "flat";
      const MeasureResult r = runtime().measure(input);
      EXPECT_EQ(r.error, MeasureErrorNo::kNoError) << entity.to_string() << ": " << r.message;
    }
  }
  EXPECT_EQ(runs_by_fetch["lod"], 12);
  EXPECT_EQ(runs_by_fetch["texture"], 12);
  EXPECT_GE(flat_runs, 6);
}

/// gles-frag's vertex stage: one vertex per block, its rows captured by transform feedback,
/// including blocks taller than a fragment's draw buffers allow (rows_scale 2 and 3), padded row
/// blocks (conv3x3 has 7 output channels) and depthwise channel quads. Each runs on llvmpipe
/// against the reference.
TEST(FragVertexStage, TallBlocksCapturedByTransformFeedbackMatchTheReference) {
  const Workload workloads[] = {Workload::dense(64, 64, 64, "dense64"),
                                Workload::conv2d(1, 64, 56, 56, 128, 1, 2, 0, "C4"),
                                Workload::conv2d(1, 6, 10, 9, 7, 3, 1, 1, "conv3x3"),
                                Workload::depthwise_conv2d(1, 6, 10, 9, 3, 2, 1, "dw3x3")};
  const DeviceLimits& limits = runtime().info().limits;
  std::mt19937_64 rng(20261123);
  std::map<int64_t, int> runs_by_scale;
  for (const Workload& w : workloads) {
    Task task = Task::create(w, Target::kGlesFrag, limits);
    MeasureInput input = checked_input(w, 78, 48);
    std::map<int64_t, int> runs;
    for (const ConfigEntity& entity : task.space->sample_distinct(rng, 300)) {
      const bool vertex = entity.get_string("stage") == "vertex";
      const int64_t scale = entity.get_int("rows_scale");
      input.artifact = task.build(entity);
      const OutputLayout& out = input.artifact.output;
      // The layout follows the stage; a fragment block never has more rows than out_rows.
      EXPECT_EQ(out.feedback, vertex) << entity.to_string();
      EXPECT_EQ(out.rows_per_item, entity.get_int("out_rows") * scale) << entity.to_string();
      EXPECT_EQ(input.artifact.source.find("gl_VertexID") != std::string::npos, vertex);
      if (!vertex) {
        EXPECT_EQ(scale, 1) << entity.to_string();
        continue;
      }
      EXPECT_LE(out.rows_per_item, limits.max_varying_vectors);
      EXPECT_EQ(out.height, 1);
      if (runs[scale] == 2) continue;
      ++runs[scale];
      ++runs_by_scale[scale];
      const MeasureResult r = runtime().measure(input);
      EXPECT_EQ(r.error, MeasureErrorNo::kNoError) << entity.to_string() << ": " << r.message;
    }
  }
  EXPECT_EQ(runs_by_scale[1], 8);
  EXPECT_EQ(runs_by_scale[2], 8);
  EXPECT_GE(runs_by_scale[3], 4);  // 24-row blocks need 96 components; llvmpipe captures 64

  // 8-column dense blocks (col_scale 2: two vec4 outputs per row) with every packing, on a
  // shape whose last column block is partial (N = 60: 7.5 blocks of 8, 15 texels of B).
  const Workload dense = Workload::dense(40, 60, 36, "dense40x60x36");
  Task task = Task::create(dense, Target::kGlesFrag, limits);
  MeasureInput input = checked_input(dense, 79, 64);
  std::map<std::string, int> wide_runs;
  for (const ConfigEntity& entity : task.space->sample_distinct(rng, 600)) {
    if (entity.get_int("col_scale") != 2) continue;
    const std::string packing = entity.get_string("packing");
    if (wide_runs[packing] == 2) continue;
    ++wide_runs[packing];
    input.artifact = task.build(entity);
    EXPECT_EQ(input.artifact.output.channels, 8);
    EXPECT_EQ(input.artifact.output.varyings(), 2 * input.artifact.output.rows_per_item);
    const MeasureResult r = runtime().measure(input);
    EXPECT_EQ(r.error, MeasureErrorNo::kNoError) << entity.to_string() << ": " << r.message;
  }
  EXPECT_EQ(wide_runs, (std::map<std::string, int>{{"k", 2}, {"kn", 2}, {"none", 2}}));
}

/// The vertex stage's rules: taller blocks only for vertices, one output layout for them, and
/// the device's varying and feedback limits.
TEST(FragVertexStage, ConstraintsAndDeviceLimits) {
  const Workload w = Workload::dense(64, 64, 64, "dense64");
  DeviceLimits limits;
  limits.max_draw_buffers = 8;
  limits.max_varying_vectors = 31;
  limits.max_feedback_components = 128;
  Task task = Task::create(w, Target::kGlesFrag, limits);
  const auto entity = [&](int64_t rows, const char* stage, int64_t scale, const char* out) {
    return task.space->parse(
        std::string(R"({"entity":[["out_rows","ot",)") + std::to_string(rows) +
        R"(],["out_cols","ot",4],["packing","ot","k"],["unroll","ot",1],)"
        R"(["layout_data","ot","2d"],["layout_weight","ot","2d"],["layout_out","ot",")" +
        out + R"("],["fetch","ot","texture"],["stage","ot",")" + stage +
        R"("],["rows_scale","ot",)" + std::to_string(scale) + "]]}");
  };
  std::string why;
  EXPECT_TRUE(task.space->is_valid(entity(8, "vertex", 3, "2d"), &why)) << why;
  const ConfigEntity wide_fragment = task.space->parse(
      R"({"entity":[["out_rows","ot",8],["out_cols","ot",4],["packing","ot","k"],)"
      R"(["unroll","ot",1],["layout_data","ot","2d"],["layout_weight","ot","2d"],)"
      R"(["layout_out","ot","2d"],["fetch","ot","texture"],["stage","ot","fragment"],)"
      R"(["rows_scale","ot",1],["col_scale","ot",2]]})");
  EXPECT_FALSE(task.space->is_valid(wide_fragment, &why));
  EXPECT_EQ(why, "breaks constraint: col_scale 2 needs stage = vertex and out_cols = 4");
  EXPECT_FALSE(task.space->is_valid(entity(8, "fragment", 2, "2d"), &why));
  EXPECT_EQ(why, "breaks constraint: rows_scale above 1 needs stage = vertex");
  EXPECT_FALSE(task.space->is_valid(entity(8, "vertex", 1, "flat"), &why));
  EXPECT_EQ(why, "breaks constraint: stage vertex needs layout_out = 2d");
  // 24 rows of vec4: 24 varyings and 96 components; a device that captures 64 refuses it.
  limits.max_feedback_components = 64;
  Task small = Task::create(w, Target::kGlesFrag, limits);
  EXPECT_FALSE(small.space->is_valid(
      small.space->parse(boost::json::serialize(entity(8, "vertex", 3, "2d").to_json())), &why));
  EXPECT_EQ(why,
            "breaks device limit: vertex outputs within max_varying_vectors and "
            "max_feedback_components");
  // A record from before the stage knobs reads as a fragment kernel of out_rows rows.
  const ConfigEntity old = task.space->parse(
      R"({"entity":[["out_rows","ot",8],["out_cols","ot",4],["packing","ot","k"],)"
      R"(["unroll","ot",1],["layout_data","ot","2d"],["layout_weight","ot","2d"],)"
      R"(["layout_out","ot","flat"],["fetch","ot","lod"]]})");
  EXPECT_EQ(old.get_string("stage"), "fragment");
  EXPECT_EQ(old.get_int("rows_scale"), 1);
  EXPECT_FALSE(task.build(old).output.feedback);
}

/// out_wrap sqrt (the frag template's last knob): a flat output wraps at ceil(sqrt(items))
/// texels instead of 2048; records without the knob build the kernels they built before; and a
/// near-square output whose last row is partly padding runs right on llvmpipe.
TEST(FragOutputWrap, SqrtWrapsNearSquareAndOldRecordsKeepTheirKernel) {
  // MobileNet-v2's 96→24 pointwise layer: 6 row blocks × 784 column blocks = 4704 items.
  const Workload w = Workload::conv2d(1, 96, 56, 56, 24, 1, 1, 0, "pw96to24");
  Task task = Task::create(w, Target::kGlesFrag, runtime().info().limits);
  const auto entity = [&](const char* out, const char* wrap) {
    std::string json =
        std::string(
            R"({"entity":[["out_rows","ot",4],["out_cols","ot",4],["packing","ot","c"],)"
            R"(["algo","ot","igemm"],["order","ot","rsc"],["unroll","ot",2],)"
            R"(["layout_data","ot","2d"],["layout_weight","ot","2d"],["layout_out","ot",")") +
        out + R"("],["fetch","ot","texture"],["stage","ot","fragment"],["rows_scale","ot",1])";
    if (wrap) json += std::string(R"(,["out_wrap","ot",")") + wrap + R"("])";
    return task.space->parse(json + "]}");
  };
  const KernelArtifact two_d = task.build(entity("2d", nullptr));
  EXPECT_EQ(two_d.output.width, 784);
  EXPECT_EQ(two_d.output.height, 6);
  const KernelArtifact wide = task.build(entity("flat", "2048"));
  EXPECT_EQ(wide.output.width, 2048);
  EXPECT_EQ(wide.output.height, 3);
  // 68² = 4624 < 4704 ≤ 69² = 4761: 69 texels a row, 69 rows, the last 57 texels padding.
  const ConfigEntity square = entity("flat", "sqrt");
  std::string why;
  ASSERT_TRUE(task.space->is_valid(square, &why)) << why;
  const KernelArtifact sq = task.build(square);
  EXPECT_EQ(sq.output.width, 69);
  EXPECT_EQ(sq.output.height, 69);
  EXPECT_NE(sq.source.find("int t = px.y * 69 + px.x;"), std::string::npos) << sq.source;
  EXPECT_NE(sq.source.find("if (t >= 4704)"), std::string::npos) << sq.source;
  // A record from before the knob is a 2048-wrapped (or 2d) kernel, byte for byte.
  EXPECT_EQ(task.build(entity("flat", nullptr)).source, wide.source);
  EXPECT_EQ(entity("2d", nullptr).get_string("out_wrap"), "2048");
  // sqrt with the 2d layout would only repeat the 2d kernel.
  EXPECT_FALSE(task.space->is_valid(entity("2d", "sqrt"), &why));
  EXPECT_EQ(why, "breaks constraint: out_wrap sqrt needs layout_out = flat");
  // 2000 of the near-square kernel's 75264 outputs (the first and the last among them) checked
  // against the reference: a wrong item decode misplaces most of them.
  MeasureInput input = checked_input(w, 77, 2000);
  input.artifact = sq;
  const MeasureResult r = runtime().measure(input);
  EXPECT_EQ(r.error, MeasureErrorNo::kNoError) << r.message;
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
                         [](const auto& info) { return case_name(info.param); });

/// Non-divisible tiling on gles-compute (issue 14): 20 random valid configs whose tiles run past
/// an axis (guarded edges), per odd shape, run on llvmpipe with every output element checked
/// against the reference: none may be WRONG_ANSWER (or any other error).
struct OddShape {
  Workload workload;
};
/// What gtest prints for GetParam(): the workload's name, not its bytes.
void PrintTo(const OddShape& c, std::ostream* os) {
  *os << c.workload.name;
}

class ComputeOddShapes : public ::testing::TestWithParam<OddShape> {};

constexpr int kOddConfigs = 20;

TEST_P(ComputeOddShapes, GuardedConfigsMatchTheReferenceEverywhere) {
  const Workload& w = GetParam().workload;
  Task task = Task::create(w, Target::kGlesCompute, runtime().info().limits);
  const std::vector<ConfigEntity> configs = test::inexact_configs(task, kOddConfigs, 20261124);
  ASSERT_EQ(static_cast<int>(configs.size()), kOddConfigs) << "too few guarded configs";
  MeasureInput input = checked_input(w, 4242, 0);
  input.samples = test::every_output(w, 4242);
  ASSERT_EQ(static_cast<int64_t>(input.samples.size()), w.output_size());
  for (const ConfigEntity& entity : configs) {
    ASSERT_TRUE(test::has_inexact_split(entity));
    input.artifact = task.build(entity);
    const MeasureResult r = runtime().measure(input);
    EXPECT_EQ(r.error, MeasureErrorNo::kNoError)
        << "config " << entity.index() << " (" << entity.to_string() << "): " << r.message;
  }
}

std::vector<OddShape> odd_shapes() {
  std::vector<OddShape> out;
  for (const Workload& w : test::odd_gemm_workloads()) out.push_back({w});
  for (const Workload& w : test::odd_depthwise_workloads()) out.push_back({w});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Compute, ComputeOddShapes, ::testing::ValuesIn(odd_shapes()),
                         [](const auto& info) { return info.param.workload.name; });

}  // namespace
}  // namespace webtune
