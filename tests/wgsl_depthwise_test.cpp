/// \file wgsl_depthwise_test.cpp
/// The webgpu depthwise_conv2d template (codegen/wgsl_depthwise_emitter.hpp).
///
/// WgslDepthwise.*: without a browser: the space (knobs, kVerbose split sizes, bijection), the
/// default config, device limits, rules, the emitted bindings with and without epilogues, the
/// analytic features, and a CPU check that every output is stored by exactly one invocation.
///
/// WgslDepthwiseBrowser.*: in one headless Chromium session (browser-agent/farm.mjs, WebGPU on
/// SwiftShader, a real tracker on loopback), random valid configs of small and odd shapes, with
/// every epilogue, are built here, run in the tab and checked there against the reference on
/// every output element.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "codegen/error_no.hpp"
#include "codegen/measure.hpp"
#include "codegen/reference.hpp"
#include "codegen/task.hpp"
#include "codegen/template.hpp"
#include "codegen/wgsl_depthwise_emitter.hpp"
#include "codegen/wgsl_emitter.hpp"
#include "tracker/tracker_client.hpp"
#include "tracker/tracker_server.hpp"

extern char** environ;

namespace webtune {
namespace {

using namespace std::chrono_literals;

/// SwiftShader's WebGPU adapter (headless Chromium): 256 invocations, 32 KiB workgroup storage.
DeviceLimits swiftshader_limits() {
  DeviceLimits d = webgpu_default_limits();
  d.max_shared_memory_bytes = 32768;
  return d;
}

Workload with_epilogue(Workload w, const std::string& suffix) {
  if (suffix.empty()) return w;
  std::vector<std::string> tokens;
  size_t start = 1;  // after the leading '+'
  while (start <= suffix.size()) {
    const size_t end = suffix.find('+', start);
    tokens.push_back(
        suffix.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  w.epilogue = Epilogue::parse(tokens);
  return w;
}

/// Every output of `wl` stored by exactly one invocation of the artifact's dispatch.
void expect_outputs_owned_once(const Workload& wl, const ConfigEntity& e, const KernelArtifact& a) {
  std::vector<int> count(static_cast<size_t>(wl.output_size()), 0);
  for (int64_t bz = 0; bz < a.dispatch[2]; ++bz)
    for (int64_t by = 0; by < a.dispatch[1]; ++by)
      for (int64_t bx = 0; bx < a.dispatch[0]; ++bx)
        for (int64_t tz = 0; tz < a.workgroup[2]; ++tz)
          for (int64_t ty = 0; ty < a.workgroup[1]; ++ty)
            for (int64_t tx = 0; tx < a.workgroup[0]; ++tx)
              for (int64_t index :
                   wgsl_depthwise_owned_output_indices(wl, e, {bx, by, bz}, {tx, ty, tz})) {
                ASSERT_TRUE(index >= 0 && index < wl.output_size()) << e.to_string();
                ++count[static_cast<size_t>(index)];
              }
  for (size_t i = 0; i < count.size(); ++i) ASSERT_EQ(count[i], 1) << i << " " << e.to_string();
}

/// Knob candidates of a kVerbose 3-way split of `extent` (inner factors <= 64), counted
/// independently of ConfigSpace: inner factors that divide what is left or are powers of two.
size_t verbose_split_count(int64_t extent) {
  auto allowed = [](int64_t f, int64_t left) {
    return f <= 64 && f <= left && (left % f == 0 || (f & (f - 1)) == 0);
  };
  size_t n = 0;
  for (int64_t regs = 1; regs <= extent; ++regs) {
    if (!allowed(regs, extent)) continue;
    const int64_t left = (extent + regs - 1) / regs;
    for (int64_t threads = 1; threads <= left; ++threads) n += allowed(threads, left) ? 1 : 0;
  }
  return n;
}

TEST(WgslDepthwise, IsRegisteredAsTheWebgpuDepthwiseTemplate) {
  const Workload dw = Workload::depthwise_conv2d(1, 8, 12, 12, 3, 1, 1);
  const Template& t = template_for(Target::kWebgpu, dw);
  EXPECT_EQ(t.name(), "depthwise_conv2d_nchw.webgpu");
  EXPECT_EQ(t.op(), OpKind::kDepthwiseConv2d);
  EXPECT_EQ(Task::create(dw, Target::kWebgpu).kernel_template, &t);
  // The space refuses other ops with a message naming them.
  try {
    wgsl_depthwise_space(Workload::dense(8, 8, 8));
    FAIL() << "a depthwise space for dense";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'dense'"), std::string::npos) << e.what();
  }
}

TEST(WgslDepthwise, SpaceKnobsSizesAndBijection) {
  // 12 = 2^2·3: inner factors {1,2,3,4,6,8,12}; 23 candidates (counted by hand and by
  // verbose_split_count). 2 images × 5 channels = 10 planes; 9 columns.
  EXPECT_EQ(verbose_split_count(12), 23u);
  const Workload wl = Workload::depthwise_conv2d(2, 5, 12, 9, 3, 1, 1);
  const Task task = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  const ConfigSpace& space = *task.space;
  std::vector<std::string> names;
  for (const Knob& k : space.knobs()) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tile_c", "tile_y", "tile_x", "vec4", "use_shared",
                                             "unroll"}));
  const auto size_of = [&](const std::string& name) {
    return space.knobs()[space.knob_index(name)].candidates.size();
  };
  EXPECT_EQ(size_of("tile_c"), verbose_split_count(10));
  EXPECT_EQ(size_of("tile_y"), 23u);
  EXPECT_EQ(size_of("tile_x"), verbose_split_count(9));
  EXPECT_EQ(size_of("unroll"), 3u);
  EXPECT_EQ(space.raw_size(), static_cast<int64_t>(verbose_split_count(10) * 23 *
                                                   verbose_split_count(9) * 2 * 2 * 3));
  // An inexact split is there: 9 columns as 2 blocks of 8 threads.
  bool saw_inexact = false;
  for (const KnobValue& v : space.knobs()[space.knob_index("tile_x")].candidates) {
    const auto& f = std::get<std::vector<int64_t>>(v);
    saw_inexact |= f == std::vector<int64_t>{2, 8, 1};
  }
  EXPECT_TRUE(saw_inexact);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> pick(0, space.raw_size() - 1);
  for (int n = 0; n < 2000; ++n) {
    const int64_t i = pick(rng);
    const ConfigEntity e = space.get(i);
    EXPECT_EQ(space.from_choices(e.choices()).index(), i);
    EXPECT_EQ(space.from_json(e.to_json()).index(), i);
  }
  EXPECT_GT(space.valid_indices().size(), 1000u);
}

TEST(WgslDepthwise, DefaultIsValidUntunedAndExactWhereTheAxisAllows) {
  // 7x7 outputs: 8 threads would leave a column idle; 7 divides the axis.
  const Workload wl = Workload::depthwise_conv2d(1, 24, 7, 7, 3, 1, 1);
  const Task task = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  const ConfigEntity d = task.default_config();
  EXPECT_TRUE(task.space->is_valid(d));
  EXPECT_EQ(d.split("tile_x"), (std::vector<int64_t>{1, 7, 1}));
  EXPECT_EQ(d.split("tile_y"), (std::vector<int64_t>{1, 7, 1}));
  EXPECT_EQ(d.split("tile_c"), (std::vector<int64_t>{24, 1, 1}));
  EXPECT_EQ(d.get_int("vec4"), 0);
  EXPECT_EQ(d.get_int("use_shared"), 0);
  EXPECT_EQ(d.get_int("unroll"), 0);
  const KernelArtifact a = task.build(d);
  EXPECT_EQ(a.workgroup, (std::array<int64_t, 3>{7, 7, 1}));
  EXPECT_EQ(a.dispatch, (std::array<int64_t, 3>{1, 1, 24}));
  // 112x112 (MobileNet-v2's first depthwise layer): 8x8 invocations.
  const Task big = Task::create(Workload::depthwise_conv2d(1, 32, 112, 112, 3, 1, 1),
                                Target::kWebgpu, webgpu_default_limits());
  const KernelArtifact b = big.build(big.default_config());
  EXPECT_EQ(b.workgroup, (std::array<int64_t, 3>{8, 8, 1}));
  EXPECT_EQ(b.dispatch, (std::array<int64_t, 3>{14, 14, 32}));
}

TEST(WgslDepthwise, DeviceLimitsDropConfigsAndBuildRefusesThem) {
  const Workload wl = Workload::depthwise_conv2d(1, 8, 12, 12, 3, 2, 1);
  DeviceLimits small = webgpu_default_limits();
  small.max_workgroup_invocations = 32;
  small.max_workgroup_size_z = 2;
  small.max_shared_memory_bytes = 1024;
  const Task wide = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  const Task narrow = Task::create(wl, Target::kWebgpu, small);
  std::mt19937_64 rng(4);
  int dropped = 0;
  for (const ConfigEntity& e : wide.space->sample_distinct(rng, 300)) {
    const KernelArtifact a = wide.build(e);
    EXPECT_LE(a.workgroup[0] * a.workgroup[1] * a.workgroup[2], 256);
    EXPECT_LE(a.workgroup[2], 64);
    EXPECT_LE(a.shared_memory_bytes, 16384);
    const bool fits = a.workgroup[0] * a.workgroup[1] * a.workgroup[2] <= 32 &&
                      a.workgroup[2] <= 2 && a.shared_memory_bytes <= 1024;
    EXPECT_EQ(narrow.space->is_valid(narrow.space->get(e.index())), fits) << e.to_string();
    if (fits) continue;
    ++dropped;
    try {
      narrow.build(narrow.space->get(e.index()));
      ADD_FAILURE() << "built an entity over the device limits";
    } catch (const MeasureError& error) {
      EXPECT_EQ(error.error(), MeasureErrorNo::kInstantiation);
      EXPECT_NE(std::string(error.what()).find("max_"), std::string::npos) << error.what();
    }
  }
  EXPECT_GT(dropped, 0);
}

TEST(WgslDepthwise, RulesAndForeignEntitiesAreRefusedNamingWhy) {
  const Workload wl = Workload::depthwise_conv2d(1, 8, 12, 12, 3, 1, 1);
  const Task task = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  const auto entity = [&](const std::string& x, int vec4) {
    return task.space->from_json(boost::json::parse(
        R"({"entity": [["tile_c","sp",[8,1,1]], ["tile_y","sp",[3,4,1]], ["tile_x","sp",)" + x +
        R"(], ["vec4","ot",)" + std::to_string(vec4) +
        R"(], ["use_shared","ot",0], ["unroll","ot",2]]})"));
  };
  // vec4 with 3 columns per invocation breaks a rule; with 4 it is valid.
  const ConfigEntity bad = entity("[1,4,3]", 1);
  std::string why;
  EXPECT_FALSE(task.space->is_valid(bad, &why));
  EXPECT_NE(why.find("multiple of 4"), std::string::npos) << why;
  try {
    emit_wgsl_depthwise(wl, bad);
    FAIL() << "emitted a vec4 kernel with regs_x = 3";
  } catch (const MeasureError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kInstantiation);
    EXPECT_NE(std::string(e.what()).find("webgpu: config breaks: vec4"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(task.space->is_valid(entity("[1,3,4]", 1)));
  // An entity of another workload's space (other extents) is refused, not miscompiled.
  const Workload other = Workload::depthwise_conv2d(1, 8, 20, 20, 3, 1, 1);
  const ConfigEntity foreign = task.space->get(0);
  try {
    emit_wgsl_depthwise(other, foreign);
    FAIL() << "emitted a kernel from another workload's entity";
  } catch (const MeasureError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kInstantiation);
    EXPECT_NE(std::string(e.what()).find("does not cover this workload's extent"),
              std::string::npos)
        << e.what();
  }
}

TEST(WgslDepthwise, BindingsSourceAndLayoutsFollowTheEpilogue) {
  const Workload plain = Workload::depthwise_conv2d(1, 8, 12, 12, 3, 1, 1);
  const Task task = Task::create(plain, Target::kWebgpu, swiftshader_limits());
  const std::string json =
      R"({"entity": [["tile_c","sp",[4,2,1]], ["tile_y","sp",[2,3,2]], ["tile_x","sp",[1,3,4]],
                     ["vec4","ot",1], ["use_shared","ot",1], ["unroll","ot",2]]})";
  const ConfigEntity e = task.space->from_json(boost::json::parse(json));
  ASSERT_TRUE(task.space->is_valid(e));
  const KernelArtifact a = task.build(e);
  const std::string& s = a.source;
  EXPECT_NE(s.find("@group(0) @binding(0) var<storage, read> X : array<f32>;"), std::string::npos)
      << s;
  EXPECT_NE(s.find("@group(0) @binding(1) var<storage, read> Wt : array<f32>;"), std::string::npos);
  // 12 columns: Y as vec4s.
  EXPECT_NE(s.find("@group(0) @binding(2) var<storage, read_write> Y : array<vec4<f32>>;"),
            std::string::npos);
  EXPECT_EQ(s.find("@binding(3)"), std::string::npos);
  EXPECT_EQ(s.find("webtune_epilogue"), std::string::npos);
  EXPECT_NE(s.find("@compute @workgroup_size(3, 3, 2)"), std::string::npos);
  // Tile: 2 planes of (6 - 1 + 3) x (12 - 1 + 3).
  EXPECT_NE(s.find("var<workgroup> tile : array<f32, 224>;"), std::string::npos);
  EXPECT_NE(s.find("workgroupBarrier();"), std::string::npos);
  EXPECT_EQ(s.find("&&"), std::string::npos);
  EXPECT_EQ(a.shared_memory_bytes, 4 * 224);
  EXPECT_EQ(a.dispatch, (std::array<int64_t, 3>{1, 2, 4}));
  ASSERT_EQ(a.inputs.size(), 2u);
  EXPECT_EQ(a.inputs[1].shape, (std::vector<int64_t>{8, 1, 3, 3}));
  EXPECT_EQ(a.output.elements(), plain.output_size());

  // bias + residual + relu: bias at 3, residual at 4, both in the layouts.
  const Workload fused = with_epilogue(plain, "+bias+residual+relu");
  const Task ftask = Task::create(fused, Target::kWebgpu, swiftshader_limits());
  const KernelArtifact f = ftask.build(ftask.space->from_json(boost::json::parse(json)));
  EXPECT_NE(f.source.find("@group(0) @binding(3) var<storage, read> Bias : array<f32>;"),
            std::string::npos)
      << f.source;
  EXPECT_NE(f.source.find("@group(0) @binding(4) var<storage, read> Res : array<vec4<f32>>;"),
            std::string::npos);
  EXPECT_NE(f.source.find("Y[q] = webtune_epilogue4(acc[0], vec4<f32>(b), Res[q]);"),
            std::string::npos);
  ASSERT_EQ(f.inputs.size(), 4u);
  EXPECT_EQ(f.inputs[2].shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(f.inputs[3].shape, (std::vector<int64_t>{1, 8, 12, 12}));

  // A residual alone takes binding 3; 7 columns store lane by lane.
  const Workload odd =
      with_epilogue(Workload::depthwise_conv2d(1, 3, 7, 7, 3, 1, 1), "+hard_swish+residual");
  const Task otask = Task::create(odd, Target::kWebgpu, swiftshader_limits());
  const ConfigEntity o = otask.space->from_json(boost::json::parse(
      R"({"entity": [["tile_c","sp",[3,1,1]], ["tile_y","sp",[1,7,1]], ["tile_x","sp",[1,2,4]],
                     ["vec4","ot",1], ["use_shared","ot",0], ["unroll","ot",1]]})"));
  ASSERT_TRUE(otask.space->is_valid(o));
  const std::string os = otask.build(o).source;
  EXPECT_NE(os.find("@group(0) @binding(3) var<storage, read> Res : array<f32>;"),
            std::string::npos)
      << os;
  EXPECT_NE(os.find("var<storage, read_write> Y : array<f32>;"), std::string::npos);
  EXPECT_NE(os.find("Y[q] = webtune_epilogue(acc[0].w, 0.0, Res[q]);"), std::string::npos);
  EXPECT_EQ(os.find("Bias"), std::string::npos);
}

