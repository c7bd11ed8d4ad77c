/// \file model_runtime_test.cpp
/// The JavaScript model runtime (runtime/model.mjs, docs/package.md) in a real headless Chromium:
/// tests/support/model_page.mjs serves a package over HTTP with COOP / COEP, the page imports the
/// runtime, loads the package and runs it on an input file; its output is compared here with the
/// C++ references (max |error| ≤ 1e-3 · max |reference|).
///
/// - ModelRuntime/HandMade.*: packages written here, one tuned kernel of each target (a fused
///   conv2d with bias and ReLU at the template's default config, built by codegen as a tuning
///   trial is) with its weight and bias pre-packed into the artifact's layouts; the wasm package
///   also runs JavaScript op steps (Relu, MaxPool). Broken packages (a kernel the browser does
///   not compile, a context or device lost after load) must reject with an Error that names the
///   step, its node and its kernel file.
/// - ModelRuntime/ZooModel.*: `webtune zoo` models built by `webtune build` (default configs, no
///   records) for webgl2, webgpu and wasm against graph::execute, one run each; skipped with a
///   message while the CLI has no `build`. ../shared/models/<model>.input.f32 against
///   <model>.logits.f32 where present (skipped with a message otherwise). ResNet-18 (minutes a
///   run on SwiftShader's GPU targets) runs on webgpu once; see slow_case().
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "codegen/kernel_artifact.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "codegen/task.hpp"
#include "deploy/glue_kernels.hpp"
#include "deploy/storage.hpp"
#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "support/corpus_cases.hpp"
#include "support/model_reference.hpp"
#include "support/quad_layer_records.hpp"

namespace webtune {
namespace {

namespace fs = std::filesystem;
using testing_support::reference_logits;
namespace bj = boost::json;

/// A command's exit status, stdout and stderr.
struct Outcome {
  int status = -1;
  std::string out, err;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Runs `command` through the shell with stdout and stderr captured in files of `dir`.
Outcome shell(const std::string& command, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const int rc = std::system((command + " > " + quote(out) + " 2> " + quote(err)).c_str());
  Outcome o;
  o.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  o.out = read_text(out);
  o.err = read_text(err);
  return o;
}

void write_floats(const fs::path& path, const std::vector<float>& values) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(float)));
}

