/// \file wgsl_emitter_test.cpp
/// The webgpu target's WGSL dense and conv2d templates without a browser: config space
/// bijection, default config, device-limit filters, the emitted bindings and workgroup size, the
/// artifact's JSON round trip, a CPU check that the thread → output mapping covers the output
/// exactly once, and non-empty spaces for ResNet-18's C2, C5 and C8.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <random>
#include <set>

#include "codegen/error_no.hpp"
#include "codegen/task.hpp"
#include "codegen/wgsl_emitter.hpp"
#include "tuner/tune_target.hpp"

namespace webtune {
namespace {

Task dense_task(int64_t m, int64_t n, int64_t k, const DeviceLimits& limits) {
  return Task::create(Workload::dense(m, n, k), Target::kWebgpu, limits);
}

TEST(WgslEmitter, TargetNamesAndTuneTarget) {
  EXPECT_EQ(target_name(Target::kWebgpu), "webgpu");
  EXPECT_EQ(target_from_name("webgpu"), Target::kWebgpu);
  EXPECT_EQ(target_key(Target::kWebgpu), "webgpu");
  const TuneTarget t = tune_target_from_name("webgpu");
  EXPECT_EQ(t.kernel, Target::kWebgpu);
  EXPECT_EQ(t.key, "webgpu");
  EXPECT_TRUE(t.browser);
}

TEST(WgslEmitter, SpaceIsABijection) {
  const Task task = dense_task(16, 16, 8, webgpu_default_limits());
  const ConfigSpace& space = *task.space;
  ASSERT_GT(space.raw_size(), 0);
  std::set<std::vector<int>> seen;
  for (int64_t i = 0; i < space.raw_size(); ++i) {
    const ConfigEntity e = space.get(i);
    EXPECT_EQ(e.index(), i);
    EXPECT_EQ(space.from_choices(e.choices()).index(), i);
    EXPECT_EQ(space.from_json(e.to_json()).index(), i);
    EXPECT_TRUE(seen.insert(e.choices()).second) << "index " << i;
  }
  EXPECT_FALSE(space.valid_indices().empty());
}

TEST(WgslEmitter, DefaultConfigIsValidAndUntuned) {
  const Task task = dense_task(64, 64, 64, webgpu_default_limits());
  const ConfigEntity e = task.default_config();
  EXPECT_TRUE(task.space->is_valid(e));
  EXPECT_EQ(e.split("tile_x")[1], 8);
  EXPECT_EQ(e.split("tile_y")[1], 8);
  EXPECT_EQ(e.split("tile_x")[2], 1);
  EXPECT_EQ(e.get_int("use_shared"), 0);
  EXPECT_EQ(e.get_int("vec4"), 0);
  EXPECT_EQ(e.get_int("unroll"), 1);
  const KernelArtifact a = task.build(e);
  EXPECT_EQ(a.dispatch, (std::array<int64_t, 3>{8, 8, 1}));
  EXPECT_EQ(a.workgroup, (std::array<int64_t, 3>{8, 8, 1}));
}

TEST(WgslEmitter, DeviceLimitsDropConfigs) {
  DeviceLimits small = webgpu_default_limits();
  small.max_workgroup_invocations = 64;
  small.max_shared_memory_bytes = 1024;
  const Task wide = dense_task(64, 64, 64, webgpu_default_limits());
  const Task narrow = dense_task(64, 64, 64, small);
  EXPECT_LT(narrow.space->valid_indices().size(), wide.space->valid_indices().size());
  bool saw_dropped = false;
  for (int64_t index : wide.space->valid_indices()) {
    const KernelArtifact a = wide.build(wide.space->get(index));
    EXPECT_LE(a.workgroup[0] * a.workgroup[1], 256);
    EXPECT_LE(a.shared_memory_bytes, 16384);
    const bool fits = a.workgroup[0] * a.workgroup[1] <= 64 && a.shared_memory_bytes <= 1024;
    EXPECT_EQ(narrow.space->is_valid_index(index), fits) << "index " << index;
    saw_dropped |= !fits;
  }
  EXPECT_TRUE(saw_dropped);
  // An invalid entity is refused by build with the broken limit named.
  for (int64_t index : wide.space->valid_indices()) {
    if (narrow.space->is_valid_index(index)) continue;
    try {
      narrow.build(narrow.space->get(index));
      ADD_FAILURE() << "built an entity over the device limits";
    } catch (const MeasureError& e) {
      EXPECT_EQ(e.error(), MeasureErrorNo::kInstantiation);
      EXPECT_NE(std::string(e.what()).find("max_"), std::string::npos) << e.what();
    }
    break;
  }
}

TEST(WgslEmitter, EmittedSourceOfAKnownEntity) {
  const Task task = dense_task(64, 64, 64, webgpu_default_limits());
  const ConfigEntity e = task.space->from_json(boost::json::parse(
      R"({"entity": [["tile_y","sp",[4,8,2]], ["tile_x","sp",[2,8,4]], ["tile_k","sp",[8,8]],
                     ["use_shared","ot",1], ["vec4","ot",1], ["unroll","ot",2]]})"));
  ASSERT_TRUE(task.space->is_valid(e));
  const KernelArtifact a = task.build(e);
  EXPECT_EQ(a.target, Target::kWebgpu);
  const std::string& s = a.source;
  EXPECT_NE(s.find("@group(0) @binding(0) var<storage, read> A : array<vec4<f32>>;"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("@group(0) @binding(1) var<storage, read> B : array<vec4<f32>>;"),
            std::string::npos);
  EXPECT_NE(s.find("@group(0) @binding(2) var<storage, read_write> C : array<vec4<f32>>;"),
            std::string::npos);
  EXPECT_NE(s.find("@compute @workgroup_size(8, 8, 1)"), std::string::npos);
  EXPECT_NE(s.find("var<workgroup> As : array<f32, 128>;"), std::string::npos);
  EXPECT_NE(s.find("workgroupBarrier();"), std::string::npos);
  EXPECT_EQ(a.dispatch, (std::array<int64_t, 3>{2, 4, 1}));
  EXPECT_EQ(a.workgroup, (std::array<int64_t, 3>{8, 8, 1}));
  EXPECT_EQ(a.shared_memory_bytes, 4 * 8 * (16 + 32));
  ASSERT_EQ(a.inputs.size(), 2u);
  EXPECT_EQ(a.inputs[0].shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(a.output.elements(), 64 * 64);

  // JSON round trip keeps the webgpu target.
  const KernelArtifact b = KernelArtifact::from_json(a.to_json());
  EXPECT_EQ(b.target, Target::kWebgpu);
  EXPECT_EQ(b.source, a.source);
  EXPECT_EQ(b.dispatch, a.dispatch);

  // Without workgroup memory and vec4: float views, no barriers.
  const ConfigEntity plain = task.default_config();
  const std::string p = task.build(plain).source;
  EXPECT_NE(p.find("var<storage, read> A : array<f32>;"), std::string::npos);
  EXPECT_EQ(p.find("workgroupBarrier"), std::string::npos);
  EXPECT_EQ(p.find("var<workgroup>"), std::string::npos);
}

TEST(WgslEmitter, OnlyDenseAndConv2dHaveATemplate) {
  // depthwise_conv2d has its own webgpu template (wgsl_depthwise_emitter.hpp), not this one.
  EXPECT_THROW(wgsl_space(Workload::depthwise_conv2d(1, 8, 8, 8, 3, 1, 1)), std::invalid_argument);
  EXPECT_NO_THROW(Task::create(Workload::conv2d(1, 3, 8, 8, 4, 3, 1, 1), Target::kWebgpu));
}

/// SwiftShader's WebGPU adapter (headless Chromium): 256 invocations, 32 KiB workgroup storage.
DeviceLimits swiftshader_limits() {
  DeviceLimits d = webgpu_default_limits();
  d.max_shared_memory_bytes = 32768;
  return d;
}

/// Every output index of `wl` stored by exactly one invocation of `e`'s dispatch.
void expect_outputs_owned_once(const Workload& wl, const ConfigEntity& e, const KernelArtifact& a) {
  std::vector<int> count(static_cast<size_t>(wl.output_size()), 0);
  for (int64_t bz = 0; bz < a.dispatch[2]; ++bz)
    for (int64_t by = 0; by < a.dispatch[1]; ++by)
      for (int64_t bx = 0; bx < a.dispatch[0]; ++bx)
        for (int64_t tz = 0; tz < a.workgroup[2]; ++tz)
          for (int64_t ty = 0; ty < a.workgroup[1]; ++ty)
            for (int64_t tx = 0; tx < a.workgroup[0]; ++tx)
              for (int64_t index : wgsl_owned_output_indices(wl, e, {bx, by, bz}, {tx, ty, tz})) {
                ASSERT_TRUE(index >= 0 && index < wl.output_size()) << e.to_string();
                ++count[static_cast<size_t>(index)];
              }
  for (size_t i = 0; i < count.size(); ++i) ASSERT_EQ(count[i], 1) << i << " " << e.to_string();
}

TEST(WgslEmitter, Conv2dSpaceDefaultAndSource) {
  // conv2d:1,8,10,10,16,3,1,1: rows K = 16, cols OH·OW = 100, depth C·R·S = 72.
  const Workload wl = Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1);
  const Task task = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  const ConfigSpace& space = *task.space;
  // kVerbose splits (issue 14: non-divisible tiles, guarded edges), inner factors <= 64:
  // 16 = 2^4 into 3 gives 15 (every power of two divides it); 100 gives 66 (its 34 exact
  // factorisations, and tiles of 8, 16, 32, 64 whose outer factor is rounded up); 72 into 2
  // with the depth <= 16 gives its 8 divisors and 16. (Before kVerbose: 15, 34 and 8.)
  EXPECT_EQ(space.knobs()[space.knob_index("tile_y")].candidates.size(), 15u);
  EXPECT_EQ(space.knobs()[space.knob_index("tile_x")].candidates.size(), 66u);
  EXPECT_EQ(space.knobs()[space.knob_index("tile_k")].candidates.size(), 9u);
  EXPECT_EQ(space.raw_size(), 15 * 66 * 9 * 2 * 2 * 4);
  EXPECT_FALSE(space.valid_indices().empty());

  // Default: one output per invocation, 8x8 workgroups, plain floats.
  const ConfigEntity d = task.default_config();
  EXPECT_TRUE(space.is_valid(d));
  EXPECT_EQ(d.split("tile_y")[2], 1);
  EXPECT_EQ(d.split("tile_x")[2], 1);
  EXPECT_EQ(d.split("tile_y")[1], 8);
  EXPECT_EQ(d.get_int("use_shared"), 0);
  EXPECT_EQ(d.get_int("vec4"), 0);
  EXPECT_EQ(d.get_int("unroll"), 1);
  const KernelArtifact a = task.build(d);
  // 100 columns have no factor 8, but a guarded tile of 8 columns covers them: 13 workgroups,
  // the last one half past the edge (before kVerbose the nearest divisor, 10, was taken).
  EXPECT_EQ(a.workgroup, (std::array<int64_t, 3>{8, 8, 1}));
  EXPECT_EQ(a.dispatch, (std::array<int64_t, 3>{13, 2, 1}));
  EXPECT_EQ(a.output.elements(), wl.output_size());
  ASSERT_EQ(a.inputs.size(), 2u);
  EXPECT_EQ(a.inputs[0].shape, (std::vector<int64_t>{1, 8, 10, 10}));
  EXPECT_EQ(a.inputs[1].shape, (std::vector<int64_t>{16, 8, 3, 3}));
  const std::string& s = a.source;
  EXPECT_NE(s.find("@group(0) @binding(0) var<storage, read> X : array<f32>;"), std::string::npos)
      << s;
  EXPECT_NE(s.find("@group(0) @binding(1) var<storage, read> A : array<f32>;"), std::string::npos);
  EXPECT_NE(s.find("@group(0) @binding(2) var<storage, read_write> C : array<f32>;"),
            std::string::npos);
  EXPECT_NE(s.find("fn xload("), std::string::npos);
  // The padding test is branch-free: `&&` made SwiftShader's pipeline builds take minutes.
  EXPECT_NE(s.find("let inside = (u32(ih) < 10u) & (u32(iw) < 10u);"), std::string::npos) << s;
  EXPECT_EQ(s.find("&&"), std::string::npos);
  // The only branch is the store's guard at the column edge; loads of columns past it decode
  // a clamped column.
  const std::string guard = "if (((col0 + 0) < 100)) { C[";
  EXPECT_NE(s.find(guard), std::string::npos) << s;
  EXPECT_EQ(s.find("if ("), s.find(guard));
  EXPECT_EQ(s.find("if (", s.find(guard) + 1), std::string::npos);
  EXPECT_NE(s.find("let c0_0_oh = (min(col0 + 0, 99)) / 10;"), std::string::npos) << s;
  EXPECT_EQ(s.find("workgroupBarrier"), std::string::npos);

  // vec4 (72 and 100 are multiples of 4) with 4 columns per invocation: W and Y as vec4s, X
  // stays f32; with workgroup memory, an im2col tile.
  const ConfigEntity v = space.from_json(boost::json::parse(
      R"({"entity": [["tile_y","sp",[2,4,2]], ["tile_x","sp",[5,5,4]], ["tile_k","sp",[9,8]],
                     ["use_shared","ot",1], ["vec4","ot",1], ["unroll","ot",2]]})"));
  ASSERT_TRUE(space.is_valid(v));
  const KernelArtifact b = task.build(v);
  EXPECT_NE(b.source.find("var<storage, read> X : array<f32>;"), std::string::npos) << b.source;
  EXPECT_NE(b.source.find("var<storage, read> A : array<vec4<f32>>;"), std::string::npos);
  EXPECT_NE(b.source.find("var<storage, read_write> C : array<vec4<f32>>;"), std::string::npos);
  EXPECT_NE(b.source.find("var<workgroup> Bs : array<vec4<f32>, 40>;"), std::string::npos);
  EXPECT_EQ(b.shared_memory_bytes, 4 * 8 * (8 + 20));
  EXPECT_EQ(b.dispatch, (std::array<int64_t, 3>{5, 2, 1}));
  expect_outputs_owned_once(wl, v, b);

