/// \file graph_opset_test.cpp
/// Opset 18–22 → 17 (graph/opset_downgrade.hpp): hand-built models for each rewrite, checked
/// node by node and then by libonnx 1.12's checker and strict shape inference (the output
/// shapes expected); refusals with the node and operator named; and the real PyTorch 2.11
/// dynamo exports of the corpus (tests/data/corpus/corpus.tar.xz, all opset 18), each of which
/// must downgrade and pass the checker and inference.

#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "graph/graph.hpp"
#include "graph/onnx_import.hpp"
#include "opset_downgrade.hpp"

namespace fs = std::filesystem;
using webtune::graph::detail::downgrade_to_opset17;

namespace {

/// A model of one graph "g" built input by input and node by node.
class Builder {
 public:
  explicit Builder(int64_t opset = 18) {
    m_.set_ir_version(10);
    m_.set_producer_name("graph_opset_test");
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("g");
  }

  onnx::ModelProto& model() { return m_; }
  onnx::GraphProto& graph() { return *m_.mutable_graph(); }

  /// A float graph input of `dims` (-1: symbolic "N").
  Builder& input(const std::string& name, const std::vector<int64_t>& dims,
                 int32_t type = onnx::TensorProto::FLOAT) {
    typed(graph().add_input(), name, type, dims);
    return *this;
  }
  /// A graph output of `rank` unknown dimensions (inference fills them; libonnx 1.12's checker
  /// wants a shape on every graph output).
  Builder& output(const std::string& name, int rank, int32_t type = onnx::TensorProto::FLOAT) {
    auto* v = graph().add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int i = 0; i < rank; ++i) shape->add_dim();
    return *this;
  }
  Builder& ints(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  Builder& floats(const std::string& name, const std::vector<float>& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (float v : values) t->add_float_data(v);
    return *this;
  }
  /// A Constant node writing int64 `values` through its `value` tensor.
  Builder& constant(const std::string& name, const std::vector<int64_t>& values) {
    onnx::NodeProto& n = node("Constant", {}, {name}, "const_" + name);
    auto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) a->mutable_t()->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name) {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }

  static void typed(onnx::ValueInfoProto* v, const std::string& name, int32_t type,
                    const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0) {
        shape->add_dim()->set_dim_param("N");
      } else {
        shape->add_dim()->set_dim_value(d);
      }
    }
  }

 private:
  onnx::ModelProto m_;
};

void set_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_ints(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void set_string(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) {
  const onnx::AttributeProto* a = attr(n, name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}
const onnx::TensorProto* initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}
std::vector<int64_t> initializer_ints(const onnx::GraphProto& g, const std::string& name) {
  const onnx::TensorProto* t = initializer(g, name);
  return t ? std::vector<int64_t>(t->int64_data().begin(), t->int64_data().end())
           : std::vector<int64_t>{};
}
int64_t opset_of(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty()) return o.version();
  return 0;
}

/// libonnx 1.12's checker and strict shape inference with data propagation (the importer's
/// options, graph/onnx_inference.cpp) on `m`; "" or the message.
std::string check_and_infer(onnx::ModelProto& m) {
  try {
    onnx::checker::check_model(m);
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/1,
                                        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// The shape inference gave `name` (a graph output or value_info), -1 for a symbolic dim.
std::vector<int64_t> shape_of(const onnx::ModelProto& m, const std::string& name) {
  auto dims = [](const onnx::ValueInfoProto& v) {
    std::vector<int64_t> d;
    for (const auto& dim : v.type().tensor_type().shape().dim())
      d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    return d;
  };
  for (const auto& v : m.graph().output())
    if (v.name() == name) return dims(v);
  for (const auto& v : m.graph().value_info())
    if (v.name() == name) return dims(v);
  return {-99};
}

/// Downgrades `m` (expecting success), checks and infers it, and returns the shape of `out`.
std::vector<int64_t> downgrade_and_infer(onnx::ModelProto& m, const std::string& out = "y") {
  const std::string why = downgrade_to_opset17(m);
  EXPECT_EQ(why, "");
  EXPECT_EQ(opset_of(m), 17);
  EXPECT_LE(m.ir_version(), 8);
  onnx::ModelProto copy = m;
  const std::string inferred = check_and_infer(copy);
  EXPECT_EQ(inferred, "");
  return shape_of(copy, out);
}

/// Expects a refusal that contains each of `parts`.
void expect_refused(onnx::ModelProto& m, const std::vector<std::string>& parts) {
  const std::string why = downgrade_to_opset17(m);
  ASSERT_NE(why, "") << "expected a refusal";
  for (const auto& p : parts)
    EXPECT_NE(why.find(p), std::string::npos) << why << "\n  lacks: " << p;
}

using Shape = std::vector<int64_t>;

// ---- Reduce*-18 -----------------------------------------------------------------------------

TEST(OpsetDowngrade, ReduceAxesInitializerBecomesTheAttribute) {
  Builder b;
  b.input("x", {1, 3, 4, 5}).output("y", 4).ints("axes", {2, 3});
  b.node("ReduceMean", {"x", "axes"}, {"y"}, "mean");
  set_int(*b.graph().mutable_node(0), "noop_with_empty_axes", 0);
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 3, 1, 1}));
  const onnx::NodeProto& n = m.graph().node(0);
  EXPECT_EQ(n.input_size(), 1);
  EXPECT_EQ(attr_ints(n, "axes"), (Shape{2, 3}));
  EXPECT_EQ(attr(n, "noop_with_empty_axes"), nullptr);
  EXPECT_EQ(initializer(m.graph(), "axes"), nullptr) << "the axes nobody reads any more stay";
}

