/// \file template_test.cpp
/// Pins what each target's template produces (issue 14): the size of its config space, its
/// default entity and the hash of the kernel sources of a few entities, plus the cost model's
/// feature vector of those entities. Records, AutoTVM exports and transferred XGBoost models
/// depend on all of these staying bit-identical while codegen is reorganised; a change here
/// means existing records would change meaning.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/task.hpp"
#include "codegen/template.hpp"
#include "codegen/wasm_emitter.hpp"
#include "tuner/features.hpp"
#include "tuner/tune_target.hpp"

namespace webtune {
namespace {

/// FNV-1a, 64 bit: stable across standard libraries, unlike std::hash.
uint64_t fnv1a(const void* data, size_t size, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

struct Pin {
  const char* label;  ///< test name suffix
  Target target;
  Workload workload;
  int64_t raw_size;
  int64_t valid_size;
  const char* default_entity;  ///< ConfigEntity::to_json of the default, serialised
  /// Hash of the sources of the default, the first, middle and last valid entity, in order.
  const char* source_hash;
  /// Hash of the feature vectors (float bytes) and names of the same entities.
  const char* feature_hash;
};

/// What gtest prints for GetParam(): the label, not the struct's bytes.
void PrintTo(const Pin& pin, std::ostream* os) {
  *os << pin.label;
}

class TemplatePin : public testing::TestWithParam<Pin> {};

TEST_P(TemplatePin, SpaceDefaultSourcesAndFeaturesAreUnchanged) {
  const Pin& pin = GetParam();
  if (pin.target == Target::kWasm && !wasm_emitter_available())
    GTEST_SKIP() << "built without LLVM";
  const Task task = Task::create(pin.workload, pin.target);
  EXPECT_EQ(task.space->raw_size(), pin.raw_size);
  const std::vector<int64_t>& valid = task.space->valid_indices();
  EXPECT_EQ(static_cast<int64_t>(valid.size()), pin.valid_size);
  ASSERT_FALSE(valid.empty());
  const ConfigEntity def = task.default_config();
  EXPECT_EQ(boost::json::serialize(def.to_json()), pin.default_entity);

  std::vector<ConfigEntity> entities = {def, task.space->get(valid.front()),
                                        task.space->get(valid[valid.size() / 2]),
                                        task.space->get(valid.back())};
  uint64_t sources = 1469598103934665603ull, features = sources;
  for (const ConfigEntity& e : entities) {
    const KernelArtifact a = task.build(e);
    sources = fnv1a(a.source.data(), a.source.size(), sources);
    const std::vector<float> f = config_features(task, e);
    features = fnv1a(f.data(), f.size() * sizeof(float), features);
  }
  for (const std::string& name : feature_names(task))
    features = fnv1a(name.data(), name.size() + 1, features);
  EXPECT_EQ(hex(sources), pin.source_hash);
  EXPECT_EQ(hex(features), pin.feature_hash);
}

TEST(TemplateRegistry, ListsEveryTemplateOnceByTargetThenOp) {
  std::vector<std::string> names;
  for (const Template* t : all_templates()) names.push_back(t->name());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "dense.gles-frag", "conv2d_nchw.gles-frag",
                       "depthwise_conv2d_nchw.gles-frag", "dense.gles-compute",
                       "conv2d_nchw.gles-compute", "depthwise_conv2d_nchw.gles-compute",
                       "dense.webgpu", "conv2d_nchw.webgpu", "depthwise_conv2d_nchw.webgpu",
                       "dense.wasm", "conv2d_nchw.wasm", "depthwise_conv2d_nchw.wasm"}));
  EXPECT_EQ(targets(), (std::vector<Target>{Target::kGlesFrag, Target::kGlesCompute,
                                            Target::kWebgpu, Target::kWasm}));
  EXPECT_EQ(target_names(), "gles-frag, gles-compute, webgpu, wasm");
}

TEST(TemplateRegistry, FindsTheTemplateOfAWorkloadAndTaskUsesIt) {
  const Workload conv = Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1);
  const Template& t = template_for(Target::kWebgpu, conv);
  EXPECT_EQ(t.name(), "conv2d_nchw.webgpu");
  EXPECT_EQ(t.target(), Target::kWebgpu);
  EXPECT_EQ(t.op(), OpKind::kConv2d);
  EXPECT_TRUE(t.accepts(conv));
  EXPECT_FALSE(t.accepts(Workload::dense(8, 8, 8)));
  EXPECT_EQ(Task::create(conv, Target::kWebgpu).kernel_template, &t);
}

