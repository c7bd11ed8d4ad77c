/// \file graph_simplify_test.cpp
/// Import-time simplification (graph/simplify.hpp) and the importer's inference rounds: models
/// built here as ONNX protobufs the way PyTorch's exporter writes them (Identity of shared
/// weights, Shape → Gather → Div → Unsqueeze chains that give a Slice its bounds, constant
/// subgraphs on weights), checked for what folds, for the shapes that result, and numerically:
/// the reference executor runs the model before simplification (the same nodes built directly
/// as IR) and after, on seeded inputs, and the outputs must agree exactly. Plus each pass on
/// hand-built IR, and the refusals (a FIFO, a directory, a chain that cannot fold).

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/simplify.hpp"

namespace fs = std::filesystem;
using namespace webtune::graph;

namespace {

// ---------------------------------------------------------------------------------------------
// ONNX models, built as an exporter writes them.

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 13) {
    model_.set_ir_version(7);
    model_.set_producer_name("webtune-test");
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g_ = model_.mutable_graph();
    g_->set_name("simplify");
  }

  void input(const std::string& name, std::vector<int64_t> shape) {
    value(g_->add_input(), name, shape, onnx::TensorProto_DataType_FLOAT);
  }
  void output(const std::string& name, std::vector<int64_t> shape) {
    value(g_->add_output(), name, shape, onnx::TensorProto_DataType_FLOAT);
  }
  void floats(const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    for (float v : data) t->add_float_data(v);
  }
  void ints(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> data) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_INT64);
    for (int64_t d : shape) t->add_dims(d);
    for (int64_t v : data) t->add_int64_data(v);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = "") {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(g_->node_size()) : name);
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    return n;
  }
  static void int_attr(onnx::NodeProto* n, const std::string& key, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto_AttributeType_INT);
    a->set_i(v);
  }
  static void ints_attr(onnx::NodeProto* n, const std::string& key, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto_AttributeType_INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  std::string bytes() const {
    std::string s;
    model_.SerializeToString(&s);
    return s;
  }

 private:
  static void value(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> shape,
                    int32_t type) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    for (int64_t d : shape) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::ModelProto model_;
  onnx::GraphProto* g_;
};

