/// \file quad_layers_test.cpp
/// Quad layers (OutputLayout::quad_layers, FragPackageOptions; docs/package.md) on Mesa llvmpipe
/// through headless EGL:
/// - a tuned frag convolution stores its output transposed into channel-quad layers, and
///   OutputLayout::unpack of what it drew equals the CPU reference, for random configs of odd
///   shapes (7×7 and 9×9 outputs, stride 2, 12 channels, epilogues);
/// - a convolution reads its data from such layers (2d, odd-width and 2048-wide producers of 4
///   and 8 layers) and equals the reference;
/// - a relayout and an op read quad layers into every kind of texture layout;
/// - the layout's own arithmetic: pack_targets / unpack are inverse, JSON round-trips and
///   refuses inconsistent layers;
/// - whole packages: a model built with quad-layer records chains its convolutions with no
///   relayout between them and still matches the reference, against the same build with
///   --no-quad-layers (PlanOptions::quad_layers false).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codegen/glsl_frag_emitter.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "codegen/task.hpp"
#include "deploy/glue_kernels.hpp"
#include "deploy/planner.hpp"
#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/zoo.hpp"
#include "native_agent/egl_context.hpp"
#include "native_agent/model_runner.hpp"
#include "support/gl_harness.hpp"
#include "support/model_reference.hpp"
#include "support/quad_layer_records.hpp"

namespace webtune {
namespace {

namespace fs = std::filesystem;
using testing_support::reference_logits;
namespace bj = boost::json;
using deploy::Storage;

test::GlHarness& harness() {
  static test::GlHarness h;
  return h;
}

/// Convolutions of odd shapes, with and without epilogues; every channel count a multiple of 4
/// (quad layers need it of the writer's K).
std::vector<Workload> workloads() {
  Workload pw = Workload::conv2d(1, 8, 7, 7, 12, 1, 1, 0, "pw8to12_7x7");
  pw.epilogue.bias = true;
  pw.epilogue.activation = Activation::kClip;
  Workload c3 = Workload::conv2d(1, 12, 9, 9, 8, 3, 2, 1, "c12to8_s2");
  c3.epilogue.bias = true;
  c3.epilogue.activation = Activation::kRelu;
  Workload dw = Workload::depthwise_conv2d(1, 12, 7, 7, 3, 1, 1, "dw12_7x7");
  dw.epilogue.bias = true;
  dw.epilogue.activation = Activation::kClip;
  Workload dw2 = Workload::depthwise_conv2d(1, 8, 10, 10, 3, 2, 1, "dw8_s2");
  Workload res = Workload::conv2d(1, 16, 6, 5, 8, 1, 1, 0, "pw16to8_res");
  res.epilogue.bias = true;
  res.epilogue.residual = Residual::kAfterActivation;
  return {pw, c3, dw, dw2, res};
}

/// Up to `count` distinct valid entities of `w`'s gles-frag space (limits of quad_layer_limits)
/// that `keep` accepts, drawn from a seeded generator.
template <typename Keep>
std::vector<ConfigEntity> configs(const Workload& w, int count, uint64_t seed, Keep keep) {
  const Task task = Task::create(w, Target::kGlesFrag, testing_support::quad_layer_limits());
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> index(0, task.space->raw_size() - 1);
  std::vector<ConfigEntity> out;
  std::vector<int64_t> seen;
  for (int tries = 0; tries < 200000 && static_cast<int>(out.size()) < count; ++tries) {
    const ConfigEntity e = task.space->get(index(rng));
    if (std::find(seen.begin(), seen.end(), e.index()) != seen.end()) continue;
    if (!task.space->is_valid(e) || !keep(e)) continue;
    seen.push_back(e.index());
    out.push_back(e);
  }
  return out;
}

void expect_matches_reference(const Workload& w, const std::vector<float>& got,
                              const std::vector<std::vector<float>>& inputs,
                              const std::string& what) {
  const std::vector<float> expected = reference_output(w, inputs);
  ASSERT_EQ(got.size(), expected.size()) << what;
  double scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(double(v)));
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 1e-5 * scale + 1e-6) << what << ", element " << i;
}

/// Runs `artifact` on `inputs` (each packed as its layout says) and returns the unpacked output.
std::vector<float> run(const KernelArtifact& artifact,
                       const std::vector<std::vector<float>>& inputs) {
  std::vector<std::vector<float>> texels;
  for (size_t i = 0; i < inputs.size(); ++i) texels.push_back(artifact.inputs[i].pack(inputs[i]));
  return artifact.output.unpack(harness().run_fragment(artifact, texels));
}

