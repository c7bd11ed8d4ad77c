/// \file wasm_emitter_test.cpp
/// The wasm target without a browser: config space sizes and constraints, the device-limit
/// filter on threads, the artifact's JSON round trip, and correctness of built modules run under
/// Node 20 (tests/run_wasm_artifact.mjs) against the C++ reference at its full tolerance, for the
/// default and random configs of dense, conv2d and depthwise_conv2d (edge tiles, stride 2, 1×1,
/// batch 2; issue 14: the four epilogues and odd shapes no tile divides), plus build times and
/// repeated in-process links. Module tests skip when webtune was built without
/// LLVM (WEBTUNE_WITH_LLVM=OFF).
#include <gtest/gtest.h>

#include <unistd.h>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "codegen/error_no.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "codegen/task.hpp"
#include "codegen/wasm_emitter.hpp"
#include "tuner/features.hpp"
#include "tuner/tune_target.hpp"
#include "tuner/xgb_tuner.hpp"

namespace webtune {
namespace {

namespace fs = std::filesystem;

DeviceLimits threads_limit(int64_t max_threads) {
  DeviceLimits d;
  d.max_threads = max_threads;
  return d;
}

TEST(WasmEmitter, TargetNamesAndTuneTarget) {
  EXPECT_EQ(target_name(Target::kWasm), "wasm");
  EXPECT_EQ(target_from_name("wasm"), Target::kWasm);
  EXPECT_EQ(target_key(Target::kWasm), "wasm");
  const TuneTarget t = tune_target_from_name("wasm");
  EXPECT_EQ(t.kernel, Target::kWasm);
  EXPECT_EQ(t.key, "wasm");
  EXPECT_TRUE(t.browser);
}

TEST(WasmEmitter, SpaceSizesAndConstraints) {
  const Task task = Task::create(Workload::dense(64, 64, 64), Target::kWasm, threads_limit(8));
  const ConfigSpace& space = *task.space;
  EXPECT_EQ(space.raw_size(), 5 * 7 * 4 * 2 * 2 * 2 * 4 * 2 * 2 * 2);  // ... fma, split, balance
  const std::vector<int64_t>& valid = space.valid_indices();
  ASSERT_FALSE(valid.empty());
  EXPECT_LT(static_cast<int64_t>(valid.size()), space.raw_size());
  bool has_fast_kernel = false;
  for (int64_t index : valid) {
    const ConfigEntity e = space.get(index);
    const int64_t mr = e.get_int("mr"), nr = e.get_int("nr");
    if (e.get_int("simd")) {
      EXPECT_EQ(nr % 4, 0) << e.to_string();
      EXPECT_LE(mr * nr / 4, 24) << e.to_string();
    } else {
      EXPECT_LE(nr, 8) << e.to_string();
      EXPECT_LE(mr * nr, 32) << e.to_string();
    }
    EXPECT_EQ(64 % e.get_int("unroll_k"), 0);
    has_fast_kernel |= e.get_int("simd") == 1 && mr == 4 && nr == 16 && e.get_int("threads") == 2 &&
                       e.get_int("pack_b") == 1;
  }
  EXPECT_TRUE(has_fast_kernel) << "the space must hold a packed, threaded f32x4 micro-kernel";
  // im2col needs the packed panel; a 1×1 stride-1 conv may read X directly.
  const Task conv = Task::create(Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1), Target::kWasm);
  for (int64_t index : conv.space->valid_indices())
    EXPECT_EQ(conv.space->get(index).get_int("pack_b"), 1);
  const Task pointwise = Task::create(Workload::conv2d(1, 16, 7, 7, 8, 1, 1, 0), Target::kWasm);
  std::set<int64_t> packs;
  for (int64_t index : pointwise.space->valid_indices())
    packs.insert(pointwise.space->get(index).get_int("pack_b"));
  EXPECT_EQ(packs, (std::set<int64_t>{0, 1}));
}

// Issue 14: unroll_k need not divide K (a tail loop finishes it): K = 53 keeps every unroll.
TEST(WasmEmitter, UnrollNeedNotDivideK) {
  const Task task = Task::create(Workload::dense(97, 61, 53), Target::kWasm, threads_limit(8));
  std::set<int64_t> unrolls;
  for (int64_t index : task.space->valid_indices())
    unrolls.insert(task.space->get(index).get_int("unroll_k"));
  EXPECT_EQ(unrolls, (std::set<int64_t>{1, 2, 4, 8}));
  // unroll_k above K is still refused: dense K = 3 keeps 1 and 2.
  const Task small = Task::create(Workload::dense(8, 8, 3), Target::kWasm);
  unrolls.clear();
  for (int64_t index : small.space->valid_indices())
    unrolls.insert(small.space->get(index).get_int("unroll_k"));
  EXPECT_EQ(unrolls, (std::set<int64_t>{1, 2}));
}

TEST(WasmEmitter, DepthwiseSpaceAndPlan) {
  const Workload wl = Workload::depthwise_conv2d(1, 6, 9, 9, 3, 2, 1);  // 5×5 outputs, 6 planes
  const Task task = Task::create(wl, Target::kWasm, threads_limit(8));
  EXPECT_EQ(task.space->raw_size(), 4 * 3 * 5 * 2 * 2 * 4 * 2 * 2);  // ... fma, balance
  std::set<int64_t> tile_w, threads;
  bool has_simd_unrolled = false;
  for (int64_t index : task.space->valid_indices()) {
    const ConfigEntity e = task.space->get(index);
    const WasmPlan p = wasm_plan(wl, e);
    tile_w.insert(p.tile_w);
    threads.insert(p.threads);
    EXPECT_LE(p.threads, p.tasks()) << e.to_string();
    EXPECT_LE(p.tile_c, 6) << e.to_string();
    if (p.simd) {
      EXPECT_EQ(p.tile_w % 4, 0) << e.to_string();
    }
    has_simd_unrolled |= p.simd && p.unroll_rs && p.tile_w == 8;
    // The padded plane covers the whole tiles, (ceil(5/t)·t − 1)·2 + 3, rounded up to a
    // multiple of the stride (two phase rows of equal length).
    EXPECT_EQ(p.padded_w, ((5 + p.tile_w - 1) / p.tile_w * p.tile_w - 1) * 2 + 3 + 1);
    EXPECT_EQ(p.scratch_bytes_per_thread % 64, 0);
    EXPECT_GE(p.scratch_bytes_per_thread, p.padded_h * p.padded_w * 4);
  }
  EXPECT_EQ(tile_w, (std::set<int64_t>{1, 2, 4, 8}));  // 16 > 5 rounded up to 8
  EXPECT_EQ(threads, (std::set<int64_t>{1, 2, 4}));    // 8 > 6 planes
  EXPECT_TRUE(has_simd_unrolled);
  // A 9×9 kernel is not unrolled (81 > 49 steps); 7×7 is.
  for (int64_t r : {7, 9}) {
    const Task big =
        Task::create(Workload::depthwise_conv2d(1, 4, 12, 12, r, 1, r / 2), Target::kWasm);
    std::set<int64_t> unrolls;
    for (int64_t index : big.space->valid_indices())
      unrolls.insert(big.space->get(index).get_int("unroll_rs"));
    EXPECT_EQ(unrolls, (r == 7 ? std::set<int64_t>{0, 1} : std::set<int64_t>{0})) << r;
  }
  const ConfigEntity def = task.default_config();
  EXPECT_EQ(def.get_int("tile_c"), 1);
  EXPECT_EQ(def.get_int("tile_w"), 1);
  EXPECT_EQ(def.get_int("simd"), 0);
  EXPECT_EQ(def.get_int("threads"), 1);
}

TEST(WasmEmitter, EpilogueInputsGetOffsetsInInputOrderAndTheOutputStaysLast) {
  Workload wl = Workload::conv2d(1, 4, 8, 8, 8, 3, 1, 1);
  const Task plain = Task::create(wl, Target::kWasm);
  const WasmPlan p0 = wasm_plan(wl, plain.default_config());
  ASSERT_EQ(p0.offsets.size(), 3u);
  wl.epilogue = Epilogue::parse({"bias", "residual", "relu"});
  const Task fused = Task::create(wl, Target::kWasm);
  const WasmPlan p = wasm_plan(wl, fused.default_config());
  ASSERT_EQ(p.offsets.size(), 5u);
  // data and weight where they were; bias [8] and residual [1,8,8,8] after them; output last.
  EXPECT_EQ(p.offsets[0], p0.offsets[0]);
  EXPECT_EQ(p.offsets[1], p0.offsets[1]);
  EXPECT_EQ(p.offsets[2], p0.offsets[2]);  // bias takes the place the output had
  EXPECT_GE(p.offsets[3], p.offsets[2] + 8 * 4);
  EXPECT_GE(p.offsets[4], p.offsets[3] + 512 * 4);
  EXPECT_GT(p.scratch_offset, p.offsets[4]);
  for (int64_t o : p.offsets) EXPECT_EQ(o % 64, 0);
  if (!wasm_emitter_available()) return;
  const KernelArtifact a = fused.build(fused.default_config());
  EXPECT_EQ(a.inputs.size(), 4u);
  EXPECT_EQ(a.inputs[2].shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(a.inputs[3].shape, wl.output_shape());
  EXPECT_EQ(a.wasm.offsets, p.offsets);
}

TEST(WasmEmitter, DeviceLimitDropsThreads) {
  for (int64_t max_threads : {1, 2, 4}) {
    const Task task =
        Task::create(Workload::dense(64, 64, 64), Target::kWasm, threads_limit(max_threads));
    std::set<int64_t> threads;
    for (int64_t index : task.space->valid_indices())
      threads.insert(task.space->get(index).get_int("threads"));
    EXPECT_EQ(*threads.rbegin(), max_threads);
  }
  // DeviceLimits JSON carries max_threads and tolerates its absence.
  EXPECT_EQ(DeviceLimits::from_json(threads_limit(4).to_json()).max_threads, 4);
  EXPECT_EQ(DeviceLimits::from_json(boost::json::object{}).max_threads, 1);
}

TEST(WasmEmitter, DefaultIsTheScalarBaseline) {
  const Task task = Task::create(Workload::dense(64, 64, 64), Target::kWasm, threads_limit(8));
  const ConfigEntity e = task.default_config();
  EXPECT_TRUE(task.space->is_valid(e));
  EXPECT_EQ(e.get_int("mr"), 1);
  EXPECT_EQ(e.get_int("nr"), 1);
  EXPECT_EQ(e.get_int("unroll_k"), 1);
  EXPECT_EQ(e.get_int("simd"), 0);
  EXPECT_EQ(e.get_int("threads"), 1);
  const Task conv = Task::create(Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1), Target::kWasm);
  EXPECT_TRUE(conv.space->is_valid(conv.default_config()));
}

TEST(WasmEmitter, ArtifactJsonRoundTrip) {
  KernelArtifact a;
  a.target = Target::kWasm;
  a.source = base64_encode(std::string("\0asm\1\0\0\0", 8));
  EXPECT_EQ(a.source, "AGFzbQEAAAA=");
  TensorLayout l;
  l.shape = {4, 4};
  l.width = 16;
  l.height = 1;
  a.inputs = {l, l};
  a.output.rows = a.output.height = 4;
  a.output.cols = a.output.width = 4;
  a.wasm.threads = 2;
  a.wasm.memory_pages = 3;
  a.wasm.offsets = {65536, 65664, 65792};
  a.wasm.simd = true;
  const boost::json::object o = a.to_json();
  ASSERT_TRUE(o.contains("wasm"));
  const KernelArtifact b = KernelArtifact::from_json(boost::json::parse(boost::json::serialize(o)));
  EXPECT_EQ(b.target, Target::kWasm);
  EXPECT_EQ(b.source, a.source);
  EXPECT_EQ(b.wasm.threads, 2);
  EXPECT_EQ(b.wasm.memory_pages, 3);
  EXPECT_EQ(b.wasm.offsets, a.wasm.offsets);
  EXPECT_TRUE(b.wasm.simd);
  // Other targets carry no "wasm" field; a wasm artifact without one is refused.
  KernelArtifact gl = a;
  gl.target = Target::kGlesCompute;
  EXPECT_FALSE(gl.to_json().contains("wasm"));
  boost::json::object broken = o;
  broken.erase("wasm");
  EXPECT_THROW(KernelArtifact::from_json(broken), std::invalid_argument);
  boost::json::object misaligned = o;
  misaligned["wasm"].as_object()["offsets"] = boost::json::array{65536, 65537, 65792};
  EXPECT_THROW(KernelArtifact::from_json(misaligned), std::invalid_argument);
}

TEST(WasmEmitter, WithoutLlvmEmitIsACompileHostError) {
  if (wasm_emitter_available()) GTEST_SKIP() << "built with LLVM";
  const Task task = Task::create(Workload::dense(8, 8, 8), Target::kWasm);
  try {
    task.build(task.default_config());
    FAIL() << "expected MeasureError";
  } catch (const MeasureError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kCompileHost);
    EXPECT_STREQ(e.what(), "webtune was built without LLVM");
  }
}