TEST(OpsetDowngrade, ReduceAxesFromAConstantNodeWithKeepdims0) {
  for (const char* op : {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    Builder b;
    b.input("x", {2, 3, 4}).output("y", 2).constant("axes", {-1});
    set_int(b.node(op, {"x", "axes"}, {"y"}, "r"), "keepdims", 0);
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 3}));
    ASSERT_EQ(m.graph().node_size(), 1) << "the Constant only the axes used is removed";
    EXPECT_EQ(m.graph().node(0).op_type(), op);
    EXPECT_EQ(attr_ints(m.graph().node(0), "axes"), (Shape{-1}));
  }
}

TEST(OpsetDowngrade, ReduceAxesSharedAndStillReadElsewhereStay) {
  Builder b;
  b.input("x", {2, 3, 4}).output("y", 3).output("z", 3).output("s", 1, onnx::TensorProto::INT64);
  b.ints("axes", {1});
  b.node("ReduceMean", {"x", "axes"}, {"y"}, "a");
  b.node("ReduceMax", {"x", "axes"}, {"z"}, "b");
  b.node("Shape", {"axes"}, {"s"}, "shape_of_axes");
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m, "z"), (Shape{2, 1, 4}));
  EXPECT_NE(initializer(m.graph(), "axes"), nullptr) << "Shape still reads it";
}

TEST(OpsetDowngrade, ReduceWithoutAxes) {
  {  // noop_with_empty_axes 1 and no axes: the input unchanged
    Builder b;
    b.input("x", {2, 3}).output("y", 2);
    set_int(b.node("ReduceSumSquare", {"x"}, {"y"}, "r"), "noop_with_empty_axes", 1);
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 3}));
    EXPECT_EQ(m.graph().node(0).op_type(), "Identity");
    EXPECT_EQ(m.graph().node(0).attribute_size(), 0);
  }
  {  // an empty constant axes input with noop 1: the same
    Builder b;
    b.input("x", {2, 3}).output("y", 2).ints("axes", {});
    set_int(b.node("ReduceMean", {"x", "axes"}, {"y"}, "r"), "noop_with_empty_axes", 1);
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 3}));
    EXPECT_EQ(m.graph().node(0).op_type(), "Identity");
    EXPECT_EQ(m.graph().node(0).input_size(), 1);
  }
  {  // no axes, noop 0: over all axes
    Builder b;
    b.input("x", {2, 3}).output("y", 2);
    b.node("ReduceL2", {"x", ""}, {"y"}, "r");
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 1}));
    EXPECT_EQ(m.graph().node(0).op_type(), "ReduceL2");
    EXPECT_EQ(attr(m.graph().node(0), "axes"), nullptr);
  }
}

TEST(OpsetDowngrade, ReduceWithAxesComputedAtRunTimeIsRefused) {
  Builder b;
  b.input("x", {2, 3}).input("axes", {1}, onnx::TensorProto::INT64).output("y", 2);
  b.node("ReduceMean", {"x", "axes"}, {"y"}, "mean_of_x");
  expect_refused(b.model(),
                 {"node 'mean_of_x'", "ReduceMean-18", "axes input 'axes'", "not a constant"});
}

// ---- Pad-18/19 ------------------------------------------------------------------------------

TEST(OpsetDowngrade, PadAxesExpandIntoFullRankPads) {
  Builder b;
  b.input("x", {1, 3, 4, 5}).output("y", 4).ints("pads", {1, 2, 3, 4}).ints("axes", {2, -1});
  b.floats("value", {0.5f});
  b.node("Pad", {"x", "pads", "value", "axes"}, {"y"}, "pad");
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 3, 4 + 1 + 3, 5 + 2 + 4}));
  const onnx::NodeProto& n = m.graph().node(0);
  ASSERT_EQ(n.input_size(), 3);
  EXPECT_EQ(n.input(2), "value");
  EXPECT_EQ(initializer_ints(m.graph(), n.input(1)), (Shape{0, 0, 1, 2, 0, 0, 3, 4}));
  EXPECT_EQ(initializer(m.graph(), "axes"), nullptr);
  EXPECT_EQ(initializer(m.graph(), "pads"), nullptr);
}