  // 49 output columns: vec4 still reads W four depth values at a time, Y is stored as floats.
  const Workload odd = Workload::conv2d(1, 4, 7, 7, 8, 3, 1, 1);
  const Task odd_task = Task::create(odd, Target::kWebgpu, webgpu_default_limits());
  const ConfigEntity o = odd_task.space->from_json(boost::json::parse(
      R"({"entity": [["tile_y","sp",[1,8,1]], ["tile_x","sp",[1,7,7]], ["tile_k","sp",[36,1]],
                     ["use_shared","ot",0], ["vec4","ot",1], ["unroll","ot",1]]})"));
  ASSERT_TRUE(odd_task.space->is_valid(o));
  const std::string os = odd_task.build(o).source;
  EXPECT_NE(os.find("var<storage, read> A : array<vec4<f32>>;"), std::string::npos) << os;
  EXPECT_NE(os.find("var<storage, read_write> C : array<f32>;"), std::string::npos);
}

TEST(WgslEmitter, Conv2dBatchRunsAlongDispatchZ) {
  const Workload wl = Workload::conv2d(3, 4, 6, 6, 8, 3, 2, 1);
  const Task task = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  const KernelArtifact a = task.build(task.default_config());
  EXPECT_EQ(a.dispatch[2], 3);
  EXPECT_EQ(a.output.elements(), 3 * 8 * 3 * 3);
  EXPECT_NE(a.source.find("let x_image = i32(wid.z) * 144;"), std::string::npos) << a.source;
  expect_outputs_owned_once(wl, task.default_config(), a);
}

