/// \file graph_passes_test.cpp
/// The fusion passes (graph/passes.hpp) and task extraction (graph/task_extraction.hpp).
///
/// Small graphs are built here by hand. Each pass is checked structurally (which nodes remain,
/// their epilogues, inputs and constants) and numerically: a small reference evaluator below
/// (plain loops in double, fused operators through Epilogue::apply, the codegen's own
/// semantics) runs the graph before and after on seeded random inputs and the outputs must
/// agree. Every "does not fuse" case leaves the graph exactly as it was. The real PyTorch
/// exports of ../shared/models (skipped with a message when absent) must give the tasks of
/// configs/workloads/resnet18_fused.json and mobilenet_v2.json plus their classifier's dense.

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include "codegen/workload.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "graph/task_extraction.hpp"

namespace fs = std::filesystem;
using namespace webtune;
using namespace webtune::graph;

namespace {

const fs::path kShared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
const fs::path kConfigs = fs::path(WEBTUNE_SOURCE_DIR) / "configs" / "workloads";

#define SKIP_WITHOUT_SHARED()                                                               \
  if (!fs::exists(kShared / "resnet18.onnx") || !fs::exists(kShared / "mobilenet_v2.onnx")) \
  GTEST_SKIP() << "../shared/models is absent (a user's clone has none): the real PyTorch " \
                  "exports are not tested here"

// ---------------------------------------------------------------------------------------------
// Building graphs.

class Builder {
 public:
  Graph g;

  std::string input(const std::string& name, std::vector<int64_t> shape) {
    add_tensor(name, std::move(shape));
    g.inputs.push_back(name);
    return name;
  }
  /// A float constant; without data, seeded values in [-1, 1].
  std::string constant(const std::string& name, std::vector<int64_t> shape,
                       std::vector<float> data = {}) {
    Tensor& t = add_tensor(name, std::move(shape));
    if (data.empty()) {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      data.resize(static_cast<size_t>(t.elements()));
      for (float& v : data) v = u(rng_);
    }
    t.float_data = std::move(data);
    return name;
  }
  /// A node named `name` (default: op and a counter) writing "<name>_out" of `out_shape`.
  std::string node(const std::string& op, std::vector<std::string> inputs,
                   std::vector<int64_t> out_shape, std::map<std::string, Attribute> attributes = {},
                   std::string name = {}) {
    Node n;
    n.op_type = op;
    n.name = name.empty() ? op + "_" + std::to_string(++counter_) : name;
    n.inputs = std::move(inputs);
    n.outputs = {n.name + "_out"};
    n.attributes = std::move(attributes);
    add_tensor(n.outputs[0], std::move(out_shape));
    g.nodes.push_back(n);
    return n.outputs[0];
  }
  void output(const std::string& name) { g.outputs.push_back(name); }

 private:
  Tensor& add_tensor(const std::string& name, std::vector<int64_t> shape) {
    Tensor t;
    t.name = name;
    t.shape = std::move(shape);
    return g.tensors[name] = std::move(t);
  }
  std::mt19937 rng_{1234};
  int counter_ = 0;
};

using Ints = std::vector<int64_t>;

// ---------------------------------------------------------------------------------------------
// A reference evaluator for the operators these tests use, in double.

using Values = std::map<std::string, std::vector<double>>;

Ints strides_of(const Ints& shape) {
  Ints s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t product(const Ints& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// numpy broadcasting of `in` (shape `in_shape`) to `out_shape`.
std::vector<double> broadcast(const std::vector<double>& in, const Ints& in_shape,
                              const Ints& out_shape) {
  const Ints out_strides = strides_of(out_shape), in_strides = strides_of(in_shape);
  const size_t offset = out_shape.size() - in_shape.size();
  std::vector<double> out(static_cast<size_t>(product(out_shape)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < in_shape.size(); ++d) {
      const int64_t coord = (i / out_strides[d + offset]) % out_shape[d + offset];
      if (in_shape[d] != 1) src += coord * in_strides[d];
    }
    out[static_cast<size_t>(i)] = in[static_cast<size_t>(src)];
  }
  return out;
}

class Evaluator {
 public:
  explicit Evaluator(const Graph& graph) : g_(graph) {}

  Values run(const Values& inputs) {
    v_ = inputs;
    for (const auto& [name, t] : g_.tensors)
      if (t.float_data) v_[name] = std::vector<double>(t.float_data->begin(), t.float_data->end());
    for (const Node& n : g_.nodes) v_[n.outputs.at(0)] = eval(n);
    return v_;
  }

 private:
  const Ints& shape(const std::string& name) const { return g_.tensor(name).shape; }
  const std::vector<double>& val(const std::string& name) const { return v_.at(name); }

  std::vector<double> eval(const Node& n) {
    const Ints& out_shape = shape(n.outputs[0]);
    const size_t size = static_cast<size_t>(product(out_shape));
    if (n.op_type == "Conv" || n.op_type == "FusedConv") return conv(n, out_shape);
    if (n.op_type == "Gemm" || n.op_type == "FusedGemm" || n.op_type == "MatMul" ||
        n.op_type == "FusedMatMul")
      return dense(n, out_shape);
    if (n.op_type == "Add" || n.op_type == "Mul") {
      auto a = broadcast(val(n.inputs[0]), shape(n.inputs[0]), out_shape);
      auto b = broadcast(val(n.inputs[1]), shape(n.inputs[1]), out_shape);
      for (size_t i = 0; i < size; ++i) a[i] = n.op_type == "Add" ? a[i] + b[i] : a[i] * b[i];
      return a;
    }
    std::vector<double> x = val(n.inputs[0]);
    if (n.op_type == "Flatten") {
      // Row-major data is unchanged.
    } else if (n.op_type == "Relu") {
      for (double& v : x) v = std::max(v, 0.0);
    } else if (n.op_type == "Clip") {
      double lo = n.get_float("min", -FLT_MAX), hi = n.get_float("max", FLT_MAX);
      if (n.inputs.size() > 1 && !n.inputs[1].empty()) lo = val(n.inputs[1])[0];
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) hi = val(n.inputs[2])[0];
      for (double& v : x) v = std::min(std::max(v, lo), hi);
    } else if (n.op_type == "HardSigmoid") {
      const double alpha = n.get_float("alpha", 0.2f), beta = n.get_float("beta", 0.5f);
      for (double& v : x) v = std::max(0.0, std::min(1.0, alpha * v + beta));
    } else if (n.op_type == "HardSwish") {
      for (double& v : x) v = v * std::max(0.0, std::min(1.0, v / 6 + 0.5));
    } else if (n.op_type == "Sigmoid") {
      for (double& v : x) v = 1.0 / (1.0 + std::exp(-v));
    } else if (n.op_type == "BatchNormalization") {
      const Ints& s = shape(n.inputs[0]);
      const int64_t hw = product(s) / (s[0] * s[1]);
      const double eps = n.get_float("epsilon", 1e-5f);
      for (size_t i = 0; i < size; ++i) {
        const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / hw) % s[1]);
        x[i] = (x[i] - val(n.inputs[3])[c]) / std::sqrt(val(n.inputs[4])[c] + eps) *
                   val(n.inputs[1])[c] +
               val(n.inputs[2])[c];
      }
    } else {
      ADD_FAILURE() << "the test evaluator has no " << n.op_type;
    }
    return x;
  }

