/// \file workload.hpp
/// Workloads: the tensor operators webtune tunes, with exact shapes, layouts and FLOP counts.
///
/// All tensors are fp32, dense, row-major (C order). Layouts:
///  - dense:             data A[M,K] · weight B[K,N] → output C[M,N]
///  - conv2d (NCHW):     data X[N,C,H,W] ⊛ weight W[K,C,R,S] → output Y[N,K,OH,OW]
///  - depthwise_conv2d:  data X[N,C,H,W] ⊛ weight W[C,1,R,S] → output Y[N,C,OH,OW]
/// with OH = (H + 2·pad − R)/stride + 1, OW likewise, dilation 1 and symmetric zero padding.
/// FLOPs count a multiply-add as 2 (as ../shared/workloads.md and AutoTVM do).
///
/// Bounds. Every Workload is validated (validate()) wherever one is made from text: the inline
/// CLI spec, workload JSON files, MeasureInput JSON that agents receive over the network, and
/// records read back from SQLite or AutoTVM logs. Besides positivity (dimensions and strides
/// >= 1, pads >= 0, output dimensions >= 1) it enforces
///  - each dimension (M, N, K; N, C, H, W, K, R, S), stride and pad <= kMaxWorkloadDim = 2^24;
///  - each tensor (data, weight, output) <= kMaxTensorElements = 2^28 elements (1 GiB of fp32),
///    its element count computed with overflow checks.
/// These keep all index arithmetic far from overflow: a flat index into any tensor is < 2^28,
/// a padded spatial coordinate < H + 2·pad <= 3·2^24 < 2^26, so the 32-bit ints of GLSL, WGSL
/// and wasm32 kernels and the int64 products on the host (FLOPs <= 2^57) never wrap. Real models
/// sit far inside them: ResNet-18/50, MobileNet and VGG-16 layers (the largest tensor, VGG-16's
/// fc6 weight, 25088·4096 = 1.03·10^8 elements; its first conv output 64·224·224 = 3.2·10^6)
/// and dense 4096³ (1.7·10^7 per tensor). A tensor at the limit takes 1 GiB on the host for its
/// reference inputs (reference.hpp) and as much on the device.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/epilogue.hpp"

namespace webtune {

/// The largest dimension, stride or pad a Workload accepts (2^24 = 16,777,216).
inline constexpr int64_t kMaxWorkloadDim = int64_t{1} << 24;
/// The largest tensor (data, weight or output) a Workload accepts, in elements (2^28 =
/// 268,435,456: 1 GiB of fp32).
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 28;

enum class OpKind { kDense, kConv2d, kDepthwiseConv2d };

/// "dense", "conv2d" or "depthwise_conv2d".
std::string_view op_name(OpKind op);

/// One operator instance with concrete shapes. Fields that an operator does not use stay 0
/// (dense uses m, n, k; the convolutions use the rest).
struct Workload {
  OpKind op = OpKind::kDense;
  std::string name;  ///< optional human name, e.g. "C2" for a ResNet-18 task

  // dense
  int64_t m = 0, n = 0, k = 0;

  // conv2d / depthwise_conv2d
  int64_t batch = 0, in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0;  ///< equals in_channels for depthwise_conv2d
  int64_t kernel_h = 0, kernel_w = 0, stride = 1, pad = 0;

  /// The fused tail (bias, activation, residual; epilogue.hpp). Empty for a plain kernel.
  Epilogue epilogue;

  /// Factories: the workload with these shapes, validated (std::invalid_argument as validate()).
  static Workload dense(int64_t m, int64_t n, int64_t k, std::string name = {});
  static Workload conv2d(int64_t batch, int64_t in_channels, int64_t height, int64_t width,
                         int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad,
                         std::string name = {});
  static Workload depthwise_conv2d(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                   int64_t kernel, int64_t stride, int64_t pad,
                                   std::string name = {});

  /// Output height and width, (H + 2·pad − R)/stride + 1; meaningful for a validated workload.
  int64_t out_h() const;
  int64_t out_w() const;