// The XGBoost tuner on a wasm space: features come from the plan (no LLVM build), and a model
// of a synthetic cost (best: simd, a 4×16 tile, packing, 2 threads) finds a near-best config in
// far fewer trials than the valid space holds.
TEST(WasmEmitter, XgbTunerWorksOnAWasmSpace) {
  const Task task = Task::create(Workload::dense(512, 512, 512), Target::kWasm, threads_limit(2));
  const size_t width = feature_names(task).size();
  for (int64_t index : task.space->valid_indices()) {
    const ConfigEntity e = task.space->get(index);
    const std::vector<float> f = config_features(task, e);
    ASSERT_EQ(f.size(), width);
    // The first analytic feature: log2 of the outputs of one micro-tile.
    EXPECT_FLOAT_EQ(f[width - 9], std::log2(static_cast<float>(e.get_int("mr") * e.get_int("nr"))));
  }
  auto gflops = [](const ConfigEntity& e) {
    const double l = std::log2(static_cast<double>(e.get_int("mr") * e.get_int("nr")));
    double g = 10.0 * std::exp(-0.5 * (l - 6.0) * (l - 6.0));
    g *= e.get_int("simd") ? 1.0 : 0.3;
    g *= e.get_int("pack_b") ? 1.0 : 0.8;
    g *= static_cast<double>(e.get_int("threads"));
    return g;
  };
  XgbOptions options;
  options.plan_size = 32;
  XgbTuner tuner(task, 3, options);
  double best = 0, optimum = 0;
  for (int64_t index : task.space->valid_indices())
    optimum = std::max(optimum, gflops(task.space->get(index)));
  int trials = 0;
  for (int round = 0; round < 6; ++round) {
    const std::vector<ConfigEntity> batch = tuner.next_batch(16);
    std::vector<MeasureResult> results;
    for (const ConfigEntity& e : batch) {
      EXPECT_TRUE(task.space->is_valid(e));
      MeasureResult r;
      r.costs = {task.workload.flops() / (gflops(e) * 1e9)};
      results.push_back(r);
      best = std::max(best, gflops(e));
    }
    trials += static_cast<int>(batch.size());
    tuner.update(batch, results);
  }
  std::printf("  xgb: best %.2f of %.2f after %d of %zu valid configs\n", best, optimum, trials,
              task.space->valid_indices().size());
  EXPECT_GE(best, 0.9 * optimum);
}