  /// Applies a fused node's epilogue; c_of(i) is element i's output channel.
  template <typename ChannelOf>
  void epilogue(const Node& n, std::vector<double>& acc, ChannelOf c_of) {
    if (n.epilogue.empty()) return;
    const std::vector<double>* bias = n.epilogue.bias ? &val(n.inputs.at(2)) : nullptr;
    const std::vector<double>* residual =
        n.epilogue.residual != Residual::kNone ? &val(n.inputs.back()) : nullptr;
    EXPECT_EQ(static_cast<int>(n.inputs.size()), 2 + n.epilogue.extra_inputs()) << n.name;
    if (residual) {
      EXPECT_EQ(shape(n.inputs.back()), shape(n.outputs[0])) << n.name;
    }
    for (size_t i = 0; i < acc.size(); ++i)
      acc[i] =
          n.epilogue.apply(acc[i], bias ? (*bias)[c_of(i)] : 0.0, residual ? (*residual)[i] : 0.0);
  }

  std::vector<double> conv(const Node& n, const Ints& out_shape) {
    const Ints& xs = shape(n.inputs[0]);
    const Ints& ws = shape(n.inputs[1]);
    const auto& x = val(n.inputs[0]);
    const auto& w = val(n.inputs[1]);
    const int64_t group = n.get_int("group", 1);
    const Ints st = n.get_ints("strides", {1, 1}), dl = n.get_ints("dilations", {1, 1});
    Ints pads = n.get_ints("pads", {0, 0, 0, 0});
    const std::string auto_pad = n.get_string("auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER")
      for (int a = 0; a < 2; ++a) {
        const int64_t out = (xs[2 + a] + st[a] - 1) / st[a];
        const int64_t total =
            std::max<int64_t>(0, (out - 1) * st[a] + (ws[2 + a] - 1) * dl[a] + 1 - xs[2 + a]);
        pads[a] = total / 2;
        pads[a + 2] = total - total / 2;
      }
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
    const int64_t M = ws[0], CG = ws[1], R = ws[2], S = ws[3];
    const int64_t OH = out_shape[2], OW = out_shape[3], MG = M / group;
    std::vector<double> y(static_cast<size_t>(product(out_shape)));
    for (int64_t b = 0; b < N; ++b)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double acc = 0;
            const int64_t g = m / MG;
            for (int64_t cg = 0; cg < CG; ++cg)
              for (int64_t r = 0; r < R; ++r)
                for (int64_t s = 0; s < S; ++s) {
                  const int64_t ih = oh * st[0] - pads[0] + r * dl[0];
                  const int64_t iw = ow * st[1] - pads[1] + s * dl[1];
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const int64_t c = g * CG + cg;
                  acc += x[((b * C + c) * H + ih) * W + iw] * w[((m * CG + cg) * R + r) * S + s];
                }
            if (n.op_type == "Conv" && n.inputs.size() > 2 && !n.inputs[2].empty())
              acc += val(n.inputs[2])[m];
            y[((b * M + m) * OH + oh) * OW + ow] = acc;
          }
    const int64_t hw = OH * OW;
    epilogue(n, y,
             [&](size_t i) { return static_cast<size_t>((static_cast<int64_t>(i) / hw) % M); });
    return y;
  }

  std::vector<double> dense(const Node& n, const Ints& out_shape) {
    const bool gemm = n.op_type == "Gemm" || n.op_type == "FusedGemm";
    const bool ta = gemm && n.get_int("transA", 0), tb = gemm && n.get_int("transB", 0);
    const Ints& as = shape(n.inputs[0]);
    const Ints& bs = shape(n.inputs[1]);
    const auto& a = val(n.inputs[0]);
    const auto& b = val(n.inputs[1]);
    const int64_t M = out_shape[0], N = out_shape[1], K = ta ? as[0] : as[1];
    std::vector<double> y(static_cast<size_t>(M * N));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += a[ta ? k * as[1] + i : i * as[1] + k] * b[tb ? j * bs[1] + k : k * bs[1] + j];
        y[i * N + j] = acc;
      }
    if (n.op_type == "Gemm") {
      const double alpha = n.get_float("alpha", 1.0f), beta = n.get_float("beta", 1.0f);
      for (double& v : y) v *= alpha;
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
        const auto c = broadcast(val(n.inputs[2]), shape(n.inputs[2]), out_shape);
        for (size_t i = 0; i < y.size(); ++i) y[i] += beta * c[i];
      }
    }
    epilogue(n, y, [&](size_t i) { return i % static_cast<size_t>(N); });
    return y;
  }

  const Graph& g_;
  Values v_;
};

/// Runs both graphs on the same seeded inputs; their outputs must agree to fp32 rounding.
void expect_same_outputs(const Graph& before, const Graph& after, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  Values inputs;
  for (const std::string& name : before.inputs) {
    std::vector<double> v(static_cast<size_t>(before.tensor(name).elements()));
    for (double& x : v) x = u(rng);
    inputs[name] = v;
  }
  ASSERT_EQ(before.outputs, after.outputs);
  Values a = Evaluator(before).run(inputs), b = Evaluator(after).run(inputs);
  for (const std::string& out : before.outputs) {
    ASSERT_EQ(a.at(out).size(), b.at(out).size()) << out;
    for (size_t i = 0; i < a[out].size(); ++i)
      ASSERT_NEAR(a[out][i], b[out][i], 1e-5 * std::max(1.0, std::fabs(a[out][i])))
          << out << "[" << i << "]";
  }
}

/// Op types of the nodes in order.
std::vector<std::string> ops(const Graph& g) {
  std::vector<std::string> result;
  for (const Node& n : g.nodes) result.push_back(n.op_type);
  return result;
}

using Strings = std::vector<std::string>;

/// The one node of op type `op`.
const Node& only(const Graph& g, const std::string& op) {
  const Node* found = nullptr;
  for (const Node& n : g.nodes)
    if (n.op_type == op) {
      EXPECT_EQ(found, nullptr) << "two " << op << " nodes";
      found = &n;
    }
  if (!found) throw std::runtime_error("no " + op + " node");
  return *found;
}

/// Graphs are equal when their nodes (op, name, inputs, outputs, epilogue) and tensors are.
void expect_unchanged(const Graph& before, const Graph& after) {
  ASSERT_EQ(before.nodes.size(), after.nodes.size());
  for (size_t i = 0; i < before.nodes.size(); ++i) {
    EXPECT_EQ(before.nodes[i].op_type, after.nodes[i].op_type) << i;
    EXPECT_EQ(before.nodes[i].inputs, after.nodes[i].inputs) << i;
    EXPECT_EQ(before.nodes[i].outputs, after.nodes[i].outputs) << i;
    EXPECT_TRUE(before.nodes[i].epilogue == after.nodes[i].epilogue) << i;
  }
  std::set<std::string> a, b;
  for (const auto& [name, t] : before.tensors) a.insert(name);
  for (const auto& [name, t] : after.tensors) b.insert(name);
  EXPECT_EQ(a, b);
}

const std::map<std::string, Attribute> kPad1 = {{"pads", Ints{1, 1, 1, 1}}};

/// X [1,2,5,5] → Conv(W [3,2,3,3], pads 1, optional B) → conv_out [1,3,5,5].
struct ConvGraph {
  Builder b;
  std::string x, conv;
  explicit ConvGraph(bool with_bias = false) {
    x = b.input("X", {1, 2, 5, 5});
    Strings in = {x, b.constant("W", {3, 2, 3, 3})};
    if (with_bias) in.push_back(b.constant("B", {3}));
    conv = b.node("Conv", in, {1, 3, 5, 5}, kPad1, "conv");
  }
};

