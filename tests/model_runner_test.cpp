/// \file model_runner_test.cpp
/// The native model runner (native_agent/model_runner.hpp) on Mesa llvmpipe through headless
/// EGL: packages built by hand here from codegen's templates (a conv2d with bias and ReLU and a
/// dense with bias, default configs, gles-compute and gles-frag) against codegen's CPU
/// reference; the texture round trip (upload then download of a packed, wrapped layout) against
/// the input bit for bit; errors that name the step (a corrupted kernel, a missing file, an
/// input of the wrong size); and the zoo's ResNet-18 and MobileNet-v2 built by the planner
/// (deploy/planner.hpp, default configs) for both targets against the graph's reference
/// executor, and ../shared/models' real exports against their logits where present.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "codegen/task.hpp"
#include "deploy/package.hpp"
#include "deploy/planner.hpp"
#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/zoo.hpp"
#include "native_agent/egl_context.hpp"
#include "native_agent/model_runner.hpp"
#include "support/corpus_cases.hpp"
#include "support/model_reference.hpp"

namespace webtune {
namespace {

namespace fs = std::filesystem;
using deploy::PackageSlot;
using deploy::PackageStep;
using deploy::StepInput;
using deploy::Storage;
using ::testing::HasSubstr;

/// A package written field by field, as the planner would: slots, values, weights (256-byte
/// aligned in weights.bin), kernel files and steps.
class PackageBuilder {
 public:
  explicit PackageBuilder(Target target) {
    m_.model = {"test", "test.onnx", std::string(64, '0')};
    m_.target = std::string(target_name(target));
    m_.artifact_target = target;
  }

  int buffer_slot(int64_t floats) {
    PackageSlot slot;
    slot.id = static_cast<int>(m_.slots.size());
    slot.kind = PackageSlot::Kind::kBuffer;
    slot.floats = floats;
    m_.slots.push_back(slot);
    return slot.id;
  }
  int texture_slot(int64_t width, int64_t height, int channels) {
    PackageSlot slot;
    slot.id = static_cast<int>(m_.slots.size());
    slot.kind = PackageSlot::Kind::kTexture;
    slot.width = width;
    slot.height = height;
    slot.channels = channels;
    m_.slots.push_back(slot);
    return slot.id;
  }

  int value(const std::string& name, std::vector<int64_t> shape, Storage storage) {
    deploy::PackageValue v;
    v.id = static_cast<int>(m_.values.size());
    v.name = name;
    v.shape = std::move(shape);
    v.storage = std::move(storage);
    m_.values.push_back(v);
    return v.id;
  }
  /// A value in a new buffer slot (compute).
  int buffer_value(const std::string& name, const std::vector<int64_t>& shape) {
    Storage s;
    s.kind = Storage::Kind::kBuffer;
    s.slots = {buffer_slot(elements(shape))};
    return value(name, shape, s);
  }
  /// A value in a new texture slot placed as `layout` (frag).
  int texture_value(const std::string& name, const TensorLayout& layout) {
    Storage s;
    s.kind = Storage::Kind::kTexture;
    s.texture = layout;
    s.slots = {texture_slot(layout.width, layout.height, layout.channels())};
    return value(name, layout.shape, s);
  }
  /// A value in new render target slots placed as `layout` (frag kernels' outputs).
  int targets_value(const std::string& name, const std::vector<int64_t>& shape,
                    const OutputLayout& layout) {
    Storage s;
    s.kind = Storage::Kind::kTargets;
    s.targets = layout;
    for (int j = 0; j < layout.rows_per_item; ++j)
      s.slots.push_back(texture_slot(layout.width, layout.height, layout.channels));
    return value(name, shape, s);
  }
  int alias(const std::string& name, std::vector<int64_t> shape, int of) {
    Storage s;
    s.kind = Storage::Kind::kAlias;
    s.alias_of = of;
    return value(name, std::move(shape), s);
  }

