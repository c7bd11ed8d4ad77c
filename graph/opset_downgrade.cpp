/// \file opset_downgrade.cpp
/// Opset 18–22 → 17 (opset_downgrade.hpp): the ONNX changelog's schema changes after opset 17
/// as a table, one rewrite per changed operator, applied to every default-domain node of the
/// graph and of its If / Loop / Scan bodies.

#include "opset_downgrade.hpp"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace webtune::graph::detail {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx::TypeProto;

/// A model the rewrite cannot bring to opset 17; caught by downgrade_to_opset17.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool is_default_domain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// The operators of the default domain whose schema has a version after 17, by version: the
/// "Version 18 (19, 20, 21, 22) of the default ONNX operator set" sections of onnx/onnx
/// docs/Changelog.md.
const std::map<std::string, std::vector<int>>& changed_after_17() {
  static const std::map<std::string, std::vector<int>> table = [] {
    const std::pair<int, const char*> versions[] = {
        {18,
         "BitwiseAnd BitwiseNot BitwiseOr BitwiseXor CenterCropPad Col2Im GroupNormalization "
         "LpPool Mish OptionalGetElement OptionalHasElement Pad ReduceL1 ReduceL2 ReduceLogSum "
         "ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSumSquare Resize "
         "ScatterElements ScatterND Split"},
        {19,
         "AveragePool Cast CastLike Constant DeformConv DequantizeLinear Equal Identity If Loop "
         "Pad QuantizeLinear Reshape Resize Scan Shape Size"},
        {20,
         "AffineGrid ConstantOfShape DFT Gelu GridSample ImageDecoder IsInf IsNaN ReduceMax "
         "ReduceMin RegexFullMatch StringConcat StringSplit"},
        {21,
         "Cast CastLike Constant ConstantOfShape DequantizeLinear Flatten GroupNormalization "
         "Identity If Loop Pad QLinearMatMul QuantizeLinear Reshape Scan Shape Size Squeeze "
         "Transpose Unsqueeze"},
        {22,
         "Acos Acosh Asin Asinh Atan Atanh AveragePool Bernoulli Conv ConvTranspose Cos Cosh "
         "DeformConv Det Dropout Elu EyeLike GRU GlobalAveragePool GlobalLpPool GlobalMaxPool "
         "GridSample HardSigmoid HardSwish InstanceNormalization LSTM LpNormalization LpPool "
         "MaxPool MaxRoiPool MaxUnpool Mish Multinomial NegativeLogLikelihoodLoss RNN "
         "RandomNormal RandomNormalLike RandomUniform RandomUniformLike RoiAlign Round Selu Sin "
         "Sinh Softplus Softsign Tan ThresholdedRelu"},
    };
    std::map<std::string, std::vector<int>> t;
    for (const auto& [version, names] : versions) {
      std::istringstream in(names);
      for (std::string name; in >> name;) t[name].push_back(version);
    }
    return t;
  }();
  return table;
}

/// Operators that first appear after opset 17 and have no opset-17 form here.
const std::set<std::string>& new_after_17() {
  static const std::set<std::string> ops = {
      "AffineGrid",     "BitwiseAnd",   "BitwiseNot", "BitwiseOr",    "BitwiseXor",
      "CenterCropPad",  "Col2Im",       "DeformConv", "ImageDecoder", "GroupNormalization",
      "RegexFullMatch", "StringConcat", "StringSplit"};
  return ops;
}

const std::set<std::string>& reduce_ops() {
  static const std::set<std::string> ops = {"ReduceL1",        "ReduceL2",   "ReduceLogSum",
                                            "ReduceLogSumExp", "ReduceMax",  "ReduceMean",
                                            "ReduceMin",       "ReduceProd", "ReduceSumSquare"};
  return ops;
}

/// The element types IR 9 and later added (float8, int4 ...), which libonnx 1.12 (IR 8) lacks.
std::string late_element_type_name(int32_t type) {
  static const char* const names[] = {
      "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",
      "INT4",         "FLOAT4E2M1",     "FLOAT8E8M0", "UINT2",          "INT2"};
  if (type >= 17 && type < 17 + static_cast<int32_t>(std::size(names))) return names[type - 17];
  return "type " + std::to_string(type);
}
/// The newest element type of IR 8 (BFLOAT16).
constexpr int32_t kNewestIr8ElementType = onnx::TensorProto_DataType_BFLOAT16;

// ---- attributes ----------------------------------------------------------------------------

