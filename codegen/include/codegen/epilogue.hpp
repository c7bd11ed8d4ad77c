/// \file epilogue.hpp
/// Epilogues: the elementwise tail a model puts after a dense or convolution layer, fused into
/// the kernel's output stage instead of run as separate passes over the output.
///
/// In every exported CNN a convolution is followed by a bias add and an activation, often by a
/// residual add (ResNet: Conv → Add → Relu; MobileNet-v2: Conv → Clip(0, 6), and Conv → Add).
/// Run apart, each costs a full read and write of the activation; TVM fuses such injective ops
/// into the producer's output stage (Chen et al., "TVM", OSDI 2018, §3 "operator fusion").
///
/// Semantics, per output element with acc the main operator's result (fp32 on devices, double in
/// the reference), c its output channel (column n of dense's C[M,N]; k of conv2d's
/// Y[N,K,OH,OW]; c of depthwise's Y[N,C,OH,OW]) and i its flat row-major index:
///   v = acc
///   if bias:                          v += bias[c]        bias: [C_out] (dense: [N])
///   if residual == kBeforeActivation: v += residual[i]    residual: the output's shape
///   v = act(v):  none: v;  relu: max(v, 0);  clip: min(max(v, clip_min), clip_max) (ONNX Clip,
///                ReLU6 = clip(0, 6));  hard_swish: v · min(max(v + 3, 0), 6) / 6 (ONNX
///                HardSwish, alpha = 1/6, beta = 0.5; Howard et al., "Searching for
///                MobileNetV3", 2019, eq. 2);  silu: v / (1 + e^−v) (x · sigmoid(x), ONNX
///                Sigmoid then Mul; Elfwing et al., "Sigmoid-Weighted Linear Units", 2018; the
///                activation of EfficientNet's and RegNet-Y's convolutions);  sigmoid:
///                1 / (1 + e^−v) (ONNX Sigmoid: squeeze-excite gates);  hard_sigmoid:
///                min(max(v + 3, 0), 6) / 6 (ONNX HardSigmoid with alpha = 1/6, beta = 0.5,
///                PyTorch's nn.Hardsigmoid: MobileNetV3's gates)
///   if residual == kAfterActivation:  v += residual[i]
/// The epilogue adds inputs after data and weight (Workload::input_count): bias if present,
/// then residual if present. FLOP counts stay those of the main operator, so GFLOP/s of fused
/// and plain kernels stay comparable.
#pragma once

#include <boost/json/fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace webtune {

enum class Activation { kNone, kRelu, kClip, kHardSwish, kSilu, kSigmoid, kHardSigmoid };

/// "none", "relu", "clip", "hard_swish", "silu", "sigmoid" or "hard_sigmoid".
std::string_view activation_name(Activation activation);

/// Where a residual input is added, relative to the activation.
enum class Residual { kNone, kBeforeActivation, kAfterActivation };

/// "none", "before_activation" or "after_activation".
std::string_view residual_name(Residual residual);

/// One epilogue; see the file comment. The default is empty (no bias, no activation, no
/// residual): a plain kernel.
struct Epilogue {
  bool bias = false;
  Activation activation = Activation::kNone;
  float clip_min = 0.0f;  ///< kClip only
  float clip_max = 6.0f;  ///< kClip only
  Residual residual = Residual::kNone;

  bool empty() const {
    return !bias && activation == Activation::kNone && residual == Residual::kNone;
  }
  /// Extra inputs it adds: bias and residual, 0 to 2.
  int extra_inputs() const { return (bias ? 1 : 0) + (residual != Residual::kNone ? 1 : 0); }

  /// The tail in op order, "" when empty, else e.g. "+bias+residual+relu", "+bias+clip(0,6)",
  /// "+bias+hard_swish+residual". Workload::key() and the CLI's inline spec use it.
  std::string suffix() const;
  /// Parses the tokens of suffix() (without the leading '+', split on '+'), in op order:
  /// "bias" first if present, then at most one activation ("relu", "relu6" = clip(0,6),
  /// "clip(MIN,MAX)", "hard_swish"), "residual" before or after it. Throws
  /// std::invalid_argument naming the token and the accepted forms.
  static Epilogue parse(const std::vector<std::string>& tokens);

  /// The epilogue applied to `acc`, in double (see the file comment); `bias` and `residual`
  /// are ignored where absent.
  double apply(double acc, double bias, double residual) const;
  /// An upper bound of |d apply / d v| over all v: 1 for none, relu, clip, sigmoid (1/4) and
  /// hard_sigmoid (1/6), 1.5 for hard_swish ((2v + 3)/6 on [−3, 3]), 1.1 for silu. The
  /// reference scales its tolerance by it.
  double lipschitz() const {
    // silu's slope peaks at 1.0998 (v ≈ 2.4).
    return activation == Activation::kHardSwish ? 1.5 : activation == Activation::kSilu ? 1.1 : 1.0;
  }

  /// Checks clip_min <= clip_max, both finite. Throws std::invalid_argument.
  void validate() const;

  /// {"bias":true,"activation":"clip","clip_min":0,"clip_max":6,"residual":"before_activation"}
  /// (clip bounds only for clip). from_json takes the same, every field optional, refuses
  /// unknown fields and values (std::invalid_argument) and validates.
  boost::json::object to_json() const;
  static Epilogue from_json(const boost::json::value& value);

  bool operator==(const Epilogue&) const = default;
};

/// GLSL ES 3.00 / 3.10 definitions of the epilogue as two overloads,
///   float webtune_epilogue(float v, float b, float r)
///   vec4  webtune_epilogue(vec4 v, vec4 b, vec4 r)
/// with b the bias and r the residual (ignored where the epilogue has none; pass 0.0). Empty
/// for an empty epilogue: emitters then store the accumulator as before, so plain kernels keep
/// their source text. Emitters load b and r themselves (textures or buffers) and call it.
std::string glsl_epilogue_functions(const Epilogue& epilogue);

/// The WGSL definitions, as glsl_epilogue_functions: `fn webtune_epilogue(v: f32, b: f32,
/// r: f32) -> f32` and `fn webtune_epilogue4(v: vec4<f32>, b: vec4<f32>, r: vec4<f32>) ->
/// vec4<f32>` (WGSL has no overloading). Empty for an empty epilogue.
std::string wgsl_epilogue_functions(const Epilogue& epilogue);

}  // namespace webtune