// ---- modules under Node ---------------------------------------------------------------------

void write_floats(const fs::path& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
}

std::vector<float> read_floats(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

/// `node`, with relaxed SIMD switched on where this Node needs the flag for it (Node 20: V8
/// 11.3 ships it behind --experimental-wasm-relaxed-simd; later Nodes have it on by default and
/// may not know the flag).
std::string node_command() {
  static const std::string command =
      std::system("node --experimental-wasm-relaxed-simd -e 0 > /dev/null 2>&1") == 0
          ? "node --experimental-wasm-relaxed-simd"
          : "node";
  return command;
}

/// Standard base64 (the artifact's source) back to bytes.
std::string base64_decode(const std::string& text) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char ch : text) {
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char* at = ch == '\0' ? nullptr : std::strchr(alphabet, ch);
    if (at == nullptr) continue;  // '=' padding
    bits = (bits << 6) | static_cast<uint32_t>(at - alphabet);
    if ((count += 6) >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

/// How many f32x4.relaxed_madd instructions (0xfd, LEB128 0x105 = 0x85 0x02) a module holds;
/// the byte triple cannot occur inside another SIMD instruction's LEB128 opcode.
int relaxed_madd_count(const KernelArtifact& artifact) {
  const std::string bytes = base64_decode(artifact.source);
  int found = 0;
  for (size_t i = 0; i + 2 < bytes.size(); ++i)
    if (bytes.compare(i, 3, "\xfd\x85\x02") == 0) ++found;
  return found;
}

class WasmModules : public ::testing::Test {
 public:
  void SetUp() override {
    if (!wasm_emitter_available()) GTEST_SKIP() << "webtune was built without LLVM";
    if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no node on PATH";
    dir_ = fs::temp_directory_path() /
           ("webtune-wasm-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  /// Runs `artifact` under node; returns the output, or empty with a failure recorded. With
  /// `repeat` > 0, `seconds` gets the fastest of that many timed executions.
  /// Every input of seeded_inputs(wl, seed) goes to the runner, in input order.
  std::vector<float> run(const Workload& wl, const KernelArtifact& artifact, uint64_t seed,
                         int repeat = 0, double* seconds = nullptr,
                         const std::string& runner_args = "") {
    return run_inputs(seeded_inputs(wl, seed), artifact, repeat, seconds, runner_args);
  }
  /// run() with the inputs given (one per offset before the output's); `runner_args` go to
  /// run_wasm_artifact.mjs as they are (e.g. "--claims 3,65538").
  std::vector<float> run_inputs(const std::vector<std::vector<float>>& inputs,
                                const KernelArtifact& artifact, int repeat = 0,
                                double* seconds = nullptr, const std::string& runner_args = "") {
    std::ofstream(dir_ / "artifact.json") << boost::json::serialize(artifact.to_json());
    fs::remove(dir_ / "out.bin");
    std::string cmd = node_command() + " '" WEBTUNE_SOURCE_DIR "/tests/run_wasm_artifact.mjs' '" +
                      (dir_ / "artifact.json").string() + "' '" + (dir_ / "out.bin").string() + "'";
    for (size_t i = 0; i < inputs.size(); ++i) {
      const fs::path path = dir_ / ("input" + std::to_string(i) + ".bin");
      write_floats(path, inputs[i]);
      cmd += " '" + path.string() + "'";
    }
    if (!runner_args.empty()) cmd += " " + runner_args;
    if (repeat > 0)
      cmd += " --repeat " + std::to_string(repeat) + " > '" + (dir_ / "time.json").string() + "'";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << "node failed: " << cmd;
      return {};
    }
    if (seconds != nullptr) {
      std::ifstream in(dir_ / "time.json");
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      *seconds = boost::json::parse(text).at("best").to_number<double>();
    }
    return read_floats(dir_ / "out.bin");
  }

 protected:
  /// Builds and runs one entity; checks every output element against the reference.
  /// `runner_args` as for run(); with `written_only`, an output left NaN (no thread wrote it)
  /// is not counted wrong.
  void check(const Task& task, const ConfigEntity& e, uint64_t seed = 7,
             const std::string& runner_args = "", bool written_only = false) {
    const auto start = std::chrono::steady_clock::now();
    const KernelArtifact artifact = task.build(e);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("  %-28s %-72s build %.1f ms, %zu base64 chars\n", task.workload.key().c_str(),
                e.to_string().c_str(), ms, artifact.source.size());
    const Workload& wl = task.workload;
    const std::vector<float> out = run(wl, artifact, seed, 0, nullptr, runner_args);
    ASSERT_EQ(static_cast<int64_t>(out.size()), wl.output_size()) << e.to_string();
    const std::vector<std::vector<float>> inputs = seeded_inputs(wl, seed);
    ASSERT_EQ(artifact.inputs.size(), inputs.size());
    ASSERT_EQ(artifact.wasm.offsets.size(), inputs.size() + 1);
    int64_t wrong = 0;
    for (int64_t i = 0; i < wl.output_size(); ++i) {
      if (written_only && std::isnan(out[i])) continue;
      const ReferenceSample r = reference_at(wl, inputs, i);
      if (!(std::abs(out[i] - r.value) <= r.tolerance)) {
        if (++wrong <= 3)
          ADD_FAILURE() << e.to_string() << ": output " << i << " = " << out[i] << ", expected "
                        << r.value << " ± " << r.tolerance;
      }
    }
    EXPECT_EQ(wrong, 0) << e.to_string();
  }

  /// The default plus `count` random valid configs of `wl`.
  void check_random(const Workload& wl, int count, uint64_t rng_seed) {
    const Task task = Task::create(wl, Target::kWasm, threads_limit(8));
    check(task, task.default_config());
    std::mt19937_64 rng(rng_seed);
    const std::vector<ConfigEntity> configs = task.space->sample_distinct(rng, count);
    EXPECT_EQ(static_cast<int>(configs.size()), count) << "the space is too small";
    for (const ConfigEntity& e : configs) check(task, e);
  }

  fs::path dir_;
};

TEST_F(WasmModules, DenseRandomConfigsMatchTheReference) {
  check_random(Workload::dense(64, 64, 64), 20, 1);
}

TEST_F(WasmModules, DenseEdgeTilesMatchTheReference) {
  // M, N not multiples of any tile; K prime-ish so only unroll 1.
  check_random(Workload::dense(33, 50, 17), 8, 2);
  const Task task = Task::create(Workload::dense(33, 50, 16), Target::kWasm, threads_limit(8));
  // The widest simd tile with packing and threads: edge rows (33 % 4) and columns (50 % 24).
  for (int64_t pack : {0, 1}) {
    const ConfigEntity e = task.space->from_json(boost::json::parse(
        R"({"entity":[["mr","ot",4],["nr","ot",24],["unroll_k","ot",4],["simd","ot",1],)"
        R"(["order","ot","cols_outer"],["pack_b","ot",)" +
        std::to_string(pack) + R"(],["threads","ot",2]]})"));
    check(task, e);
  }
}

TEST_F(WasmModules, Conv2dRandomConfigsMatchTheReference) {
  check_random(Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1), 20, 3);
}

TEST_F(WasmModules, Conv2dStride2BatchAndPointwiseMatchTheReference) {
  check_random(Workload::conv2d(2, 8, 11, 11, 16, 3, 2, 1), 8, 4);
  check_random(Workload::conv2d(1, 16, 7, 7, 8, 1, 1, 0), 8, 5);
}

Workload with(Workload wl, const std::vector<std::string>& tokens) {
  wl.epilogue = Epilogue::parse(tokens);
  return wl;
}

/// One fused case: a workload with its epilogue and the random configs it gets.
struct FusedCase {
  const char* label;
  Workload workload;
};

void PrintTo(const FusedCase& c, std::ostream* os) {
  *os << c.label;
}

class WasmFused : public WasmModules, public ::testing::WithParamInterface<FusedCase> {};

// The default plus 20 random valid configs of every case: all match the reference (the whole
// output, at the reference's tolerance).
TEST_P(WasmFused, RandomConfigsMatchTheReference) {
  check_random(GetParam().workload, 20, 100 + std::hash<std::string>{}(GetParam().label) % 1000);
}

const std::vector<std::string> kBiasRelu = {"bias", "relu"};
const std::vector<std::string> kBiasClip = {"bias", "clip(0,6)"};
const std::vector<std::string> kBiasResidualRelu = {"bias", "residual", "relu"};
const std::vector<std::string> kBiasHardSwishResidual = {"bias", "hard_swish", "residual"};
const std::vector<std::string> kBiasSiluResidual = {"bias", "silu", "residual"};
const std::vector<std::string> kBiasSigmoid = {"bias", "sigmoid"};
const std::vector<std::string> kBiasResidualHardSigmoid = {"bias", "residual", "hard_sigmoid"};

INSTANTIATE_TEST_SUITE_P(
    Epilogues, WasmFused,
    testing::Values(
        // Small shapes × the four epilogues of issue 14.
        FusedCase{"Dense_BiasRelu", with(Workload::dense(24, 36, 20), kBiasRelu)},
        FusedCase{"Dense_BiasClip", with(Workload::dense(24, 36, 20), kBiasClip)},
        FusedCase{"Dense_BiasResidualRelu", with(Workload::dense(24, 36, 20), kBiasResidualRelu)},
        FusedCase{"Dense_BiasHardSwishResidual",
                  with(Workload::dense(24, 36, 20), kBiasHardSwishResidual)},
        FusedCase{"Conv_BiasRelu", with(Workload::conv2d(1, 4, 9, 9, 8, 3, 1, 1), kBiasRelu)},
        FusedCase{"Conv_BiasClip", with(Workload::conv2d(2, 4, 9, 9, 8, 3, 2, 1), kBiasClip)},
        FusedCase{"Conv_BiasResidualRelu",
                  with(Workload::conv2d(1, 4, 9, 9, 8, 3, 1, 1), kBiasResidualRelu)},
        FusedCase{"Conv_BiasHardSwishResidual",
                  with(Workload::conv2d(2, 8, 6, 6, 8, 1, 1, 0), kBiasHardSwishResidual)},
        FusedCase{"Depthwise_BiasRelu",
                  with(Workload::depthwise_conv2d(1, 8, 10, 10, 3, 1, 1), kBiasRelu)},
        FusedCase{"Depthwise_BiasClip",
                  with(Workload::depthwise_conv2d(1, 8, 11, 11, 3, 2, 1), kBiasClip)},
        FusedCase{"Depthwise_BiasResidualRelu",
                  with(Workload::depthwise_conv2d(2, 4, 10, 10, 3, 1, 1), kBiasResidualRelu)},
        FusedCase{"Depthwise_BiasHardSwishResidual",
                  with(Workload::depthwise_conv2d(1, 8, 11, 11, 3, 2, 1), kBiasHardSwishResidual)},
        // SiLU (x · sigmoid(x)): the module's own exp (Cephes' expf), scalar and f32x4.
        FusedCase{"Dense_BiasSiluResidual", with(Workload::dense(24, 36, 20), kBiasSiluResidual)},
        FusedCase{"Conv_BiasSiluResidual",
                  with(Workload::conv2d(2, 8, 6, 6, 8, 1, 1, 0), kBiasSiluResidual)},
        FusedCase{"Depthwise_BiasSiluResidual",
                  with(Workload::depthwise_conv2d(1, 8, 11, 11, 3, 2, 1), kBiasSiluResidual)},
        FusedCase{"OddDense_97x61x53_Silu", with(Workload::dense(97, 61, 53), kBiasSiluResidual)},
        // The squeeze-excite gates' sigmoid and hard_sigmoid.
        FusedCase{"Dense_BiasSigmoid", with(Workload::dense(24, 36, 20), kBiasSigmoid)},
        FusedCase{"Conv_BiasSigmoid",
                  with(Workload::conv2d(1, 16, 1, 1, 24, 1, 1, 0), kBiasSigmoid)},
        FusedCase{"Conv_BiasResidualHardSigmoid",
                  with(Workload::conv2d(2, 8, 6, 6, 8, 1, 1, 0), kBiasResidualHardSigmoid)},
        FusedCase{"OddDense_97x61x53_HardSigmoid",
                  with(Workload::dense(97, 61, 53), kBiasResidualHardSigmoid)},
        // Odd shapes: no tile divides (dense 97 × 61 × 53, K prime so unroll_k has a tail;
        // conv2d with 3 input channels and 7×7 outputs; depthwise with 24 and 36 channels,
        // MobileNet-v2's 24/144 scaled down, 7×7 and 13×13 outputs).
        FusedCase{"OddDense_97x61x53", with(Workload::dense(97, 61, 53), kBiasHardSwishResidual)},
        FusedCase{"OddDense_97x61x53_Plain", Workload::dense(97, 61, 53)},
        FusedCase{"OddConv_3ch_7x7out",
                  with(Workload::conv2d(1, 3, 14, 14, 10, 3, 2, 1), kBiasResidualRelu)},
        FusedCase{"OddConv_3ch_7x7out_Plain", Workload::conv2d(1, 3, 7, 7, 10, 3, 1, 1)},
        FusedCase{"OddDepthwise_24ch_s1",
                  with(Workload::depthwise_conv2d(1, 24, 13, 13, 3, 1, 1), kBiasClip)},
        FusedCase{"OddDepthwise_36ch_s2",
                  with(Workload::depthwise_conv2d(1, 36, 13, 13, 3, 2, 1), kBiasRelu)},
        FusedCase{"OddDepthwise_24ch_5x5_Plain", Workload::depthwise_conv2d(1, 24, 9, 9, 5, 2, 2)},
        // Stride 2 without padding over an even width: the last input column is never read,
        // the padded plane is narrower than the input row.
        FusedCase{"OddDepthwise_12ch_s2_p0",
                  with(Workload::depthwise_conv2d(1, 12, 12, 12, 3, 2, 0), kBiasResidualRelu)},
        // Stride 3 (three phase rows per padded row; taps 0 and 3 of a 5-wide kernel share
        // phase 0) over a non-square input whose width no stride divides.
        FusedCase{
            "OddDepthwise_10ch_5x5_s3",
            with(Workload::depthwise_conv2d(1, 10, 17, 16, 5, 3, 1), kBiasHardSwishResidual)}),
    [](const testing::TestParamInfo<FusedCase>& info) { return std::string(info.param.label); });

// The activations clamp with f32x4.pmax/pmin, v first: a NaN in the sum must come out NaN
// (as the CPU reference's std::max/std::min give), never be clamped to a bound. The weight is
// all ones and the bias 0, so each output row is its input row's sum: NaN, −5, 3, 10, or ±100
// (where silu's and sigmoid's exp saturates).
TEST_F(WasmModules, ActivationsKeepANaNSumAndClampTheRest) {
  const int64_t m = 8, n = 12, k = 5;
  std::vector<float> a(static_cast<size_t>(m * k), 0.0f);
  const float sums[6] = {NAN, -5.0f, 3.0f, 10.0f, -100.0f, 100.0f};
  for (int64_t i = 0; i < m; ++i) a[static_cast<size_t>(i * k + 1)] = sums[i % 6];
  const std::vector<float> ones(static_cast<size_t>(n * k), 1.0f), bias(n, 0.0f);
  std::mt19937_64 rng(11);
  for (const std::vector<std::string>& tokens :
       {std::vector<std::string>{"bias", "relu"}, std::vector<std::string>{"bias", "clip(0,6)"},
        std::vector<std::string>{"bias", "hard_swish"}, std::vector<std::string>{"bias", "silu"},
        std::vector<std::string>{"bias", "sigmoid"},
        std::vector<std::string>{"bias", "hard_sigmoid"}}) {
    const Workload wl = with(Workload::dense(m, n, k), tokens);
    const Task task = Task::create(wl, Target::kWasm, threads_limit(2));
    // Five simd and five scalar configs out of a larger sample, and the default (scalar).
    std::vector<ConfigEntity> configs;
    int simd_kept = 0, scalar_kept = 0;
    for (const ConfigEntity& e : task.space->sample_distinct(rng, 60)) {
      int& kept = e.get_int("simd") != 0 ? simd_kept : scalar_kept;
      if (kept < 5) configs.push_back(e), ++kept;
    }
    configs.push_back(task.default_config());
    int simd = 0;
    for (const ConfigEntity& e : configs) {
      simd += e.get_int("simd") != 0;
      const std::vector<float> got = run_inputs({a, ones, bias}, task.build(e));
      ASSERT_EQ(got.size(), static_cast<size_t>(m * n)) << e.to_string();
      for (int64_t i = 0; i < m; ++i) {
        const double v = sums[i % 6];
        const std::string& act = tokens[1];
        const double want = act == "relu"         ? std::max(v, 0.0)
                            : act == "hard_swish" ? v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0
                            : act == "silu"       ? v / (1.0 + std::exp(-v))
                            : act == "sigmoid"    ? 1.0 / (1.0 + std::exp(-v))
                            : act == "hard_sigmoid" ? std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0
                                                    : std::min(std::max(v, 0.0), 6.0);
        for (int64_t j = 0; j < n; ++j) {
          const float out = got[static_cast<size_t>(i * n + j)];
          if (std::isnan(want))
            EXPECT_TRUE(std::isnan(out)) << tokens[1] << " " << e.to_string() << ": " << out;
          else
            EXPECT_NEAR(out, want, 1e-5) << tokens[1] << " of " << v << ", " << e.to_string();
        }
      }
    }
    EXPECT_GT(simd, 0) << "no simd config sampled for " << tokens[1];
  }
}

TEST_F(WasmModules, RelinksManyTimesInOneProcess) {
  // lld's in-process link keeps global state: it must stay usable over hundreds of links.
  const Task task = Task::create(Workload::dense(16, 16, 16), Target::kWasm, threads_limit(8));
  std::mt19937_64 rng(6);
  const auto configs = task.space->sample_distinct(rng, 200);
  const auto start = std::chrono::steady_clock::now();
  std::string first;
  for (const ConfigEntity& e : configs) {
    const KernelArtifact a = task.build(e);
    ASSERT_FALSE(a.source.empty());
    if (first.empty()) first = a.source;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("  %zu builds (LLVM O3 + lld) in %.0f ms, %.1f ms each\n", configs.size(), ms,
              ms / static_cast<double>(configs.size()));
  // The same config builds the same module again.
  EXPECT_EQ(task.build(configs.front()).source, first);
  check(task, configs.back());
}

DeviceLimits relaxed_limit() {
  DeviceLimits d = threads_limit(8);
  d.relaxed_simd = true;
  return d;
}

/// The valid configs of `task` whose string knob `name` is `value`.
std::vector<ConfigEntity> valid_with(const Task& task, const std::string& name,
                                     const std::string& value) {
  std::vector<ConfigEntity> out;
  for (int64_t index : task.space->valid_indices()) {
    ConfigEntity e = task.space->get(index);
    if (e.get_string(name) == value) out.push_back(std::move(e));
  }
  return out;
}

/// The first `count` of 512 distinct random configs of `task` whose string knob `name` is
/// `value` (fewer when the sample holds fewer).
std::vector<ConfigEntity> sampled_with(const Task& task, std::mt19937_64& rng,
                                       const std::string& name, const std::string& value,
                                       size_t count) {
  std::vector<ConfigEntity> out;
  for (ConfigEntity& e : task.space->sample_distinct(rng, 512)) {
    if (e.get_string(name) != value) continue;
    out.push_back(std::move(e));
    if (out.size() == count) break;
  }
  return out;
}

/// `e` as a record from before knob `name` existed writes it: its JSON without that knob.
boost::json::object json_without_knob(const ConfigEntity& e, const std::string& name) {
  boost::json::object json = e.to_json();
  boost::json::array knobs;
  for (const boost::json::value& knob : json.at("entity").as_array())
    if (knob.as_array().at(0).as_string() != name) knobs.push_back(knob);
  json["entity"] = knobs;
  return json;
}

TEST(WasmEmitter, FmaNeedsSimdAndARelaxedSimdDevice) {
  for (const Workload& wl :
       {Workload::dense(64, 64, 64), Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1),
        Workload::depthwise_conv2d(1, 8, 10, 10, 3, 1, 1)}) {
    const Task plain = Task::create(wl, Target::kWasm, threads_limit(8));
    const Task relaxed = Task::create(wl, Target::kWasm, relaxed_limit());
    int64_t fma_plain = 0, fma_relaxed = 0, fma_scalar = 0;
    for (int64_t i : plain.space->valid_indices()) fma_plain += plain.space->get(i).get_int("fma");
    for (int64_t i : relaxed.space->valid_indices()) {
      const ConfigEntity e = relaxed.space->get(i);
      fma_relaxed += e.get_int("fma");
      if (e.get_int("fma") == 1 && e.get_int("simd") == 0) ++fma_scalar;
    }
    EXPECT_EQ(fma_plain, 0) << wl.key() << ": a device without relaxed SIMD is offered fma";
    EXPECT_GT(fma_relaxed, 0) << wl.key();
    EXPECT_EQ(fma_scalar, 0) << wl.key() << ": fma without simd";
    // Half of the relaxed device's space: every valid simd config twice.
    EXPECT_EQ(static_cast<int64_t>(relaxed.space->valid_indices().size()),
              static_cast<int64_t>(plain.space->valid_indices().size()) + fma_relaxed)
        << wl.key();
    // A record from before the knob (no "fma") reads as fma 0 with its old index.
    const ConfigEntity old = plain.space->get(plain.space->valid_indices().back());
    const ConfigEntity read = relaxed.space->from_json(json_without_knob(old, "fma"));
    EXPECT_EQ(read.index(), old.index());
    EXPECT_EQ(read.get_int("fma"), 0);
  }
  // The limit travels in the device's JSON (a boolean; absent: false).
  EXPECT_TRUE(DeviceLimits::from_json(relaxed_limit().to_json()).relaxed_simd);
  EXPECT_FALSE(DeviceLimits::from_json(boost::json::object{}).relaxed_simd);
  EXPECT_THROW(DeviceLimits::from_json(boost::json::parse(R"({"relaxed_simd":1})")),
               std::invalid_argument);
  // fma without simd is refused with the rule's words.
  const Task dense = Task::create(Workload::dense(64, 64, 64), Target::kWasm, relaxed_limit());
  const ConfigEntity scalar_fma = dense.space->from_json(boost::json::parse(
      R"({"entity":[["mr","ot",4],["nr","ot",8],["unroll_k","ot",1],["simd","ot",0],)"
      R"(["order","ot","rows_outer"],["pack_b","ot",0],["threads","ot",1],["fma","ot",1]]})"));
  try {
    wasm_plan(dense.workload, scalar_fma);
    ADD_FAILURE() << "fma without simd was accepted";
  } catch (const MeasureError& e) {
    EXPECT_NE(std::string(e.what()).find("fma (f32x4.relaxed_madd) needs simd"), std::string::npos)
        << e.what();
  }
}

// fma 1 builds relaxed_madd into the inner loop (and says so in the artifact), fma 0 does not;
// both match the reference over random configs of every kernel and epilogue kind.
TEST_F(WasmModules, FmaConfigsMatchTheReference) {
  const std::vector<Workload> workloads = {
      with(Workload::dense(33, 50, 17), kBiasHardSwishResidual),
      with(Workload::conv2d(1, 3, 14, 14, 10, 3, 2, 1), kBiasResidualRelu),
      with(Workload::conv2d(2, 8, 6, 6, 8, 1, 1, 0), kBiasClip),
      with(Workload::depthwise_conv2d(1, 24, 13, 13, 3, 1, 1), kBiasClip),
      with(Workload::depthwise_conv2d(1, 36, 13, 13, 3, 2, 1), kBiasRelu)};
  uint64_t seed = 40;
  for (const Workload& wl : workloads) {
    const Task task = Task::create(wl, Target::kWasm, relaxed_limit());
    std::mt19937_64 rng(seed++);
    int checked = 0;
    for (const ConfigEntity& e : task.space->sample_distinct(rng, 64)) {
      if (e.get_int("fma") != 1) continue;
      const KernelArtifact artifact = task.build(e);
      EXPECT_TRUE(artifact.wasm.relaxed_simd) << e.to_string();
      EXPECT_TRUE(artifact.to_json().at("wasm").as_object().at("relaxed_simd").as_bool());
      EXPECT_GT(relaxed_madd_count(artifact), 0) << e.to_string();
      // The same config without fma: no relaxed SIMD at all.
      std::vector<int> choices = e.choices();
      choices[task.space->knob_index("fma")] = 0;
      const KernelArtifact plain = task.build(task.space->from_choices(choices));
      EXPECT_FALSE(plain.wasm.relaxed_simd);
      EXPECT_EQ(relaxed_madd_count(plain), 0) << e.to_string();
      EXPECT_FALSE(plain.to_json().at("wasm").as_object().contains("relaxed_simd"));
      check(task, e);
      if (++checked == 6) break;
    }
    EXPECT_EQ(checked, 6) << wl.key() << ": too few fma configs sampled";
  }
}

// The split knob (issue 14, 7×7 pointwise layers): split rows divides the row blocks among
// the threads. It needs 2 threads or more, balances what the column split cannot (N = 49 in
// blocks of 4: 13 blocks, 7 against 6), and a record from before the knob reads as split cols
// with its old index.
TEST(WasmEmitter, SplitRowsNeedsThreadsAndKeepsOldIndices) {
  const Workload pointwise = Workload::conv2d(1, 576, 7, 7, 160, 1, 1, 0);
  const Task task = Task::create(pointwise, Target::kWasm, threads_limit(8));
  const std::vector<ConfigEntity> rows = valid_with(task, "split", "rows");
  for (const ConfigEntity& e : rows) {
    EXPECT_GE(e.get_int("threads"), 2) << e.to_string();
    const WasmPlan p = wasm_plan(pointwise, e);
    EXPECT_TRUE(p.split_rows);
    EXPECT_LE(p.threads, p.row_blocks()) << e.to_string();
  }
  EXPECT_FALSE(rows.empty());
  // 8×4 tiles, 2 threads: the column split's best share is 7 of 13 blocks, the row split's 10
  // of 20; the analytic "invocations" feature says so (log2 of blocks over the largest share).
  auto entity = [&](const std::string& split) {
    return task.space->from_json(boost::json::parse(
        R"({"entity":[["mr","ot",8],["nr","ot",4],["unroll_k","ot",2],["simd","ot",1],)"
        R"(["order","ot","rows_outer"],["pack_b","ot",1],["threads","ot",2],["fma","ot",0],)"
        R"(["split","ot",")" +
        split + R"("]]})"));
  };
  const size_t width = feature_names(task).size();
  EXPECT_FLOAT_EQ(config_features(task, entity("cols"))[width - 8], std::log2(13.0f / 7.0f));
  EXPECT_FLOAT_EQ(config_features(task, entity("rows"))[width - 8], 1.0f);
  // Each thread packs the whole panel with split rows: scratch for 13 blocks, not 7.
  EXPECT_EQ(wasm_plan(pointwise, entity("rows")).scratch_bytes_per_thread, 576 * 4 * 13 * 4);
  EXPECT_EQ(wasm_plan(pointwise, entity("cols")).scratch_bytes_per_thread, 576 * 4 * 7 * 4);
  // One thread with split rows is refused with the rule's words.
  const std::string one = R"({"entity":[["mr","ot",8],["nr","ot",4],["unroll_k","ot",2],)"
                          R"(["simd","ot",1],["order","ot","rows_outer"],["pack_b","ot",1],)"
                          R"(["threads","ot",1],["split","ot","rows"]]})";
  try {
    wasm_plan(pointwise, task.space->from_json(boost::json::parse(one)));
    ADD_FAILURE() << "split rows with one thread was accepted";
  } catch (const MeasureError& e) {
    EXPECT_NE(std::string(e.what()).find("split rows needs threads >= 2"), std::string::npos)
        << e.what();
  }
  // A record from before the knob (no "split") reads as split cols with its old index.
  const ConfigEntity cols = entity("cols");
  const ConfigEntity read = task.space->from_json(json_without_knob(cols, "split"));
  EXPECT_EQ(read.index(), cols.index());
  EXPECT_EQ(read.get_string("split"), "cols");
}