std::vector<float> read_floats(const fs::path& path) {
  const std::string bytes = read_text(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

/// max |a − b| over the elements, and max |b|; NaN anywhere counts as infinite error.
std::pair<double, double> max_errors(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return {err, scale};
}

/// The browser run of a package: model_page.mjs's outcome and its output.
struct PageRun {
  Outcome outcome;
  std::vector<float> output;
  bj::object summary;
};

/// A temporary directory, removed at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    path_ = fs::path(::testing::TempDir()) /
            (name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

PageRun run_page(const fs::path& package, const std::vector<float>& input, const fs::path& work,
                 const std::string& target, int runs = 1, bool lose = false) {
  write_floats(work / "input.f32", input);
  std::string command = "node " + quote(WEBTUNE_SOURCE_DIR "/tests/support/model_page.mjs") +
                        " --package " + quote(package) + " --input " + quote(work / "input.f32") +
                        " --output " + quote(work / "output.f32") + " --target " + target +
                        " --runs " + std::to_string(runs);
  if (lose) command += " --lose-after-load";
  if (const char* gl = std::getenv("WEBTUNE_TEST_GL")) command += std::string(" --gl ") + gl;
  PageRun r;
  fs::remove(work / "output.f32");
  r.outcome = shell(command, work);
  if (r.outcome.status == 0) {
    r.output = read_floats(work / "output.f32");
    const std::string line = r.outcome.out.substr(0, r.outcome.out.find('\n'));
    r.summary = bj::parse(line).as_object();
  }
  return r;
}

// ---- hand-made packages: one tuned kernel of each target ----

struct TargetCase {
  std::string name;  ///< the package's target: webgl2, webgpu, wasm
  Target artifact_target;
  int threads = 1;  ///< wasm: the kernel's "threads" knob (> 1: module workers, shared memory)
};

void PrintTo(const TargetCase& c, std::ostream* os) {
  *os << c.name << " (" << c.threads << " thread(s))";
}

std::string case_name(const ::testing::TestParamInfo<TargetCase>& info) {
  const TargetCase& c = info.param;
  return c.threads > 1 ? c.name + "_" + std::to_string(c.threads) + "threads" : c.name;
}

bj::array ints(const std::vector<int64_t>& v) {
  return bj::array(v.begin(), v.end());
}

/// Appends `values` to weights.bin's contents at a 256-byte aligned offset; returns the offset.
int64_t append_weight(std::vector<float>& bin, const std::vector<float>& values) {
  while (bin.size() % 64 != 0) bin.push_back(0.0f);
  const auto offset = static_cast<int64_t>(bin.size() * sizeof(float));
  bin.insert(bin.end(), values.begin(), values.end());
  return offset;
}

/// A package of one kernel step (`artifact` for `workload`, inputs data + weight + bias) between
/// an upload and a download; on wasm two JavaScript op steps follow it (Relu, then MaxPool 2×2
/// stride 2). Writes DIR/manifest.json, weights.bin, kernels/000.json.
void write_kernel_package(const fs::path& dir, const TargetCase& c, const Workload& workload,
                          const KernelArtifact& artifact,
                          const std::vector<std::vector<float>>& inputs) {
  fs::create_directories(dir / "kernels");
  std::ofstream(dir / "kernels" / "000.json") << bj::serialize(artifact.to_json());
  const bool frag = c.artifact_target == Target::kGlesFrag;
  const bool wasm = c.artifact_target == Target::kWasm;
  const std::vector<int64_t> in_shape = workload.input_shape(0);
  const std::vector<int64_t> out_shape = workload.output_shape();
  const int64_t in_size = static_cast<int64_t>(inputs[0].size());
  const int64_t out_size = workload.output_size();
  bj::array slots, values, weights, steps;
  // Value 0: the input; value 1: the kernel's output.
  if (frag) {
    const TensorLayout& l = artifact.inputs[0];
    slots.push_back(bj::object{{"id", 0},
                               {"kind", "texture"},
                               {"width", l.width},
                               {"height", l.height},
                               {"channels", l.channels()}});
    values.push_back(bj::object{
        {"id", 0},
        {"name", "x"},
        {"shape", ints(in_shape)},
        {"storage", bj::object{{"kind", "texture"}, {"slot", 0}, {"layout", l.to_json()}}}});
    const OutputLayout& o = artifact.output;
    bj::array target_slots;
    for (int j = 0; j < o.rows_per_item; ++j) {
      slots.push_back(bj::object{{"id", 1 + j},
                                 {"kind", "texture"},
                                 {"width", o.width},
                                 {"height", o.height},
                                 {"channels", o.channels}});
      target_slots.push_back(1 + j);
    }
    values.push_back(bj::object{
        {"id", 1},
        {"name", "y"},
        {"shape", ints(out_shape)},
        {"storage",
         bj::object{{"kind", "targets"}, {"slots", target_slots}, {"layout", o.to_json()}}}});
  } else {
    const char* kind = wasm ? "array" : "buffer";
    slots.push_back(bj::object{{"id", 0}, {"kind", kind}, {"floats", in_size}});
    slots.push_back(bj::object{{"id", 1}, {"kind", kind}, {"floats", out_size}});
    values.push_back(bj::object{{"id", 0},
                                {"name", "x"},
                                {"shape", ints(in_shape)},
                                {"storage", bj::object{{"kind", kind}, {"slot", 0}}}});
    values.push_back(bj::object{{"id", 1},
                                {"name", "y"},
                                {"shape", ints(out_shape)},
                                {"storage", bj::object{{"kind", kind}, {"slot", 1}}}});
  }
  std::vector<float> bin;
  bj::array kernel_inputs{bj::object{{"value", 0}}};
  for (size_t i = 1; i < inputs.size(); ++i) {
    const TensorLayout& l = artifact.inputs[i];
    const std::vector<float> stored = frag ? l.pack(inputs[i]) : inputs[i];
    bj::object w{{"id", static_cast<int64_t>(i - 1)},
                 {"name", workload.input_name(static_cast<int>(i))},
                 {"offset", append_weight(bin, stored)},
                 {"floats", static_cast<int64_t>(stored.size())}};
    if (frag)
      w["texture"] =
          bj::object{{"width", l.width}, {"height", l.height}, {"channels", l.channels()}};
    weights.push_back(w);
    kernel_inputs.push_back(bj::object{{"weight", static_cast<int64_t>(i - 1)}});
  }
  steps.push_back(bj::object{{"kind", "upload"}, {"value", 0}});
  steps.push_back(bj::object{{"kind", "kernel"},
                             {"role", "task"},
                             {"kernel", "kernels/000.json"},
                             {"node", "/conv"},
                             {"task", "conv2d_1"},
                             {"inputs", kernel_inputs},
                             {"output", 1}});
  int64_t last = 1;
  std::vector<int64_t> last_shape = out_shape;
  if (wasm) {
    // Relu into slot 0's array (the input is dead by then), MaxPool 2×2 / 2 back into slot 1.
    std::vector<int64_t> pooled = {out_shape[0], out_shape[1], out_shape[2] / 2, out_shape[3] / 2};
    values.push_back(bj::object{{"id", 2},
                                {"name", "relu"},
                                {"shape", ints(out_shape)},
                                {"storage", bj::object{{"kind", "array"}, {"slot", 2}}}});
    slots.push_back(bj::object{{"id", 2}, {"kind", "array"}, {"floats", out_size}});
    values.push_back(bj::object{{"id", 3},
                                {"name", "pool"},
                                {"shape", ints(pooled)},
                                {"storage", bj::object{{"kind", "array"}, {"slot", 0}}}});
    steps.push_back(bj::object{{"kind", "kernel"},
                               {"role", "op"},
                               {"kernel", nullptr},
                               {"node", "/relu"},
                               {"task", nullptr},
                               {"op", bj::object{{"type", "Relu"}, {"attributes", bj::object{}}}},
                               {"inputs", bj::array{bj::object{{"value", 1}}}},
                               {"output", 2}});
    steps.push_back(
        bj::object{{"kind", "kernel"},
                   {"role", "op"},
                   {"kernel", nullptr},
                   {"node", "/pool"},
                   {"task", nullptr},
                   {"op", bj::object{{"type", "MaxPool"},
                                     {"attributes", bj::object{{"kernel_shape", bj::array{2, 2}},
                                                               {"strides", bj::array{2, 2}}}}}},
                   {"inputs", bj::array{bj::object{{"value", 2}}}},
                   {"output", 3}});
    last = 3;
    last_shape = pooled;
  }
  steps.push_back(bj::object{{"kind", "download"}, {"value", last}});
  bj::object manifest{
      {"format", "webtune-package"},
      {"version", 1},
      {"model", bj::object{{"name", "one-conv"}, {"file", "one-conv.onnx"}, {"sha256", ""}}},
      {"target", c.name},
      {"artifact_target", std::string(target_name(c.artifact_target))},
      {"device_key", ""},
      {"inputs", bj::array{bj::object{{"name", "x"}, {"shape", ints(in_shape)}, {"value", 0}}}},
      {"outputs",
       bj::array{bj::object{{"name", "y"}, {"shape", ints(last_shape)}, {"value", last}}}},
      {"tasks", bj::array{}},
      {"slots", slots},
      {"values", values},
      {"weights", weights},
      {"steps", steps},
      {"layout_transforms", 0},
      {"estimated_ms", nullptr}};
  std::ofstream(dir / "manifest.json") << bj::serialize(manifest);
  std::ofstream(dir / "weights.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(bin.data()),
             static_cast<std::streamsize>(bin.size() * sizeof(float)));
}

/// relu then 2×2 stride-2 max pooling of an NCHW tensor (the wasm package's op steps).
std::vector<float> relu_pool(const std::vector<float>& y, const std::vector<int64_t>& shape) {
  const int64_t planes = shape[0] * shape[1], h = shape[2], w = shape[3];
  std::vector<float> out;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i + 1 < h; i += 2)
      for (int64_t j = 0; j + 1 < w; j += 2) {
        float m = -INFINITY;
        for (int64_t a = 0; a < 2; ++a)
          for (int64_t b = 0; b < 2; ++b) m = std::max(m, y[(p * h + i + a) * w + j + b]);
        out.push_back(std::max(m, 0.0f));
      }
  return out;
}

class HandMade : public ::testing::TestWithParam<TargetCase> {
 protected:
  /// A 3×3 conv (8 → 16 channels, 12×12, pad 1) with bias and ReLU at the default config.
  static Workload workload() {
    Workload w = Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1, "conv");
    w.epilogue.bias = true;
    w.epilogue.activation = Activation::kRelu;
    return w;
  }
  /// The default config, with the wasm knob "threads" set to `threads`.
  static KernelArtifact artifact(const Workload& w, Target target, int threads = 1) {
    DeviceLimits limits;
    limits.max_threads = 8;
    const Task task = Task::create(w, target, limits);
    ConfigEntity config = task.default_config();
    if (threads > 1) {
      std::vector<int> choices = config.choices();
      const KnobList& knobs = config.knobs();
      for (size_t k = 0; k < knobs.size(); ++k) {
        if (knobs[k].name != "threads") continue;
        for (size_t i = 0; i < knobs[k].candidates.size(); ++i)
          if (std::get<int64_t>(knobs[k].candidates[i]) == threads)
            choices[k] = static_cast<int>(i);
      }
      config = task.space->from_choices(choices);
    }
    KernelArtifact a = task.build(config);
    if (target == Target::kWasm) {
      EXPECT_EQ(a.wasm.threads, threads);
    }
    return a;
  }
};

TEST_P(HandMade, OneKernelPackageMatchesTheReference) {
  const TargetCase& c = GetParam();
  TempDir work("model_runtime_" + c.name);
  const Workload w = workload();
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, 11);
  write_kernel_package(work.path() / "pkg", c, w, artifact(w, c.artifact_target, c.threads),
                       inputs);
  std::vector<float> expected = reference_output(w, inputs);
  if (c.artifact_target == Target::kWasm) expected = relu_pool(expected, w.output_shape());
  const PageRun r = run_page(work.path() / "pkg", inputs[0], work.path(), c.name, 3);
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.err;
  ASSERT_EQ(r.output.size(), expected.size());
  const auto [err, scale] = max_errors(r.output, expected);
  EXPECT_LE(err, 1e-3 * scale) << "max |error| " << err << " over max |reference| " << scale;
  EXPECT_GT(scale, 0.0);
  EXPECT_EQ(r.summary.at("run_ms").as_array().size(), 3u);
  EXPECT_TRUE(r.summary.at("isolated").as_bool()) << "the page is not cross-origin isolated";
}

