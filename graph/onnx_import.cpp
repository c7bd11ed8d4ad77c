/// \file onnx_import.cpp
/// ONNX ModelProto → Graph (onnx_import.hpp): parse, bind symbolic dimensions, ONNX shape
/// inference, then tensors, constants and nodes.

#include "graph/onnx_import.hpp"

#include <onnx/onnx_pb.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "graph/operators.hpp"
#include "graph/simplify.hpp"
#include "onnx_inference.hpp"
#include "opset_downgrade.hpp"

namespace webtune::graph {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string element_type_name(int32_t type) {
  if (onnx::TensorProto_DataType_IsValid(type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(type));
  return "type " + std::to_string(type);
}

/// The IR type of an ONNX element type, or nullopt for one webtune does not carry.
std::optional<DataType> data_type_of(int32_t type) {
  switch (type) {
    case onnx::TensorProto_DataType_FLOAT:
      return DataType::kFloat32;
    case onnx::TensorProto_DataType_INT64:
      return DataType::kInt64;
    case onnx::TensorProto_DataType_INT32:
      return DataType::kInt32;
    case onnx::TensorProto_DataType_BOOL:
      return DataType::kBool;
    default:
      return std::nullopt;
  }
}

/// The most shape inference rounds (each after a round of folding); exporters' chains fold in
/// two or three.
constexpr int kMaxInferenceRounds = 16;
/// The largest tensor-valued attribute kept on a node (ConstantOfShape's is one value).
constexpr int64_t kMaxTensorAttributeElements = 1 << 16;

class Importer {
 public:
  Importer(std::string source, const ImportOptions& options)
      : source_(std::move(source)), options_(options) {}