// Split rows computes what split cols does: every output, on odd shapes (M, N not multiples of
// the tile; rows past M clamped, columns past N zero or skipped), with 2, 3 and 4 threads, both
// loop orders, packed or not, with an im2col conv2d and a batch of 2.
TEST_F(WasmModules, SplitRowsConfigsMatchTheReference) {
  const std::vector<Workload> workloads = {
      with(Workload::conv2d(1, 57, 7, 7, 37, 1, 1, 0), kBiasClip),
      with(Workload::dense(29, 13, 21), kBiasHardSwishResidual),
      with(Workload::conv2d(2, 5, 9, 9, 22, 3, 2, 1), kBiasResidualRelu)};
  uint64_t seed = 60;
  for (const Workload& wl : workloads) {
    const Task task = Task::create(wl, Target::kWasm, threads_limit(8));
    std::mt19937_64 rng(seed++);
    const std::vector<ConfigEntity> configs = sampled_with(task, rng, "split", "rows", 8);
    EXPECT_EQ(configs.size(), 8u) << wl.key() << ": too few split rows configs sampled";
    for (const ConfigEntity& e : configs) check(task, e);
  }
}

// The balance knob: with steal, the threads claim the units they split through claim words
// (docs/wasm_abi.md). It needs 2 threads or more, and for the GEMM batch 1 and the split blocks
// in the outer loop; a record from before the knob reads as static with its old index and
// builds the module it built before.
TEST(WasmEmitter, BalanceStealNeedsThreadsAndKeepsOldIndices) {
  const Workload pointwise = Workload::conv2d(1, 576, 7, 7, 160, 1, 1, 0);
  const Task task = Task::create(pointwise, Target::kWasm, threads_limit(8));
  const std::vector<ConfigEntity> steal = valid_with(task, "balance", "steal");
  for (const ConfigEntity& e : steal) {
    const WasmPlan p = wasm_plan(pointwise, e);
    EXPECT_TRUE(p.steal);
    EXPECT_GE(p.threads, 2) << e.to_string();
    EXPECT_NE(p.split_rows, p.cols_outer) << e.to_string();
  }
  EXPECT_FALSE(steal.empty());
  // The claims are per execution, not per image: no steal config for a batch of 2.
  const Task batch2 =
      Task::create(Workload::conv2d(2, 16, 7, 7, 16, 1, 1, 0), Target::kWasm, threads_limit(8));
  EXPECT_TRUE(valid_with(batch2, "balance", "steal").empty());
  EXPECT_FALSE(valid_with(batch2, "balance", "static").empty());
  // Depthwise: any batch, threads >= 2.
  const Task dw = Task::create(Workload::depthwise_conv2d(2, 24, 13, 13, 3, 2, 1), Target::kWasm,
                               threads_limit(8));
  const std::vector<ConfigEntity> dw_steal = valid_with(dw, "balance", "steal");
  for (const ConfigEntity& e : dw_steal) EXPECT_GE(e.get_int("threads"), 2) << e.to_string();
  EXPECT_FALSE(dw_steal.empty());
  auto entity = [&](int threads, const std::string& order, const std::string& split,
                    const std::string& balance) {
    return task.space->from_json(boost::json::parse(
        R"({"entity":[["mr","ot",8],["nr","ot",4],["unroll_k","ot",2],["simd","ot",1],)"
        R"(["order","ot",")" +
        order + R"("],["pack_b","ot",1],["threads","ot",)" + std::to_string(threads) +
        R"(],["fma","ot",0],["split","ot",")" + split + R"("],["balance","ot",")" + balance +
        R"("]]})"));
  };
  // Refused with the rule's words: one thread, and split rows claimed under cols_outer.
  for (const ConfigEntity& bad :
       {entity(1, "cols_outer", "cols", "steal"), entity(2, "cols_outer", "rows", "steal")}) {
    try {
      wasm_plan(pointwise, bad);
      ADD_FAILURE() << "accepted: " << bad.to_string();
    } catch (const MeasureError& e) {
      EXPECT_NE(std::string(e.what()).find("balance steal needs threads >= 2"), std::string::npos)
          << e.what();
    }
  }
  // A record from before the knob (no "balance") reads as static with its old index, and
  // builds the same module as before; steal builds another one.
  const ConfigEntity stat = entity(2, "rows_outer", "rows", "static");
  const ConfigEntity read = task.space->from_json(json_without_knob(stat, "balance"));
  EXPECT_EQ(read.index(), stat.index());
  EXPECT_EQ(read.get_string("balance"), "static");
  if (wasm_emitter_available()) {
    const std::string old_module = task.build(read).source;
    EXPECT_EQ(task.build(stat).source, old_module);
    EXPECT_NE(task.build(entity(2, "rows_outer", "rows", "steal")).source, old_module);
  }
}