// ResNet-18's C2, C5 and C8 (../shared/workloads.md) get tuned with 200 trials each: their
// spaces must hold many valid configs under WebGPU's default limits and SwiftShader's.
TEST(WgslEmitter, ResNet18ConvSpacesAreValidUnderDefaultAndSwiftShaderLimits) {
  const Workload tasks[] = {Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2"),
                            Workload::conv2d(1, 128, 28, 28, 128, 3, 1, 1, "C5"),
                            Workload::conv2d(1, 256, 14, 14, 256, 3, 1, 1, "C8")};
  for (const DeviceLimits& limits : {webgpu_default_limits(), swiftshader_limits()}) {
    for (const Workload& wl : tasks) {
      const Task task = Task::create(wl, Target::kWebgpu, limits);
      std::mt19937_64 rng(11);
      const std::vector<ConfigEntity> sample = task.space->sample_distinct(rng, 200);
      EXPECT_EQ(sample.size(), 200u) << wl.name;
      const ConfigEntity d = task.default_config();
      ASSERT_TRUE(task.space->is_valid(d)) << wl.name;
      EXPECT_EQ(d.split("tile_y")[2] * d.split("tile_x")[2], 1) << wl.name;
      for (size_t i = 0; i < sample.size(); i += 10) {
        const KernelArtifact a = task.build(sample[i]);
        EXPECT_LE(a.workgroup[0] * a.workgroup[1], limits.max_workgroup_invocations);
        EXPECT_LE(a.shared_memory_bytes, limits.max_shared_memory_bytes);
        for (int64_t g : a.dispatch) EXPECT_TRUE(g >= 1 && g <= 65535) << sample[i].to_string();
      }
    }
  }
}