TEST(QuadLayers, WrittenLayersUnpackToTheReference) {
  for (const Workload& w : workloads()) {
    const auto chosen =
        configs(w, 12, 1, [&](const ConfigEntity& e) { return frag_can_write_quad_layers(w, e); });
    ASSERT_GE(chosen.size(), 8u) << w.key();
    const auto inputs = seeded_inputs(w, 3);
    for (const ConfigEntity& e : chosen) {
      FragPackageOptions options;
      options.quad_layers_out = true;
      const KernelArtifact a = emit_glsl_frag(w, e, options);
      ASSERT_TRUE(a.output.quad_layers);
      expect_matches_reference(w, run(a, inputs), inputs, w.key() + " " + e.to_string());
      if (HasFatalFailure()) return;
    }
  }
}

TEST(QuadLayers, DataReadFromLayersGivesTheReference) {
  int trial = 0;
  for (const Workload& w : workloads()) {
    const auto chosen = configs(w, 12, 2, [&](const ConfigEntity& e) {
      return e.get_string("packing") == "c" && e.get_string("stage") == "fragment";
    });
    ASSERT_GE(chosen.size(), 8u) << w.key();
    const auto inputs = seeded_inputs(w, 4);
    for (const ConfigEntity& e : chosen) {
      // The producer: 4 or 8 layers, its items 2-D (a row block per texel row), wrapped at an
      // odd width, or wrapped at the flat width 2048 (the emitter's shift-and-mask path).
      OutputLayout source;
      source.rows = w.in_channels;
      source.cols = w.height * w.width;
      source.rows_per_item = trial % 2 == 0 ? 8 : 4;
      source.channels = 4;
      source.quad_layers = true;
      const int64_t col_blocks = (source.cols + 3) / 4;
      const int64_t shape = trial % 3;
      source.width = shape == 0 ? col_blocks : shape == 1 ? 5 : 2048;
      source.height = (source.items() + source.width - 1) / source.width;
      ++trial;
      ASSERT_TRUE(frag_can_read_quad_layers(w, e, source)) << e.to_string();
      FragPackageOptions options;
      options.data_layers = source;
      const KernelArtifact a = emit_glsl_frag(w, e, options);
      ASSERT_EQ(a.inputs[0].layers, source.rows_per_item);
      ASSERT_NE(a.source.find("sampler2DArray in0"), std::string::npos);
      expect_matches_reference(w, run(a, inputs), inputs,
                               w.key() + " " + e.to_string() + " from " +
                                   std::to_string(source.rows_per_item) + " layers " +
                                   std::to_string(source.width) + " wide");
      if (HasFatalFailure()) return;
    }
  }
}

TEST(QuadLayers, ReadersAndWritersAreCheckedAndRefusedWithAMessage) {
  const Workload w = Workload::conv2d(1, 8, 7, 7, 12, 1, 1, 0);
  const Task task = Task::create(w, Target::kGlesFrag, testing_support::quad_layer_limits());
  const ConfigEntity plain = task.default_config();  // one output per fragment, no packing
  EXPECT_FALSE(frag_can_write_quad_layers(w, plain));
  FragPackageOptions out;
  out.quad_layers_out = true;
  try {
    emit_glsl_frag(w, plain, out);
    ADD_FAILURE() << "a 1x1 block wrote quad layers";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write quad layers"), std::string::npos)
        << e.what();
  }
  OutputLayout wrong;  // 12 channels of 7×7 where the reader has 8
  wrong.rows = 12;
  wrong.cols = 49;
  wrong.rows_per_item = 4;
  wrong.channels = 4;
  wrong.quad_layers = true;
  wrong.width = 13;
  wrong.height = 3;
  std::mt19937_64 rng(3);
  const ConfigEntity packed = testing_support::quad_layer_config(w, 4, rng);
  EXPECT_FALSE(frag_can_read_quad_layers(w, packed, wrong));
  FragPackageOptions in;
  in.data_layers = wrong;
  EXPECT_THROW(emit_glsl_frag(w, packed, in), std::invalid_argument);
  wrong.rows = 8;
  EXPECT_TRUE(frag_can_read_quad_layers(w, packed, wrong));
  // K = 6 leaves a partial channel quad: not written as quad layers.
  const Workload odd = Workload::conv2d(1, 8, 7, 7, 6, 1, 1, 0);
  for (const ConfigEntity& e : configs(odd, 4, 5, [](const ConfigEntity& e) {
         return e.get_int("out_cols") == 4 && e.get_int("out_rows") == 4;
       }))
    EXPECT_FALSE(frag_can_write_quad_layers(odd, e)) << e.to_string();
}