  /// A weight as stored: `data` already in its device layout; `texture` on frag targets.
  int weight(const std::string& name, const std::vector<float>& data,
             std::optional<deploy::PackageWeight::Texture> texture = std::nullopt) {
    deploy::PackageWeight w;
    w.id = static_cast<int>(m_.weights.size());
    w.name = name;
    w.offset = static_cast<int64_t>(weights_.size()) * 4;
    w.floats = static_cast<int64_t>(data.size());
    w.texture = texture;
    weights_.insert(weights_.end(), data.begin(), data.end());
    weights_.resize((weights_.size() + 63) / 64 * 64, 0.0f);  // 256-byte alignment
    m_.weights.push_back(w);
    return w.id;
  }
  /// A weight packed into `layout` (a texture on frag targets, a buffer on compute).
  int packed_weight(const std::string& name, const TensorLayout& layout,
                    const std::vector<float>& logical) {
    std::vector<float> packed = layout.pack(logical);
    if (m_.artifact_target == Target::kGlesFrag)
      return weight(name, packed,
                    deploy::PackageWeight::Texture{layout.width, layout.height, layout.channels()});
    packed.resize(static_cast<size_t>(layout.packed_elements() * layout.channels()));
    return weight(name, packed);
  }

  std::string kernel(const KernelArtifact& artifact) {
    char name[32];
    std::snprintf(name, sizeof name, "kernels/%03zu.json", kernels_.size());
    kernels_.emplace_back(name, artifact);
    return name;
  }

  void upload(int value) { data_step(PackageStep::Kind::kUpload, value); }
  void download(int value) { data_step(PackageStep::Kind::kDownload, value); }
  void alias_step(int value) { data_step(PackageStep::Kind::kAlias, value); }
  void kernel_step(const std::string& kernel, const std::string& node,
                   std::vector<StepInput> inputs, int output) {
    PackageStep s;
    s.kind = PackageStep::Kind::kKernel;
    s.role = PackageStep::Role::kTask;
    s.kernel = kernel;
    s.node = node;
    s.inputs = std::move(inputs);
    s.output = output;
    m_.steps.push_back(s);
  }
  void io(const std::string& in_name, int in, const std::string& out_name, int out) {
    m_.inputs = {{in_name, m_.values[static_cast<size_t>(in)].shape, in}};
    m_.outputs = {{out_name, m_.values[static_cast<size_t>(out)].shape, out}};
  }

  /// Writes the package into a fresh directory under the test temp dir; returns its path.
  std::string write(const std::string& name) const {
    const fs::path dir = fs::path(testing::TempDir()) / ("model_runner_" + name);
    fs::remove_all(dir);
    fs::create_directories(dir / "kernels");
    std::ofstream(dir / "manifest.json") << boost::json::serialize(m_.to_json());
    std::ofstream weights(dir / "weights.bin", std::ios::binary);
    weights.write(reinterpret_cast<const char*>(weights_.data()),
                  static_cast<std::streamsize>(weights_.size() * sizeof(float)));
    for (const auto& [file, artifact] : kernels_)
      std::ofstream(dir / file) << boost::json::serialize(artifact.to_json());
    return dir.string();
  }

  static int64_t elements(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }

 private:
  void data_step(PackageStep::Kind kind, int value) {
    PackageStep s;
    s.kind = kind;
    s.value = value;
    m_.steps.push_back(s);
  }

  deploy::Manifest m_;
  std::vector<float> weights_;
  std::vector<std::pair<std::string, KernelArtifact>> kernels_;
};

/// max |a − b| ≤ 1e-3 · max |b| (issue 16's bound), with a readable failure.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  double max_error = 0, max_value = 0;
  size_t worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(double{actual[i]} - double{expected[i]});
    if (!(error <= max_error)) max_error = error, worst = i;  // NaN counts as the worst
    max_value = std::max(max_value, std::fabs(double{expected[i]}));
  }
  EXPECT_LE(max_error, 1e-3 * max_value)
      << "worst at " << worst << ": " << actual[worst] << " vs " << expected[worst];
  EXPECT_GT(max_value, 0.0);
}

Workload conv_workload() {
  Workload w = Workload::conv2d(1, 8, 10, 10, 16, 3, 1, 1, "conv");
  w.epilogue.bias = true;
  w.epilogue.activation = Activation::kRelu;
  return w;
}

