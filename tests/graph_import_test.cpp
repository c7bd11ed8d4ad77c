/// \file graph_import_test.cpp
/// ONNX import (graph/onnx_import.hpp): the real PyTorch exports of ../shared/models (skipped
/// with a message when ../shared is absent), models built here with ONNX's protobuf classes,
/// and bad input — truncated copies, foreign bytes, and every model.onnx of Debian's
/// libonnx-testdata node cases — each imported or refused with a GraphError, never a crash.

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/onnx_import.hpp"
#include "graph/operators.hpp"

namespace fs = std::filesystem;
using namespace webtune::graph;

namespace {

const fs::path kShared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";
const fs::path kTestData = "/usr/share/libonnx-testdata/data/node";

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

#define SKIP_WITHOUT_SHARED()                                                               \
  if (!fs::exists(kShared / "resnet18.onnx"))                                               \
  GTEST_SKIP() << "../shared/models is absent (a user's clone has none): the real PyTorch " \
                  "exports are not tested here"

/// A small model: input X [1,2,4,4] → Conv(W [3,2,3,3], pads 1) → Relu → Y, opset 13.
onnx::ModelProto small_model() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.set_producer_name("webtune-test");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("small");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> shape) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : shape) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "X", {1, 2, 4, 4});
  value(g->add_output(), "Y", {1, 3, 4, 4});
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto_DataType_FLOAT);
  for (int64_t d : {3, 2, 3, 3}) w->add_dims(d);
  for (int i = 0; i < 54; ++i) w->add_float_data(0.01f * i);
  auto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name("conv");
  conv->add_input("X");
  conv->add_input("W");
  conv->add_output("C");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto_AttributeType_INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("C");
  relu->add_output("Y");
  return m;
}

std::string bytes_of(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

std::string refusal(const std::string& bytes, const ImportOptions& options = {}) {
  try {
    import_onnx_bytes(bytes, "model.onnx", options);
  } catch (const GraphError& e) {
    return e.what();
  }
  return "(imported)";
}

}  // namespace

TEST(GraphImport, ASmallModelImportsWithShapesFromInference) {
  ImportReport report;
  Graph g = import_onnx_bytes(bytes_of(small_model()), "small.onnx", {}, &report);
  EXPECT_EQ(report.opset, 13);
  EXPECT_EQ(report.ir_version, 7);
  EXPECT_EQ(report.producer, "webtune-test");
  EXPECT_TRUE(report.unsupported.empty());
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.nodes[0].get_ints("pads", {}), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(g.inputs, std::vector<std::string>{"X"});
  EXPECT_EQ(g.outputs, std::vector<std::string>{"Y"});
  // "C" has no value_info in the file: ONNX shape inference gives it.
  EXPECT_EQ(g.tensor("C").shape, (std::vector<int64_t>{1, 3, 4, 4}));
  ASSERT_TRUE(g.tensor("W").float_data.has_value());
  EXPECT_FLOAT_EQ((*g.tensor("W").float_data)[53], 0.53f);
}

TEST(GraphImport, RawDataAndConstantNodesBecomeConstants) {
  onnx::ModelProto m = small_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  std::vector<float> values(54);
  for (int i = 0; i < 54; ++i) values[i] = -0.5f * i;
  w->clear_float_data();
  w->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), 54 * 4));
  // A Constant node feeding an Add after the Relu (scalar broadcast).
  auto* g = m.mutable_graph();
  g->mutable_node(1)->set_output(0, "R");
  auto* c = g->add_node();
  c->set_op_type("Constant");
  c->add_output("K");
  auto* a = c->add_attribute();
  a->set_name("value_float");
  a->set_type(onnx::AttributeProto_AttributeType_FLOAT);
  a->set_f(2.5f);
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->add_input("R");
  add->add_input("K");
  add->add_output("Y");
  Graph graph = import_onnx_bytes(bytes_of(m), "raw.onnx");
  EXPECT_FLOAT_EQ((*graph.tensor("W").float_data)[3], -1.5f);
  ASSERT_TRUE(graph.tensor("K").is_constant());
  EXPECT_FLOAT_EQ((*graph.tensor("K").float_data)[0], 2.5f);
  EXPECT_EQ(graph.op_counts(), (std::map<std::string, int>{{"Add", 1}, {"Conv", 1}, {"Relu", 1}}));
}