TEST(OpsetDowngrade, PadWithoutAxesIsUnchanged) {
  Builder b;
  b.input("x", {2, 3}).output("y", 2).ints("pads", {0, 1, 0, 1});
  set_string(b.node("Pad", {"x", "pads", "", ""}, {"y"}, "pad"), "mode", "reflect");
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 5}));
  EXPECT_EQ(m.graph().node(0).input_size(), 2);
}

TEST(OpsetDowngrade, PadRefusals) {
  {
    Builder b(19);
    b.input("x", {2, 3}).output("y", 2).ints("pads", {0, 1, 0, 1});
    set_string(b.node("Pad", {"x", "pads"}, {"y"}, "p"), "mode", "wrap");
    expect_refused(b.model(), {"node 'p'", "Pad-19", "'wrap'"});
  }
  {  // the rank is unknown: no shape for x
    Builder b;
    b.output("y", 1).ints("pads", {1, 1}).ints("axes", {0});
    auto* x = b.graph().add_input();
    x->set_name("x");
    x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    b.node("Pad", {"x", "pads", "", "axes"}, {"y"}, "p");
    expect_refused(b.model(), {"node 'p'", "Pad-18", "rank of 'x'"});
  }
  {  // pads computed at run time with axes
    Builder b;
    b.input("x", {2, 3}).input("pads", {2}, onnx::TensorProto::INT64).output("y", 2);
    b.ints("axes", {1});
    b.node("Pad", {"x", "pads", "", "axes"}, {"y"}, "p");
    expect_refused(b.model(), {"node 'p'", "Pad-18", "pads input 'pads'"});
  }
}

// ---- Resize-18/19 ---------------------------------------------------------------------------

TEST(OpsetDowngrade, ResizeDefaultsAreDropped) {
  Builder b(19);
  b.input("x", {1, 3, 4, 4}).output("y", 4).floats("scales", {1, 1, 2, 2});
  onnx::NodeProto& n = b.node("Resize", {"x", "", "scales"}, {"y"}, "up");
  set_int(n, "antialias", 0);
  set_ints(n, "axes", {0, 1, 2, -1});
  set_string(n, "keep_aspect_ratio_policy", "stretch");
  set_string(n, "mode", "linear");
  set_string(n, "coordinate_transformation_mode", "half_pixel");
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 3, 8, 8}));
  const onnx::NodeProto& r = m.graph().node(0);
  EXPECT_EQ(attr(r, "antialias"), nullptr);
  EXPECT_EQ(attr(r, "axes"), nullptr);
  EXPECT_EQ(attr(r, "keep_aspect_ratio_policy"), nullptr);
  ASSERT_NE(attr(r, "mode"), nullptr);
  EXPECT_EQ(attr(r, "mode")->s(), "linear");
}

TEST(OpsetDowngrade, ResizeRefusals) {
  auto resize = [](int64_t opset, auto set) {
    Builder b(opset);
    b.input("x", {1, 3, 4, 4})
        .output("y", 4)
        .floats("scales", {1, 1, 2, 2})
        .ints("sizes", {1, 3, 8, 8});
    set(b.node("Resize", {"x", "", "scales"}, {"y"}, "up"));
    return b.model();
  };
  onnx::ModelProto m = resize(18, [](onnx::NodeProto& n) { set_int(n, "antialias", 1); });
  expect_refused(m, {"node 'up'", "Resize-18", "antialias"});
  m = resize(18, [](onnx::NodeProto& n) { set_ints(n, "axes", {2, 3}); });
  expect_refused(m, {"node 'up'", "Resize-18", "axes [2,3]"});
  m = resize(19, [](onnx::NodeProto& n) {
    set_string(n, "coordinate_transformation_mode", "half_pixel_symmetric");
  });
  expect_refused(m, {"node 'up'", "Resize-19", "half_pixel_symmetric"});
  // keep_aspect_ratio_policy other than stretch matters only with sizes.
  m = resize(18, [](onnx::NodeProto& n) {
    n.set_input(2, "");
    n.add_input("sizes");
    set_string(n, "keep_aspect_ratio_policy", "not_larger");
  });
  expect_refused(m, {"node 'up'", "Resize-18", "keep_aspect_ratio_policy 'not_larger'"});
}

// ---- Split-18 -------------------------------------------------------------------------------