TEST(TemplateRegistry, EveryTargetHasEveryOpAndAMissingOneIsRefusedByName) {
  // Since issue 14 (depthwise conv2d on webgpu and wasm) every target has every op.
  const Workload dw = Workload::depthwise_conv2d(1, 8, 12, 12, 3, 1, 1);
  for (Target t : targets())
    for (const Workload& w :
         {Workload::dense(8, 8, 8), Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1), dw})
      EXPECT_EQ(template_for(t, w).op(), w.op) << target_name(t) << " " << op_name(w.op);
  EXPECT_EQ(Task::create(dw, Target::kWebgpu).kernel_template->name(),
            "depthwise_conv2d_nchw.webgpu");
  EXPECT_EQ(Task::create(dw, Target::kWasm).kernel_template->name(), "depthwise_conv2d_nchw.wasm");
  // A target value outside the registry (a newer record's) is refused with what exists.
  try {
    template_for(static_cast<Target>(99), dw);
    FAIL() << "found a template for target 99";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no template for depthwise_conv2d (templates: none)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Task().get_template(), std::logic_error);
}

TEST(TuneTargets, TheTableNamesKernelsAgentsAndBrowsers) {
  std::vector<std::string> names;
  for (const TuneTarget& t : tune_targets()) names.push_back(t.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"gles-frag", "gles-compute", "webgl2", "webgpu", "wasm"}));
  const TuneTarget webgl2 = tune_target_from_name("webgl2");
  EXPECT_EQ(webgl2.kernel, Target::kGlesFrag);
  EXPECT_EQ(webgl2.key, "webgl2");
  EXPECT_TRUE(webgl2.browser);
  const TuneTarget compute = tune_target_from_name("gles-compute");
  EXPECT_EQ(compute.kernel, Target::kGlesCompute);
  EXPECT_EQ(compute.key, "gles");
  EXPECT_FALSE(compute.browser);
  EXPECT_EQ(target_key(Target::kGlesFrag), "gles");
  EXPECT_EQ(target_key(Target::kWasm), "wasm");
  EXPECT_TRUE(runs_natively(Target::kGlesFrag));
  EXPECT_TRUE(runs_natively(Target::kGlesCompute));
  EXPECT_FALSE(runs_natively(Target::kWebgpu));
  EXPECT_FALSE(runs_natively(Target::kWasm));
  // Every kernel kind of the registry can be tuned somewhere.
  for (Target t : targets()) EXPECT_NE(target_key(t), "unknown") << target_name(t);
}

TEST(TuneTargets, UnknownNamesAreRefusedNamingTheTable) {
  try {
    tune_target_from_name("cuda");
    FAIL() << "accepted cuda";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown target 'cuda' (known: gles-frag, gles-compute, webgl2, "
                 "webgpu, wasm)");
  }
  try {
    target_from_name("webgl2");  // a tune target, not a kernel kind
    FAIL() << "accepted webgl2 as a kernel kind";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "unknown target 'webgl2' (known: gles-frag, gles-compute, webgpu, wasm)");
  }
}

TEST(TuneTargets, HelpTextListsEachTargetWithItsTemplatesOps) {
  EXPECT_EQ(tune_target_help(),
            "gles-frag (GLSL ES 3.00 fragment shaders; dense, conv2d, depthwise_conv2d), "
            "gles-compute (GLSL ES 3.10 compute shaders; dense, conv2d, depthwise_conv2d), "
            "webgl2 (gles-frag kernels in browser tabs; dense, conv2d, depthwise_conv2d), "
            "webgpu (WGSL, browser tabs; dense, conv2d, depthwise_conv2d), "
            "wasm (LLVM-built WebAssembly, browser tabs; dense, conv2d, depthwise_conv2d)");
}

TEST(TemplateFeatures, TheCostModelsAnalyticFeaturesAreTheTemplates) {
  for (const Template* t : all_templates()) {
    if (t->target() == Target::kWasm && !wasm_emitter_available()) continue;
    const Workload w = t->op() == OpKind::kDense ? Workload::dense(64, 96, 48)
                       : t->op() == OpKind::kConv2d
                           ? Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1)
                           : Workload::depthwise_conv2d(1, 8, 12, 12, 3, 2, 1);
    const Task task = Task::create(w, t->target());
    const ConfigEntity e = task.default_config();
    std::vector<float> expected;
    if (t->features_need_artifact()) {
      const KernelArtifact a = task.build(e);
      expected = t->features(w, e, &a);
    } else {
      expected = t->features(w, e, nullptr);
    }
    ASSERT_EQ(expected.size(), Template::kAnalyticFeatureCount) << t->name();
    const std::vector<float> all = config_features(task, e);
    ASSERT_GT(all.size(), expected.size()) << t->name();
    EXPECT_EQ(
        std::vector<float>(all.end() - static_cast<std::ptrdiff_t>(expected.size()), all.end()),
        expected)
        << t->name();
    // The analytic part says something: a valid default has work split over invocations.
    EXPECT_NE(expected[2], 0.0f) << t->name();
    const std::vector<std::string> names = feature_names(task);
    EXPECT_EQ(names.size(), all.size());
    EXPECT_EQ(names.back(), "channels_output");
  }
}