  Graph run(const std::string& bytes, ImportReport* report) {
    onnx::ModelProto model;
    // ParseFromString fails on truncated or foreign bytes; a message that parses but has no
    // graph (e.g. a random protobuf) is refused below.
    if (bytes.empty()) fail("the file is empty, not an ONNX model");
    if (!model.ParseFromString(bytes))
      fail(
          "not an ONNX model (the protobuf ModelProto does not parse: truncated or another "
          "format)");
    if (!model.has_graph() || model.ir_version() <= 0)
      fail("not an ONNX model (no graph or no ir_version)");

    ImportReport local;
    ImportReport& r = report ? *report : local;
    r = ImportReport{};
    r.ir_version = model.ir_version();
    r.producer = model.producer_name() +
                 (model.producer_version().empty() ? "" : " " + model.producer_version());
    for (const auto& opset : model.opset_import())
      if (opset.domain().empty() || opset.domain() == "ai.onnx") r.opset = opset.version();
    if (r.opset == 0) fail("the model imports no opset of the default ONNX domain");
    // Opsets 18-22 (PyTorch's dynamo exporter writes 18) are rewritten into 17, the newest
    // libonnx 1.12 knows, where their operators allow it (opset_downgrade.hpp).
    if (r.opset > kMaxOpset && r.opset <= detail::kDowngradeMaxOpset) {
      if (std::string why = detail::downgrade_to_opset17(model); !why.empty())
        fail("opset " + std::to_string(r.opset) + " cannot be read as opset " +
             std::to_string(kMaxOpset) + ": " + why);
      r.downgraded_from = r.opset;
      r.opset = kMaxOpset;
    }
    if (r.opset < kMinOpset || r.opset > kMaxOpset)
      fail("opset " + std::to_string(r.opset) +
           " of the default domain is outside what webtune "
           "reads (" +
           std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");

    onnx::GraphProto& g = *model.mutable_graph();
    std::set<std::string> initializer_names;
    for (const auto& init : g.initializer()) initializer_names.insert(init.name());
    bind_input_dims(g, initializer_names);

    // ONNX shape inference, then folding, then what was folded written back into the model
    // and inference again, until every value has a shape (simplify.hpp): a Slice whose bounds
    // a Shape → Gather → Div → Mul chain computes gets its shape only once that chain is a
    // constant.
    SimplifyReport& simplified = r.simplified;
    Graph graph;
    std::map<std::string, std::string> unknown;  // value → why its shape is not known
    for (int round = 1;; ++round) {
      // The checker, then ONNX shape inference (strict, with data propagation), in a child
      // process: libonnx crashes on some malformed models (onnx_inference.hpp).
      try {
        if (std::string why = detail::check_and_infer_shapes(model); !why.empty()) fail(why);
      } catch (const std::runtime_error& e) {
        if (dynamic_cast<const GraphError*>(&e)) throw;
        fail(e.what());
      }
      simplified.inference_rounds = round;
      unknown.clear();
      graph = convert(g, unknown);
      int folded = 0;
      try {
        folded = fold_to_fixed_point(graph, r.opset, simplified);
      } catch (const GraphError& e) {
        fail(std::string("while folding constants: ") + e.what());
      }
      const std::string missing = first_unknown(graph, unknown);
      if (missing.empty()) break;
      if (folded == 0 || round == kMaxInferenceRounds) fail(missing);
      write_back(model, graph);
    }
    try {
      graph.sort_topologically();
      remove_aliases(graph, simplified);
      reduce_mean_to_pool(graph, simplified);
      remove_dead_nodes(graph, simplified);
      graph.validate();
    } catch (const GraphError& e) {
      fail(e.what());
    }
    // Counted after simplification: a folded Shape or Identity is nothing to run.
    for (const Node& node : graph.nodes)
      if (!is_supported_operator(node.op_type) || node.op_type.rfind("Fused", 0) == 0)
        ++r.unsupported[node.op_type];
    return graph;
  }

 private:
  /// The model's graph as IR, tolerating values whose shape inference did not find
  /// (Tensor::shape_known false, or no tensor for a node output); `unknown` gets why for each.
  Graph convert(const onnx::GraphProto& g, std::map<std::string, std::string>& unknown) {
    std::set<std::string> initializer_names;
    for (const auto& init : g.initializer()) initializer_names.insert(init.name());
    Graph graph;
    graph.name = g.name();
    for (const auto& init : g.initializer()) add_constant(graph, init, "initializer");
    for (const auto& input : g.input()) {
      if (initializer_names.count(input.name())) continue;  // IR < 4: initializers listed too
      add_value(graph, input, "graph input", unknown);
      graph.inputs.push_back(input.name());
    }
    // Intermediate values are named with the node that writes them ("output of Conv 'c1'").
    std::map<std::string, std::string> writer;
    for (int i = 0; i < g.node_size(); ++i)
      for (const std::string& out : g.node(i).output())
        writer[out] =
            "output of " + g.node(i).op_type() +
            (g.node(i).name().empty() ? " #" + std::to_string(i) : " '" + g.node(i).name() + "'");
    for (const auto& value : g.value_info()) {
      auto it = writer.find(value.name());
      add_value(graph, value, "value", unknown, it == writer.end() ? "" : " (" + it->second + ")");
    }
    for (const auto& output : g.output()) {
      if (!graph.has_tensor(output.name())) add_value(graph, output, "graph output", unknown);
      graph.outputs.push_back(output.name());
    }
    for (int i = 0; i < g.node_size(); ++i) add_node(graph, g.node(i), i);
    // Every node output must have a type and shape in the end (inference or value_info).
    for (const Node& node : graph.nodes)
      for (const std::string& out : node.outputs)
        if (!out.empty() && !graph.has_tensor(out) && !unknown.count(out))
          unknown[out] = "the shape of '" + out + "' (output of " + node.op_type + " '" +
                         node.name + "') is unknown after ONNX shape inference";
    return graph;
  }

  /// Why the first value a node or the graph's outputs still need has no shape, or "".
  static std::string first_unknown(const Graph& graph,
                                   const std::map<std::string, std::string>& unknown) {
    auto why = [&](const std::string& name) -> std::string {
      if (name.empty()) return "";
      if (graph.has_tensor(name) && graph.tensor(name).shape_known) return "";
      auto it = unknown.find(name);
      return it != unknown.end() ? it->second : "the shape of '" + name + "' is unknown";
    };
    for (const Node& node : graph.nodes) {
      for (const std::string& in : node.inputs)
        if (std::string w = why(in); !w.empty()) return w;
      for (const std::string& out : node.outputs)
        if (std::string w = why(out); !w.empty()) return w;
    }
    for (const std::string& out : graph.outputs)
      if (std::string w = why(out); !w.empty()) return w;
    return "";
  }

  /// Replaces the model's nodes whose outputs `graph` folded by initializers of the folded
  /// values that a remaining node or a graph output reads, so that the next inference round
  /// sees constants where the chains were.
  static void write_back(onnx::ModelProto& model, const Graph& graph) {
    onnx::GraphProto& g = *model.mutable_graph();
    auto folded = [&](const std::string& name) {
      return name.empty() || (graph.has_tensor(name) && graph.tensor(name).is_constant());
    };
    std::set<std::string> initializers;
    for (const auto& init : g.initializer()) initializers.insert(init.name());
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    std::set<std::string> read;
    for (const auto& node : g.node()) {
      bool all_folded = true;
      for (const std::string& out : node.output()) all_folded = all_folded && folded(out);
      if (all_folded) continue;
      for (const std::string& in : node.input()) read.insert(in);
      *kept.Add() = node;
    }
    for (const auto& out : g.output()) read.insert(out.name());
    for (const std::string& name : read) {
      if (name.empty() || initializers.count(name) || !folded(name)) continue;
      const Tensor& t = graph.tensor(name);
      *g.add_initializer() = proto_of(t);
      if (model.ir_version() < 4) {  // IR 3 lists every initializer as a graph input
        onnx::ValueInfoProto* input = g.add_input();
        input->set_name(name);
        auto* type = input->mutable_type()->mutable_tensor_type();
        type->set_elem_type(proto_type(t.type));
        for (int64_t d : t.shape) type->mutable_shape()->add_dim()->set_dim_value(d);
      }
    }
    g.mutable_node()->Swap(&kept);
  }

  static int32_t proto_type(DataType type) {
    switch (type) {
      case DataType::kFloat32:
        return onnx::TensorProto_DataType_FLOAT;
      case DataType::kInt64:
        return onnx::TensorProto_DataType_INT64;
      case DataType::kInt32:
        return onnx::TensorProto_DataType_INT32;
      case DataType::kBool:
        return onnx::TensorProto_DataType_BOOL;
    }
    return onnx::TensorProto_DataType_UNDEFINED;
  }

  /// A constant as a TensorProto with raw (little-endian) data.
  static onnx::TensorProto proto_of(const Tensor& t) {
    onnx::TensorProto p;
    p.set_name(t.name);
    p.set_data_type(proto_type(t.type));
    for (int64_t d : t.shape) p.add_dims(d);
    std::string bytes;
    if (t.float_data) {
      bytes.assign(reinterpret_cast<const char*>(t.float_data->data()),
                   t.float_data->size() * sizeof(float));
    } else if (t.type == DataType::kInt64) {
      bytes.assign(reinterpret_cast<const char*>(t.int_data->data()),
                   t.int_data->size() * sizeof(int64_t));
    } else if (t.type == DataType::kInt32) {
      for (int64_t v : *t.int_data) {
        const auto narrow = static_cast<int32_t>(v);
        bytes.append(reinterpret_cast<const char*>(&narrow), sizeof narrow);
      }
    } else {
      for (int64_t v : *t.int_data) bytes.push_back(v != 0 ? 1 : 0);
    }
    p.set_raw_data(std::move(bytes));
    return p;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw GraphError(source_ + ": " + message);
  }

  /// Replaces symbolic dimensions of the graph inputs by the bound values, or refuses them.
  void bind_input_dims(onnx::GraphProto& g, const std::set<std::string>& initializers) {
    for (auto& input : *g.mutable_input()) {
      if (initializers.count(input.name())) continue;
      if (!input.type().has_tensor_type())
        fail("graph input '" + input.name() +
             "' is not a tensor (sequences and maps are not "
             "supported)");
      auto* tensor_type = input.mutable_type()->mutable_tensor_type();
      if (!tensor_type->has_shape())
        fail("graph input '" + input.name() + "' has no shape (its rank is unknown)");
      for (auto& dim : *tensor_type->mutable_shape()->mutable_dim()) {
        if (dim.has_dim_value()) continue;
        const std::string param = dim.has_dim_param() ? dim.dim_param() : "";
        auto it = options_.symbolic_dims.find(param);
        if (it == options_.symbolic_dims.end()) it = options_.symbolic_dims.find("*");
        if (it == options_.symbolic_dims.end())
          fail("graph input '" + input.name() + "' has a symbolic dimension '" +
               (param.empty() ? "?" : param) + "'; give it a value (webtune import --dim " +
               (param.empty() ? "'*'" : param) + "=1)");
        dim.clear_dim_param();
        dim.set_dim_value(it->second);
      }
    }
  }

  /// The static shape of `value`, or nullopt with `why` saying what is unknown.
  static std::optional<std::vector<int64_t>> shape_of(const onnx::ValueInfoProto& value,
                                                      const std::string& what,
                                                      const std::string& origin, std::string& why) {
    const auto& tensor_type = value.type().tensor_type();
    if (!tensor_type.has_shape()) {
      why = what + " '" + value.name() + "'" + origin + " has no shape after ONNX shape inference";
      return std::nullopt;
    }
    std::vector<int64_t> shape;
    for (const auto& dim : tensor_type.shape().dim()) {
      if (!dim.has_dim_value() || dim.dim_value() < 0) {
        why = what + " '" + value.name() + "'" + origin +
              " has a dimension that stays unknown after ONNX shape inference" +
              (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : "");
        return std::nullopt;
      }
      shape.push_back(dim.dim_value());
    }
    return shape;
  }

  void add_value(Graph& graph, const onnx::ValueInfoProto& value, const std::string& what,
                 std::map<std::string, std::string>& unknown, const std::string& origin = "") {
    if (graph.has_tensor(value.name())) return;  // a constant, or listed twice
    if (!value.type().has_tensor_type())
      fail(what + " '" + value.name() + "'" + origin + " is not a tensor");
    const int32_t elem = value.type().tensor_type().elem_type();
    auto type = data_type_of(elem);
    if (!type)
      fail(what + " '" + value.name() + "'" + origin + " is " + element_type_name(elem) +
           "; webtune reads float32 models (with int64 / int32 / bool shapes and indices)");
    Tensor t;
    t.name = value.name();
    t.type = *type;
    std::string why;
    if (auto shape = shape_of(value, what, origin, why)) {
      t.shape = std::move(*shape);
    } else {
      t.shape_known = false;
      unknown[t.name] = why;
    }
    graph.tensors[t.name] = std::move(t);
  }

  Tensor tensor_of(const onnx::TensorProto& proto, const std::string& what) {
    const std::string name = what + " '" + proto.name() + "'";
    if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL ||
        proto.external_data_size() > 0)
      fail(name +
           " keeps its data in an external file; webtune reads self-contained models "
           "(onnx.save_model(..., save_as_external_data=False))");
    if (proto.has_segment()) fail(name + " is segmented; webtune reads whole tensors");
    auto type = data_type_of(proto.data_type());
    if (!type)
      fail(name + " is " + element_type_name(proto.data_type()) +
           "; webtune reads float32 models (with int64 / int32 / bool shapes and indices)");
    Tensor t;
    t.name = proto.name();
    t.type = *type;
    int64_t elements = 1;
    for (int64_t d : proto.dims()) {
      if (d < 0) fail(name + " has a negative dimension");
      if (d > 0 && elements > (int64_t{1} << 40) / d) fail(name + " is too large");
      elements *= d;
      t.shape.push_back(d);
    }
    const bool raw = proto.has_raw_data();
    auto check_count = [&](int64_t count) {
      if (count != elements)
        fail(name + " holds " + std::to_string(count) + " values but its shape " +
             shape_text(t.shape) + " has " + std::to_string(elements));
    };
    if (*type == DataType::kFloat32) {
      std::vector<float> data;
      if (raw) {
        const std::string& bytes = proto.raw_data();
        if (bytes.size() % 4)
          fail(name + " has " + std::to_string(bytes.size()) +
               " bytes of raw data, not a whole number of float32");
        check_count(static_cast<int64_t>(bytes.size() / 4));
        data.resize(bytes.size() / 4);
        std::memcpy(data.data(), bytes.data(), bytes.size());  // little-endian hosts only
      } else {
        check_count(proto.float_data_size());
        data.assign(proto.float_data().begin(), proto.float_data().end());
      }
      t.float_data = std::move(data);
    } else {
      std::vector<int64_t> data;
      const size_t width = *type == DataType::kInt64 ? 8 : (*type == DataType::kInt32 ? 4 : 1);
      if (raw) {
        const std::string& bytes = proto.raw_data();
        if (bytes.size() % width)
          fail(name +
               " has raw data of a size that is not a whole "
               "number of elements");
        check_count(static_cast<int64_t>(bytes.size() / width));
        data.resize(bytes.size() / width);
        for (size_t i = 0; i < data.size(); ++i) {
          if (width == 8) {
            int64_t v;
            std::memcpy(&v, bytes.data() + 8 * i, 8);
            data[i] = v;
          } else if (width == 4) {
            int32_t v;
            std::memcpy(&v, bytes.data() + 4 * i, 4);
            data[i] = v;
          } else {
            data[i] = bytes[i] != 0;
          }
        }
      } else if (*type == DataType::kInt64) {
        check_count(proto.int64_data_size());
        data.assign(proto.int64_data().begin(), proto.int64_data().end());
      } else {
        // int32 and bool are stored in int32_data.
        check_count(proto.int32_data_size());
        data.assign(proto.int32_data().begin(), proto.int32_data().end());
      }
      t.int_data = std::move(data);
    }
    return t;
  }