TEST_P(HandMade, KernelTheBrowserRejectsFailsLoadNamingItsStepNodeAndFile) {
  const TargetCase& c = GetParam();
  TempDir work("model_runtime_bad_" + c.name);
  const Workload w = workload();
  KernelArtifact a = artifact(w, c.artifact_target);
  // Source the browser cannot compile: a GLSL / WGSL syntax error, or bytes that are no module.
  a.source =
      c.artifact_target == Target::kWasm ? "AGFzbQEAAAD/" : a.source + "\n this is no code;\n";
  write_kernel_package(work.path() / "pkg", c, w, a, seeded_inputs(w, 11));
  const PageRun r = run_page(work.path() / "pkg", seeded_inputs(w, 11)[0], work.path(), c.name);
  EXPECT_EQ(r.outcome.status, 1);
  EXPECT_NE(r.outcome.err.find("task step 1 of node '/conv' (kernel kernels/000.json) failed: "
                               "COMPILE_DEVICE"),
            std::string::npos)
      << r.outcome.err;
}

TEST_P(HandMade, DeviceLostAfterLoadRejectsTheRun) {
  const TargetCase& c = GetParam();
  if (c.artifact_target == Target::kWasm) GTEST_SKIP() << "wasm has no device to lose";
  TempDir work("model_runtime_lost_" + c.name);
  const Workload w = workload();
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, 11);
  write_kernel_package(work.path() / "pkg", c, w, artifact(w, c.artifact_target), inputs);
  const PageRun r = run_page(work.path() / "pkg", inputs[0], work.path(), c.name, 1, true);
  EXPECT_EQ(r.outcome.status, 1) << r.outcome.out;
  EXPECT_NE(r.outcome.err.find("lost"), std::string::npos) << r.outcome.err;
  EXPECT_TRUE(r.output.empty());
}