Workload dense_workload() {
  Workload w = Workload::dense(1, 10, 1600, "fc");
  w.epilogue.bias = true;
  return w;
}

KernelArtifact default_artifact(const Workload& workload, Target target, const GlDeviceInfo& info) {
  Task task = Task::create(workload, target, info.limits);
  return task.build(task.default_config());
}

/// A fresh headless context for a runner (llvmpipe here).
std::unique_ptr<EglContext> context() {
  return EglContext::create();
}

class ModelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto probe = EglContext::create();
    info_ = probe->info();
  }
  GlDeviceInfo info_;

  /// gles-compute: input → conv (bias, ReLU) → alias [1, 1600] → dense (bias) → output, the
  /// data and weights seeded; `conv_source` replaces the conv kernel's source when not empty.
  std::string compute_chain(const std::string& name, std::vector<float>* input,
                            std::vector<float>* expected, const std::string& conv_source = "") {
    const Workload conv = conv_workload(), dense = dense_workload();
    KernelArtifact conv_kernel = default_artifact(conv, Target::kGlesCompute, info_);
    const KernelArtifact dense_kernel = default_artifact(dense, Target::kGlesCompute, info_);
    if (!conv_source.empty()) conv_kernel.source = conv_source;
    // Compute kernels read plain row-major data: a vec4 packing along the last axis is the same
    // memory when that axis is a multiple of 4.
    const TensorLayout& a = dense_kernel.inputs[0];
    EXPECT_TRUE(a.pack_axis < 0 || (a.pack_axis == 1 && dense.k % 4 == 0)) << a.pack_axis;

    const auto conv_inputs = seeded_inputs(conv, 11);
    const auto dense_inputs = seeded_inputs(dense, 12);
    PackageBuilder p(Target::kGlesCompute);
    const int in = p.buffer_value("input", conv.data_shape());
    const int conv_out = p.buffer_value("conv_out", conv.output_shape());
    const int flat = p.alias("flat", {1, 1600}, conv_out);
    const int out = p.buffer_value("logits", dense.output_shape());
    const int conv_w = p.packed_weight("conv.weight", conv_kernel.inputs[1], conv_inputs[1]);
    const int conv_b = p.packed_weight("conv.bias", conv_kernel.inputs[2], conv_inputs[2]);
    const int fc_w = p.packed_weight("fc.weight", dense_kernel.inputs[1], dense_inputs[1]);
    const int fc_b = p.packed_weight("fc.bias", dense_kernel.inputs[2], dense_inputs[2]);
    p.upload(in);
    p.kernel_step(p.kernel(conv_kernel), "/conv/Conv",
                  {StepInput::value(in), StepInput::weight(conv_w), StepInput::weight(conv_b)},
                  conv_out);
    p.alias_step(flat);
    p.kernel_step(p.kernel(dense_kernel), "/fc/Gemm",
                  {StepInput::value(flat), StepInput::weight(fc_w), StepInput::weight(fc_b)}, out);
    p.download(out);
    p.io("input", in, "logits", out);

    *input = conv_inputs[0];
    const std::vector<float> hidden = reference_output(conv, conv_inputs);
    *expected = reference_output(dense, {hidden, dense_inputs[1], dense_inputs[2]});
    return p.write(name);
  }

  /// gles-frag: input (texture) → one kernel → output (render targets), seeded.
  std::string frag_single(const std::string& name, const Workload& workload,
                          std::vector<float>* input, std::vector<float>* expected) {
    const KernelArtifact kernel = default_artifact(workload, Target::kGlesFrag, info_);
    const auto inputs = seeded_inputs(workload, 21);
    PackageBuilder p(Target::kGlesFrag);
    const int in = p.texture_value("input", kernel.inputs[0]);
    const int out = p.targets_value("output", workload.output_shape(), kernel.output);
    std::vector<StepInput> bindings = {StepInput::value(in)};
    for (int i = 1; i < workload.input_count(); ++i)
      bindings.push_back(StepInput::weight(p.packed_weight(
          workload.input_name(i), kernel.inputs[static_cast<size_t>(i)], inputs[i])));
    p.upload(in);
    p.kernel_step(p.kernel(kernel), "/" + workload.name, bindings, out);
    p.download(out);
    p.io("input", in, "output", out);
    *input = inputs[0];
    *expected = reference_output(workload, inputs);
    return p.write(name);
  }
};

