/// \file codegen_test.cpp
/// Workloads, seeded inputs, the CPU reference and the sampled check.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

#include "codegen/json_util.hpp"
#include "codegen/measure.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "codegen/workload.hpp"

namespace webtune {
namespace {

TEST(Workload, ResNet18ShapesAndFlopsMatchTheWorkloadTable) {
  // ../shared/workloads.md: C2 = 231.21 MFLOP, C4 = 12.85, D1 = 1.02.
  Workload c2 = Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2");
  EXPECT_EQ(c2.out_h(), 56);
  EXPECT_NEAR(c2.flops() / 1e6, 231.21, 0.01);
  Workload c1 = Workload::conv2d(1, 3, 224, 224, 64, 7, 2, 3, "C1");
  EXPECT_EQ(c1.out_w(), 112);
  EXPECT_NEAR(c1.flops() / 1e6, 236.03, 0.01);
  Workload c4 = Workload::conv2d(1, 64, 56, 56, 128, 1, 2, 0, "C4");
  EXPECT_EQ(c4.output_shape(), (std::vector<int64_t>{1, 128, 28, 28}));
  EXPECT_NEAR(c4.flops() / 1e6, 12.85, 0.01);
  Workload d1 = Workload::dense(1, 1000, 512, "D1");
  EXPECT_NEAR(d1.flops() / 1e6, 1.02, 0.01);
  EXPECT_EQ(d1.weight_shape(), (std::vector<int64_t>{512, 1000}));
  Workload dw = Workload::depthwise_conv2d(1, 32, 14, 14, 3, 2, 1);
  EXPECT_EQ(dw.weight_shape(), (std::vector<int64_t>{32, 1, 3, 3}));
  EXPECT_EQ(dw.output_shape(), (std::vector<int64_t>{1, 32, 7, 7}));
  EXPECT_EQ(dw.reduction_size(), 9);
}

TEST(Workload, JsonRoundTripAndKey) {
  for (const Workload& w :
       {Workload::dense(64, 32, 16, "d"), Workload::conv2d(2, 3, 9, 11, 5, 3, 2, 1, "c"),
        Workload::depthwise_conv2d(1, 8, 7, 7, 3, 1, 1)}) {
    Workload back = Workload::from_json(w.to_json());
    EXPECT_EQ(back.key(), w.key());
    EXPECT_EQ(back.name, w.name);
    EXPECT_EQ(back.flops(), w.flops());
  }
  EXPECT_EQ(Workload::dense(512, 512, 512).key(), "dense_512_512_512");
  EXPECT_EQ(Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1).key(), "conv2d_1_64_56_56_64_3x3_s1_p1");
}

TEST(Workload, BadShapesAreRefusedWithTheirName) {
  EXPECT_THROW(Workload::dense(0, 4, 4), std::invalid_argument);
  try {
    Workload::conv2d(1, 3, 2, 2, 4, 5, 1, 0);
    FAIL() << "kernel larger than input accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the padded input"), std::string::npos);
  }
  EXPECT_THROW(Workload::from_json(boost::json::parse(R"({"op":"dense","M":4})")),
               std::invalid_argument);
  EXPECT_THROW(resolve_workloads("dense:4,4"), std::invalid_argument);
}