const AttributeProto* find_attr(const NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

void remove_attr(NodeProto& node, const std::string& name) {
  auto* attrs = node.mutable_attribute();
  for (int i = attrs->size() - 1; i >= 0; --i)
    if (attrs->Get(i).name() == name) attrs->DeleteSubrange(i, 1);
}

int64_t int_attr(const NodeProto& node, const std::string& name, int64_t fallback) {
  const AttributeProto* a = find_attr(node, name);
  return a && a->type() == AttributeProto::INT ? a->i() : fallback;
}

std::string string_attr(const NodeProto& node, const std::string& name,
                        const std::string& fallback) {
  const AttributeProto* a = find_attr(node, name);
  return a && a->type() == AttributeProto::STRING ? a->s() : fallback;
}

std::vector<int64_t> ints_attr(const NodeProto& node, const std::string& name) {
  const AttributeProto* a = find_attr(node, name);
  if (!a || a->type() != AttributeProto::INTS) return {};
  return {a->ints().begin(), a->ints().end()};
}

AttributeProto& set_attr(NodeProto& node, const std::string& name,
                         AttributeProto::AttributeType t) {
  remove_attr(node, name);
  AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(t);
  return *a;
}

void set_ints_attr(NodeProto& node, const std::string& name, const std::vector<int64_t>& v) {
  AttributeProto& a = set_attr(node, name, AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}

void set_int_attr(NodeProto& node, const std::string& name, int64_t v) {
  set_attr(node, name, AttributeProto::INT).set_i(v);
}

void set_string_attr(NodeProto& node, const std::string& name, const std::string& v) {
  set_attr(node, name, AttributeProto::STRING).set_s(v);
}

bool has_input(const NodeProto& node, int i) {
  return node.input_size() > i && !node.input(i).empty();
}

void trim_trailing_empty_inputs(NodeProto& node) {
  while (node.input_size() > 0 && node.input(node.input_size() - 1).empty())
    node.mutable_input()->RemoveLast();
}

std::string list_text(const std::vector<int64_t>& v) {
  std::string text = "[";
  for (size_t i = 0; i < v.size(); ++i) text += (i ? "," : "") + std::to_string(v[i]);
  return text + "]";
}

// ---- constants ------------------------------------------------------------------------------

uint64_t little_endian(const std::string& raw, size_t offset, int bytes) {
  uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b)
    v = (v << 8) | static_cast<unsigned char>(raw[offset + static_cast<size_t>(b)]);
  return v;
}

/// The values of an int64 or int32 tensor with its data in the file, else nullopt.
std::optional<std::vector<int64_t>> tensor_ints(const TensorProto& t) {
  if (t.data_location() == TensorProto::EXTERNAL) return std::nullopt;
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > (int64_t{1} << 24)) return std::nullopt;
    count *= d;
    if (count > (int64_t{1} << 24)) return std::nullopt;
  }
  std::vector<int64_t> v;
  if (t.data_type() == TensorProto::INT64) {
    if (t.int64_data_size() > 0) {
      v.assign(t.int64_data().begin(), t.int64_data().end());
    } else if (t.raw_data().size() == static_cast<size_t>(count) * 8) {
      for (int64_t i = 0; i < count; ++i)
        v.push_back(
            static_cast<int64_t>(little_endian(t.raw_data(), static_cast<size_t>(i) * 8, 8)));
    }
  } else if (t.data_type() == TensorProto::INT32) {
    if (t.int32_data_size() > 0) {
      v.assign(t.int32_data().begin(), t.int32_data().end());
    } else if (t.raw_data().size() == static_cast<size_t>(count) * 4) {
      for (int64_t i = 0; i < count; ++i)
        v.push_back(static_cast<int32_t>(
            static_cast<uint32_t>(little_endian(t.raw_data(), static_cast<size_t>(i) * 4, 4))));
    }
  } else {
    return std::nullopt;
  }
  if (static_cast<int64_t>(v.size()) != count) return std::nullopt;
  return v;
}

/// A tensor's dimensions as far as the model states them (nullopt: unknown).
using Dims = std::vector<std::optional<int64_t>>;

/// What a graph (and the graphs around it) knows of its values: constants and shapes.
struct Scope {
  const Scope* parent = nullptr;
  GraphProto* graph = nullptr;  // the graph whose values these are
  std::string where;            // "" for the main graph, else " in the body 'b' of node 'n'"
  std::map<std::string, const TensorProto*> tensors;  // initializers, Constant `value`s
  std::map<std::string, std::vector<int64_t>> ints;   // Constant `value_int(s)`
  std::map<std::string, const TypeProto*> types;      // inputs, value_info, outputs

  std::optional<std::vector<int64_t>> constant_ints(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (auto it = s->ints.find(name); it != s->ints.end()) return it->second;
      if (auto it = s->tensors.find(name); it != s->tensors.end()) return tensor_ints(*it->second);
      if (s->types.count(name)) return std::nullopt;  // a value of this scope, not a constant
    }
    return std::nullopt;
  }

  std::optional<Dims> dims(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (auto it = s->types.find(name); it != s->types.end()) {
        const TypeProto& t = *it->second;
        if (t.has_tensor_type() && t.tensor_type().has_shape()) {
          Dims d;
          for (const auto& dim : t.tensor_type().shape().dim())
            d.push_back(dim.has_dim_value() ? std::optional<int64_t>(dim.dim_value())
                                            : std::nullopt);
          return d;
        }
      }
      if (auto it = s->tensors.find(name); it != s->tensors.end())
        return Dims(it->second->dims().begin(), it->second->dims().end());
    }
    return std::nullopt;
  }

  int32_t element_type(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (auto it = s->types.find(name); it != s->types.end() && it->second->has_tensor_type())
        return it->second->tensor_type().elem_type();
      if (auto it = s->tensors.find(name); it != s->tensors.end()) return it->second->data_type();
    }
    return 0;
  }
};