// ---- whole models built by `webtune build` ----

struct ModelCase {
  std::string model;   ///< a zoo model: resnet18, mobilenet_v2
  std::string target;  ///< webgl2, webgpu, wasm
};

void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.model << " on " << c.target;
}

std::string model_case_name(const ::testing::TestParamInfo<ModelCase>& info) {
  return info.param.model + "_" + info.param.target;
}

/// `webtune build` of `model` for `target` into DIR/pkg with default configs (no records). Skips
/// the test when this CLI has no `build` command yet.
fs::path build_package(const fs::path& onnx, const std::string& target, const fs::path& dir) {
  // CLI11 answers an unknown subcommand's --help with the top-level help (status 0): look for
  // `build` among the listed subcommands instead.
  const Outcome help = shell(std::string(WEBTUNE_BINARY) + " --help", dir);
  if (help.out.find("\n  build ") == std::string::npos) return {};
  const fs::path pkg = dir / "pkg";
  const Outcome built = shell(std::string(WEBTUNE_BINARY) + " build --model " + quote(onnx) +
                                  " --target " + target + " -o " + quote(pkg),
                              dir);
  EXPECT_EQ(built.status, 0) << built.err << built.out;
  return built.status == 0 ? pkg : fs::path{};
}

/// Why a ResNet-18 case is left out, or "" to run it. Measured on SwiftShader (2 busy cores,
/// default configs), one ResNet-18 run takes about 2 minutes on webgl2 and 1 on webgpu
/// (MobileNet-v2: 14 s and 6 s; wasm: 6 s and 1 s): ResNet-18 runs once per GPU target at most
/// (webgpu against the shared export's logits; webgl2 only with WEBTUNE_SLOW_BROWSER_TESTS=1),
/// MobileNet-v2 covers both GPU targets fully.
std::string slow_case(const ModelCase& c, bool shared_export) {
  if (c.model != "resnet18" || c.target == "wasm") return {};
  if (std::getenv("WEBTUNE_SLOW_BROWSER_TESTS") != nullptr) return {};
  if (c.target == "webgpu" && shared_export) return {};
  return "ResNet-18 on SwiftShader's " + c.target +
         " takes minutes a run; set WEBTUNE_SLOW_BROWSER_TESTS=1 to run it (MobileNet-v2 covers " +
         c.target + ")";
}

class ZooModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ZooModel, PackageMatchesTheReferenceExecutor) {
  const ModelCase& c = GetParam();
  if (const std::string why = slow_case(c, false); !why.empty()) GTEST_SKIP() << why;
  TempDir work("model_runtime_zoo_" + c.model + "_" + c.target);
  const fs::path onnx = work.path() / (c.model + ".onnx");
  const Outcome zoo =
      shell(std::string(WEBTUNE_BINARY) + " zoo " + c.model + " -o " + quote(onnx), work.path());
  ASSERT_EQ(zoo.status, 0) << zoo.err;
  const fs::path pkg = build_package(onnx, c.target, work.path());
  if (pkg.empty() && !HasFailure()) GTEST_SKIP() << "this webtune has no `build` command yet";
  ASSERT_FALSE(pkg.empty());
  const std::vector<float> input = seeded_tensor(5, 0, 3 * 224 * 224);
  const std::vector<float> expected = reference_logits(onnx, input);
  const PageRun r = run_page(pkg, input, work.path(), c.target);
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.err;
  ASSERT_EQ(r.output.size(), expected.size());
  const auto [err, scale] = max_errors(r.output, expected);
  EXPECT_LE(err, 1e-3 * scale) << "max |error| " << err << " over max |logit| " << scale;
  std::cerr << c.model << " on " << c.target << ": load "
            << r.summary.at("load_ms").to_number<double>() << " ms, one run "
            << r.summary.at("median_ms").to_number<double>() << " ms\n";
}

/// ../shared/models/<model>.onnx on <model>.input.f32 against <model>.logits.f32.
TEST_P(ZooModel, SharedExportMatchesItsLogits) {
  const ModelCase& c = GetParam();
  const fs::path shared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
  const fs::path onnx = shared / (c.model + ".onnx");
  const fs::path input_file = shared / (c.model + ".input.f32");
  const fs::path logits_file = shared / (c.model + ".logits.f32");
  if (const std::string why = slow_case(c, true); !why.empty()) GTEST_SKIP() << why;
  if (!fs::exists(onnx) || !fs::exists(input_file) || !fs::exists(logits_file))
    GTEST_SKIP() << "../shared/models/" << c.model << ".{onnx,input.f32,logits.f32} not found";
  TempDir work("model_runtime_shared_" + c.model + "_" + c.target);
  const fs::path pkg = build_package(onnx, c.target, work.path());
  if (pkg.empty() && !HasFailure()) GTEST_SKIP() << "this webtune has no `build` command yet";
  ASSERT_FALSE(pkg.empty());
  const std::vector<float> expected = read_floats(logits_file);
  const PageRun r = run_page(pkg, read_floats(input_file), work.path(), c.target);
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.err;
  ASSERT_EQ(r.output.size(), expected.size());
  const auto [err, scale] = max_errors(r.output, expected);
  EXPECT_LE(err, 1e-3 * scale) << "max |error| " << err << " over max |logit| " << scale;
}