std::vector<float> seeded(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

Value run_one(const Graph& g, const std::vector<float>& x) {
  ValueMap in;
  in[g.inputs.at(0)] = Value::floats(g.tensor(g.inputs.at(0)).shape, x);
  return execute(g, in).at(g.outputs.at(0));
}

std::string refusal(const std::string& bytes) {
  try {
    import_onnx_bytes(bytes, "model.onnx");
  } catch (const GraphError& e) {
    return e.what();
  }
  return "(imported)";
}

/// X [1,4,5,5] → Conv(Identity(W0), Identity(B0)) → Relu → Y: PyTorch's de-duplicated weights.
ModelBuilder identity_weights_model() {
  ModelBuilder m;
  m.input("X", {1, 4, 5, 5});
  m.output("Y", {1, 2, 5, 5});
  m.floats("W0", {2, 4, 3, 3}, seeded(72, 1));
  m.floats("B0", {2}, {0.25f, -0.5f});
  m.node("Identity", {"W0"}, {"W"}, "Identity_0");
  m.node("Identity", {"B0"}, {"B"}, "Identity_1");
  auto* conv = m.node("Conv", {"X", "W", "B"}, {"C"}, "conv");
  ModelBuilder::ints_attr(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"C"}, {"Y"}, "relu");
  return m;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Through the importer.

TEST(Simplify, IdentityOfAWeightBecomesThatWeight) {
  ImportReport report;
  Graph g = import_onnx_bytes(identity_weights_model().bytes(), "identity.onnx", {}, &report);
  EXPECT_EQ(report.simplified.folded, (std::map<std::string, int>{{"Identity", 2}}));
  EXPECT_TRUE(report.unsupported.empty());
  EXPECT_EQ(g.op_counts(), (std::map<std::string, int>{{"Conv", 1}, {"Relu", 1}}));
  ASSERT_TRUE(g.tensor("W").is_constant());
  EXPECT_EQ(*g.tensor("W").float_data, seeded(72, 1));
  EXPECT_EQ(*g.tensor("B").float_data, (std::vector<float>{0.25f, -0.5f}));
  // W0 and B0 are read by nothing now.
  EXPECT_FALSE(g.has_tensor("W0"));
  EXPECT_EQ(report.simplified.dead_constants, 2);
  EXPECT_NE(report.simplified.summary().find("folded 2 nodes into constants (2 Identity)"),
            std::string::npos)
      << report.simplified.summary();
}

TEST(Simplify, ShapeChainsGiveASliceItsShape) {
  // The channel split a ShuffleNet-style export computes: half = Shape(X)[1] / 2, then
  // Slice(X, [0], [half], [1]) and Slice(X, [half], [2^63-1], [1]).
  ModelBuilder m;
  m.input("X", {1, 8, 3, 3});
  m.output("Y", {1, 4, 3, 3});
  m.ints("one", {}, {1});
  m.ints("two", {}, {2});
  m.ints("zero1", {1}, {0});
  m.ints("axes", {1}, {1});
  m.ints("big", {1}, {INT64_MAX});
  m.ints("unsq_axes", {1}, {0});
  m.node("Shape", {"X"}, {"s"});
  auto* gather = m.node("Gather", {"s", "one"}, {"c"});
  ModelBuilder::int_attr(gather, "axis", 0);
  m.node("Div", {"c", "two"}, {"h"});
  m.node("Unsqueeze", {"h", "unsq_axes"}, {"h1"});
  m.node("Slice", {"X", "zero1", "h1", "axes"}, {"a"}, "slice_a");
  m.node("Slice", {"X", "h1", "big", "axes"}, {"b"}, "slice_b");
  m.node("Sub", {"a", "b"}, {"Y"}, "sub");
  ImportReport report;
  Graph g = import_onnx_bytes(m.bytes(), "shuffle.onnx", {}, &report);
  EXPECT_EQ(report.simplified.folded.at("Shape"), 1);
  EXPECT_EQ(report.simplified.folded.at("Gather"), 1);
  EXPECT_EQ(report.simplified.folded.at("Div"), 1);
  EXPECT_EQ(report.simplified.folded.at("Unsqueeze"), 1);
  EXPECT_EQ(g.op_counts(), (std::map<std::string, int>{{"Slice", 2}, {"Sub", 1}}));
  EXPECT_EQ(g.tensor("a").shape, (std::vector<int64_t>{1, 4, 3, 3}));
  EXPECT_EQ(g.tensor("Y").shape, (std::vector<int64_t>{1, 4, 3, 3}));
  ASSERT_TRUE(g.tensor("h1").is_constant());
  EXPECT_EQ(*g.tensor("h1").int_data, (std::vector<int64_t>{4}));
  // Y = X[:, :4] - X[:, 4:].
  const std::vector<float> x = seeded(72, 7);
  const Value y = run_one(g, x);
  ASSERT_EQ(y.data.size(), 36u);
  for (size_t i = 0; i < 36; ++i) EXPECT_EQ(y.data[i], x[i] - x[i + 36]) << i;
}

TEST(Simplify, ConstantSubgraphsOnWeightsFoldAndComputeTheSame) {
  // Y = MatMul(X, Transpose(Wt)) + Sub(Mul(B, two), B): the weight side folds whole.
  ModelBuilder m;
  m.input("X", {3, 4});
  m.output("Y", {3, 5});
  m.floats("Wt", {5, 4}, seeded(20, 3));
  m.floats("B", {5}, seeded(5, 4));
  m.floats("two", {}, {2.0f});
  auto* t = m.node("Transpose", {"Wt"}, {"W"});
  ModelBuilder::ints_attr(t, "perm", {1, 0});
  m.node("Mul", {"B", "two"}, {"B2"});
  m.node("Sub", {"B2", "B"}, {"Bb"});
  m.node("MatMul", {"X", "W"}, {"P"});
  m.node("Add", {"P", "Bb"}, {"Y"});
  ImportReport report;
  Graph g = import_onnx_bytes(m.bytes(), "weights.onnx", {}, &report);
  EXPECT_EQ(report.simplified.folded,
            (std::map<std::string, int>{{"Mul", 1}, {"Sub", 1}, {"Transpose", 1}}));
  EXPECT_EQ(g.op_counts(), (std::map<std::string, int>{{"Add", 1}, {"MatMul", 1}}));
  EXPECT_EQ(g.tensor("W").shape, (std::vector<int64_t>{4, 5}));
  const std::vector<float> wt = seeded(20, 3), b = seeded(5, 4), x = seeded(12, 5);
  const Value y = run_one(g, x);
  ASSERT_EQ(y.data.size(), 15u);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += double(x[r * 4 + k]) * wt[c * 4 + k];
      const float bias = (b[c] * 2.0f) - b[c];
      EXPECT_NEAR(y.data[r * 5 + c], static_cast<float>(acc) + bias, 1e-6) << r << "," << c;
    }
}