// Issue 14, non-divisible tiling: the gles-compute and webgpu pins changed deliberately when
// their tile splits became kVerbose (powers of two that do not divide an axis, guarded edges).
// Spaces grew (gles-compute dense 1138176 -> 1238016 raw, conv 852480 -> 1218240, depthwise
// 1296 -> 2704; webgpu dense 218624 -> 247296, conv 161280 -> 237600), so indices and the
// first / middle / last valid entities of the GEMM pins moved; the default entities are the
// same (depthwise's index 30 -> 56; its hashes did not change). Exact splits still build the
// kernels they built before:
// tests/gemm_schedule_test.cpp's OldRecordsDecodeToTheSameKernels pins those hashes.
// Cross-workgroup split-K (gles-compute's k_groups {1, 2, 4, 8}, the GEMM space's last knob):
// the gles-compute dense and conv pins changed deliberately. Raw spaces grew 4x (dense 1238016
// -> 4952064, conv 1218240 -> 4872960), valid ones by the configs with shared memory and
// k_groups <= k_outer (dense 67714 -> 190317, conv 74085 -> 242260); the defaults are the same
// entities and indices with k_groups 1 appended, and build the same kernels, but the middle and
// last valid entities now have k_groups > 1 (source hashes) and every feature vector has the
// knob's feature (feature hashes). Records without the knob read as k_groups 1
// (tests/k_groups_test.cpp). Depthwise and every webgpu pin are unchanged.
// The output wrap of gles-frag (out_wrap {2048, sqrt}, the template's last knob): the three frag
// pins changed deliberately. Raw spaces doubled (dense 27648 -> 55296, conv 36864 -> 73728,
// depthwise 18432 -> 36864) and the valid ones grew by the flat-output configs that wrap at
// ceil(sqrt(items)) (dense 4848 -> 5568, conv 10752 -> 12768, depthwise 3312 -> 3888); the
// defaults are the same entities and indices with out_wrap 2048 appended and build the same
// kernels (tests/emitter_test.cpp FragOutputWrap), but the middle and last valid entities moved
// and every feature vector has the knob's feature.
const Workload kDense = Workload::dense(64, 96, 48, "dense");
const Workload kConv = Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1, "conv");
const Workload kDepthwise = Workload::depthwise_conv2d(1, 8, 12, 12, 3, 2, 1, "dw");

