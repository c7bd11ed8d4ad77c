/// \file graph_executor_test.cpp
/// The CPU reference executor (graph/executor.hpp):
///  - small graphs built here per operator, checked against values worked out by hand or by
///    naive loops written in this file (direct convolution with explicit padding, triple-loop
///    matrix products, the epilogue formula spelled out), never the executor's own helpers;
///  - ONNX's conformance cases from Debian's libonnx-testdata
///    (/usr/share/libonnx-testdata/data/node/test_*), each listed in
///    tests/graph_executor_cases.txt as run or skipped with its reason; the list must name every
///    case of an operator the executor runs;
///  - the real models of ../shared/models (skipped with a message when absent) against
///    onnxruntime's logits;
///  - bad input: a missing, unknown or mis-shaped input, an unsupported operator, an attribute
///    value it does not handle, a shape that contradicts the graph.

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/operators.hpp"
#include "support/onnx_cases.hpp"

namespace fs = std::filesystem;
using namespace webtune::graph;
using webtune::Activation;
using webtune::Epilogue;
using webtune::Residual;

namespace {

const fs::path kShared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
const fs::path kTestData = webtune::test::kOnnxTestData;
const fs::path kCaseList = webtune::test::kOnnxCaseList;
using webtune::test::ConformanceCase;
using webtune::test::listed_cases;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<float> read_f32(const fs::path& path) {
  const std::string bytes = read_bytes(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

int64_t count_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

/// Largest |a - b| over two equally long vectors (infinity when the lengths differ).
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return INFINITY;
    worst = std::max(worst, d);
  }
  return worst;
}

/// Builds small graphs by hand: every tensor is declared with its shape (execute() checks each
/// node's computed shape against it, so the declarations are expectations too).
struct Builder {
  Graph g;

  Builder& input(const std::string& name, std::vector<int64_t> shape,
                 DataType type = DataType::kFloat32) {
    declare(name, std::move(shape), type);
    g.inputs.push_back(name);
    return *this;
  }
  Builder& constant(const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    Tensor t;
    t.name = name;
    t.shape = std::move(shape);
    t.float_data = std::move(data);
    g.tensors[name] = std::move(t);
    return *this;
  }
  Builder& ints(const std::string& name, std::vector<int64_t> data) {
    Tensor t;
    t.name = name;
    t.type = DataType::kInt64;
    t.shape = {static_cast<int64_t>(data.size())};
    t.int_data = std::move(data);
    g.tensors[name] = std::move(t);
    return *this;
  }
  /// An integer constant of any shape ({} = a scalar) and integer type.
  Builder& int_tensor(const std::string& name, std::vector<int64_t> shape,
                      std::vector<int64_t> data, DataType type = DataType::kInt64) {
    Tensor t;
    t.name = name;
    t.type = type;
    t.shape = std::move(shape);
    t.int_data = std::move(data);
    g.tensors[name] = std::move(t);
    return *this;
  }
  Builder& declare(const std::string& name, std::vector<int64_t> shape,
                   DataType type = DataType::kFloat32) {
    Tensor t;
    t.name = name;
    t.type = type;
    t.shape = std::move(shape);
    g.tensors[name] = std::move(t);
    return *this;
  }
  Builder& output(const std::string& name, std::vector<int64_t> shape,
                  DataType type = DataType::kFloat32) {
    declare(name, std::move(shape), type);
    g.outputs.push_back(name);
    return *this;
  }
  Node& node(const std::string& op, std::vector<std::string> inputs,
             std::vector<std::string> outputs, std::map<std::string, Attribute> attributes = {}) {
    Node n;
    n.name = op + std::to_string(g.nodes.size());
    n.op_type = op;
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    n.attributes = std::move(attributes);
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
};

using Ints = std::vector<int64_t>;

/// The one output of a one-output graph.
std::vector<float> run1(const Graph& g, const ValueMap& inputs, const ExecuteOptions& o = {}) {
  ValueMap out = execute(g, inputs, o);
  return out.at(g.outputs.at(0)).data;
}

std::string error_of(const Graph& g, const ValueMap& inputs, const ExecuteOptions& o = {}) {
  try {
    execute(g, inputs, o);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "(ran)";
}

#define EXPECT_CLOSE(actual, expected, tol) \
  EXPECT_LE(max_abs_diff(actual, expected), tol) << "max abs error"

// ---- independent references -------------------------------------------------------------

struct ConvCase {
  std::string name;
  int64_t n, c, h, w, m, kh, kw, group;
  Ints strides, dilations, pads;  ///< pads [top, left, bottom, right]
  std::string auto_pad;           ///< "" = none given
  bool bias;
};

void PrintTo(const ConvCase& c, std::ostream* os) {
  *os << c.name;
}

/// Explicit pads of a SAME / VALID auto_pad for one dimension, from the ONNX Conv doc:
/// out = ceil(in / s), total = max(0, (out - 1)·s + (k - 1)·d + 1 - in), odd one at the end for
/// SAME_UPPER and at the beginning for SAME_LOWER.
std::pair<int64_t, int64_t> same_pads(const std::string& mode, int64_t in, int64_t k, int64_t s,
                                      int64_t d) {
  if (mode == "VALID") return {0, 0};
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - in);
  return mode == "SAME_UPPER" ? std::make_pair(total / 2, total - total / 2)
                              : std::make_pair(total - total / 2, total / 2);
}

/// Direct 2-D convolution: y[n,m,oh,ow] = b[m] + Σ x[n, g·C/G + c, ih, iw] · w[m, c, i, j] over
/// taps inside the input, with ih = oh·sh − top + i·dh (and the same for w). Returns y and
/// its shape.
std::vector<float> naive_conv(const ConvCase& k, const std::vector<float>& x,
                              const std::vector<float>& w, const std::vector<float>& b,
                              Ints& shape) {
  int64_t top = 0, left = 0, bottom = 0, right = 0;
  if (k.auto_pad.empty()) {
    top = k.pads.at(0), left = k.pads.at(1), bottom = k.pads.at(2), right = k.pads.at(3);
  } else {
    std::tie(top, bottom) = same_pads(k.auto_pad, k.h, k.kh, k.strides[0], k.dilations[0]);
    std::tie(left, right) = same_pads(k.auto_pad, k.w, k.kw, k.strides[1], k.dilations[1]);
  }
  const int64_t oh_n = (k.h + top + bottom - ((k.kh - 1) * k.dilations[0] + 1)) / k.strides[0] + 1;
  const int64_t ow_n = (k.w + left + right - ((k.kw - 1) * k.dilations[1] + 1)) / k.strides[1] + 1;
  shape = {k.n, k.m, oh_n, ow_n};
  const int64_t cg = k.c / k.group, mg = k.m / k.group;
  std::vector<float> y;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double s = k.bias ? b[m] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t ih = oh * k.strides[0] - top + i * k.dilations[0];
                const int64_t iw = ow * k.strides[1] - left + j * k.dilations[1];
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                const int64_t ch = (m / mg) * cg + c;
                s += static_cast<double>(x[((n * k.c + ch) * k.h + ih) * k.w + iw]) *
                     w[((m * cg + c) * k.kh + i) * k.kw + j];
              }
          y.push_back(static_cast<float>(s));
        }
  return y;
}

/// Triple-loop product of row-major A[M,K] and B[K,N].
std::vector<double> naive_matmul(const std::vector<float>& a, const std::vector<float>& b,
                                 int64_t m_n, int64_t k_n, int64_t n_n) {
  std::vector<double> c(m_n * n_n, 0.0);
  for (int64_t m = 0; m < m_n; ++m)
    for (int64_t n = 0; n < n_n; ++n)
      for (int64_t k = 0; k < k_n; ++k) c[m * n_n + n] += double(a[m * k_n + k]) * b[k * n_n + n];
  return c;
}

/// The epilogue written out as COMMON.md states it (not Epilogue::apply).
double epilogue_by_hand(const Epilogue& e, double v, double bias, double residual) {
  if (e.bias) v += bias;
  if (e.residual == Residual::kBeforeActivation) v += residual;
  if (e.activation == Activation::kRelu) v = v > 0 ? v : 0;
  if (e.activation == Activation::kClip)
    v = v < e.clip_min ? e.clip_min : (v > e.clip_max ? e.clip_max : v);
  if (e.activation == Activation::kHardSwish) {
    const double gate = v + 3 < 0 ? 0 : (v + 3 > 6 ? 6 : v + 3);
    v = v * gate / 6;
  }
  if (e.activation == Activation::kSilu) v = v / (1 + std::exp(-v));
  if (e.activation == Activation::kSigmoid) v = 1 / (1 + std::exp(-v));
  if (e.activation == Activation::kHardSigmoid) v = (v + 3 < 0 ? 0 : (v + 3 > 6 ? 6 : v + 3)) / 6;
  if (e.residual == Residual::kAfterActivation) v += residual;
  return v;
}

}  // namespace

// ---- operators, by hand ------------------------------------------------------------------

TEST(GraphExecutor, EveryAcceptedOperatorHasAKernel) {
  EXPECT_EQ(executable_operators(), supported_operators());
  EXPECT_TRUE(std::is_sorted(supported_operators().begin(), supported_operators().end()));
}

