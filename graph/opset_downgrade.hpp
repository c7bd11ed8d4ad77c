#pragma once
/// \file opset_downgrade.hpp
/// Rewrites a model of default-domain opset 18 to 22 into opset 17, the newest that Debian's
/// libonnx 1.12 (its checker, schemas and shape inference) knows.
///
/// PyTorch's dynamo exporter (`torch.onnx.export(..., dynamo=True)`, PyTorch 2.11) writes
/// opset 18 whatever `opset_version` asks for, and IR version 10. Between opsets 17 and 22
/// most operators only gained element types (bfloat16, float8, int4) that webtune does not
/// carry; a few moved an attribute to an input or gained an attribute. The rules below are the
/// ONNX operator changelog's (onnx/onnx docs/Changelog.md, "Version 18 ... 22 of the default
/// ONNX operator set"), each operator's newest version at or below the model's opset compared
/// with its newest at or below 17:
///
/// - Reduce{L1,L2,LogSum,LogSumExp,Max,Mean,Min,Prod,SumSquare}-18 (Max and Min -20: bool
///   added): the `axes` input becomes the `axes` attribute when it is constant (an
///   initializer or a Constant node's output); no axes (or an empty constant) reduces over all
///   axes, or is an Identity when `noop_with_empty_axes` is 1; axes computed at run time are
///   refused.
/// - Pad-18: a constant `axes` input is expanded into full-rank constant `pads` (the rank from
///   the model's value_info, graph inputs or initializers); Pad-19 `wrap` mode is refused.
/// - Resize-18/19: `antialias` 0, no `axes` (or all of them in order) and
///   `keep_aspect_ratio_policy` stretch are dropped, anything else refused; Resize-19's
///   `half_pixel_symmetric` coordinate mode is refused.
/// - Split-18: `num_outputs` becomes a constant `split` input of ceil(n / k)-sized parts, the
///   last smaller, n the split axis's size from the model's shapes (refused when unknown).
/// - ScatterElements/ScatterND-18: `reduction` max and min are refused.
/// - LpPool-18: `ceil_mode` 0 and unit `dilations` are dropped, others refused; AveragePool-19:
///   unit `dilations` dropped; AveragePool/MaxPool-22 with `ceil_mode` 1 are refused (22
///   changed which windows ceil mode keeps).
/// - Cast/CastLike-19 `saturate`, QuantizeLinear-19 `saturate`, Quantize/DequantizeLinear-21
///   `block_size` 0 and QuantizeLinear-21 `output_dtype` (with a zero point, or uint8) are
///   dropped (they matter only for float8 / int4 / blocked quantization).
/// - DFT-20: a constant `axis` input becomes the attribute (default -2); GridSample-20: modes
///   `linear` / `cubic` become `bilinear` / `bicubic` (4-D input only).
/// - Mish-18 becomes x · Tanh(Softplus(x)); Gelu-20 becomes its erf (or tanh) formula.
/// - Operators whose only changes after 17 are added element types (OptionalGetElement,
///   OptionalHasElement-18; Cast, Constant, Equal, Identity, If, Loop, Scan, Reshape, Shape,
///   Size-19; ConstantOfShape, IsInf, IsNaN-20; their -21 and Flatten, Squeeze, Transpose,
///   Unsqueeze, QLinearMatMul-21; the operators of 22, bfloat16 added, but for the pool rule
///   above) are unchanged: a model using an added type IR 8 lacks is refused by the
///   element-type check, bfloat16 by the importer.
/// - Operators new after 17 (BitwiseAnd/Not/Or/Xor, CenterCropPad, Col2Im,
///   GroupNormalization, DeformConv, AffineGrid, ImageDecoder, the string operators ...) and
///   any operator libonnx 1.12 does not know at opset 17 are refused, naming the node and the
///   operator with its version.
///
/// The IR version becomes 8 (libonnx 1.12's) when it is higher; a model that uses what IR 9+
/// added (float8, int4, uint4, float4 element types) or has model-local functions is refused.
/// Nodes of If / Loop / Scan bodies are rewritten as well. Private to graph/ (the importer's
/// implementation).

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace webtune::graph::detail {

/// The opset a model is rewritten into (libonnx 1.12's newest).
inline constexpr int64_t kDowngradeTargetOpset = 17;
/// The newest default-domain opset downgrade_to_opset17 reads.
inline constexpr int64_t kDowngradeMaxOpset = 22;
/// The IR version a downgraded model gets (libonnx 1.12's IR_VERSION).
inline constexpr int64_t kDowngradeIrVersion = 8;

/// Rewrites `model`, in place, from its default-domain opset (18 to kDowngradeMaxOpset) into
/// opset 17: every default-domain node whose operator schema changed after 17 is rewritten by
/// the rules in this file's summary, new constants are added as initializers of the node's
/// graph, constants only the old form used are removed, the default-domain opset_import
/// becomes 17 and the IR version at most 8. A model of opset 17 or lower, or without a
/// default-domain opset, is left as it is. Returns "" on success, else why the model cannot be
/// rewritten, naming the node (its name, else its index) and the operator with its version,
/// e.g. "node 'n3' (Split-18): num_outputs needs the size of axis 0 of 'x', which the model
/// does not state". On failure the model may be half rewritten: use it only on success.
/// Throws nothing of its own.
std::string downgrade_to_opset17(onnx::ModelProto& model);

}  // namespace webtune::graph::detail