TEST(WgslDepthwise, FeaturesAreNineAndFollowTheTraffic) {
  const Workload wl = Workload::depthwise_conv2d(1, 16, 14, 14, 3, 1, 1);
  const Task task = Task::create(wl, Target::kWebgpu, webgpu_default_limits());
  const Template& t = *task.kernel_template;
  std::mt19937_64 rng(9);
  for (const ConfigEntity& e : task.space->sample_distinct(rng, 20)) {
    const KernelArtifact a = task.build(e);
    const std::vector<float> f = t.features(wl, e, &a);
    ASSERT_EQ(f.size(), Template::kAnalyticFeatureCount);
    for (float v : f) EXPECT_TRUE(std::isfinite(v)) << e.to_string();
    EXPECT_NE(f[2], 0.0f) << e.to_string();  // workgroups
  }
  // Unrolled windows fetch fewer bytes per output than a load per tap.
  const auto bytes = [&](int unroll, const std::string& x) {
    return wgsl_depthwise_input_bytes_per_output(
        wl, task.space->from_json(boost::json::parse(
                R"({"entity": [["tile_c","sp",[16,1,1]], ["tile_y","sp",[7,1,2]],
                    ["tile_x","sp",)" +
                x + R"(], ["vec4","ot",0], ["use_shared","ot",0],
                    ["unroll","ot",)" +
                std::to_string(unroll) + "]]}")));
  };
  EXPECT_GT(bytes(0, "[7,1,2]"), bytes(1, "[7,1,2]"));
  EXPECT_GT(bytes(1, "[7,1,2]"), bytes(2, "[7,1,2]"));
  EXPECT_DOUBLE_EQ(bytes(0, "[7,1,2]"), 4.0 * (9 + 9.0 / 4));
}

