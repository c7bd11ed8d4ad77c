/// \file layout_test.cpp
/// Device layouts: packing inputs into texels and unpacking render targets.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>

#include "codegen/kernel_artifact.hpp"

namespace webtune {
namespace {

std::vector<float> iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(TensorLayout, ScalarLayoutIsTheRowMajorTensor) {
  TensorLayout l{{3, 5}, -1, 5, 3};
  EXPECT_EQ(l.pack(iota(15)), iota(15));
}

TEST(TensorLayout, PacksFourAlongTheLastAxisWithZeroPadding) {
  TensorLayout l{{2, 6}, 1, 2, 2};  // packed shape [2, 2]
  EXPECT_EQ(l.packed_shape(), (std::vector<int64_t>{2, 2}));
  std::vector<float> p = l.pack(iota(12));
  std::vector<float> expected = {0, 1, 2, 3, 4, 5, 0, 0, 6, 7, 8, 9, 10, 11, 0, 0};
  EXPECT_EQ(p, expected);
}

TEST(TensorLayout, PacksFourAlongAnOuterAxis) {
  // B[K=5, N=2] packed along K: texel (k4, n) holds B[4k4..4k4+3, n].
  TensorLayout l{{5, 2}, 0, 2, 2};
  std::vector<float> p = l.pack(iota(10));
  std::vector<float> expected = {0, 2, 4, 6, 1, 3, 5, 7, 8, 0, 0, 0, 9, 0, 0, 0};
  EXPECT_EQ(p, expected);
}

TEST(TensorLayout, WrappedLayoutFillsWholeRows) {
  TensorLayout l{{1, 10}, -1, 4, 3};  // 10 texels over rows of 4: 3 rows, 2 spare
  std::vector<float> p = l.pack(iota(10));
  ASSERT_EQ(p.size(), 12u);
  EXPECT_EQ(p[9], 9);
  EXPECT_EQ(p[11], 0);
  EXPECT_THROW(l.pack(iota(9)), std::invalid_argument);
}

TEST(OutputLayout, UnpacksFourByFourBlocksFromFourTargets) {
  // C[6, 7]: items cover 4 rows × 4 cols; 2 col blocks × 2 row blocks = 4 items, width 2.
  OutputLayout o{6, 7, 4, 4, 2, 2};
  std::vector<std::vector<float>> targets(4, std::vector<float>(2 * 2 * 4, -1));
  for (int j = 0; j < 4; ++j)
    for (int t = 0; t < 4; ++t)
      for (int c = 0; c < 4; ++c) {
        int row = (t / 2) * 4 + j, col = (t % 2) * 4 + c;
        targets[j][t * 4 + c] = static_cast<float>(row * 100 + col);
      }
  std::vector<float> out = o.unpack(targets);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 7; ++c) EXPECT_EQ(out[r * 7 + c], r * 100 + c);
}

TEST(OutputLayout, PlainLayoutIsIdentityAndMissingPixelsStayNaN) {
  OutputLayout o{2, 3, 1, 1, 3, 2};
  EXPECT_EQ(o.unpack({iota(6)}), iota(6));
  std::vector<float> partial = o.unpack({iota(4)});
  EXPECT_TRUE(std::isnan(partial[5]));
  EXPECT_THROW(o.unpack({iota(6), iota(6)}), std::invalid_argument);
}

TEST(OutputLayout, FeedbackBufferInterleavesTheRowsOfEachItem) {
  // C[5, 8] from a vertex-stage kernel: items of 3 rows × 4 cols, 2 row blocks × 2 col blocks;
  // row j of item t at floats (t·3 + j)·4 … +3 of the one captured buffer.
  OutputLayout o{5, 8, 3, 4, 4, 1};
  o.feedback = true;
  std::vector<float> buffer(4 * 3 * 4, -1);
  for (int t = 0; t < 4; ++t)
    for (int j = 0; j < 3; ++j)
      for (int c = 0; c < 4; ++c) {
        const int row = (t / 2) * 3 + j, col = (t % 2) * 4 + c;
        buffer[(t * 3 + j) * 4 + c] = static_cast<float>(row * 100 + col);
      }
  std::vector<float> out = o.unpack({buffer});
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 8; ++c) EXPECT_EQ(out[r * 8 + c], r * 100 + c) << r << "," << c;
  // A short buffer leaves the items it lacks NaN; render targets are refused.
  std::vector<float> partial = o.unpack({std::vector<float>(buffer.begin(), buffer.begin() + 36)});
  EXPECT_EQ(partial[3 * 8 + 3], 303);  // item 2 (rows 3-4, cols 0-3) is in the first 36 floats
  EXPECT_TRUE(std::isnan(partial[3 * 8 + 4]));
  EXPECT_THROW(o.unpack({buffer, buffer, buffer}), std::invalid_argument);

  const OutputLayout back =
      OutputLayout::from_json(boost::json::parse(boost::json::serialize(o.to_json())));
  EXPECT_TRUE(back.feedback);
  EXPECT_FALSE(OutputLayout::from_json(boost::json::parse(boost::json::serialize(
                                           OutputLayout{5, 8, 3, 4, 4, 1}.to_json())))
                   .feedback);
  EXPECT_THROW(OutputLayout::from_json(boost::json::parse(
                   R"({"rows":5,"cols":8,"rows_per_item":3,"channels":4,"width":2,"height":2,)"
                   R"("feedback":true})")),
               std::invalid_argument);
}

TEST(KernelArtifact, JsonRoundTrip) {
  KernelArtifact a;
  a.target = Target::kGlesCompute;
  a.source = "#version 310 es\n";
  a.inputs = {TensorLayout{{4, 4}, -1, 16, 1}, TensorLayout{{4, 4}, 1, 4, 1}};
  a.output = OutputLayout{4, 4, 1, 1, 4, 4};
  a.dispatch = {2, 3, 1};
  a.workgroup = {8, 8, 1};
  a.shared_memory_bytes = 2048;
  KernelArtifact b =
      KernelArtifact::from_json(boost::json::parse(boost::json::serialize(a.to_json())));
  EXPECT_EQ(b.target, Target::kGlesCompute);
  EXPECT_EQ(b.source, a.source);
  EXPECT_EQ(b.inputs[1].pack_axis, 1);
  EXPECT_EQ(b.dispatch, a.dispatch);
  EXPECT_EQ(b.workgroup, a.workgroup);
  EXPECT_EQ(b.shared_memory_bytes, 2048);
  EXPECT_THROW(KernelArtifact::from_json(boost::json::parse(R"({"target":"cuda"})")),
               std::invalid_argument);
}

}  // namespace
}  // namespace webtune
