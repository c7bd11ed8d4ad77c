/// \file zoo.cpp
/// The zoo's architectures (zoo.hpp) written as ONNX ModelProtos node by node, in the order,
/// with the names and the attributes that PyTorch 2.11's TorchScript exporter gives
/// torchvision's modules (names like "/layer1/layer1.0/conv1/Conv", outputs "<node>_output_0",
/// Clip bounds from two Constant nodes each); weights named after torchvision's state_dict
/// ("layer1.0.conv1.weight", and the ".bias" that BatchNorm folding adds).
///
/// Weights (docs/graph.md, "Model zoo", says why these scales):
///  - initializer k (0-based, in the file's order) draws from splitmix64 started at
///    state = seed ^ ((k + 2) · 0xD1B54A32D192ED03), the stream of codegen/seeded_random.hpp's
///    seeded_tensor(seed, k + 2, ·) (ids 0 and 1 stay with a measurement's data and weight), each
///    output mapped to u in [-1, 1) by splitmix64_to_float;
///  - a weight element is (u1 + u2 + u3 + u4) · std · √3 / 2 (Irwin-Hall: a bell-shaped
///    distribution of standard deviation `std`, bounded by ±3.46 std), with std = gain ·
///    √(2 / fan_in) (He et al., ICCV 2015), fan_in = C/group · kH · kW for a conv and the
///    input features for the Gemm;
///  - a bias element is u · kBiasBound.
/// Every step is IEEE arithmetic in a fixed order (sums in double, exact; one rounding to
/// float), so the bytes are the same on every platform.

#include "graph/zoo.hpp"

#include <onnx/onnx_pb.h>

#include <bit>
#include <cmath>
#include <stdexcept>

#include "codegen/seeded_random.hpp"