struct Context {
  int64_t opset = 0;
  std::set<std::string> names;  // every value and node name, for fresh ones
  // Values a rewrite stopped reading, by graph: removed at the end when nothing reads them.
  std::vector<std::pair<GraphProto*, std::string>> detached;

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; names.count(name); ++i) name = base + "_" + std::to_string(i);
    names.insert(name);
    return name;
  }
};

/// Rewrites one graph's nodes in place (and the bodies under them).
class GraphRewriter {
 public:
  GraphRewriter(Context& ctx, GraphProto& graph, const Scope* parent, std::string where)
      : ctx_(ctx), graph_(graph) {
    scope_.parent = parent;
    scope_.graph = &graph;
    scope_.where = std::move(where);
    for (const auto& init : graph.initializer()) scope_.tensors[init.name()] = &init;
    for (const auto& v : graph.input()) scope_.types[v.name()] = &v.type();
    for (const auto& v : graph.value_info()) scope_.types[v.name()] = &v.type();
    for (const auto& v : graph.output()) scope_.types[v.name()] = &v.type();
    for (const auto& node : graph.node()) {
      if (node.op_type() != "Constant" || !is_default_domain(node.domain()) ||
          node.output_size() != 1)
        continue;
      if (const AttributeProto* a = find_attr(node, "value")) {
        scope_.tensors[node.output(0)] = &a->t();
      } else if (const AttributeProto* a = find_attr(node, "value_ints")) {
        scope_.ints[node.output(0)] = {a->ints().begin(), a->ints().end()};
      } else if (const AttributeProto* a = find_attr(node, "value_int")) {
        scope_.ints[node.output(0)] = {a->i()};
      }
    }
  }

  void run() {
    const int n = graph_.node_size();
    std::vector<std::vector<NodeProto>> replaced(static_cast<size_t>(n));
    bool any_replaced = false;
    for (int i = 0; i < n; ++i) {
      NodeProto& node = *graph_.mutable_node(i);
      index_ = i;
      for (auto& attr : *node.mutable_attribute()) {
        const std::string where = " in the graph '" + attr.name() + "' of " + describe(node, 0);
        if (attr.type() == AttributeProto::GRAPH)
          GraphRewriter(ctx_, *attr.mutable_g(), &scope_, where).run();
        for (auto& body : *attr.mutable_graphs()) GraphRewriter(ctx_, body, &scope_, where).run();
      }
      if (!is_default_domain(node.domain())) continue;
      std::vector<NodeProto> expansion = rewrite(node);
      if (!expansion.empty()) {
        replaced[static_cast<size_t>(i)] = std::move(expansion);
        any_replaced = true;
      }
    }
    if (!any_replaced) return;
    // Rebuild the node list with each expanded node's replacement in its place (the scope's
    // pointers into the old nodes are not used after this).
    std::vector<NodeProto> nodes;
    for (int i = 0; i < n; ++i) {
      auto& r = replaced[static_cast<size_t>(i)];
      if (r.empty()) {
        nodes.push_back(std::move(*graph_.mutable_node(i)));
      } else {
        for (auto& node : r) nodes.push_back(std::move(node));
      }
    }
    graph_.clear_node();
    for (auto& node : nodes) *graph_.add_node() = std::move(node);
  }

 private:
  /// "node 'name' (Op-18)" or "node #3 (Op-18)", and where its graph is.
  std::string describe(const NodeProto& node, int version) const {
    std::string text =
        node.name().empty() ? "node #" + std::to_string(index_) : "node '" + node.name() + "'";
    text += " (" + node.op_type() + (version > 0 ? "-" + std::to_string(version) : "") + ")";
    return text + scope_.where;
  }

  [[noreturn]] void refuse(const NodeProto& node, int version, const std::string& why) const {
    throw Refused(describe(node, version) + ": " + why);
  }

  /// Notes that a rewrite stopped reading `name`, a constant of this graph or one around it.
  void detach(const std::string& name) {
    for (const Scope* s = &scope_; s; s = s->parent)
      if (s->tensors.count(name) || s->ints.count(name)) {
        ctx_.detached.emplace_back(s->graph, name);
        return;
      }
  }

  /// The constant ints of input `i`, or a refusal saying what opset 17 needs.
  std::vector<int64_t> constant_input(const NodeProto& node, int version, int i,
                                      const std::string& what, const std::string& need) {
    std::optional<std::vector<int64_t>> v = scope_.constant_ints(node.input(i));
    if (!v)
      refuse(node, version,
             what + " '" + node.input(i) +
                 "' is not a constant (an initializer or a Constant node's output) webtune can "
                 "read; opset 17 needs " +
                 need);
    return *v;
  }