/// The message of the std::invalid_argument that `make` throws ("" when it throws none).
template <typename F>
std::string refusal(F make) {
  try {
    make();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Workload, BoundsKeepIndexArithmeticFarFromOverflowAndNameTheField) {
  // Each dimension <= 2^24, pads >= 0, strides >= 1.
  EXPECT_NE(refusal([] {
              Workload::dense(int64_t{1} << 32, 1, int64_t{1} << 32);
            }).find("M = 4294967296 is above the limit of 16777216"),
            std::string::npos);
  EXPECT_NE(refusal([] { Workload::dense(1, kMaxWorkloadDim + 1, 1); }).find("N = 16777217"),
            std::string::npos);
  EXPECT_NO_THROW(Workload::dense(1, kMaxWorkloadDim, 1));
  EXPECT_NE(
      refusal([] { Workload::conv2d(1, 1'000'000'000, 7, 7, 64, 3, 1, 1); }).find("C = 1000000000"),
      std::string::npos);
  EXPECT_NE(refusal([] {
              Workload::conv2d(1, 3, 8, 8, 4, 3, 1, std::numeric_limits<int64_t>::max());
            }).find("pad = 9223372036854775807"),
            std::string::npos);
  EXPECT_NE(
      refusal([] { Workload::conv2d(1, 3, 8, 8, 4, 3, 1, -1); }).find("pad = -1 must be >= 0"),
      std::string::npos);
  EXPECT_NE(refusal([] {
              Workload::depthwise_conv2d(1, 3, 8, 8, 3, 0, 1);
            }).find("stride = 0 must be >= 1"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              Workload::depthwise_conv2d(1, 3, 8, 8, 3, int64_t{1} << 40, 1);
            }).find("stride = 1099511627776"),
            std::string::npos);
  // Each tensor <= 2^28 elements, its size computed without overflow: 2^24 · 2^24 · 2^24 ·
  // 2^24 would wrap int64 to 0.
  const int64_t d = kMaxWorkloadDim;
  const std::string wraps = refusal([d] { Workload::conv2d(d, d, d, d, 1, 1, 1, 0); });
  EXPECT_NE(wraps.find("the data tensor [16777216,16777216,16777216,16777216] has "
                       "79228162514264337593543950336 elements, above the limit of 268435456"),
            std::string::npos)
      << wraps;
  EXPECT_NE(refusal([] { Workload::dense(65536, 65536, 1); }).find("the output tensor"),
            std::string::npos);
  EXPECT_NE(refusal([] { Workload::dense(1, 65536, 8192); }).find("the weight tensor [8192,65536]"),
            std::string::npos);
  // A tensor of exactly 2^28 elements is allowed.
  EXPECT_NO_THROW(Workload::dense(16384, 1, 16384));
  EXPECT_EQ(Workload::conv2d(1, 16384, 128, 128, 1, 1, 1, 0).data_size(), kMaxTensorElements);
  EXPECT_THROW(Workload::conv2d(1, 16384, 128, 129, 1, 1, 1, 0), std::invalid_argument);

  // JSON, where the numbers may arrive as uint64 or doubles.
  EXPECT_NE(refusal([] {
              Workload::from_json(boost::json::parse(R"({"op":"dense","M":18446744073709551615,)"
                                                     R"("N":1,"K":1})"));
            }).find("'M' = 18446744073709551615 is out of the 64-bit integer range"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              Workload::from_json(boost::json::parse(
                  R"({"op":"conv2d","C":3,"H":8,"W":8,"K":4,"R":3,"pad":1e15})"));
            }).find("pad = 1000000000000000"),
            std::string::npos);
}

TEST(Workload, RealModelsStayWithinTheBounds) {
  // ResNet-18 (configs/workloads/resnet18.json), ResNet-50's and VGG-16's largest layers,
  // MobileNet's depthwise layers, dense 4096³ and VGG-16's fc6.
  EXPECT_EQ(resolve_workloads(WEBTUNE_SOURCE_DIR "/configs/workloads/resnet18.json").size(), 12u);
  for (const auto& t : resolve_workloads(WEBTUNE_SOURCE_DIR "/configs/workloads/matmul.json"))
    EXPECT_NO_THROW(t.workload.validate());
  EXPECT_NO_THROW(Workload::dense(4096, 4096, 4096));
  EXPECT_NO_THROW(Workload::dense(1, 4096, 25088));
  EXPECT_NO_THROW(Workload::dense(64, 4096, 25088));
  EXPECT_NO_THROW(Workload::conv2d(1, 3, 224, 224, 64, 7, 2, 3));
  EXPECT_NO_THROW(Workload::conv2d(1, 64, 224, 224, 64, 3, 1, 1));
  EXPECT_NO_THROW(Workload::conv2d(1, 512, 14, 14, 512, 3, 1, 1));
  EXPECT_NO_THROW(Workload::conv2d(1, 1024, 14, 14, 2048, 1, 2, 0));
  EXPECT_NO_THROW(Workload::conv2d(64, 64, 56, 56, 64, 3, 1, 1));  // a batch of 64
  EXPECT_NO_THROW(Workload::depthwise_conv2d(1, 32, 112, 112, 3, 1, 1));
  EXPECT_NO_THROW(Workload::depthwise_conv2d(1, 1024, 7, 7, 3, 1, 1));
}

TEST(JsonFiles, OnlyRegularFilesUpToTheSizeLimitAreRead) {
  auto message = [](const std::string& path, std::uintmax_t max_bytes) -> std::string {
    try {
      json::read_file(path, max_bytes);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message("/dev/zero", json::kMaxFileBytes).find("'/dev/zero' is not a regular file"),
            std::string::npos);
  EXPECT_NE(message("/", json::kMaxFileBytes).find("not a regular file"), std::string::npos);
  EXPECT_NE(message("/no/such/file.json", json::kMaxFileBytes).find("cannot open"),
            std::string::npos);
  const std::string path = WEBTUNE_SOURCE_DIR "/configs/workloads/resnet18.json";
  const auto size = std::filesystem::file_size(path);
  EXPECT_TRUE(json::read_file(path, size).is_object());
  EXPECT_NE(
      message(path, size - 1).find("bytes, more than the limit of " + std::to_string(size - 1)),
      std::string::npos);
  EXPECT_EQ(json::kMaxFileBytes, 64u << 20);
}

TEST(Workload, ResolvesInlineSpecsAndTheResNetFile) {
  auto inline_dense = resolve_workloads("dense:8,16,32");
  ASSERT_EQ(inline_dense.size(), 1u);
  EXPECT_EQ(inline_dense[0].workload.n, 16);
  auto tasks = resolve_workloads(WEBTUNE_SOURCE_DIR "/configs/workloads/resnet18.json");
  ASSERT_EQ(tasks.size(), 12u);
  double total = 0;
  int occurrences = 0;
  for (const auto& t : tasks) {
    total += t.workload.flops() * t.occurrences;
    occurrences += t.occurrences;
  }
  EXPECT_EQ(occurrences, 21);  // 20 conv2d layers (incl. downsample 1x1) and the fc layer
  auto picked = resolve_workloads(WEBTUNE_SOURCE_DIR "/configs/workloads/resnet18.json", "C4,D1");
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[1].workload.op, OpKind::kDense);
  EXPECT_THROW(resolve_workloads(WEBTUNE_SOURCE_DIR "/configs/workloads/resnet18.json", "C99"),
               std::invalid_argument);
}

TEST(SeededRandom, MatchesTheDocumentedSplitmix64) {
  uint64_t state = 0;
  // First output of splitmix64 from state 0 (Vigna's reference implementation).
  EXPECT_EQ(splitmix64_next(state), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64_to_float(0xE220A8397B1DCDAFull),
            static_cast<float>(0xE220A8) / 8388608.0f - 1.0f);
  EXPECT_EQ(splitmix64_to_float(0), -1.0f);
  EXPECT_LT(splitmix64_to_float(~0ull), 1.0f);
  std::vector<float> a = seeded_tensor(42, 0, 1000), b = seeded_tensor(42, 0, 1000);
  EXPECT_EQ(a, b);
  EXPECT_NE(seeded_tensor(42, 1, 1000), a);
  double mean = 0;
  for (float v : a) {
    ASSERT_GE(v, -1.0f);
    ASSERT_LT(v, 1.0f);
    mean += v / a.size();
  }
  EXPECT_NEAR(mean, 0.0, 0.1);
}

TEST(Reference, DenseAndConvAgainstNaiveLoops) {
  Workload d = Workload::dense(3, 5, 4);
  std::vector<float> a = seeded_tensor(7, 0, d.data_size()),
                     b = seeded_tensor(7, 1, d.weight_size());
  std::vector<float> c = reference_output(d, a, b);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += double(a[i * 4 + k]) * b[k * 5 + j];
      EXPECT_FLOAT_EQ(c[i * 5 + j], static_cast<float>(sum));
    }
  // A 1-channel 3x3 conv with pad 1 at the corner only sees the 2x2 in-bounds taps.
  Workload conv = Workload::conv2d(1, 1, 4, 4, 1, 3, 1, 1);
  std::vector<float> x(16, 1.0f), w(9);
  for (int i = 0; i < 9; ++i) w[i] = static_cast<float>(i + 1);
  ReferenceSample corner = reference_at(conv, x, w, 0);
  EXPECT_DOUBLE_EQ(corner.value, 5 + 6 + 8 + 9);
  ReferenceSample centre = reference_at(conv, x, w, 5);
  EXPECT_DOUBLE_EQ(centre.value, 45);
  // Depthwise: channel c only sees input channel c.
  Workload dw = Workload::depthwise_conv2d(1, 2, 3, 3, 3, 1, 1);
  std::vector<float> x2(18, 0.0f), w2(18, 1.0f);
  for (int i = 9; i < 18; ++i) x2[i] = 2.0f;
  EXPECT_DOUBLE_EQ(reference_at(dw, x2, w2, 4).value, 0);
  EXPECT_DOUBLE_EQ(reference_at(dw, x2, w2, 9 + 4).value, 18);
}

TEST(Epilogue, SpecsJsonKeysAndInputsFollowTheOpOrder) {
  auto tasks = resolve_workloads("conv2d:1,3,7,7,5,3,2,1+bias+residual+relu");
  ASSERT_EQ(tasks.size(), 1u);
  const Workload& w = tasks[0].workload;
  EXPECT_TRUE(w.epilogue.bias);
  EXPECT_EQ(w.epilogue.activation, Activation::kRelu);
  EXPECT_EQ(w.epilogue.residual, Residual::kBeforeActivation);
  EXPECT_EQ(w.key(), "conv2d_1_3_7_7_5_3x3_s2_p1+bias+residual+relu");
  EXPECT_EQ(w.input_count(), 4);
  EXPECT_EQ(w.input_name(2), "bias");
  EXPECT_EQ(w.input_shape(2), (std::vector<int64_t>{5}));
  EXPECT_EQ(w.input_name(3), "residual");
  EXPECT_EQ(w.input_shape(3), (std::vector<int64_t>{1, 5, 4, 4}));
  EXPECT_THROW(w.input_shape(4), std::out_of_range);
  EXPECT_EQ(w.flops(), Workload::conv2d(1, 3, 7, 7, 5, 3, 2, 1).flops());  // main op only
  const Workload back = Workload::from_json(w.to_json());
  EXPECT_EQ(back.epilogue, w.epilogue);
  EXPECT_EQ(back.key(), w.key());

  // Residual after the activation, clip bounds, hard-swish; a plain workload keeps its key.
  auto dw = resolve_workloads("depthwise_conv2d:1,24,9,9,3,2,1+bias+clip(0,6)")[0].workload;
  EXPECT_EQ(dw.epilogue.activation, Activation::kClip);
  EXPECT_EQ(dw.epilogue.clip_max, 6.0f);
  EXPECT_EQ(dw.key(), "depthwise_conv2d_1_24_9_9_3x3_s2_p1+bias+clip(0,6)");
  EXPECT_EQ(resolve_workloads("dense:4,6,8+relu6")[0].workload.key(), "dense_4_6_8+clip(0,6)");
  auto hs = resolve_workloads("dense:4,6,8+hard_swish+residual")[0].workload;
  EXPECT_EQ(hs.epilogue.residual, Residual::kAfterActivation);
  EXPECT_EQ(hs.input_name(2), "residual");
  EXPECT_EQ(Workload::dense(4, 6, 8).key(), "dense_4_6_8");
  EXPECT_FALSE(Workload::dense(4, 6, 8).to_json().contains("epilogue"));

  // Bad tails are refused with the accepted forms; bad JSON by its field.
  for (const char* bad :
       {"dense:4,6,8+relu+bias", "dense:4,6,8+gelu", "dense:4,6,8+relu+relu",
        "dense:4,6,8+clip(6,0)", "dense:4,6,8+clip(a,1)", "dense:4,6,8+residual+residual"}) {
    try {
      resolve_workloads(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("epilogue")) << bad;
    }
  }
  boost::json::object o = Workload::dense(4, 6, 8).to_json();
  o["epilogue"] = boost::json::object{{"bias", true}, {"activation", "swish"}};
  EXPECT_THROW(Workload::from_json(o), std::invalid_argument);
  o["epilogue"] = boost::json::object{{"bias", 1}};
  EXPECT_THROW(Workload::from_json(o), std::invalid_argument);
  o["epilogue"] = boost::json::object{{"residual", "before"}};
  EXPECT_THROW(Workload::from_json(o), std::invalid_argument);
  o["epilogue"] = boost::json::object{{"bias", true}, {"color", "red"}};
  EXPECT_THROW(Workload::from_json(o), std::invalid_argument);
}

TEST(Epilogue, TheReferenceAppliesBiasResidualAndActivationInOrder) {
  // dense 1×2×1: acc = [2, -3]; bias [1, 1]; residual [-4, 10].
  Workload w = resolve_workloads("dense:1,2,1+bias+residual+relu")[0].workload;
  const std::vector<std::vector<float>> in = {{1.0f}, {2.0f, -3.0f}, {1.0f, 1.0f}, {-4.0f, 10.0f}};
  EXPECT_DOUBLE_EQ(reference_at(w, in, 0).value, 0.0);  // relu(2 + 1 − 4)
  EXPECT_DOUBLE_EQ(reference_at(w, in, 1).value, 8.0);  // relu(−3 + 1 + 10)
  w.epilogue.residual = Residual::kAfterActivation;     // relu(acc + b) + r
  EXPECT_DOUBLE_EQ(reference_at(w, in, 0).value, -1.0);
  EXPECT_DOUBLE_EQ(reference_at(w, in, 1).value, 10.0);
  w.epilogue.activation = Activation::kHardSwish;  // hs(3) − 4 = 3 − 4; hs(−2) + 10
  EXPECT_DOUBLE_EQ(reference_at(w, in, 0).value, 3.0 - 4.0);
  EXPECT_NEAR(reference_at(w, in, 1).value, -2.0 * 1.0 / 6.0 + 10.0, 1e-12);
  w.epilogue.activation = Activation::kClip;
  w.epilogue.clip_min = 0;
  w.epilogue.clip_max = 2.5f;
  EXPECT_DOUBLE_EQ(reference_at(w, in, 0).value, 2.5 - 4.0);
  // The bias is per output channel of a convolution (K of Y[N,K,OH,OW]).
  Workload conv = resolve_workloads("conv2d:1,1,2,2,2,1,1,0+bias")[0].workload;
  const std::vector<std::vector<float>> cin = {{1, 2, 3, 4}, {1, 10}, {100, 1000}};
  EXPECT_DOUBLE_EQ(reference_at(conv, cin, 3).value, 4 + 100);
  EXPECT_DOUBLE_EQ(reference_at(conv, cin, 4).value, 10 + 1000);
  // Tensors of the wrong count or size are refused by name.
  try {
    reference_at(conv, {{1, 2, 3, 4}, {1, 10}, {100}}, 0);
    ADD_FAILURE() << "a short bias was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("bias has 1 elements; the workload's bias is [2]"));
  }
  EXPECT_THROW(reference_at(conv, {{1, 2, 3, 4}, {1, 10}}, 0), std::invalid_argument);
  // Seeded samples use tensor ids 2 and 3 for bias and residual.
  Workload fused = resolve_workloads("dense:3,5,4+bias+residual")[0].workload;
  const auto samples = reference_samples(fused, 9, 15);
  const auto inputs = seeded_inputs(fused, 9);
  ASSERT_EQ(inputs.size(), 4u);
  EXPECT_EQ(inputs[3], seeded_tensor(9, 3, 15));
  const Workload plain = Workload::dense(3, 5, 4);
  const auto plain_out = reference_output(plain, inputs[0], inputs[1]);
  for (const ReferenceSample& sample : samples) {
    const double expected =
        plain_out[sample.index] + inputs[2][sample.index % 5] + inputs[3][sample.index];
    EXPECT_NEAR(sample.value, expected, 1e-6);
  }
}

TEST(Epilogue, ShaderFunctionsSpellTheSameSteps) {
  Epilogue e = Epilogue::parse({"bias", "residual", "clip(-1,6)"});
  const std::string glsl = glsl_epilogue_functions(e);
  EXPECT_THAT(glsl, ::testing::HasSubstr("float webtune_epilogue(float v, float b, float r)"));
  EXPECT_THAT(glsl, ::testing::HasSubstr("vec4 webtune_epilogue(vec4 v, vec4 b, vec4 r)"));
  EXPECT_THAT(glsl, ::testing::HasSubstr("v = clamp(v, -1.0, 6.0);"));
  const std::string wgsl = wgsl_epilogue_functions(e);
  EXPECT_THAT(wgsl, ::testing::HasSubstr("fn webtune_epilogue4(v_in: vec4<f32>"));
  EXPECT_THAT(wgsl, ::testing::HasSubstr("v = clamp(v, vec4<f32>(-1.0), vec4<f32>(6.0));"));
  EXPECT_LT(glsl.find("v = v + r;"), glsl.find("clamp"));  // residual before the activation
  EXPECT_EQ(glsl_epilogue_functions(Epilogue{}), "");
  EXPECT_EQ(wgsl_epilogue_functions(Epilogue{}), "");
}

TEST(Reference, SamplesCatchAWrongOutputAndPassTheRightOne) {
  Workload d = Workload::dense(16, 16, 64);
  auto samples = reference_samples(d, 3, 32);
  ASSERT_GE(samples.size(), 16u);
  EXPECT_EQ(samples.front().index, 0);
  EXPECT_EQ(samples.back().index, d.output_size() - 1);
  std::vector<float> out =
      reference_output(d, seeded_tensor(3, 0, d.data_size()), seeded_tensor(3, 1, d.weight_size()));
  EXPECT_TRUE(check_samples(out, samples).ok);
  // Dropping one term of the reduction must be caught at the tampered position.
  std::vector<float> a = seeded_tensor(3, 0, d.data_size()),
                     b = seeded_tensor(3, 1, d.weight_size());
  out[samples[1].index] -=
      a[(samples[1].index / 16) * 64 + 63] * b[63 * 16 + samples[1].index % 16];
  CheckResult bad = check_samples(out, samples);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.mismatches, 1);
  EXPECT_NE(bad.message.find("output[" + std::to_string(samples[1].index) + "]"),
            std::string::npos);
  out[samples[1].index] = std::nanf("");
  EXPECT_FALSE(check_samples(out, samples).ok);
}