TEST(QuadLayers, PackTargetsAndUnpackAreInverseAndJsonRoundTrips) {
  OutputLayout o;
  o.rows = 24;
  o.cols = 35;  // a partial last column quad
  o.rows_per_item = 8;
  o.channels = 4;
  o.quad_layers = true;
  o.width = 7;
  o.height = (o.items() + 6) / 7;
  std::vector<float> logical(static_cast<size_t>(o.elements()));
  for (size_t i = 0; i < logical.size(); ++i) logical[i] = static_cast<float>(i) + 0.5f;
  const auto targets = o.pack_targets(logical);
  ASSERT_EQ(targets.size(), 8u);
  EXPECT_EQ(o.unpack(targets), logical);
  // Element (row 13, col 6): block 1, layer 4·((13 mod 8) div 4) + 6 mod 4 = 6, item
  // 1·9 + 1 = 10, component 13 mod 4 = 1.
  EXPECT_EQ(targets[6][10 * 4 + 1], logical[13 * 35 + 6]);
  const OutputLayout back = OutputLayout::from_json(o.to_json());
  EXPECT_TRUE(back.quad_layers);
  EXPECT_EQ(bj::serialize(back.to_json()), bj::serialize(o.to_json()));
  bj::object bad = o.to_json();
  bad["rows_per_item"] = 6;
  EXPECT_THROW(OutputLayout::from_json(bad), std::invalid_argument);
  // The TensorLayout a reader binds describes the same texture.
  TensorLayout t;
  t.shape = {1, 24, 5, 7};
  t.pack_axis = 1;
  t.width = 7;
  t.height = o.height;
  t.layers = 8;
  const OutputLayout source = OutputLayout::quad_layers_source(t);
  EXPECT_EQ(source.rows, 24);
  EXPECT_EQ(source.cols, 35);
  const std::vector<float> packed = t.pack(logical);
  ASSERT_EQ(packed.size(), targets.size() * targets[0].size());
  EXPECT_TRUE(std::equal(targets[3].begin(), targets[3].end(),
                         packed.begin() + static_cast<long>(3 * targets[0].size())));
  EXPECT_EQ(TensorLayout::from_json(t.to_json()).layers, 8);
  bj::object no_axis = t.to_json();
  no_axis["pack_axis"] = 0;
  EXPECT_THROW(TensorLayout::from_json(no_axis), std::invalid_argument);
}

TEST(QuadLayers, RelayoutsReadQuadLayersIntoEveryLayout) {
  // A conv output [1, 12, 5, 7] in 4 or 8 layers, 2-D or wrapped, into textures packed along C
  // (one whole texel), along W (a residual's), along H, or not packed.
  int trial = 0;
  for (int layers : {4, 8})
    for (bool natural : {true, false})
      for (int axis : {-1, 1, 2, 3}) {
        const std::vector<int64_t> shape = {1, 12, 5, 7};
        Storage from;
        from.kind = Storage::Kind::kTargets;
        from.slots = {0};
        OutputLayout& o = from.targets;
        o.rows = 12;
        o.cols = 35;
        o.rows_per_item = layers;
        o.channels = 4;
        o.quad_layers = true;
        o.width = natural ? 9 : 5;
        o.height = (o.items() + o.width - 1) / o.width;
        TensorLayout to;
        to.shape = shape;
        to.pack_axis = axis;
        to.width = natural ? (axis < 0 ? 35 : to.packed_shape().back()) : 11;
        to.height = (to.packed_elements() + to.width - 1) / to.width;
        SCOPED_TRACE("layers " + std::to_string(layers) + " width " + std::to_string(o.width) +
                     " -> pack_axis " + std::to_string(axis) + " width " +
                     std::to_string(to.width));
        std::vector<float> logical(420);
        std::mt19937 gen(static_cast<uint32_t>(++trial));
        for (size_t i = 0; i < logical.size(); ++i) logical[i] = static_cast<float>(i) + 0.25f;
        std::shuffle(logical.begin(), logical.end(), gen);
        const KernelArtifact a =
            deploy::relayout_kernel(shape, from, to, testing_support::quad_layer_limits());
        ASSERT_EQ(a.inputs.size(), 1u);
        ASSERT_EQ(a.inputs[0].layers, layers);
        std::vector<float> texels;
        for (const auto& layer : o.pack_targets(logical))
          texels.insert(texels.end(), layer.begin(), layer.end());
        const auto out = harness().run_fragment(a, {texels});
        std::vector<float> expected = to.pack(logical);
        expected.resize(static_cast<size_t>(to.width * to.height * to.channels()), 0.0f);
        ASSERT_EQ(out.at(0).size(), expected.size());
        for (size_t i = 0; i < expected.size(); ++i)
          ASSERT_EQ(out[0][i], expected[i]) << "position " << i << "\n" << a.source;
      }
}