TEST(OpsetDowngrade, SplitNumOutputsBecomesASplitInput) {
  {  // 7 along axis 1 into 3: 3, 3, 1
    Builder b;
    b.input("x", {2, 7}).output("a", 2).output("b", 2).output("c", 2);
    onnx::NodeProto& n = b.node("Split", {"x"}, {"a", "b", "c"}, "split");
    set_int(n, "axis", -1);
    set_int(n, "num_outputs", 3);
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m, "a"), (Shape{2, 3}));
    onnx::ModelProto copy = m;
    ASSERT_EQ(check_and_infer(copy), "");
    EXPECT_EQ(shape_of(copy, "c"), (Shape{2, 1}));
    const onnx::NodeProto& s = m.graph().node(0);
    EXPECT_EQ(attr(s, "num_outputs"), nullptr);
    ASSERT_EQ(s.input_size(), 2);
    EXPECT_EQ(initializer_ints(m.graph(), s.input(1)), (Shape{3, 3, 1}));
  }
  {  // the shape from value_info (as the dynamo exporter writes it), an even split
    Builder b;
    b.input("in", {1, 8, 2}).output("a", 3).output("b", 3);
    b.node("Relu", {"in"}, {"x"}, "relu");
    Builder::typed(b.graph().add_value_info(), "x", onnx::TensorProto::FLOAT, {1, 8, 2});
    onnx::NodeProto& n = b.node("Split", {"x"}, {"a", "b"}, "split");
    set_int(n, "axis", 1);
    set_int(n, "num_outputs", 2);
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m, "b"), (Shape{1, 4, 2}));
    EXPECT_EQ(initializer_ints(m.graph(), m.graph().node(1).input(1)), (Shape{4, 4}));
  }
}

TEST(OpsetDowngrade, SplitRefusals) {
  {
    Builder b;
    b.input("x", {-1, 4}).output("a", 2).output("b", 2);
    set_int(b.node("Split", {"x"}, {"a", "b"}, "s"), "num_outputs", 2);
    expect_refused(b.model(), {"node 's'", "Split-18", "size of axis 0 of 'x'", "symbolic"});
  }
  {
    Builder b;
    b.input("x", {5, 4}).output("a", 2).output("b", 2).output("c", 2).output("d", 2);
    set_int(b.node("Split", {"x"}, {"a", "b", "c", "d"}, "s"), "num_outputs", 4);
    expect_refused(b.model(), {"node 's'", "Split-18", "cannot be split into 4"});
  }
  {
    Builder b;
    b.input("x", {4, 4}).output("a", 2).output("b", 2);
    set_int(b.node("Split", {"x"}, {"a", "b"}, "s"), "num_outputs", 3);
    expect_refused(b.model(), {"node 's'", "num_outputs 3 but 2 outputs"});
  }
}

TEST(OpsetDowngrade, SplitWithASplitInputIsUnchanged) {
  Builder b;
  b.input("x", {5}).output("a", 1).output("b", 1).ints("sizes", {2, 3});
  b.node("Split", {"x", "sizes"}, {"a", "b"}, "s");
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m, "b"), (Shape{3}));
  EXPECT_EQ(m.graph().node(0).input(1), "sizes");
}

// ---- Scatter, pools, casts, DFT, GridSample -----------------------------------------------

TEST(OpsetDowngrade, ScatterReductions) {
  for (const char* reduction : {"add", "max"}) {
    Builder b;
    b.input("x", {4}).input("i", {2}, onnx::TensorProto::INT64).input("u", {2}).output("y", 1);
    set_string(b.node("ScatterElements", {"x", "i", "u"}, {"y"}, "sc"), "reduction", reduction);
    if (std::string(reduction) == "add") {
      EXPECT_EQ(downgrade_and_infer(b.model()), (Shape{4}));
    } else {
      expect_refused(b.model(), {"node 'sc'", "ScatterElements-18", "reduction 'max'"});
    }
  }
  Builder b;
  b.input("x", {4, 2})
      .input("i", {1, 1}, onnx::TensorProto::INT64)
      .input("u", {1, 2})
      .output("y", 2);
  set_string(b.node("ScatterND", {"x", "i", "u"}, {"y"}, "nd"), "reduction", "min");
  expect_refused(b.model(), {"node 'nd'", "ScatterND-18", "reduction 'min'"});
}

