/// \file config_space_test.cpp
/// Config space properties: splits, bijection, JSON round-trip, filters, sampling, neighbours,
/// over hand-built spaces and the real templates of both GL targets.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <ostream>
#include <set>
#include <string>

#include "codegen/error_no.hpp"
#include "codegen/task.hpp"

namespace webtune {
namespace {

TEST(ConfigSpace, SplitsEnumerateEveryFactorisation) {
  ConfigSpace s;
  s.define_split("x", 12, 2);
  // 12 = 12·1, 6·2, 4·3, 3·4, 2·6, 1·12 (outer factor first)
  EXPECT_EQ(s.knobs()[0].candidates.size(), 6u);
  s.define_split("y", 16, 3, SplitPolicy::kPower2, 4);
  for (const KnobValue& v : s.knobs()[1].candidates) {
    const auto& f = std::get<std::vector<int64_t>>(v);
    ASSERT_EQ(f.size(), 3u);
    EXPECT_EQ(f[0] * f[1] * f[2], 16);
    EXPECT_LE(f[1], 4);
    EXPECT_LE(f[2], 4);
  }
  // inner factors ∈ {1,2,4}², outer = 16/(f1·f2): 9 candidates
  EXPECT_EQ(s.knobs()[1].candidates.size(), 9u);
  EXPECT_THROW(s.define_split("x", 4, 2), std::invalid_argument);  // defined twice
  EXPECT_THROW(s.define_split("z", 0, 2), std::invalid_argument);
}

ConfigSpace small_space() {
  ConfigSpace s;
  s.define_split("tile", 8, 2);
  s.define_knob("unroll", std::vector<int64_t>{1, 2, 4});
  s.define_knob("layout", std::vector<std::string>{"2d", "flat"});
  s.add_constraint("unroll divides the inner tile", [](const ConfigEntity& e) {
    return e.split("tile")[1] % e.get_int("unroll") == 0;
  });
  s.add_device_limit("tile[1] <= max_draw_buffers",
                     [](const ConfigEntity& e, const DeviceLimits& l) {
                       return e.split("tile")[1] <= l.max_draw_buffers;
                     });
  return s;
}

TEST(ConfigSpace, VerboseSplitsAddPowersOfTwoThatRoundTheOuterFactorUp) {
  ConfigSpace verbose;
  verbose.define_split("x", 1000, 2, SplitPolicy::kVerbose, 64);
  std::set<std::vector<int64_t>> values;
  for (const KnobValue& v : verbose.knobs()[0].candidates)
    values.insert(std::get<std::vector<int64_t>>(v));
  // Divisors of 1000 up to 64, and the powers of two that do not divide it (ceil outer).
  for (std::vector<int64_t> expected : std::vector<std::vector<int64_t>>{
           {1000, 1}, {200, 5}, {40, 25}, {20, 50}, {125, 8}, {63, 16}, {32, 32}, {16, 64}})
    EXPECT_TRUE(values.count(expected)) << expected[0] << "x" << expected[1];
  EXPECT_FALSE(values.count({334, 3}));  // neither a divisor nor a power of two
  EXPECT_EQ(values.size(), 13u);         // 1 2 4 5 8 10 16 20 25 32 40 50 64
  EXPECT_TRUE(split_is_exact({125, 8}, 1000));
  EXPECT_FALSE(split_is_exact({63, 16}, 1000));
  EXPECT_FALSE(split_is_exact({0, 16}, 1000));

  // Three parts: the middle factor splits the rounded-up rest, so the product still covers.
  ConfigSpace three;
  three.define_split("y", 7, 3, SplitPolicy::kVerbose);
  for (const KnobValue& v : three.knobs()[0].candidates) {
    const auto& f = std::get<std::vector<int64_t>>(v);
    EXPECT_GE(f[0] * f[1] * f[2], 7);
    EXPECT_LT((f[0] - 1) * f[1] * f[2], 7) << "the outer factor is not the smallest cover";
  }
  // Where every divisor is a power of two, verbose equals factors: old spaces stay as they were.
  ConfigSpace a, b;
  a.define_split("z", 4096, 3, SplitPolicy::kVerbose, 16);
  b.define_split("z", 4096, 3, SplitPolicy::kFactors, 16);
  EXPECT_EQ(a.raw_size(), b.raw_size());
}

// A record made in a factors-only space, read in the grown (verbose) space: its knob values
// name the same candidates, its index does not. kRefuse refuses it; kRenumber decodes the entity.
TEST(ConfigSpace, AnOldRecordOfASpaceThatGrewDecodesByItsKnobValues) {
  ConfigSpace old_space, grown;
  old_space.define_split("x", 96, 2, SplitPolicy::kFactors);
  old_space.define_knob("unroll", std::vector<int64_t>{0, 1});
  grown.define_split("x", 96, 2, SplitPolicy::kVerbose);
  grown.define_knob("unroll", std::vector<int64_t>{0, 1});
  ASSERT_GT(grown.raw_size(), old_space.raw_size());
  int renumbered = 0;
  for (int64_t i = 0; i < old_space.raw_size(); ++i) {
    const ConfigEntity old_entity = old_space.get(i);
    const boost::json::value json =
        boost::json::parse(boost::json::serialize(old_entity.to_json()));
    const ConfigEntity e = grown.from_json(json, ConfigSpace::StaleIndex::kRenumber);
    EXPECT_EQ(e.to_string(), old_entity.to_string());
    if (e.index() == i) continue;
    ++renumbered;
    EXPECT_THROW(grown.from_json(json), MeasureError) << "kRefuse is the default";
  }
  EXPECT_GT(renumbered, 0) << "the test needs configs whose index changed";
}

TEST(ConfigSpace, IndexEntityBijectionAndJsonRoundTrip) {
  ConfigSpace s = small_space();
  ASSERT_EQ(s.raw_size(), 4 * 3 * 2);
  std::set<std::string> seen;
  for (int64_t i = 0; i < s.raw_size(); ++i) {
    ConfigEntity e = s.get(i);
    EXPECT_EQ(e.index(), i);
    EXPECT_EQ(s.from_choices(e.choices()).index(), i);
    EXPECT_TRUE(seen.insert(e.to_string()).second) << "two indices give " << e.to_string();
    ConfigEntity back = s.from_json(boost::json::parse(boost::json::serialize(e.to_json())));
    EXPECT_EQ(back.index(), i);
    EXPECT_EQ(back.choices(), e.choices());
  }
  // The first knob is the least significant digit, as in AutoTVM.
  EXPECT_EQ(s.get(1).choices(), (std::vector<int>{1, 0, 0}));
  EXPECT_THROW(s.get(s.raw_size()), std::out_of_range);
}

TEST(ConfigSpace, JsonWithAWrongKnobKindIsRefused) {
  // AutoTVM's kind letters: "sp" for a split, "ot" for the others (TVM's from_json_dict refuses
  // a kind it does not know); an entity whose letters lie is not one of this space's.
  ConfigSpace s = small_space();
  const auto parse = [&](const char* text) { return s.from_json(boost::json::parse(text)); };
  EXPECT_EQ(parse(R"({"entity":[["tile","sp",[4,2]],["unroll","ot",2],["layout","ot","2d"]]})")
                .split("tile")[1],
            2);
  for (const char* text :
       {R"({"entity":[["tile","ot",[4,2]],["unroll","ot",2],["layout","ot","2d"]]})",
        R"({"entity":[["tile","sp",[4,2]],["unroll","kt",2],["layout","ot","2d"]]})",
        R"({"entity":[["tile","sp",[4,2]],["unroll","ot",2],["layout",null,"2d"]]})"}) {
    try {
      parse(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const MeasureError& e) {
      EXPECT_NE(std::string(e.what()).find("must have the kind"), std::string::npos) << e.what();
    }
  }
}

TEST(ConfigSpace, FiltersAndRefusals) {
  ConfigSpace s = small_space();
  DeviceLimits limits;
  limits.max_draw_buffers = 2;
  s.set_device_limits(limits);
  for (int64_t i = 0; i < s.raw_size(); ++i) {
    ConfigEntity e = s.get(i);
    bool expected = e.split("tile")[1] % e.get_int("unroll") == 0 && e.split("tile")[1] <= 2;
    EXPECT_EQ(s.is_valid(e), expected) << e.to_string();
  }
  std::string why;
  ConfigEntity over = s.from_choices({3, 0, 0});  // tile [1,8]
  EXPECT_FALSE(s.is_valid(over, &why));
  EXPECT_EQ(why, "breaks device limit: tile[1] <= max_draw_buffers");
  try {
    s.parse(R"({"entity":[["tile","sp",[2,4]],["unroll","ot",3],["layout","ot","2d"]]})");
    FAIL() << "a value outside the candidates was accepted";
  } catch (const MeasureError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kInstantiation);
    EXPECT_NE(std::string(e.what()).find("knob 'unroll' has no candidate 3"), std::string::npos);
  }
  EXPECT_THROW(s.parse("24"), MeasureError);
  EXPECT_THROW(s.parse("abc"), MeasureError);
  EXPECT_THROW(s.parse(R"({"entity":[["tile","sp",[2,4]]]})"), MeasureError);  // knobs missing
  EXPECT_THROW(s.parse(R"({"index":0,"entity":[["tile","sp",[2,4]],["unroll","ot",1],)"
                       R"(["layout","ot","2d"]]})"),
               MeasureError);  // index disagrees with the entity
  // AutoTVM's −1 for the outer factor is accepted.
  EXPECT_EQ(s.parse(R"({"entity":[["tile","sp",[-1,4]],["unroll","ot",1],["layout","ot","2d"]]})")
                .split("tile"),
            (std::vector<int64_t>{2, 4}));
}

TEST(ConfigSpace, AKnobAddedLaterReadsOldRecordsAsItsFirstCandidate) {
  ConfigSpace old_space = small_space();
  ConfigSpace s = small_space();
  s.define_knob("fetch", std::vector<std::string>{"texel", "lod"});
  const std::string old_record =
      R"({"entity":[["tile","sp",[2,4]],["unroll","ot",2],["layout","ot","flat"]]})";
  // Without allow_absent the record is outside the space; with it, it is fetch = texel, and
  // its index in the old space still holds: the new knob is the most significant digit.
  EXPECT_THROW(s.parse(old_record), MeasureError);
  s.allow_absent("fetch");
  const ConfigEntity e = s.parse(old_record);
  EXPECT_EQ(e.get_string("fetch"), "texel");
  EXPECT_EQ(e.index(), old_space.parse(old_record).index());
  EXPECT_GT(e.index(), 0);
  EXPECT_EQ(s.raw_size(), 2 * old_space.raw_size());
  // Other knobs stay required.
  EXPECT_THROW(s.parse(R"({"entity":[["tile","sp",[2,4]],["layout","ot","2d"]]})"), MeasureError);
  EXPECT_THROW(s.allow_absent("no_such_knob"), std::out_of_range);
}

TEST(ConfigSpace, SamplingAndNeighboursStayValid) {
  ConfigSpace s = small_space();
  std::mt19937_64 rng(5);
  const auto& valid = s.valid_indices();
  std::vector<ConfigEntity> all = s.sample_distinct(rng, 1000);
  EXPECT_EQ(all.size(), valid.size());
  std::set<int64_t> distinct;
  for (const ConfigEntity& e : all) {
    EXPECT_TRUE(s.is_valid(e));
    distinct.insert(e.index());
  }
  EXPECT_EQ(distinct.size(), valid.size());
  ConfigEntity e = s.sample(rng);
  for (const ConfigEntity& n : s.neighbours(e)) {
    EXPECT_TRUE(s.is_valid(n));
    int differing = 0;
    for (size_t k = 0; k < e.choices().size(); ++k) differing += e.choices()[k] != n.choices()[k];
    EXPECT_EQ(differing, 1);
  }
}

struct TemplateCase {
  Target target;
  Workload workload;
};

/// "Frag_dense64", "Compute_C4": the test name suffix, and what gtest prints for GetParam().
std::string case_name(const TemplateCase& c) {
  return std::string(c.target == Target::kGlesFrag ? "Frag" : "Compute") + "_" + c.workload.name;
}
void PrintTo(const TemplateCase& c, std::ostream* os) {
  *os << case_name(c);
}

class TemplateSpace : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(TemplateSpace, BijectionOverTheWholeSpace) {
  Task task = Task::create(GetParam().workload, GetParam().target);
  const ConfigSpace& s = *task.space;
  ASSERT_GT(s.raw_size(), 1);
  // gles-compute's conv3x3 is 4.87M since k_groups (x4).
  ASSERT_LE(s.raw_size(), 5'000'000) << "space too large to enumerate";
  for (int64_t i = 0; i < s.raw_size(); ++i) {
    ConfigEntity e = s.get(i);
    ASSERT_EQ(s.from_choices(e.choices()).index(), i);
    if (i % 97 == 0) {  // JSON for a spread of indices keeps the test fast on large spaces
      ASSERT_EQ(s.from_json(boost::json::parse(boost::json::serialize(e.to_json()))).index(), i);
    }
  }
  EXPECT_FALSE(s.valid_indices().empty());
  EXPECT_TRUE(s.is_valid(task.default_config())) << task.default_config().to_string();
}

// A config is valid under tight limits exactly when it meets the structural constraints and the
// kernel it builds (under generous limits) fits those limits.
TEST_P(TemplateSpace, DeviceFiltersRemoveExactlyTheConfigsOverTheLimits) {
  DeviceLimits generous;
  generous.max_texture_size = 1 << 20;
  generous.max_draw_buffers = 16;
  generous.max_workgroup_invocations = 1 << 20;
  generous.max_workgroup_size_x = generous.max_workgroup_size_y = generous.max_workgroup_size_z =
      1 << 20;
  generous.max_shared_memory_bytes = 1 << 30;
  generous.max_varying_vectors = generous.max_feedback_components = 1 << 20;
  DeviceLimits tight;
  tight.max_varying_vectors = 4;
  tight.max_feedback_components = 8;
  tight.max_texture_size = 48;
  tight.max_draw_buffers = 1;
  tight.max_workgroup_invocations = 64;
  tight.max_workgroup_size_x = 32;
  tight.max_workgroup_size_y = 16;
  tight.max_workgroup_size_z = 1;
  tight.max_shared_memory_bytes = 2048;
  Task loose = Task::create(GetParam().workload, GetParam().target, generous);
  Task strict = Task::create(GetParam().workload, GetParam().target, tight);
  int64_t removed = 0;
  for (int64_t i : loose.space->valid_indices()) {
    ConfigEntity e = loose.space->get(i);
    KernelArtifact a = loose.build(e);
    bool fits = true;
    if (a.target == Target::kGlesFrag) {
      for (const TensorLayout& l : a.inputs)
        fits = fits && l.width <= tight.max_texture_size && l.height <= tight.max_texture_size;
      const OutputLayout& o = a.output;
      if (o.feedback)  // a buffer: only the varyings and captured components are limited
        fits = fits && o.varyings() <= tight.max_varying_vectors &&
               o.rows_per_item * o.channels <= tight.max_feedback_components;
      else
        fits = fits && o.width <= tight.max_texture_size && o.height <= tight.max_texture_size &&
               o.rows_per_item <= tight.max_draw_buffers;
    } else {
      fits = a.workgroup[0] * a.workgroup[1] * a.workgroup[2] <= tight.max_workgroup_invocations &&
             a.workgroup[0] <= tight.max_workgroup_size_x &&
             a.workgroup[1] <= tight.max_workgroup_size_y &&
             a.workgroup[2] <= tight.max_workgroup_size_z &&
             a.shared_memory_bytes <= tight.max_shared_memory_bytes;
    }
    ASSERT_EQ(strict.space->is_valid(strict.space->get(i)), fits) << e.to_string();
    removed += !fits;
  }
  EXPECT_GT(removed, 0) << "the tight limits should remove some configs";
  // Invalid under the loose limits stays invalid under the tight ones.
  EXPECT_LE(strict.space->valid_indices().size(), loose.space->valid_indices().size());
}

TEST_P(TemplateSpace, BuildingAnInvalidConfigIsAnInstantiationError) {
  DeviceLimits tight;
  tight.max_texture_size = 8;
  tight.max_draw_buffers = 1;
  tight.max_workgroup_invocations = 1;
  tight.max_workgroup_size_x = tight.max_workgroup_size_y = tight.max_workgroup_size_z = 1;
  tight.max_shared_memory_bytes = 0;
  Task task = Task::create(GetParam().workload, GetParam().target, tight);
  int64_t invalid = -1;
  for (int64_t i = 0; i < task.space->raw_size() && invalid < 0; ++i)
    if (!task.space->is_valid_index(i)) invalid = i;
  ASSERT_GE(invalid, 0);
  try {
    task.build(task.space->get(invalid));
    FAIL() << "built an invalid config";
  } catch (const MeasureError& e) {
    EXPECT_EQ(e.error(), MeasureErrorNo::kInstantiation);
    EXPECT_NE(std::string(e.what()).find("is not valid: breaks"), std::string::npos);
  }
}

std::vector<TemplateCase> template_cases() {
  std::vector<TemplateCase> cases;
  for (Target t : {Target::kGlesFrag, Target::kGlesCompute}) {
    cases.push_back({t, Workload::dense(64, 64, 64, "dense64")});
    cases.push_back({t, Workload::conv2d(1, 8, 12, 12, 16, 3, 1, 1, "conv3x3")});
    cases.push_back({t, Workload::depthwise_conv2d(1, 8, 12, 12, 3, 1, 1, "dw3x3")});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Templates, TemplateSpace, ::testing::ValuesIn(template_cases()),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace webtune
