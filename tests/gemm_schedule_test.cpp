/// \file gemm_schedule_test.cpp
/// The shared GEMM schedule (gemm_schedule.hpp) and the checked knob reader (knob_reader.hpp)
/// without a GL device: what each target turns on, the thread → output mapping covering every
/// output exactly once on both targets, and KnobReader's errors naming template and knob.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
#include <random>
#include <string>

#include "codegen/error_no.hpp"
#include "codegen/gemm_schedule.hpp"
#include "codegen/glsl_compute_emitter.hpp"
#include "codegen/knob_reader.hpp"
#include "codegen/task.hpp"
#include "codegen/wgsl_emitter.hpp"

namespace webtune {
namespace {

/// The message of the MeasureError(kInstantiation) that `f` throws, or "" (a test failure).
template <typename F>
std::string instantiation_error(F&& f) {
  try {
    f();
  } catch (const MeasureError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kInstantiation) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no MeasureError";
  return "";
}

ConfigSpace reader_space() {
  ConfigSpace s;
  s.define_split("tile", 12, 2);
  s.define_split("odd", 7, 2, SplitPolicy::kVerbose);
  s.define_knob("unroll", std::vector<int64_t>{0, 2});
  s.define_knob("layout", std::vector<std::string>{"2d", "flat"});
  return s;
}

TEST(KnobReader, ReadsSplitsIntsAndStringsByName) {
  const ConfigSpace s = reader_space();
  // tile = [3,4], odd = [2,4] (ceil(7/4) = 2), unroll = 2, layout = flat.
  const ConfigEntity e = s.from_json(
      boost::json::parse(R"({"entity":[["tile","sp",[3,4]],["odd","sp",[2,4]],["unroll","ot",2],)"
                         R"(["layout","ot","flat"]]})"));
  const KnobReader r(e, "test dense");
  EXPECT_EQ(r.split("tile", 2, 12), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(r.split("odd", 2, 7, SplitCover::kCeil), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(r.get_int("unroll"), 2);
  EXPECT_EQ(r.get_string("layout"), "flat");
  EXPECT_EQ(r.template_name(), "test dense");
}

TEST(KnobReader, RefusesNamingTheTemplateAndTheKnob) {
  const ConfigSpace s = reader_space();
  const ConfigEntity e = s.from_json(
      boost::json::parse(R"({"entity":[["tile","sp",[3,4]],["odd","sp",[2,4]],["unroll","ot",0],)"
                         R"(["layout","ot","2d"]]})"));
  const KnobReader r(e, "webgpu conv2d");
  EXPECT_EQ(instantiation_error([&] { r.get_int("vec4"); }),
            "webgpu conv2d: knob 'vec4' is missing");
  EXPECT_EQ(instantiation_error([&] { r.get_int("layout"); }),
            "webgpu conv2d: knob 'layout' is a string knob, not an integer knob");
  EXPECT_EQ(instantiation_error([&] { r.get_string("tile"); }),
            "webgpu conv2d: knob 'tile' is a split, not a string knob");
  EXPECT_EQ(instantiation_error([&] { r.split("unroll", 2, 12); }),
            "webgpu conv2d: knob 'unroll' is an integer knob, not a split");
  EXPECT_EQ(instantiation_error([&] { r.get_int("unroll", 1); }),
            "webgpu conv2d: knob 'unroll' must be at least 1");
  EXPECT_EQ(instantiation_error([&] { r.split("tile", 3, 12); }),
            "webgpu conv2d: split 'tile' has 2 factors, not 3");
  // A split of another extent (a record of another workload) is refused, exact or not.
  EXPECT_EQ(instantiation_error([&] { r.split("tile", 2, 16); }),
            "webgpu conv2d: split 'tile' does not factor this workload's extent 16");
  EXPECT_EQ(instantiation_error([&] { r.split("odd", 2, 7); }),
            "webgpu conv2d: split 'odd' does not factor this workload's extent 7");
  EXPECT_EQ(instantiation_error([&] { r.split("odd", 2, 9, SplitCover::kCeil); }),
            "webgpu conv2d: split 'odd' does not cover this workload's extent 9");
}

TEST(GemmSchedule, ViewsDenseAndConv2dAsAGemm) {
  const GemmView d = GemmView::of(Workload::dense(5, 7, 9), GemmColumns::kAllImages);
  EXPECT_FALSE(d.conv);
  EXPECT_EQ(d.rows, 5);
  EXPECT_EQ(d.cols, 7);
  EXPECT_EQ(d.depth, 9);
  const Workload conv = Workload::conv2d(2, 3, 9, 9, 5, 3, 2, 1);  // 5x5 outputs
  const GemmView all = GemmView::of(conv, GemmColumns::kAllImages);
  EXPECT_EQ(all.rows, 5);
  EXPECT_EQ(all.cols, 2 * 25);
  EXPECT_EQ(all.depth, 27);
  EXPECT_EQ(all.batch, 1);
  const GemmView per = GemmView::of(conv, GemmColumns::kPerImage);
  EXPECT_EQ(per.cols, 25);
  EXPECT_EQ(per.batch, 2);
  EXPECT_THROW(
      GemmView::of(Workload::depthwise_conv2d(1, 4, 8, 8, 3, 1, 1), GemmColumns::kPerImage),
      std::invalid_argument);
}

TEST(GemmSchedule, EachTargetHasItsOwnKnobsOverTheSameTiling) {
  const Workload wl = Workload::dense(64, 96, 48);
  const auto gles = glsl_compute_space(wl);
  const auto wgsl = wgsl_space(wl);
  std::vector<std::string> gles_names, wgsl_names;
  for (const Knob& k : gles->knobs()) gles_names.push_back(k.name);
  for (const Knob& k : wgsl->knobs()) wgsl_names.push_back(k.name);
  EXPECT_EQ(gles_names,
            (std::vector<std::string>{"tile_y", "tile_x", "tile_k", "use_shared", "vec4", "unroll",
                                      "double_buffer", "k_split", "k_groups"}));
  EXPECT_EQ(wgsl_names, (std::vector<std::string>{"tile_y", "tile_x", "tile_k", "use_shared",
                                                  "vec4", "unroll"}));
  // Same depth tiles; gles-compute caps workgroup sides at 32, webgpu at 64.
  EXPECT_EQ(gles->knobs()[2].candidates, wgsl->knobs()[2].candidates);
  EXPECT_LT(gles->knobs()[1].candidates.size(), wgsl->knobs()[1].candidates.size());
}

/// Over every workgroup and invocation of `artifact`'s dispatch, the outputs the schedule says
/// an invocation stores cover the view's C of every layer exactly once. With k_groups the
/// dispatch's z holds the k-groups of one layer (batch 1), of which one stores each tile.
void expect_every_output_once(const GemmSchedule& schedule, const ConfigEntity& e,
                              const KernelArtifact& a) {
  const GemmView& v = schedule.view();
  const GemmTiling t = schedule.read(e);
  ASSERT_EQ(a.dispatch[2], v.batch * t.k_groups) << e.to_string();
  std::vector<int> count(static_cast<size_t>(v.batch * v.rows * v.cols), 0);
  for (int64_t bz = 0; bz < v.batch; ++bz)
    for (int64_t by = 0; by < a.dispatch[1]; ++by)
      for (int64_t bx = 0; bx < a.dispatch[0]; ++bx)
        for (int64_t ty = 0; ty < t.threads_y; ++ty)
          for (int64_t tx = 0; tx < t.threads_x; ++tx)
            for (const auto& [r, c] : schedule.owned_outputs(t, bx, by, tx, ty)) {
              ASSERT_TRUE(r >= 0 && r < v.rows && c >= 0 && c < v.cols) << e.to_string();
              ++count[static_cast<size_t>((bz * v.rows + r) * v.cols + c)];
            }
  for (size_t i = 0; i < count.size(); ++i) ASSERT_EQ(count[i], 1) << i << " " << e.to_string();
}

struct MappingCase {
  const char* name;
  Target target;
  Workload workload;
};

/// Failure messages and ctest's listing name the case, not its bytes.
void PrintTo(const MappingCase& c, std::ostream* os) {
  *os << c.name << " (" << target_name(c.target) << ", " << c.workload.key() << ")";
}

class GemmMapping : public testing::TestWithParam<MappingCase> {};

TEST_P(GemmMapping, EveryOutputIsStoredExactlyOnce) {
  const MappingCase& c = GetParam();
  const Task task = Task::create(c.workload, c.target);
  const GemmSchedule schedule = c.target == Target::kGlesCompute
                                    ? glsl_compute_gemm_schedule(c.workload)
                                    : wgsl_gemm_schedule(c.workload);
  std::mt19937_64 rng(31);
  int checked = 0;
  for (const ConfigEntity& e : task.space->sample_distinct(rng, 30)) {
    const KernelArtifact a = task.build(e);
    EXPECT_EQ(a.workgroup[0], schedule.read(e).threads_x);
    expect_every_output_once(schedule, e, a);
    ++checked;
  }
  EXPECT_EQ(checked, 30);
}

INSTANTIATE_TEST_SUITE_P(
    Targets, GemmMapping,
    testing::Values(
        MappingCase{"Compute_dense", Target::kGlesCompute, Workload::dense(32, 48, 16)},
        MappingCase{"Compute_conv", Target::kGlesCompute, Workload::conv2d(2, 4, 8, 8, 8, 3, 1, 1)},
        MappingCase{"Webgpu_dense", Target::kWebgpu, Workload::dense(32, 48, 16)},
        MappingCase{"Webgpu_conv", Target::kWebgpu, Workload::conv2d(2, 4, 8, 8, 8, 3, 1, 1)}),
    [](const testing::TestParamInfo<MappingCase>& info) { return std::string(info.param.name); });

/// FNV-1a, 64 bit, as hex (stable across standard libraries).
std::string source_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

struct OldRecord {
  Target target;
  Workload workload;
  const char* entity;  ///< entity JSON as records from before kVerbose splits hold it
  const char* hash;    ///< source_hash of the kernel it built then
};

// Records written before the GEMM and depthwise splits became kVerbose (non-divisible tiles)
// must still decode, by knob name, to the very kernel they measured: exact splits emit no edge
// guard. The hashes are those of the kernels built before the change.
TEST(GemmSchedule, OldRecordsDecodeToTheSameKernels) {
  const Workload dense = Workload::dense(64, 96, 48, "dense");
  const Workload conv = Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1, "conv");
  const Workload dw = Workload::depthwise_conv2d(1, 8, 12, 12, 3, 2, 1, "dw");
  const OldRecord records[] = {
      {Target::kGlesCompute, dense,
       R"([["tile_y","sp",[8,8,1]],["tile_x","sp",[12,8,1]],["tile_k","sp",[48,1]],)"
       R"(["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1],["double_buffer","ot",0],)"
       R"(["k_split","ot",1]])",
       "7f0f2f37cd79b564"},
      {Target::kGlesCompute, dense,
       R"([["tile_y","sp",[1,8,8]],["tile_x","sp",[3,4,8]],["tile_k","sp",[6,8]],)"
       R"(["use_shared","ot",1],["vec4","ot",1],["unroll","ot",1],["double_buffer","ot",1],)"
       R"(["k_split","ot",2]])",
       "d56a4c7b22ddfbfe"},
      {Target::kGlesCompute, conv,
       R"([["tile_y","sp",[2,4,2]],["tile_x","sp",[-1,8,3]],["tile_k","sp",[9,8]],)"
       R"(["use_shared","ot",1],["vec4","ot",0],["unroll","ot",2],["double_buffer","ot",1],)"
       R"(["k_split","ot",1]])",
       "d36da19819d8b8fa"},
      {Target::kGlesCompute, dw,
       R"([["tile_x","sp",[1,3,2]],["tile_y","sp",[3,2,1]],["tile_c","sp",[2,4]],)"
       R"(["use_shared","ot",1],["unroll","ot",1]])",
       "0d8edd9f343f7a75"},
      {Target::kWebgpu, dense,
       R"([["tile_y","sp",[8,8,1]],["tile_x","sp",[12,8,1]],["tile_k","sp",[48,1]],)"
       R"(["use_shared","ot",0],["vec4","ot",0],["unroll","ot",1]])",
       "0a3a4ef29ca2bde1"},
      {Target::kWebgpu, conv,
       R"([["tile_y","sp",[2,4,2]],["tile_x","sp",[9,4,4]],["tile_k","sp",[9,8]],)"
       R"(["use_shared","ot",1],["vec4","ot",1],["unroll","ot",2]])",
       "e0cb05c7f6bd8e8f"},
  };
  for (const OldRecord& r : records) {
    const Task task = Task::create(r.workload, r.target);
    const ConfigEntity e = task.space->parse(std::string(R"({"entity":)") + r.entity + "}");
    std::string why;
    EXPECT_TRUE(task.space->is_valid(e, &why)) << r.entity << ": " << why;
    EXPECT_EQ(source_hash(task.build(e).source), r.hash) << r.entity;
  }
}

}  // namespace
}  // namespace webtune