TEST(OpsetDowngrade, PoolAttributesAddedAfter17) {
  {  // LpPool-18: ceil_mode 0 and unit dilations are opset 11's LpPool
    Builder b;
    b.input("x", {1, 1, 6, 6}).output("y", 4);
    onnx::NodeProto& n = b.node("LpPool", {"x"}, {"y"}, "lp");
    set_ints(n, "kernel_shape", {2, 2});
    set_int(n, "ceil_mode", 0);
    set_ints(n, "dilations", {1, 1});
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 1, 5, 5}));
    EXPECT_EQ(m.graph().node(0).attribute_size(), 1);
  }
  {
    Builder b;
    b.input("x", {1, 1, 6, 6}).output("y", 4);
    onnx::NodeProto& n = b.node("LpPool", {"x"}, {"y"}, "lp");
    set_ints(n, "kernel_shape", {2, 2});
    set_int(n, "ceil_mode", 1);
    expect_refused(b.model(), {"node 'lp'", "LpPool-18", "ceil_mode"});
  }
  {  // AveragePool-19: dilations
    Builder b(19);
    b.input("x", {1, 1, 6, 6}).output("y", 4);
    onnx::NodeProto& n = b.node("AveragePool", {"x"}, {"y"}, "avg");
    set_ints(n, "kernel_shape", {3, 3});
    set_ints(n, "dilations", {1, 1});
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 1, 4, 4}));
    EXPECT_EQ(attr(m.graph().node(0), "dilations"), nullptr);
  }
  {
    Builder b(19);
    b.input("x", {1, 1, 6, 6}).output("y", 4);
    onnx::NodeProto& n = b.node("AveragePool", {"x"}, {"y"}, "avg");
    set_ints(n, "kernel_shape", {3, 3});
    set_ints(n, "dilations", {2, 2});
    expect_refused(b.model(), {"node 'avg'", "AveragePool-19", "dilations [2,2]"});
  }
  {  // MaxPool-22, ceil_mode: kept where no last window starts in the padding
    Builder b(22);
    b.input("x", {1, 1, 6, 6}).output("y", 4);
    onnx::NodeProto& n = b.node("MaxPool", {"x"}, {"y"}, "max");
    set_ints(n, "kernel_shape", {3, 3});
    set_ints(n, "strides", {2, 2});
    set_int(n, "ceil_mode", 1);
    EXPECT_EQ(downgrade_and_infer(b.model()), (Shape{1, 1, 3, 3}));
  }
  {  // ... and refused where one does (1 + 4 padded by 1 with stride 2: the window at 4)
    Builder b(22);
    b.input("x", {1, 1, 4, 4}).output("y", 4);
    onnx::NodeProto& n = b.node("MaxPool", {"x"}, {"y"}, "max");
    set_ints(n, "kernel_shape", {1, 1});
    set_ints(n, "strides", {2, 2});
    set_ints(n, "pads", {0, 0, 1, 1});
    set_int(n, "ceil_mode", 1);
    expect_refused(b.model(), {"node 'max'", "MaxPool-22", "right padding"});
  }
}

TEST(OpsetDowngrade, TypeOnlyChangesAndDroppedAttributes) {
  // Opset 21: Cast (saturate dropped), Reshape, Flatten, Shape, Transpose, Squeeze, Unsqueeze,
  // Identity, ConstantOfShape only gained element types.
  Builder b(21);
  b.input("x", {2, 3, 4})
      .output("y", 2)
      .output("z", 1, onnx::TensorProto::INT64)
      .ints("shape", {6, 4});
  b.ints("zero", {0});
  onnx::NodeProto& cast = b.node("Cast", {"x"}, {"c"}, "cast");
  set_int(cast, "to", onnx::TensorProto::FLOAT);
  set_int(cast, "saturate", 1);
  b.node("Reshape", {"c", "shape"}, {"r"}, "reshape");
  b.node("Unsqueeze", {"r", "zero"}, {"u"}, "unsqueeze");
  b.node("Squeeze", {"u", "zero"}, {"s"}, "squeeze");
  set_ints(b.node("Transpose", {"s"}, {"t"}, "transpose"), "perm", {1, 0});
  b.node("Identity", {"t"}, {"i"}, "identity");
  b.node("Flatten", {"i"}, {"y"}, "flatten");
  b.node("Shape", {"y"}, {"z"}, "shape_of_y");
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m), (Shape{4, 6}));
  EXPECT_EQ(attr(m.graph().node(0), "saturate"), nullptr);
  EXPECT_EQ(m.graph().node_size(), 8);
  EXPECT_EQ(m.ir_version(), 8);
}

