/// \file compute_epilogue_test.cpp
/// Epilogues (bias, activation, residual: codegen/epilogue.hpp) in the compute-shader templates.
///
/// ComputeEpilogue.*: gles-compute dense, conv2d and depthwise_conv2d with each of issue 14's
/// four test epilogues, random valid configs (half of them with tiles past an axis: guarded
/// edges) on a regular and an odd small shape, run on Mesa llvmpipe through headless EGL (the
/// native runtime) with every output element checked against the CPU reference.
/// ComputeEpilogueText.*: without a device, the bindings and loads both compute targets
/// (gles-compute, webgpu) emit: none for an empty epilogue, bias at binding 3, residual at 3 or
/// 4, and the bias of a vec4 store's lanes (four channels along dense's columns, one channel
/// shared by conv2d's pixels). The webgpu kernels run in browser_test's
/// WebgpuGemmEpiloguesMatchTheReferenceEverywhere (one headless Chromium session).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "codegen/task.hpp"
#include "native_agent/isolated_runtime.hpp"
#include "support/compute_epilogues.hpp"

namespace webtune {
namespace {

// One worker process (and GL context) for the whole test binary.
IsolatedRuntime& runtime() {
  static IsolatedRuntime instance;
  return instance;
}

/// Configs per shape: a regular and an odd shape per op make 20 per (op, epilogue), plus the
/// regular shape's default config.
constexpr int kConfigsPerShape = 10;

struct EpilogueCase {
  std::string name;  ///< "Conv2d_BiasRelu"
  Workload regular;  ///< epilogue included
  Workload odd;
  uint64_t seed;  ///< of the configs: each case draws its own
};

void PrintTo(const EpilogueCase& c, std::ostream* os) {
  *os << c.name << " (" << c.regular.key() << ", " << c.odd.key() << ")";
}

std::vector<EpilogueCase> gles_compute_cases() {
  std::vector<test::EpilogueShapes> shapes = test::epilogue_gemm_shapes();
  shapes.push_back(test::epilogue_depthwise_shapes());
  std::vector<EpilogueCase> cases;
  for (const test::EpilogueShapes& s : shapes)
    for (const test::NamedEpilogue& e : test::kTestEpilogues)
      cases.push_back({std::string(s.op) + "_" + e.label,
                       test::with_epilogue_suffix(s.regular, e.suffix),
                       test::with_epilogue_suffix(s.odd, e.suffix), 20261124 + cases.size()});
  return cases;
}

/// Whether `source` declares a storage buffer at `binding` whose block is `block`.
bool declares(const std::string& source, int binding, const std::string& block) {
  return source.find("binding = " + std::to_string(binding) + ") readonly buffer " + block) !=
         std::string::npos;
}

class ComputeEpilogue : public ::testing::TestWithParam<EpilogueCase> {};

TEST_P(ComputeEpilogue, RandomConfigsOnRegularAndOddShapesMatchTheReferenceEverywhere) {
  const EpilogueCase& c = GetParam();
  const auto began = std::chrono::steady_clock::now();
  int runs = 0, guarded = 0, vec4_stores = 0;
  for (const Workload* w : {&c.regular, &c.odd}) {
    const Task task = Task::create(*w, Target::kGlesCompute, runtime().info().limits);
    std::vector<ConfigEntity> configs = test::mixed_configs(task, kConfigsPerShape, c.seed);
    ASSERT_EQ(static_cast<int>(configs.size()), kConfigsPerShape) << w->key();
    if (w == &c.regular) configs.push_back(task.default_config());
    MeasureInput input;
    input.workload = *w;
    input.seed = 5150;
    input.samples = test::every_output_with_epilogue(*w, input.seed);
    input.options.timeout_s = 30;
    input.options.number = 1;
    input.options.repeat = 1;
    for (const ConfigEntity& entity : configs) {
      input.artifact = task.build(entity);
      const std::string& source = input.artifact.source;
      ASSERT_EQ(input.artifact.inputs.size(), static_cast<size_t>(w->input_count()));
      EXPECT_NE(source.find("= webtune_epilogue("), std::string::npos) << entity.to_string();
      EXPECT_TRUE(declares(source, 3, "BiasBuffer")) << entity.to_string();
      EXPECT_EQ(declares(source, 4, "ResidualBuffer"), w->epilogue.residual != Residual::kNone);
      guarded += test::has_inexact_split(entity) ? 1 : 0;
      vec4_stores += source.find("vec4 result[]") != std::string::npos ? 1 : 0;
      const MeasureResult r = runtime().measure(input);
      EXPECT_EQ(r.error, MeasureErrorNo::kNoError)
          << w->key() << " config " << entity.index() << " (" << entity.to_string()
          << "): " << r.message;
      ++runs;
    }
  }
  EXPECT_GE(runs, 2 * kConfigsPerShape);
  EXPECT_GE(guarded, kConfigsPerShape);  // half of each shape's configs at least
  // dense's regular shape allows vec4 columns: the vec4 overload with four biases per store.
  if (c.regular.op == OpKind::kDense) EXPECT_GE(vec4_stores, 1);
  std::printf("%s: %d kernels (%d guarded, %d with vec4 stores) in %.1f s\n", c.name.c_str(), runs,
              guarded, vec4_stores,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
}

INSTANTIATE_TEST_SUITE_P(GlesCompute, ComputeEpilogue, ::testing::ValuesIn(gles_compute_cases()),
                         [](const auto& info) { return info.param.name; });

/// The GEMM knobs random samples hit only now and then, with an epilogue: k_split (the
/// epilogue runs once, after slice 0 has summed the slices), double-buffered shared tiles, vec4
/// shared reads of four A rows and vec4 stores (four biases), on guarded and exact tilings.
TEST(ComputeEpilogueKnobs, KSplitDoubleBufferAndVec4StoresMatchTheReference) {
  struct Case {
    Workload workload;
    const char* entity;
  };
  const Workload dense = Workload::dense(16, 32, 24, "dense16x32x24");
  const Workload dense13 = Workload::dense(13, 32, 24, "dense13x32x24");
  const Workload conv = Workload::conv2d(1, 3, 7, 7, 13, 3, 1, 1, "conv3to13_7x7");
  const Case cases[] = {
      // dense: 4x8 invocations of 4x4 (a_rows_vec4, vec4 stores), k_depth 8, double buffered,
      // k_split 2.
      {dense, R"([["tile_y","sp",[1,4,4]],["tile_x","sp",[1,8,4]],["tile_k","sp",[3,8]],)"
              R"(["use_shared","ot",1],["vec4","ot",1],["unroll","ot",1],)"
              R"(["double_buffer","ot",1],["k_split","ot",2]])"},
      // dense 13x32x24 without shared memory, k_split 2, vec4 stores, rows past the edge
      // (16 for 13).
      {dense13, R"([["tile_y","sp",[2,4,2]],["tile_x","sp",[2,4,4]],["tile_k","sp",[24,1]],)"
                R"(["use_shared","ot",0],["vec4","ot",1],["unroll","ot",1],)"
                R"(["double_buffer","ot",0],["k_split","ot",2]])"},
      // conv 3 -> 13 on 7x7: rows (13 of 16) and columns (49 of 64) guarded, double buffered,
      // k_split 2 over a guarded depth (27 of 32).
      {conv, R"([["tile_y","sp",[2,4,2]],["tile_x","sp",[4,8,2]],["tile_k","sp",[4,8]],)"
             R"(["use_shared","ot",1],["vec4","ot",0],["unroll","ot",2],)"
             R"(["double_buffer","ot",1],["k_split","ot",2]])"},
  };
  for (const Case& c : cases)
    for (const test::NamedEpilogue& e : test::kTestEpilogues) {
      const Workload w = test::with_epilogue_suffix(c.workload, e.suffix);
      const Task task = Task::create(w, Target::kGlesCompute, runtime().info().limits);
      const ConfigEntity entity = task.space->parse(std::string(R"({"entity":)") + c.entity + "}");
      std::string why;
      ASSERT_TRUE(task.space->is_valid(entity, &why)) << c.entity << ": " << why;
      MeasureInput input;
      input.workload = w;
      input.seed = 777;
      input.samples = test::every_output_with_epilogue(w, input.seed);
      input.options.timeout_s = 30;
      input.options.number = 1;
      input.options.repeat = 1;
      input.artifact = task.build(entity);
      EXPECT_NE(input.artifact.source.find("= webtune_epilogue("), std::string::npos);
      const MeasureResult r = runtime().measure(input);
      EXPECT_EQ(r.error, MeasureErrorNo::kNoError)
          << w.key() << " " << c.entity << ": " << r.message;
    }
}

// ---- kernel text, both targets, no device ---------------------------------------------------

/// An entity of `task` given as its GEMM knob list (JSON; gles-compute's double_buffer 0 and
/// k_split 1 appended there), checked valid.
ConfigEntity entity_of(const Task& task, std::string knobs) {
  if (task.target == Target::kGlesCompute && task.workload.op != OpKind::kDepthwiseConv2d)
    knobs = knobs.substr(0, knobs.size() - 1) + R"(,["double_buffer","ot",0],["k_split","ot",1]])";
  const ConfigEntity e = task.space->parse(R"({"entity":)" + knobs + "}");
  std::string why;
  EXPECT_TRUE(task.space->is_valid(e, &why)) << knobs << ": " << why;
  return e;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Scalar and vec4 GEMM entities of dense 16x32x24 (both targets' knobs).
const char* const kScalarGemm =
    R"([["tile_y","sp",[2,4,2]],["tile_x","sp",[4,8,1]],["tile_k","sp",[24,1]],)"
    R"(["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1]])";
const char* const kVec4Dense =
    R"([["tile_y","sp",[2,4,2]],["tile_x","sp",[1,8,4]],["tile_k","sp",[24,1]],)"
    R"(["use_shared","ot",0],["vec4","ot",1],["unroll","ot",1]])";

TEST(ComputeEpilogueText, EmptyEpilogueAddsNoBindingLoadOrFunction) {
  const Workload dense = Workload::dense(16, 32, 24);
  const Workload dw = Workload::depthwise_conv2d(2, 8, 9, 8, 3, 1, 1);
  for (const Target target : {Target::kGlesCompute, Target::kWebgpu}) {
    const Task task = Task::create(dense, target);
    for (const char* knobs : {kScalarGemm, kVec4Dense}) {
      const std::string s = task.build(entity_of(task, knobs)).source;
      EXPECT_FALSE(contains(s, "webtune_epilogue")) << s;
      EXPECT_FALSE(contains(s, "binding = 3")) << s;
      EXPECT_FALSE(contains(s, "@binding(3)")) << s;
      EXPECT_EQ(task.build(entity_of(task, knobs)).inputs.size(), 2u);
    }
  }
  const Task task = Task::create(dw, Target::kGlesCompute);
  const std::string s = task.build(task.default_config()).source;
  EXPECT_FALSE(contains(s, "webtune_epilogue")) << s;
  EXPECT_FALSE(contains(s, "binding = 3")) << s;
  EXPECT_FALSE(contains(s, "channel")) << s;
}

TEST(ComputeEpilogueText, GlesComputeBindsBiasAtThreeAndResidualAtThreeOrFour) {
  const Workload dense = Workload::dense(16, 32, 24);
  struct Expect {
    const char* suffix;
    int bias_binding;      ///< 0: none
    int residual_binding;  ///< 0: none
  };
  for (const Expect& x : {Expect{"+bias+relu", 3, 0}, Expect{"+residual+relu", 0, 3},
                          Expect{"+bias+residual+relu", 3, 4}}) {
    const Task task =
        Task::create(test::with_epilogue_suffix(dense, x.suffix), Target::kGlesCompute);
    const KernelArtifact a = task.build(entity_of(task, kScalarGemm));
    EXPECT_EQ(a.inputs.size(), 2u + (x.bias_binding ? 1 : 0) + (x.residual_binding ? 1 : 0));
    EXPECT_EQ(contains(a.source, "BiasBuffer"), x.bias_binding != 0) << x.suffix;
    EXPECT_EQ(contains(a.source, "ResidualBuffer"), x.residual_binding != 0) << x.suffix;
    if (x.bias_binding) EXPECT_TRUE(declares(a.source, x.bias_binding, "BiasBuffer")) << a.source;
    if (x.residual_binding)
      EXPECT_TRUE(declares(a.source, x.residual_binding, "ResidualBuffer")) << a.source;
    // The output stays at binding 2.
    EXPECT_TRUE(contains(a.source, "binding = 2) writeonly buffer OutputBuffer")) << a.source;
  }
}

TEST(ComputeEpilogueText, GlesComputeBiasFollowsTheOutputChannelOfEachStore) {
  // dense vec4 columns: the lanes are four channels (columns), read as one vec4 of biases.
  const Workload dense =
      test::with_epilogue_suffix(Workload::dense(16, 32, 24), "+bias+residual+relu");
  const Task d = Task::create(dense, Target::kGlesCompute);
  const std::string dv = d.build(entity_of(d, kVec4Dense)).source;
  EXPECT_TRUE(contains(dv, "readonly buffer BiasBuffer { vec4 bias[]; };")) << dv;
  EXPECT_TRUE(contains(dv, "readonly buffer ResidualBuffer { vec4 residual[]; };")) << dv;
  EXPECT_TRUE(contains(dv, "= webtune_epilogue(acc[0], bias[(col0 + 0) / 4], residual[")) << dv;
  // conv2d: rows are output channels; the bias is the row's.
  const Workload conv = test::with_epilogue_suffix(Workload::conv2d(2, 4, 6, 6, 8, 3, 1, 1),
                                                   "+bias+hard_swish+residual");
  const Task c = Task::create(conv, Target::kGlesCompute);
  const std::string cs = c.build(c.default_config()).source;
  EXPECT_TRUE(contains(cs, "readonly buffer BiasBuffer { float bias[]; };")) << cs;
  EXPECT_TRUE(contains(cs, "= webtune_epilogue(acc[0], bias[(row0 + 0)], residual[out_base0 + "))
      << cs;
  // depthwise: the plane's channel.
  const Workload dw = test::with_epilogue_suffix(Workload::depthwise_conv2d(2, 8, 9, 8, 3, 1, 1),
                                                 "+bias+clip(0,6)");
  const Task t = Task::create(dw, Target::kGlesCompute);
  const std::string ws = t.build(t.default_config()).source;
  EXPECT_TRUE(contains(ws, "int channel = plane - (plane / 8) * 8;")) << ws;
  EXPECT_TRUE(contains(ws, "= webtune_epilogue(acc[0], bias[channel], 0.0);")) << ws;
  EXPECT_FALSE(contains(ws, "ResidualBuffer")) << ws;
}

TEST(ComputeEpilogueText, WebgpuBindsAndLoadsPerOutputChannel) {
  // dense vec4: Bias and Res are vec4 arrays, Bias indexed by the column quad.
  const Workload dense =
      test::with_epilogue_suffix(Workload::dense(16, 32, 24), "+bias+residual+relu");
  const Task d = Task::create(dense, Target::kWebgpu);
  const KernelArtifact da = d.build(entity_of(d, kVec4Dense));
  EXPECT_EQ(da.inputs.size(), 4u);
  EXPECT_TRUE(
      contains(da.source, "@group(0) @binding(3) var<storage, read> Bias : array<vec4<f32>>;"))
      << da.source;
  EXPECT_TRUE(
      contains(da.source, "@group(0) @binding(4) var<storage, read> Res : array<vec4<f32>>;"))
      << da.source;
  EXPECT_TRUE(
      contains(da.source, "C[q] = webtune_epilogue4(acc[0], Bias[(col0 + 0) / 4], Res[q]);"))
      << da.source;
  // conv2d with vec4 columns (four pixels of one channel): one bias, splatted.
  const Workload conv =
      test::with_epilogue_suffix(Workload::conv2d(2, 4, 6, 6, 8, 3, 1, 1), "+bias+relu");
  const Task c = Task::create(conv, Target::kWebgpu);
  const KernelArtifact ca = c.build(
      entity_of(c, R"([["tile_y","sp",[2,4,1]],["tile_x","sp",[1,9,4]],["tile_k","sp",[36,1]],)"
                   R"(["use_shared","ot",0],["vec4","ot",1],["unroll","ot",1]])"));
  EXPECT_EQ(ca.inputs.size(), 3u);
  EXPECT_TRUE(contains(ca.source, "@group(0) @binding(3) var<storage, read> Bias : array<f32>;"))
      << ca.source;
  EXPECT_FALSE(contains(ca.source, "@binding(4)")) << ca.source;
  EXPECT_TRUE(contains(
      ca.source, "C[q] = webtune_epilogue4(acc[0], vec4<f32>(Bias[row0 + 0]), vec4<f32>(0.0));"))
      << ca.source;
  // Residual without bias: binding 3.
  const Workload res = test::with_epilogue_suffix(Workload::dense(16, 32, 24), "+residual");
  const Task r = Task::create(res, Target::kWebgpu);
  const std::string rs = r.build(entity_of(r, kScalarGemm)).source;
  EXPECT_TRUE(contains(rs, "@group(0) @binding(3) var<storage, read> Res : array<f32>;")) << rs;
  EXPECT_TRUE(contains(rs, "C[q] = webtune_epilogue(acc[0], 0.0, Res[q]);")) << rs;
}

}  // namespace
}  // namespace webtune