// Steal configs compute every output when the threads run one after another (each its own
// share), and when thread 0 runs alone after every thread's share was put in the claim words
// (thread 0 then claims all of them: its own from the front, the others' from the back). A claim
// word holding units past the kernel's (left by another kernel of a package's memory) is never
// used to write anything. Odd shapes, an im2col conv2d, 2 to 8 threads.
TEST_F(WasmModules, StealConfigsMatchTheReference) {
  const std::vector<Workload> workloads = {
      with(Workload::conv2d(1, 57, 7, 7, 37, 1, 1, 0), kBiasClip),
      with(Workload::dense(29, 13, 21), kBiasHardSwishResidual),
      with(Workload::conv2d(1, 5, 9, 9, 22, 3, 2, 1), kBiasResidualRelu),
      with(Workload::depthwise_conv2d(2, 13, 11, 9, 3, 2, 1), kBiasRelu)};
  uint64_t seed = 80;
  for (const Workload& wl : workloads) {
    const Task task = Task::create(wl, Target::kWasm, threads_limit(8));
    std::mt19937_64 rng(seed++);
    const std::vector<ConfigEntity> configs = sampled_with(task, rng, "balance", "steal", 5);
    EXPECT_EQ(configs.size(), 5u) << wl.key() << ": too few steal configs sampled";
    for (const ConfigEntity& e : configs) {
      check(task, e);
      // Every thread's share (docs/wasm_abi.md: front | back << 16), then run(0) alone.
      const WasmPlan p = wasm_plan(wl, e);
      const int64_t units = wl.op == OpKind::kDepthwiseConv2d ? p.tasks()
                            : p.split_rows                    ? p.row_blocks()
                                                              : p.col_blocks();
      std::string words;
      for (int t = 0; t < p.threads; ++t) {
        const int64_t front = t * units / p.threads, back = (t + 1) * units / p.threads;
        words += (t ? "," : "") + std::to_string(front | back << 16);
      }
      check(task, e, 7, "--claims " + words);
      // Thread 1's word left by another kernel: units 60000 .. 60001, none of this kernel's.
      check(task, e, 7, "--claims 0," + std::to_string(60000 | 60002 << 16), true);
    }
  }
}