TEST(Simplify, AliasesOfComputedValuesAndDeadBranchesGo) {
  ModelBuilder m;
  m.input("X", {2, 3});
  m.output("Y", {2, 3});
  m.node("Relu", {"X"}, {"r"}, "relu");
  m.node("Identity", {"r"}, {"r_alias"}, "alias");
  m.node("Sigmoid", {"r_alias"}, {"s"}, "sigmoid");
  m.node("Relu", {"s"}, {"unused"}, "dead");             // nothing reads it
  auto* drop = m.node("Dropout", {"s"}, {"Y"}, "drop");  // a graph output: Sigmoid writes Y
  (void)drop;
  ImportReport report;
  Graph g = import_onnx_bytes(m.bytes(), "alias.onnx", {}, &report);
  EXPECT_EQ(report.simplified.aliases,
            (std::map<std::string, int>{{"Dropout", 1}, {"Identity", 1}}));
  EXPECT_EQ(report.simplified.dead_nodes, 1);
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Relu");
  EXPECT_EQ(g.nodes[1].op_type, "Sigmoid");
  EXPECT_EQ(g.nodes[1].inputs, std::vector<std::string>{"r"});
  EXPECT_EQ(g.nodes[1].outputs, std::vector<std::string>{"Y"});
  EXPECT_EQ(g.outputs, std::vector<std::string>{"Y"});
  const std::vector<float> x = seeded(6, 9);
  const Value y = run_one(g, x);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(y.data[i], 1.0f / (1.0f + std::exp(-std::max(x[i], 0.0f)))) << i;
}

TEST(Simplify, AnInputPassedStraightToAnOutputStays) {
  ModelBuilder m;
  m.input("X", {2});
  m.output("Y", {2});
  m.node("Identity", {"X"}, {"Y"});
  Graph g = import_onnx_bytes(m.bytes(), "passthrough.onnx");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Identity");
}

TEST(Simplify, AChainThatCannotFoldKeepsTheShapeInferenceMessage) {
  // A Reshape whose shape comes from a custom-domain operator: nothing folds it.
  ModelBuilder m;
  m.input("X", {2, 6});
  m.output("Y", {3, 4});
  m.ints("shape", {2}, {3, 4});
  auto* custom = m.node("Opaque", {"shape"}, {"s"}, "opaque");
  custom->set_domain("com.example");
  m.node("Reshape", {"X", "s"}, {"Y"}, "reshape");
  std::string bytes = m.bytes();
  onnx::ModelProto proto;
  proto.ParseFromString(bytes);
  auto* o = proto.add_opset_import();
  o->set_domain("com.example");
  o->set_version(1);
  proto.SerializeToString(&bytes);
  const std::string why = refusal(bytes);
  EXPECT_NE(why.find("model.onnx: "), std::string::npos) << why;
  EXPECT_NE(why.find("shape"), std::string::npos) << why;
  EXPECT_NE(why.find("ONNX shape inference"), std::string::npos) << why;
}

