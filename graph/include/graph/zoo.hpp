#pragma once
/// \file zoo.hpp
/// A model zoo of standard architectures written by webtune itself, with seeded weights, so that
/// a model job runs on a machine with nothing downloaded (as TVM's
/// `tvm.relay.testing.resnet.get_workload` builds ResNet in Relay).
///
/// Each model is the ONNX graph that PyTorch's exporter (torch.onnx.export, opset 13, constant
/// folding on) writes for torchvision's architecture in eval mode, BatchNorm folded into the
/// preceding Conv: node for node the same op types, attributes, weight shapes and wiring as
/// ../shared/models/resnet18.onnx and mobilenet_v2.onnx (see docs/graph.md, "Model zoo"), so both
/// import to the same tuning tasks. Only the weights differ: drawn from splitmix64
/// (codegen/seeded_random.hpp) with He-like scales, not trained.
///
/// Model format: ONNX IR version 7, default-domain opset 13; input "input" [batch, 3, 224, 224]
/// float32 NCHW; output "logits" [batch, 1000] float32; weights are initializers (float32,
/// little-endian raw_data), conv weights OIHW, the classifier's Gemm B [1000, features] with
/// transB = 1; ReLU6 is Clip with min 0 and max 6 as Constant-node inputs (opset-13 style).

#include <cstdint>
#include <string>
#include <vector>

namespace webtune::graph {

/// Names of the zoo's architectures: "resnet18", "mobilenet_v2".
const std::vector<std::string>& zoo_models();

/// The architecture `name` as a serialized ONNX ModelProto (see the file comment), weights drawn
/// for `seed`: the same (name, seed, batch) gives bit-identical bytes on every platform.
///
/// ResNet-18 (He et al., CVPR 2016; torchvision.models.resnet18): 7×7/2 stem conv 3→64 pad 3,
/// Relu, MaxPool 3×3/2 pad 1, four stages of two BasicBlocks (64, 128, 256, 512 channels;
/// stride 2 and a 1×1/2 downsample conv in the first block of stages 2-4), each block
/// Conv3×3-Relu-Conv3×3, Add of the identity or downsample, Relu; GlobalAveragePool; Flatten;
/// Gemm 512→1000. Ops: Conv 20, Relu 17, Add 8, MaxPool 1, GlobalAveragePool 1, Flatten 1,
/// Gemm 1; 11,684,712 parameters.
///
/// MobileNet-v2 (Sandler et al., CVPR 2018; torchvision.models.mobilenet_v2): stem Conv 3×3/2
/// 3→32 + ReLU6; 17 inverted residual blocks with (t, c, n, s) = (1,16,1,1), (6,24,2,2),
/// (6,32,3,2), (6,64,4,2), (6,96,3,1), (6,160,3,2), (6,320,1,1): expansion Conv 1×1 + ReLU6
/// (absent when t = 1), depthwise Conv 3×3 (group = channels, stride s in a stage's first block)
/// + ReLU6, projection Conv 1×1 without activation, Add of the block's input when the stride is
/// 1 and the channels stay; Conv 1×1 320→1280 + ReLU6; GlobalAveragePool; Flatten; Gemm
/// 1280→1000 (torchvision's Dropout is the identity in the export). Ops: Conv 52 (17
/// depthwise), Clip 35, Add 10, GlobalAveragePool 1, Flatten 1, Gemm 1 (and the Clips' 70
/// Constant nodes); 3,487,816 parameters.
///
/// Throws std::invalid_argument naming the known models for an unknown `name`, and for
/// `batch` < 1 or > kMaxZooBatch.
std::string zoo_model(const std::string& name, uint64_t seed = 1, int64_t batch = 1);

/// The number of weights (initializer elements) of zoo model `name`, without drawing them:
/// 11,684,712 for resnet18, 3,487,816 for mobilenet_v2 (torchvision's parameter counts less
/// the BatchNorm parameters folded away: each BatchNorm's 2·C become its Conv's C biases).
/// Throws std::invalid_argument for an unknown `name`, as zoo_model does.
int64_t zoo_parameter_count(const std::string& name);

/// The largest batch zoo_model writes (the dimension is only metadata in the file; the limit
/// keeps activation sizes of a model run far from int64 overflow).
inline constexpr int64_t kMaxZooBatch = 4096;

}  // namespace webtune::graph
