/// \file deploy_glue_test.cpp
/// The glue kernels of a model package (deploy/glue_kernels.hpp) on llvmpipe through headless
/// EGL (tests/support/gl_harness.hpp):
///  - op kernels, gles-frag and gles-compute: each operator as a one-node graph with random
///    inputs, odd shapes (7×7, 3 channels, primes), pads, strides, ceil_mode, broadcasting,
///    against graph/executor.hpp's `execute` (max abs error ≤ 1e-5 × max |reference|);
///  - relayouts: random shapes and pairs of layouts (plain, packed along each axis, wrapped
///    widths, padding rows; render targets with rows_per_item 1–4 and channels 1 / 4): the
///    destination texels equal `to.pack(logical)` exactly;
///  - headless Chromium (tests/run_glue_kernels.mjs under node; skipped without node or
///    Chromium): every operator's WGSL in WebGPU and its gles-frag kernel in WebGL2 (ANGLE's
///    shader validator, SwiftShader) against the same reference, and random relayouts in WebGL2
///    exactly; every operator's WGSL is also checked for the documented bindings;
///  - errors: unsupported operators, attributes and targets name the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <boost/json.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "deploy/glue_kernels.hpp"
#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "support/gl_harness.hpp"

namespace webtune::deploy {
namespace {

using graph::Attribute;
using graph::Graph;
using graph::Node;
using testing::HasSubstr;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_name(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s.empty() ? "scalar" : s;
}

// ---------------------------------------------------------------------------------------------
// One-node graphs
// ---------------------------------------------------------------------------------------------

struct In {
  std::string name;
  std::vector<int64_t> shape;
  bool constant = false;
  float lo = -1.0f, hi = 1.0f;  ///< uniform range of the random values
};

struct OpCase {
  std::string name;
  std::string op;
  std::vector<In> inputs;  ///< name "" = an omitted optional input
  std::map<std::string, Attribute> attributes;
  std::vector<int64_t> out_shape;
  int64_t opset = 13;
  Epilogue epilogue = {};
};

struct Built {
  Graph graph;
  graph::ValueMap feeds;
  std::map<std::string, std::vector<float>> data;  ///< every input's values, by tensor name
};

Built build(const OpCase& c, uint32_t seed) {
  Built b;
  std::mt19937 gen(seed);
  Node node;
  node.name = "/test/" + c.name;
  node.op_type = c.op;
  node.attributes = c.attributes;
  node.epilogue = c.epilogue;
  for (const In& in : c.inputs) {
    node.inputs.push_back(in.name);
    if (in.name.empty()) continue;
    std::uniform_real_distribution<float> dist(in.lo, in.hi);
    std::vector<float> values(static_cast<size_t>(product(in.shape)));
    for (float& v : values) v = dist(gen);
    graph::Tensor t;
    t.name = in.name;
    t.shape = in.shape;
    if (in.constant) {
      t.float_data = values;
    } else {
      b.graph.inputs.push_back(in.name);
      b.feeds[in.name] = graph::Value::floats(in.shape, values);
    }
    b.data[in.name] = values;
    b.graph.tensors[in.name] = t;
  }
  graph::Tensor out;
  out.name = "y";
  out.shape = c.out_shape;
  b.graph.tensors["y"] = out;
  node.outputs = {"y"};
  b.graph.nodes.push_back(node);
  b.graph.outputs = {"y"};
  b.graph.name = c.name;
  return b;
}

using Attrs = std::map<std::string, Attribute>;
using Ints = std::vector<int64_t>;

std::vector<OpCase> op_cases() {
  std::vector<OpCase> cases;
  const Ints x7 = {1, 3, 7, 7};
  // Pools: pads, strides, ceil_mode, dilations, 1-D, auto_pad, asymmetric pads.
  cases.push_back(
      {"MaxPool3x3s2p1",
       "MaxPool",
       {{"x", x7}},
       Attrs{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
       {1, 3, 4, 4}});
  cases.push_back(
      {"MaxPool2x2s2Ceil",
       "MaxPool",
       {{"x", x7}},
       Attrs{{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
       {1, 3, 4, 4}});
  cases.push_back({"MaxPool3x3s1p1Batch2",
                   "MaxPool",
                   {{"x", {2, 5, 11, 13}}},
                   Attrs{{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}},
                   {2, 5, 11, 13}});
  cases.push_back({"MaxPool1D",
                   "MaxPool",
                   {{"x", {1, 3, 17}}},
                   Attrs{{"kernel_shape", Ints{3}}, {"strides", Ints{2}}},
                   {1, 3, 8}});
  cases.push_back({"MaxPoolDilated",
                   "MaxPool",
                   {{"x", {1, 2, 9, 9}}},
                   Attrs{{"kernel_shape", Ints{3, 3}}, {"dilations", Ints{2, 2}}},
                   {1, 2, 5, 5}});
  cases.push_back(
      {"AveragePoolExcludePad",
       "AveragePool",
       {{"x", x7}},
       Attrs{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
       {1, 3, 4, 4}});
  cases.push_back({"AveragePoolIncludePad",
                   "AveragePool",
                   {{"x", x7}},
                   Attrs{{"kernel_shape", Ints{3, 3}},
                         {"strides", Ints{2, 2}},
                         {"pads", Ints{1, 1, 1, 1}},
                         {"count_include_pad", int64_t{1}}},
                   {1, 3, 4, 4}});
  cases.push_back(
      {"AveragePoolCeil",
       "AveragePool",
       {{"x", {1, 3, 8, 8}}},
       Attrs{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
       {1, 3, 4, 4}});
  cases.push_back({"AveragePoolSameUpper",
                   "AveragePool",
                   {{"x", x7}},
                   Attrs{{"kernel_shape", Ints{3, 3}},
                         {"strides", Ints{2, 2}},
                         {"auto_pad", std::string("SAME_UPPER")}},
                   {1, 3, 4, 4}});
  cases.push_back({"AveragePoolAsymmetricPads",
                   "AveragePool",
                   {{"x", {1, 3, 7, 11}}},
                   Attrs{{"kernel_shape", Ints{3, 3}},
                         {"strides", Ints{2, 2}},
                         {"pads", Ints{0, 1, 2, 0}},
                         {"count_include_pad", int64_t{1}}},
                   {1, 3, 4, 5}});
  cases.push_back({"GlobalAveragePool", "GlobalAveragePool", {{"x", x7}}, {}, {1, 3, 1, 1}});
  cases.push_back(
      {"GlobalAveragePoolOdd", "GlobalAveragePool", {{"x", {2, 5, 13, 11}}}, {}, {2, 5, 1, 1}});
  // Elementwise.
  const In wide{"x", {1, 3, 7, 7}, false, -5.0f, 5.0f};
  cases.push_back({"Relu", "Relu", {wide}, {}, x7});
  cases.push_back({"Sigmoid", "Sigmoid", {wide}, {}, x7});
  cases.push_back(
      {"HardSigmoid", "HardSigmoid", {wide}, Attrs{{"alpha", 0.3f}, {"beta", 0.4f}}, x7});
  cases.push_back({"HardSwish", "HardSwish", {wide}, {}, x7});
  cases.push_back({"ClipInputs",
                   "Clip",
                   {wide, {"lo", {}, true, -1.0f, -0.5f}, {"hi", {}, true, 0.5f, 1.0f}},
                   {},
                   x7,
                   11});
  cases.push_back({"ClipOnlyMax", "Clip", {wide, {""}, {"hi", {}, true, 0.5f, 1.0f}}, {}, x7, 11});
  cases.push_back({"ClipAttributes", "Clip", {wide}, Attrs{{"min", -0.25f}, {"max", 2.5f}}, x7, 6});
  cases.push_back({"AddSame", "Add", {{"a", x7}, {"b", x7}}, {}, x7});
  cases.push_back({"AddChannels", "Add", {{"a", x7}, {"b", {3, 1, 1}, true}}, {}, x7});
  cases.push_back(
      {"MulBothStretch", "Mul", {{"a", {2, 3, 1, 5}}, {"b", {1, 1, 4, 5}}}, {}, {2, 3, 4, 5}});
  cases.push_back({"SubRankUp", "Sub", {{"a", {5}}, {"b", {2, 3, 5}}}, {}, {2, 3, 5}});
  cases.push_back({"DivScalar", "Div", {{"a", x7}, {"b", {}, false, 0.5f, 2.0f}}, {}, x7});
  // Shape-changing and normalising operators.
  cases.push_back({"ConcatChannels",
                   "Concat",
                   {{"a", {1, 3, 7, 7}}, {"b", {1, 5, 7, 7}}, {"c", {1, 2, 7, 7}}},
                   Attrs{{"axis", int64_t{1}}},
                   {1, 10, 7, 7}});
  cases.push_back({"ConcatLastAxis",
                   "Concat",
                   {{"a", {2, 3}}, {"b", {2, 5}}},
                   Attrs{{"axis", int64_t{-1}}},
                   {2, 8}});
  cases.push_back({"SoftmaxLast", "Softmax", {{"x", {3, 17}, false, -4.0f, 4.0f}}, {}, {3, 17}});
  cases.push_back(
      {"SoftmaxClassifier", "Softmax", {{"x", {1, 1000}, false, -8.0f, 8.0f}}, {}, {1, 1000}});
  cases.push_back(
      {"SoftmaxMiddleAxis", "Softmax", {{"x", {2, 5, 3}}}, Attrs{{"axis", int64_t{1}}}, {2, 5, 3}});
  cases.push_back({"SoftmaxOpset11",
                   "Softmax",
                   {{"x", {2, 5, 3}}},
                   Attrs{{"axis", int64_t{1}}},
                   {2, 5, 3},
                   11});
  cases.push_back({"TransposeNHWC",
                   "Transpose",
                   {{"x", {1, 3, 7, 5}}},
                   Attrs{{"perm", Ints{0, 2, 3, 1}}},
                   {1, 7, 5, 3}});
  cases.push_back({"TransposeDefault", "Transpose", {{"x", {2, 3, 5}}}, {}, {5, 3, 2}});
  cases.push_back({"BatchNormalization",
                   "BatchNormalization",
                   {{"x", x7},
                    {"scale", {3}, true},
                    {"bias", {3}, true},
                    {"mean", {3}, true},
                    {"var", {3}, true, 0.5f, 2.0f}},
                   Attrs{{"epsilon", 1e-3f}},
                   x7});
  // Naive convolutions and products, for nodes no tuned workload fits.
  cases.push_back(
      {"ConvGroupedStrided",
       "Conv",
       {{"x", {1, 4, 7, 7}}, {"w", {6, 2, 3, 3}, true}, {"b", {6}, true}},
       Attrs{{"group", int64_t{2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
       {1, 6, 4, 4}});
  cases.push_back({"ConvDilated",
                   "Conv",
                   {{"x", {1, 3, 9, 9}}, {"w", {5, 3, 3, 3}, true}},
                   Attrs{{"dilations", Ints{2, 2}}},
                   {1, 5, 5, 5}});
  {
    OpCase fused{"FusedConvBiasResidualClip",
                 "FusedConv",
                 {{"x", x7}, {"w", {4, 3, 3, 3}, true}, {"b", {4}, true}, {"r", {1, 4, 7, 7}}},
                 Attrs{{"pads", Ints{1, 1, 1, 1}}},
                 {1, 4, 7, 7}};
    fused.epilogue.bias = true;
    fused.epilogue.activation = Activation::kClip;
    fused.epilogue.clip_min = 0.0f;
    fused.epilogue.clip_max = 0.5f;
    fused.epilogue.residual = Residual::kBeforeActivation;
    cases.push_back(fused);
  }
  cases.push_back({"GemmTransB",
                   "Gemm",
                   {{"a", {3, 7}}, {"b", {5, 7}, true}, {"c", {5}, true}},
                   Attrs{{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}},
                   {3, 5}});
  cases.push_back(
      {"MatMulBatched", "MatMul", {{"a", {2, 3, 4, 5}}, {"b", {5, 6}}}, {}, {2, 3, 4, 6}});
  cases.push_back({"GemmTransAScalarC",
                   "Gemm",
                   {{"a", {7, 3}}, {"b", {7, 5}}, {"c", {}, true}},
                   Attrs{{"transA", int64_t{1}}},
                   {3, 5}});
  cases.push_back({"MatMulVectorMatrix", "MatMul", {{"a", {5}}, {"b", {3, 5, 2}}}, {}, {3, 2}});
  cases.push_back({"MatMulMatrixVector", "MatMul", {{"a", {2, 4, 5}}, {"b", {5}}}, {}, {2, 4}});
  cases.push_back({"Conv1D",
                   "Conv",
                   {{"x", {2, 3, 17}}, {"w", {4, 3, 5}, true}},
                   Attrs{{"strides", Ints{2}}, {"pads", Ints{2, 1}}},
                   {2, 4, 8}});
  cases.push_back({"AddScalarConstant", "Add", {{"a", {2, 3, 5}}, {"b", {}, true}}, {}, {2, 3, 5}});
  cases.push_back(
      {"Flatten", "Flatten", {{"x", {2, 3, 5, 7}}}, Attrs{{"axis", int64_t{1}}}, {2, 105}});
  cases.push_back({"Identity", "Identity", {{"x", {3, 11}}}, {}, {3, 11}});
  cases.push_back(
      {"MatMulBroadcast", "MatMul", {{"a", {2, 1, 4, 5}}, {"b", {3, 5, 2}}}, {}, {2, 3, 4, 2}});
  return cases;
}

struct OpParam {
  OpCase c;
  Target target;
};

void PrintTo(const OpParam& p, std::ostream* os) {
  *os << p.c.name << " on " << target_name(p.target);
}

std::vector<OpParam> op_params() {
  std::vector<OpParam> params;
  for (const OpCase& c : op_cases())
    for (Target t : {Target::kGlesFrag, Target::kGlesCompute}) params.push_back({c, t});
  return params;
}

std::string op_param_name(const testing::TestParamInfo<OpParam>& info) {
  std::string name = info.param.c.name + "_" + std::string(target_name(info.param.target));
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

/// One context for the whole suite: creating an EGL context costs tens of milliseconds.
test::GlHarness& harness() {
  static test::GlHarness h;
  return h;
}

DeviceLimits test_limits() {
  DeviceLimits limits;
  limits.max_texture_size = 4096;
  return limits;
}

class GlueOpTest : public testing::TestWithParam<OpParam> {};

TEST_P(GlueOpTest, MatchesTheReferenceExecutor) {
  const OpCase& c = GetParam().c;
  const Target target = GetParam().target;
  // Small textures (width 16) on frag so that outputs and inputs wrap over several rows.
  DeviceLimits limits = test_limits();
  if (target == Target::kGlesFrag) limits.max_texture_size = 64;
  Built b = build(c, 1234);
  graph::ExecuteOptions options;
  options.opset = c.opset;
  const std::vector<float> expected = graph::execute(b.graph, b.feeds, options).at("y").data;
  ASSERT_EQ(static_cast<int64_t>(expected.size()), product(c.out_shape));

  const KernelArtifact artifact =
      op_kernel(target, b.graph, b.graph.nodes[0], limits, OpKernelOptions{c.opset});
  const std::vector<std::string> bound = op_kernel_inputs(b.graph.nodes[0]);
  ASSERT_EQ(artifact.inputs.size(), bound.size());
  std::vector<float> got;
  if (target == Target::kGlesFrag) {
    std::vector<std::vector<float>> texels;
    for (size_t i = 0; i < bound.size(); ++i)
      texels.push_back(artifact.inputs[i].pack(b.data[bound[i]]));
    const auto targets = harness().run_fragment(artifact, texels);
    ASSERT_EQ(targets.size(), 1u);
    got.assign(targets[0].begin(), targets[0].begin() + static_cast<int64_t>(expected.size()));
    // Texels past the output are written 0, never left as they were (NaN).
    for (size_t t = expected.size(); t < targets[0].size(); ++t)
      ASSERT_EQ(targets[0][t], 0.0f) << "padding texel " << t;
  } else {
    std::vector<std::vector<float>> buffers;
    std::vector<int> bindings;
    for (size_t i = 0; i < bound.size(); ++i) {
      buffers.push_back(b.data[bound[i]]);
      bindings.push_back(i < 2 ? static_cast<int>(i) : static_cast<int>(i) + 1);
    }
    got = harness().run_compute(artifact, buffers, bindings);
  }
  double max_ref = 0.0, max_err = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(static_cast<double>(expected[i])));
    const double err = std::abs(static_cast<double>(got[i]) - expected[i]);
    if (!(err <= max_err)) {  // NaN counts as the worst
      max_err = std::isnan(err) ? INFINITY : err;
      worst = i;
    }
  }
  EXPECT_LE(max_err, 1e-5 * std::max(max_ref, 1e-6))
      << "element " << worst << ": got " << got[worst] << ", reference " << expected[worst] << "\n"
      << artifact.source;
}

INSTANTIATE_TEST_SUITE_P(Ops, GlueOpTest, testing::ValuesIn(op_params()), op_param_name);

// ---------------------------------------------------------------------------------------------
// WGSL: emitted for every operator, with the documented bindings and dispatch
// ---------------------------------------------------------------------------------------------

TEST(GlueWgsl, EveryOperatorEmitsWgslWithTheBindingRule) {
  for (const OpCase& c : op_cases()) {
    SCOPED_TRACE(c.name);
    Built b = build(c, 7);
    ASSERT_TRUE(has_op_kernel(Target::kWebgpu, c.op));
    const KernelArtifact a =
        op_kernel(Target::kWebgpu, b.graph, b.graph.nodes[0], test_limits(), {c.opset});
    EXPECT_EQ(a.target, Target::kWebgpu);
    // The element frame's 64 threads, or a large reduction's workgroup per output element
    // (glue_reduction.cpp).
    const bool workgroup_frame = a.source.find("var<workgroup> part") != std::string::npos;
    EXPECT_EQ(a.workgroup[0], workgroup_frame ? 128 : 64);
    EXPECT_THAT(a.source, HasSubstr("@compute @workgroup_size(" + std::to_string(a.workgroup[0]) +
                                    ", 1, 1)"));
    EXPECT_THAT(a.source, HasSubstr("@group(0) @binding(2) var<storage, read_write> dst"));
    const auto bound = op_kernel_inputs(b.graph.nodes[0]);
    for (size_t i = 0; i < bound.size(); ++i) {
      const int binding = i < 2 ? static_cast<int>(i) : static_cast<int>(i) + 1;
      EXPECT_THAT(a.source, HasSubstr("@group(0) @binding(" + std::to_string(binding) +
                                      ") var<storage, read> in" + std::to_string(i)));
    }
    EXPECT_EQ(a.output.elements(), product(c.out_shape));
    EXPECT_GE(a.dispatch[0] * a.dispatch[1] * (workgroup_frame ? 1 : a.workgroup[0]),
              product(c.out_shape));
    // No GLSL leaks into WGSL.
    EXPECT_THAT(a.source, testing::Not(HasSubstr("float(")));
    EXPECT_THAT(a.source, testing::Not(HasSubstr("int ")));
  }
}

TEST(GlueWgsl, LargeOutputsSpreadOverTwoDispatchDimensions) {
  OpCase c{"ReluLarge", "Relu", {{"x", {1, 64, 256, 256}}}, {}, {1, 64, 256, 256}};
  Built b = build(c, 1);
  const KernelArtifact a = op_kernel(Target::kWebgpu, b.graph, b.graph.nodes[0], test_limits());
  EXPECT_LE(a.dispatch[0], 65535);
  EXPECT_GT(a.dispatch[1], 1);
  EXPECT_GE(a.dispatch[0] * a.dispatch[1] * 64, int64_t{64} * 256 * 256);
  EXPECT_THAT(a.source, HasSubstr("i32(gid.y) * " + std::to_string(a.dispatch[0] * 64)));
}

/// max |got − expected| ≤ 1e-5 · max |expected| (NaN or a missing value fails).
void expect_close(const std::vector<float>& got, const std::vector<float>& expected,
                  const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  double max_ref = 0.0, max_err = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    max_ref = std::max(max_ref, std::abs(static_cast<double>(expected[i])));
    const double err = std::abs(static_cast<double>(got[i]) - expected[i]);
    if (!(err <= max_err)) {
      max_err = std::isnan(err) ? INFINITY : err;
      worst = i;
    }
  }
  EXPECT_LE(max_err, 1e-5 * std::max(max_ref, 1e-6))
      << what << ": element " << worst << ": got " << got[worst] << ", reference "
      << expected[worst];
}

// ---------------------------------------------------------------------------------------------
// The real models' unfused operators
// ---------------------------------------------------------------------------------------------

/// Runs `artifact` on `inputs` (logical row-major tensors) on its GL target; the plain output.
std::vector<float> run_plain(const KernelArtifact& artifact,
                             const std::vector<const std::vector<float>*>& inputs) {
  if (artifact.target == Target::kGlesFrag) {
    std::vector<std::vector<float>> texels;
    for (size_t i = 0; i < inputs.size(); ++i)
      texels.push_back(artifact.inputs[i].pack(*inputs[i]));
    std::vector<float> out = harness().run_fragment(artifact, texels).at(0);
    out.resize(static_cast<size_t>(artifact.output.elements()));
    return out;
  }
  std::vector<std::vector<float>> buffers;
  std::vector<int> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    buffers.push_back(*inputs[i]);
    bindings.push_back(i < 2 ? static_cast<int>(i) : static_cast<int>(i) + 1);
  }
  return harness().run_compute(artifact, buffers, bindings);
}

class GlueRealModel : public testing::TestWithParam<std::string> {};

// After fusion, the nodes no tuned task covers (ResNet-18: MaxPool, GlobalAveragePool;
// MobileNet-v2: GlobalAveragePool; Flatten / Reshape are aliases) on the real input, fed
// with the reference executor's intermediates, on both GL targets.
TEST_P(GlueRealModel, UnfusedOperatorsMatchTheExecutorOnTheRealInput) {
  const std::string model = GetParam();
  const std::filesystem::path shared =
      std::filesystem::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
  if (!std::filesystem::exists(shared / (model + ".onnx")))
    GTEST_SKIP() << "../shared/models is absent (a user's clone has none): " << model;
  graph::ImportReport report;
  Graph g = graph::import_onnx_file((shared / (model + ".onnx")).string(), {}, &report);
  graph::run_fusion_passes(g);
  const graph::Tensor& input = g.tensor(g.inputs.at(0));
  std::vector<float> x(static_cast<size_t>(input.elements()));
  std::ifstream((shared / (model + ".input.f32")).string(), std::ios::binary)
      .read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
  graph::ExecuteOptions options;
  options.keep_intermediates = true;
  options.opset = report.opset;
  const graph::ValueMap values =
      graph::execute(g, {{input.name, graph::Value::floats(input.shape, x)}}, options);
  int checked = 0;
  for (const Node& node : g.nodes) {
    if (node.op_type.rfind("Fused", 0) == 0 || !has_op_kernel(Target::kGlesFrag, node.op_type))
      continue;
    std::vector<const std::vector<float>*> inputs;
    for (const std::string& name : op_kernel_inputs(node)) {
      const graph::Tensor& t = g.tensor(name);
      inputs.push_back(t.float_data ? &*t.float_data : &values.at(name).data);
    }
    const std::vector<float>& expected = values.at(node.outputs.at(0)).data;
    for (Target target : {Target::kGlesFrag, Target::kGlesCompute}) {
      const KernelArtifact a = op_kernel(target, g, node, test_limits(), {report.opset});
      expect_close(run_plain(a, inputs), expected,
                   node.op_type + " '" + node.name + "' on " + std::string(target_name(target)));
    }
    ++checked;
  }
  EXPECT_GE(checked, 1);
  std::cout << model << ": " << checked << " unfused operators checked on both GL targets\n";
}

INSTANTIATE_TEST_SUITE_P(Shared, GlueRealModel, testing::Values("resnet18", "mobilenet_v2"));

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

TEST(GlueCopy, ReshapeBindsOnlyItsDataAndCopiesIt) {
  OpCase c{"Reshape", "Reshape", {{"x", {2, 3, 5}}}, {}, {5, 6}};
  Built b = build(c, 3);
  graph::Tensor shape;
  shape.name = "shape";
  shape.type = graph::DataType::kInt64;
  shape.shape = {2};
  shape.int_data = std::vector<int64_t>{5, 6};
  b.graph.tensors["shape"] = shape;
  b.graph.nodes[0].inputs.push_back("shape");
  EXPECT_EQ(op_kernel_inputs(b.graph.nodes[0]), std::vector<std::string>{"x"});
  const std::vector<float> expected = graph::execute(b.graph, b.feeds).at("y").data;
  for (Target target : {Target::kGlesFrag, Target::kGlesCompute}) {
    const KernelArtifact a = op_kernel(target, b.graph, b.graph.nodes[0], test_limits());
    ASSERT_EQ(a.inputs.size(), 1u);
    EXPECT_EQ(run_plain(a, {&b.data["x"]}), expected) << target_name(target);
  }
}

TEST(GlueErrors, UnsupportedOperatorsAttributesAndTargetsNameTheNode) {
  OpCase pool{"Indices",
              "MaxPool",
              {{"x", {1, 3, 7, 7}}},
              Attrs{{"kernel_shape", Ints{2, 2}}},
              {1, 3, 6, 6}};
  Built b = build(pool, 1);
  b.graph.nodes[0].outputs.push_back("indices");
  try {
    op_kernel(Target::kGlesFrag, b.graph, b.graph.nodes[0], test_limits());
    FAIL() << "MaxPool's Indices output was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("MaxPool '/test/Indices'"));
    EXPECT_THAT(e.what(), HasSubstr("Indices"));
  }
  Built ok = build(pool, 1);
  EXPECT_THROW(op_kernel(Target::kWasm, ok.graph, ok.graph.nodes[0], test_limits()),
               std::invalid_argument);
  EXPECT_FALSE(has_op_kernel(Target::kWasm, "MaxPool"));
  EXPECT_FALSE(has_op_kernel(Target::kGlesFrag, "NonMaxSuppression"));
  EXPECT_TRUE(has_op_kernel(Target::kGlesCompute, "GlobalAveragePool"));

  Built unnamed = build(pool, 1);
  unnamed.graph.nodes[0].name = "";
  unnamed.graph.nodes[0].outputs.push_back("indices");
  try {
    op_kernel(Target::kGlesCompute, unnamed.graph, unnamed.graph.nodes[0], test_limits());
    FAIL() << "MaxPool's Indices output was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("MaxPool (output 'y')"));
  }

  OpCase lrn{"Lrn", "LRN", {{"x", {1, 3, 7, 7}}}, {}, {1, 3, 7, 7}};
  Built l = build(lrn, 1);
  try {
    op_kernel(Target::kGlesCompute, l.graph, l.graph.nodes[0], test_limits());
    FAIL() << "LRN was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("LRN '/test/Lrn'"));
  }

  OpCase pad{"BadPad",
             "AveragePool",
             {{"x", {1, 3, 7, 7}}},
             Attrs{{"kernel_shape", Ints{3, 3}}, {"auto_pad", std::string("FOO")}},
             {1, 3, 5, 5}};
  Built p = build(pad, 1);
  EXPECT_THROW(op_kernel(Target::kWebgpu, p.graph, p.graph.nodes[0], test_limits()),
               std::invalid_argument);

  OpCase many{"ManyInputs", "Concat", {}, Attrs{{"axis", int64_t{0}}}, {8, 3}};
  for (int i = 0; i < 8; ++i) many.inputs.push_back({"in" + std::to_string(i), {1, 3}});
  Built m = build(many, 1);
  EXPECT_NO_THROW(op_kernel(Target::kGlesCompute, m.graph, m.graph.nodes[0], test_limits()));
  try {
    op_kernel(Target::kWebgpu, m.graph, m.graph.nodes[0], test_limits());
    FAIL() << "a webgpu kernel with 9 storage buffers was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("Concat '/test/ManyInputs'"));
    EXPECT_THAT(e.what(), HasSubstr("storage buffers"));
  }

  OpCase big{"TooLarge", "Relu", {{"x", {1, 3, 7, 7}}}, {}, {1, 3, 7, 7}};
  Built t = build(big, 1);
  DeviceLimits tiny;
  tiny.max_texture_size = 8;  // 147 elements need 19 rows of 8
  try {
    op_kernel(Target::kGlesFrag, t.graph, t.graph.nodes[0], tiny);
    FAIL() << "a tensor larger than one texture was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("Relu '/test/TooLarge': input 'x'"));
  }

  OpCase wrong{"WrongShape",
               "MaxPool",
               {{"x", {1, 3, 7, 7}}},
               Attrs{{"kernel_shape", Ints{2, 2}}},
               {1, 3, 7, 7}};
  Built w = build(wrong, 1);
  EXPECT_THROW(op_kernel(Target::kGlesFrag, w.graph, w.graph.nodes[0], test_limits()),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Relayout
// ---------------------------------------------------------------------------------------------

/// A random texture layout of `shape`: packed along a random axis or plain, natural or wrapped
/// width, sometimes with spare rows.
TensorLayout random_layout(const std::vector<int64_t>& shape, std::mt19937& gen) {
  TensorLayout l;
  l.shape = shape;
  l.pack_axis = std::uniform_int_distribution<int>(-1, static_cast<int>(shape.size()) - 1)(gen);
  const std::vector<int64_t> packed = l.packed_shape();
  const int64_t elements = l.packed_elements();
  switch (std::uniform_int_distribution<int>(0, 2)(gen)) {
    case 0:
      l.width = packed.back();  // natural 2-D
      break;
    case 1:
      l.width = std::uniform_int_distribution<int64_t>(1, std::max<int64_t>(elements, 1))(gen);
      break;
    default:
      l.width = std::min<int64_t>(elements, 7);  // wrapped at an odd width
  }
  l.height = (elements + l.width - 1) / l.width + std::uniform_int_distribution<int>(0, 1)(gen);
  return l;
}

/// Render targets of a fragment kernel whose output matrix is `shape` split at a random axis.
OutputLayout random_targets(const std::vector<int64_t>& shape, std::mt19937& gen) {
  OutputLayout o;
  const size_t split = std::uniform_int_distribution<size_t>(0, shape.size())(gen);
  o.rows = 1;
  o.cols = 1;
  for (size_t d = 0; d < shape.size(); ++d) (d < split ? o.rows : o.cols) *= shape[d];
  o.rows_per_item = std::uniform_int_distribution<int>(1, 4)(gen);
  o.channels = std::uniform_int_distribution<int>(0, 1)(gen) ? 4 : 1;
  const int64_t items = o.items();
  o.width = std::uniform_int_distribution<int>(0, 1)(gen)
                ? (o.cols + o.channels - 1) / o.channels
                : std::uniform_int_distribution<int64_t>(1, items)(gen);
  o.height = (items + o.width - 1) / o.width + std::uniform_int_distribution<int>(0, 1)(gen);
  return o;
}

/// What a fragment kernel with output layout `o` leaves in its render targets for `logical`
/// (OutputLayout's placement); positions no element covers are NaN.
std::vector<std::vector<float>> render_targets(const OutputLayout& o,
                                               const std::vector<float>& logical) {
  std::vector<std::vector<float>> targets(
      static_cast<size_t>(o.rows_per_item),
      std::vector<float>(static_cast<size_t>(o.width * o.height * o.channels), NAN));
  const int64_t col_blocks = (o.cols + o.channels - 1) / o.channels;
  for (int64_t e = 0; e < o.elements(); ++e) {
    const int64_t row = e / o.cols, col = e % o.cols;
    const int64_t item = row / o.rows_per_item * col_blocks + col / o.channels;
    targets[static_cast<size_t>(row % o.rows_per_item)]
           [static_cast<size_t>(item * o.channels + col % o.channels)] =
               logical[static_cast<size_t>(e)];
  }
  return targets;
}

std::vector<int64_t> random_shape(std::mt19937& gen) {
  const int rank = std::uniform_int_distribution<int>(1, 4)(gen);
  std::vector<int64_t> shape;
  for (int d = 0; d < rank; ++d) shape.push_back(std::uniform_int_distribution<int64_t>(1, 9)(gen));
  return shape;
}

std::string layout_text(const TensorLayout& l) {
  return "[" + shape_name(l.shape) + " axis " + std::to_string(l.pack_axis) + " " +
         std::to_string(l.width) + "x" + std::to_string(l.height) + "]";
}

void check_relayout(const std::vector<int64_t>& shape, const Storage& from, const TensorLayout& to,
                    uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> logical(static_cast<size_t>(product(shape)));
  // Distinct values: a misplaced element cannot compare equal by chance.
  for (size_t i = 0; i < logical.size(); ++i) logical[i] = static_cast<float>(i) + 0.25f;
  std::shuffle(logical.begin(), logical.end(), gen);
  const KernelArtifact a = relayout_kernel(shape, from, to, test_limits());
  std::vector<std::vector<float>> inputs;
  if (from.kind == Storage::Kind::kTexture) {
    // Logical values are never 0, so every 0 of the packed texture is padding: make it garbage,
    // so that a relayout that copied padding through would fail.
    std::vector<float> texels = from.texture.pack(logical);
    for (float& v : texels)
      if (v == 0.0f) v = 1e9f;
    inputs.push_back(std::move(texels));
  } else {
    inputs = render_targets(from.targets, logical);
  }
  const auto out = harness().run_fragment(a, inputs);
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> expected = to.pack(logical);
  expected.resize(static_cast<size_t>(to.width * to.height * to.channels()), 0.0f);
  ASSERT_EQ(out[0].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(out[0][i], expected[i]) << "position " << i << "\n" << a.source;
}

TEST(GlueRelayout, TextureToTextureEqualsPackOfTheLogicalTensor) {
  std::mt19937 gen(42);
  for (int trial = 0; trial < 30; ++trial) {
    const std::vector<int64_t> shape = random_shape(gen);
    Storage from;
    from.kind = Storage::Kind::kTexture;
    from.slots = {0};
    from.texture = random_layout(shape, gen);
    const TensorLayout to = random_layout(shape, gen);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": " + layout_text(from.texture) + " -> " +
                 layout_text(to));
    check_relayout(shape, from, to, static_cast<uint32_t>(trial));
    if (HasFatalFailure()) return;
  }
}

TEST(GlueRelayout, EveryPackAxisBothWays) {
  // [2,5,3,7]: every axis packed (5, 3 and 7 leave a partial quad), natural and wrapped.
  const std::vector<int64_t> shape = {2, 5, 3, 7};
  for (int a = -1; a < 4; ++a)
    for (int b = -1; b < 4; ++b) {
      Storage from;
      from.kind = Storage::Kind::kTexture;
      from.slots = {0};
      from.texture.shape = shape;
      from.texture.pack_axis = a;
      from.texture.width = from.texture.packed_shape().back();
      from.texture.height = from.texture.packed_elements() / from.texture.width;
      TensorLayout to;
      to.shape = shape;
      to.pack_axis = b;
      to.width = 11;  // wrapped
      to.height = (to.packed_elements() + 10) / 11;
      SCOPED_TRACE(layout_text(from.texture) + " -> " + layout_text(to));
      check_relayout(shape, from, to, 5);
      if (HasFatalFailure()) return;
    }
}

TEST(GlueRelayout, RenderTargetsToTextureEqualsPackOfTheLogicalTensor) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 30; ++trial) {
    const std::vector<int64_t> shape = random_shape(gen);
    Storage from;
    from.kind = Storage::Kind::kTargets;
    from.targets = random_targets(shape, gen);
    for (int j = 0; j < from.targets.rows_per_item; ++j) from.slots.push_back(j);
    const TensorLayout to = random_layout(shape, gen);
    SCOPED_TRACE("trial " + std::to_string(trial) + ": targets rows " +
                 std::to_string(from.targets.rows) + " cols " + std::to_string(from.targets.cols) +
                 " rows_per_item " + std::to_string(from.targets.rows_per_item) + " channels " +
                 std::to_string(from.targets.channels) + " " + std::to_string(from.targets.width) +
                 "x" + std::to_string(from.targets.height) + " -> " + layout_text(to));
    check_relayout(shape, from, to, static_cast<uint32_t>(trial));
    if (HasFatalFailure()) return;
  }
}

TEST(GlueRelayout, ResNetSizedTargetsToChannelQuads) {
  // conv1's output [1,64,112,112] as a tuned frag kernel leaves it (output matrix [64, 12544],
  // 4 rows × 4 columns per item, wrapped at 2048 texels) into the next kernel's data layout
  // (packed along C, 2-D: width 112, height 16·112): indices up to 802816 exercise the int math.
  const std::vector<int64_t> shape = {1, 64, 112, 112};
  Storage from;
  from.kind = Storage::Kind::kTargets;
  from.slots = {0, 1, 2, 3};
  from.targets.rows = 64;
  from.targets.cols = 112 * 112;
  from.targets.rows_per_item = 4;
  from.targets.channels = 4;
  from.targets.width = 2048;
  from.targets.height = (from.targets.items() + 2047) / 2048;
  TensorLayout to;
  to.shape = shape;
  to.pack_axis = 1;
  to.width = 112;
  to.height = 16 * 112;
  check_relayout(shape, from, to, 9);
}

TEST(GlueRelayout, TargetsIntoChannelQuadsOnEveryPath) {
  // The shortcuts of glue_relayout.cpp for render targets: channels rows_apart rows apart
  // (decoded once per texel), the aligned quad (four consecutive render targets of one item),
  // whole texels into a layout packed along the last axis (a residual's), and plain textures.
  // Conv outputs [N, K, H, W] as a frag kernel leaves them (rows N·K, cols H·W) into textures
  // packed along K (rows_apart 1), along N (rows_apart K), along H (no shortcut), along W (with
  // W and H·W multiples of 4 or not) and not packed, with K a multiple of 4 or not, 1 to 8
  // render targets, R32F or RGBA32F targets, and texel rows that are or are not one row block.
  int trial = 0;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{1, 8, 5, 6}, std::vector<int64_t>{2, 12, 3, 5},
        std::vector<int64_t>{1, 6, 4, 3}, std::vector<int64_t>{5, 4, 2, 3},
        std::vector<int64_t>{1, 8, 3, 4}, std::vector<int64_t>{2, 4, 2, 8}})
    for (int rows_per_item : {1, 3, 4, 8})
      for (int channels : {1, 4})
        for (bool natural : {true, false})
          for (int axis : {-1, 0, 1, 2, 3}) {
            if (rows_per_item == 3 && natural) continue;  // as 1: no aligned quad
            Storage from;
            from.kind = Storage::Kind::kTargets;
            OutputLayout& o = from.targets;
            o.rows = shape[0] * shape[1];
            o.cols = shape[2] * shape[3];
            o.rows_per_item = rows_per_item;
            o.channels = channels;
            o.width = natural ? (o.cols + channels - 1) / channels : 5;
            o.height = (o.items() + o.width - 1) / o.width;
            for (int j = 0; j < rows_per_item; ++j) from.slots.push_back(j);
            TensorLayout to;
            to.shape = shape;
            to.pack_axis = axis;
            to.width = natural ? (axis < 0 ? o.cols : to.packed_shape().back()) : 7;
            to.height = (to.packed_elements() + to.width - 1) / to.width;
            SCOPED_TRACE("shape " + shape_name(shape) + " rows_per_item " +
                         std::to_string(rows_per_item) + " channels " + std::to_string(channels) +
                         " targets " + std::to_string(o.width) + "x" + std::to_string(o.height) +
                         " -> " + layout_text(to));
            check_relayout(shape, from, to, static_cast<uint32_t>(++trial));
            if (HasFatalFailure()) return;
          }
}

TEST(GlueRelayout, ReshapedSourceMatchesByRowMajorOrder) {
  // A conv's output [1,8,1,1] packed along C, read as Gemm's A [1,8] packed along K.
  Storage from;
  from.kind = Storage::Kind::kTexture;
  from.slots = {0};
  from.texture.shape = {1, 8, 1, 1};
  from.texture.pack_axis = 1;
  from.texture.width = 1;
  from.texture.height = 2;
  TensorLayout to;
  to.shape = {1, 8};
  to.pack_axis = 1;
  to.width = 2;
  to.height = 1;
  check_relayout({1, 8}, from, to, 3);
}

TEST(GlueRelayout, RefusesMismatchedShapesAndOversizedTextures) {
  Storage from;
  from.kind = Storage::Kind::kTexture;
  from.slots = {0};
  from.texture = plain_texture_layout({2, 3}, test_limits());
  TensorLayout to = plain_texture_layout({7}, test_limits());
  EXPECT_THROW(relayout_kernel({2, 3}, from, to, test_limits()), std::invalid_argument);
  to = plain_texture_layout({2, 3}, test_limits());
  to.width = 5000;
  EXPECT_THROW(relayout_kernel({2, 3}, from, to, test_limits()), std::invalid_argument);
  Storage buffer;
  buffer.kind = Storage::Kind::kBuffer;
  EXPECT_THROW(
      relayout_kernel({2, 3}, buffer, plain_texture_layout({2, 3}, test_limits()), test_limits()),
      std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Op kernels that read any frag storage and write any layout (OpKernelOptions)
// ---------------------------------------------------------------------------------------------

TEST(GlueOpStorage, ReadsAnyStorageAndWritesAnyLayoutLikeRelayoutsAroundThePlainKernel) {
  // A subset of the operator cases: llvmpipe compiles the operator once per output channel
  // (four times for RGBA outputs), and cold (no Mesa shader cache) the pools and convolutions
  // take seconds each; these keep the test to a few seconds cold.
  const std::vector<std::string> subset = {
      "MaxPool2x2s2Ceil", "GlobalAveragePool",  "HardSwish",      "ClipOnlyMax",
      "AddChannels",      "MulBothStretch",     "ConcatChannels", "SoftmaxMiddleAxis",
      "TransposeNHWC",    "BatchNormalization", "GemmTransB"};
  std::mt19937 gen(21);
  int targets_inputs = 0, quad_layer_inputs = 0, packed_outputs = 0, next_pick = 0;
  for (const OpCase& c : op_cases()) {
    if (std::find(subset.begin(), subset.end(), c.name) == subset.end()) continue;
    {
      const int trial = 0;
      Built b = build(c, 500);
      graph::ExecuteOptions exec;
      exec.opset = c.opset;
      const std::vector<float> reference = graph::execute(b.graph, b.feeds, exec).at("y").data;
      const auto bound = op_kernel_inputs(b.graph.nodes[0]);
      OpKernelOptions options{c.opset};
      std::vector<std::vector<float>> texels;
      std::string plan;
      for (const std::string& name : bound) {
        const std::vector<int64_t>& shape = b.graph.tensor(name).shape;
        // Plain, any texture, render targets, quad layers (OutputLayout::quad_layers) in turn.
        const int pick = next_pick++ % 4;
        if (pick == 0 || shape.empty() || (pick == 3 && shape.size() < 2)) {
          options.input_storage.push_back(std::nullopt);
          texels.push_back(plain_texture_layout(shape, test_limits()).pack(b.data[name]));
          plan += " plain";
        } else if (pick == 1) {
          Storage st;
          st.kind = Storage::Kind::kTexture;
          st.slots = {0};
          st.texture = random_layout(shape, gen);
          texels.push_back(st.texture.pack(b.data[name]));
          plan += " " + layout_text(st.texture);
          options.input_storage.push_back(st);
        } else if (pick == 3) {
          Storage st;
          st.kind = Storage::Kind::kTargets;
          st.slots = {0};
          OutputLayout& o = st.targets;
          o.rows = shape[0] * shape[1];
          o.cols = product(shape) / o.rows;
          o.rows_per_item = std::uniform_int_distribution<int>(0, 1)(gen) ? 8 : 4;
          o.channels = 4;
          o.quad_layers = true;
          o.width = std::uniform_int_distribution<int>(0, 1)(gen)
                        ? (o.cols + 3) / 4
                        : std::uniform_int_distribution<int64_t>(1, o.items())(gen);
          o.height = (o.items() + o.width - 1) / o.width;
          std::vector<float> layers;
          for (const auto& layer : o.pack_targets(b.data[name]))
            layers.insert(layers.end(), layer.begin(), layer.end());
          texels.push_back(std::move(layers));
          plan += " quad_layers(" + std::to_string(o.rows_per_item) + ")";
          options.input_storage.push_back(st);
          ++quad_layer_inputs;
        } else {
          Storage st;
          st.kind = Storage::Kind::kTargets;
          st.targets = random_targets(shape, gen);
          for (int j = 0; j < st.targets.rows_per_item; ++j) st.slots.push_back(j);
          for (auto& t : render_targets(st.targets, b.data[name])) texels.push_back(std::move(t));
          plan += " targets(" + std::to_string(st.targets.rows_per_item) + "x" +
                  std::to_string(st.targets.channels) + ")";
          options.input_storage.push_back(st);
          ++targets_inputs;
        }
      }
      const TensorLayout to = random_layout(c.out_shape, gen);
      options.output_layout = to;
      packed_outputs += to.pack_axis >= 0;
      SCOPED_TRACE(c.name + " trial " + std::to_string(trial) + ":" + plan + " -> " +
                   layout_text(to));

      const KernelArtifact a =
          op_kernel(Target::kGlesFrag, b.graph, b.graph.nodes[0], test_limits(), options);
      ASSERT_EQ(a.inputs.size(), texels.size());
      const auto out = harness().run_fragment(a, texels);
      std::vector<float> expected = to.pack(reference);
      expected.resize(static_cast<size_t>(to.width * to.height * to.channels()), 0.0f);
      ASSERT_EQ(out.at(0).size(), expected.size());
      // Padding (where pack writes 0 and the reference has no element) must be exactly 0.
      std::vector<float> where(reference.size());
      for (size_t i = 0; i < where.size(); ++i) where[i] = 1.0f;
      std::vector<float> is_element = to.pack(where);
      is_element.resize(expected.size(), 0.0f);
      std::vector<float> got, want;
      for (size_t i = 0; i < expected.size(); ++i) {
        if (is_element[i] == 0.0f) {
          ASSERT_EQ(out[0][i], 0.0f) << "padding position " << i;
        } else {
          got.push_back(out[0][i]);
          want.push_back(expected[i]);
        }
      }
      expect_close(got, want, c.name);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GE(targets_inputs, 3);
  EXPECT_GE(quad_layer_inputs, 3);
  EXPECT_GE(packed_outputs, 3);
}

TEST(GlueOpStorage, RefusedOnComputeTargetsAndForMismatchedStorage) {
  OpCase c{"Relu", "Relu", {{"x", {1, 3, 7, 7}}}, {}, {1, 3, 7, 7}};
  Built b = build(c, 1);
  OpKernelOptions options;
  options.output_layout = plain_texture_layout({1, 3, 7, 7}, test_limits());
  EXPECT_THROW(op_kernel(Target::kGlesCompute, b.graph, b.graph.nodes[0], test_limits(), options),
               std::invalid_argument);
  OpKernelOptions wrong;
  Storage st;
  st.kind = Storage::Kind::kTexture;
  st.texture = plain_texture_layout({1, 3, 7, 8}, test_limits());
  wrong.input_storage = {st};
  try {
    op_kernel(Target::kGlesFrag, b.graph, b.graph.nodes[0], test_limits(), wrong);
    FAIL() << "a storage of another element count was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("Relu '/test/Relu': input 'x'"));
  }
}

// ---------------------------------------------------------------------------------------------
// Headless Chromium: WGSL in WebGPU, the frag kernels in WebGL2 (ANGLE's shader validator)
// ---------------------------------------------------------------------------------------------

namespace bj = boost::json;

bj::array float_array(const std::vector<float>& values) {
  bj::array a;
  for (float v : values) {
    if (std::isnan(v))
      a.push_back(nullptr);  // JSON has no NaN (render targets' padding)
    else
      a.push_back(static_cast<double>(v));
  }
  return a;
}

std::vector<float> floats_of(const bj::value& output) {
  std::vector<float> got;
  for (const bj::value& v : output.as_array())
    got.push_back(v.is_null() ? NAN : static_cast<float>(v.to_number<double>()));
  return got;
}

/// A gles-frag artifact and its inputs' texels, as tests/run_glue_kernels.mjs reads them.
bj::object fragment_job(const std::string& name, const KernelArtifact& a,
                        const std::vector<std::vector<float>>& texels) {
  bj::array inputs;
  for (size_t i = 0; i < a.inputs.size(); ++i)
    inputs.push_back(bj::object{{"width", a.inputs[i].width},
                                {"height", a.inputs[i].height},
                                {"channels", a.inputs[i].channels()},
                                {"texels", float_array(texels[i])}});
  return bj::object{{"name", name},
                    {"source", a.source},
                    {"inputs", std::move(inputs)},
                    {"output", bj::object{{"width", a.output.width},
                                          {"height", a.output.height},
                                          {"channels", a.output.channels}}}};
}

TEST(GlueBrowser, WgslAndWebgl2KernelsMatchTheReferenceInHeadlessChromium) {
  const char* chromium = std::getenv("CHROMIUM") ? std::getenv("CHROMIUM") : "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) GTEST_SKIP() << "no Chromium at " << chromium;
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no node on PATH";
  bj::array kernels, fragments;
  std::vector<std::vector<float>> expected, frag_expected;
  std::vector<bool> exact;  // relayouts compare exactly, operators within the tolerance
  std::vector<std::string> names, frag_names;
  DeviceLimits frag_limits = test_limits();
  frag_limits.max_texture_size = 64;  // outputs and inputs wrap over several rows
  for (const OpCase& c : op_cases()) {
    Built b = build(c, 99);
    graph::ExecuteOptions options;
    options.opset = c.opset;
    const std::vector<float> reference = graph::execute(b.graph, b.feeds, options).at("y").data;
    const auto bound = op_kernel_inputs(b.graph.nodes[0]);
    // WebGPU
    const KernelArtifact a =
        op_kernel(Target::kWebgpu, b.graph, b.graph.nodes[0], test_limits(), {c.opset});
    bj::array inputs, bindings;
    for (size_t i = 0; i < bound.size(); ++i) {
      inputs.push_back(float_array(b.data[bound[i]]));
      bindings.push_back(i < 2 ? static_cast<int64_t>(i) : static_cast<int64_t>(i) + 1);
    }
    kernels.push_back(
        bj::object{{"name", c.name},
                   {"source", a.source},
                   {"inputs", std::move(inputs)},
                   {"bindings", std::move(bindings)},
                   {"output_floats", a.output.elements()},
                   {"dispatch", bj::array{a.dispatch[0], a.dispatch[1], a.dispatch[2]}}});
    expected.push_back(reference);
    names.push_back(c.name);
    // WebGL2
    const KernelArtifact f =
        op_kernel(Target::kGlesFrag, b.graph, b.graph.nodes[0], frag_limits, {c.opset});
    std::vector<std::vector<float>> texels;
    for (size_t i = 0; i < bound.size(); ++i) texels.push_back(f.inputs[i].pack(b.data[bound[i]]));
    fragments.push_back(fragment_job(c.name, f, texels));
    std::vector<float> padded = reference;  // texels past the output are written 0
    padded.resize(static_cast<size_t>(f.output.width * f.output.height), 0.0f);
    frag_expected.push_back(padded);
    frag_names.push_back(c.name);
    exact.push_back(false);
  }
  std::mt19937 gen(11);
  for (int trial = 0; trial < 24; ++trial) {
    const std::vector<int64_t> shape = random_shape(gen);
    Storage from;
    if (trial % 2 == 0) {
      from.kind = Storage::Kind::kTexture;
      from.slots = {0};
      from.texture = random_layout(shape, gen);
    } else {
      from.kind = Storage::Kind::kTargets;
      from.targets = random_targets(shape, gen);
      for (int j = 0; j < from.targets.rows_per_item; ++j) from.slots.push_back(j);
    }
    const TensorLayout to = random_layout(shape, gen);
    std::vector<float> logical(static_cast<size_t>(product(shape)));
    for (size_t i = 0; i < logical.size(); ++i) logical[i] = static_cast<float>(i) + 0.5f;
    std::shuffle(logical.begin(), logical.end(), gen);
    const KernelArtifact r = relayout_kernel(shape, from, to, test_limits());
    const auto texels = from.kind == Storage::Kind::kTexture
                            ? std::vector<std::vector<float>>{from.texture.pack(logical)}
                            : render_targets(from.targets, logical);
    const std::string name = "relayout" + std::to_string(trial);
    fragments.push_back(fragment_job(name, r, texels));
    std::vector<float> packed = to.pack(logical);
    packed.resize(static_cast<size_t>(to.width * to.height * to.channels()), 0.0f);
    frag_expected.push_back(packed);
    frag_names.push_back(name);
    exact.push_back(true);
  }

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("webtune_glue_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "in.json").string(), out = (dir / "out.json").string();
  std::ofstream(in) << bj::serialize(
      bj::object{{"kernels", std::move(kernels)}, {"fragments", std::move(fragments)}});
  const std::string cmd =
      "node '" WEBTUNE_SOURCE_DIR "/tests/run_glue_kernels.mjs' '" + in + "' '" + out + "'";
  const int status = std::system(cmd.c_str());
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  std::filesystem::remove_all(dir);
  ASSERT_EQ(status, 0) << cmd;
  const bj::object result = bj::parse(text.str()).as_object();

  const bj::array& frags = result.at("fragments").as_array();
  ASSERT_EQ(frags.size(), frag_names.size());
  for (size_t k = 0; k < frag_names.size(); ++k) {
    const bj::object& r = frags[k].as_object();
    ASSERT_EQ(r.at("name").as_string(), frag_names[k]);
    if (r.contains("error")) {
      ADD_FAILURE() << "webgl2 " << frag_names[k] << ": " << r.at("error").as_string().c_str();
      continue;
    }
    const std::vector<float> got = floats_of(r.at("output"));
    if (exact[k])
      EXPECT_EQ(got, frag_expected[k]) << "webgl2 " << frag_names[k];
    else
      expect_close(got, frag_expected[k], "webgl2 " + frag_names[k]);
  }

  if (!result.at("adapter").as_bool()) GTEST_SKIP() << "Chromium gave no WebGPU adapter";
  const bj::array& results = result.at("results").as_array();
  ASSERT_EQ(results.size(), names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    const bj::object& r = results[k].as_object();
    ASSERT_EQ(r.at("name").as_string(), names[k]);
    if (r.contains("error")) {
      ADD_FAILURE() << "webgpu " << names[k] << ": " << r.at("error").as_string().c_str();
      continue;
    }
    expect_close(floats_of(r.at("output")), expected[k], "webgpu " + names[k]);
  }
}

}  // namespace
}  // namespace webtune::deploy