  /// The rank of `name`, or a refusal naming why it is needed.
  int64_t rank_of(const NodeProto& node, int version, const std::string& name,
                  const std::string& why) const {
    std::optional<Dims> d = scope_.dims(name);
    if (!d)
      refuse(node, version,
             why + " needs the rank of '" + name +
                 "', which the model does not state (no value_info, graph input or "
                 "initializer gives its shape)");
    return static_cast<int64_t>(d->size());
  }

  /// Axes normalised into [0, rank), or a refusal.
  std::vector<int64_t> normalised_axes(const NodeProto& node, int version,
                                       std::vector<int64_t> axes, int64_t rank) const {
    std::set<int64_t> seen;
    for (int64_t& a : axes) {
      const int64_t original = a;
      if (a < 0) a += rank;
      if (a < 0 || a >= rank || !seen.insert(a).second)
        refuse(node, version,
               "axis " + std::to_string(original) + " is out of range or repeated for rank " +
                   std::to_string(rank));
    }
    return axes;
  }

  std::string add_int64_initializer(const std::string& base, const std::vector<int64_t>& v) {
    TensorProto* t = graph_.add_initializer();
    t->set_name(ctx_.fresh(base));
    t->set_data_type(TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return t->name();
  }

  std::string add_float_scalar(const std::string& base, float v) {
    TensorProto* t = graph_.add_initializer();
    t->set_name(ctx_.fresh(base));
    t->set_data_type(TensorProto::FLOAT);
    t->add_float_data(v);
    return t->name();
  }

  /// The node rewritten into opset 17 in place, or (for an expansion into several nodes) the
  /// nodes that replace it.
  std::vector<NodeProto> rewrite(NodeProto& node) {
    const std::string& op = node.op_type();
    int version = 0;  // the node's schema version: its operator's newest at or below the opset
    if (auto it = changed_after_17().find(op); it != changed_after_17().end())
      for (int v : it->second)
        if (v <= ctx_.opset) version = v;
    if (version == 0) {
      // Unchanged since opset 17 or before, if libonnx 1.12 knows it at all.
      if (!onnx::OpSchemaRegistry::Schema(op, static_cast<int>(kDowngradeTargetOpset), ""))
        refuse(node, 0,
               "not an operator of ONNX opset " + std::to_string(ctx_.opset) +
                   " that libonnx 1.12 knows at opset 17, nor a later one webtune rewrites");
      return {};
    }
    if (new_after_17().count(op))
      refuse(node, version,
             "the operator was introduced after opset 17 and has no opset-17 form here");
    if (reduce_ops().count(op)) {
      rewrite_reduce(node, version);
    } else if (op == "Pad") {
      rewrite_pad(node, version);
    } else if (op == "Resize") {
      rewrite_resize(node, version);
    } else if (op == "Split") {
      rewrite_split(node, version);
    } else if (op == "ScatterElements" || op == "ScatterND") {
      const std::string reduction = string_attr(node, "reduction", "none");
      if (reduction == "max" || reduction == "min")
        refuse(node, version, "reduction '" + reduction + "' is not in opset 17 (added in 18)");
    } else if (op == "LpPool") {
      if (int_attr(node, "ceil_mode", 0) != 0)
        refuse(node, version, "ceil_mode 1 is not in opset 17 (added in 18)");
      drop_unit_dilations(node, version);
      remove_attr(node, "ceil_mode");
    } else if (op == "AveragePool" || op == "MaxPool") {
      if (op == "AveragePool" && version >= 19) drop_unit_dilations(node, version);
      if (version >= 22) check_ceil_windows(node, version);
    } else if (op == "Cast" || op == "CastLike") {
      remove_attr(node, "saturate");  // float8 targets only (opset 19)
    } else if (op == "QuantizeLinear" || op == "DequantizeLinear") {
      rewrite_quantize(node, version);
    } else if (op == "DFT") {
      rewrite_dft(node, version);
    } else if (op == "GridSample") {
      rewrite_grid_sample(node, version);
    } else if (op == "Mish") {
      return expand_mish(node, version);
    } else if (op == "Gelu") {
      return expand_gelu(node, version);
    }
    // Everything else in the table only gained element types: unchanged.
    return {};
  }

  /// Reduce*-18: the `axes` input back into the attribute (Reduce*-13, ReduceMax/Min-20 only
  /// add bool).
  void rewrite_reduce(NodeProto& node, int version) {
    if (find_attr(node, "axes"))
      refuse(node, version, "an axes attribute, which this version does not define");
    const bool noop = int_attr(node, "noop_with_empty_axes", 0) != 0;
    remove_attr(node, "noop_with_empty_axes");
    std::vector<int64_t> axes;
    if (has_input(node, 1)) {
      axes = constant_input(node, version, 1, "the axes input",
                            "the axes as an attribute, so constant axes");
      detach(node.input(1));
    }
    while (node.input_size() > 1) node.mutable_input()->RemoveLast();
    if (!axes.empty()) {
      set_ints_attr(node, "axes", axes);
    } else if (noop) {  // no axes and noop_with_empty_axes: the input unchanged
      node.set_op_type("Identity");
      node.clear_attribute();
    }
    // Else no axes: reduce over all of them, as opset 17 does without the attribute.
  }

  /// Pad-18: the `axes` input expanded into full-rank `pads`; Pad-19's `wrap` refused.
  void rewrite_pad(NodeProto& node, int version) {
    if (string_attr(node, "mode", "constant") == "wrap")
      refuse(node, version, "mode 'wrap' is not in opset 17 (added in 19)");
    if (!has_input(node, 3)) {
      trim_trailing_empty_inputs(node);
      return;
    }
    std::vector<int64_t> axes =
        constant_input(node, version, 3, "the axes input", "pads for every axis, so constant axes");
    std::vector<int64_t> pads = constant_input(node, version, 1, "the pads input",
                                               "pads for every axis, so constant pads with axes");
    const int64_t rank = rank_of(node, version, node.input(0), "expanding pads over axes");
    axes = normalised_axes(node, version, axes, rank);
    if (pads.size() != 2 * axes.size())
      refuse(node, version,
             "pads has " + std::to_string(pads.size()) + " values for " +
                 std::to_string(axes.size()) + " axes (needs twice as many)");
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    const size_t n = axes.size();
    for (size_t i = 0; i < n; ++i) {
      full[static_cast<size_t>(axes[i])] = pads[i];
      full[static_cast<size_t>(axes[i] + rank)] = pads[i + n];
    }
    detach(node.input(1));
    detach(node.input(3));
    node.set_input(1, add_int64_initializer(node.input(1) + "_all_axes", full));
    node.mutable_input()->RemoveLast();
    trim_trailing_empty_inputs(node);
  }

  /// Resize-18/19: attributes opset 13 lacks, dropped where they are their defaults.
  void rewrite_resize(NodeProto& node, int version) {
    if (version >= 19 &&
        string_attr(node, "coordinate_transformation_mode", "") == "half_pixel_symmetric")
      refuse(node, version,
             "coordinate_transformation_mode 'half_pixel_symmetric' is not in opset 17 (added "
             "in 19)");
    if (int_attr(node, "antialias", 0) != 0)
      refuse(node, version, "antialias 1 is not in opset 17 (added in 18)");
    remove_attr(node, "antialias");
    const std::string policy = string_attr(node, "keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && has_input(node, 3))
      refuse(node, version,
             "keep_aspect_ratio_policy '" + policy + "' is not in opset 17 (added in 18)");
    remove_attr(node, "keep_aspect_ratio_policy");
    if (find_attr(node, "axes")) {
      const std::vector<int64_t> axes = ints_attr(node, "axes");
      const int64_t rank = rank_of(node, version, node.input(0), "the axes attribute");
      std::vector<int64_t> all(static_cast<size_t>(rank));
      for (int64_t i = 0; i < rank; ++i) all[static_cast<size_t>(i)] = i;
      if (normalised_axes(node, version, axes, rank) != all)
        refuse(node, version,
               "axes " + list_text(axes) +
                   " (a subset or reordering of the input's axes) is not in opset 17 (added in "
                   "18)");
      remove_attr(node, "axes");
    }
  }

  /// Split-18: `num_outputs` into a constant `split` input.
  void rewrite_split(NodeProto& node, int version) {
    const AttributeProto* num = find_attr(node, "num_outputs");
    if (!num) return;  // split input or an even split into the outputs: as in opset 13
    const int64_t k = num->i();
    if (has_input(node, 1)) refuse(node, version, "both num_outputs and a split input");
    if (k < 1 || k != node.output_size())
      refuse(node, version,
             "num_outputs " + std::to_string(k) + " but " + std::to_string(node.output_size()) +
                 " outputs");
    const std::string& x = node.input(0);
    std::optional<Dims> dims = scope_.dims(x);
    int64_t axis = int_attr(node, "axis", 0);
    const std::string need = "num_outputs needs the size of axis " + std::to_string(axis) +
                             " of '" + x + "', which the model does not state";
    if (!dims) refuse(node, version, need + " (no value_info, graph input or initializer)");
    const int64_t rank = static_cast<int64_t>(dims->size());
    if (axis < -rank || axis >= rank)
      refuse(node, version,
             "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    const std::optional<int64_t> n = (*dims)[static_cast<size_t>(axis)];
    if (!n) refuse(node, version, need + " (it is symbolic)");
    const int64_t chunk = (*n + k - 1) / k;
    const int64_t last = *n - chunk * (k - 1);
    if (last < 0)
      refuse(node, version,
             "axis size " + std::to_string(*n) + " cannot be split into " + std::to_string(k) +
                 " parts of " + std::to_string(chunk));
    std::vector<int64_t> split(static_cast<size_t>(k), chunk);
    split.back() = last;
    remove_attr(node, "num_outputs");
    const std::string base = (node.name().empty() ? x : node.name()) + "_split";
    if (node.input_size() < 2) node.add_input();
    node.set_input(1, add_int64_initializer(base, split));
  }

  void drop_unit_dilations(NodeProto& node, int version) {
    for (int64_t d : ints_attr(node, "dilations"))
      if (d != 1)
        refuse(node, version,
               "dilations " + list_text(ints_attr(node, "dilations")) + " are not in opset 17");
    remove_attr(node, "dilations");
  }

  /// AveragePool/MaxPool-22 with ceil_mode: opset 22 drops a last window that would start in
  /// the right padding, which opset 17's shape rule keeps. Refused where that happens (or the
  /// input sizes are unknown), unchanged otherwise.
  void check_ceil_windows(NodeProto& node, int version) {
    if (int_attr(node, "ceil_mode", 0) == 0) return;
    const std::string need =
        "ceil_mode 1: opset 22 ignores a last window that starts in the right padding, opset "
        "17 does not; ";
    if (string_attr(node, "auto_pad", "NOTSET") != "NOTSET")
      refuse(node, version, need + "with auto_pad webtune cannot tell whether one does");
    std::optional<Dims> dims = scope_.dims(node.input(0));
    const std::vector<int64_t> kernel = ints_attr(node, "kernel_shape");
    if (!dims || dims->size() != kernel.size() + 2)
      refuse(node, version, need + "the input's shape is unknown");
    const size_t s = kernel.size();
    std::vector<int64_t> strides = ints_attr(node, "strides"), pads = ints_attr(node, "pads"),
                         dilations = ints_attr(node, "dilations");
    strides.resize(s, 1);
    pads.resize(2 * s, 0);
    dilations.resize(s, 1);
    for (size_t i = 0; i < s; ++i) {
      const std::optional<int64_t> in = (*dims)[i + 2];
      if (!in) refuse(node, version, need + "the input's spatial size is symbolic");
      const int64_t span = (kernel[i] - 1) * dilations[i] + 1;
      const int64_t padded = *in + pads[i] + pads[i + s];
      if (strides[i] <= 0 || padded < span) return;  // malformed: the checker says so
      const int64_t out = (padded - span + strides[i] - 1) / strides[i] + 1;
      if ((out - 1) * strides[i] >= *in + pads[i])
        refuse(node, version,
               need + "here the last window along spatial axis " + std::to_string(i) + " does");
    }
  }

  void rewrite_quantize(NodeProto& node, int version) {
    const bool quantize = node.op_type() == "QuantizeLinear";
    if (quantize) remove_attr(node, "saturate");  // float8 outputs only (opset 19)
    if (version < 21) return;
    if (int_attr(node, "block_size", 0) != 0)
      refuse(node, version, "blocked quantization (block_size) is not in opset 17 (added in 21)");
    remove_attr(node, "block_size");
    if (!quantize) return;
    const int64_t dtype = int_attr(node, "output_dtype", 0);
    // With a zero point its type is the output's (and must equal output_dtype); without one
    // opset 17's output is uint8.
    if (dtype != 0 && !has_input(node, 2) && dtype != TensorProto::UINT8)
      refuse(node, version,
             "output_dtype " + std::to_string(dtype) +
                 " without a zero point is not in opset 17 (its output is then uint8)");
    remove_attr(node, "output_dtype");
  }

  /// DFT-20: the `axis` input back into the attribute (default -2, the last signal axis).
  void rewrite_dft(NodeProto& node, int version) {
    int64_t axis = -2;
    if (has_input(node, 2)) {
      std::vector<int64_t> v =
          constant_input(node, version, 2, "the axis input", "the axis as an attribute");
      if (v.size() != 1) refuse(node, version, "the axis input is not a scalar");
      axis = v[0];
      detach(node.input(2));
    }
    while (node.input_size() > 2) node.mutable_input()->RemoveLast();
    trim_trailing_empty_inputs(node);
    if (axis < 0) {
      std::optional<Dims> dims = scope_.dims(node.input(0));
      if (!dims)
        refuse(node, version,
               "a negative axis needs the rank of '" + node.input(0) +
                   "', which the model does not state");
      axis += static_cast<int64_t>(dims->size());
    }
    set_int_attr(node, "axis", axis);
  }

  /// GridSample-20: the renamed modes back; 4-D input only in opset 17.
  void rewrite_grid_sample(NodeProto& node, int version) {
    if (std::optional<Dims> dims = scope_.dims(node.input(0)); dims && dims->size() != 4)
      refuse(
          node, version,
          "a rank-" + std::to_string(dims->size()) + " input (opset 17 samples 4-D inputs only)");
    const std::string mode = string_attr(node, "mode", "linear");
    // Opset 20's linear and cubic are opset 16's bilinear and bicubic (the default included).
    if (mode == "linear" || mode == "cubic") set_string_attr(node, "mode", "bi" + mode);
  }

  NodeProto make_node(const NodeProto& like, const std::string& op, std::vector<std::string> inputs,
                      const std::string& output, const std::string& suffix) {
    NodeProto n;
    n.set_op_type(op);
    if (!like.name().empty()) n.set_name(ctx_.fresh(like.name() + "_" + suffix));
    for (auto& in : inputs) n.add_input(std::move(in));
    n.add_output(output);
    return n;
  }

  std::string temp(const NodeProto& node, const std::string& suffix) {
    return ctx_.fresh(node.output(0) + "_" + suffix);
  }

  /// Mish-18: x · tanh(softplus(x)).
  std::vector<NodeProto> expand_mish(const NodeProto& node, int version) {
    if (node.input_size() != 1 || node.output_size() != 1)
      refuse(node, version, "not 1 input, 1 output");
    const std::string& x = node.input(0);
    const std::string sp = temp(node, "softplus"), th = temp(node, "tanh");
    return {make_node(node, "Softplus", {x}, sp, "softplus"),
            make_node(node, "Tanh", {sp}, th, "tanh"),
            make_node(node, "Mul", {x, th}, node.output(0), "mul")};
  }

  /// Gelu-20: 0.5 · x · (1 + erf(x / √2)), or with approximate "tanh"
  /// 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))).
  std::vector<NodeProto> expand_gelu(const NodeProto& node, int version) {
    if (node.input_size() != 1 || node.output_size() != 1)
      refuse(node, version, "not 1 input, 1 output");
    const std::string approximate = string_attr(node, "approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      refuse(node, version, "approximate '" + approximate + "' is neither none nor tanh");
    const std::string& x = node.input(0);
    std::vector<NodeProto> nodes;
    // Constants in x's element type: float32 initializers, cast like x unless x is float32.
    const bool is_float = scope_.element_type(x) == TensorProto::FLOAT;
    auto constant = [&](const std::string& what, float v) {
      std::string c = add_float_scalar(node.output(0) + "_" + what, v);
      if (is_float) return c;
      std::string cast = temp(node, what + "_cast");
      nodes.push_back(make_node(node, "CastLike", {c, x}, cast, what + "_cast"));
      return cast;
    };
    auto op = [&](const std::string& type, std::vector<std::string> in, const std::string& what) {
      std::string out = temp(node, what);
      nodes.push_back(make_node(node, type, std::move(in), out, what));
      return out;
    };
    const std::string half = constant("half", 0.5f), one = constant("one", 1.0f);
    std::string inner;
    if (approximate == "none") {
      inner = op("Erf", {op("Div", {x, constant("sqrt2", 1.4142135624f)}, "div")}, "erf");
    } else {
      const std::string cube = op("Mul", {x, op("Mul", {x, x}, "square")}, "cube");
      const std::string sum =
          op("Add", {x, op("Mul", {constant("k", 0.044715f), cube}, "kx3")}, "sum");
      inner = op("Tanh", {op("Mul", {constant("s", 0.7978845608f /* √(2/π) */), sum}, "scaled")},
                 "tanh");
    }
    const std::string half_x = op("Mul", {x, half}, "half_x");
    const std::string plus = op("Add", {inner, one}, "plus_one");
    nodes.push_back(make_node(node, "Mul", {half_x, plus}, node.output(0), "mul"));
    return nodes;
  }

  Context& ctx_;
  GraphProto& graph_;
  Scope scope_;
  int index_ = 0;
};

// ---- whole-model checks and clean-up ---------------------------------------------------------

void check_type(const TypeProto& t, const std::string& what) {
  int32_t elem = 0;
  if (t.has_tensor_type()) elem = t.tensor_type().elem_type();
  if (t.has_sparse_tensor_type()) elem = t.sparse_tensor_type().elem_type();
  if (elem > kNewestIr8ElementType)
    throw Refused(what + " has element type " + late_element_type_name(elem) +
                  ", which opset 17 and IR version 8 do not have");
  if (t.has_sequence_type()) check_type(t.sequence_type().elem_type(), what);
  if (t.has_optional_type()) check_type(t.optional_type().elem_type(), what);
  if (t.has_map_type()) check_type(t.map_type().value_type(), what);
}

void check_tensor(const TensorProto& t, const std::string& what) {
  if (t.data_type() > kNewestIr8ElementType)
    throw Refused(what + " has element type " + late_element_type_name(t.data_type()) +
                  ", which opset 17 and IR version 8 do not have");
}

/// Refuses element types IR 8 lacks anywhere in `g` (values, constants, type attributes), and
/// collects every name for fresh ones.
void scan_graph(const GraphProto& g, Context& ctx) {
  for (const auto& v : g.input()) check_type(v.type(), "graph input '" + v.name() + "'");
  for (const auto& v : g.output()) check_type(v.type(), "graph output '" + v.name() + "'");
  for (const auto& v : g.value_info()) check_type(v.type(), "value '" + v.name() + "'");
  for (const auto& t : g.initializer()) check_tensor(t, "initializer '" + t.name() + "'");
  for (const auto& v : g.input()) ctx.names.insert(v.name());
  for (const auto& v : g.output()) ctx.names.insert(v.name());
  for (const auto& v : g.value_info()) ctx.names.insert(v.name());
  for (const auto& t : g.initializer()) ctx.names.insert(t.name());
  for (const auto& t : g.sparse_initializer()) ctx.names.insert(t.values().name());
  for (const auto& node : g.node()) {
    ctx.names.insert(node.name());
    for (const auto& v : node.input()) ctx.names.insert(v);
    for (const auto& v : node.output()) ctx.names.insert(v);
    const std::string what = "an attribute of node '" + node.name() + "' (" + node.op_type() + ")";
    for (const auto& a : node.attribute()) {
      if (a.has_t()) check_tensor(a.t(), what);
      for (const auto& t : a.tensors()) check_tensor(t, what);
      if (a.type() == AttributeProto::INT && is_default_domain(node.domain()) &&
          (a.name() == "to" || a.name() == "dtype" || a.name() == "output_dtype") &&
          a.i() > kNewestIr8ElementType)
        throw Refused(what + " names element type " +
                      late_element_type_name(static_cast<int32_t>(a.i())) +
                      ", which opset 17 and IR version 8 do not have");
      if (a.has_g()) scan_graph(a.g(), ctx);
      for (const auto& body : a.graphs()) scan_graph(body, ctx);
    }
  }
}

void count_uses(const GraphProto& g, std::map<std::string, int>& uses) {
  for (const auto& node : g.node()) {
    for (const auto& v : node.input()) ++uses[v];
    for (const auto& a : node.attribute()) {
      if (a.has_g()) count_uses(a.g(), uses);
      for (const auto& body : a.graphs()) count_uses(body, uses);
    }
  }
  for (const auto& v : g.output()) ++uses[v.name()];
}

/// Removes the constants (initializers, Constant nodes) and their value_info that only the
/// rewritten nodes read.
void remove_detached(const Context& ctx, GraphProto& root) {
  if (ctx.detached.empty()) return;
  std::map<std::string, int> uses;
  count_uses(root, uses);
  for (const auto& [graph, name] : ctx.detached) {
    if (uses[name] > 0) continue;
    bool is_input = false;
    for (const auto& v : graph->input()) is_input |= v.name() == name;
    if (is_input) continue;
    auto* inits = graph->mutable_initializer();
    for (int i = inits->size() - 1; i >= 0; --i)
      if (inits->Get(i).name() == name) inits->DeleteSubrange(i, 1);
    auto* nodes = graph->mutable_node();
    for (int i = nodes->size() - 1; i >= 0; --i)
      if (nodes->Get(i).op_type() == "Constant" && nodes->Get(i).output_size() == 1 &&
          nodes->Get(i).output(0) == name)
        nodes->DeleteSubrange(i, 1);
    auto* infos = graph->mutable_value_info();
    for (int i = infos->size() - 1; i >= 0; --i)
      if (infos->Get(i).name() == name) infos->DeleteSubrange(i, 1);
    uses[name] = 1;  // a name detached twice is removed once
  }
}

bool uses_function(const GraphProto& g, const std::set<std::pair<std::string, std::string>>& fs) {
  for (const auto& node : g.node()) {
    if (fs.count({node.domain(), node.op_type()})) return true;
    for (const auto& a : node.attribute()) {
      if (a.has_g() && uses_function(a.g(), fs)) return true;
      for (const auto& body : a.graphs())
        if (uses_function(body, fs)) return true;
    }
  }
  return false;
}

}  // namespace

std::string downgrade_to_opset17(onnx::ModelProto& model) {
  try {
    int64_t opset = 0;
    for (const auto& o : model.opset_import())
      if (is_default_domain(o.domain())) opset = std::max(opset, o.version());
    if (opset <= kDowngradeTargetOpset) return "";
    if (opset > kDowngradeMaxOpset)
      return "opset " + std::to_string(opset) + " of the default domain is newer than webtune " +
             "can bring down to 17 (it reads opsets 18 to " + std::to_string(kDowngradeMaxOpset) +
             ")";
    if (!model.has_graph()) return "";  // the importer refuses it
    if (model.functions_size() > 0) {
      std::set<std::pair<std::string, std::string>> fs;
      for (const auto& f : model.functions()) fs.insert({f.domain(), f.name()});
      if (uses_function(model.graph(), fs))
        return "the model has " + std::to_string(model.functions_size()) +
               " model-local function(s) (first '" + model.functions(0).domain() + ":" +
               model.functions(0).name() + "'), which webtune does not inline or downgrade";
      model.clear_functions();  // none is called
    }
    Context ctx;
    ctx.opset = opset;
    scan_graph(model.graph(), ctx);
    GraphRewriter(ctx, *model.mutable_graph(), nullptr, "").run();
    remove_detached(ctx, *model.mutable_graph());
    for (auto& o : *model.mutable_opset_import())
      if (is_default_domain(o.domain())) o.set_version(kDowngradeTargetOpset);
    if (model.ir_version() > kDowngradeIrVersion) model.set_ir_version(kDowngradeIrVersion);
    return "";
  } catch (const Refused& e) {
    return e.what();
  }
}

}  // namespace webtune::graph::detail