INSTANTIATE_TEST_SUITE_P(
    Templates, TemplatePin,
    testing::Values(
        Pin{"Frag_dense", Target::kGlesFrag, kDense, 55296, 5568,
            R"({"index":0,"entity":[["out_rows","ot",1],["out_cols","ot",1],["packing","ot","none"],["unroll","ot",1],["layout_data","ot","2d"],["layout_weight","ot","2d"],["layout_out","ot","2d"],["fetch","ot","texel"],["stage","ot","fragment"],["rows_scale","ot",1],["col_scale","ot",1],["out_wrap","ot","2048"]]})",
            "2244bc2bbe6a24e9", "83d3da88b1ad1024"},
        Pin{"Frag_conv", Target::kGlesFrag, kConv, 73728, 12768,
            R"({"index":0,"entity":[["out_rows","ot",1],["out_cols","ot",1],["packing","ot","none"],["algo","ot","direct"],["order","ot","crs"],["unroll","ot",1],["layout_data","ot","2d"],["layout_weight","ot","2d"],["layout_out","ot","2d"],["fetch","ot","texel"],["stage","ot","fragment"],["rows_scale","ot",1],["out_wrap","ot","2048"]]})",
            "9fc237298dcf0f20", "8f1e486b583616d6"},
        Pin{"Frag_dw", Target::kGlesFrag, kDepthwise, 36864, 3888,
            R"({"index":0,"entity":[["out_rows","ot",1],["out_cols","ot",1],["packing","ot","none"],["algo","ot","direct"],["unroll","ot",1],["layout_data","ot","2d"],["layout_weight","ot","2d"],["layout_out","ot","2d"],["fetch","ot","texel"],["stage","ot","fragment"],["rows_scale","ot",1],["out_wrap","ot","2048"]]})",
            "7c28c5cc1cef0adc", "a0b1c66876f7515e"},
        Pin{"Compute_dense", Target::kGlesCompute, kDense, 4952064, 190317,
            R"({"index":133,"entity":[["tile_y","sp",[8,8,1]],["tile_x","sp",[12,8,1]],["tile_k","sp",[48,1]],["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1],["double_buffer","ot",0],["k_split","ot",1],["k_groups","ot",1]]})",
            "065068974528e14f", "89ef1005e59fb2ea"},
        Pin{"Compute_conv", Target::kGlesCompute, kConv, 4872960, 242260,
            R"({"index":78,"entity":[["tile_y","sp",[2,8,1]],["tile_x","sp",[18,8,1]],["tile_k","sp",[72,1]],["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1],["double_buffer","ot",0],["k_split","ot",1],["k_groups","ot",1]]})",
            "fc60f667fbed3acb", "b2fc90f7f6dade4c"},
        Pin{"Compute_dw", Target::kGlesCompute, kDepthwise, 2704, 2672,
            R"({"index":56,"entity":[["tile_x","sp",[1,6,1]],["tile_y","sp",[1,6,1]],["tile_c","sp",[8,1]],["use_shared","ot",0],["unroll","ot",0]]})",
            "138db571d6ee4fe8", "a1617ecfd8e9038a"},
        Pin{"Webgpu_dense", Target::kWebgpu, kDense, 247296, 28780,
            R"({"index":143,"entity":[["tile_y","sp",[8,8,1]],["tile_x","sp",[12,8,1]],["tile_k","sp",[48,1]],["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1]]})",
            "261b4053605915bf", "d0afb9874486d067"},
        Pin{"Webgpu_conv", Target::kWebgpu, kConv, 237600, 42576,
            R"({"index":78,"entity":[["tile_y","sp",[2,8,1]],["tile_x","sp",[18,8,1]],["tile_k","sp",[72,1]],["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1]]})",
            "a96d339f0995a5db", "f50311d7c4674a55"},
        Pin{"Webgpu_dw", Target::kWebgpu, kDepthwise, 20280, 11646,
            R"({"index":560,"entity":[["tile_c","sp",[8,1,1]],["tile_y","sp",[1,6,1]],["tile_x","sp",[1,6,1]],["vec4","ot",0],["use_shared","ot",0],["unroll","ot",0]]})",
            "a443d4d42fc21435", "adb6271ff1f3dd04"},
        // The fma knob (relaxed SIMD) doubled the wasm spaces; without relaxed_simd in the
        // device limits the valid configs, the default's index and every module are as before.
        // Re-pinned for the split knob (2026-11-29): the raw space doubled, the default names
        // split cols with its old index, and the features gained the knob's column. On one
        // thread (these pins' device) split rows is invalid, so the valid configs and their
        // modules are those from before.
        // Re-pinned for the balance knob (2026-11-29) the same way: raw space doubled, the
        // default names balance static with its old index, the features gained the knob's
        // column; steal needs 2 threads, so the valid configs and modules are unchanged.
        Pin{"Wasm_dense", Target::kWasm, kDense, 35840, 592,
            R"({"index":0,"entity":[["mr","ot",1],["nr","ot",1],["unroll_k","ot",1],["simd","ot",0],["order","ot","rows_outer"],["pack_b","ot",0],["threads","ot",1],["fma","ot",0],["split","ot","cols"],["balance","ot","static"]]})",
            "e2954631323f6295", "0db5a52c09e6a53a"},
        // Re-pinned when im2col gathered groups of 4 interior pixels with v128 loads (simd
        // modules changed; the space, the default and the features did not).
        // Re-pinned for the split and balance knobs as Wasm_dense was.
        Pin{"Wasm_conv", Target::kWasm, kConv, 35840, 296,
            R"({"index":560,"entity":[["mr","ot",1],["nr","ot",1],["unroll_k","ot",1],["simd","ot",0],["order","ot","rows_outer"],["pack_b","ot",1],["threads","ot",1],["fma","ot",0],["split","ot","cols"],["balance","ot","static"]]})",
            "c73c811d5be4967d", "41a928517c623fdd"},
        // Issue 14: wasm's depthwise template (new; pinned from its first version). Re-pinned
        // when the padded plane became polyphase for stride > 1 and its padding one fill per
        // run: the modules and the scratch size (a feature) changed, the space and the
        // default did not. Re-pinned for the balance knob as Wasm_dense was.
        Pin{"Wasm_dw", Target::kWasm, kDepthwise, 3840, 144,
            R"({"index":0,"entity":[["tile_c","ot",1],["tile_h","ot",1],["tile_w","ot",1],["simd","ot",0],["unroll_rs","ot",0],["threads","ot",1],["fma","ot",0],["balance","ot","static"]]})",
            "83306cd0015bc5ea", "d4c7079da852a144"}),
    [](const testing::TestParamInfo<Pin>& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace webtune
