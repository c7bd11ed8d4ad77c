/// \file frag_epilogue_test.cpp
/// gles-frag kernels with epilogues (bias, activation, residual: codegen/epilogue.hpp) and on
/// shapes that the blocks do not divide, run on Mesa llvmpipe through headless EGL (the native
/// runtime) and compared with the CPU reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "codegen/reference.hpp"
#include "codegen/task.hpp"
#include "native_agent/isolated_runtime.hpp"

namespace webtune {
namespace {

// One worker process (and GL context) for the whole test binary.
IsolatedRuntime& runtime() {
  static IsolatedRuntime instance;
  return instance;
}

/// Reference samples at every output element when the output has at most kMaxSamples of them,
/// else `reference_samples` at kMaxSamples positions (first and last included).
std::vector<ReferenceSample> all_samples(const Workload& w, uint64_t seed) {
  if (w.output_size() > kMaxSamples) return reference_samples(w, seed, kMaxSamples);
  const std::vector<std::vector<float>> inputs = seeded_inputs(w, seed);
  std::vector<ReferenceSample> samples;
  for (int64_t i = 0; i < w.output_size(); ++i) samples.push_back(reference_at(w, inputs, i));
  return samples;
}

Epilogue epilogue_of(const std::string& suffix) {
  std::vector<std::string> tokens;
  size_t start = 1;  // after the leading '+'
  while (start <= suffix.size()) {
    const size_t end = std::min(suffix.find('+', start), suffix.size());
    tokens.push_back(suffix.substr(start, end - start));
    start = end + 1;
  }
  return Epilogue::parse(tokens);
}

Workload with_epilogue(Workload w, const std::string& suffix) {
  w.epilogue = epilogue_of(suffix);
  return w;
}

/// `fragments` random valid configs of the fragment stage and `vertices` of the vertex stage
/// (as many as the space has when fewer), all distinct, from a fixed seed.
std::vector<ConfigEntity> configs_of_both_stages(const Task& task, int fragments, int vertices,
                                                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t valid = static_cast<int64_t>(task.space->valid_indices().size());
  std::vector<ConfigEntity> out;
  int f = 0, v = 0;
  for (const ConfigEntity& e : task.space->sample_distinct(rng, std::min<int64_t>(valid, 600))) {
    const bool vertex = e.get_string("stage") == "vertex";
    if (vertex ? v >= vertices : f >= fragments) continue;
    (vertex ? v : f) += 1;
    out.push_back(e);
  }
  return out;
}

/// Runs every config of `task` on the native runtime against `samples`; returns the errors by
/// kind and adds a failure naming each config that did not run cleanly.
std::map<MeasureErrorNo, int> run_all(const Task& task, const std::vector<ConfigEntity>& configs,
                                      uint64_t seed, const std::vector<ReferenceSample>& samples) {
  MeasureInput input;
  input.workload = task.workload;
  input.seed = seed;
  input.samples = samples;
  input.options.timeout_s = 30;
  input.options.repeat = 1;
  input.options.number = 1;
  std::map<MeasureErrorNo, int> errors;
  for (const ConfigEntity& entity : configs) {
    input.artifact = task.build(entity);
    EXPECT_EQ(input.artifact.inputs.size(), static_cast<size_t>(task.workload.input_count()));
    const MeasureResult r = runtime().measure(input);
    EXPECT_EQ(r.error, MeasureErrorNo::kNoError)
        << task.workload.key() << " config " << entity.index() << " (" << entity.to_string()
        << "): " << r.message;
    ++errors[r.error];
  }
  return errors;
}

struct EpilogueCase {
  const char* label;  ///< test name: op and epilogue
  Workload workload;
};

void PrintTo(const EpilogueCase& c, std::ostream* os) {
  *os << c.label << " (" << c.workload.key() << ")";
}

// Small shapes: every output element is checked. conv and depthwise have batch 2 so that the
// bias channel of a row is decoded from the row (k = row mod K).
const Workload kDense = Workload::dense(20, 28, 18, "dense");
const Workload kConv = Workload::conv2d(2, 5, 7, 8, 8, 3, 1, 1, "conv");
const Workload kDepthwise = Workload::depthwise_conv2d(2, 8, 9, 8, 3, 1, 1, "dw");

std::vector<EpilogueCase> epilogue_cases() {
  struct Named {
    const char* label;
    const char* suffix;
  };
  const Named epilogues[] = {{"BiasRelu", "+bias+relu"},
                             {"BiasClip06", "+bias+clip(0,6)"},
                             {"BiasResidualBeforeRelu", "+bias+residual+relu"},
                             {"BiasHardSwishResidualAfter", "+bias+hard_swish+residual"},
                             {"BiasSiluResidualAfter", "+bias+silu+residual"},
                             {"BiasSigmoid", "+bias+sigmoid"},
                             {"BiasResidualBeforeHardSigmoid", "+bias+residual+hard_sigmoid"}};
  const std::pair<const char*, Workload> ops[] = {
      {"Dense", kDense}, {"Conv2d", kConv}, {"Depthwise", kDepthwise}};
  // The cases' names outlive the cases; a deque never moves what it holds as it grows.
  static std::deque<std::string> labels;
  std::vector<EpilogueCase> cases;
  for (const auto& [op, w] : ops)
    for (const Named& e : epilogues) {
      labels.push_back(std::string(op) + "_" + e.label);
      cases.push_back({labels.back().c_str(), with_epilogue(w, e.suffix)});
    }
  return cases;
}

class FragEpilogue : public ::testing::TestWithParam<EpilogueCase> {};

/// 14 fragment-stage and 8 vertex-stage configs (random, valid, distinct) plus the default:
/// every output element matches the reference, and the kernel reads every epilogue input.
TEST_P(FragEpilogue, RandomConfigsOfBothStagesMatchTheReference) {
  const Workload& w = GetParam().workload;
  const Task task = Task::create(w, Target::kGlesFrag, runtime().info().limits);
  std::vector<ConfigEntity> configs = configs_of_both_stages(task, 14, 8, 20261124);
  ASSERT_EQ(configs.size(), 22u);
  configs.push_back(task.default_config());
  for (const ConfigEntity& e : configs) {
    const std::string source = task.build(e).source;
    EXPECT_NE(source.find("webtune_epilogue("), std::string::npos);
    for (int i = 2; i < w.input_count(); ++i) {  // ldI's definition, then at least one call
      const std::string loader = "ld" + std::to_string(i) + "(";
      const size_t first = source.find(loader);
      ASSERT_NE(first, std::string::npos) << "no loader for input " << i;
      EXPECT_NE(source.find(loader, first + 1), std::string::npos) << "input " << i << " unread";
    }
  }
  const std::map<MeasureErrorNo, int> errors = run_all(task, configs, 4321, all_samples(w, 4321));
  EXPECT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors.count(MeasureErrorNo::kNoError), 1u);
}

INSTANTIATE_TEST_SUITE_P(Ops, FragEpilogue, ::testing::ValuesIn(epilogue_cases()),
                         [](const auto& info) { return std::string(info.param.label); });

/// The plain kernel's text does not change when the workload has no epilogue: an empty
/// epilogue adds no sampler, loader or function (template_test pins the plain kernels' hashes).
TEST(FragEpilogueText, EmptyEpilogueAddsNothingAndEachInputIsItsOwnSampler) {
  const Task plain = Task::create(kConv, Target::kGlesFrag);
  const std::string source = plain.build(plain.default_config()).source;
  EXPECT_EQ(source.find("in2"), std::string::npos);
  EXPECT_EQ(source.find("webtune_epilogue"), std::string::npos);

  const Workload fused = with_epilogue(kConv, "+bias+residual+relu");
  const Task task = Task::create(fused, Target::kGlesFrag);
  const KernelArtifact a = task.build(task.default_config());
  ASSERT_EQ(a.inputs.size(), 4u);
  EXPECT_EQ(a.inputs[2].shape, fused.input_shape(2));
  EXPECT_EQ(a.inputs[3].shape, fused.input_shape(3));
  EXPECT_NE(a.source.find("uniform highp sampler2D in2;  // bias"), std::string::npos);
  EXPECT_NE(a.source.find("uniform highp sampler2D in3;  // residual"), std::string::npos);
}

/// The residual is packed like the output (one RGBA texel per output column quad) where the
/// quads fit its last axis, and the bias of a dense vec4 block is one texel.
TEST(FragEpilogueText, VecBlocksReadPackedResidualAndBias) {
  const Workload dense = with_epilogue(kDense, "+bias+residual+relu");
  const Task task = Task::create(dense, Target::kGlesFrag);
  const ConfigEntity e = task.space->parse(
      R"({"entity":[["out_rows","ot",2],["out_cols","ot",4],["packing","ot","k"],)"
      R"(["unroll","ot",2],["layout_data","ot","2d"],["layout_weight","ot","2d"],)"
      R"(["layout_out","ot","2d"],["fetch","ot","texel"],["stage","ot","fragment"],)"
      R"(["rows_scale","ot",1],["col_scale","ot",1]]})");
  const KernelArtifact a = task.build(e);
  EXPECT_EQ(a.inputs[2].pack_axis, 0);
  EXPECT_EQ(a.inputs[3].pack_axis, 1);
  // conv with OW = 8: the residual's quads are along OW; with 7 × 7 outputs they are not.
  const Workload conv = with_epilogue(kConv, "+residual");
  const Task conv_task = Task::create(conv, Target::kGlesFrag);
  std::mt19937_64 rng(7);
  int vec_configs = 0;
  for (const ConfigEntity& c : conv_task.space->sample_distinct(rng, 40)) {
    const KernelArtifact k = conv_task.build(c);
    EXPECT_EQ(k.inputs[2].pack_axis, c.get_int("out_cols") == 4 ? 3 : -1);
    vec_configs += c.get_int("out_cols") == 4;
  }
  EXPECT_GT(vec_configs, 0);
}

/// Odd shapes: prime and near-prime axes that no block size divides, 3 input channels, 7 × 7
/// outputs, depthwise channel counts like MobileNet's 24 and 144 scaled down, batch 2. 20 random
/// configs of each (fragment and vertex) never give a wrong answer, plain and fused.
TEST(FragOddShapes, RandomConfigsNeverGiveWrongAnswers) {
  const Workload workloads[] = {
      Workload::dense(97, 61, 53, "dense_97_61_53"),
      Workload::conv2d(1, 3, 9, 9, 7, 3, 1, 0, "conv_7x7_out_c3"),
      Workload::conv2d(2, 3, 13, 13, 5, 3, 2, 1, "conv_7x7_out_n2"),
      Workload::depthwise_conv2d(1, 24, 11, 11, 3, 2, 1, "dw24"),
      Workload::depthwise_conv2d(2, 18, 7, 7, 3, 1, 1, "dw18_n2"),
  };
  for (const Workload& plain : workloads)
    for (const char* suffix : {"", "+bias+hard_swish+residual", "+bias+residual+clip(0,6)"}) {
      const Workload w = *suffix ? with_epilogue(plain, suffix) : plain;
      SCOPED_TRACE(w.key());
      const Task task = Task::create(w, Target::kGlesFrag, runtime().info().limits);
      const std::vector<ConfigEntity> configs = configs_of_both_stages(task, 12, 8, 97);
      ASSERT_EQ(configs.size(), 20u);
      if (w.batch > 1) {  // some blocks straddle two images (out_rows does not divide K or C)
        const int64_t image_rows = w.op == OpKind::kConv2d ? w.out_channels : w.in_channels;
        int straddling = 0;
        for (const ConfigEntity& e : configs)
          straddling += image_rows % (e.get_int("out_rows") * e.get_int("rows_scale")) != 0;
        EXPECT_GE(straddling, 3);
      }
      const std::map<MeasureErrorNo, int> errors = run_all(task, configs, 55, all_samples(w, 55));
      EXPECT_EQ(errors.count(MeasureErrorNo::kWrongAnswer), 0u);
    }
}

/// Blocks of packed convolutions that straddle two images (batch 2, out_rows · rows_scale not
/// dividing K or C): conv2d fetches each row's own data quads; depthwise (C a multiple of 4)
/// decodes each channel quad's image. Every such valid config (up to 24, both stages) matches
/// the reference at every output.
TEST(FragStraddlingBlocks, PackedBlocksAcrossTwoImagesMatchTheReference) {
  const Workload workloads[] = {
      with_epilogue(Workload::depthwise_conv2d(2, 12, 6, 7, 3, 1, 1, "dw12_n2"),
                    "+bias+residual+relu"),
      with_epilogue(Workload::conv2d(2, 6, 6, 6, 6, 3, 1, 1, "conv6_n2"),
                    "+bias+hard_swish+residual"),
  };
  for (const Workload& w : workloads) {
    SCOPED_TRACE(w.key());
    const Task task = Task::create(w, Target::kGlesFrag, runtime().info().limits);
    const int64_t image_rows = w.op == OpKind::kConv2d ? w.out_channels : w.in_channels;
    std::vector<ConfigEntity> configs;
    int vertices = 0;
    std::mt19937_64 rng(3);
    const int64_t valid = static_cast<int64_t>(task.space->valid_indices().size());
    for (const ConfigEntity& e : task.space->sample_distinct(rng, valid)) {
      const int64_t rows = e.get_int("out_rows") * e.get_int("rows_scale");
      if (e.get_string("packing") != "c" || image_rows % rows == 0) continue;
      vertices += e.get_string("stage") == "vertex";
      configs.push_back(e);
      if (configs.size() == 24) break;
    }
    ASSERT_EQ(configs.size(), 24u);
    EXPECT_GE(vertices, 4);
    const std::map<MeasureErrorNo, int> errors = run_all(task, configs, 8, all_samples(w, 8));
    EXPECT_EQ(errors.size(), 1u);
    EXPECT_EQ(errors.count(MeasureErrorNo::kNoError), 1u);
  }
}

}  // namespace
}  // namespace webtune