TEST(OpsetDowngrade, QuantizeAttributes) {
  Builder b(21);
  b.input("x", {2, 3}).output("y", 2, onnx::TensorProto::FLOAT).floats("scale", {0.5f});
  auto* zp = b.graph().add_initializer();
  zp->set_name("zp");
  zp->set_data_type(onnx::TensorProto::UINT8);
  zp->add_int32_data(3);
  onnx::NodeProto& q = b.node("QuantizeLinear", {"x", "scale", "zp"}, {"q"}, "q");
  set_int(q, "saturate", 1);
  set_int(q, "block_size", 0);
  set_int(q, "output_dtype", onnx::TensorProto::UINT8);
  set_int(b.node("DequantizeLinear", {"q", "scale", "zp"}, {"y"}, "dq"), "block_size", 0);
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 3}));
  EXPECT_EQ(m.graph().node(0).attribute_size(), 0);
  EXPECT_EQ(m.graph().node(1).attribute_size(), 0);

  Builder blocked(21);
  blocked.input("x", {2, 4}).output("y", 2).floats("scale", {0.5f, 0.25f});
  set_int(blocked.node("DequantizeLinear", {"x", "scale"}, {"y"}, "dq"), "block_size", 2);
  expect_refused(blocked.model(), {"node 'dq'", "DequantizeLinear-21", "block_size"});
}

TEST(OpsetDowngrade, DftAxisInputAndGridSampleModes) {
  {
    Builder b(20);
    b.input("x", {1, 8, 1}).output("y", 3).ints("axis", {1});
    b.graph().mutable_initializer(0)->clear_dims();  // a scalar
    b.node("DFT", {"x", "", "axis"}, {"y"}, "dft");
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 8, 2}));
    EXPECT_EQ(m.graph().node(0).input_size(), 1);
    ASSERT_NE(attr(m.graph().node(0), "axis"), nullptr);
    EXPECT_EQ(attr(m.graph().node(0), "axis")->i(), 1);
  }
  {
    Builder b(20);
    b.input("x", {1, 3, 4, 4}).input("grid", {1, 5, 5, 2}).output("y", 4);
    set_string(b.node("GridSample", {"x", "grid"}, {"y"}, "gs"), "mode", "cubic");
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{1, 3, 5, 5}));
    EXPECT_EQ(attr(m.graph().node(0), "mode")->s(), "bicubic");
  }
  {
    Builder b(20);
    b.input("x", {1, 3, 4, 4, 4}).input("grid", {1, 5, 5, 5, 3}).output("y", 5);
    b.node("GridSample", {"x", "grid"}, {"y"}, "gs");
    expect_refused(b.model(), {"node 'gs'", "GridSample-20", "rank-5"});
  }
}

// ---- operators new after 17 -------------------------------------------------------------

TEST(OpsetDowngrade, MishAndGeluAreExpanded) {
  {
    Builder b;
    b.input("x", {2, 3}).output("y", 2);
    b.node("Mish", {"x"}, {"y"}, "mish");
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 3}));
    ASSERT_EQ(m.graph().node_size(), 3);
    EXPECT_EQ(m.graph().node(0).op_type(), "Softplus");
    EXPECT_EQ(m.graph().node(1).op_type(), "Tanh");
    EXPECT_EQ(m.graph().node(2).op_type(), "Mul");
    EXPECT_EQ(m.graph().node(2).output(0), "y");
  }
  for (const char* approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    Builder b(20);
    b.input("x", {2, 3}).output("y", 2);
    set_string(b.node("Gelu", {"x"}, {"y_0"}, "gelu"), "approximate", approximate);
    b.node("Relu", {"y_0"}, {"y"}, "after");
    onnx::ModelProto& m = b.model();
    EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 3}));
    std::map<std::string, int> ops;
    for (const auto& n : m.graph().node()) ++ops[n.op_type()];
    EXPECT_EQ(ops.count("Gelu"), 0u);
    EXPECT_EQ(ops[std::string(approximate) == "none" ? "Erf" : "Tanh"], 1);
    EXPECT_EQ(m.graph().node(m.graph().node_size() - 1).op_type(), "Relu") << "order kept";
  }
}

TEST(OpsetDowngrade, NewAndUnknownOperatorsAreRefused) {
  {
    Builder b;
    b.input("x", {1, 4, 2, 2}).output("y", 4).floats("scale", {1, 1}).floats("bias", {0, 0});
    set_int(b.node("GroupNormalization", {"x", "scale", "bias"}, {"y"}, "gn"), "num_groups", 2);
    expect_refused(b.model(), {"node 'gn'", "GroupNormalization-18", "introduced after opset 17"});
  }
  {
    Builder b;
    b.input("x", {4}, onnx::TensorProto::INT64).output("y", 1, onnx::TensorProto::INT64);
    b.node("BitwiseNot", {"x"}, {"y"}, "");
    expect_refused(b.model(), {"node #0", "BitwiseNot-18"});
  }
  {  // Gelu in an opset-18 model does not exist yet
    Builder b;
    b.input("x", {4}).output("y", 1);
    b.node("Gelu", {"x"}, {"y"}, "g");
    expect_refused(b.model(), {"node 'g'", "(Gelu)", "opset 18"});
  }
  {
    Builder b;
    b.input("x", {4}).output("y", 1);
    b.node("NoSuchOperator", {"x"}, {"y"}, "nope");
    expect_refused(b.model(), {"node 'nope'", "NoSuchOperator"});
  }
  {
    Builder b(23);
    b.input("x", {4}).output("y", 1);
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_refused(b.model(), {"opset 23", "18 to 22"});
  }
}