// ---------------------------------------------------------------------------------------------
// fold_batch_norm

TEST(FoldBatchNorm, FoldsIntoTheConvWithValuesComputedByHand) {
  // 1×1 conv, 2 → 2 channels, no bias; BatchNorm with ε = 0.25 so that √(var + ε) is exact.
  Builder b;
  const std::string x = b.input("X", {1, 2, 2, 2});
  const std::string w = b.constant("W", {2, 2, 1, 1}, {1, 2, 3, 4});
  const std::string c = b.node("Conv", {x, w}, {1, 2, 2, 2}, {}, "conv");
  const std::string y =
      b.node("BatchNormalization",
             {c, b.constant("scale", {2}, {2, -1}), b.constant("shift", {2}, {0.5f, 1}),
              b.constant("mean", {2}, {1, -2}), b.constant("var", {2}, {3.75f, 0})},
             {1, 2, 2, 2}, {{"epsilon", 0.25f}});
  b.output(y);
  Graph g = b.g;
  EXPECT_EQ(fold_batch_norm(g), 1);
  g.validate();
  ASSERT_EQ(ops(g), Strings{"Conv"});
  const Node& conv = g.nodes[0];
  EXPECT_EQ(conv.name, "conv");
  EXPECT_EQ(conv.outputs, Strings{y});
  // s = scale / √(var + ε) = {2 / 2, −1 / 0.5} = {1, −2}.
  // W' = W·s per output channel: {1, 2} · 1, {3, 4} · −2; b' = (0 − mean)·s + shift.
  EXPECT_EQ(*g.tensor(conv.inputs[1]).float_data, (std::vector<float>{1, 2, -6, -8}));
  EXPECT_EQ(*g.tensor(conv.inputs[2]).float_data, (std::vector<float>{-1 + 0.5f, -4 + 1}));
  EXPECT_NE(conv.inputs[1], "W");  // a fresh name
  // The BatchNorm's constants, the old weight and the intermediate are gone.
  for (const char* gone : {"W", "scale", "shift", "mean", "var", "conv_out"})
    EXPECT_FALSE(g.has_tensor(gone)) << gone;
  expect_same_outputs(b.g, g);
}

TEST(FoldBatchNorm, AConvBiasIsFoldedAndASharedWeightStays) {
  ConvGraph cg(true);
  Builder& b = cg.b;
  const std::string y = b.node("BatchNormalization",
                               {cg.conv, b.constant("scale", {3}), b.constant("shift", {3}),
                                b.constant("mean", {3}), b.constant("var", {3}, {0.5f, 1, 2})},
                               {1, 3, 5, 5});
  // Another conv reads the same weight: it must keep it.
  const std::string other = b.node("Conv", {cg.x, "W"}, {1, 3, 5, 5}, kPad1, "other");
  b.output(y);
  b.output(other);
  Graph g = b.g;
  EXPECT_EQ(fold_batch_norm(g), 1);
  g.validate();
  EXPECT_EQ(ops(g), (Strings{"Conv", "Conv"}));
  EXPECT_TRUE(g.has_tensor("W"));
  EXPECT_EQ(g.nodes[1].inputs[1], "W");
  EXPECT_NE(g.nodes[0].inputs[1], "W");
  EXPECT_NE(g.nodes[0].inputs[2], "B");
  expect_same_outputs(b.g, g);
}

TEST(FoldBatchNorm, RefusesWhenItCannotFold) {
  auto make = [](int variant) {
    ConvGraph cg;
    Builder& b = cg.b;
    const std::string mean = variant == 0 ? b.input("mean", {3}) : b.constant("mean", {3});
    std::map<std::string, Attribute> attributes;
    if (variant == 1) attributes["training_mode"] = int64_t{1};
    const std::string y = b.node("BatchNormalization",
                                 {cg.conv, b.constant("scale", {3}), b.constant("shift", {3}), mean,
                                  b.constant("var", {3}, {1, 1, 1})},
                                 {1, 3, 5, 5}, attributes);
    b.output(y);
    if (variant == 2) b.output(cg.conv);  // the conv's output is a graph output
    if (variant == 3) b.output(b.node("Relu", {cg.conv}, {1, 3, 5, 5}));  // a second reader
    return b.g;
  };
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    const Graph before = make(variant);
    Graph g = before;
    EXPECT_EQ(fold_batch_norm(g), 0);
    expect_unchanged(before, g);
  }
}

// ---------------------------------------------------------------------------------------------
// fuse_bias

TEST(FuseBias, AConvsOwnBiasBecomesTheEpilogues) {
  ConvGraph cg(true);
  cg.b.output(cg.conv);
  Graph g = cg.b.g;
  EXPECT_EQ(fuse_bias(g), 1);
  g.validate();
  const Node& f = only(g, "FusedConv");
  EXPECT_EQ(f.inputs, (Strings{"X", "W", "B"}));
  EXPECT_TRUE(f.epilogue.bias);
  EXPECT_EQ(f.epilogue.suffix(), "+bias");
  // Attributes written out: the fused operator convention.
  EXPECT_EQ(f.get_ints("pads", {}), (Ints{1, 1, 1, 1}));
  EXPECT_EQ(f.get_ints("kernel_shape", {}), (Ints{3, 3}));
  EXPECT_EQ(f.get_ints("strides", {}), (Ints{1, 1}));
  EXPECT_EQ(f.get_int("group", 0), 1);
  expect_same_outputs(cg.b.g, g);
}

TEST(FuseBias, AnAddOfAPerChannelConstantInEitherOrderBecomesTheBias) {
  for (int order = 0; order < 2; ++order)
    for (const Ints& shape : {Ints{1, 3, 1, 1}, Ints{3, 1, 1}, Ints{1}}) {
      SCOPED_TRACE(testing::Message() << "order " << order << " shape " << shape.size());
      ConvGraph cg;
      const std::string c = cg.b.constant("c", shape);
      const Strings in = order == 0 ? Strings{cg.conv, c} : Strings{c, cg.conv};
      cg.b.output(cg.b.node("Add", in, {1, 3, 5, 5}));
      Graph g = cg.b.g;
      EXPECT_EQ(fuse_bias(g), 1);
      g.validate();
      ASSERT_EQ(ops(g), Strings{"FusedConv"});
      const Tensor& bias = g.tensor(g.nodes[0].inputs.at(2));
      EXPECT_EQ(bias.shape, Ints{3});  // always 1-D [C_out]
      EXPECT_FALSE(g.has_tensor("conv_out"));
      expect_same_outputs(cg.b.g, g);
    }
}

TEST(FuseBias, AnAddAfterAnOwnBiasIsSummedIntoOneConstant) {
  Builder b;
  const std::string x = b.input("X", {1, 2, 1, 1});
  const std::string conv = b.node(
      "Conv", {x, b.constant("W", {2, 2, 1, 1}), b.constant("B", {2}, {1, 2})}, {1, 2, 1, 1});
  b.output(b.node("Add", {conv, b.constant("c", {1, 2, 1, 1}, {10, 20})}, {1, 2, 1, 1}));
  Graph g = b.g;
  EXPECT_EQ(fuse_bias(g), 2);  // the own B, then the Add
  ASSERT_EQ(ops(g), Strings{"FusedConv"});
  EXPECT_EQ(*g.tensor(g.nodes[0].inputs[2]).float_data, (std::vector<float>{11, 22}));
  EXPECT_FALSE(g.has_tensor("c"));
  expect_same_outputs(b.g, g);
}