/// The zoo's MobileNet-v2 on webgl2 with records whose convolutions chain through quad layers
/// (OutputLayout::quad_layers: array textures written by one kernel's draw buffers and read by
/// the next as a sampler2DArray), in headless Chromium against the reference executor.
TEST(QuadLayersPage, MobileNetWithQuadLayerRecordsMatchesTheReferenceExecutor) {
  TempDir work("model_runtime_quad_layers");
  const fs::path onnx = work.path() / "mobilenet_v2.onnx";
  const Outcome zoo =
      shell(std::string(WEBTUNE_BINARY) + " zoo mobilenet_v2 -o " + quote(onnx), work.path());
  ASSERT_EQ(zoo.status, 0) << zoo.err;
  const fs::path records = work.path() / "records.db";
  ASSERT_EQ(
      testing_support::write_quad_layer_records(onnx.string(), records.string(), "webgl2:test", 16),
      30);
  const fs::path pkg = work.path() / "pkg";
  const Outcome built =
      shell(std::string(WEBTUNE_BINARY) + " build --model " + quote(onnx) + " --db " +
                quote(records) + " --target webgl2 --device-key webgl2:test -o " + quote(pkg),
            work.path());
  ASSERT_EQ(built.status, 0) << built.err << built.out;
  // Only the residuals' relayouts and the pool's are left (62 without quad layers).
  const size_t at = built.out.find("layout transforms: ");
  ASSERT_NE(at, std::string::npos) << built.out;
  EXPECT_LE(std::stoi(built.out.substr(at + 19)), 11) << built.out;
  const std::vector<float> input = seeded_tensor(5, 0, 3 * 224 * 224);
  const std::vector<float> expected = reference_logits(onnx, input);
  const PageRun r = run_page(pkg, input, work.path(), "webgl2");
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.err;
  ASSERT_EQ(r.output.size(), expected.size());
  const auto [err, scale] = max_errors(r.output, expected);
  EXPECT_LE(err, 1e-3 * scale) << "max |error| " << err << " over max |logit| " << scale;
}

INSTANTIATE_TEST_SUITE_P(
    ModelRuntime, ZooModel,
    ::testing::Values(ModelCase{"resnet18", "webgl2"}, ModelCase{"resnet18", "webgpu"},
                      ModelCase{"resnet18", "wasm"}, ModelCase{"mobilenet_v2", "webgl2"},
                      ModelCase{"mobilenet_v2", "webgpu"}, ModelCase{"mobilenet_v2", "wasm"}),
    model_case_name);

/// The corpus of real exports at 64×64 (tests/data/corpus/targets.txt) on the web targets.
class CorpusTargets : public ::testing::TestWithParam<testing_support::CorpusTargetCase> {};

TEST_P(CorpusTargets, PackageMatchesTheReferenceExecutor) {
  const testing_support::CorpusTargetCase& c = GetParam();
  TempDir work("model_runtime_corpus_" + testing_support::corpus_case_name(c));
  const fs::path onnx = work.path() / "model.onnx";
  testing_support::restore_corpus_model(WEBTUNE_CORPUS_DIR, c.file, onnx);
  if (!c.run) {
    // Refused by the build, or by the page when the package loads or runs.
    const fs::path pkg = work.path() / "pkg";
    const Outcome built = shell(std::string(WEBTUNE_BINARY) + " build --model " + quote(onnx) +
                                    " --target " + c.target + " -o " + quote(pkg),
                                work.path());
    bool ran = false;
    if (built.status == 0) {
      graph::ImportReport report;
      const graph::Graph g = graph::import_onnx_file(onnx.string(), {}, &report);
      const std::vector<float> input(static_cast<size_t>(g.tensor(g.inputs.at(0)).elements()),
                                     0.5f);
      ran = run_page(pkg, input, work.path(), c.target).outcome.status == 0;
    }
    EXPECT_FALSE(ran) << c.file << " now builds and runs on " << c.target
                      << " (listed as skipped:" << c.reason
                      << "): list it as run in tests/data/corpus/targets.txt";
    return;
  }
  const fs::path pkg = build_package(onnx, c.target, work.path());
  ASSERT_FALSE(pkg.empty());
  graph::ImportReport report;
  const graph::Graph g = graph::import_onnx_file(onnx.string(), {}, &report);
  std::vector<float> input = seeded_tensor(7, 0, g.tensor(g.inputs.at(0)).elements());
  for (float& v : input) v = 0.5f * (v + 1.0f);  // [0, 1), as the export's torch.rand
  const std::vector<float> expected = reference_logits(onnx, input);
  const PageRun r = run_page(pkg, input, work.path(), c.target);
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.err;
  ASSERT_EQ(r.output.size(), expected.size());
  const auto [err, scale] = max_errors(r.output, expected);
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(err, 1e-3 * scale) << "max |error| " << err << " over max |output| " << scale;
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, CorpusTargets,
    ::testing::ValuesIn(testing_support::corpus_target_cases(
        fs::path(WEBTUNE_SOURCE_DIR) / "tests" / "data" / "corpus" / "targets.txt",
        {"webgl2", "webgpu", "wasm"})),
    [](const auto& info) { return testing_support::corpus_case_name(info.param); });