// MobileNet-v2's first, a stride-2 and its last depthwise layer (224x224 input) get tuned with
// hundreds of trials: many valid configs under SwiftShader's limits, a valid one-output
// default, and kernels within the limits.
TEST(WgslDepthwise, MobileNetV2LayersHaveLargeValidSpaces) {
  const Workload layers[] = {Workload::depthwise_conv2d(1, 32, 112, 112, 3, 1, 1),
                             Workload::depthwise_conv2d(1, 192, 28, 28, 3, 2, 1),
                             Workload::depthwise_conv2d(1, 960, 7, 7, 3, 1, 1)};
  const DeviceLimits limits = swiftshader_limits();
  for (const Workload& wl : layers) {
    const Task task = Task::create(wl, Target::kWebgpu, limits);
    EXPECT_GT(task.space->valid_indices().size(), 10000u) << wl.key();
    const ConfigEntity d = task.default_config();
    ASSERT_TRUE(task.space->is_valid(d)) << wl.key();
    EXPECT_EQ(d.split("tile_x")[2] * d.split("tile_y")[2] * d.split("tile_c")[2], 1);
    std::mt19937_64 rng(12);
    for (const ConfigEntity& e : task.space->sample_distinct(rng, 20)) {
      const KernelArtifact a = task.build(e);
      EXPECT_LE(a.workgroup[0] * a.workgroup[1] * a.workgroup[2], limits.max_workgroup_invocations);
      EXPECT_LE(a.shared_memory_bytes, limits.max_shared_memory_bytes);
      for (int64_t g : a.dispatch) EXPECT_TRUE(g >= 1 && g <= 65535) << e.to_string();
    }
  }
}