  void add_constant(Graph& graph, const onnx::TensorProto& proto, const std::string& what) {
    if (proto.name().empty()) fail("an " + what + " has no name");
    if (graph.has_tensor(proto.name())) fail(what + " '" + proto.name() + "' is defined twice");
    Tensor t = tensor_of(proto, what);
    graph.tensors[t.name] = std::move(t);
  }

  /// A Constant node's value as a constant tensor named `output`.
  void add_constant_node(Graph& graph, const onnx::NodeProto& node, const std::string& where) {
    if (node.output_size() != 1 || node.attribute_size() != 1)
      fail(where + " must have one output and one value attribute");
    const auto& a = node.attribute(0);
    Tensor t;
    t.name = node.output(0);
    if (a.name() == "value") {
      onnx::TensorProto proto = a.t();
      proto.set_name(node.output(0));
      t = tensor_of(proto, where + "'s value");
    } else if (a.name() == "value_float") {
      t.float_data = std::vector<float>{a.f()};
    } else if (a.name() == "value_floats") {
      t.shape = {a.floats_size()};
      t.float_data = std::vector<float>(a.floats().begin(), a.floats().end());
    } else if (a.name() == "value_int") {
      t.type = DataType::kInt64;
      t.int_data = std::vector<int64_t>{a.i()};
    } else if (a.name() == "value_ints") {
      t.type = DataType::kInt64;
      t.shape = {a.ints_size()};
      t.int_data = std::vector<int64_t>(a.ints().begin(), a.ints().end());
    } else {
      fail(where + ": the value kind '" + a.name() + "' is not supported");
    }
    if (graph.has_tensor(t.name) && graph.tensor(t.name).is_constant())
      fail(where + " writes '" + t.name + "', which is already a constant");
    graph.tensors[t.name] = std::move(t);
  }