/// A package of three kernel steps on a GPU target: the fused conv (a tuned kernel at its
/// default config), on webgl2 a relayout of its render targets into a plain R32F texture
/// (deploy::relayout_kernel), then MaxPool 2×2 / 2 as deploy::op_kernel builds it. Exercises
/// several kernels sharing one context / device, a relayout binding every render target of its
/// source, op kernels and a texture download.
void write_three_step_package(const fs::path& dir, const TargetCase& c, const Workload& workload,
                              const KernelArtifact& conv,
                              const std::vector<std::vector<float>>& inputs) {
  const bool frag = c.artifact_target == Target::kGlesFrag;
  const DeviceLimits limits;
  const std::vector<int64_t> y_shape = workload.output_shape();
  const std::vector<int64_t> p_shape = {y_shape[0], y_shape[1], y_shape[2] / 2, y_shape[3] / 2};
  graph::Graph g;
  g.tensors["y"] = graph::Tensor{"y", graph::DataType::kFloat32, y_shape, {}, {}};
  g.tensors["p"] = graph::Tensor{"p", graph::DataType::kFloat32, p_shape, {}, {}};
  g.inputs = {"y"};
  g.outputs = {"p"};
  graph::Node pool;
  pool.name = "/pool";
  pool.op_type = "MaxPool";
  pool.inputs = {"y"};
  pool.outputs = {"p"};
  pool.attributes["kernel_shape"] = std::vector<int64_t>{2, 2};
  pool.attributes["strides"] = std::vector<int64_t>{2, 2};
  g.nodes.push_back(pool);
  std::vector<KernelArtifact> kernels = {conv};
  fs::create_directories(dir / "kernels");
  bj::array slots, values, weights, steps;
  std::vector<float> bin;
  bj::array conv_inputs{bj::object{{"value", 0}}};
  for (size_t i = 1; i < inputs.size(); ++i) {
    const TensorLayout& l = conv.inputs[i];
    const std::vector<float> stored = frag ? l.pack(inputs[i]) : inputs[i];
    bj::object w{{"id", static_cast<int64_t>(i - 1)},
                 {"name", workload.input_name(static_cast<int>(i))},
                 {"offset", append_weight(bin, stored)},
                 {"floats", static_cast<int64_t>(stored.size())}};
    if (frag)
      w["texture"] =
          bj::object{{"width", l.width}, {"height", l.height}, {"channels", l.channels()}};
    weights.push_back(w);
    conv_inputs.push_back(bj::object{{"weight", static_cast<int64_t>(i - 1)}});
  }
  auto texture_slot = [&](int64_t w, int64_t h, int ch) {
    const auto id = static_cast<int64_t>(slots.size());
    slots.push_back(
        bj::object{{"id", id}, {"kind", "texture"}, {"width", w}, {"height", h}, {"channels", ch}});
    return id;
  };
  auto buffer_slot = [&](int64_t floats) {
    const auto id = static_cast<int64_t>(slots.size());
    slots.push_back(bj::object{{"id", id}, {"kind", "buffer"}, {"floats", floats}});
    return id;
  };
  auto value = [&](const char* name, const std::vector<int64_t>& shape, bj::object storage) {
    const auto id = static_cast<int64_t>(values.size());
    values.push_back(bj::object{
        {"id", id}, {"name", name}, {"shape", ints(shape)}, {"storage", std::move(storage)}});
    return id;
  };
  auto kernel_step = [&](const char* role, const char* node, int64_t file, bj::array in,
                         int64_t out) {
    char name[32];
    std::snprintf(name, sizeof name, "kernels/%03d.json", static_cast<int>(file));
    steps.push_back(bj::object{{"kind", "kernel"},
                               {"role", role},
                               {"kernel", name},
                               {"node", node},
                               {"task", nullptr},
                               {"inputs", std::move(in)},
                               {"output", out}});
  };
  int64_t x, y, p;
  steps.push_back(bj::object{{"kind", "upload"}, {"value", 0}});
  if (frag) {
    const TensorLayout& l = conv.inputs[0];
    x = value("x", workload.input_shape(0),
              bj::object{{"kind", "texture"},
                         {"slot", texture_slot(l.width, l.height, l.channels())},
                         {"layout", l.to_json()}});
    const OutputLayout& o = conv.output;
    bj::array target_slots;
    deploy::Storage targets;
    targets.kind = deploy::Storage::Kind::kTargets;
    targets.targets = o;
    for (int j = 0; j < o.rows_per_item; ++j) {
      target_slots.push_back(texture_slot(o.width, o.height, o.channels));
      targets.slots.push_back(static_cast<int>(target_slots.back().as_int64()));
    }
    y = value("y", y_shape,
              bj::object{{"kind", "targets"}, {"slots", target_slots}, {"layout", o.to_json()}});
    kernel_step("task", "/conv", 0, conv_inputs, y);
    const TensorLayout plain = deploy::plain_texture_layout(y_shape, limits);
    kernels.push_back(deploy::relayout_kernel(y_shape, targets, plain, limits));
    const int64_t y_plain = value("y.plain", y_shape,
                                  bj::object{{"kind", "texture"},
                                             {"slot", texture_slot(plain.width, plain.height, 1)},
                                             {"layout", plain.to_json()}});
    kernel_step("relayout", "/pool", 1, bj::array{bj::object{{"value", y}}}, y_plain);
    kernels.push_back(deploy::op_kernel(Target::kGlesFrag, g, g.nodes[0], limits));
    const TensorLayout p_plain = deploy::plain_texture_layout(p_shape, limits);
    p = value("p", p_shape,
              bj::object{{"kind", "texture"},
                         {"slot", texture_slot(p_plain.width, p_plain.height, 1)},
                         {"layout", p_plain.to_json()}});
    kernel_step("op", "/pool", 2, bj::array{bj::object{{"value", y_plain}}}, p);
  } else {
    x = value("x", workload.input_shape(0),
              bj::object{{"kind", "buffer"}, {"slot", buffer_slot(workload.input_size(0))}});
    y = value("y", y_shape,
              bj::object{{"kind", "buffer"}, {"slot", buffer_slot(workload.output_size())}});
    kernel_step("task", "/conv", 0, conv_inputs, y);
    kernels.push_back(deploy::op_kernel(c.artifact_target, g, g.nodes[0], limits));
    // The pooled value reuses the input's slot (dead by then), as the planner's pool would.
    p = value("p", p_shape, bj::object{{"kind", "buffer"}, {"slot", 0}});
    kernel_step("op", "/pool", 1, bj::array{bj::object{{"value", y}}}, p);
  }
  (void)x;
  steps.push_back(bj::object{{"kind", "download"}, {"value", p}});
  for (size_t k = 0; k < kernels.size(); ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "%03d.json", static_cast<int>(k));
    std::ofstream(dir / "kernels" / name) << bj::serialize(kernels[k].to_json());
  }
  bj::object manifest{
      {"format", "webtune-package"},
      {"version", 1},
      {"model", bj::object{{"name", "conv-pool"}, {"file", "conv-pool.onnx"}, {"sha256", ""}}},
      {"target", c.name},
      {"artifact_target", std::string(target_name(c.artifact_target))},
      {"device_key", ""},
      {"inputs", bj::array{bj::object{
                     {"name", "x"}, {"shape", ints(workload.input_shape(0))}, {"value", 0}}}},
      {"outputs", bj::array{bj::object{{"name", "p"}, {"shape", ints(p_shape)}, {"value", p}}}},
      {"tasks", bj::array{}},
      {"slots", slots},
      {"values", values},
      {"weights", weights},
      {"steps", steps},
      {"layout_transforms", frag ? 1 : 0},
      {"estimated_ms", nullptr}};
  std::ofstream(dir / "manifest.json") << bj::serialize(manifest);
  std::ofstream(dir / "weights.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(bin.data()),
             static_cast<std::streamsize>(bin.size() * sizeof(float)));
}