TEST(Measure, InputAndResultRoundTripThroughJson) {
  MeasureInput in;
  in.workload = Workload::dense(8, 8, 8);
  in.seed = 0xFFFFFFFFFFFFFFF0ull;
  in.samples = reference_samples(in.workload, in.seed, 4);
  in.options.number = 3;
  in.options.min_repeat_ms = 5;
  in.artifact.source = "void main() {}";
  in.artifact.inputs = {TensorLayout{{8, 8}, 1, 2, 8}};
  in.artifact.output = OutputLayout{8, 8, 1, 1, 8, 8};
  MeasureInput back =
      MeasureInput::from_json(boost::json::parse(boost::json::serialize(in.to_json())));
  EXPECT_EQ(back.seed, in.seed);
  EXPECT_EQ(back.options.number, 3);
  EXPECT_EQ(back.samples.size(), in.samples.size());
  EXPECT_EQ(back.samples[1].value, in.samples[1].value);
  EXPECT_EQ(back.artifact.inputs[0].pack_axis, 1);
  MeasureResult r;
  r.costs = {0.5, 1.5};
  EXPECT_DOUBLE_EQ(r.mean_cost(), 1.0);
  EXPECT_DOUBLE_EQ(r.gflops(2e9), 2.0);
  MeasureResult f = MeasureResult::failure(MeasureErrorNo::kWrongAnswer, "bad");
  MeasureResult fb = MeasureResult::from_json(f.to_json());
  EXPECT_EQ(fb.error, MeasureErrorNo::kWrongAnswer);
  EXPECT_EQ(fb.gflops(1e9), 0);
  EXPECT_EQ(error_name(MeasureErrorNo::kRunTimeout), "RUN_TIMEOUT");
  EXPECT_THROW(error_from_int(9), std::invalid_argument);
}