TEST_F(ModelRunnerTest, ComputeConvThenDenseThroughAnAliasMatchesTheReference) {
  std::vector<float> input, expected;
  const std::string dir = compute_chain("compute_chain", &input, &expected);
  ModelRunner runner(dir, context());
  EXPECT_EQ(runner.kernels(), 2);
  EXPECT_EQ(runner.kernel_steps(), 2);
  EXPECT_EQ(runner.input_elements(), 800);
  const std::vector<float> first = runner.run(input);
  expect_close(first, expected);
  // Slots, weights and programs are reused: a second run gives the same floats.
  EXPECT_EQ(runner.run(input), first);
  // A different input gives a different output (nothing is cached from the first).
  std::vector<float> other = input;
  for (float& v : other) v = -v;
  EXPECT_NE(runner.run(other), first);
}

TEST_F(ModelRunnerTest, AProfiledRunTimesEveryStepButTheAliasAndStillComputes) {
  std::vector<float> input, expected;
  const std::string dir = compute_chain("profiled", &input, &expected);
  ModelRunner runner(dir, context());
  const std::vector<float> output = runner.run(input);
  const ModelRunner::RunProfile profile = runner.profile(input);
  const auto& steps = runner.manifest().steps;
  std::vector<int> expected_steps;
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].kind != deploy::PackageStep::Kind::kAlias)
      expected_steps.push_back(static_cast<int>(i));
  std::vector<int> got_steps;
  double sum = 0;
  for (const auto& t : profile.steps) {
    got_steps.push_back(t.step);
    EXPECT_GE(t.ms, 0) << "step " << t.step;
    sum += t.ms;
  }
  EXPECT_EQ(got_steps, expected_steps);  // upload, 2 kernels, download; the alias is skipped
  EXPECT_GT(profile.total_ms, 0);
  // Host timing per step is inside the run's host time; GPU timestamps are inside it too, as
  // the run waits for the GPU at its read-back.
  EXPECT_LE(sum, profile.total_ms * 1.05 + 0.05);
  // The profiled run computed the same model.
  EXPECT_EQ(runner.run(input), output);
}

TEST_F(ModelRunnerTest, FragConvWithBiasAndReluMatchesTheReference) {
  std::vector<float> input, expected;
  const std::string dir = frag_single("frag_conv", conv_workload(), &input, &expected);
  ModelRunner runner(dir, context());
  expect_close(runner.run(input), expected);
}

TEST_F(ModelRunnerTest, FragDenseMatchesTheReference) {
  std::vector<float> input, expected;
  const std::string dir = frag_single("frag_dense", dense_workload(), &input, &expected);
  ModelRunner runner(dir, context());
  expect_close(runner.run(input), expected);
}

TEST_F(ModelRunnerTest, ATextureDownloadIsTheInverseOfPack) {
  // RGBA packed along the channel axis (6 → 2 texels of 4, zero-padded), wrapped at width 7.
  TensorLayout layout;
  layout.shape = {1, 6, 3, 5};
  layout.pack_axis = 1;
  layout.width = 7;
  layout.height = (layout.packed_elements() + 6) / 7;
  PackageBuilder p(Target::kGlesFrag);
  const int v = p.texture_value("x", layout);
  p.upload(v);
  p.download(v);
  p.io("x", v, "x", v);
  ModelRunner runner(p.write("round_trip"), context());
  const std::vector<float> input = seeded_tensor(5, 0, 90);
  EXPECT_EQ(runner.run(input), input);
}