TEST(FuseBias, DenseBiasesFromMatMulAddAndGemmC) {
  // MatMul [2,3]·[3,4] + [4] (reused as is) and Gemm(transB) with C [1,4], beta 2 (2·C).
  Builder b;
  const std::string a = b.input("A", {2, 3});
  const std::string mm = b.node("MatMul", {a, b.constant("B", {3, 4})}, {2, 4});
  b.output(b.node("Add", {mm, b.constant("bias", {4})}, {2, 4}));
  const std::string gemm =
      b.node("Gemm", {a, b.constant("Bt", {4, 3}), b.constant("C", {1, 4}, {1, 2, 3, 4})}, {2, 4},
             {{"transB", int64_t{1}}, {"beta", 2.0f}});
  b.output(gemm);
  Graph g = b.g;
  EXPECT_EQ(fuse_bias(g), 2);
  g.validate();
  const Node& mm_fused = only(g, "FusedMatMul");
  EXPECT_EQ(mm_fused.inputs, (Strings{"A", "B", "bias"}));
  const Node& gemm_fused = only(g, "FusedGemm");
  EXPECT_EQ(gemm_fused.get_int("transB", 0), 1);
  EXPECT_FALSE(gemm_fused.has("beta"));
  EXPECT_EQ(g.tensor(gemm_fused.inputs.at(2)).shape, Ints{4});
  EXPECT_EQ(*g.tensor(gemm_fused.inputs[2]).float_data, (std::vector<float>{2, 4, 6, 8}));
  expect_same_outputs(b.g, g);
}

TEST(FuseBias, AComputedGemmCOfNWithBetaOneIsTheBiasItself) {
  Builder b;
  const std::string gemm =
      b.node("Gemm", {b.input("A", {2, 3}), b.constant("B", {3, 4}), b.input("C", {4})}, {2, 4});
  b.output(gemm);
  Graph g = b.g;
  EXPECT_EQ(fuse_bias(g), 1);
  ASSERT_EQ(ops(g), Strings{"FusedGemm"});
  EXPECT_EQ(g.nodes[0].inputs, (Strings{"A", "B", "C"}));
  expect_same_outputs(b.g, g);
  // With beta 2 it would need a multiply: not fused.
  g = b.g;
  g.nodes[0].attributes["beta"] = 2.0f;
  EXPECT_EQ(fuse_bias(g), 0);
  EXPECT_EQ(ops(g), Strings{"Gemm"});
}

TEST(FuseBias, RefusesWhatIsNoPerChannelBias) {
  // variant 0: [3] (broadcasts along W, not C); 1: [1,3,5,5] (varies per pixel); 2: the conv's
  // output read twice; 3: the conv's output a graph output; 4: a non-constant [1,3,1,1];
  // 5: Gemm with alpha 2 keeps its C and its Add.
  for (int variant = 0; variant < 6; ++variant) {
    SCOPED_TRACE(variant);
    Builder b;
    if (variant == 5) {
      const std::string gemm =
          b.node("Gemm", {b.input("A", {2, 3}), b.constant("B", {3, 4}), b.constant("C", {4})},
                 {2, 4}, {{"alpha", 2.0f}});
      b.output(b.node("Add", {gemm, b.constant("c", {4})}, {2, 4}));
    } else {
      const std::string x = b.input("X", {1, 2, 5, 5});
      const std::string conv =
          b.node("Conv", {x, b.constant("W", {3, 2, 3, 3})}, {1, 3, 5, 5}, kPad1, "conv");
      const std::string c = variant == 0   ? b.constant("c", {5})
                            : variant == 1 ? b.constant("c", {1, 3, 5, 5})
                            : variant == 4 ? b.input("c", {1, 3, 1, 1})
                                           : b.constant("c", {1, 3, 1, 1});
      b.output(b.node("Add", {conv, c}, {1, 3, 5, 5}));
      if (variant == 2) b.output(b.node("Relu", {conv}, {1, 3, 5, 5}));
      if (variant == 3) b.output(conv);
    }
    Graph g = b.g;
    EXPECT_EQ(fuse_bias(g), 0);
    expect_unchanged(b.g, g);
  }
}

// ---------------------------------------------------------------------------------------------
// fuse_activation

/// Conv + B → the activation built by `make(builder, conv_out)` → output.
template <typename Make>
Graph conv_then(Make make, Graph* before) {
  ConvGraph cg(true);
  cg.b.output(make(cg.b, cg.conv));
  *before = cg.b.g;
  return cg.b.g;
}

Epilogue activation(Activation a, float lo = 0, float hi = 6) {
  Epilogue e;
  e.bias = true;
  e.activation = a;
  if (a == Activation::kClip) {
    e.clip_min = lo;
    e.clip_max = hi;
  }
  return e;
}

