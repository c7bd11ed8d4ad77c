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
#include <random>
#include <set>
#include <sstream>

#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/operators.hpp"

namespace fs = std::filesystem;
using namespace webtune::graph;
using webtune::Activation;
using webtune::Epilogue;
using webtune::Residual;

namespace {

const fs::path kShared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
const fs::path kTestData = "/usr/share/libonnx-testdata/data/node";
const fs::path kCaseList = fs::path(WEBTUNE_SOURCE_DIR) / "tests" / "graph_executor_cases.txt";

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
                                                     {"hard_swish", Activation::kHardSwish}};
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

// ---- ONNX conformance (libonnx-testdata) -----------------------------------------------------

namespace {

/// One line of tests/graph_executor_cases.txt: "<case> run", "<case> run7 <why>" (run with the
/// model's opset raised to 7, the importer's minimum) or "<case> skip <reason>".
struct ConformanceCase {
  std::string name;
  std::string status;
  std::string reason;
};

void PrintTo(const ConformanceCase& c, std::ostream* os) {
  *os << c.name << " " << c.status;
}

std::vector<ConformanceCase> listed_cases() {
  std::vector<ConformanceCase> cases;
  std::ifstream in(kCaseList);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    ConformanceCase c;
    s >> c.name >> c.status;
    std::getline(s >> std::ws, c.reason);
    cases.push_back(c);
  }
  return cases;
}

/// A TensorProto's values, read here (not by the importer): float32 into data; int64, int32 and
/// bool into ints. Other element types throw.
Value value_of_proto(const onnx::TensorProto& t) {
  Value v;
  v.shape.assign(t.dims().begin(), t.dims().end());
  const size_t n = static_cast<size_t>(count_of(v.shape));
  const std::string& raw = t.raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto_DataType_FLOAT:
      if (t.has_raw_data()) {
        v.data.resize(raw.size() / 4);
        if (!raw.empty()) std::memcpy(v.data.data(), raw.data(), v.data.size() * 4);
      } else {
        v.data.assign(t.float_data().begin(), t.float_data().end());
      }
      break;
    case onnx::TensorProto_DataType_INT64:
      v.type = DataType::kInt64;
      if (t.has_raw_data()) {
        v.ints.resize(raw.size() / 8);
        if (!raw.empty()) std::memcpy(v.ints.data(), raw.data(), v.ints.size() * 8);
      } else {
        v.ints.assign(t.int64_data().begin(), t.int64_data().end());
      }
      break;
    case onnx::TensorProto_DataType_INT32:
    case onnx::TensorProto_DataType_BOOL: {
      const bool is_bool = t.data_type() == onnx::TensorProto_DataType_BOOL;
      v.type = is_bool ? DataType::kBool : DataType::kInt32;
      if (t.has_raw_data()) {
        for (size_t i = 0; i < n; ++i) {
          int32_t x = 0;
          if (is_bool)
            x = raw.at(i) != 0;
          else
            std::memcpy(&x, raw.data() + 4 * i, 4);
          v.ints.push_back(x);
        }
      } else {
        v.ints.assign(t.int32_data().begin(), t.int32_data().end());
      }
      break;
    }
    default:
      throw std::runtime_error("tensor '" + t.name() + "' has element type " +
                               std::to_string(t.data_type()) + ", which this test does not read");
  }
  const size_t size = v.is_float() ? v.data.size() : v.ints.size();
  if (size != n) throw std::runtime_error("tensor '" + t.name() + "' does not fill its shape");
  return v;
}

/// Runs one case directory; returns "" when every output matches, else what went wrong.
std::string run_case(const std::string& name, bool raise_opset) {
  const fs::path dir = kTestData / name;
  try {
    ImportReport report;
    Graph graph;
    if (raise_opset) {
      onnx::ModelProto model;
      if (!model.ParseFromString(read_bytes(dir / "model.onnx"))) return "model does not parse";
      for (auto& opset : *model.mutable_opset_import())
        if (opset.domain().empty() && opset.version() < kMinOpset) opset.set_version(kMinOpset);
      std::string bytes;
      model.SerializeToString(&bytes);
      graph = import_onnx_bytes(bytes, (dir / "model.onnx").string(), {}, &report);
    } else {
      graph = import_onnx_file((dir / "model.onnx").string(), {}, &report);
    }
    const fs::path data = dir / "test_data_set_0";
    ValueMap inputs;
    for (size_t i = 0; i < graph.inputs.size(); ++i) {
      onnx::TensorProto t;
      if (!t.ParseFromString(read_bytes(data / ("input_" + std::to_string(i) + ".pb"))))
        return "input_" + std::to_string(i) + ".pb does not parse";
      inputs[t.name().empty() ? graph.inputs[i] : t.name()] = value_of_proto(t);
    }
    const ValueMap outputs = execute(graph, inputs, {.opset = report.opset});
    for (size_t i = 0; i < graph.outputs.size(); ++i) {
      onnx::TensorProto t;
      if (!t.ParseFromString(read_bytes(data / ("output_" + std::to_string(i) + ".pb"))))
        return "output_" + std::to_string(i) + ".pb does not parse";
      const Value expected = value_of_proto(t);
      const std::string out_name = t.name().empty() ? graph.outputs[i] : t.name();
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