// CPU check of the tiling arithmetic: over every workgroup and invocation, the outputs each
// invocation stores (the emitter's own index helpers) cover C exactly once.
TEST(WgslEmitter, EveryOutputIsOwnedExactlyOnce) {
  const Workload wl = Workload::dense(32, 48, 16);
  const Task task = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  std::mt19937_64 rng(5);
  for (const ConfigEntity& e : task.space->sample_distinct(rng, 40)) {
    const KernelArtifact a = task.build(e);
    std::vector<int> count(static_cast<size_t>(wl.m * wl.n), 0);
    for (int64_t by = 0; by < a.dispatch[1]; ++by)
      for (int64_t bx = 0; bx < a.dispatch[0]; ++bx)
        for (int64_t ty = 0; ty < a.workgroup[1]; ++ty)
          for (int64_t tx = 0; tx < a.workgroup[0]; ++tx)
            for (const auto& [r, c] : wgsl_owned_outputs(wl, e, bx, by, tx, ty)) {
              ASSERT_TRUE(r >= 0 && r < wl.m && c >= 0 && c < wl.n) << e.to_string();
              ++count[static_cast<size_t>(r * wl.n + c)];
            }
    for (int v : count) ASSERT_EQ(v, 1) << e.to_string();
  }
}

// The same over random conv2d configs: 3x3 stride 1, 3x3 stride 2 (odd output), 1x1 stride 2
// and a batch of 2, each output of Y stored exactly once.
TEST(WgslEmitter, EveryConv2dOutputIsOwnedExactlyOnce) {
  const Workload workloads[] = {
      Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1), Workload::conv2d(1, 4, 9, 9, 8, 3, 2, 1),
      Workload::conv2d(1, 8, 8, 8, 16, 1, 2, 0), Workload::conv2d(2, 4, 8, 8, 8, 3, 1, 1)};
  int checked = 0;
  for (const Workload& wl : workloads) {
    const Task task = Task::create(wl, Target::kWebgpu, swiftshader_limits());
    std::mt19937_64 rng(6);
    for (const ConfigEntity& e : task.space->sample_distinct(rng, 12)) {
      expect_outputs_owned_once(wl, e, task.build(e));
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace webtune