TEST(GraphImport, SymbolicDimensionsNeedABinding) {
  onnx::ModelProto m = small_model();
  auto* dim = m.mutable_graph()
                  ->mutable_input(0)
                  ->mutable_type()
                  ->mutable_tensor_type()
                  ->mutable_shape()
                  ->mutable_dim(0);
  dim->set_dim_param("batch");
  m.mutable_graph()
      ->mutable_output(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("batch");
  const std::string message = refusal(bytes_of(m));
  EXPECT_NE(message.find("symbolic dimension 'batch'"), std::string::npos) << message;
  EXPECT_NE(message.find("--dim batch=1"), std::string::npos) << message;
  ImportOptions options;
  options.symbolic_dims["batch"] = 2;
  Graph g = import_onnx_bytes(bytes_of(m), "dyn.onnx", options);
  EXPECT_EQ(g.tensor("X").shape, (std::vector<int64_t>{2, 2, 4, 4}));
  EXPECT_EQ(g.tensor("Y").shape, (std::vector<int64_t>{2, 3, 4, 4}));
}

TEST(GraphImport, BadModelsAreRefusedWithAClearMessage) {
  // An initializer whose data does not fill its shape.
  onnx::ModelProto m = small_model();
  m.mutable_graph()->mutable_initializer(0)->add_float_data(1.0f);
  EXPECT_NE(
      refusal(bytes_of(m)).find("initializer 'W' holds 55 values but its shape [3,2,3,3] has 54"),
      std::string::npos)
      << refusal(bytes_of(m));

  // A cycle: Relu reads its own output through a second node.
  m = small_model();
  auto* g = m.mutable_graph();
  g->mutable_node(0)->set_input(0, "Y2");
  auto* back = g->add_node();
  back->set_op_type("Relu");
  back->set_name("back");
  back->add_input("Y");
  back->add_output("Y2");
  const std::string cycle = refusal(bytes_of(m));
  EXPECT_NE(cycle.find("topologically sorted"), std::string::npos) << cycle;
  EXPECT_NE(cycle, "(imported)");

  // A shape ONNX cannot infer: an operator of a foreign domain.
  m = small_model();
  m.mutable_graph()->mutable_node(0)->set_domain("com.example");  // "C" gets no shape
  auto* opset = m.add_opset_import();
  opset->set_domain("com.example");
  opset->set_version(1);
  const std::string unknown = refusal(bytes_of(m));
  EXPECT_NE(unknown.find("unknown"), std::string::npos) << unknown;

  // A zero stride: libonnx 1.12's Conv shape inference divides by it (SIGFPE, found by
  // fuzz/onnx_model_fuzzer). Inference runs in a child process, so this is a refusal.
  m = small_model();
  auto* strides = m.mutable_graph()->mutable_node(0)->add_attribute();
  strides->set_name("strides");
  strides->set_type(onnx::AttributeProto_AttributeType_INTS);
  strides->add_ints(2);
  strides->add_ints(0);
  const std::string crashed = refusal(bytes_of(m));
  EXPECT_NE(crashed.find("shape inference crashed on this model (signal 8, SIGFPE)"),
            std::string::npos)
      << crashed;

  // Element types webtune does not run.
  m = small_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto_DataType_DOUBLE);
  const std::string dbl = refusal(bytes_of(m));
  EXPECT_NE(dbl.find("DOUBLE"), std::string::npos) << dbl;

  // Opsets outside the range, and none at all.
  m = small_model();
  m.mutable_opset_import(0)->set_version(99);
  EXPECT_NE(refusal(bytes_of(m)).find("opset 99"), std::string::npos);
  m.clear_opset_import();
  EXPECT_NE(refusal(bytes_of(m)).find("no opset"), std::string::npos);

  // Not a model at all.
  EXPECT_NE(refusal("").find("empty"), std::string::npos);
  EXPECT_NE(refusal("{\"not\": \"onnx\"}").find("not an ONNX model"), std::string::npos);
  EXPECT_NE(refusal(std::string(100, '\xff')).find("not an ONNX model"), std::string::npos);
  EXPECT_THROW(import_onnx_file("/nonexistent/model.onnx"), GraphError);
}