// ---- whole model --------------------------------------------------------------------------

TEST(OpsetDowngrade, Opset17ModelIsLeftAsItIs) {
  Builder b(17);
  b.input("x", {2, 3}).output("y", 2);
  set_ints(b.node("ReduceMean", {"x"}, {"y"}, "r"), "axes", {1});
  b.model().set_ir_version(10);
  const std::string before = b.model().SerializeAsString();
  EXPECT_EQ(downgrade_to_opset17(b.model()), "");
  EXPECT_EQ(b.model().SerializeAsString(), before);
}

TEST(OpsetDowngrade, SubgraphNodesAreRewrittenWithOuterConstants) {
  Builder b(19);
  b.input("x", {2, 3}).input("cond", {}, onnx::TensorProto::BOOL).output("y", 2).ints("axes", {1});
  auto branch = [](const std::string& name, const std::string& op) {
    onnx::GraphProto g;
    g.set_name(name);
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(name + "_reduce");
    n->add_input("x");
    n->add_input("axes");
    n->add_output(name + "_out");
    Builder::typed(g.add_output(), name + "_out", onnx::TensorProto::FLOAT, {2, 1});
    return g;
  };
  onnx::NodeProto& n = b.node("If", {"cond"}, {"y"}, "if");
  for (const auto& [attr_name, op] :
       {std::pair<std::string, std::string>{"then_branch", "ReduceMean"},
        {"else_branch", "ReduceMax"}}) {
    auto* a = n.add_attribute();
    a->set_name(attr_name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = branch(attr_name, op);
  }
  onnx::ModelProto& m = b.model();
  EXPECT_EQ(downgrade_and_infer(m), (Shape{2, 1}));
  const onnx::NodeProto& then_reduce = m.graph().node(0).attribute(0).g().node(0);
  EXPECT_EQ(then_reduce.input_size(), 1);
  EXPECT_EQ(attr_ints(then_reduce, "axes"), (Shape{1}));
  EXPECT_EQ(initializer(m.graph(), "axes"), nullptr);

  Builder refused(19);
  refused.input("x", {2, 3}).input("cond", {}, onnx::TensorProto::BOOL).output("y", 2);
  refused.input("axes", {1}, onnx::TensorProto::INT64);
  onnx::NodeProto& i = refused.node("If", {"cond"}, {"y"}, "if");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = i.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = branch(name, "ReduceMean");
  }
  expect_refused(refused.model(),
                 {"node 'then_branch_reduce' (ReduceMean-18) in the graph 'then_branch' of "
                  "node 'if' (If)"});
}

TEST(OpsetDowngrade, LateElementTypesAndFunctionsAreRefused) {
  {
    Builder b;
    b.input("x", {2}).output("y", 1);
    auto* t = b.graph().add_initializer();
    t->set_name("f8");
    t->set_data_type(17);  // FLOAT8E4M3FN
    t->add_dims(2);
    t->set_raw_data(std::string(2, '\0'));
    b.node("Relu", {"x"}, {"y"}, "r");
    expect_refused(b.model(), {"initializer 'f8'", "FLOAT8E4M3FN"});
  }
  {
    Builder b;
    b.input("x", {2}).output("y", 1);
    set_int(b.node("Cast", {"x"}, {"y"}, "to_int4"), "to", 22);
    expect_refused(b.model(), {"to_int4", "INT4"});
  }
  {
    Builder b;
    b.input("x", {2}).output("y", 1);
    b.node("MyRelu", {"x"}, {"y"}, "call").set_domain("local");
    auto* f = b.model().add_functions();
    f->set_name("MyRelu");
    f->set_domain("local");
    expect_refused(b.model(), {"model-local function", "local:MyRelu"});
  }
  {  // a function nobody calls is dropped
    Builder b;
    b.input("x", {2}).output("y", 1);
    b.node("Relu", {"x"}, {"y"}, "r");
    b.model().add_functions()->set_name("Unused");
    EXPECT_EQ(downgrade_and_infer(b.model()), (Shape{2}));
    EXPECT_EQ(b.model().functions_size(), 0);
  }
}

// ---- the real dynamo exports ------------------------------------------------------------

/// The corpus archive: $WEBTUNE_CORPUS_ARCHIVE, else tests/data/corpus/corpus.tar.xz.
fs::path corpus_archive() {
  if (const char* env = std::getenv("WEBTUNE_CORPUS_ARCHIVE")) return env;
  return fs::path(WEBTUNE_SOURCE_DIR) / "tests" / "data" / "corpus" / "corpus.tar.xz";
}