  void add_node(Graph& graph, const onnx::NodeProto& proto, int index) {
    const std::string where = proto.op_type() + (proto.name().empty() ? " #" + std::to_string(index)
                                                                      : " '" + proto.name() + "'");
    const bool default_domain = proto.domain().empty() || proto.domain() == "ai.onnx";
    if (default_domain && proto.op_type() == "Constant") {
      add_constant_node(graph, proto, where);
      return;
    }
    const bool supported = default_domain && is_supported_operator(proto.op_type()) &&
                           proto.op_type().rfind("Fused", 0) != 0;
    Node node;
    node.name = proto.name();
    node.op_type = default_domain ? proto.op_type() : proto.domain() + "." + proto.op_type();
    node.inputs.assign(proto.input().begin(), proto.input().end());
    node.outputs.assign(proto.output().begin(), proto.output().end());
    for (const auto& a : proto.attribute()) {
      switch (a.type()) {
        case onnx::AttributeProto_AttributeType_INT:
          node.attributes[a.name()] = static_cast<int64_t>(a.i());
          break;
        case onnx::AttributeProto_AttributeType_FLOAT:
          node.attributes[a.name()] = a.f();
          break;
        case onnx::AttributeProto_AttributeType_STRING:
          node.attributes[a.name()] = a.s();
          break;
        case onnx::AttributeProto_AttributeType_INTS:
          node.attributes[a.name()] = std::vector<int64_t>(a.ints().begin(), a.ints().end());
          break;
        case onnx::AttributeProto_AttributeType_FLOATS:
          node.attributes[a.name()] = std::vector<float>(a.floats().begin(), a.floats().end());
          break;
        case onnx::AttributeProto_AttributeType_TENSOR:
          // ConstantOfShape's value: a small tensor, kept flat as floats or ints (its shape
          // is the operator's business: ConstantOfShape's is [1]).
          if (a.t().data_location() != onnx::TensorProto_DataLocation_EXTERNAL &&
              a.t().external_data_size() == 0 && data_type_of(a.t().data_type())) {
            onnx::TensorProto value = a.t();
            if (value.name().empty()) value.set_name(a.name());
            int64_t elements = 1;
            for (int64_t d : value.dims()) elements *= d < 0 ? 0 : d;
            if (elements <= kMaxTensorAttributeElements) {
              Tensor t = tensor_of(value, where + "'s attribute '" + a.name() + "'");
              if (t.float_data)
                node.attributes[a.name()] = std::move(*t.float_data);
              else
                node.attributes[a.name()] = std::move(*t.int_data);
              break;
            }
          }
          if (supported)
            fail(where + ": attribute '" + a.name() + "' is a tensor webtune does not read (" +
                 element_type_name(a.t().data_type()) + ", or too large, or external data)");
          break;
        default:
          // Graph and sparse attributes: only operators webtune does not run have them (If,
          // Loop, Scan); they are kept without the attribute.
          if (supported)
            fail(where + ": attribute '" + a.name() + "' is of a kind webtune does not read (" +
                 onnx::AttributeProto_AttributeType_Name(a.type()) + ")");
      }
    }
    for (const std::string& out : node.outputs)
      if (!out.empty() && graph.has_tensor(out) && graph.tensor(out).is_constant())
        fail(where + " writes '" + out + "', which is a constant");
    graph.nodes.push_back(std::move(node));
  }