// A package's max pool (emit_wasm_max_pool_placed): the depthwise kernel with −∞ padding and
// max, placed at given offsets; every output equals the max over its window's input elements,
// for strides 1, 2 and 3, pads 0 and 1, odd sizes, and configs with and without SIMD and threads.
TEST_F(WasmModules, MaxPoolKernelsMatchAWindowScan) {
  struct Case {
    int64_t n, c, h, w, k, stride, pad;
  };
  const std::vector<Case> cases = {{1, 8, 13, 13, 3, 2, 1},
                                   {2, 5, 12, 12, 2, 2, 0},
                                   {1, 4, 9, 11, 3, 1, 1},
                                   {1, 6, 7, 7, 3, 2, 1},
                                   {1, 3, 11, 10, 3, 3, 1}};
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> value(-50.0f, 50.0f);
  for (const Case& c : cases) {
    const Workload pool = Workload::depthwise_conv2d(c.n, c.c, c.h, c.w, c.k, c.stride, c.pad);
    const Task task = Task::create(pool, Target::kWasm, threads_limit(2));
    std::vector<float> x(static_cast<size_t>(pool.input_size(0)));
    for (float& v : x) v = value(rng);
    const int64_t oh = pool.out_h(), ow = pool.out_w();
    std::vector<float> want;
    for (int64_t p = 0; p < c.n * c.c; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          float best = -INFINITY;
          for (int64_t r = 0; r < c.k; ++r)
            for (int64_t q = 0; q < c.k; ++q) {
              const int64_t ih = i * c.stride - c.pad + r, iw = j * c.stride - c.pad + q;
              if (ih >= 0 && ih < c.h && iw >= 0 && iw < c.w)
                best = std::max(best, x[static_cast<size_t>((p * c.h + ih) * c.w + iw)]);
            }
          want.push_back(best);
        }
    int checked = 0;
    for (const ConfigEntity& e : task.space->sample_distinct(rng, 12)) {
      WasmPlacement placement;
      const int64_t in = 65536, out = (in + pool.input_size(0) * 4 + 256 + 63) / 64 * 64;
      placement.offsets = {in, out};
      placement.scratch_offset = (out + pool.output_size() * 4 + 256 + 63) / 64 * 64;
      placement.memory_pages =
          (placement.scratch_offset + wasm_scratch_bytes(pool, e) + 65535) / 65536;
      placement.shared_memory = e.get_int("threads") > 1;
      const KernelArtifact a = emit_wasm_max_pool_placed(pool, e, placement);
      ASSERT_EQ(a.inputs.size(), 1u);
      ASSERT_EQ(a.wasm.offsets, placement.offsets);
      const std::vector<float> got = run_inputs({x}, a);
      ASSERT_EQ(got.size(), want.size()) << e.to_string();
      int wrong = 0;
      for (size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i] && ++wrong <= 3)
          ADD_FAILURE() << pool.key() << " " << e.to_string() << ": output " << i << " = " << got[i]
                        << ", the window's max is " << want[i];
      ++checked;
    }
    EXPECT_EQ(checked, 12) << pool.key();
  }
  // Anything but a plain depthwise geometry, or a placement of 3 offsets, is refused.
  const Workload pool = Workload::depthwise_conv2d(1, 4, 8, 8, 3, 2, 1);
  const Task task = Task::create(pool, Target::kWasm, threads_limit(2));
  WasmPlacement three;
  three.offsets = {65536, 131072, 196608};
  three.memory_pages = 8;
  three.scratch_offset = 262144;
  EXPECT_THROW(emit_wasm_max_pool_placed(pool, task.default_config(), three), MeasureError);
  EXPECT_THROW(emit_wasm_max_pool_placed(with(pool, kBiasRelu), task.default_config(), three),
               MeasureError);
}