// ---- whole packages on llvmpipe ----

struct Built {
  deploy::PlannedPackage package;
  fs::path dir;
};

/// `webtune build` (deploy::build_package) of `onnx` for gles-frag with `records`.
Built build(const fs::path& onnx, const fs::path& records, const std::string& name,
            bool quad_layers) {
  deploy::BuildOptions options;
  options.model_path = onnx.string();
  options.db_path = records.string();
  options.target = "gles-frag";
  options.device_key = "gles:test";
  options.quad_layers = quad_layers;
  options.out_dir = (fs::path(::testing::TempDir()) / ("quad_layers_" + name)).string();
  fs::remove_all(options.out_dir);
  Built b{deploy::build_package(options), options.out_dir};
  return b;
}

int count_steps(const deploy::PlannedPackage& p, deploy::PackageStep::Role role) {
  int n = 0;
  for (const auto& s : p.manifest.steps)
    n += s.kind == deploy::PackageStep::Kind::kKernel && s.role == role ? 1 : 0;
  return n;
}

int quad_layer_values(const deploy::PlannedPackage& p) {
  int n = 0;
  for (const auto& v : p.manifest.values)
    n += v.storage.kind == Storage::Kind::kTargets && v.storage.targets.quad_layers ? 1 : 0;
  return n;
}

TEST(QuadLayersPackage, MobileNetChainsItsConvolutionsWithoutRelayoutsAndMatches) {
  const fs::path dir = fs::path(::testing::TempDir()) / "quad_layers_mobilenet";
  fs::create_directories(dir);
  const fs::path onnx = dir / "mobilenet_v2.onnx";
  const std::string bytes = graph::zoo_model("mobilenet_v2");
  std::ofstream(onnx, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const fs::path records = dir / "records.db";
  fs::remove(records);
  ASSERT_EQ(
      testing_support::write_quad_layer_records(onnx.string(), records.string(), "gles:test", 16),
      30);  // MobileNet-v2's distinct convolution tasks (and one dense)
  const Built on = build(onnx, records, "on", true);
  const Built off = build(onnx, records, "off", false);
  // Every task from a record; off: a relayout before every convolution but the first, and the
  // residuals' and the pool's; on: only the residuals' (10) and the pool's.
  for (const auto& t : on.package.manifest.tasks)
    if (t.name.rfind("dense", 0) != 0) EXPECT_EQ(t.source, deploy::TaskSource::kRecord) << t.name;
  const int relayouts_on = count_steps(on.package, deploy::PackageStep::Role::kRelayout);
  const int relayouts_off = count_steps(off.package, deploy::PackageStep::Role::kRelayout);
  EXPECT_LE(relayouts_on, 11) << on.package.report();
  EXPECT_GE(relayouts_off, 50) << off.package.report();
  EXPECT_GE(quad_layer_values(on.package), 45);
  EXPECT_EQ(quad_layer_values(off.package), 0);

  const std::vector<float> input = seeded_tensor(7, 0, 3 * 224 * 224);
  const std::vector<float> expected = reference_logits(onnx, input);
  double scale = 0;
  for (float v : expected) scale = std::max(scale, std::abs(double(v)));
  for (const Built* b : {&on, &off}) {
    ModelRunner runner(b->dir.string(), EglContext::create());
    const std::vector<float> got = runner.run(input);
    ASSERT_EQ(got.size(), expected.size());
    double err = 0;
    for (size_t i = 0; i < got.size(); ++i)
      err = std::max(err, std::abs(double(got[i]) - double(expected[i])));
    EXPECT_LE(err, 1e-3 * scale) << (b == &on ? "quad layers" : "relayouts") << ": max |error| "
                                 << err << " over max |logit| " << scale;
  }
}

}  // namespace
}  // namespace webtune