TEST(GraphExecutor, ConvByHand) {
  // X = 1..9 in a 3x3 plane, W = a 2x2 of ones, bias 10: each output sums a 2x2 window.
  Builder b;
  b.input("X", {1, 1, 3, 3}).constant("W", {1, 1, 2, 2}, {1, 1, 1, 1}).constant("B", {1}, {10});
  b.output("Y", {1, 1, 2, 2});
  b.node("Conv", {"X", "W", "B"}, {"Y"});
  const auto y = run1(b.g, {{"X", Value::floats({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}});
  EXPECT_EQ(y, (std::vector<float>{22, 26, 34, 38}));  // 1+2+4+5+10, ...
}

TEST(GraphExecutor, ConvAsymmetricPadsByHand) {
  // Pads top 1, left 0, bottom 0, right 1 on a 2x2 plane with a 2x2 kernel of ones:
  // padded = [[0,0,0],[1,2,0],[3,4,0]] -> windows [[3,2],[10,6]].
  Builder b;
  b.input("X", {1, 1, 2, 2}).constant("W", {1, 1, 2, 2}, {1, 1, 1, 1});
  b.output("Y", {1, 1, 2, 2});
  b.node("Conv", {"X", "W"}, {"Y"}, {{"pads", Ints{1, 0, 0, 1}}});
  EXPECT_EQ(run1(b.g, {{"X", Value::floats({1, 1, 2, 2}, {1, 2, 3, 4})}}),
            (std::vector<float>{3, 2, 10, 6}));
}

class ConvAgainstNaive : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvAgainstNaive, MatchesDirectConvolution) {
  const ConvCase& k = GetParam();
  const auto x = random_floats(k.n * k.c * k.h * k.w, 1);
  const auto w = random_floats(k.m * (k.c / k.group) * k.kh * k.kw, 2);
  const auto bias = random_floats(k.m, 3);
  Ints shape;
  const auto expected = naive_conv(k, x, w, bias, shape);
  Builder b;
  b.input("X", {k.n, k.c, k.h, k.w}).constant("W", {k.m, k.c / k.group, k.kh, k.kw}, w);
  b.constant("B", {k.m}, bias).output("Y", shape);
  std::map<std::string, Attribute> attrs = {{"group", k.group},
                                            {"strides", k.strides},
                                            {"dilations", k.dilations},
                                            {"kernel_shape", Ints{k.kh, k.kw}}};
  if (k.auto_pad.empty())
    attrs["pads"] = k.pads;
  else
    attrs["auto_pad"] = k.auto_pad;
  b.node("Conv",
         k.bias ? std::vector<std::string>{"X", "W", "B"} : std::vector<std::string>{"X", "W"},
         {"Y"}, attrs);
  EXPECT_CLOSE(run1(b.g, {{"X", Value::floats({k.n, k.c, k.h, k.w}, x)}}), expected, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvAgainstNaive,
    ::testing::Values(
        ConvCase{"plain3x3", 1, 3, 7, 6, 4, 3, 3, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},
        ConvCase{"grouped", 2, 4, 6, 6, 6, 3, 3, 2, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", true},
        ConvCase{
            "depthwise_stride2", 1, 5, 9, 8, 5, 3, 3, 5, {2, 2}, {1, 1}, {1, 1, 1, 1}, "", true},
        ConvCase{"depthwise_multiplier2",
                 1,
                 3,
                 6,
                 6,
                 6,
                 3,
                 3,
                 3,
                 {1, 1},
                 {1, 1},
                 {1, 1, 1, 1},
                 "",
                 false},
        ConvCase{"dilation2", 1, 2, 9, 9, 3, 3, 3, 1, {1, 1}, {2, 2}, {2, 2, 2, 2}, "", true},
        ConvCase{"asymmetric_pads", 1, 2, 5, 7, 3, 3, 2, 1, {2, 1}, {1, 1}, {0, 1, 2, 0}, "", true},
        ConvCase{"strides_dilation_mixed",
                 1,
                 2,
                 11,
                 10,
                 2,
                 3,
                 3,
                 1,
                 {3, 2},
                 {2, 1},
                 {1, 0, 0, 2},
                 "",
                 false},
        ConvCase{"same_upper", 1, 2, 6, 7, 3, 3, 4, 1, {2, 2}, {1, 1}, {}, "SAME_UPPER", true},
        ConvCase{"same_lower", 1, 2, 6, 7, 3, 3, 4, 1, {2, 2}, {1, 1}, {}, "SAME_LOWER", true},
        ConvCase{"valid", 1, 2, 6, 7, 3, 3, 2, 1, {2, 1}, {1, 1}, {}, "VALID", true},
        ConvCase{"pointwise", 1, 8, 5, 5, 4, 1, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", true}),
    [](const auto& info) { return info.param.name; });

TEST(GraphExecutor, Conv1D) {
  // X [1,1,5] = 1..5, W [1,1,2] = [1,-1], stride 2, pads [1,0]: padded 0,1,2,3,4,5 ->
  // windows at 0,2,4: 0-1, 2-3, 4-5.
  Builder b;
  b.input("X", {1, 1, 5}).constant("W", {1, 1, 2}, {1, -1}).output("Y", {1, 1, 3});
  b.node("Conv", {"X", "W"}, {"Y"}, {{"strides", Ints{2}}, {"pads", Ints{1, 0}}});
  EXPECT_EQ(run1(b.g, {{"X", Value::floats({1, 1, 5}, {1, 2, 3, 4, 5})}}),
            (std::vector<float>{-1, -1, -1}));
}

struct GemmCase {
  std::string name;
  int64_t trans_a, trans_b;
  Ints c_shape;  ///< {} scalar; absent when has_c is false
  bool has_c;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << c.name;
}

class GemmAgainstNaive : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmAgainstNaive, MatchesTripleLoop) {
  const GemmCase& k = GetParam();
  const int64_t m = 3, kk = 4, n = 5;
  const float alpha = 0.5f, beta = 2.0f;
  const auto a = random_floats(m * kk, 4), bm = random_floats(kk * n, 5);
  const auto c = random_floats(count_of(k.c_shape), 6);
  // The stored operands are the transposes where trans says so.
  std::vector<float> a_stored = a, b_stored = bm;
  if (k.trans_a)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < kk; ++j) a_stored[j * m + i] = a[i * kk + j];
  if (k.trans_b)
    for (int64_t i = 0; i < kk; ++i)
      for (int64_t j = 0; j < n; ++j) b_stored[j * kk + i] = bm[i * n + j];
  const auto prod = naive_matmul(a, bm, m, kk, n);
  std::vector<float> expected(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double cv = 0;
      if (k.has_c) {
        // C broadcast by hand, per shape.
        const Ints& s = k.c_shape;
        if (s.empty() || count_of(s) == 1)
          cv = c[0];
        else if (s == Ints{n} || s == Ints{1, n})
          cv = c[j];
        else if (s == Ints{m, 1})
          cv = c[i];
        else
          cv = c[i * n + j];
      }
      expected[i * n + j] = static_cast<float>(alpha * prod[i * n + j] + beta * cv);
    }
  Builder b;
  b.input("A", k.trans_a ? Ints{kk, m} : Ints{m, kk});
  b.constant("B", k.trans_b ? Ints{n, kk} : Ints{kk, n}, b_stored);
  b.constant("C", k.c_shape, c).output("Y", {m, n});
  b.node("Gemm",
         k.has_c ? std::vector<std::string>{"A", "B", "C"} : std::vector<std::string>{"A", "B"},
         {"Y"}, {{"transA", k.trans_a}, {"transB", k.trans_b}, {"alpha", alpha}, {"beta", beta}});
  EXPECT_CLOSE(run1(b.g, {{"A", Value::floats(k.trans_a ? Ints{kk, m} : Ints{m, kk}, a_stored)}}),
               expected, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Variants, GemmAgainstNaive,
                         ::testing::Values(GemmCase{"plain_no_c", 0, 0, {}, false},
                                           GemmCase{"transA_scalar_c", 1, 0, {}, true},
                                           GemmCase{"transB_vector_c", 0, 1, {5}, true},
                                           GemmCase{"both_column_c", 1, 1, {3, 1}, true},
                                           GemmCase{"row_c", 0, 0, {1, 5}, true},
                                           GemmCase{"full_c", 0, 1, {3, 5}, true},
                                           GemmCase{"single_element_c", 1, 0, {1}, true}),
                         [](const auto& info) { return info.param.name; });

TEST(GraphExecutor, MatMulNumpySemantics) {
  // 1-D · 2-D: [2] · [2,3] -> [3]; 2-D · 1-D: [2,3] · [3] -> [2]; 1-D · 1-D -> scalar.
  Builder b;
  b.input("v", {2}).input("M", {2, 3}).input("u", {3});
  b.output("vM", {3}).output("Mu", {2}).output("uu", {});
  b.node("MatMul", {"v", "M"}, {"vM"});
  b.node("MatMul", {"M", "u"}, {"Mu"});
  b.node("MatMul", {"u", "u"}, {"uu"});
  ValueMap out = execute(b.g, {{"v", Value::floats({2}, {1, 2})},
                               {"M", Value::floats({2, 3}, {1, 2, 3, 4, 5, 6})},
                               {"u", Value::floats({3}, {1, 0, -1})}});
  EXPECT_EQ(out.at("vM").data, (std::vector<float>{9, 12, 15}));
  EXPECT_EQ(out.at("Mu").data, (std::vector<float>{-2, -2}));
  EXPECT_EQ(out.at("uu").data, (std::vector<float>{2}));
  EXPECT_TRUE(out.at("uu").shape.empty());
}

TEST(GraphExecutor, MatMulBroadcastsBatchDimensions) {
  // A [2,1,3,4] · B [3,4,5] -> [2,3,3,5]: batch (i, j) multiplies A[i,0] by B[j].
  const auto a = random_floats(2 * 3 * 4, 7), bm = random_floats(3 * 4 * 5, 8);
  Builder b;
  b.input("A", {2, 1, 3, 4}).constant("B", {3, 4, 5}, bm).output("Y", {2, 3, 3, 5});
  b.node("MatMul", {"A", "B"}, {"Y"});
  const auto y = run1(b.g, {{"A", Value::floats({2, 1, 3, 4}, a)}});
  std::vector<float> expected;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      const auto p =
          naive_matmul(std::vector<float>(a.begin() + i * 12, a.begin() + i * 12 + 12),
                       std::vector<float>(bm.begin() + j * 20, bm.begin() + j * 20 + 20), 3, 4, 5);
      for (double v : p) expected.push_back(static_cast<float>(v));
    }
  EXPECT_CLOSE(y, expected, 1e-6);
}

TEST(GraphExecutor, ArithmeticBroadcastsLikeNumpy) {
  // [2,3] op [3] (row broadcast) and [2,1] (column broadcast) and a scalar.
  Builder b;
  b.input("A", {2, 3}).constant("row", {3}, {10, 20, 30}).constant("col", {2, 1}, {1, 2});
  b.constant("two", {}, {2});
  b.output("add", {2, 3}).output("sub", {2, 3}).output("mul", {2, 3}).output("div", {2, 3});
  b.output("outer", {2, 3});
  b.node("Add", {"A", "row"}, {"add"});
  b.node("Sub", {"A", "col"}, {"sub"});
  b.node("Mul", {"A", "two"}, {"mul"});
  b.node("Div", {"row", "col"}, {"div"});
  b.node("Add", {"col", "row"}, {"outer"});
  ValueMap out = execute(b.g, {{"A", Value::floats({2, 3}, {1, 2, 3, 4, 5, 6})}});
  EXPECT_EQ(out.at("add").data, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(out.at("sub").data, (std::vector<float>{0, 1, 2, 2, 3, 4}));
  EXPECT_EQ(out.at("mul").data, (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(out.at("div").data, (std::vector<float>{10, 20, 30, 5, 10, 15}));
  EXPECT_EQ(out.at("outer").data, (std::vector<float>{11, 21, 31, 12, 22, 32}));
}

TEST(GraphExecutor, ActivationsByHand) {
  Builder b;
  b.input("X", {5});
  for (const char* op : {"Relu", "Sigmoid", "HardSigmoid", "HardSwish"})
    b.output(op, {5}).node(op, {"X"}, {op});
  b.g.nodes[2].attributes = {{"alpha", 0.25f}, {"beta", 0.5f}};
  ValueMap out = execute(b.g, {{"X", Value::floats({5}, {-4, -1, 0, 1, 4})}});
  EXPECT_EQ(out.at("Relu").data, (std::vector<float>{0, 0, 0, 1, 4}));
  EXPECT_CLOSE(
      out.at("Sigmoid").data,
      (std::vector<float>{0.0179862100f, 0.2689414214f, 0.5f, 0.7310585786f, 0.9820137900f}), 1e-7);
  // max(0, min(1, 0.25 x + 0.5))
  EXPECT_EQ(out.at("HardSigmoid").data, (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1}));
  // x · max(0, min(1, x/6 + 1/2))
  EXPECT_CLOSE(out.at("HardSwish").data, (std::vector<float>{0, -1.0f / 3, 0, 2.0f / 3, 4}), 1e-6);
}

TEST(GraphExecutor, ClipInBothOpsetStyles) {
  Builder b;
  b.input("X", {5}).constant("lo", {}, {-1}).constant("hi", {}, {2});
  b.output("attr", {5}).output("inputs", {5}).output("max_only", {5}).output("none", {5});
  b.node("Clip", {"X"}, {"attr"}, {{"min", -1.0f}, {"max", 2.0f}});  // opset < 11
  b.node("Clip", {"X", "lo", "hi"}, {"inputs"});                     // opset >= 11
  b.node("Clip", {"X", "", "hi"}, {"max_only"});                     // "" = no min
  b.node("Clip", {"X"}, {"none"});
  ValueMap out = execute(b.g, {{"X", Value::floats({5}, {-3, -1, 0.5f, 2, 7})}});
  EXPECT_EQ(out.at("attr").data, (std::vector<float>{-1, -1, 0.5f, 2, 2}));
  EXPECT_EQ(out.at("inputs").data, (std::vector<float>{-1, -1, 0.5f, 2, 2}));
  EXPECT_EQ(out.at("max_only").data, (std::vector<float>{-3, -1, 0.5f, 2, 2}));
  EXPECT_EQ(out.at("none").data, (std::vector<float>{-3, -1, 0.5f, 2, 7}));
}

TEST(GraphExecutor, MaxPoolWithPadsCeilModeAndIndices) {
  // 1x1x4x4 = 0..15, kernel 3, stride 2, pads 1 all round: windows start at -1 and 1, so the
  // maxima are at (1,1)=5, (1,3)=7, (3,1)=13, (3,3)=15.
  Builder b;
  b.input("X", {1, 1, 4, 4}).output("Y", {1, 1, 2, 2}).output("I", {1, 1, 2, 2}, DataType::kInt64);
  b.output("C", {1, 1, 2, 2}).output("T", {1, 1, 2, 2}, DataType::kInt64);
  b.node("MaxPool", {"X"}, {"Y", "I"},
         {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  // ceil_mode: 4x4, kernel 3, stride 2, no pads: floor gives 1, ceil 2 (the second window
  // covers rows/cols 2..3 only); storage_order 1 gives column-major indices.
  b.node("MaxPool", {"X"}, {"C", "T"},
         {{"kernel_shape", Ints{3, 3}},
          {"strides", Ints{2, 2}},
          {"ceil_mode", int64_t{1}},
          {"storage_order", int64_t{1}}});
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  ValueMap out = execute(b.g, {{"X", Value::floats({1, 1, 4, 4}, x)}});
  EXPECT_EQ(out.at("Y").data, (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(out.at("I").ints, (Ints{5, 7, 13, 15}));
  EXPECT_EQ(out.at("C").data, (std::vector<float>{10, 11, 14, 15}));
  // (h, w) -> w·4 + h: 10 = (2,2) -> 10, 11 = (2,3) -> 14, 14 = (3,2) -> 11, 15 -> 15.
  EXPECT_EQ(out.at("T").ints, (Ints{10, 14, 11, 15}));
}

TEST(GraphExecutor, CeilModeDropsAWindowStartingInTheEndPadding) {
  // 1-D input 3, kernel 2, stride 2, pads [1, 1], ceil_mode: windows start at -1, 1 and 3 (in
  // input coordinates); the last starts past the input, in the end padding, and is dropped
  // (PyTorch's and onnxruntime's rule, the ONNX docs' from opset 19 on): 2 outputs, not 3.
  Builder b;
  b.input("X", {1, 1, 3}).output("Y", {1, 1, 2}).output("A", {1, 1, 2});
  const std::map<std::string, Attribute> attrs = {{"kernel_shape", Ints{2}},
                                                  {"strides", Ints{2}},
                                                  {"pads", Ints{1, 1}},
                                                  {"ceil_mode", int64_t{1}}};
  b.node("MaxPool", {"X"}, {"Y"}, attrs);
  b.node("AveragePool", {"X"}, {"A"}, attrs);
  ValueMap out = execute(b.g, {{"X", Value::floats({1, 1, 3}, {4, 2, 6})}});
  EXPECT_EQ(out.at("Y").data, (std::vector<float>{4, 6}));
  EXPECT_EQ(out.at("A").data, (std::vector<float>{4, 4}));
}

TEST(GraphExecutor, MaxPoolDilations) {
  // 1-D: 0..6, kernel 2, dilation 3: windows {0,3},{1,4},{2,5},{3,6} -> 3,4,5,6.
  Builder b;
  b.input("X", {1, 1, 7}).output("Y", {1, 1, 4});
  b.node("MaxPool", {"X"}, {"Y"}, {{"kernel_shape", Ints{2}}, {"dilations", Ints{3}}});
  EXPECT_EQ(run1(b.g, {{"X", Value::floats({1, 1, 7}, {0, 1, 2, 3, 4, 5, 6})}}),
            (std::vector<float>{3, 4, 5, 6}));
}

TEST(GraphExecutor, AveragePoolCountIncludePad) {
  // 1x1x2x2 = [[1,2],[3,4]], kernel 2, pads 1: corner windows hold one value each.
  Builder b;
  b.input("X", {1, 1, 2, 2}).output("excl", {1, 1, 3, 3}).output("incl", {1, 1, 3, 3});
  const std::map<std::string, Attribute> attrs = {{"kernel_shape", Ints{2, 2}},
                                                  {"pads", Ints{1, 1, 1, 1}}};
  b.node("AveragePool", {"X"}, {"excl"}, attrs);
  auto incl = attrs;
  incl["count_include_pad"] = int64_t{1};
  b.node("AveragePool", {"X"}, {"incl"}, incl);
  ValueMap out = execute(b.g, {{"X", Value::floats({1, 1, 2, 2}, {1, 2, 3, 4})}});
  EXPECT_EQ(out.at("excl").data, (std::vector<float>{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4}));
  EXPECT_EQ(out.at("incl").data,
            (std::vector<float>{0.25f, 0.75f, 0.5f, 1, 2.5f, 1.5f, 0.75f, 1.75f, 1}));
}

TEST(GraphExecutor, GlobalAveragePoolAndFlatten) {
  Builder b;
  b.input("X", {1, 2, 2, 2}).declare("P", {1, 2, 1, 1}).output("F", {1, 2});
  b.output("G", {4, 2});
  b.node("GlobalAveragePool", {"X"}, {"P"});
  b.node("Flatten", {"P"}, {"F"});
  b.node("Flatten", {"X"}, {"G"}, {{"axis", int64_t{-1}}});  // [1·2·2, 2]
  ValueMap out = execute(b.g, {{"X", Value::floats({1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40})}});
  EXPECT_EQ(out.at("F").data, (std::vector<float>{2.5f, 25}));
  EXPECT_EQ(out.at("G").shape, (Ints{4, 2}));
  EXPECT_EQ(out.at("G").data, (std::vector<float>{1, 2, 3, 4, 10, 20, 30, 40}));
}

TEST(GraphExecutor, ReshapeFromConstantAndComputedShapes) {
  Builder b;
  b.input("X", {2, 3, 4}).input("S", {2}, DataType::kInt64);
  b.ints("copy_infer", {0, -1}).ints("zero", {0, 4, 6}).ints("squeeze", {24});
  b.output("a", {2, 12}).output("c", {24}).output("d", {6, 4});
  b.node("Reshape", {"X", "copy_infer"}, {"a"});  // 0 copies 2, -1 infers 12
  b.node("Reshape", {"X", "squeeze"}, {"c"});
  b.node("Reshape", {"X", "S"}, {"d"});  // shape computed at run time (a graph input)
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i);
  ValueMap out =
      execute(b.g, {{"X", Value::floats({2, 3, 4}, x)}, {"S", Value::int64s({2}, {-1, 4})}});
  EXPECT_EQ(out.at("a").shape, (Ints{2, 12}));
  EXPECT_EQ(out.at("a").data, x);
  EXPECT_EQ(out.at("d").shape, (Ints{6, 4}));

  // allowzero: a 0 is a real 0 (an empty tensor), refused when the sizes disagree.
  Builder z;
  z.input("E", {0, 3}).ints("s", {3, 0}).output("Z", {3, 0});
  z.node("Reshape", {"E", "s"}, {"Z"}, {{"allowzero", int64_t{1}}});
  EXPECT_TRUE(execute(z.g, {{"E", Value::floats({0, 3}, {})}}).at("Z").data.empty());
  Builder bad;
  bad.input("X", {2, 3}).ints("s", {4, -1}).output("Y", {4, 2});
  bad.node("Reshape", {"X", "s"}, {"Y"});
  EXPECT_NE(
      error_of(bad.g, {{"X", Value::floats({2, 3}, std::vector<float>(6))}}).find("cannot infer"),
      std::string::npos);
}

TEST(GraphExecutor, TransposeAndConcat) {
  Builder b;
  b.input("X", {2, 3}).input("Z", {1, 3});
  b.output("T", {3, 2}).output("C", {3, 3}).output("P", {1, 3, 2});
  b.declare("U", {1, 2, 3});
  b.node("Transpose", {"X"}, {"T"});  // default: reverse the axes
  b.node("Concat", {"X", "Z"}, {"C"}, {{"axis", int64_t{-2}}});
  b.node("Reshape", {"X", "shape"}, {"U"});
  b.ints("shape", {1, 2, 3});
  b.node("Transpose", {"U"}, {"P"}, {{"perm", Ints{0, 2, 1}}});
  ValueMap out = execute(b.g, {{"X", Value::floats({2, 3}, {1, 2, 3, 4, 5, 6})},
                               {"Z", Value::floats({1, 3}, {7, 8, 9})}});
  EXPECT_EQ(out.at("T").data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(out.at("C").data, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(out.at("P").data, (std::vector<float>{1, 4, 2, 5, 3, 6}));

  Builder c;
  c.input("A", {2, 1}).input("B", {2, 2}).output("Y", {2, 3});
  c.node("Concat", {"A", "B"}, {"Y"}, {{"axis", int64_t{1}}});
  EXPECT_EQ(
      run1(c.g, {{"A", Value::floats({2, 1}, {1, 2})}, {"B", Value::floats({2, 2}, {3, 4, 5, 6})}}),
      (std::vector<float>{1, 3, 4, 2, 5, 6}));
}

TEST(GraphExecutor, SoftmaxFollowsTheOpset) {
  // X [1,2,2] = [[0, ln 3], [0, 0]] with axis 1.
  const float l3 = std::log(3.0f);
  Builder b;
  b.input("X", {1, 2, 2}).output("Y", {1, 2, 2});
  b.node("Softmax", {"X"}, {"Y"}, {{"axis", int64_t{1}}});
  const ValueMap in = {{"X", Value::floats({1, 2, 2}, {0, l3, 0, 0})}};
  // Opset 13: along axis 1 (columns of the 2x2): column 0 = {0, 0} -> 1/2, 1/2;
  // column 1 = {ln 3, 0} -> 3/4, 1/4.
  EXPECT_CLOSE(run1(b.g, in, {.opset = 13}), (std::vector<float>{0.5f, 0.75f, 0.5f, 0.25f}), 1e-6);
  // Opset 11: the input as [1, 4]; exp values 1, 3, 1, 1 over a sum of 6.
  EXPECT_CLOSE(run1(b.g, in, {.opset = 11}),
               (std::vector<float>{1.0f / 6, 0.5f, 1.0f / 6, 1.0f / 6}), 1e-6);
  // Default axis: -1 from opset 13 on (rows), 1 before (the whole tensor here).
  b.g.nodes[0].attributes.clear();
  EXPECT_CLOSE(run1(b.g, in, {.opset = 13}), (std::vector<float>{0.25f, 0.75f, 0.5f, 0.5f}), 1e-6);
  EXPECT_CLOSE(run1(b.g, in, {.opset = 11}),
               (std::vector<float>{1.0f / 6, 0.5f, 1.0f / 6, 1.0f / 6}), 1e-6);
}

TEST(GraphExecutor, BatchNormalizationIdentityDropout) {
  // y = (x - mean) / sqrt(var + eps) · scale + B per channel; var + eps = 4 exactly.
  Builder b;
  b.input("X", {1, 2, 1, 2}).constant("scale", {2}, {2, 1}).constant("B", {2}, {1, 0});
  b.constant("mean", {2}, {1, -1}).constant("var", {2}, {4 - 0.5f, 4 - 0.5f});
  b.declare("N", {1, 2, 1, 2}).declare("I", {1, 2, 1, 2}).output("D", {1, 2, 1, 2});
  b.output("mask", {1, 2, 1, 2}, DataType::kBool);
  b.node("BatchNormalization", {"X", "scale", "B", "mean", "var"}, {"N"}, {{"epsilon", 0.5f}});
  b.node("Identity", {"N"}, {"I"});
  b.node("Dropout", {"I"}, {"D", "mask"}, {{"ratio", 0.5f}});
  ValueMap out = execute(b.g, {{"X", Value::floats({1, 2, 1, 2}, {1, 3, -1, 1})}});
  EXPECT_EQ(out.at("D").data, (std::vector<float>{1, 3, 0, 1}));
  EXPECT_EQ(out.at("mask").ints, (Ints{1, 1, 1, 1}));
  EXPECT_EQ(out.at("mask").type, DataType::kBool);
}

// ---- fused operators -------------------------------------------------------------------

struct FusedCase {
  std::string name;
  Epilogue epilogue;
};

void PrintTo(const FusedCase& c, std::ostream* os) {
  *os << c.name;
}

std::vector<FusedCase> fused_cases() {
  std::vector<FusedCase> cases;
  const std::pair<const char*, Activation> acts[] = {{"none", Activation::kNone},
                                                     {"relu", Activation::kRelu},
                                                     {"clip", Activation::kClip},
                                                     {"hard_swish", Activation::kHardSwish},
                                                     {"silu", Activation::kSilu},
                                                     {"sigmoid", Activation::kSigmoid},
                                                     {"hard_sigmoid", Activation::kHardSigmoid}};
  const std::pair<const char*, Residual> res[] = {{"", Residual::kNone},
                                                  {"_residual_before", Residual::kBeforeActivation},
                                                  {"_residual_after", Residual::kAfterActivation}};
  for (const auto& [an, a] : acts)
    for (const auto& [rn, r] : res)
      for (bool bias : {false, true}) {
        Epilogue e;
        e.bias = bias;
        e.activation = a;
        e.clip_min = -0.5f;
        e.clip_max = 0.75f;
        e.residual = r;
        cases.push_back({std::string(bias ? "bias_" : "") + an + rn, e});
      }
  return cases;
}

class FusedOps : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedOps, ConvGemmMatMulApplyTheEpilogue) {
  const Epilogue& e = GetParam().epilogue;
  // FusedConv: X [1,4,5,5], W [4,2,3,3] (group 2), stride 1, pads 1 -> [1,4,5,5].
  {
    const ConvCase k{"", 1, 4, 5, 5, 4, 3, 3, 2, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", false};
    const auto x = random_floats(100, 11, -2, 2), w = random_floats(72, 12);
    const auto bias = random_floats(4, 13), residual = random_floats(100, 14, -2, 2);
    Ints shape;
    const auto acc = naive_conv(k, x, w, {}, shape);
    std::vector<float> expected(100);
    for (int i = 0; i < 100; ++i)
      expected[i] = static_cast<float>(epilogue_by_hand(e, acc[i], bias[i / 25], residual[i]));
    Builder b;
    b.input("X", {1, 4, 5, 5}).constant("W", {4, 2, 3, 3}, w).constant("bias", {4}, bias);
    b.constant("res", {1, 4, 5, 5}, residual).output("Y", {1, 4, 5, 5});
    std::vector<std::string> inputs = {"X", "W"};
    if (e.bias) inputs.push_back("bias");
    if (e.residual != Residual::kNone) inputs.push_back("res");
    b.node("FusedConv", inputs, {"Y"},
           {{"group", int64_t{2}}, {"pads", Ints{1, 1, 1, 1}}, {"kernel_shape", Ints{3, 3}}})
        .epilogue = e;
    EXPECT_CLOSE(run1(b.g, {{"X", Value::floats({1, 4, 5, 5}, x)}}), expected, 1e-5) << "FusedConv";
  }
  // FusedGemm with transB: A [3,4] · B [5,4]ᵀ -> [3,5]; FusedMatMul: A [2,3,4] · B [4,5].
  for (const bool gemm : {true, false}) {
    const int64_t batch = gemm ? 1 : 2;
    const auto a = random_floats(batch * 12, 15, -2, 2), bm = random_floats(20, 16);
    const auto bias = random_floats(5, 17), residual = random_floats(batch * 15, 18, -2, 2);
    std::vector<float> b_stored = bm;  // [4,5]; transposed to [5,4] for the Gemm
    if (gemm)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 5; ++j) b_stored[j * 4 + i] = bm[i * 5 + j];
    std::vector<float> expected;
    for (int64_t t = 0; t < batch; ++t) {
      const auto acc = naive_matmul(std::vector<float>(a.begin() + t * 12, a.begin() + t * 12 + 12),
                                    bm, 3, 4, 5);
      for (int i = 0; i < 15; ++i)
        expected.push_back(
            static_cast<float>(epilogue_by_hand(e, acc[i], bias[i % 5], residual[t * 15 + i])));
    }
    const Ints a_shape = gemm ? Ints{3, 4} : Ints{2, 3, 4};
    const Ints y_shape = gemm ? Ints{3, 5} : Ints{2, 3, 5};
    Builder b;
    b.input("A", a_shape).constant("B", gemm ? Ints{5, 4} : Ints{4, 5}, b_stored);
    b.constant("bias", {5}, bias).constant("res", y_shape, residual).output("Y", y_shape);
    std::vector<std::string> inputs = {"A", "B"};
    if (e.bias) inputs.push_back("bias");
    if (e.residual != Residual::kNone) inputs.push_back("res");
    std::map<std::string, Attribute> attrs;
    if (gemm) attrs["transB"] = int64_t{1};
    b.node(gemm ? "FusedGemm" : "FusedMatMul", inputs, {"Y"}, attrs).epilogue = e;
    EXPECT_CLOSE(run1(b.g, {{"A", Value::floats(a_shape, a)}}), expected, 1e-5)
        << (gemm ? "FusedGemm" : "FusedMatMul");
  }
}

INSTANTIATE_TEST_SUITE_P(Epilogues, FusedOps, ::testing::ValuesIn(fused_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GraphExecutor, FusedOpsCheckTheirEpilogueInputs) {
  Epilogue e;
  e.bias = true;
  e.residual = Residual::kAfterActivation;
  Builder b;
  b.input("X", {1, 1, 2, 2}).constant("W", {2, 1, 1, 1}, {1, 2}).constant("bias", {3}, {0, 0, 0});
  b.constant("res", {1, 2, 2, 2}, std::vector<float>(8)).output("Y", {1, 2, 2, 2});
  b.node("FusedConv", {"X", "W", "bias"}, {"Y"}).epilogue = e;
  const ValueMap in = {{"X", Value::floats({1, 1, 2, 2}, {1, 2, 3, 4})}};
  std::string message = error_of(b.g, in);
  EXPECT_NE(message.find("FusedConv 'FusedConv0'"), std::string::npos) << message;
  EXPECT_NE(message.find("needs 4"), std::string::npos) << message;
  b.g.nodes[0].inputs.push_back("res");
  message = error_of(b.g, in);
  EXPECT_NE(message.find("bias has shape [3], expected [2]"), std::string::npos) << message;
}

// ---- whole graphs ------------------------------------------------------------------------

TEST(GraphExecutor, KeepIntermediatesReturnsEveryNodeOutput) {
  Builder b;
  b.input("X", {2}).declare("R", {2}).output("Y", {2});
  b.node("Relu", {"X"}, {"R"});
  b.node("Add", {"R", "R"}, {"Y"});
  const ValueMap in = {{"X", Value::floats({2}, {-1, 3})}};
  ValueMap plain = execute(b.g, in);
  EXPECT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain.at("Y").data, (std::vector<float>{0, 6}));
  ValueMap all = execute(b.g, in, {.keep_intermediates = true});
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(all.at("R").data, (std::vector<float>{0, 3}));
}

TEST(GraphExecutor, BadInputIsNamed) {
  Builder b;
  b.input("X", {1, 2}).declare("R", {1, 2}).output("Y", {1, 2});
  b.node("Relu", {"X"}, {"R"});
  b.node("Sigmoid", {"R"}, {"Y"});
  const Value good = Value::floats({1, 2}, {1, 2});

  EXPECT_NE(error_of(b.g, {}).find("graph input 'X' is missing"), std::string::npos);
  std::string m = error_of(b.g, {{"X", Value::floats({2, 1}, {1, 2})}});
  EXPECT_NE(m.find("graph input 'X' has shape [2,1] but the graph says [1,2]"), std::string::npos)
      << m;
  m = error_of(b.g, {{"X", Value::floats({1, 2}, {1})}});
  EXPECT_NE(m.find("holds 1 values"), std::string::npos) << m;
  m = error_of(b.g, {{"X", Value::int64s({1, 2}, {1, 2})}});
  EXPECT_NE(m.find("is int64 but the graph says float32"), std::string::npos) << m;
  m = error_of(b.g, {{"X", good}, {"W", good}});
  EXPECT_NE(m.find("'W' is not an input of the graph"), std::string::npos) << m;

  // An operator without a kernel is refused before anything runs, with the node named.
  Builder u = b;
  u.g.nodes[1].op_type = "LpNormalization";
  u.g.nodes[1].name = "norm";
  m = error_of(u.g, {{"X", good}});
  EXPECT_NE(m.find("LpNormalization 'norm': operator 'LpNormalization' is not supported"),
            std::string::npos)
      << m;

  // A node whose computed shape contradicts the graph's declaration.
  Builder s = b;
  s.g.tensors["R"].shape = {2, 1};
  s.g.tensors["Y"].shape = {2, 1};
  m = error_of(s.g, {{"X", good}});
  EXPECT_NE(m.find("Relu 'Relu0': output 0 ('R') has shape [1,2] but the graph says [2,1]"),
            std::string::npos)
      << m;
}

TEST(GraphExecutor, AttributeValuesItDoesNotHandleAreNamed) {
  auto conv_error = [](std::map<std::string, Attribute> attrs, Ints w_shape = {1, 1, 1, 1}) {
    Builder b;
    b.input("X", {1, 1, 3, 3}).constant("W", w_shape, std::vector<float>(count_of(w_shape), 1));
    b.output("Y", {1, 1, 3, 3});
    b.node("Conv", {"X", "W"}, {"Y"}, std::move(attrs)).name = "c";
    return error_of(b.g, {{"X", Value::floats({1, 1, 3, 3}, std::vector<float>(9))}});
  };
  std::string m = conv_error({{"auto_pad", std::string("SAME_MIDDLE")}});
  EXPECT_NE(m.find("Conv 'c': auto_pad 'SAME_MIDDLE' is not one of"), std::string::npos) << m;
  m = conv_error({{"strides", Ints{1, 1, 1}}});
  EXPECT_NE(m.find("Conv 'c': attribute 'strides' [1,1,1] has 3 values"), std::string::npos) << m;
  m = conv_error({{"group", int64_t{2}}});
  EXPECT_NE(m.find("Conv 'c': group 2 does not fit"), std::string::npos) << m;
  m = conv_error({{"strides", std::string("1")}});
  EXPECT_NE(m.find("Conv 'c': "), std::string::npos) << m;
  EXPECT_NE(m.find("'strides' is not a list of ints"), std::string::npos) << m;

  Builder bn;
  bn.input("X", {1, 1, 2}).constant("p", {1}, {1}).output("Y", {1, 1, 2});
  bn.node("BatchNormalization", {"X", "p", "p", "p", "p"}, {"Y"}, {{"training_mode", int64_t{1}}});
  m = error_of(bn.g, {{"X", Value::floats({1, 1, 2}, {1, 2})}});
  EXPECT_NE(m.find("BatchNormalization 'BatchNormalization0': training_mode 1 is not run"),
            std::string::npos)
      << m;

  Builder d;
  d.input("X", {2}).constant("r", {}, {0.5f}).input("T", {}, DataType::kBool).output("Y", {2});
  d.node("Dropout", {"X", "r", "T"}, {"Y"});
  m = error_of(d.g,
               {{"X", Value::floats({2}, {1, 2})}, {"T", Value{{}, {}, {1}, DataType::kBool}}});
  EXPECT_NE(m.find("random dropout is not run"), std::string::npos) << m;
  EXPECT_EQ(
      run1(d.g, {{"X", Value::floats({2}, {1, 2})}, {"T", Value{{}, {}, {0}, DataType::kBool}}}),
      (std::vector<float>{1, 2}));
}

// ---- shape arithmetic on int64 (what constant folding runs through run_node) ----------------

namespace {

Value bools(Ints shape, std::vector<int64_t> v) {
  Value x;
  x.shape = std::move(shape);
  x.ints = std::move(v);
  x.type = DataType::kBool;
  return x;
}

Value int32s(Ints shape, std::vector<int64_t> v) {
  Value x = Value::int64s(std::move(shape), std::move(v));
  x.type = DataType::kInt32;
  return x;
}

/// Runs a one-node graph-less node through run_node() (the constant-folding entry).
Value run_one(const std::string& op, const std::vector<Value>& inputs,
              std::map<std::string, Attribute> attributes = {},
              DataType out_type = DataType::kFloat32, int64_t opset = 13) {
  Node n;
  n.name = "n";
  n.op_type = op;
  for (size_t i = 0; i < inputs.size(); ++i) n.inputs.push_back("in" + std::to_string(i));
  n.outputs = {"out"};
  n.attributes = std::move(attributes);
  std::vector<const Value*> args;
  for (const Value& v : inputs) args.push_back(&v);
  return run_node(n, 0, args, {out_type}, opset).at(0);
}

std::string run_one_error(const std::string& op, const std::vector<Value>& inputs,
                          std::map<std::string, Attribute> attributes = {}) {
  try {
    run_one(op, inputs, std::move(attributes));
  } catch (const GraphError& e) {
    return e.what();
  }
  return "(ran)";
}

}  // namespace

TEST(GraphExecutor, PyTorchShapeChainFoldsOnInt64) {
  // X [2,3,8,8] → Shape → Gather(2) → Div(2) → Unsqueeze(0); Shape → Slice[0:2]; Concat with
  // [-1] → [2,3,4,-1] → Reshape X to [2,3,4,16]; and Mul / Sub / Equal / Where / Cast on the way.
  Builder b;
  b.input("X", {2, 3, 8, 8});
  b.int_tensor("i2", {}, {2}).int_tensor("two", {}, {2}).ints("ax0", {0});
  b.ints("s0", {0}).ints("e2", {2}).ints("minus1", {-1});
  b.declare("s", {4}, DataType::kInt64).declare("h", {}, DataType::kInt64);
  b.declare("hd", {}, DataType::kInt64).declare("hu", {1}, DataType::kInt64);
  b.declare("nc", {2}, DataType::kInt64).declare("target", {4}, DataType::kInt64);
  b.declare("eq", {4}, DataType::kBool).declare("fixed", {4}, DataType::kInt64);
  b.output("Y", {2, 3, 4, 16}).output("f", {4}).output("size", {}, DataType::kInt64);
  b.node("Shape", {"X"}, {"s"});
  b.node("Gather", {"s", "i2"}, {"h"}, {{"axis", int64_t{0}}});
  b.node("Div", {"h", "two"}, {"hd"});
  b.node("Unsqueeze", {"hd", "ax0"}, {"hu"});
  b.node("Slice", {"s", "s0", "e2"}, {"nc"});
  b.node("Concat", {"nc", "hu", "minus1"}, {"target"}, {{"axis", int64_t{0}}});
  b.node("Reshape", {"X", "target"}, {"Y"});
  b.node("Equal", {"target", "minus1"}, {"eq"});
  b.node("Where", {"eq", "s", "target"}, {"fixed"});  // -1 replaced by X's dimension (8)
  b.node("Cast", {"fixed"}, {"f"}, {{"to", int64_t{1}}});
  b.node("Size", {"X"}, {"size"});
  std::vector<float> x(2 * 3 * 8 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  ValueMap out =
      execute(b.g, {{"X", Value::floats({2, 3, 8, 8}, x)}}, {.keep_intermediates = true});
  EXPECT_EQ(out.at("s").ints, (Ints{2, 3, 8, 8}));
  EXPECT_EQ(out.at("s").type, DataType::kInt64);
  EXPECT_EQ(out.at("h").shape, Ints{});
  EXPECT_EQ(out.at("h").ints, Ints{8});
  EXPECT_EQ(out.at("hd").ints, Ints{4});
  EXPECT_EQ(out.at("hu").shape, Ints{1});
  EXPECT_EQ(out.at("nc").ints, (Ints{2, 3}));
  EXPECT_EQ(out.at("target").ints, (Ints{2, 3, 4, -1}));
  EXPECT_EQ(out.at("Y").shape, (Ints{2, 3, 4, 16}));
  EXPECT_EQ(out.at("Y").data, x);
  EXPECT_EQ(out.at("eq").type, DataType::kBool);
  EXPECT_EQ(out.at("eq").ints, (Ints{0, 0, 0, 1}));
  EXPECT_EQ(out.at("fixed").ints, (Ints{2, 3, 4, 8}));
  EXPECT_EQ(out.at("f").data, (std::vector<float>{2, 3, 4, 8}));
  EXPECT_EQ(out.at("size").ints, Ints{384});

  // The same nodes one by one through run_node(), as constant folding calls them.
  const Value s = Value::int64s({4}, {2, 3, 8, 8});
  EXPECT_EQ(run_one("Shape", {Value::floats({2, 3, 8, 8}, x)},
                    {{"start", int64_t{-3}}, {"end", int64_t{-1}}})
                .ints,
            (Ints{3, 8}));
  EXPECT_EQ(run_one("Shape", {s}, {{"start", int64_t{-9}}, {"end", int64_t{9}}}).ints, Ints{4});
  const Value g = run_one("Gather", {s, Value::int64s({2}, {-1, 0})});
  EXPECT_EQ(g.ints, (Ints{8, 2}));
  EXPECT_EQ(g.type, DataType::kInt64);
  EXPECT_EQ(run_one("Mul", {s, Value::int64s({}, {3})}).ints, (Ints{6, 9, 24, 24}));
}

TEST(GraphExecutor, IntegerArithmeticTruncatesLikeC) {
  const Value a = Value::int64s({2, 3}, {7, -7, 9, -9, 0, 5});
  const Value b = Value::int64s({3}, {2, 2, -4});
  // Broadcast [2,3] op [3].
  EXPECT_EQ(run_one("Add", {a, b}).ints, (Ints{9, -5, 5, -7, 2, 1}));
  EXPECT_EQ(run_one("Sub", {a, b}).ints, (Ints{5, -9, 13, -11, -2, 9}));
  EXPECT_EQ(run_one("Mul", {a, b}).ints, (Ints{14, -14, -36, -18, 0, -20}));
  // Toward zero: -7 / 2 = -3, 9 / -4 = -2, -9 / 2 = -4, 5 / -4 = -1.
  EXPECT_EQ(run_one("Div", {a, b}).ints, (Ints{3, -3, -2, -4, 0, -1}));
  // Mod: fmod 0 takes the divisor's sign (Python), fmod 1 the dividend's (C).
  EXPECT_EQ(run_one("Mod", {a, b}).ints, (Ints{1, 1, -3, 1, 0, -3}));
  EXPECT_EQ(run_one("Mod", {a, b}, {{"fmod", int64_t{1}}}).ints, (Ints{1, -1, 1, -1, 0, 1}));
  EXPECT_EQ(run_one("Pow", {Value::int64s({3}, {2, -3, 5}), Value::int64s({3}, {10, 3, 0})}).ints,
            (Ints{1024, -27, 1}));
  // Pow with a float exponent keeps the base's type; a float base with an int exponent too.
  const Value p = run_one("Pow", {Value::int64s({2}, {4, 9}), Value::floats({2}, {0.5f, 0.5f})});
  EXPECT_EQ(p.type, DataType::kInt64);
  EXPECT_EQ(p.ints, (Ints{2, 3}));
  EXPECT_EQ(run_one("Pow", {Value::floats({2}, {2, 3}), Value::int64s({2}, {3, -1})}).data,
            (std::vector<float>{8, 1.0f / 3}));
  EXPECT_EQ(run_one("Max", {a, b, Value::int64s({}, {1})}).ints, (Ints{7, 2, 9, 2, 2, 5}));
  EXPECT_EQ(run_one("Min", {a, b}).ints, (Ints{2, -7, -4, -9, 0, -4}));
  EXPECT_EQ(run_one("Sum", {a, b, b}).ints, (Ints{11, -3, 1, -5, 4, -3}));
  EXPECT_EQ(run_one("Neg", {a}).ints, (Ints{-7, 7, -9, 9, 0, -5}));
  EXPECT_EQ(run_one("Abs", {a}).ints, (Ints{7, 7, 9, 9, 0, 5}));
  EXPECT_EQ(run_one("Sign", {a}).ints, (Ints{1, -1, 1, -1, 0, 1}));
  // int32 wraps to 32 bits and stays int32.
  const Value w = run_one("Mul", {int32s({1}, {65536}), int32s({1}, {65536})});
  EXPECT_EQ(w.type, DataType::kInt32);
  EXPECT_EQ(w.ints, Ints{0});
  EXPECT_NE(
      run_one_error("Div", {a, Value::int64s({}, {0})}).find("Div 'n': integer division by zero"),
      std::string::npos);
  EXPECT_NE(run_one_error("Add", {a, Value::floats({}, {1})}).find("one element type"),
            std::string::npos);
  // Float Div stays IEEE (no refusal), float Mod with fmod 0 is Python's.
  EXPECT_EQ(run_one("Mod", {Value::floats({2}, {-7, 7}), Value::floats({2}, {3, -3})}).data,
            (std::vector<float>{2, -2}));
}

TEST(GraphExecutor, ComparisonsLogicAndWhere) {
  const Value a = Value::floats({2, 2}, {1, 2, 3, 4});
  const Value b = Value::floats({2}, {2, 3});
  auto bools_of = [](const Value& v) {
    EXPECT_EQ(v.type, DataType::kBool);
    return v.ints;
  };
  EXPECT_EQ(bools_of(run_one("Equal", {a, b})), (Ints{0, 0, 0, 0}));
  EXPECT_EQ(bools_of(run_one("Less", {a, b})), (Ints{1, 1, 0, 0}));
  EXPECT_EQ(bools_of(run_one("Greater", {a, b})), (Ints{0, 0, 1, 1}));
  EXPECT_EQ(bools_of(run_one("LessOrEqual", {a, b})), (Ints{1, 1, 0, 0}));
  EXPECT_EQ(bools_of(run_one("GreaterOrEqual", {a, Value::floats({2, 1}, {2, 4})})),
            (Ints{0, 1, 0, 1}));
  EXPECT_EQ(bools_of(run_one("Equal", {Value::int64s({3}, {1, 5, 7}), Value::int64s({}, {5})})),
            (Ints{0, 1, 0}));
  const Value p = bools({4}, {0, 0, 1, 1}), q = bools({4}, {0, 1, 0, 1});
  EXPECT_EQ(bools_of(run_one("And", {p, q})), (Ints{0, 0, 0, 1}));
  EXPECT_EQ(bools_of(run_one("Or", {p, q})), (Ints{0, 1, 1, 1}));
  EXPECT_EQ(bools_of(run_one("Xor", {p, q})), (Ints{0, 1, 1, 0}));
  EXPECT_EQ(bools_of(run_one("Not", {p})), (Ints{1, 1, 0, 0}));
  // Where broadcasts all three: condition [2,1], X [2], Y scalar.
  const Value w = run_one(
      "Where", {bools({2, 1}, {1, 0}), Value::floats({2}, {5, 6}), Value::floats({}, {-1})});
  EXPECT_EQ(w.shape, (Ints{2, 2}));
  EXPECT_EQ(w.data, (std::vector<float>{5, 6, -1, -1}));
  EXPECT_NE(run_one_error("And", {a, a}).find("bool"), std::string::npos);
}

TEST(GraphExecutor, CastTruncatesTowardZero) {
  const Value x = Value::floats({6}, {-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, 3e9f});
  const Value i64 = run_one("Cast", {x}, {{"to", int64_t{7}}}, DataType::kInt64);
  EXPECT_EQ(i64.type, DataType::kInt64);
  EXPECT_EQ(i64.ints, (Ints{-2, 0, 0, 0, 2, 3000000000}));
  const Value i32 = run_one("Cast", {x}, {{"to", int64_t{6}}}, DataType::kInt32);
  EXPECT_EQ(i32.type, DataType::kInt32);
  EXPECT_EQ(i32.ints, (Ints{-2, 0, 0, 0, 2, INT32_MIN}));  // out of range: as numpy on x86
  EXPECT_EQ(run_one("Cast", {x}, {{"to", int64_t{9}}}).ints, (Ints{1, 1, 0, 1, 1, 1}));
  const Value f = run_one("Cast", {Value::int64s({3}, {-3, 0, 1 << 24})}, {{"to", int64_t{1}}});
  EXPECT_TRUE(f.is_float());
  EXPECT_EQ(f.data, (std::vector<float>{-3, 0, 16777216}));
  EXPECT_EQ(run_one("Cast", {bools({2}, {1, 0})}, {{"to", int64_t{7}}}).ints, (Ints{1, 0}));
  EXPECT_EQ(
      run_one("Cast", {Value::int64s({1}, {(int64_t{1} << 32) + 5})}, {{"to", int64_t{6}}}).ints,
      Ints{5});  // int64 → int32 wraps
  EXPECT_NE(run_one_error("Cast", {x}, {{"to", int64_t{11}}}).find("to 11 is not FLOAT"),
            std::string::npos);
}

TEST(GraphExecutor, ConstantOfShapeRangeExpandTile) {
  // ConstantOfShape: the TENSOR attribute `value` as a one-element list; default float 0.
  const Value shape = Value::int64s({2}, {2, 3});
  Value c = run_one("ConstantOfShape", {shape});
  EXPECT_TRUE(c.is_float());
  EXPECT_EQ(c.shape, (Ints{2, 3}));
  EXPECT_EQ(c.data, std::vector<float>(6, 0.0f));
  c = run_one("ConstantOfShape", {shape}, {{"value", std::vector<float>{2.5f}}});
  EXPECT_EQ(c.data, std::vector<float>(6, 2.5f));
  c = run_one("ConstantOfShape", {shape}, {{"value", Ints{7}}}, DataType::kInt64);
  EXPECT_EQ(c.type, DataType::kInt64);
  EXPECT_EQ(c.ints, Ints(6, 7));
  c = run_one("ConstantOfShape", {shape}, {{"value", Ints{1}}}, DataType::kBool);
  EXPECT_EQ(c.type, DataType::kBool);
  c = run_one("ConstantOfShape", {Value::int64s({0}, {})}, {{"value", Ints{4}}}, DataType::kInt32);
  EXPECT_EQ(c.shape, Ints{});  // an empty shape makes a scalar
  EXPECT_EQ(c.ints, Ints{4});
  EXPECT_NE(run_one_error("ConstantOfShape", {shape}, {{"value", Ints{1, 2}}}).find("one"),
            std::string::npos);

  // Range: max(ceil((limit - start) / delta), 0) elements, float or int.
  auto range = [](Value s, Value l, Value d) { return run_one("Range", {s, l, d}); };
  EXPECT_EQ(range(Value::int64s({}, {10}), Value::int64s({}, {1}), Value::int64s({}, {-3})).ints,
            (Ints{10, 7, 4}));
  EXPECT_EQ(range(Value::int64s({}, {0}), Value::int64s({}, {5}), Value::int64s({}, {2})).ints,
            (Ints{0, 2, 4}));
  EXPECT_EQ(range(Value::int64s({}, {3}), Value::int64s({}, {3}), Value::int64s({}, {1})).shape,
            Ints{0});
  const Value fr =
      range(Value::floats({}, {1}), Value::floats({}, {2}), Value::floats({}, {0.25f}));
  EXPECT_EQ(fr.data, (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));

  // Expand: bidirectional (a 1 in the shape keeps the input's dimension).
  const Value e =
      run_one("Expand", {Value::floats({3, 1}, {1, 2, 3}), Value::int64s({3}, {2, 1, 2})});
  EXPECT_EQ(e.shape, (Ints{2, 3, 2}));
  EXPECT_EQ(e.data, (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  const Value ei = run_one("Expand", {Value::int64s({2}, {4, 5}), Value::int64s({2}, {2, 1})});
  EXPECT_EQ(ei.ints, (Ints{4, 5, 4, 5}));
  // Tile.
  const Value t =
      run_one("Tile", {Value::floats({2, 2}, {1, 2, 3, 4}), Value::int64s({2}, {2, 3})});
  EXPECT_EQ(t.shape, (Ints{4, 6}));
  EXPECT_EQ(t.data, (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,
                                        1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
}

TEST(GraphExecutor, SqueezeUnsqueezeAxesAsAttributeOrInput) {
  const Value x = Value::floats({1, 3, 1, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run_one("Squeeze", {x}).shape, (Ints{3, 2}));                              // every 1
  EXPECT_EQ(run_one("Squeeze", {x}, {{"axes", Ints{-2}}}).shape, (Ints{1, 3, 2}));     // opset < 13
  EXPECT_EQ(run_one("Squeeze", {x, Value::int64s({1}, {0})}).shape, (Ints{3, 1, 2}));  // >= 13
  EXPECT_EQ(run_one("Squeeze", {x}).data, x.data);
  EXPECT_NE(run_one_error("Squeeze", {x}, {{"axes", Ints{1}}}).find("is not 1"), std::string::npos);
  const Value u = run_one("Unsqueeze", {Value::int64s({2}, {7, 8}), Value::int64s({2}, {0, -1})});
  EXPECT_EQ(u.shape, (Ints{1, 2, 1}));
  EXPECT_EQ(u.ints, (Ints{7, 8}));
  EXPECT_EQ(run_one("Unsqueeze", {Value::int64s({}, {3})}, {{"axes", Ints{0}}}).shape, Ints{1});
  EXPECT_EQ(run_one("Unsqueeze", {x}, {{"axes", Ints{1, 4}}}).shape, (Ints{1, 1, 3, 1, 1, 2}));
  EXPECT_NE(run_one_error("Unsqueeze", {x}, {{"axes", Ints{1, 1}}}).find("twice"),
            std::string::npos);
}

TEST(GraphExecutor, GatherAnyAxisNegativeAndInt32Indices) {
  // data [2,3,2] = 0..11.
  std::vector<float> d(12);
  for (int i = 0; i < 12; ++i) d[i] = static_cast<float>(i);
  const Value x = Value::floats({2, 3, 2}, d);
  const Value g1 = run_one("Gather", {x, int32s({2, 2}, {2, -3, -1, 1})}, {{"axis", int64_t{1}}});
  EXPECT_EQ(g1.shape, (Ints{2, 2, 2, 2}));
  // [n, (i, j), k]: rows 2, 0, 2, 1 of each batch.
  EXPECT_EQ(g1.data, (std::vector<float>{4, 5, 0, 1, 4, 5, 2, 3, 10, 11, 6, 7, 10, 11, 8, 9}));
  const Value g2 = run_one("Gather", {x, Value::int64s({}, {-1})}, {{"axis", int64_t{-1}}});
  EXPECT_EQ(g2.shape, (Ints{2, 3}));
  EXPECT_EQ(g2.data, (std::vector<float>{1, 3, 5, 7, 9, 11}));
  const Value g3 =
      run_one("Gather", {Value::int64s({4}, {10, 20, 30, 40}), Value::int64s({3}, {3, 0, -2})});
  EXPECT_EQ(g3.ints, (Ints{40, 10, 30}));
  EXPECT_NE(
      run_one_error("Gather", {x, Value::int64s({1}, {2})}).find("index 2 is outside [-2, 1]"),
      std::string::npos);
  // GatherElements along axis 1.
  const Value ge = run_one(
      "GatherElements", {Value::floats({2, 2}, {1, 2, 3, 4}), Value::int64s({2, 2}, {0, 0, 1, -2})},
      {{"axis", int64_t{1}}});
  EXPECT_EQ(ge.data, (std::vector<float>{1, 1, 4, 3}));
}

namespace {

/// The indices x[start:end:step] picks from an axis of n, by Python's rules (negative bounds
/// count from the end, then clamp to the axis; INT64_MAX / INT64_MIN mean "to the end"),
/// enumerated one by one. One difference, the ONNX doc's: with a negative step a start before
/// the axis clamps to 0 (Python would pick nothing).
std::vector<int64_t> python_slice(int64_t start, int64_t end, int64_t step, int64_t n) {
  auto adjust = [n, step](int64_t v) {
    if (v < 0) v = std::max<int64_t>(v + n, step < 0 ? -1 : 0);
    if (v >= n) v = step < 0 ? n - 1 : n;
    return v;
  };
  const int64_t s = step < 0 && start < -n ? 0 : adjust(start), e = adjust(end);
  std::vector<int64_t> picked;
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step) picked.push_back(i);
  return picked;
}

}  // namespace

TEST(GraphExecutor, SliceMatchesPythonSlicingOnRandomShapes) {
  std::mt19937 gen(7);
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<int64_t> bounds = {0, 1, 2, -1, -2, -5, 3, 7, kMax, kMin, 100, -100};
  for (int trial = 0; trial < 200; ++trial) {
    const size_t rank = 1 + gen() % 3;
    Ints shape;
    for (size_t i = 0; i < rank; ++i) shape.push_back(1 + gen() % 5);
    const std::vector<float> data = random_floats(static_cast<size_t>(count_of(shape)), trial);
    // Slice a random subset of axes (given in a random order, some negative).
    Ints starts, ends, axes, steps;
    std::vector<std::vector<int64_t>> picked(rank);
    for (size_t i = 0; i < rank; ++i) {
      picked[i].resize(static_cast<size_t>(shape[i]));
      std::iota(picked[i].begin(), picked[i].end(), 0);
    }
    for (size_t i = 0; i < rank; ++i) {
      if (gen() % 3 == 0) continue;
      const int64_t st = bounds[gen() % bounds.size()], en = bounds[gen() % bounds.size()];
      const int64_t sp = std::vector<int64_t>{1, 2, 3, -1, -2}[gen() % 5];
      starts.push_back(st);
      ends.push_back(en);
      steps.push_back(sp);
      axes.push_back(gen() % 2 ? static_cast<int64_t>(i)
                               : static_cast<int64_t>(i) - static_cast<int64_t>(rank));
      picked[i] = python_slice(st, en, sp, shape[i]);
    }
    if (starts.empty()) continue;
    // The expected tensor: every combination of picked indices, in order.
    Ints out_shape;
    for (const auto& p : picked) out_shape.push_back(static_cast<int64_t>(p.size()));
    std::vector<float> expected;
    std::vector<size_t> k(rank, 0);
    if (count_of(out_shape) > 0) {
      while (true) {
        int64_t offset = 0;
        for (size_t i = 0; i < rank; ++i) offset = offset * shape[i] + picked[i][k[i]];
        expected.push_back(data[static_cast<size_t>(offset)]);
        size_t i = rank;
        while (i-- > 0 && ++k[i] == picked[i].size()) k[i] = 0;
        if (i == static_cast<size_t>(-1)) break;
      }
    }
    const Value x = Value::floats(shape, data);
    const Value y =
        run_one("Slice", {x, Value::int64s({static_cast<int64_t>(starts.size())}, starts),
                          Value::int64s({static_cast<int64_t>(ends.size())}, ends),
                          Value::int64s({static_cast<int64_t>(axes.size())}, axes),
                          Value::int64s({static_cast<int64_t>(steps.size())}, steps)});
    ASSERT_EQ(y.shape, out_shape) << "trial " << trial;
    ASSERT_EQ(y.data, expected) << "trial " << trial;
  }
  // Slice-1: attributes, no steps; and int64 data.
  const Value a = run_one("Slice", {Value::int64s({2, 3}, {1, 2, 3, 4, 5, 6})},
                          {{"starts", Ints{1, -2}}, {"ends", Ints{kMax, 3}}, {"axes", Ints{0, 1}}});
  EXPECT_EQ(a.shape, (Ints{1, 2}));
  EXPECT_EQ(a.ints, (Ints{5, 6}));
  EXPECT_NE(run_one_error("Slice", {Value::int64s({2}, {1, 2}), Value::int64s({1}, {0}),
                                    Value::int64s({1}, {2}), Value::int64s({1}, {0}),
                                    Value::int64s({1}, {0})})
                .find("step 0"),
            std::string::npos);
}

TEST(GraphExecutor, SplitAttributeInputAndEqualParts) {
  const Value x = Value::floats({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto split = [&](std::vector<const Value*> in, size_t outs,
                   std::map<std::string, Attribute> attrs) {
    Node n;
    n.op_type = "Split";
    n.inputs = {"x"};
    if (in.size() > 1) n.inputs.push_back("split");
    for (size_t i = 0; i < outs; ++i) n.outputs.push_back("y" + std::to_string(i));
    n.attributes = std::move(attrs);
    return run_node(n, 0, in, std::vector<DataType>(outs, DataType::kFloat32));
  };
  const Value sizes = Value::int64s({2}, {2, 3});
  auto parts = split({&x, &sizes}, 2, {{"axis", int64_t{-1}}});  // opset 13: input
  EXPECT_EQ(parts[0].data, (std::vector<float>{0, 1, 5, 6}));
  EXPECT_EQ(parts[1].shape, (Ints{2, 3}));
  EXPECT_EQ(parts[1].data, (std::vector<float>{2, 3, 4, 7, 8, 9}));
  parts = split({&x}, 2, {{"axis", int64_t{1}}, {"split", Ints{4, 1}}});  // before 13: attribute
  EXPECT_EQ(parts[1].data, (std::vector<float>{4, 9}));
  parts = split({&x}, 2, {});  // equal parts along axis 0
  EXPECT_EQ(parts[0].data, (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(parts[1].data, (std::vector<float>{5, 6, 7, 8, 9}));
  parts = split({&x}, 3, {{"axis", int64_t{1}}});  // 5 in 3: 2, 2, 1
  EXPECT_EQ(parts[2].data, (std::vector<float>{4, 9}));
  EXPECT_THROW(split({&x}, 2, {{"axis", int64_t{1}}, {"split", Ints{1, 1}}}), GraphError);
}

// ---- float operators against naive loops on random shapes --------------------------------

namespace {

/// Row-major index of `index` in `shape`.
int64_t flat_index(const Ints& index, const Ints& shape) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i) f = f * shape[i] + index[i];
  return f;
}

/// Calls f(index) for every index of `shape` in row-major order.
template <typename F>
void for_each_index(const Ints& shape, F f) {
  if (count_of(shape) == 0) return;
  Ints index(shape.size(), 0);
  while (true) {
    f(index);
    size_t i = shape.size();
    while (i-- > 0 && ++index[i] == shape[i]) index[i] = 0;
    if (i == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

TEST(GraphExecutor, ReductionsMatchNaiveLoopsOnRandomShapes) {
  std::mt19937 gen(11);
  const std::vector<std::string> ops = {
      "ReduceSum", "ReduceMean", "ReduceMax",       "ReduceMin",    "ReduceProd",
      "ReduceL1",  "ReduceL2",   "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
  for (int trial = 0; trial < 120; ++trial) {
    const std::string& op = ops[trial % ops.size()];
    const size_t rank = 1 + gen() % 4;
    Ints shape;
    for (size_t i = 0; i < rank; ++i) shape.push_back(1 + gen() % 4);
    // Positive values keep LogSum defined; Prod stays near 1.
    const std::vector<float> x =
        random_floats(static_cast<size_t>(count_of(shape)), trial, 0.5f, 1.5f);
    std::vector<bool> reduced(rank, false);
    Ints axes;
    for (size_t i = 0; i < rank; ++i)
      if (gen() % 2) {
        reduced[i] = true;
        axes.push_back(gen() % 2 ? static_cast<int64_t>(i) : static_cast<int64_t>(i - rank));
      }
    const bool all = axes.empty();
    if (all) reduced.assign(rank, true);
    const bool keepdims = gen() % 2;
    // Groups by the index with the reduced axes set to 0.
    std::map<Ints, std::vector<double>> groups;
    for_each_index(shape, [&](const Ints& index) {
      Ints key = index;
      for (size_t i = 0; i < rank; ++i)
        if (reduced[i]) key[i] = 0;
      groups[key].push_back(x[static_cast<size_t>(flat_index(index, shape))]);
    });
    std::vector<float> expected;
    for (const auto& [key, values] : groups) {  // std::map orders keys row-major
      double r = 0;
      if (op == "ReduceSum")
        for (double v : values) r += v;
      if (op == "ReduceMean") {
        for (double v : values) r += v;
        r /= values.size();
      }
      if (op == "ReduceMax") r = *std::max_element(values.begin(), values.end());
      if (op == "ReduceMin") r = *std::min_element(values.begin(), values.end());
      if (op == "ReduceProd") {
        r = 1;
        for (double v : values) r *= v;
      }
      if (op == "ReduceL1")
        for (double v : values) r += std::fabs(v);
      if (op == "ReduceL2") {
        for (double v : values) r += v * v;
        r = std::sqrt(r);
      }
      if (op == "ReduceSumSquare")
        for (double v : values) r += v * v;
      if (op == "ReduceLogSum") {
        for (double v : values) r += v;
        r = std::log(r);
      }
      if (op == "ReduceLogSumExp") {
        for (double v : values) r += std::exp(v);
        r = std::log(r);
      }
      expected.push_back(static_cast<float>(r));
    }
    Ints out_shape;
    for (size_t i = 0; i < rank; ++i)
      if (!reduced[i])
        out_shape.push_back(shape[i]);
      else if (keepdims)
        out_shape.push_back(1);
    std::map<std::string, Attribute> attrs = {{"keepdims", int64_t{keepdims}}};
    Value y;
    if (op == "ReduceSum" && trial % 2) {  // ReduceSum-13: axes as input 1
      y = run_one(
          op, {Value::floats(shape, x), Value::int64s({static_cast<int64_t>(axes.size())}, axes)},
          attrs);
    } else {
      if (!all) attrs["axes"] = axes;
      y = run_one(op, {Value::floats(shape, x)}, attrs);
    }
    ASSERT_EQ(y.shape, out_shape) << op << " trial " << trial;
    EXPECT_CLOSE(y.data, expected, 1e-5) << op << " trial " << trial;
  }
  // noop_with_empty_axes passes the input through; int64 sums are exact.
  const Value x = Value::floats({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(
      run_one("ReduceSum", {x, Value::int64s({0}, {})}, {{"noop_with_empty_axes", int64_t{1}}})
          .data,
      x.data);
  EXPECT_EQ(run_one("ReduceSum", {x, Value::int64s({0}, {})}).data, std::vector<float>{10});
  const Value big = Value::int64s({2}, {(int64_t{1} << 60) + 1, 1});
  const Value s = run_one("ReduceSum", {big}, {{"keepdims", int64_t{0}}});
  EXPECT_EQ(s.type, DataType::kInt64);
  EXPECT_EQ(s.ints, Ints{(int64_t{1} << 60) + 2});
  EXPECT_EQ(run_one("ReduceProd", {Value::int64s({1, 3}, {2, 3, 4})}, {{"axes", Ints{1}}}).ints,
            Ints{24});
}

TEST(GraphExecutor, LayerAndInstanceNormalizationMatchNaiveLoops) {
  std::mt19937 gen(5);
  for (int trial = 0; trial < 30; ++trial) {
    const size_t rank = 2 + gen() % 3;
    Ints shape;
    for (size_t i = 0; i < rank; ++i) shape.push_back(1 + gen() % 4);
    const int64_t axis =
        static_cast<int64_t>(gen() % rank) - (gen() % 2 ? static_cast<int64_t>(rank) : 0);
    const size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
    const Ints norm_shape(shape.begin() + a, shape.end());
    const int64_t outer = count_of(Ints(shape.begin(), shape.begin() + a)),
                  size = count_of(norm_shape);
    const std::vector<float> x = random_floats(static_cast<size_t>(count_of(shape)), trial, -2, 3);
    const std::vector<float> scale = random_floats(static_cast<size_t>(size), trial + 100);
    const std::vector<float> bias = random_floats(static_cast<size_t>(size), trial + 200);
    const bool with_bias = trial % 3 != 0;
    const float eps = trial % 2 ? 1e-5f : 0.1f;
    std::vector<float> expected, means, inv_stds;
    for (int64_t r = 0; r < outer; ++r) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < size; ++i) m += x[r * size + i];
      m /= size;
      for (int64_t i = 0; i < size; ++i) v += (x[r * size + i] - m) * (x[r * size + i] - m);
      v /= size;
      means.push_back(static_cast<float>(m));
      inv_stds.push_back(static_cast<float>(1 / std::sqrt(v + eps)));
      for (int64_t i = 0; i < size; ++i)
        expected.push_back(static_cast<float>(
            (x[r * size + i] - m) / std::sqrt(v + eps) * scale[i] + (with_bias ? bias[i] : 0.0)));
    }
    Node n;
    n.op_type = "LayerNormalization";
    n.inputs = {"X", "Scale"};
    if (with_bias) n.inputs.push_back("B");
    n.outputs = {"Y", "Mean", "InvStdDev"};
    n.attributes = {{"axis", axis}, {"epsilon", eps}};
    const Value xv = Value::floats(shape, x), sv = Value::floats(norm_shape, scale),
                bv = Value::floats(norm_shape, bias);
    std::vector<const Value*> in = {&xv, &sv};
    if (with_bias) in.push_back(&bv);
    const auto out =
        run_node(n, 0, in, {DataType::kFloat32, DataType::kFloat32, DataType::kFloat32});
    EXPECT_CLOSE(out[0].data, expected, 1e-5) << "trial " << trial;
    Ints stats_shape(shape.begin(), shape.begin() + a);
    stats_shape.resize(rank, 1);
    EXPECT_EQ(out[1].shape, stats_shape);
    EXPECT_CLOSE(out[1].data, means, 1e-6);
    EXPECT_CLOSE(out[2].data, inv_stds, 1e-4);
  }
  // InstanceNormalization: per (n, c) over the spatial dimensions.
  const std::vector<float> x = random_floats(2 * 3 * 5, 9, -1, 2);
  const std::vector<float> scale = {0.5f, 1, 2}, bias = {0, 1, -1};
  std::vector<float> expected;
  for (int p = 0; p < 6; ++p) {
    double m = 0, v = 0;
    for (int i = 0; i < 5; ++i) m += x[p * 5 + i];
    m /= 5;
    for (int i = 0; i < 5; ++i) v += (x[p * 5 + i] - m) * (x[p * 5 + i] - m);
    v /= 5;
    for (int i = 0; i < 5; ++i)
      expected.push_back(static_cast<float>(
          (x[p * 5 + i] - m) / std::sqrt(v + 1e-5) * scale[p % 3] + bias[p % 3]));
  }
  EXPECT_CLOSE(
      run_one("InstanceNormalization",
              {Value::floats({2, 3, 5}, x), Value::floats({3}, scale), Value::floats({3}, bias)})
          .data,
      expected, 1e-5);
}

struct ConvTransposeCase {
  std::string name;
  int64_t n, c, h, w, m, kh, kw, group;
  Ints strides, dilations, pads, output_padding;  ///< pads [top, left, bottom, right]
  Ints output_shape;                              ///< {} = none
  std::string auto_pad;
};

void PrintTo(const ConvTransposeCase& c, std::ostream* os) {
  *os << c.name;
}

class ConvTransposeAgainstNaive : public ::testing::TestWithParam<ConvTransposeCase> {};

TEST_P(ConvTransposeAgainstNaive, MatchesTheGatherForm) {
  // y[n, m, oh, ow] = b[m] + Σ x[n, c, ih, iw] · w[c, m', i, j] over the channels c of m's group
  // and the taps (i, j) with oh = ih·sh + i·dh − top (the same for w): written as a gather over
  // output positions, the opposite of the kernel's scatter.
  const ConvTransposeCase& k = GetParam();
  const int64_t mg = k.m / k.group, cg = k.c / k.group;
  const std::vector<float> x = random_floats(k.n * k.c * k.h * k.w, 1);
  const std::vector<float> w = random_floats(k.c * mg * k.kh * k.kw, 2);
  const std::vector<float> b = random_floats(k.m, 3);
  const int64_t eh = (k.kh - 1) * k.dilations[0] + 1, ew = (k.kw - 1) * k.dilations[1] + 1;
  const int64_t full_h = k.strides[0] * (k.h - 1) + k.output_padding[0] + eh;
  const int64_t full_w = k.strides[1] * (k.w - 1) + k.output_padding[1] + ew;
  int64_t top = k.pads[0], left = k.pads[1], oh_n, ow_n;
  if (!k.output_shape.empty() || !k.auto_pad.empty()) {
    oh_n = k.output_shape.empty() ? k.h * k.strides[0] : k.output_shape[0];
    ow_n = k.output_shape.empty() ? k.w * k.strides[1] : k.output_shape[1];
    // The ONNX doc: total padding = full - out; SAME_UPPER puts the odd one at the end.
    const int64_t th = full_h - oh_n, tw = full_w - ow_n;
    top = k.auto_pad == "SAME_UPPER" ? th / 2 : th - th / 2;
    left = k.auto_pad == "SAME_UPPER" ? tw / 2 : tw - tw / 2;
  } else {
    oh_n = full_h - k.pads[0] - k.pads[2];
    ow_n = full_w - k.pads[1] - k.pads[3];
  }
  std::vector<float> expected;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double s = b[m];
          const int64_t g = m / mg;
          for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t nh = oh + top - i * k.dilations[0];
                const int64_t nw = ow + left - j * k.dilations[1];
                if (nh < 0 || nw < 0 || nh % k.strides[0] || nw % k.strides[1]) continue;
                const int64_t ih = nh / k.strides[0], iw = nw / k.strides[1];
                if (ih >= k.h || iw >= k.w) continue;
                s += double(x[((n * k.c + c) * k.h + ih) * k.w + iw]) *
                     w[((c * mg + m % mg) * k.kh + i) * k.kw + j];
              }
          expected.push_back(static_cast<float>(s));
        }
  std::map<std::string, Attribute> attrs = {{"strides", k.strides},
                                            {"dilations", k.dilations},
                                            {"group", k.group},
                                            {"output_padding", k.output_padding}};
  if (k.auto_pad.empty() && k.output_shape.empty()) attrs["pads"] = k.pads;
  if (!k.auto_pad.empty()) attrs["auto_pad"] = k.auto_pad;
  if (!k.output_shape.empty()) attrs["output_shape"] = k.output_shape;
  const Value y = run_one("ConvTranspose",
                          {Value::floats({k.n, k.c, k.h, k.w}, x),
                           Value::floats({k.c, mg, k.kh, k.kw}, w), Value::floats({k.m}, b)},
                          attrs);
  EXPECT_EQ(y.shape, (Ints{k.n, k.m, oh_n, ow_n}));
  EXPECT_CLOSE(y.data, expected, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvTransposeAgainstNaive,
    ::testing::Values(
        ConvTransposeCase{
            "plain", 1, 2, 3, 3, 3, 3, 3, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, {}, ""},
        ConvTransposeCase{
            "stride2_pad1", 2, 3, 4, 5, 2, 3, 3, 1, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}, {}, ""},
        ConvTransposeCase{"asym_pads_outpad",
                          1,
                          2,
                          3,
                          4,
                          2,
                          2,
                          3,
                          1,
                          {2, 3},
                          {1, 1},
                          {0, 1, 1, 0},
                          {1, 2},
                          {},
                          ""},
        ConvTransposeCase{
            "dilated", 1, 1, 4, 4, 2, 3, 2, 1, {1, 2}, {2, 3}, {1, 0, 2, 1}, {0, 1}, {}, ""},
        ConvTransposeCase{
            "group2", 1, 4, 3, 3, 6, 3, 3, 2, {2, 1}, {1, 1}, {1, 1, 0, 0}, {1, 0}, {}, ""},
        ConvTransposeCase{
            "depthwise", 2, 3, 5, 4, 3, 4, 4, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}, {}, ""},
        ConvTransposeCase{"output_shape",
                          1,
                          2,
                          3,
                          3,
                          2,
                          3,
                          3,
                          1,
                          {2, 2},
                          {1, 1},
                          {0, 0, 0, 0},
                          {0, 0},
                          {6, 5},
                          ""},
        ConvTransposeCase{"same_upper",
                          1,
                          2,
                          3,
                          4,
                          2,
                          3,
                          3,
                          1,
                          {2, 2},
                          {1, 1},
                          {0, 0, 0, 0},
                          {0, 0},
                          {},
                          "SAME_UPPER"},
        ConvTransposeCase{"same_lower",
                          1,
                          2,
                          3,
                          4,
                          2,
                          4,
                          3,
                          1,
                          {2, 2},
                          {1, 1},
                          {0, 0, 0, 0},
                          {0, 0},
                          {},
                          "SAME_LOWER"}),
    [](const auto& info) { return info.param.name; });

TEST(GraphExecutor, PadModesMatchNumpyOnRandomShapes) {
  std::mt19937 gen(3);
  for (int trial = 0; trial < 60; ++trial) {
    const std::string mode = std::vector<std::string>{"constant", "reflect", "edge"}[trial % 3];
    const size_t rank = 1 + gen() % 3;
    Ints shape, pads(2 * rank);
    for (size_t i = 0; i < rank; ++i) shape.push_back(2 + gen() % 3);
    for (size_t i = 0; i < rank; ++i) {
      // numpy's reflect needs pads < the axis; constant and edge also crop (negative pads).
      const int64_t lo = mode == "constant" ? -1 : 0;
      pads[i] = lo + static_cast<int64_t>(gen() % (shape[i] - lo));
      pads[i + rank] = lo + static_cast<int64_t>(gen() % (shape[i] - lo));
    }
    const std::vector<float> x = random_floats(static_cast<size_t>(count_of(shape)), trial);
    Ints out_shape;
    for (size_t i = 0; i < rank; ++i) out_shape.push_back(shape[i] + pads[i] + pads[i + rank]);
    std::vector<float> expected;
    for_each_index(out_shape, [&](const Ints& o) {
      Ints in(rank);
      bool inside = true;
      for (size_t d = 0; d < rank; ++d) {
        int64_t i = o[d] - pads[d];
        const int64_t n = shape[d];
        if (i < 0 || i >= n) {
          if (mode == "constant") inside = false;
          if (mode == "edge") i = i < 0 ? 0 : n - 1;
          if (mode == "reflect") i = i < 0 ? -i : 2 * (n - 1) - i;  // one reflection
        }
        in[d] = i;
      }
      expected.push_back(inside ? x[static_cast<size_t>(flat_index(in, shape))] : 2.5f);
    });
    Value y;
    if (trial % 2) {  // Pad-11: inputs
      y = run_one(
          "Pad",
          {Value::floats(shape, x), Value::int64s({static_cast<int64_t>(pads.size())}, pads),
           Value::floats({}, {2.5f})},
          {{"mode", mode}});
    } else {  // Pad-2: attributes
      y = run_one("Pad", {Value::floats(shape, x)},
                  {{"mode", mode}, {"pads", pads}, {"value", 2.5f}});
    }
    ASSERT_EQ(y.shape, out_shape) << mode << " trial " << trial;
    ASSERT_EQ(y.data, expected) << mode << " trial " << trial;
  }
  // int64 data pads with the value too.
  EXPECT_EQ(run_one("Pad", {Value::int64s({2}, {5, 6}), Value::int64s({2}, {1, 2}),
                            Value::int64s({}, {-1})})
                .ints,
            (Ints{-1, 5, 6, -1, -1}));
  EXPECT_NE(run_one_error("Pad", {Value::floats({2}, {1, 2})},
                          {{"mode", std::string("wrap")}, {"pads", Ints{1, 1}}})
                .find("mode 'wrap'"),
            std::string::npos);
}

TEST(GraphExecutor, ResizeBilinearMatchesPyTorchOnRandomSizes) {
  // PyTorch's bilinear interpolation with align_corners=False (ONNX half_pixel, edges repeated):
  // src = (dst + 0.5) · in / out − 0.5, clamped below at 0; the two neighbours, the upper one
  // clamped to the last row.
  std::mt19937 gen(13);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t n = 1 + gen() % 2, c = 1 + gen() % 3, h = 1 + gen() % 5, w = 1 + gen() % 5;
    const int64_t oh = 1 + gen() % 9, ow = 1 + gen() % 9;
    const std::vector<float> x = random_floats(static_cast<size_t>(n * c * h * w), trial);
    auto source = [](int64_t dst, int64_t in, int64_t out, int64_t& i0, int64_t& i1, double& l) {
      double src = (dst + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
      if (src < 0) src = 0;
      i0 = static_cast<int64_t>(src);
      i1 = std::min(i0 + 1, in - 1);
      l = src - static_cast<double>(i0);
    };
    std::vector<float> expected;
    for (int64_t p = 0; p < n * c; ++p)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          int64_t y0, y1, x0, x1;
          double ly, lx;
          source(y, h, oh, y0, y1, ly);
          source(z, w, ow, x0, x1, lx);
          auto at = [&](int64_t i, int64_t j) { return double(x[(p * h + i) * w + j]); };
          expected.push_back(
              static_cast<float>((1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) +
                                 ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1))));
        }
    Node node;
    node.op_type = "Resize";
    node.inputs = {"X", "", "", "sizes"};
    node.outputs = {"Y"};
    node.attributes = {{"mode", std::string("linear")}};
    const Value xv = Value::floats({n, c, h, w}, x), sizes = Value::int64s({4}, {n, c, oh, ow});
    const Value y = run_node(node, 0, {&xv, nullptr, nullptr, &sizes}, {DataType::kFloat32}).at(0);
    ASSERT_EQ(y.shape, (Ints{n, c, oh, ow}));
    EXPECT_CLOSE(y.data, expected, 1e-5) << "trial " << trial;
  }
}

TEST(GraphExecutor, UpsampleAndResize10UseAsymmetricCoordinates) {
  const Value x = Value::floats({1, 1, 2, 2}, {1, 2, 3, 4});
  const std::vector<float> nearest = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                      3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  // Upsample-7: scales attribute; Upsample-9 and Resize-10: scales input.
  EXPECT_EQ(
      run_one("Upsample", {x}, {{"scales", std::vector<float>{1, 1, 2, 3}}}, DataType::kFloat32, 7)
          .data,
      nearest);
  const Value scales = Value::floats({4}, {1, 1, 2, 3});
  EXPECT_EQ(run_one("Upsample", {x, scales}, {}, DataType::kFloat32, 9).data, nearest);
  EXPECT_EQ(run_one("Resize", {x, scales}, {}, DataType::kFloat32, 10).data, nearest);
  // Linear, x_in = x_out / scale, the edge repeated past the last input.
  const Value lin = run_one("Resize", {x, Value::floats({4}, {1, 1, 2, 2})},
                            {{"mode", std::string("linear")}}, DataType::kFloat32, 10);
  EXPECT_EQ(lin.shape, (Ints{1, 1, 4, 4}));
  EXPECT_CLOSE(lin.data,
               (std::vector<float>{1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4}),
               1e-6);
  // Shrinking: ceil(x_out / scale), as onnxruntime: 2x4 by 0.6 → [1, 3].
  const Value down = run_one("Resize",
                             {Value::floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}),
                              Value::floats({4}, {1, 1, 0.6f, 0.6f})},
                             {}, DataType::kFloat32, 10);
  EXPECT_EQ(down.shape, (Ints{1, 1, 1, 2}));
  EXPECT_EQ(down.data, (std::vector<float>{1, 3}));
  // Resize-11+ refuses what it does not know.
  Node bad;
  bad.op_type = "Resize";
  bad.inputs = {"X", "", "scales"};
  bad.outputs = {"Y"};
  bad.attributes = {{"coordinate_transformation_mode", std::string("diagonal")}};
  const Value s2 = Value::floats({4}, {1, 1, 2, 2});
  EXPECT_THROW(run_node(bad, 0, {&x, nullptr, &s2}, {DataType::kFloat32}), GraphError);
}

TEST(GraphExecutor, MoreActivationsByHand) {
  const Value x = Value::floats({5}, {-2, -0.5f, 0, 0.5f, 2});
  auto f = [&](const std::string& op, std::map<std::string, Attribute> attrs = {}) {
    return run_one(op, {x}, std::move(attrs)).data;
  };
  std::vector<float> e;
  auto each = [&](double (*g)(double)) {
    std::vector<float> r;
    for (float v : x.data) r.push_back(static_cast<float>(g(v)));
    return r;
  };
  EXPECT_CLOSE(f("Tanh"), each([](double v) { return std::tanh(v); }), 1e-7);
  EXPECT_CLOSE(f("Exp"), each([](double v) { return std::exp(v); }), 1e-6);
  EXPECT_CLOSE(f("Erf"),
               (std::vector<float>{-0.995322265f, -0.520499878f, 0, 0.520499878f, 0.995322265f}),
               1e-7);
  EXPECT_CLOSE(f("Softplus"), each([](double v) { return std::log(1 + std::exp(v)); }), 1e-6);
  EXPECT_CLOSE(f("Softsign"), (std::vector<float>{-2.0f / 3, -1.0f / 3, 0, 1.0f / 3, 2.0f / 3}),
               1e-7);
  EXPECT_CLOSE(f("Elu", {{"alpha", 2.0f}}),
               each([](double v) { return v < 0 ? 2 * (std::exp(v) - 1) : v; }), 1e-6);
  EXPECT_CLOSE(f("Selu"), each([](double v) {
                 return 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * (std::exp(v) - 1));
               }),
               1e-6);
  EXPECT_EQ(f("LeakyRelu"), (std::vector<float>{-0.02f, -0.005f, 0, 0.5f, 2}));
  EXPECT_EQ(f("LeakyRelu", {{"alpha", 0.5f}}), (std::vector<float>{-1, -0.25f, 0, 0.5f, 2}));
  EXPECT_EQ(f("Neg"), (std::vector<float>{2, 0.5f, 0, -0.5f, -2}));
  EXPECT_EQ(f("Abs"), (std::vector<float>{2, 0.5f, 0, 0.5f, 2}));
  EXPECT_EQ(f("Floor"), (std::vector<float>{-2, -1, 0, 0, 2}));
  EXPECT_EQ(f("Ceil"), (std::vector<float>{-2, 0, 0, 1, 2}));
  EXPECT_EQ(f("Round"), (std::vector<float>{-2, 0, 0, 0, 2}));  // half to even
  EXPECT_EQ(run_one("Round", {Value::floats({3}, {1.5f, 2.5f, -1.5f})}).data,
            (std::vector<float>{2, 2, -2}));
  const Value pos = Value::floats({3}, {0.25f, 1, 4});
  EXPECT_EQ(run_one("Sqrt", {pos}).data, (std::vector<float>{0.5f, 1, 2}));
  EXPECT_EQ(run_one("Reciprocal", {pos}).data, (std::vector<float>{4, 1, 0.25f}));
  EXPECT_CLOSE(run_one("Log", {pos}).data, (std::vector<float>{-1.3862944f, 0, 1.3862944f}), 1e-7);
  // Gelu (opset 20, only in webtune's own graphs): exact and tanh approximation.
  EXPECT_CLOSE(f("Gelu"),
               (std::vector<float>{-0.0455002639f, -0.154268769f, 0, 0.345731231f, 1.95449974f}),
               1e-7);
  EXPECT_CLOSE(f("Gelu", {{"approximate", std::string("tanh")}}),
               (std::vector<float>{-0.0454023059f, -0.154285990f, 0, 0.345714010f, 1.95459769f}),
               1e-7);
  EXPECT_NE(
      run_one_error("Gelu", {x}, {{"approximate", std::string("fast")}}).find("approximate 'fast'"),
      std::string::npos);
  // PRelu: the slope broadcasts to X ([C,1,1] over [N,C,H,W]).
  const Value px = Value::floats({1, 2, 1, 2}, {-1, 2, -3, 4});
  EXPECT_EQ(run_one("PRelu", {px, Value::floats({2, 1, 1}, {0.5f, 0.25f})}).data,
            (std::vector<float>{-0.5f, 2, -0.75f, 4}));
  EXPECT_NE(
      run_one_error("PRelu", {Value::floats({2}, {1, 2}), Value::floats({2, 2}, {1, 2, 3, 4})})
          .find("does not broadcast to X"),
      std::string::npos);
}

TEST(GraphExecutor, VariadicLogSoftmaxGlobalMaxPool) {
  const Value a = Value::floats({2, 2}, {1, 8, 3, -4}), b = Value::floats({2}, {2, 5});
  const Value c = Value::floats({}, {4});
  EXPECT_EQ(run_one("Sum", {a, b, c}).data, (std::vector<float>{7, 17, 9, 5}));
  EXPECT_EQ(run_one("Mean", {a, b, c}).data,
            (std::vector<float>{7.0f / 3, 17.0f / 3, 3, 5.0f / 3}));
  EXPECT_EQ(run_one("Max", {a, b, c}).data, (std::vector<float>{4, 8, 4, 5}));
  EXPECT_EQ(run_one("Min", {a, b}).data, (std::vector<float>{1, 5, 2, -4}));
  EXPECT_EQ(run_one("Max", {a}).data, a.data);
  EXPECT_TRUE(
      std::isnan(run_one("Max", {Value::floats({1}, {NAN}), Value::floats({1}, {1})}).data[0]));
  // LogSoftmax = x − max − log Σ exp(x − max), along the last axis (opset 13).
  const Value l = run_one("LogSoftmax", {Value::floats({2, 2}, {0, std::log(3.0f), 1000, 1000})});
  EXPECT_CLOSE(
      l.data,
      (std::vector<float>{-std::log(4.0f), std::log(0.75f), -std::log(2.0f), -std::log(2.0f)}),
      1e-6);
  // GlobalMaxPool over every spatial dimension.
  const Value g =
      run_one("GlobalMaxPool", {Value::floats({1, 2, 2, 2}, {1, 5, -2, 3, -1, -7, -3, -2})});
  EXPECT_EQ(g.shape, (Ints{1, 2, 1, 1}));
  EXPECT_EQ(g.data, (std::vector<float>{5, -1}));
}

// ---- ONNX conformance (libonnx-testdata) -----------------------------------------------------

namespace {

/// Runs one case directory; returns "" when every output matches, else what went wrong.
std::string run_case(const std::string& name, bool raise_opset) {
  try {
    const webtune::test::LoadedCase c = webtune::test::load_case(name, raise_opset);
    const ValueMap outputs = execute(c.graph, c.inputs, {.opset = c.report.opset});
    for (const auto& [out_name, expected] : c.expected) {
      const Value& actual = outputs.at(out_name);
      if (actual.shape != expected.shape)
        return "output '" + out_name + "' has shape " + ::testing::PrintToString(actual.shape) +
               ", expected " + ::testing::PrintToString(expected.shape);
      if (expected.is_float()) {
        double scale = 1.0;
        for (float x : expected.data) scale = std::max(scale, std::fabs(static_cast<double>(x)));
        const double err = max_abs_diff(actual.data, expected.data);
        if (!(err <= 1e-4 * scale))
          return "output '" + out_name + "': max abs error " + std::to_string(err) + " > " +
                 std::to_string(1e-4 * scale);
      } else if (actual.ints != expected.ints) {
        return "output '" + out_name + "': integer values differ";
      }
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// "test_batchnorm" is BatchNormalization's prefix; every other op's is its lowercased name.
std::string case_prefix(const std::string& op) {
  if (op == "BatchNormalization") return "test_batchnorm";
  std::string lower = op;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return "test_" + lower;
}

/// Whether case directory `name` belongs to an operator the executor runs: its name is
/// test_<op> or test_<op>_..., or its model holds only such operators (and Constant nodes).
bool matches_an_operator(const std::string& name) {
  for (const std::string& op : supported_operators()) {
    const std::string prefix = case_prefix(op);
    if (name == prefix || name.rfind(prefix + "_", 0) == 0) return true;
  }
  onnx::ModelProto model;
  if (!model.ParseFromString(read_bytes(kTestData / name / "model.onnx"))) return false;
  if (model.graph().node_size() == 0) return false;
  for (const auto& node : model.graph().node()) {
    const bool known = node.domain().empty() &&
                       (node.op_type() == "Constant" || (is_supported_operator(node.op_type()) &&
                                                         node.op_type().rfind("Fused", 0) != 0));
    if (!known) return false;
  }
  return true;
}

class Conformance : public ::testing::TestWithParam<ConformanceCase> {};

}  // namespace

TEST(GraphExecutorConformance, TheCaseListNamesEveryMatchingCase) {
  if (!fs::exists(kTestData))
    GTEST_SKIP() << kTestData
                 << " is absent (Debian's libonnx-testdata; scripts/install-deps "
                    "installs it)";
  const auto cases = listed_cases();
  ASSERT_FALSE(cases.empty()) << kCaseList << " is missing or empty";
  std::set<std::string> listed;
  int run = 0, skipped = 0;
  for (const auto& c : cases) {
    EXPECT_TRUE(listed.insert(c.name).second) << c.name << " is listed twice";
    EXPECT_TRUE(c.status == "run" || c.status == "run7" || c.status == "skip")
        << c.name << ": unknown status '" << c.status << "'";
    EXPECT_TRUE(c.status == "run" || !c.reason.empty()) << c.name << " needs a reason";
    EXPECT_TRUE(fs::exists(kTestData / c.name)) << c.name << " is listed but not in " << kTestData;
    (c.status == "skip" ? skipped : run)++;
  }
  for (const auto& entry : fs::directory_iterator(kTestData)) {
    const std::string name = entry.path().filename().string();
    if (matches_an_operator(name)) {
      EXPECT_TRUE(listed.count(name))
          << name << " tests an operator the executor runs but is not in " << kCaseList
          << " (add it as run or skip with a reason)";
    }
  }
  std::cout << "ONNX conformance (" << kCaseList.filename().string() << "): " << run << " run, "
            << skipped << " skipped\n";
}

TEST_P(Conformance, MatchesTheExpectedOutputs) {
  const ConformanceCase& c = GetParam();
  if (!fs::exists(kTestData / c.name)) GTEST_SKIP() << kTestData / c.name << " is absent";
  const std::string problem = run_case(c.name, c.status == "run7");
  if (c.status == "skip") {
    // A skipped case must still fail (else it belongs in the run list).
    EXPECT_FALSE(problem.empty()) << c.name << " is listed as skipped (" << c.reason
                                  << ") but passes: list it as run";
    GTEST_SKIP() << c.reason << " [" << problem << "]";
  }
  EXPECT_EQ(problem, "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Onnx, Conformance, ::testing::ValuesIn(listed_cases()),
                         [](const auto& info) { return info.param.name.substr(5); });

// ---- the real models ------------------------------------------------------------------------

class RealModel : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModel, LogitsMatchOnnxruntime) {
  const std::string model = GetParam();
  if (!fs::exists(kShared / (model + ".onnx")))
    GTEST_SKIP() << "../shared/models is absent (a user's clone has none): " << model
                 << " is not run here";
  ImportReport report;
  const Graph graph = import_onnx_file((kShared / (model + ".onnx")).string(), {}, &report);
  ASSERT_TRUE(report.unsupported.empty());
  const auto input = read_f32(kShared / (model + ".input.f32"));
  const auto expected = read_f32(kShared / (model + ".logits.f32"));
  ASSERT_EQ(input.size(), 3u * 224 * 224);
  ASSERT_EQ(expected.size(), 1000u);
  ASSERT_EQ(graph.inputs.size(), 1u);
  const auto start = std::chrono::steady_clock::now();
  const ValueMap out = execute(graph, {{graph.inputs[0], Value::floats({1, 3, 224, 224}, input)}},
                               {.opset = report.opset});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Value& logits = out.at(graph.outputs.at(0));
  EXPECT_EQ(logits.shape, (Ints{1, 1000}));
  double max_logit = 0;
  for (float x : expected) max_logit = std::max(max_logit, std::fabs(static_cast<double>(x)));
  const double err = max_abs_diff(logits.data, expected);
  std::cout << model << ": max abs error " << err << " (max |logit| " << max_logit << "), "
            << seconds << " s\n";
  EXPECT_LE(err, 1e-4 * max_logit);
}

INSTANTIATE_TEST_SUITE_P(Shared, RealModel, ::testing::Values("resnet18", "mobilenet_v2"),
                         [](const auto& info) { return info.param; });