TEST(WgslDepthwise, EveryOutputIsStoredExactlyOnce) {
  const Workload workloads[] = {
      Workload::depthwise_conv2d(1, 8, 10, 10, 3, 1, 1),
      Workload::depthwise_conv2d(2, 6, 11, 11, 3, 2, 1),
      Workload::depthwise_conv2d(1, 24, 7, 7, 3, 1, 1),
      Workload::depthwise_conv2d(1, 18, 13, 13, 3, 2, 1),
      Workload::depthwise_conv2d(1, 9, 17, 17, 3, 1, 0),
  };
  int checked = 0;
  for (const Workload& wl : workloads) {
    const Task task = Task::create(wl, Target::kWebgpu, swiftshader_limits());
    std::mt19937_64 rng(6);
    for (const ConfigEntity& e : task.space->sample_distinct(rng, 12)) {
      expect_outputs_owned_once(wl, e, task.build(e));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 60);
}

}  // namespace
}  // namespace webtune

// ---- In headless Chromium (WebGPU on SwiftShader) ----

namespace webtune::tracker {
namespace {

using namespace std::chrono_literals;

/// `node browser-agent/farm.mjs` with webgpu tabs (as browser_test.cpp starts it).
class FarmProcess {
 public:
  FarmProcess(const std::string& url, int tabs) {
    std::vector<std::string> args = {"node",         WEBTUNE_SOURCE_DIR "/browser-agent/farm.mjs",
                                     "--tracker",    url,
                                     "--tabs",       std::to_string(tabs),
                                     "--targets",    "webgpu",
                                     "--name",       "dw",
                                     "--parent-pid", std::to_string(::getpid())};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    const int rc = posix_spawnp(&pid_, "node", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("cannot start node");
  }
  FarmProcess(const FarmProcess&) = delete;
  FarmProcess& operator=(const FarmProcess&) = delete;
  ~FarmProcess() {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
  }

 private:
  pid_t pid_ = -1;
};

Hello hello_as(Role role) {
  Hello h;
  h.role = role;
  h.name = "wgsl-depthwise-test";
  return h;
}

/// One case: a workload (epilogue included) and how many random valid configs run.
struct Case {
  std::string name;
  Workload workload;
  int configs = 20;
};

/// The reference at every output element (the shapes here have at most kMaxSamples).
std::vector<ReferenceSample> all_samples(const Workload& w, uint64_t seed) {
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, seed);
  std::vector<ReferenceSample> samples;
  for (int64_t i = 0; i < w.output_size(); ++i) samples.push_back(reference_at(w, inputs, i));
  return samples;
}

// The epilogues of issue 14's test list, and the shapes: small ones (stride 1 and 2, a batch
// of 2) with every epilogue, and odd ones (MobileNet-like channel counts scaled down, 7x7
// outputs, prime sizes, a 5x5 window, no padding over an inexact tiling), their 20 configs
// cycling through the epilogues.
const char* const kEpilogues[] = {"", "+bias+relu", "+bias+clip(0,6)", "+bias+residual+relu",
                                  "+bias+hard_swish+residual"};
const char* const kEpilogueNames[] = {"plain", "bias_relu", "bias_relu6", "bias_res_relu",
                                      "bias_hswish_res"};

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::pair<const char*, Workload> small[] = {
      {"s1_8x10x10", Workload::depthwise_conv2d(1, 8, 10, 10, 3, 1, 1)},
      {"s2_2x6x11x11", Workload::depthwise_conv2d(2, 6, 11, 11, 3, 2, 1)},
  };
  for (const auto& [name, w] : small)
    for (size_t e = 0; e < std::size(kEpilogues); ++e)
      out.push_back({std::string(name) + "_" + kEpilogueNames[e], with_epilogue(w, kEpilogues[e])});
  const std::pair<const char*, Workload> odd[] = {
      {"c24_7x7", Workload::depthwise_conv2d(1, 24, 7, 7, 3, 1, 1)},
      {"c18_13x13_s2", Workload::depthwise_conv2d(1, 18, 13, 13, 3, 2, 1)},
      {"c12_11x11_5x5", Workload::depthwise_conv2d(1, 12, 11, 11, 5, 1, 2)},
      {"c9_17x17_pad0", Workload::depthwise_conv2d(1, 9, 17, 17, 3, 1, 0)},
  };
  // Odd shapes: 20 configs each, config i with epilogue i mod 5 (one Case per epilogue, 4 configs
  // each).
  for (const auto& [name, w] : odd)
    for (size_t e = 0; e < std::size(kEpilogues); ++e)
      out.push_back(
          {std::string(name) + "_" + kEpilogueNames[e], with_epilogue(w, kEpilogues[e]), 4});
  return out;
}

TEST(WgslDepthwiseBrowser, RandomConfigsWithEveryEpilogueMatchTheReferenceEverywhere) {
  TrackerConfig config;
  config.port = 0;
  TrackerServer server(config);
  server.start_background();
  FarmProcess farm(server.url(), 1);
  TrackerClient viewer(server.url(), hello_as(Role::kViewer));
  boost::json::object device;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (device.empty() && std::chrono::steady_clock::now() < deadline) {
    boost::json::object s = viewer.summary();
    if (s["agents"].to_number<int>() == 1)
      for (const auto& [key, d] : s["devices"].as_object()) device = d.as_object();
    if (device.empty()) std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(device.empty()) << "the webgpu tab did not join within 120 s";
  const DeviceLimits limits = DeviceLimits::from_json(device.at("limits"));
  TrackerClient client(server.url(), hello_as(Role::kClient));

  // Build and submit every case (one submit per case keeps frames small), then collect.
  std::map<uint64_t, std::string> jobs;  // tag -> case and config, for failure messages
  uint64_t tag = 1;
  std::mt19937_64 rng(2026);
  const auto began = std::chrono::steady_clock::now();
  for (const Case& c : cases()) {
    const Task task = Task::create(c.workload, Target::kWebgpu, limits);
    const std::vector<ConfigEntity> configs = task.space->sample_distinct(rng, c.configs);
    ASSERT_EQ(static_cast<int>(configs.size()), c.configs) << c.name;
    std::vector<SubmitItem> items;
    for (const ConfigEntity& e : configs) {
      MeasureInput input;
      input.workload = task.workload;
      input.artifact = task.build(e);
      input.seed = 100 + tag;
      input.samples = all_samples(task.workload, input.seed);
      input.options.number = 1;
      input.options.repeat = 1;
      input.options.timeout_s = 60;
      SubmitItem item;
      item.tag = tag;
      item.key = "webgpu";
      item.lease_ms = 600000;
      item.input = input.to_json();
      items.push_back(std::move(item));
      jobs[tag++] = c.name + " " + e.to_string();
    }
    client.submit(items);
  }
  std::map<uint64_t, ClientResult> results;
  const auto until = std::chrono::steady_clock::now() + 900s;
  while (results.size() < jobs.size() && std::chrono::steady_clock::now() < until) {
    auto r = client.next_result(1s);
    if (!r) continue;
    EXPECT_TRUE(results.emplace(r->tag, *r).second) << "tag " << r->tag << " twice";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("%zu of %zu depthwise kernels ran in %.1f s\n", results.size(), jobs.size(), seconds);
  ASSERT_EQ(results.size(), jobs.size());
  int passed = 0;
  for (const auto& [t, r] : results) {
    const int error = r.result.at("error_no").to_number<int>();
    EXPECT_EQ(error, 0) << jobs[t] << ": " << boost::json::serialize(r.result);
    passed += error == 0 ? 1 : 0;
  }
  std::printf("%d passed\n", passed);
  EXPECT_GE(jobs.size(), 2u * 5u * 20u + 4u * 20u);
}

}  // namespace
}  // namespace webtune::tracker