TEST_F(ModelRunnerTest, ACorruptedKernelNamesItsStepNodeAndFile) {
  std::vector<float> input, expected;
  const std::string dir =
      compute_chain("corrupt", &input, &expected, "#version 310 es\nvoid main() { oops; }\n");
  try {
    ModelRunner runner(dir, context());
    FAIL() << "a kernel that does not compile was loaded";
  } catch (const ModelRunError& e) {
    EXPECT_EQ(e.step(), 1);
    EXPECT_THAT(e.what(), HasSubstr("step 1"));
    EXPECT_THAT(e.what(), HasSubstr("kernels/000.json"));
    EXPECT_THAT(e.what(), HasSubstr("/conv/Conv"));
    EXPECT_THAT(e.what(), HasSubstr("failed to compile"));
  }
}

TEST_F(ModelRunnerTest, ABindingThatDoesNotFitItsKernelIsRefusedAtLoad) {
  std::vector<float> input, expected;
  const std::string dir = compute_chain("bad_binding", &input, &expected);
  // The dense step loses its bias: two buffers bound for a kernel of three inputs.
  const fs::path manifest = fs::path(dir) / "manifest.json";
  boost::json::value json = boost::json::parse(
      std::string(std::istreambuf_iterator<char>(std::ifstream(manifest).rdbuf()), {}));
  json.at("steps").at(3).at("inputs").as_array().pop_back();
  std::ofstream(manifest, std::ios::trunc) << boost::json::serialize(json);
  try {
    ModelRunner runner(dir, context());
    FAIL() << "a step with too few inputs was loaded";
  } catch (const ModelRunError& e) {
    EXPECT_EQ(e.step(), 3);
    EXPECT_THAT(e.what(), HasSubstr("binds 2 buffers; the kernel has 3 inputs"));
    EXPECT_THAT(e.what(), HasSubstr("/fc/Gemm"));
  }
}

TEST_F(ModelRunnerTest, AnInputOfTheWrongSizeIsRefused) {
  std::vector<float> input, expected;
  ModelRunner runner(compute_chain("wrong_input", &input, &expected), context());
  input.pop_back();
  try {
    runner.run(input);
    FAIL() << "a short input ran";
  } catch (const ModelRunError& e) {
    EXPECT_THAT(e.what(), HasSubstr("799 floats"));
    EXPECT_THAT(e.what(), HasSubstr("800"));
  }
}

TEST_F(ModelRunnerTest, MissingFilesAreNamed) {
  std::vector<float> input, expected;
  const std::string dir = compute_chain("missing", &input, &expected);
  fs::remove(fs::path(dir) / "kernels" / "001.json");
  try {
    ModelRunner runner(dir, context());
    FAIL() << "a package without its kernel loaded";
  } catch (const ModelRunError& e) {
    EXPECT_EQ(e.step(), 3);
    EXPECT_THAT(e.what(), HasSubstr("kernels/001.json"));
    EXPECT_THAT(e.what(), HasSubstr("/fc/Gemm"));
  }
  fs::remove(fs::path(dir) / "weights.bin");
  EXPECT_THROW(
      {
        try {
          ModelRunner runner(dir, context());
        } catch (const ModelRunError& e) {
          EXPECT_THAT(e.what(), HasSubstr("weights.bin"));
          throw;
        }
      },
      ModelRunError);
  fs::remove(fs::path(dir) / "manifest.json");
  EXPECT_THROW(
      {
        try {
          ModelRunner runner(dir, context());
        } catch (const ModelRunError& e) {
          EXPECT_THAT(e.what(), HasSubstr("manifest.json"));
          throw;
        }
      },
      ModelRunError);
}

// ---- whole models: the planner's packages ----

struct ModelCase {
  std::string model, target;
};

/// Failure messages and ctest's listing name the case ("resnet18 on gles-compute").
void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.model << " on " << c.target;
}