  std::string source_;
  const ImportOptions& options_;
};

}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& source,
                        const ImportOptions& options, ImportReport* report) {
  return Importer(source, options).run(bytes, report);
}

Graph import_onnx_file(const std::string& path, const ImportOptions& options,
                       ImportReport* report) {
  // stat() first: opening a FIFO blocks until a writer comes, and a directory "opens" on some
  // libraries with a size of 2^63 - 1.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw GraphError(path + ": cannot open the file (" + std::strerror(errno) + ")");
  if (!S_ISREG(info.st_mode))
    throw GraphError(path + ": not a regular file (" +
                     (S_ISDIR(info.st_mode)    ? std::string("a directory")
                      : S_ISFIFO(info.st_mode) ? std::string("a FIFO")
                      : S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)
                          ? std::string("a device")
                          : std::string("a socket or other special file")) +
                     "); give the path of an .onnx file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw GraphError(path + ": cannot open the file");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw GraphError(path + ": cannot read the file (not a regular file?)");
  if (size > kMaxModelBytes)
    throw GraphError(path + ": " + std::to_string(size) + " bytes, above the " +
                     std::to_string(kMaxModelBytes) + " bytes a protobuf model may have");
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), size)) throw GraphError(path + ": cannot read the file");
  return import_onnx_bytes(bytes, path, options, report);
}

}  // namespace webtune::graph