/// Prints GFLOP/s under node (fastest of 8 executions) of a few configs of `wl`, single thread
/// (run(0) only). Not a timed assertion: the machines are shared and noisy.
void print_speeds(WasmModules& fixture, const Workload& wl,
                  const std::vector<std::string>& knob_lists) {
  DeviceLimits limits = threads_limit(1);
  limits.relaxed_simd = true;  // the fma rows; node_command() switches relaxed SIMD on
  const Task task = Task::create(wl, Target::kWasm, limits);
  for (const std::string& knobs : knob_lists) {
    const ConfigEntity e = task.space->from_json(
        boost::json::parse(R"({"entity":[)" + knobs + R"(,["threads","ot",1]]})"));
    const KernelArtifact artifact = task.build(e);
    double seconds = 0;
    const std::vector<float> out = fixture.run(wl, artifact, 11, 8, &seconds);
    ASSERT_EQ(static_cast<int64_t>(out.size()), wl.output_size());
    std::printf("  %-32s %-78s %6.2f GFLOP/s\n", wl.key().c_str(), e.to_string().c_str(),
                wl.flops() / seconds * 1e-9);
  }
}

std::string knobs(int mr, int nr, int unroll, int simd, const char* order, int pack) {
  return "[\"mr\",\"ot\"," + std::to_string(mr) + "],[\"nr\",\"ot\"," + std::to_string(nr) +
         "],[\"unroll_k\",\"ot\"," + std::to_string(unroll) + "],[\"simd\",\"ot\"," +
         std::to_string(simd) + "],[\"order\",\"ot\",\"" + order + "\"],[\"pack_b\",\"ot\"," +
         std::to_string(pack) + "]";
}