TEST(Simplify, FifosDevicesAndDirectoriesAreRefusedWithoutBlocking) {
  const fs::path dir = fs::temp_directory_path() / ("webtune-simplify-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path fifo = dir / "model.onnx";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto message = [](const std::string& path) -> std::string {
    try {
      import_onnx_file(path);
    } catch (const GraphError& e) {
      return e.what();
    }
    return "(imported)";
  };
  EXPECT_NE(message(fifo.string()).find("not a regular file (a FIFO)"), std::string::npos);
  EXPECT_NE(message(dir.string()).find("not a regular file (a directory)"), std::string::npos);
  EXPECT_NE(message("/dev/null").find("not a regular file (a device)"), std::string::npos);
  EXPECT_NE(message((dir / "absent.onnx").string()).find("No such file"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// The passes on hand-built IR.

namespace {

Tensor tensor(const std::string& name, std::vector<int64_t> shape,
              DataType type = DataType::kFloat32) {
  Tensor t;
  t.name = name;
  t.type = type;
  t.shape = std::move(shape);
  return t;
}

}  // namespace

TEST(Simplify, ShapeAndSizeFoldFromKnownShapes) {
  Graph g;
  g.inputs = {"x"};
  g.tensors["x"] = tensor("x", {2, 3, 4, 5});
  Node shape{"s", "Shape", {"x"}, {"s"}, {}, {}};
  shape.attributes["start"] = int64_t{1};
  shape.attributes["end"] = int64_t{-1};
  g.nodes.push_back(shape);
  g.nodes.push_back({"n", "Size", {"x"}, {"n"}, {}, {}});
  g.nodes.push_back({"all", "Shape", {"x"}, {"all"}, {}, {}});
  g.outputs = {"s", "n", "all"};
  SimplifyReport report;
  EXPECT_EQ(fold_shapes(g, report), 3);
  EXPECT_TRUE(g.nodes.empty());
  EXPECT_EQ(*g.tensor("s").int_data, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(g.tensor("s").shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(*g.tensor("n").int_data, (std::vector<int64_t>{120}));
  EXPECT_TRUE(g.tensor("n").shape.empty());
  EXPECT_EQ(*g.tensor("all").int_data, (std::vector<int64_t>{2, 3, 4, 5}));
  g.validate();
}

TEST(Simplify, FoldingStopsAtTheSizeLimit) {
  // ConstantOfShape of [2^25] (128 MiB) stays a node; of [8] it folds.
  for (int64_t n : {int64_t{8}, int64_t{1} << 25}) {
    Graph g;
    Tensor shape = tensor("shape", {1}, DataType::kInt64);
    shape.int_data = std::vector<int64_t>{n};
    g.tensors["shape"] = shape;
    Tensor out = tensor("y", {n});
    out.shape_known = false;  // as between inference rounds
    g.tensors["y"] = out;
    Node fill{"fill", "ConstantOfShape", {"shape"}, {"y"}, {}, {}};
    fill.attributes["value"] = std::vector<float>{1.5f};
    g.nodes.push_back(fill);
    g.outputs = {"y"};
    SimplifyReport report;
    const int folded = fold_constants(g, 13, report);
    if (n == 8) {
      EXPECT_EQ(folded, 1);
      EXPECT_EQ(*g.tensor("y").float_data, std::vector<float>(8, 1.5f));
      EXPECT_TRUE(g.tensor("y").shape_known);
    } else {
      EXPECT_EQ(folded, 0);
      EXPECT_EQ(g.nodes.size(), 1u);
      EXPECT_FALSE(g.tensor("y").is_constant());
    }
  }
}

TEST(Simplify, AFoldedShapeThatDisagreesWithTheModelIsRefused) {
  Graph g;
  Tensor a = tensor("a", {2});
  a.float_data = std::vector<float>{1, 2};
  g.tensors["a"] = a;
  g.tensors["y"] = tensor("y", {3});  // Relu of [2] cannot be [3]
  g.nodes.push_back({"r", "Relu", {"a"}, {"y"}, {}, {}});
  g.outputs = {"y"};
  SimplifyReport report;
  try {
    fold_constants(g, 13, report);
    FAIL() << "folded a node into a shape the model does not declare";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("Relu 'r'"), std::string::npos) << e.what();
  }
}

TEST(Simplify, DeadChainsGoWholeAndLiveOnesStay) {
  Graph g;
  g.inputs = {"x"};
  g.tensors["x"] = tensor("x", {4});
  for (const char* t : {"a", "b", "c", "y"}) g.tensors[t] = tensor(t, {4});
  Tensor k = tensor("k", {4});
  k.float_data = std::vector<float>{1, 2, 3, 4};
  g.tensors["k"] = k;
  g.nodes.push_back({"a", "Relu", {"x"}, {"a"}, {}, {}});
  g.nodes.push_back({"b", "Add", {"a", "k"}, {"b"}, {}, {}});  // dead, with its constant
  g.nodes.push_back({"c", "Sigmoid", {"b"}, {"c"}, {}, {}});   // dead
  g.nodes.push_back({"y", "Sigmoid", {"a"}, {"y"}, {}, {}});
  g.outputs = {"y"};
  SimplifyReport report;
  EXPECT_EQ(remove_dead_nodes(g, report), 2);
  EXPECT_EQ(g.op_counts(), (std::map<std::string, int>{{"Relu", 1}, {"Sigmoid", 1}}));
  EXPECT_FALSE(g.has_tensor("k"));
  EXPECT_FALSE(g.has_tensor("b"));
  EXPECT_EQ(report.dead_constants, 1);
  g.validate();
}

TEST(Simplify, HostileConstantsAreRefusedOrLeftNeverACrash) {
  // What a fuzzer's mutation of a small model can give the folder: every case must fold to a
  // value, stay a node, or raise GraphError (the model is refused); none may crash or hang.
  auto ints = [](const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> data) {
    Tensor t = tensor(name, std::move(shape), DataType::kInt64);
    t.int_data = std::move(data);
    return t;
  };
  auto floats = [](const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    Tensor t = tensor(name, std::move(shape));
    t.float_data = std::move(data);
    return t;
  };
  struct Case {
    std::string op;
    std::vector<Tensor> inputs;
    std::map<std::string, Attribute> attributes;
  };
  const int64_t huge = int64_t{1} << 62;
  std::vector<Case> cases = {
      {"ConstantOfShape", {ints("s", {2}, {-5, 3})}, {}},
      {"ConstantOfShape", {ints("s", {2}, {huge, huge})}, {}},
      {"Range", {floats("a", {}, {0}), floats("b", {}, {10}), floats("c", {}, {0})}, {}},
      {"Range", {ints("a", {}, {0}), ints("b", {}, {huge}), ints("c", {}, {1})}, {}},
      {"Slice",
       {floats("x", {4}, {1, 2, 3, 4}), ints("st", {1}, {0}), ints("en", {1}, {4}),
        ints("ax", {1}, {0}), ints("sp", {1}, {0})},
       {}},
      {"Slice",
       {floats("x", {4}, {1, 2, 3, 4}), ints("st", {1}, {0}), ints("en", {1}, {4}),
        ints("ax", {1}, {7})},
       {}},
      {"Tile", {floats("x", {2}, {1, 2}), ints("r", {1}, {-3})}, {}},
      {"Tile", {floats("x", {2}, {1, 2}), ints("r", {1}, {huge})}, {}},
      {"Expand", {floats("x", {1}, {1}), ints("s", {2}, {-2, 4})}, {}},
      {"Expand", {floats("x", {1}, {1}), ints("s", {2}, {huge, huge})}, {}},
      {"Reshape", {floats("x", {4}, {1, 2, 3, 4}), ints("s", {2}, {-1, -1})}, {}},
      {"Reshape", {floats("x", {4}, {1, 2, 3, 4}), ints("s", {2}, {3, 0})}, {}},
      {"Gather", {floats("x", {3}, {1, 2, 3}), ints("i", {1}, {huge})}, {}},
      {"Gather", {floats("x", {3}, {1, 2, 3}), ints("i", {1}, {-4})}, {}},
      {"Pad", {floats("x", {2}, {1, 2}), ints("p", {2}, {huge, 0})}, {}},
      {"Pad", {floats("x", {2}, {1, 2}), ints("p", {2}, {-5, 0})}, {}},
      {"Div", {ints("a", {1}, {1}), ints("b", {1}, {0})}, {}},
      {"Div", {ints("a", {1}, {INT64_MIN}), ints("b", {1}, {-1})}, {}},
      {"Mod", {ints("a", {1}, {INT64_MIN}), ints("b", {1}, {-1})}, {}},
      {"Unsqueeze", {floats("x", {2}, {1, 2}), ints("a", {2}, {0, 0})}, {}},
      {"Squeeze", {floats("x", {2}, {1, 2}), ints("a", {1}, {0})}, {}},
      {"Concat", {floats("x", {2}, {1, 2}), floats("y", {2, 1}, {1, 2})}, {{"axis", int64_t{5}}}},
      {"Transpose", {floats("x", {2, 1}, {1, 2})}, {{"perm", std::vector<int64_t>{0, 0}}}},
      {"Split", {floats("x", {4}, {1, 2, 3, 4}), ints("s", {2}, {3, 3})}, {}},
      {"Resize",
       {floats("x", {1, 1, 2, 2}, {1, 2, 3, 4}), floats("roi", {0}, {}),
        floats("sc", {4}, {1, 1, 1e30f, 1e30f})},
       {}},
      {"Cast", {floats("x", {2}, {1e30f, -1e30f})}, {{"to", int64_t{7}}}},
  };
  int refused = 0, folded = 0, kept = 0;
  for (const Case& c : cases) {
    Graph g;
    Node node;
    node.name = "n";
    node.op_type = c.op;
    node.attributes = c.attributes;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      Tensor t = c.inputs[i];
      t.name += std::to_string(i);
      node.inputs.push_back(t.name);
      g.tensors[t.name] = t;
    }
    node.outputs = {"y"};
    if (c.op == "Split") node.outputs = {"y", "z"};
    for (const std::string& out : node.outputs) {
      Tensor t = tensor(out, {});
      t.shape_known = false;
      g.tensors[out] = t;
    }
    g.nodes.push_back(node);
    g.outputs = node.outputs;
    SimplifyReport report;
    try {
      if (fold_constants(g, 13, report) == 1)
        ++folded;
      else
        ++kept;
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find(c.op + " 'n'"), std::string::npos) << e.what();
      ++refused;
    }
  }
  std::cout << cases.size() << " hostile folds: " << refused << " refused, " << kept
            << " left as nodes, " << folded << " folded\n";
  EXPECT_EQ(refused + kept + folded, static_cast<int>(cases.size()));
  EXPECT_GE(refused, 10);
}

TEST(Simplify, AMeanOverTheSpatialAxesBecomesAGlobalPool) {
  // keepdims 1 and 0, negative axes; a mean over channels stays a ReduceMean.
  struct Case {
    std::vector<int64_t> axes;
    int64_t keepdims;
    std::vector<int64_t> out_shape;
    std::map<std::string, int> ops;
  };
  const std::vector<Case> cases = {
      {{2, 3}, 1, {1, 3, 1, 1}, {{"GlobalAveragePool", 1}}},
      {{-1, -2}, 0, {1, 3}, {{"GlobalAveragePool", 1}, {"Reshape", 1}}},
      {{1, 2}, 1, {1, 1, 1, 5}, {{"ReduceMean", 1}}},
  };
  for (const Case& c : cases) {
    ModelBuilder m;
    m.input("X", {1, 3, 4, 5});
    m.output("Y", c.out_shape);
    auto* mean = m.node("ReduceMean", {"X"}, {"Y"}, "mean");
    ModelBuilder::ints_attr(mean, "axes", c.axes);
    ModelBuilder::int_attr(mean, "keepdims", c.keepdims);
    ImportReport report;
    Graph g = import_onnx_bytes(m.bytes(), "mean.onnx", {}, &report);
    EXPECT_EQ(g.op_counts(), c.ops);
    const std::vector<float> x = seeded(60, 11);
    const Value y = run_one(g, x);
    ASSERT_EQ(y.shape, c.out_shape);
    if (c.ops.count("ReduceMean")) continue;
    for (int ch = 0; ch < 3; ++ch) {
      double sum = 0;
      for (int i = 0; i < 20; ++i) sum += x[ch * 20 + i];
      EXPECT_NEAR(y.data[ch], sum / 20, 1e-6) << ch;
    }
  }
}