TEST(Measure, OptionsAndInputsFromTheNetworkAreBounded) {
  namespace bj = boost::json;
  auto options_refusal = [](const char* text) {
    return refusal([text] { MeasureOptions::from_json(bj::parse(text)); });
  };
  EXPECT_EQ(options_refusal(R"({"number":1,"repeat":1000,"min_repeat_ms":60000,"timeout_s":3600})"),
            "");
  EXPECT_NE(options_refusal(R"({"number":0})").find("number = 0 must be in [1, 1000000]"),
            std::string::npos);
  // 2^32 + 1 must not narrow to 1.
  EXPECT_NE(options_refusal(R"({"number":4294967297})").find("number = 4294967297"),
            std::string::npos);
  EXPECT_NE(options_refusal(R"({"repeat":0})").find("repeat = 0 must be in [1, 1000]"),
            std::string::npos);
  EXPECT_NE(options_refusal(R"({"repeat":1001})").find("repeat = 1001"), std::string::npos);
  EXPECT_NE(options_refusal(R"({"min_repeat_ms":-1})")
                .find("min_repeat_ms = -1 must be in [0, "
                      "60000]"),
            std::string::npos);
  EXPECT_NE(options_refusal(R"({"timeout_s":0})").find("timeout_s"), std::string::npos);
  EXPECT_NE(options_refusal(R"({"timeout_s":-5})").find("timeout_s"), std::string::npos);
  EXPECT_NE(options_refusal(R"({"timeout_s":3600.5})").find("(0, 3600]"), std::string::npos);
  EXPECT_NE(options_refusal(R"({"timeout_s":1e400})").find("timeout_s"), std::string::npos);

  MeasureInput in;
  in.workload = Workload::dense(8, 8, 8);
  in.samples = reference_samples(in.workload, 1, 4);
  in.artifact.source = "void main() {}";
  in.artifact.inputs = {TensorLayout{{8, 8}, 1, 2, 8}};
  in.artifact.output = OutputLayout{8, 8, 1, 1, 8, 8};
  const bj::object good = in.to_json();
  EXPECT_EQ(refusal([&] { MeasureInput::from_json(good); }), "");
  auto input_refusal = [&](const std::function<void(bj::object&)>& change) {
    bj::object o = good;
    change(o);
    return refusal([&] { MeasureInput::from_json(o); });
  };
  EXPECT_NE(input_refusal([](bj::object& o) {
              o["workload"].as_object()["M"] = 1 << 25;
            }).find("M = 33554432"),
            std::string::npos);
  EXPECT_NE(input_refusal([](bj::object& o) {
              o["options"].as_object()["repeat"] = 0;
            }).find("repeat = 0"),
            std::string::npos);
  EXPECT_NE(input_refusal([](bj::object& o) {
              o["samples"].as_array()[0].as_array()[0] = 64;  // the output has 64 elements
            }).find("sample index 64 is outside the output's 64 elements"),
            std::string::npos);
  EXPECT_NE(input_refusal([](bj::object& o) {
              o["samples"].as_array()[0].as_array()[3] = -1.0;
            }).find("tolerance >= 0"),
            std::string::npos);
  EXPECT_NE(input_refusal([](bj::object& o) {
              bj::array many;
              for (int i = 0; i <= kMaxSamples; ++i) many.push_back(bj::array{0, 0.0, 0.0, 0.0});
              o["samples"] = std::move(many);
            }).find("4097 samples, more than the limit of 4096"),
            std::string::npos);

  // A result's error number is checked before it narrows: 2^32 is not NO_ERROR.
  EXPECT_NE(refusal([] {
              MeasureResult::from_json(bj::parse(R"({"error_no":4294967296,"costs":[1e-3]})"));
            }).find("4294967296"),
            std::string::npos);
}

}  // namespace
}  // namespace webtune