std::string case_name(const testing::TestParamInfo<ModelCase>& info) {
  std::string name = info.param.model + "_" + info.param.target;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

/// Builds `onnx_path` for `target` with default configs (no records) into a fresh directory.
std::string build_model(const std::string& onnx_path, const std::string& target,
                        const std::string& name) {
  deploy::BuildOptions options;
  options.model_path = onnx_path;
  options.target = target;
  options.out_dir = (fs::path(testing::TempDir()) / ("model_runner_pkg_" + name)).string();
  fs::remove_all(options.out_dir);
  deploy::build_package(options);
  return options.out_dir;
}

/// The reference executor's logits for `input` on the ONNX model `bytes`.
std::vector<float> reference_logits(const std::string& bytes, const std::vector<float>& input) {
  graph::ImportReport report;
  const graph::Graph graph = graph::import_onnx_bytes(bytes, "model", {}, &report);
  graph::ExecuteOptions options;
  options.opset = report.opset;
  graph::ValueMap inputs;
  inputs[graph.inputs.at(0)] = graph::Value::floats({1, 3, 224, 224}, input);
  const graph::ValueMap outputs = graph::execute(graph, inputs, options);
  return outputs.begin()->second.data;
}

class ZooModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ZooModelTest, MatchesTheReferenceExecutor) {
  const ModelCase& c = GetParam();
  const std::string bytes = graph::zoo_model(c.model);
  const fs::path onnx = fs::path(testing::TempDir()) / ("model_runner_" + c.model + ".onnx");
  std::ofstream(onnx, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string dir = build_model(onnx.string(), c.target, case_name({c, 0}));
  ModelRunner runner(dir, context());
  ASSERT_EQ(runner.input_elements(), 3 * 224 * 224);
  // Seeded data in [-1, 1), as an image normalised per channel would be.
  const std::vector<float> input = seeded_tensor(7, 0, runner.input_elements());
  const std::vector<float> output = runner.run(input);
  EXPECT_EQ(output.size(), 1000u);
  expect_close(output, reference_logits(bytes, input));
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooModelTest,
                         ::testing::Values(ModelCase{"resnet18", "gles-compute"},
                                           ModelCase{"resnet18", "gles-frag"},
                                           ModelCase{"mobilenet_v2", "gles-compute"},
                                           ModelCase{"mobilenet_v2", "gles-frag"}),
                         case_name);

/// ../shared/models/<model>.onnx on `<model>.input.f32` against `<model>.logits.f32` (issue 16
/// item 6: onnxruntime's logits of the real PyTorch exports).
class SharedModelTest : public ::testing::TestWithParam<ModelCase> {};

std::vector<float> read_f32(const fs::path& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  std::vector<float> values(static_cast<size_t>(file.tellg()) / sizeof(float));
  file.seekg(0);
  file.read(reinterpret_cast<char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  return values;
}

TEST_P(SharedModelTest, MatchesOnnxRuntimesLogits) {
  const ModelCase& c = GetParam();
  const fs::path models = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
  const fs::path onnx = models / (c.model + ".onnx");
  const fs::path input_file = models / (c.model + ".input.f32");
  const fs::path logits_file = models / (c.model + ".logits.f32");
  for (const fs::path& path : {onnx, input_file, logits_file}) {
    if (!fs::exists(path)) GTEST_SKIP() << path.string() << " is absent (../shared/models)";
  }
  ModelRunner runner(build_model(onnx.string(), c.target, "shared_" + case_name({c, 0})),
                     context());
  const std::vector<float> input = read_f32(input_file);
  ASSERT_EQ(static_cast<int64_t>(input.size()), runner.input_elements());
  expect_close(runner.run(input), read_f32(logits_file));
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedModelTest,
                         ::testing::Values(ModelCase{"resnet18", "gles-compute"},
                                           ModelCase{"resnet18", "gles-frag"},
                                           ModelCase{"mobilenet_v2", "gles-compute"},
                                           ModelCase{"mobilenet_v2", "gles-frag"}),
                         case_name);

// ---- the corpus of real exports (tests/data/corpus/targets.txt) ----

class CorpusTargets : public ::testing::TestWithParam<testing_support::CorpusTargetCase> {};

TEST_P(CorpusTargets, BuildsAndMatchesTheReferenceExecutor) {
  const testing_support::CorpusTargetCase& c = GetParam();
  const fs::path onnx =
      fs::path(testing::TempDir()) / ("corpus_" + testing_support::corpus_case_name(c) + ".onnx");
  testing_support::restore_corpus_model(WEBTUNE_CORPUS_DIR, c.file, onnx);
  const std::string name = "corpus_" + testing_support::corpus_case_name(c);
  if (!c.run) {
    // Refused by the build, or by the device when the package loads (a limit it lacks).
    EXPECT_ANY_THROW({
      ModelRunner runner(build_model(onnx.string(), c.target, name), context());
      runner.run(std::vector<float>(static_cast<size_t>(runner.input_elements()), 0.5f));
    }) << c.file
       << " now builds and runs on " << c.target << " (listed as skipped:" << c.reason
       << "): list it as run in tests/data/corpus/targets.txt";
    return;
  }
  ModelRunner runner(build_model(onnx.string(), c.target, name), context());
  // Seeded data in [0, 1), as the export's torch.rand input.
  std::vector<float> input = seeded_tensor(7, 0, runner.input_elements());
  for (float& v : input) v = 0.5f * (v + 1.0f);
  expect_close(runner.run(input), testing_support::reference_logits(onnx, input));
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, CorpusTargets,
    ::testing::ValuesIn(testing_support::corpus_target_cases(
        fs::path(WEBTUNE_SOURCE_DIR) / "tests" / "data" / "corpus" / "targets.txt",
        {"gles-compute", "gles-frag"})),
    [](const auto& info) { return testing_support::corpus_case_name(info.param); });

// ---- `webtune run` through the binary ----

struct Process {
  int status = -1;
  std::string out, err;
};

/// Runs `webtune ARGS` with stdout and stderr in files; returns its exit status and both.
Process run_webtune(const std::string& args, const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir());
  const fs::path out = dir / (name + ".out"), err = dir / (name + ".err");
  const std::string command =
      std::string(WEBTUNE_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  Process p;
  const int raw = std::system(command.c_str());
  p.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  auto slurp = [](const fs::path& path) {
    std::ifstream file(path);
    return std::string(std::istreambuf_iterator<char>(file), {});
  };
  p.out = slurp(out);
  p.err = slurp(err);
  return p;
}

TEST(WebtuneRun, PrintsLatencyTopKAndTheReferenceCheckAndRefusesAShortInput) {
  const fs::path dir = fs::path(testing::TempDir());
  const fs::path onnx = dir / "model_runner_cli_mobilenet_v2.onnx";
  const std::string bytes = graph::zoo_model("mobilenet_v2");
  std::ofstream(onnx, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::string package = build_model(onnx.string(), "gles-frag", "cli_mobilenet_v2");
  const std::vector<float> input = seeded_tensor(3, 0, 3 * 224 * 224);
  const fs::path input_file = dir / "model_runner_cli.input.f32";
  std::ofstream(input_file, std::ios::binary)
      .write(reinterpret_cast<const char*>(input.data()),
             static_cast<std::streamsize>(input.size() * sizeof(float)));
  const fs::path output_file = dir / "model_runner_cli.output.f32";

  const Process ok = run_webtune("run --model " + package + " --input " + input_file.string() +
                                     " --output " + output_file.string() +
                                     " --runs 1 --warmup 0 --top 3 --reference " + onnx.string(),
                                 "cli_ok");
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("latency   median"));
  EXPECT_THAT(ok.out, HasSubstr("top-3"));
  EXPECT_THAT(ok.out, HasSubstr(": ok"));
  EXPECT_EQ(ok.out.find("[info]"), std::string::npos) << "logs belong on stderr";
  // The output file holds the logits, the reference's to 1e-3 of the largest.
  std::ifstream file(output_file, std::ios::binary);
  std::vector<float> written(1000);
  file.read(reinterpret_cast<char*>(written.data()), 4000);
  EXPECT_EQ(file.gcount(), 4000);
  expect_close(written, reference_logits(bytes, input));

  const fs::path short_file = dir / "model_runner_cli.short.f32";
  std::ofstream(short_file, std::ios::binary).write("abcd", 4);
  const Process bad =
      run_webtune("run --model " + package + " --input " + short_file.string(), "cli_short");
  EXPECT_EQ(bad.status, 1);
  EXPECT_THAT(bad.err, HasSubstr("has 4 bytes; the model needs exactly 602112"));
}

}  // namespace
}  // namespace webtune