TEST_F(WasmModules, Dense512AndResnetSpeedUnderNode) {
  const std::vector<std::string> tiles = {
      knobs(4, 16, 4, 1, "cols_outer", 1), knobs(6, 8, 4, 1, "cols_outer", 1),
      knobs(4, 8, 4, 1, "cols_outer", 1), knobs(4, 24, 2, 1, "cols_outer", 1),
      knobs(8, 8, 4, 1, "rows_outer", 1),
      // relaxed_madd instead of mul + add (where this Node has relaxed SIMD: node_command)
      knobs(4, 16, 4, 1, "cols_outer", 1) + R"(,["fma","ot",1])",
      knobs(6, 8, 4, 1, "cols_outer", 1) + R"(,["fma","ot",1])"};
  std::vector<std::string> dense = tiles;
  dense.insert(dense.begin(), knobs(1, 1, 1, 0, "rows_outer", 0));  // the default
  print_speeds(*this, Workload::dense(512, 512, 512), dense);
  print_speeds(*this, Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2"), tiles);
  print_speeds(*this, Workload::conv2d(1, 128, 28, 28, 128, 3, 1, 1, "C5"), tiles);
  print_speeds(*this, Workload::conv2d(1, 256, 14, 14, 256, 3, 1, 1, "C8"), tiles);
}

std::string dw_knobs(int tile_c, int tile_h, int tile_w, int simd, int unroll_rs) {
  return "[\"tile_c\",\"ot\"," + std::to_string(tile_c) + "],[\"tile_h\",\"ot\"," +
         std::to_string(tile_h) + "],[\"tile_w\",\"ot\"," + std::to_string(tile_w) +
         "],[\"simd\",\"ot\"," + std::to_string(simd) + "],[\"unroll_rs\",\"ot\"," +
         std::to_string(unroll_rs) + "]";
}

// Issue 14: MobileNet-v2's depthwise layers (144 channels at 56×56 stride 1, at 56×56 stride 2
// into 28×28; fused with bias + clip(0, 6) as the model has them), the scalar default against
// SIMD tiles; and what an epilogue costs on ResNet-18's C2 (plain against +bias+residual+relu).
TEST_F(WasmModules, DepthwiseAndEpilogueSpeedUnderNode) {
  const std::vector<std::string> dw = {dw_knobs(1, 1, 1, 0, 0), dw_knobs(1, 2, 8, 1, 1),
                                       dw_knobs(1, 4, 8, 1, 1), dw_knobs(1, 2, 16, 1, 1),
                                       dw_knobs(1, 4, 4, 0, 1)};
  const std::vector<std::string> relu6 = {"bias", "clip(0,6)"};
  print_speeds(*this, with(Workload::depthwise_conv2d(1, 144, 56, 56, 3, 1, 1), relu6), dw);
  print_speeds(*this, with(Workload::depthwise_conv2d(1, 144, 56, 56, 3, 2, 1), relu6), dw);
  const std::vector<std::string> tile = {knobs(4, 16, 4, 1, "cols_outer", 1)};
  const Workload c2 = Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2");
  print_speeds(*this, c2, tile);
  print_speeds(*this, with(c2, {"bias", "residual", "relu"}), tile);
}

}  // namespace
}  // namespace webtune