TEST(FuseActivation, ReluClipBothOpsetStylesAndHardSwish) {
  const Ints s = {1, 3, 5, 5};
  struct Case {
    const char* name;
    std::function<std::string(Builder&, const std::string&)> make;
    std::optional<Epilogue> expected;
  };
  const std::vector<Case> cases = {
      {"relu", [&](Builder& b, const std::string& x) { return b.node("Relu", {x}, s); },
       activation(Activation::kRelu)},
      {"clip opset 6 attributes",
       [&](Builder& b, const std::string& x) {
         return b.node("Clip", {x}, s, {{"min", 0.0f}, {"max", 6.0f}});
       },
       activation(Activation::kClip, 0, 6)},
      {"clip opset 11 inputs",
       [&](Builder& b, const std::string& x) {
         return b.node("Clip", {x, b.constant("lo", {}, {-1}), b.constant("hi", {}, {0.5f})}, s);
       },
       activation(Activation::kClip, -1, 0.5f)},
      {"clip opset 11 min only is relu",
       [&](Builder& b, const std::string& x) {
         return b.node("Clip", {x, b.constant("lo", {}, {0})}, s);
       },
       activation(Activation::kRelu)},
      {"clip opset 6 min only is relu",
       [&](Builder& b, const std::string& x) {
         return b.node("Clip", {x}, s, {{"min", 0.0f}});
       },
       activation(Activation::kRelu)},
      {"clip opset 11 max only: unbounded below",
       [&](Builder& b, const std::string& x) {
         return b.node("Clip", {x, "", b.constant("hi", {}, {6})}, s);
       },
       std::nullopt},
      {"clip opset 6 without bounds",
       [&](Builder& b, const std::string& x) { return b.node("Clip", {x}, s); }, std::nullopt},
      {"clip with a computed bound",
       [&](Builder& b, const std::string& x) {
         return b.node("Clip", {x, b.constant("lo", {}, {0}), b.input("hi", {})}, s);
       },
       std::nullopt},
      {"clip min > max",
       [&](Builder& b, const std::string& x) {
         return b.node("Clip", {x}, s, {{"min", 2.0f}, {"max", 1.0f}});
       },
       std::nullopt},
      {"hard swish op",
       [&](Builder& b, const std::string& x) { return b.node("HardSwish", {x}, s); },
       activation(Activation::kHardSwish)},
      {"x * hard sigmoid(x)",
       [&](Builder& b, const std::string& x) {
         const std::string h =
             b.node("HardSigmoid", {x}, s, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}});
         return b.node("Mul", {x, h}, s);
       },
       activation(Activation::kHardSwish)},
      {"hard sigmoid(x) * x",
       [&](Builder& b, const std::string& x) {
         const std::string h =
             b.node("HardSigmoid", {x}, s, {{"alpha", 0.16666667f}, {"beta", 0.5f}});
         return b.node("Mul", {h, x}, s);
       },
       activation(Activation::kHardSwish)},
      {"hard sigmoid with the default alpha 0.2 is no hard swish",
       [&](Builder& b, const std::string& x) {
         return b.node("Mul", {x, b.node("HardSigmoid", {x}, s)}, s);
       },
       std::nullopt},
      {"x * sigmoid(x) is silu",
       [&](Builder& b, const std::string& x) {
         return b.node("Mul", {x, b.node("Sigmoid", {x}, s)}, s);
       },
       activation(Activation::kSilu)},
      {"sigmoid(x) * x is silu",
       [&](Builder& b, const std::string& x) {
         return b.node("Mul", {b.node("Sigmoid", {x}, s), x}, s);
       },
       activation(Activation::kSilu)},
      {"sigmoid alone is sigmoid",
       [&](Builder& b, const std::string& x) { return b.node("Sigmoid", {x}, s); },
       activation(Activation::kSigmoid)},
      {"hard sigmoid(1/6, 0.5) alone is hard_sigmoid",
       [&](Builder& b, const std::string& x) {
         return b.node("HardSigmoid", {x}, s, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}});
       },
       activation(Activation::kHardSigmoid)},
      {"hard sigmoid with the default alpha 0.2 alone stays",
       [&](Builder& b, const std::string& x) { return b.node("HardSigmoid", {x}, s); },
       std::nullopt},
      {"sigmoid of x that a third node reads stays",
       [&](Builder& b, const std::string& x) {
         b.output(b.node("Relu", {x}, s));
         return b.node("Sigmoid", {x}, s);
       },
       std::nullopt},
      {"x * sigmoid(x), the sigmoid also a graph output",
       [&](Builder& b, const std::string& x) {
         const std::string g = b.node("Sigmoid", {x}, s);
         b.output(g);
         return b.node("Mul", {x, g}, s);
       },
       std::nullopt},
      {"x * hard sigmoid(x), x read by a third node",
       [&](Builder& b, const std::string& x) {
         const std::string h =
             b.node("HardSigmoid", {x}, s, {{"alpha", 1.0f / 6.0f}, {"beta", 0.5f}});
         b.output(b.node("Relu", {x}, s));
         return b.node("Mul", {x, h}, s);
       },
       std::nullopt},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Graph before;
    Graph g = conv_then(c.make, &before);
    // The conv's own bias is fused by fuse_bias; here the activation pass does it (fused_form).
    const int made = fuse_activation(g);
    g.validate();
    if (!c.expected) {
      EXPECT_EQ(made, 0);
      expect_unchanged(before, g);
      continue;
    }
    EXPECT_EQ(made, 1);
    ASSERT_EQ(ops(g), Strings{"FusedConv"});
    EXPECT_TRUE(g.nodes[0].epilogue == *c.expected) << g.nodes[0].epilogue.suffix();
    EXPECT_EQ(g.nodes[0].outputs, before.outputs);
    EXPECT_EQ(g.tensors.count("conv_out"), 0u);
    expect_same_outputs(before, g);
  }
}

TEST(FuseActivation, OnlyOneActivationAndNotThroughAGraphOutputOrASecondReader) {
  const Ints s = {1, 3, 5, 5};
  {
    // Conv → Relu → Clip: the Relu fuses, the Clip stays a node.
    ConvGraph cg;
    cg.b.output(
        cg.b.node("Clip", {cg.b.node("Relu", {cg.conv}, s)}, s, {{"min", 0.0f}, {"max", 6.0f}}));
    Graph g = cg.b.g;
    EXPECT_EQ(fuse_activation(g), 1);
    EXPECT_EQ(ops(g), (Strings{"FusedConv", "Clip"}));
    EXPECT_EQ(g.nodes[0].epilogue.suffix(), "+relu");
    expect_same_outputs(cg.b.g, g);
  }
  for (int variant = 0; variant < 2; ++variant) {
    ConvGraph cg;
    cg.b.output(cg.b.node("Relu", {cg.conv}, s));
    if (variant == 0) cg.b.output(cg.conv);
    if (variant == 1) cg.b.output(cg.b.node("Relu", {cg.conv}, s));
    Graph g = cg.b.g;
    EXPECT_EQ(fuse_activation(g), 0) << variant;
    expect_unchanged(cg.b.g, g);
  }
}

// ---------------------------------------------------------------------------------------------
// fuse_residual

TEST(FuseResidual, ResNetStyleAddBeforeReluInEitherOperandOrder) {
  const Ints s = {1, 3, 5, 5};
  for (int order = 0; order < 2; ++order) {
    ConvGraph cg(true);
    const std::string r = cg.b.input("R", s);
    const Strings in = order == 0 ? Strings{cg.conv, r} : Strings{r, cg.conv};
    cg.b.output(cg.b.node("Relu", {cg.b.node("Add", in, s)}, s));
    Graph g = cg.b.g;
    const PassReport report = run_fusion_passes(g);
    EXPECT_EQ(report.count("fuse_bias"), 1);
    EXPECT_EQ(report.count("fuse_residual"), 1);
    EXPECT_EQ(report.count("fuse_activation"), 1);
    EXPECT_EQ(report.total(), 3);
    ASSERT_EQ(ops(g), Strings{"FusedConv"});
    EXPECT_EQ(g.nodes[0].epilogue.suffix(), "+bias+residual+relu");
    EXPECT_EQ(g.nodes[0].epilogue.residual, Residual::kBeforeActivation);
    EXPECT_EQ(g.nodes[0].inputs, (Strings{"X", "W", "B", "R"}));
    expect_same_outputs(cg.b.g, g);
  }
}

TEST(FuseResidual, AfterAnActivationAlreadyFused) {
  const Ints s = {1, 3, 5, 5};
  ConvGraph cg(true);
  const std::string relu = cg.b.node("Relu", {cg.conv}, s);
  cg.b.output(cg.b.node("Add", {relu, cg.b.input("R", s)}, s));
  Graph g = cg.b.g;
  run_fusion_passes(g);
  ASSERT_EQ(ops(g), Strings{"FusedConv"});
  EXPECT_EQ(g.nodes[0].epilogue.suffix(), "+bias+relu+residual");
  EXPECT_EQ(g.nodes[0].epilogue.residual, Residual::kAfterActivation);
  expect_same_outputs(cg.b.g, g);
}