TEST_P(HandMade, ConvRelayoutAndPoolKernelsMatchTheReference) {
  const TargetCase& c = GetParam();
  if (c.artifact_target == Target::kWasm)
    GTEST_SKIP() << "wasm runs its pools in JavaScript (OneKernelPackage covers them)";
  TempDir work("model_runtime_steps_" + c.name);
  const Workload w = workload();
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, 13);
  write_three_step_package(work.path() / "pkg", c, w, artifact(w, c.artifact_target), inputs);
  const std::vector<float> expected = relu_pool(reference_output(w, inputs), w.output_shape());
  const PageRun r = run_page(work.path() / "pkg", inputs[0], work.path(), c.name, 2);
  ASSERT_EQ(r.outcome.status, 0) << r.outcome.err;
  ASSERT_EQ(r.output.size(), expected.size());
  const auto [err, scale] = max_errors(r.output, expected);
  EXPECT_LE(err, 1e-3 * scale) << "max |error| " << err << " over max |reference| " << scale;
  EXPECT_GT(scale, 0.0);
}

INSTANTIATE_TEST_SUITE_P(ModelRuntime, HandMade,
                         ::testing::Values(TargetCase{"webgl2", Target::kGlesFrag},
                                           TargetCase{"webgpu", Target::kWebgpu},
                                           TargetCase{"wasm", Target::kWasm},
                                           TargetCase{"wasm", Target::kWasm, 2}),
                         case_name);

}  // namespace
}  // namespace webtune