namespace webtune::graph {
namespace {

/// Bias elements are uniform in [-kBiasBound, kBiasBound): small against activations of order
/// 1, but not zero, so a kernel that drops or misplaces the bias is caught by a model check.
constexpr double kBiasBound = 0.1;

/// He gain 1 (std √(2/fan_in)) keeps the second moment of activations through Conv + Relu.
/// Convs whose output is added to a residual stream without an activation in between get a
/// smaller gain, so that the sum of the stream and the branch does not grow block after block
/// (docs/graph.md, "Model zoo", has the measured activation scales).
constexpr double kReluGain = 1.0;
/// ResNet's stem conv: the 3×3 MaxPool after it doubles the scale (the largest of 9 values).
constexpr double kResNetStemGain = 0.5;
/// ResNet's second conv of a BasicBlock (its output joins the identity before the Relu).
constexpr double kResNetBranchGain = 0.5;
/// ResNet's 1×1 downsample conv (the shortcut of a stage's first block; linear).
constexpr double kResNetDownsampleGain = 0.7071067811865476;  // 1/√2: unit gain, linear
/// MobileNet-v2's 1×1 projection conv (linear bottleneck): unit gain in a stage's first block,
/// which starts the residual stream, and less in the blocks whose output is added to it.
constexpr double kProjectionGain = 0.7071067811865476;
constexpr double kResidualProjectionGain = 0.5;
/// The classifier's Gemm (linear).
constexpr double kClassifierGain = 0.7071067811865476;

constexpr uint64_t kStreamMultiplier = 0xD1B54A32D192ED03ull;  // as seeded_tensor
constexpr int kFirstStream = 2;

/// One float32 initializer and how to draw it.
struct Param {
  onnx::TensorProto* tensor;
  int64_t elements;
  bool bias;
  double std;  ///< weights: the standard deviation; biases: unused
};

/// An activation tensor while the graph is written: its name and NCHW / NC shape.
struct Value {
  std::string name;
  int64_t c = 0, h = 1, w = 1;
};

void set_ints(onnx::NodeProto& node, const std::string& key, std::vector<int64_t> values) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(key);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a.add_ints(v);
}

void set_int(onnx::NodeProto& node, const std::string& key, int64_t value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(key);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void set_float(onnx::NodeProto& node, const std::string& key, float value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(key);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
}

/// float32 values as ONNX raw_data: little-endian whatever the host's byte order.
std::string raw_floats(const std::vector<float>& values) {
  std::string raw(values.size() * 4, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t bits = std::bit_cast<uint32_t>(values[i]);
    for (int b = 0; b < 4; ++b) raw[i * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xFF);
  }
  return raw;
}

void set_tensor_type(onnx::ValueInfoProto& info, const std::string& name,
                     const std::vector<int64_t>& shape) {
  info.set_name(name);
  onnx::TypeProto_Tensor& t = *info.mutable_type()->mutable_tensor_type();
  t.set_elem_type(onnx::TensorProto_DataType_FLOAT);
  for (int64_t d : shape) t.mutable_shape()->add_dim()->set_dim_value(d);
}

/// Writes one model: nodes as the exporter orders them, parameters registered on the way and
/// drawn by serialize().
class Builder {
 public:
  explicit Builder(int64_t batch) {
    model_.set_ir_version(7);
    model_.set_producer_name("webtune zoo");
    model_.set_producer_version("1");
    onnx::OperatorSetIdProto& opset = *model_.add_opset_import();
    opset.set_domain("");
    opset.set_version(13);
    graph_ = model_.mutable_graph();
    graph_->set_name("main_graph");
    set_tensor_type(*graph_->add_input(), "input", {batch, 3, 224, 224});
    set_tensor_type(*graph_->add_output(), "logits", {batch, 1000});
  }

  Value input() const { return {"input", 3, 224, 224}; }

  /// Conv with bias: `scope` is the exporter's node scope ("/layer1/layer1.0/conv1"), `module`
  /// the state_dict prefix ("layer1.0.conv1"). Square kernel, pad kernel/2 as torchvision's.
  Value conv(const Value& x, const std::string& scope, const std::string& module, int64_t out,
             int64_t kernel, int64_t stride, int64_t group, double gain) {
    if (x.c % group != 0 || out % group != 0)
      throw std::logic_error(scope + ": channels not divisible by group");  // a zoo bug
    const int64_t pad = kernel / 2;
    const int64_t fan_in = x.c / group * kernel * kernel;
    const std::string weight = module + ".weight", bias = module + ".bias";
    add_param(weight, {out, x.c / group, kernel, kernel}, false, gain * std::sqrt(2.0 / fan_in));
    add_param(bias, {out}, true, 0);
    onnx::NodeProto& node = add_node("Conv", scope + "/Conv", {x.name, weight, bias});
    set_ints(node, "dilations", {1, 1});
    set_int(node, "group", group);
    set_ints(node, "kernel_shape", {kernel, kernel});
    set_ints(node, "pads", {pad, pad, pad, pad});
    set_ints(node, "strides", {stride, stride});
    return {node.output(0), out, (x.h + 2 * pad - kernel) / stride + 1,
            (x.w + 2 * pad - kernel) / stride + 1};
  }

  Value relu(const Value& x, const std::string& scope) {
    return same_shape(x, add_node("Relu", scope + "/Relu", {x.name}));
  }

  /// torch.nn.ReLU6 as the opset-13 exporter writes it: Clip(x, Constant 0, Constant 6).
  Value relu6(const Value& x, const std::string& scope) {
    const std::string low = scalar_constant(scope + "/Constant", 0.0f);
    const std::string high = scalar_constant(scope + "/Constant_1", 6.0f);
    return same_shape(x, add_node("Clip", scope + "/Clip", {x.name, low, high}));
  }

  Value add(const Value& a, const Value& b, const std::string& scope) {
    if (a.c != b.c || a.h != b.h || a.w != b.w)
      throw std::logic_error(scope + ": Add of different shapes");  // a zoo bug
    return same_shape(a, add_node("Add", scope + "/Add", {a.name, b.name}));
  }

  /// torch.nn.MaxPool2d(kernel, stride, pad) (ceil_mode off).
  Value max_pool(const Value& x, const std::string& scope, int64_t kernel, int64_t stride,
                 int64_t pad) {
    onnx::NodeProto& node = add_node("MaxPool", scope + "/MaxPool", {x.name});
    set_int(node, "ceil_mode", 0);
    set_ints(node, "dilations", {1, 1});
    set_ints(node, "kernel_shape", {kernel, kernel});
    set_ints(node, "pads", {pad, pad, pad, pad});
    set_ints(node, "strides", {stride, stride});
    return {node.output(0), x.c, (x.h + 2 * pad - kernel) / stride + 1,
            (x.w + 2 * pad - kernel) / stride + 1};
  }

  /// AdaptiveAvgPool2d(1) + torch.flatten(x, 1) + Linear(C, classes), the model's end: the
  /// Gemm writes "logits".
  void classifier(const Value& x, const std::string& pool_scope, const std::string& fc_scope,
                  const std::string& fc_module) {
    const onnx::NodeProto& pool =
        add_node("GlobalAveragePool", pool_scope + "/GlobalAveragePool", {x.name});
    onnx::NodeProto& flatten = add_node("Flatten", "/Flatten", {pool.output(0)});
    set_int(flatten, "axis", 1);
    const std::string weight = fc_module + ".weight", bias = fc_module + ".bias";
    add_param(weight, {1000, x.c}, false, kClassifierGain * std::sqrt(2.0 / x.c));
    add_param(bias, {1000}, true, 0);
    onnx::NodeProto& gemm = add_node("Gemm", fc_scope + "/Gemm", {flatten.output(0), weight, bias});
    gemm.set_output(0, "logits");
    set_float(gemm, "alpha", 1.0f);
    set_float(gemm, "beta", 1.0f);
    set_int(gemm, "transB", 1);
  }

  int64_t parameter_count() const {
    int64_t n = 0;
    for (const Param& p : params_) n += p.elements;
    return n;
  }

  /// Draws every parameter for `seed` and serializes the model.
  std::string serialize(const std::string& name, uint64_t seed) {
    model_.set_doc_string("webtune zoo " + name + ", seed " + std::to_string(seed) +
                          ": torchvision's architecture as PyTorch exports it (BatchNorm folded), "
                          "seeded untrained weights");
    const double irwin_hall = std::sqrt(3.0) / 2.0;  // 1 / std of a sum of four U[-1, 1)
    for (size_t k = 0; k < params_.size(); ++k) {
      const Param& p = params_[k];
      uint64_t state = seed ^ (static_cast<uint64_t>(k + kFirstStream) * kStreamMultiplier);
      auto next = [&state] {
        return static_cast<double>(splitmix64_to_float(splitmix64_next(state)));
      };
      std::vector<float> values(static_cast<size_t>(p.elements));
      if (p.bias) {
        for (float& v : values) v = static_cast<float>(next() * kBiasBound);
      } else {
        const double scale = p.std * irwin_hall;
        for (float& v : values) {
          // Four draws in a fixed order; the sum of multiples of 2^-23 below 4 is exact.
          const double u1 = next(), u2 = next(), u3 = next(), u4 = next();
          v = static_cast<float>((u1 + u2 + u3 + u4) * scale);
        }
      }
      p.tensor->set_raw_data(raw_floats(values));
    }
    std::string bytes;
    if (!model_.SerializeToString(&bytes))
      throw std::runtime_error("zoo: the ONNX model does not serialize");
    return bytes;
  }

 private:
  onnx::NodeProto& add_node(const std::string& op, const std::string& name,
                            const std::vector<std::string>& inputs) {
    onnx::NodeProto& node = *graph_->add_node();
    node.set_op_type(op);
    node.set_name(name);
    for (const std::string& i : inputs) node.add_input(i);
    node.add_output(name + "_output_0");
    return node;
  }

  Value same_shape(const Value& x, const onnx::NodeProto& node) {
    return {node.output(0), x.c, x.h, x.w};
  }

  /// A Constant node holding a float32 scalar; returns its output's name.
  std::string scalar_constant(const std::string& name, float value) {
    onnx::NodeProto& node = add_node("Constant", name, {});
    onnx::AttributeProto& a = *node.add_attribute();
    a.set_name("value");
    a.set_type(onnx::AttributeProto::TENSOR);
    a.mutable_t()->set_data_type(onnx::TensorProto_DataType_FLOAT);
    a.mutable_t()->set_raw_data(raw_floats({value}));
    return node.output(0);
  }

  void add_param(const std::string& name, const std::vector<int64_t>& dims, bool bias, double std) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    int64_t elements = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      elements *= d;
    }
    params_.push_back({t, elements, bias, std});
  }