TEST(FuseResidual, TwoConvChainsMeetingGiveItToOperandZero) {
  // ResNet's downsample block: Add(main conv, 1×1 downsample conv) → Relu.
  Builder b;
  const std::string x = b.input("X", {1, 2, 6, 6});
  const std::string main =
      b.node("Conv", {x, b.constant("W1", {4, 2, 3, 3}), b.constant("B1", {4})}, {1, 4, 3, 3},
             {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, "main");
  const std::string down =
      b.node("Conv", {x, b.constant("W2", {4, 2, 1, 1}), b.constant("B2", {4})}, {1, 4, 3, 3},
             {{"strides", Ints{2, 2}}}, "down");
  b.output(b.node("Relu", {b.node("Add", {main, down}, {1, 4, 3, 3})}, {1, 4, 3, 3}));
  Graph g = b.g;
  run_fusion_passes(g);
  g.validate();
  ASSERT_EQ(ops(g), (Strings{"FusedConv", "FusedConv"}));
  EXPECT_EQ(g.nodes[0].name, "down");
  EXPECT_EQ(g.nodes[0].epilogue.suffix(), "+bias");
  EXPECT_EQ(g.nodes[1].name, "main");
  EXPECT_EQ(g.nodes[1].epilogue.suffix(), "+bias+residual+relu");
  EXPECT_EQ(g.nodes[1].inputs.back(), g.nodes[0].outputs[0]);
  expect_same_outputs(b.g, g);
}

TEST(FuseResidual, TheResidualsProducerMayComeAfterTheConvInTheNodeList) {
  // conv, then the Relu computing the residual, then the Add: the fused node takes the Add's
  // place, after the Relu it now reads.
  const Ints s = {1, 3, 5, 5};
  ConvGraph cg;
  const std::string r = cg.b.node("Relu", {cg.b.input("R", s)}, s);
  cg.b.output(cg.b.node("Add", {cg.conv, r}, s));
  Graph g = cg.b.g;
  EXPECT_EQ(fuse_residual(g), 1);
  g.validate();
  EXPECT_EQ(ops(g), (Strings{"Relu", "FusedConv"}));
  expect_same_outputs(cg.b.g, g);
}

TEST(FuseResidual, RefusesBroadcastsConstantsAndSharedValues) {
  const Ints s = {1, 3, 5, 5};
  // 0: a broadcast non-constant [1,3,1,1]; 1: a constant of the full shape; 2: the conv's
  // output read twice; 3: a graph output; 4: Add(y, y).
  for (int variant = 0; variant < 5; ++variant) {
    SCOPED_TRACE(variant);
    ConvGraph cg;
    Builder& b = cg.b;
    const std::string other = variant == 0   ? b.input("R", {1, 3, 1, 1})
                              : variant == 1 ? b.constant("R", s)
                              : variant == 4 ? cg.conv
                                             : b.input("R", s);
    b.output(b.node("Add", {cg.conv, other}, s));
    if (variant == 2) b.output(b.node("Relu", {cg.conv}, s));
    if (variant == 3) b.output(cg.conv);
    Graph g = b.g;
    EXPECT_EQ(fuse_residual(g), 0);
    expect_unchanged(b.g, g);
  }
}

TEST(FusionPasses, MobileNetV2BlockAndADenseLayer) {
  // Expand 1×1 + ReLU6 (opset 11 Clip), depthwise 3×3 + ReLU6, project 1×1 + residual;
  // then Gemm(transB) + C and a Relu: every operator fuses.
  const Ints s = {1, 4, 4, 4}, e = {1, 8, 4, 4};
  Builder b;
  const std::string x = b.input("X", s);
  const std::string lo = b.constant("zero", {}, {0}), hi = b.constant("six", {}, {6});
  const std::string expand = b.node(
      "Clip",
      {b.node("Conv", {x, b.constant("We", {8, 4, 1, 1}), b.constant("Be", {8})}, e), lo, hi}, e);
  const std::string dw =
      b.node("Clip",
             {b.node("Conv", {expand, b.constant("Wd", {8, 1, 3, 3}), b.constant("Bd", {8})}, e,
                     {{"group", int64_t{8}}, {"pads", Ints{1, 1, 1, 1}}}),
              lo, hi},
             e);
  const std::string project =
      b.node("Conv", {dw, b.constant("Wp", {4, 8, 1, 1}), b.constant("Bp", {4})}, s);
  const std::string sum = b.node("Add", {project, x}, s);
  const std::string flat = b.node("Flatten", {sum}, {1, 64});
  b.output(b.node("Relu",
                  {b.node("Gemm", {flat, b.constant("Wfc", {10, 64}), b.constant("Bfc", {10})},
                          {1, 10}, {{"transB", int64_t{1}}})},
                  {1, 10}));
  Graph g = b.g;
  const PassReport report = run_fusion_passes(g);
  EXPECT_EQ(ops(g), (Strings{"FusedConv", "FusedConv", "FusedConv", "Flatten", "FusedGemm"}));
  EXPECT_EQ(g.nodes[0].epilogue.suffix(), "+bias+clip(0,6)");
  EXPECT_EQ(g.nodes[1].epilogue.suffix(), "+bias+clip(0,6)");
  EXPECT_EQ(g.nodes[2].epilogue.suffix(), "+bias+residual");
  EXPECT_EQ(g.nodes[4].epilogue.suffix(), "+bias+relu");
  EXPECT_EQ(report.count("fuse_bias"), 4);
  EXPECT_EQ(report.count("fuse_activation"), 3);
  EXPECT_EQ(report.count("fuse_residual"), 1);
  EXPECT_FALSE(g.has_tensor("zero"));  // Clip bounds nothing reads any more
  // The Flatten is no Conv / Gemm / MatMul: unfused, and the graph still flows through it.
  EXPECT_EQ(g.nodes[3].inputs, Strings{sum});

  const Extraction ex = extract_tasks(g);
  ASSERT_EQ(ex.tasks.size(), 4u);
  EXPECT_EQ(ex.tasks[0].workload.key(), "conv2d_1_4_4_4_8_1x1_s1_p0+bias+clip(0,6)");
  EXPECT_EQ(ex.tasks[1].workload.key(), "depthwise_conv2d_1_8_4_4_3x3_s1_p1+bias+clip(0,6)");
  EXPECT_EQ(ex.tasks[2].workload.key(), "conv2d_1_8_4_4_4_1x1_s1_p0+bias+residual");
  EXPECT_EQ(ex.tasks[3].workload.key(), "dense_1_10_64+bias+relu");
  EXPECT_EQ(ex.tasks[1].workload.name, "depthwise_conv2d_1");
  EXPECT_EQ(ex.tasks[2].workload.name, "conv2d_2");
  EXPECT_EQ(ex.tasks[3].workload.name, "dense_1");
  expect_same_outputs(b.g, g);
}

// ---------------------------------------------------------------------------------------------
// Task extraction

TEST(WorkloadOf, MapsConvolutionsAndDenseAndSaysWhyNot) {
  struct Case {
    const char* name;
    Ints x, w, y;
    std::map<std::string, Attribute> attributes;
    std::string key;  ///< "" = not tunable
    const char* why;  ///< a piece of the reason
  };
  const std::vector<Case> cases = {
      {"conv2d",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       {1, 4, 4, 4},
       {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
       "conv2d_1_3_8_8_4_3x3_s2_p1",
       ""},
      {"3x1 kernel",
       {2, 3, 8, 8},
       {4, 3, 3, 1},
       {2, 4, 8, 8},
       {{"pads", Ints{1, 0, 1, 0}}},
       "",
       "pads [1,0,1,0]"},
      {"3x1 kernel, VALID",
       {1, 3, 8, 8},
       {4, 3, 3, 1},
       {1, 4, 6, 8},
       {{"auto_pad", std::string("VALID")}},
       "conv2d_1_3_8_8_4_3x1_s1_p0",
       ""},
      {"SAME_UPPER",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       {1, 4, 8, 8},
       {{"auto_pad", std::string("SAME_UPPER")}},
       "conv2d_1_3_8_8_4_3x3_s1_p1",
       ""},
      {"depthwise",
       {1, 6, 8, 8},
       {6, 1, 3, 3},
       {1, 6, 8, 8},
       {{"group", int64_t{6}}, {"pads", Ints{1, 1, 1, 1}}},
       "depthwise_conv2d_1_6_8_8_3x3_s1_p1",
       ""},
      {"grouped", {1, 6, 8, 8}, {6, 2, 3, 3}, {1, 6, 6, 6}, {{"group", int64_t{3}}}, "", "group 3"},
      {"depthwise multiplier 2",
       {1, 6, 8, 8},
       {12, 1, 3, 3},
       {1, 12, 6, 6},
       {{"group", int64_t{6}}},
       "",
       "group 6"},
      {"dilation",
       {1, 3, 8, 8},
       {4, 3, 3, 3},
       {1, 4, 4, 4},
       {{"dilations", Ints{2, 2}}},
       "",
       "dilations [2,2]"},
      {"strides per axis",
       {1, 3, 8, 8},
       {4, 3, 1, 1},
       {1, 4, 8, 4},
       {{"strides", Ints{1, 2}}},
       "",
       "strides [1,2]"},
      {"asymmetric pads",
       {1, 3, 8, 8},
       {4, 3, 2, 2},
       {1, 4, 8, 8},
       {{"pads", Ints{0, 0, 1, 1}}},
       "",
       "pads [0,0,1,1]"},
      {"1-D conv", {1, 3, 8}, {4, 3, 3}, {1, 4, 6}, {}, "", "2-D convolutions"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Builder b;
    b.node("Conv", {b.input("X", c.x), b.constant("W", c.w)}, c.y, c.attributes);
    std::string why;
    const std::optional<Workload> w = workload_of(b.g, b.g.nodes[0], &why);
    if (c.key.empty()) {
      EXPECT_FALSE(w.has_value());
      EXPECT_NE(why.find(c.why), std::string::npos) << why;
    } else {
      ASSERT_TRUE(w.has_value()) << why;
      EXPECT_EQ(w->key(), c.key);
    }
  }
  // Dense: Gemm with transB, MatMul; transA, an unfused C, a batched MatMul are not tunable.
  Builder b;
  const std::string a = b.input("A", {2, 3});
  b.node("Gemm", {a, b.constant("Bt", {5, 3})}, {2, 5}, {{"transB", int64_t{1}}});
  b.node("MatMul", {a, b.constant("B", {3, 5})}, {2, 5});
  b.node("Gemm", {b.input("At", {3, 2}), "B"}, {2, 5}, {{"transA", int64_t{1}}});
  b.node("Gemm", {a, "B", b.constant("C", {1, 5})}, {2, 5});  // a plain Gemm's own bias
  b.node("Gemm", {a, "B", b.input("Cin", {2, 5})}, {2, 5});   // a computed C varying along M
  b.node("MatMul", {b.input("A3", {4, 2, 3}), "B"}, {4, 2, 5});
  b.node("Gemm", {a, "B"}, {2, 5}, {{"alpha", 0.5f}});
  const char* expected[] = {"dense_2_5_3",   "dense_2_5_3", "transA", "dense_2_5_3+bias",
                            "C input 'Cin'", "batched",     "alpha"};
  for (size_t i = 0; i < 7; ++i) {
    std::string why;
    const std::optional<Workload> w = workload_of(b.g, b.g.nodes[i], &why);
    if (i < 2 || i == 3) {
      ASSERT_TRUE(w.has_value()) << why;
      EXPECT_EQ(w->key(), expected[i]);
    } else {
      EXPECT_FALSE(w.has_value()) << i;
      EXPECT_NE(why.find(expected[i]), std::string::npos) << why;
    }
  }
  // Other operators have no workload.
  b.node("Relu", {a}, {2, 3});
  EXPECT_FALSE(workload_of(b.g, b.g.nodes.back()).has_value());
}

TEST(ExtractTasks, MergesByKeyCountsWeightsAndWritesAWorkloadFileThatLoadsBack) {
  const Ints s = {1, 4, 6, 6};
  Builder b;
  std::string v = b.input("X", s);
  // Three identical conv + relu layers, one conv + bias without relu, one dilated conv.
  for (int i = 0; i < 3; ++i)
    v = b.node("Relu",
               {b.node("Conv", {v, b.constant("W" + std::to_string(i), {4, 4, 3, 3})}, s, kPad1,
                       "conv" + std::to_string(i))},
               s);
  v = b.node("Conv", {v, b.constant("W3", {4, 4, 3, 3}), b.constant("B3", {4})}, s, kPad1, "last");
  v = b.node("Conv", {v, b.constant("W4", {4, 4, 3, 3})}, s,
             {{"pads", Ints{2, 2, 2, 2}}, {"dilations", Ints{2, 2}}}, "dilated");
  b.output(v);
  Graph g = b.g;
  run_fusion_passes(g);
  const Extraction ex = extract_tasks(g);
  ASSERT_EQ(ex.tasks.size(), 2u);
  EXPECT_EQ(ex.tasks[0].workload.name, "conv2d_1");
  EXPECT_EQ(ex.tasks[0].workload.key(), "conv2d_1_4_6_6_4_3x3_s1_p1+relu");
  EXPECT_EQ(ex.tasks[0].weight, 3);
  EXPECT_EQ(ex.tasks[0].nodes, (Strings{"conv0", "conv1", "conv2"}));
  EXPECT_EQ(ex.tasks[1].workload.name, "conv2d_2");
  EXPECT_EQ(ex.tasks[1].workload.key(), "conv2d_1_4_6_6_4_3x3_s1_p1+bias");
  EXPECT_EQ(ex.tasks[1].weight, 1);
  ASSERT_EQ(ex.not_tunable.size(), 1u);
  EXPECT_EQ(ex.not_tunable[0].first, "dilated");
  EXPECT_NE(ex.not_tunable[0].second.find("dilations"), std::string::npos);

  const std::string path = testing::TempDir() + "graph_passes_test_tasks.json";
  write_workload_file(path, "small", ex, "a test");
  const std::vector<WorkloadFileTask> loaded = load_workload_file(path);
  ASSERT_EQ(loaded.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(loaded[i].workload.key(), ex.tasks[i].workload.key());
    EXPECT_EQ(loaded[i].workload.name, ex.tasks[i].workload.name);
    EXPECT_EQ(loaded[i].occurrences, ex.tasks[i].weight);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"nodes\":[\"conv0\",\"conv1\",\"conv2\"]"), std::string::npos)
      << text.str();
  fs::remove(path);
}

TEST(FusionPasses, EveryLibonnxTestdataNodeModelThatImportsSurvivesThePassesAndExtraction) {
  const fs::path data = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(data))
    GTEST_SKIP() << data
                 << " is absent (Debian's libonnx-testdata; scripts/install-deps "
                    "installs it)";
  int imported = 0, tasks = 0, not_tunable = 0;
  for (const auto& entry : fs::directory_iterator(data)) {
    const fs::path model = entry.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    Graph g;
    try {
      g = import_onnx_file(model.string());
    } catch (const GraphError&) {
      continue;  // graph_import_test checks the refusals
    }
    ++imported;
    SCOPED_TRACE(model.string());
    const Graph before = g;
    EXPECT_NO_THROW(run_fusion_passes(g));
    EXPECT_NO_THROW(g.validate());
    EXPECT_EQ(g.outputs, before.outputs);
    Extraction ex;
    EXPECT_NO_THROW(ex = extract_tasks(g));
    tasks += static_cast<int>(ex.tasks.size());
    not_tunable += static_cast<int>(ex.not_tunable.size());
    for (const auto& [node, why] : ex.not_tunable) EXPECT_FALSE(why.empty()) << node;
  }
  // Debian 12's libonnx-testdata (ONNX 1.12). Their weights and biases are
  // graph inputs, so nothing fuses. 7 tasks: basic_conv_with/without_padding,
  // conv_with_strides_padding / _no_padding, conv_with_autopad_same, gemm_default_no_bias,
  // matmul_2d. 13 nodes not tunable: conv_with_strides_and_asymmetric_padding, gemm_transposeA
  // and gemm_all_attributes (transA), gemm_alpha, matmul_3d / _4d (batched), and 7 Gemms whose
  // computed C is [1,N], [M,N], [1] or a scalar (gemm_beta, gemm_transposeB,
  // gemm_default_zero_bias, _vector_bias, _matrix_bias, _single_elem_vector_bias,
  // _scalar_bias). With ConstantOfShape's TENSOR `value` read and the import-time shape
  // folding, 750 import.
  EXPECT_GE(imported, 750);
  EXPECT_EQ(tasks, 7);
  EXPECT_EQ(not_tunable, 13);
  std::printf("libonnx-testdata: %d models imported, %d tasks, %d nodes not tunable\n", imported,
              tasks, not_tunable);
}

// ---------------------------------------------------------------------------------------------
// The real models.

std::set<std::string> keys_with_counts(const std::vector<WorkloadFileTask>& tasks) {
  std::set<std::string> keys;
  for (const WorkloadFileTask& t : tasks)
    keys.insert(t.workload.key() + " x" + std::to_string(t.occurrences));
  return keys;
}

std::set<std::string> keys_with_counts(const Extraction& ex) {
  std::set<std::string> keys;
  for (const ExtractedTask& t : ex.tasks)
    keys.insert(t.workload.key() + " x" + std::to_string(t.weight));
  return keys;
}

TEST(RealModels, ResNet18GivesTheFusedConvTasksAndItsDense) {
  SKIP_WITHOUT_SHARED();
  Graph g = import_onnx_file((kShared / "resnet18.onnx").string());
  const PassReport report = run_fusion_passes(g);
  // ResNet-18 has 20 convs: the 7×7 stem, 2 per basic block × 8 blocks = 16, and 3 1×1
  // downsample convs (stages 2–4). Each has its own B (BatchNorm folded by the exporter): 20
  // biases, plus the classifier Gemm's C. Every conv is followed by a Relu except the second
  // conv of each block (→ Add → Relu) and the downsample convs: 17 Relus = stem + 16 after the
  // blocks' conv1 and Add; all fuse. The 8 residual Adds fuse into the blocks' second convs
  // (in a downsample block operand 0, the main path, takes it).
  EXPECT_EQ(report.count("fuse_bias"), 21);
  EXPECT_EQ(report.count("fuse_residual"), 8);
  EXPECT_EQ(report.count("fuse_activation"), 17);
  EXPECT_EQ(report.count("fold_batch_norm"), 0);
  EXPECT_EQ(g.op_counts(), (std::map<std::string, int>{{"FusedConv", 20},
                                                       {"FusedGemm", 1},
                                                       {"MaxPool", 1},
                                                       {"GlobalAveragePool", 1},
                                                       {"Flatten", 1}}));
  const Extraction ex = extract_tasks(g);
  EXPECT_TRUE(ex.not_tunable.empty());
  // 16 tasks: the 20 convs share 15 keys (resnet18_fused.json: in stage 1 (64 channels, no
  // downsample) the 4 block convs are 2× conv+bias+relu and 2× conv+bias+residual+relu; in
  // stages 2–4 the first block's strided conv, the 1×1 downsample, conv+bias+relu once and
  // conv+bias+residual+relu twice, i.e. 1 + 2 + 3·4 = 15), plus dense M=1 N=1000 K=512 + bias.
  ASSERT_EQ(ex.tasks.size(), 16u);
  std::set<std::string> expected =
      keys_with_counts(load_workload_file((kConfigs / "resnet18_fused.json").string()));
  EXPECT_EQ(expected.size(), 15u);
  expected.insert("dense_1_1000_512+bias x1");
  EXPECT_EQ(keys_with_counts(ex), expected);
  int conv_nodes = 0;
  for (const ExtractedTask& t : ex.tasks)
    if (t.workload.op == OpKind::kConv2d) conv_nodes += t.weight;
  EXPECT_EQ(conv_nodes, 20);
}

TEST(RealModels, MobileNetV2GivesItsThirtyConvTasksAndItsDense) {
  SKIP_WITHOUT_SHARED();
  Graph g = import_onnx_file((kShared / "mobilenet_v2.onnx").string());
  const PassReport report = run_fusion_passes(g);
  // MobileNet-v2 has 52 convs: the stem, 17 inverted-residual blocks (the first without the
  // expansion 1×1: 2 + 16·3 = 50 convs, 17 of them depthwise) and the final 1×1 to 1280
  // channels. 35 ReLU6 (Clip 0, 6 with min/max as inputs, opset 13): stem, the first block's
  // depthwise, expansion and depthwise of the 16 others (32), the final 1×1. The projection
  // convs are linear; 10 of the 17 blocks (stride 1, same channels in and out) add their input.
  EXPECT_EQ(report.count("fuse_bias"), 53);
  EXPECT_EQ(report.count("fuse_activation"), 35);
  EXPECT_EQ(report.count("fuse_residual"), 10);
  EXPECT_EQ(g.op_counts(),
            (std::map<std::string, int>{
                {"FusedConv", 52}, {"FusedGemm", 1}, {"GlobalAveragePool", 1}, {"Flatten", 1}}));
  const Extraction ex = extract_tasks(g);
  EXPECT_TRUE(ex.not_tunable.empty());
  // mobilenet_v2.json: 30 distinct (20 conv2d, 10 depthwise_conv2d) with occurrences summing to
  // 52; plus the classifier, dense M=1 N=1000 K=1280 + bias.
  ASSERT_EQ(ex.tasks.size(), 31u);
  std::set<std::string> expected =
      keys_with_counts(load_workload_file((kConfigs / "mobilenet_v2.json").string()));
  EXPECT_EQ(expected.size(), 30u);
  expected.insert("dense_1_1000_1280+bias x1");
  EXPECT_EQ(keys_with_counts(ex), expected);
}

TEST(RealModels, WithoutFusionOnlyTheOwnBiasesRemain) {
  SKIP_WITHOUT_SHARED();
  const Graph g = import_onnx_file((kShared / "resnet18.onnx").string());
  const Extraction ex = extract_tasks(g);
  // Without fusion each task is conv + its own B (or the Gemm + its C): the residual variants
  // merge with the others, 11 conv shapes (resnet18_fused.json's 15 less C2R, C5R, C8R, C11R)
  // and the dense.
  EXPECT_EQ(ex.tasks.size(), 12u);
  int nodes = 0;
  for (const ExtractedTask& t : ex.tasks) {
    EXPECT_EQ(t.workload.epilogue.suffix(), "+bias") << t.workload.key();
    nodes += t.weight;
  }
  EXPECT_EQ(nodes, 21);
  EXPECT_TRUE(ex.not_tunable.empty());
}

}  // namespace
