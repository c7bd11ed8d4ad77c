/// \file workload.hpp
/// Workloads: the tensor operators webtune tunes, with exact shapes, layouts and FLOP counts.
///
/// All tensors are fp32, dense, row-major (C order). Layouts:
///  - dense:             data A[M,K] · weight B[K,N] → output C[M,N]
///  - conv2d (NCHW):     data X[N,C,H,W] ⊛ weight W[K,C,R,S] → output Y[N,K,OH,OW]
///  - depthwise_conv2d:  data X[N,C,H,W] ⊛ weight W[C,1,R,S] → output Y[N,C,OH,OW]
/// with OH = (H + 2·pad − R)/stride + 1, OW likewise, dilation 1 and symmetric zero padding.
/// FLOPs count a multiply-add as 2 (as ../shared/workloads.md and AutoTVM do).
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace webtune {

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

  static Workload dense(int64_t m, int64_t n, int64_t k, std::string name = {});
  static Workload conv2d(int64_t batch, int64_t in_channels, int64_t height, int64_t width,
                         int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad,
                         std::string name = {});
  static Workload depthwise_conv2d(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                   int64_t kernel, int64_t stride, int64_t pad,
                                   std::string name = {});

  int64_t out_h() const;
  int64_t out_w() const;

  /// Shapes of the two inputs (0: data, 1: weight) and of the output, in the layouts above.
  std::vector<int64_t> data_shape() const;
  std::vector<int64_t> weight_shape() const;
  std::vector<int64_t> output_shape() const;
  /// Shape of input `index` (0 data, 1 weight); throws std::out_of_range otherwise.
  std::vector<int64_t> input_shape(int index) const;

  int64_t data_size() const;    ///< elements
  int64_t weight_size() const;  ///< elements
  int64_t output_size() const;  ///< elements
  /// Length of the reduction behind one output: K for dense, C·R·S for conv2d, R·S depthwise.
  int64_t reduction_size() const;

  /// Floating-point operations, a multiply-add counted as 2: 2·M·N·K for dense,
  /// 2·N·K·OH·OW·C·R·S for conv2d, 2·N·C·OH·OW·R·S for depthwise_conv2d.
  double flops() const;

  /// A stable identifier of the shapes, e.g. "dense_512_512_512" or
  /// "conv2d_1_64_56_56_64_3x3_s1_p1"; the name is not part of it.
  std::string key() const;

  /// Throws std::invalid_argument when a dimension is not positive, a dimension or the pad is
  /// above 2^31 − 1, the output is empty, or a tensor's element count or the multiply-add count
  /// does not fit in int64.
  void validate() const;

  /// JSON form: {"op":"conv2d","name":"C2","N":1,"C":64,"H":56,"W":56,"K":64,"R":3,"S":3,
  /// "stride":1,"pad":1} or {"op":"dense","M":..,"N":..,"K":..}. from_json throws
  /// std::invalid_argument on a missing or bad field.
  boost::json::object to_json() const;
  static Workload from_json(const boost::json::value& value);
};

/// Reads a workload file: {"name": "...", "tasks": [workload, ...]} (each task as
/// Workload::to_json, plus an optional "occurrences" count, 1 .. 2^31 − 1), or a single workload
/// object. Throws std::runtime_error naming the file for an unreadable file or a bad task.
struct WorkloadFileTask {
  Workload workload;
  int occurrences = 1;  ///< how often the task appears in its network
};
std::vector<WorkloadFileTask> load_workload_file(const std::string& path);

/// Resolves a workload argument as the CLI takes it:
///  - a workload file path (see load_workload_file): all its tasks;
///  - "dense:M,N,K", "conv2d:N,C,H,W,K,R,stride,pad", "depthwise_conv2d:N,C,H,W,R,stride,pad":
///    one task with those shapes.
/// `names` (comma-separated, e.g. "C2,C4") keeps only the tasks of those names, in file order.
/// Throws std::invalid_argument (or std::runtime_error for unreadable files) with a message that
/// shows the accepted forms.
std::vector<WorkloadFileTask> resolve_workloads(const std::string& spec,
                                                const std::string& names = {});

}  // namespace webtune