  onnx::ModelProto model_;
  onnx::GraphProto* graph_;
  std::vector<Param> params_;
};

/// torchvision.models.resnet18 (BasicBlock, layers [2, 2, 2, 2]) as exported.
void build_resnet18(Builder& b) {
  // The stem's conv is 7×7/2 pad 3 (kernel/2, as conv() pads).
  Value x = b.conv(b.input(), "/conv1", "conv1", 64, 7, 2, 1, kResNetStemGain);
  x = b.relu(x, "/relu");
  x = b.max_pool(x, "/maxpool", 3, 2, 1);
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    const std::string layer = "layer" + std::to_string(stage + 1);
    for (int block = 0; block < 2; ++block) {
      const std::string module = layer + "." + std::to_string(block);
      const std::string scope = "/" + layer + "/" + module;
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      Value y =
          b.conv(x, scope + "/conv1", module + ".conv1", widths[stage], 3, stride, 1, kReluGain);
      y = b.relu(y, scope + "/relu");
      y = b.conv(y, scope + "/conv2", module + ".conv2", widths[stage], 3, 1, 1, kResNetBranchGain);
      // The exporter writes the downsample after conv2 (BasicBlock.forward's order).
      Value identity = x;
      if (stride != 1 || x.c != widths[stage])
        identity = b.conv(x, scope + "/downsample/downsample.0", module + ".downsample.0",
                          widths[stage], 1, stride, 1, kResNetDownsampleGain);
      x = b.relu(b.add(y, identity, scope), scope + "/relu_1");
    }
  }
  b.classifier(x, "/avgpool", "/fc", "fc");
}