TEST(GraphImport, UnsupportedOperatorsAreCountedNotRefused) {
  onnx::ModelProto m = small_model();
  m.mutable_graph()->mutable_node(1)->set_op_type("Sinh");  // standard, shape-inferable
  ImportReport report;
  Graph g = import_onnx_bytes(bytes_of(m), "sinh.onnx", {}, &report);
  EXPECT_EQ(report.unsupported, (std::map<std::string, int>{{"Sinh", 1}}));
  EXPECT_EQ(g.nodes.size(), 2u);
  EXPECT_FALSE(is_supported_operator("Sinh"));
  EXPECT_TRUE(is_supported_operator("Conv"));
}

TEST(GraphImport, SharedPyTorchExportsImport) {
  SKIP_WITHOUT_SHARED();
  ImportReport report;
  Graph r = import_onnx_file((kShared / "resnet18.onnx").string(), {}, &report);
  EXPECT_EQ(report.opset, 13);
  EXPECT_TRUE(report.unsupported.empty());
  // ../shared/models/README.md's table.
  EXPECT_EQ(r.op_counts(), (std::map<std::string, int>{{"Conv", 20},
                                                       {"Relu", 17},
                                                       {"Add", 8},
                                                       {"MaxPool", 1},
                                                       {"GlobalAveragePool", 1},
                                                       {"Flatten", 1},
                                                       {"Gemm", 1}}));
  EXPECT_EQ(r.tensor(r.inputs.at(0)).shape, (std::vector<int64_t>{1, 3, 224, 224}));
  EXPECT_EQ(r.tensor(r.outputs.at(0)).shape, (std::vector<int64_t>{1, 1000}));

  Graph mb = import_onnx_file((kShared / "mobilenet_v2.onnx").string(), {}, &report);
  EXPECT_TRUE(report.unsupported.empty());
  EXPECT_EQ(mb.op_counts(), (std::map<std::string, int>{{"Conv", 52},
                                                        {"Clip", 35},
                                                        {"Add", 10},
                                                        {"GlobalAveragePool", 1},
                                                        {"Flatten", 1},
                                                        {"Gemm", 1}}));
  int depthwise = 0;
  for (const Node& n : mb.nodes)
    if (n.op_type == "Conv" && n.get_int("group", 1) > 1) ++depthwise;
  EXPECT_EQ(depthwise, 17);
}

TEST(GraphImport, TruncatedCopiesOfTheRealModelsAreRefused) {
  SKIP_WITHOUT_SHARED();
  for (const char* name : {"resnet18.onnx", "mobilenet_v2.onnx"}) {
    const std::string bytes = read_bytes(kShared / name);
    for (double fraction : {0.0, 0.001, 0.01, 0.25, 0.5, 0.9, 0.999}) {
      const size_t cut = static_cast<size_t>(fraction * static_cast<double>(bytes.size()));
      const std::string message = refusal(bytes.substr(0, cut));
      EXPECT_NE(message, "(imported)") << name << " cut at " << cut;
      EXPECT_NE(message.find("model.onnx: "), std::string::npos) << message;
    }
    // The last byte missing too.
    EXPECT_NE(refusal(bytes.substr(0, bytes.size() - 1)), "(imported)") << name;
  }
}

TEST(GraphImport, EveryLibonnxTestdataNodeModelImportsOrIsRefused) {
  if (!fs::exists(kTestData))
    GTEST_SKIP() << kTestData
                 << " is absent (Debian's libonnx-testdata; scripts/install-deps "
                    "installs it)";
  int imported = 0, refused = 0, cases = 0;
  for (const auto& entry : fs::directory_iterator(kTestData)) {
    const fs::path model = entry.path() / "model.onnx";
    if (!fs::exists(model)) continue;
    ++cases;
    try {
      Graph g = import_onnx_file(model.string());
      g.validate();
      ++imported;
    } catch (const GraphError& e) {
      EXPECT_GT(std::string(e.what()).size(), model.string().size() + 2) << model;
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << model << " threw something else than GraphError: " << e.what();
    }
  }
  std::cout << cases << " node cases: " << imported << " imported, " << refused << " refused\n";
  EXPECT_GT(cases, 900);
  EXPECT_GT(imported, cases / 2);
  EXPECT_GT(refused, 0);
}
