/// \file wgsl_emitter_test.cpp
/// The webgpu target's WGSL dense template without a browser: config space bijection, default
/// config, device-limit filters, the emitted bindings and workgroup size, the artifact's JSON
/// round trip, and a CPU check that the thread → output mapping covers C exactly once.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <random>
#include <set>

#include "codegen/error_no.hpp"
#include "codegen/task.hpp"
#include "codegen/wgsl_emitter.hpp"

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

TEST(WgslEmitter, OnlyDenseHasATemplate) {
  EXPECT_THROW(Task::create(Workload::conv2d(1, 3, 8, 8, 4, 3, 1, 1), Target::kWebgpu),
               std::invalid_argument);
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

}  // namespace
}  // namespace webtune