/// torchvision.models.mobilenet_v2 (width 1.0, round_nearest 8) as exported.
void build_mobilenet_v2(Builder& b) {
  struct Setting {
    int64_t t, c, n, s;
  };
  const Setting settings[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                              {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  Value x = b.conv(b.input(), "/features/features.0/features.0.0", "features.0.0", 32, 3, 2, 1,
                   kReluGain);
  x = b.relu6(x, "/features/features.0/features.0.2");
  int index = 1;
  for (const Setting& s : settings) {
    for (int64_t i = 0; i < s.n; ++i, ++index) {
      const std::string f = "features." + std::to_string(index);
      const std::string scope = "/features/" + f + "/conv";
      const std::string module = f + ".conv";
      const int64_t stride = i == 0 ? s.s : 1;
      const int64_t hidden = x.c * s.t;
      // InvertedResidual.conv: [expansion ConvBNReLU6 if t != 1], depthwise ConvBNReLU6,
      // projection Conv (its BatchNorm folded); Sequential indices as torchvision numbers them.
      Value y = x;
      int part = 0;
      if (s.t != 1) {
        const std::string p = std::to_string(part++);
        y = b.conv(y, scope + "/conv." + p + "/conv." + p + ".0", module + "." + p + ".0", hidden,
                   1, 1, 1, kReluGain);
        y = b.relu6(y, scope + "/conv." + p + "/conv." + p + ".2");
      }
      const std::string d = std::to_string(part++);
      y = b.conv(y, scope + "/conv." + d + "/conv." + d + ".0", module + "." + d + ".0", hidden, 3,
                 stride, hidden, kReluGain);
      y = b.relu6(y, scope + "/conv." + d + "/conv." + d + ".2");
      const std::string p = std::to_string(part++);
      const bool residual = stride == 1 && x.c == s.c;
      y = b.conv(y, scope + "/conv." + p, module + "." + p, s.c, 1, 1, 1,
                 residual ? kResidualProjectionGain : kProjectionGain);
      // x + self.conv(x): the block's input is Add's first operand.
      if (residual) y = b.add(x, y, "/features/" + f);
      x = y;
    }
  }
  x = b.conv(x, "/features/features.18/features.18.0", "features.18.0", 1280, 1, 1, 1, kReluGain);
  x = b.relu6(x, "/features/features.18/features.18.2");
  b.classifier(x, "", "/classifier/classifier.1", "classifier.1");
}

void build(const std::string& name, Builder& b) {
  if (name == "resnet18") return build_resnet18(b);
  if (name == "mobilenet_v2") return build_mobilenet_v2(b);
  std::string known;
  for (const std::string& m : zoo_models()) known += (known.empty() ? "" : ", ") + m;
  throw std::invalid_argument("unknown zoo model '" + name + "'; the zoo has: " + known);
}

}  // namespace

const std::vector<std::string>& zoo_models() {
  static const std::vector<std::string> models = {"resnet18", "mobilenet_v2"};
  return models;
}

std::string zoo_model(const std::string& name, uint64_t seed, int64_t batch) {
  if (batch < 1 || batch > kMaxZooBatch)
    throw std::invalid_argument("zoo model '" + name + "': batch " + std::to_string(batch) +
                                " is outside 1 to " + std::to_string(kMaxZooBatch));
  Builder b(batch);
  build(name, b);
  return b.serialize(name, seed);
}

int64_t zoo_parameter_count(const std::string& name) {
  Builder b(1);
  build(name, b);
  return b.parameter_count();
}

}  // namespace webtune::graph