  /// Shapes of the two inputs (0: data, 1: weight) and of the output, in the layouts above.
  std::vector<int64_t> data_shape() const;
  std::vector<int64_t> weight_shape() const;
  std::vector<int64_t> output_shape() const;
  /// Inputs in binding order: 0 data, 1 weight, then the epilogue's bias ([C_out]: N for
  /// dense, K for conv2d, C for depthwise) if present, then its residual (the output's shape) if
  /// present. input_count() is 2 + epilogue.extra_inputs().
  int input_count() const { return 2 + epilogue.extra_inputs(); }
  /// Shape of input `index` (see input_count); throws std::out_of_range otherwise.
  std::vector<int64_t> input_shape(int index) const;
  /// "data", "weight", "bias" or "residual"; throws std::out_of_range like input_shape.
  std::string input_name(int index) const;
  /// Elements of input `index`.
  int64_t input_size(int index) const;
  /// Output channels: N for dense, K for conv2d, C for depthwise_conv2d (the bias length).
  int64_t output_channels() const { return op == OpKind::kDense ? n : out_channels; }

  int64_t data_size() const;    ///< elements
  int64_t weight_size() const;  ///< elements
  int64_t output_size() const;  ///< elements
  /// Length of the reduction behind one output: K for dense, C·R·S for conv2d, R·S depthwise.
  int64_t reduction_size() const;

  /// Floating-point operations, a multiply-add counted as 2: 2·M·N·K for dense,
  /// 2·N·K·OH·OW·C·R·S for conv2d, 2·N·C·OH·OW·R·S for depthwise_conv2d.
  double flops() const;

  /// A stable identifier of the shapes and the epilogue, e.g. "dense_512_512_512" or
  /// "conv2d_1_64_56_56_64_3x3_s1_p1+bias+relu" (epilogue.suffix() appended; plain workloads
  /// keep the keys they had before epilogues existed); the name is not part of it.
  std::string key() const;

  /// Checks the bounds in the file comment. Throws std::invalid_argument whose message names
  /// the field, its value and the limit, e.g. "workload: C = 1000000000 is above the limit of
  /// 16777216 (2^24)" or "workload: the data tensor [1,4096,4096,4096] has
  /// 68719476736 elements, above the limit of 268435456 (2^28, 1 GiB of fp32)".
  void validate() const;

  /// JSON form: {"op":"conv2d","name":"C2","N":1,"C":64,"H":56,"W":56,"K":64,"R":3,"S":3,
  /// "stride":1,"pad":1} or {"op":"dense","M":..,"N":..,"K":..}, plus "epilogue"
  /// (Epilogue::to_json) when the epilogue is not empty. from_json throws
  /// std::invalid_argument on a missing or bad field and validates the result (validate()).
  boost::json::object to_json() const;
  static Workload from_json(const boost::json::value& value);
};

/// The largest "occurrences" count a workload file task may give.
inline constexpr int64_t kMaxOccurrences = 1'000'000;

/// Reads a workload file: {"name": "...", "tasks": [workload, ...]} (each task as
/// Workload::to_json, plus an optional "occurrences" count in [1, kMaxOccurrences]), or a single
/// workload object. The file is read with json::read_file (a regular file of at most
/// json::kMaxFileBytes). Throws std::runtime_error when the file cannot be read or is not JSON,
/// and std::invalid_argument, prefixed with the path, when a task is malformed or out of bounds.
struct WorkloadFileTask {
  Workload workload;
  int occurrences = 1;  ///< how often the task appears in its network
};
std::vector<WorkloadFileTask> load_workload_file(const std::string& path);

/// Resolves a workload argument as the CLI takes it:
///  - a workload file path (see load_workload_file): all its tasks;
///  - "dense:M,N,K", "conv2d:N,C,H,W,K,R,stride,pad", "depthwise_conv2d:N,C,H,W,R,stride,pad":
///    one task with those shapes, optionally followed by an epilogue in op order
///    (Epilogue::parse), e.g. "conv2d:1,64,56,56,64,3,1,1+bias+residual+relu".
/// `names` (comma-separated, e.g. "C2,C4") keeps only the tasks of those names, in file order.
/// Throws std::invalid_argument (or std::runtime_error for unreadable files) with a message that
/// shows the accepted forms, or names the field out of bounds (see validate()).
std::vector<WorkloadFileTask> resolve_workloads(const std::string& spec,
                                                const std::string& names = {});

/// The tasks of `tasks` named in `names` (comma-separated), in the order named; all of them when
/// `names` is empty. Throws std::invalid_argument naming a name no task has, and `source`.
std::vector<WorkloadFileTask> pick_tasks(std::vector<WorkloadFileTask> tasks,
                                         const std::string& names, const std::string& source);

}  // namespace webtune