/// How many initializers and Constant outputs of the main graph no node or output reads.
int unread_constants(const onnx::ModelProto& m) {
  std::map<std::string, int> reads;
  for (const auto& n : m.graph().node())
    for (const auto& i : n.input()) ++reads[i];
  for (const auto& o : m.graph().output()) ++reads[o.name()];
  int unread = 0;
  for (const auto& t : m.graph().initializer()) unread += reads.count(t.name()) == 0;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "Constant") unread += reads.count(n.output(0)) == 0;
  return unread;
}

/// Gives every initializer without data (a corpus skeleton's recipe tensors) zero raw_data of
/// its size, which is all the checker asks of it; returns how many.
int fill_missing_data(onnx::GraphProto& g) {
  int filled = 0;
  for (auto& t : *g.mutable_initializer()) {
    if (t.raw_data().size() || t.float_data_size() || t.int64_data_size() || t.int32_data_size() ||
        t.double_data_size() || t.uint64_data_size() || t.string_data_size())
      continue;
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    const int size = t.data_type() == onnx::TensorProto::FLOAT   ? 4
                     : t.data_type() == onnx::TensorProto::INT64 ? 8
                                                                 : 0;
    if (n == 0 || size == 0) continue;
    t.set_raw_data(std::string(static_cast<size_t>(n * size), '\0'));
    ++filled;
  }
  return filled;
}

TEST(OpsetDowngrade, EveryDynamoExportOfTheCorpusDowngradesAndInfers) {
  const fs::path archive = corpus_archive();
  if (!fs::exists(archive))
    GTEST_SKIP() << archive << " is absent (set WEBTUNE_CORPUS_ARCHIVE to the corpus archive)";
  const fs::path dir =
      fs::path(testing::TempDir()) / ("webtune_opset_corpus_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string command = "tar xJf '" + archive.string() + "' -C '" + dir.string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  int models = 0;
  std::map<std::string, int> rewritten_ops;
  std::map<std::string, int> unsupported;  // by the importer's reference executor
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.find(".dynamo.") == std::string::npos || entry.path().extension() != ".onnx") continue;
    SCOPED_TRACE(file);
    ++models;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(bytes.str()));
    EXPECT_EQ(opset_of(m), 18) << "the dynamo exporter writes opset 18";
    const int unread_before = unread_constants(m);
    ASSERT_EQ(downgrade_to_opset17(m), "");
    EXPECT_EQ(unread_constants(m), unread_before) << "the axes constants go with their use";
    EXPECT_EQ(opset_of(m), 17);
    EXPECT_EQ(m.ir_version(), 8);
    for (const auto& n : m.graph().node()) {
      if (n.op_type().rfind("Reduce", 0) == 0) {
        EXPECT_EQ(n.input_size(), 1) << n.name();
        ++rewritten_ops[n.op_type()];
      }
      if (n.op_type() == "Split") {
        EXPECT_EQ(attr(n, "num_outputs"), nullptr) << n.name();
        ++rewritten_ops["Split"];
      }
      if (n.op_type() == "Resize") ++rewritten_ops["Resize"];
    }
    fill_missing_data(*m.mutable_graph());
    // The importer as it stands (opset 7 to 17) takes the downgraded model whole.
    try {
      webtune::graph::ImportReport report;
      const webtune::graph::Graph g =
          webtune::graph::import_onnx_bytes(m.SerializeAsString(), file, {}, &report);
      EXPECT_EQ(report.opset, 17);
      EXPECT_FALSE(g.nodes.empty());
      for (const auto& entry : report.unsupported) ++unsupported[entry.first];
    } catch (const std::exception& e) {
      ADD_FAILURE() << "import refused: " << e.what();
    }
    EXPECT_EQ(check_and_infer(m), "");
    for (const auto& out : m.graph().output()) {
      EXPECT_TRUE(out.type().tensor_type().has_shape()) << out.name();
      for (const auto& d : out.type().tensor_type().shape().dim())
        EXPECT_TRUE(d.has_dim_value() && d.dim_value() > 0) << out.name();
    }
  }
  fs::remove_all(dir);
  EXPECT_EQ(models, 26) << "the corpus holds 13 models, each exported twice by dynamo";
  std::string summary;
  for (const auto& [op, n] : rewritten_ops) summary += " " + op + " " + std::to_string(n);
  std::string refused;
  for (const auto& [op, n] : unsupported)
    refused += " " + op + " (" + std::to_string(n) + " models)";
  std::cout << "[ corpus   ] " << models << " dynamo exports downgraded, inferred and imported; "
            << "nodes of changed operators:" << summary
            << "; operators the executor does not run:" << (refused.empty() ? " none" : refused)
            << "\n";
}

}  // namespace
