/// \file graph_lowering_test.cpp
/// The package-lowering passes (graph/passes.hpp): split_to_slices and split_wide_concat give
/// the same values as the graph they rewrite (run on the reference executor), with the node
/// shapes they promise, and leave alone what they cannot lower.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "graph/executor.hpp"
#include "graph/passes.hpp"

using namespace webtune::graph;

namespace {

using Ints = std::vector<int64_t>;

Tensor& add(Graph& g, const std::string& name, Ints shape, DataType type = DataType::kFloat32) {
  Tensor& t = g.tensors[name];
  t.name = name;
  t.shape = std::move(shape);
  t.type = type;
  return t;
}

Value random_value(const Ints& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> data(static_cast<size_t>(n));
  for (float& v : data) v = u(gen);
  return Value::floats(shape, data);
}

/// x [2, 9, 3] split along `axis` 1 into parts of `sizes` (attribute form, or input 1 when
/// `as_input`; empty: equal parts over `outputs` outputs), output `unused` left unnamed.
Graph split_graph(const Ints& sizes, size_t outputs, bool as_input, int unused = -1) {
  Graph g;
  add(g, "x", {2, 9, 3});
  g.inputs = {"x"};
  Node split;
  split.name = "split";
  split.op_type = "Split";
  split.inputs = {"x"};
  split.attributes["axis"] = int64_t{1};
  if (!sizes.empty() && as_input) {
    Tensor& s = add(g, "sizes", {static_cast<int64_t>(sizes.size())}, DataType::kInt64);
    s.int_data = sizes;
    split.inputs.push_back("sizes");
  } else if (!sizes.empty()) {
    split.attributes["split"] = sizes;
  }
  const int64_t chunk = (9 + static_cast<int64_t>(outputs) - 1) / static_cast<int64_t>(outputs);
  for (size_t k = 0; k < outputs; ++k) {
    const int64_t size =
        sizes.empty() ? std::max<int64_t>(0, std::min(chunk, 9 - chunk * static_cast<int64_t>(k)))
                      : sizes[k];
    const std::string name = "y" + std::to_string(k);
    split.outputs.push_back(static_cast<int>(k) == unused ? "" : name);
    if (static_cast<int>(k) == unused) continue;
    add(g, name, {2, size, 3});
    g.outputs.push_back(name);
  }
  g.nodes.push_back(split);
  return g;
}

void expect_same_values(const Graph& before, const Graph& after, const ValueMap& feeds) {
  const ValueMap a = execute(before, feeds), b = execute(after, feeds);
  for (const std::string& out : before.outputs) {
    ASSERT_TRUE(b.count(out)) << out;
    EXPECT_EQ(a.at(out).shape, b.at(out).shape) << out;
    EXPECT_EQ(a.at(out).data, b.at(out).data) << out;
  }
}

TEST(SplitToSlices, EveryFormBecomesOneSlicePerUsedOutputWithTheSameValues) {
  const ValueMap feeds = {{"x", random_value({2, 9, 3}, 1)}};
  struct Form {
    Ints sizes;
    size_t outputs;
    bool as_input;
    int unused;
  };
  for (const Form& f :
       {Form{{2, 3, 4}, 3, false, -1}, Form{{5, 4}, 2, true, -1}, Form{{}, 3, false, -1},
        Form{{}, 4, false, 2}, Form{{1, 0, 8}, 3, true, 0}}) {
    const Graph before = split_graph(f.sizes, f.outputs, f.as_input, f.unused);
    Graph after = before;
    EXPECT_EQ(split_to_slices(after), 1);
    after.validate();
    const size_t used = f.outputs - (f.unused >= 0 ? 1 : 0);
    ASSERT_EQ(after.nodes.size(), used);
    for (const Node& n : after.nodes) {
      EXPECT_EQ(n.op_type, "Slice");
      EXPECT_EQ(n.inputs, std::vector<std::string>{"x"});  // the attribute form
      EXPECT_EQ(n.get_ints("axes", {}), Ints{1});
    }
    expect_same_values(before, after, feeds);
  }
}

TEST(SplitToSlices, LeavesAloneWhatItCannotReadAtBuildTime) {
  // A computed split input, and parts that do not cut the axis.
  Graph computed = split_graph({5, 4}, 2, true);
  computed.tensors.at("sizes").int_data.reset();
  computed.inputs.push_back("sizes");
  EXPECT_EQ(split_to_slices(computed), 0);
  EXPECT_EQ(computed.nodes.at(0).op_type, "Split");
  Graph wrong = split_graph({5, 4}, 2, false);
  wrong.nodes[0].attributes["split"] = Ints{5, 5};
  EXPECT_EQ(split_to_slices(wrong), 0);
  EXPECT_EQ(wrong.nodes.at(0).op_type, "Split");
}

/// Concat of `n` inputs x0 … [1, k+1, 2] along axis 1 (negative `axis` allowed).
Graph concat_graph(size_t n, int64_t axis) {
  Graph g;
  int64_t total = 0;
  Node concat;
  concat.name = "concat";
  concat.op_type = "Concat";
  concat.attributes["axis"] = axis;
  for (size_t k = 0; k < n; ++k) {
    const std::string name = "x" + std::to_string(k);
    add(g, name, {1, static_cast<int64_t>(k) + 1, 2});
    g.inputs.push_back(name);
    concat.inputs.push_back(name);
    total += static_cast<int64_t>(k) + 1;
  }
  concat.outputs = {"y"};
  add(g, "y", {1, total, 2});
  g.outputs = {"y"};
  g.nodes.push_back(concat);
  return g;
}

TEST(SplitWideConcat, WideConcatsBecomeTreesOfBoundedConcatsWithTheSameValues) {
  for (size_t n : {5u, 8u, 24u, 49u}) {
    for (size_t most : {2u, 4u, 7u}) {
      SCOPED_TRACE(std::to_string(n) + " inputs, at most " + std::to_string(most));
      const Graph before = concat_graph(n, n % 2 ? -2 : 1);
      Graph after = before;
      EXPECT_EQ(split_wide_concat(after, most), n > most ? 1 : 0);
      after.validate();
      for (const Node& node : after.nodes) {
        EXPECT_EQ(node.op_type, "Concat");
        EXPECT_LE(node.inputs.size(), most);
        EXPECT_GE(node.inputs.size(), 2u);
      }
      EXPECT_EQ(after.nodes.back().outputs, std::vector<std::string>{"y"});
      ValueMap feeds;
      for (size_t k = 0; k < n; ++k)
        feeds["x" + std::to_string(k)] =
            random_value({1, static_cast<int64_t>(k) + 1, 2}, static_cast<uint32_t>(k));
      expect_same_values(before, after, feeds);
    }
  }
}

TEST(SplitWideConcat, RefusesABoundBelowTwo) {
  Graph g = concat_graph(3, 1);
  EXPECT_THROW(split_wide_concat(g, 1), std::invalid_argument);
}

}  // namespace
