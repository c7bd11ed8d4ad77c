/// \file gemm_schedule.hpp
/// The target-neutral GEMM schedule that the gles-compute (GLSL ES 3.10) and webgpu (WGSL)
/// emitters share: the view of dense and conv2d as a GEMM, the tiling knobs, the structural
/// rules, the device-limit filters, the untuned default config and the thread → output
/// mapping. The emitters only write their language.
///
/// ## The view
/// C[rows, cols] = A[rows, depth] · B[depth, cols], `batch` times (the dispatch's z):
///  - dense:  rows = M, cols = N, depth = K, batch 1; A = data[M,K], B = weight[K,N].
///  - conv2d: implicit GEMM (AutoTVM's conv2d templates): rows = K (output channels),
///    depth = C·R·S, A = weight ([K,C,R,S] row-major already is [K, C·R·S]), B = im2col(X),
///    never materialised. Columns are either the output pixels of all images, N·OH·OW, with
///    batch 1 (GemmColumns::kAllImages, gles-compute), or the pixels of one image, OH·OW, with
///    batch N along the dispatch's z (kPerImage, webgpu: vec4 stores never straddle images).
///
/// ## Knobs (the split structure of AutoTVM's CUDA templates — topi/cuda/dense.py
/// dense_large_batch, topi/cuda/conv2d_direct.py — with [block, vthread, thread, inner] reduced
/// to [block, thread, inner]: neither GLSL nor WGSL has virtual threads)
///  - tile_y = [blocks_y, threads_y, regs_y], split of rows: workgroups, workgroup size and
///    rows per invocation (the register tile's height). Inner factors ≤ max_threads_per_dim.
///  - tile_x = [blocks_x, threads_x, regs_x], split of cols, likewise.
///  - tile_k = [k_outer, k_depth], split of the depth: one shared-memory tile's depth (≤ 16,
///    the usual SGEMM tile depth).
///  - use_shared {0, 1}: stage A and B tiles in workgroup (shared) memory, or read the buffers.
///  - vec4 {0, 1}: read A four depth values at a time; dense also B, accumulators and C four
///    columns at a time (conv2d too where the target allows it: vec4_conv_columns).
///  - unroll {1, 2, 4, 8}: reduction steps written out per loop body.
///  - double_buffer {0, 1}, k_split {1, 2, 4} and k_groups {1, 2, 4, 8}: only where the target
///    turns them on (gles-compute); see glsl_compute_emitter.cpp for what they do. k_groups is
///    defined last and read as 1 where a record lacks it (ConfigSpace::allow_absent).
///
/// ## Rules (structural, device-independent)
///  - regs_y, regs_x ≤ 8: the register tile (≤ 64 accumulators) stays in registers.
///  - vec4 needs depth % 4 == 0 (no vec4 straddles two rows of A); dense also N % 4 == 0 and
///    regs_x % 4 == 0 (no vec4 of B or C straddles two rows).
///  - without shared memory k_depth == 1 (tile_k unused: no duplicate kernels).
///  - k_split × the unrolled step divides the loop it unrolls (the depth without shared
///    memory, k_depth with it): no remainder loop.
///  - double_buffer needs shared memory and ≤ 16 prefetched global loads per invocation.
///  - ≤ 1024 unrolled multiply-adds per loop body (source size, driver compile time).
///  - blocks_x, blocks_y, batch · k_groups ≤ 65535 (ES 3.1's and WebGPU's minimum workgroup
///    counts).
///  - k_groups > 1 needs shared memory, k_groups ≤ k_outer, and k_groups · rows · cols < 2^31
///    (the partial sums are indexed with int).
///  - with i32_indices (WGSL indexes with i32): every tensor < 2^31 elements.
/// Device limits: threads_x·threads_y·k_split ≤ max_workgroup_invocations, threads_x ≤
/// max_workgroup_size_x, threads_y ≤ max_workgroup_size_y, k_split ≤ max_workgroup_size_z, and
/// shared memory — 4·k_depth·(BR + BC) bytes (twice with double_buffer) plus the k_split
/// reduction area 4·(k_split − 1)·BR·BC, plus 4 for k_groups' "last group" flag — ≤
/// max_shared_memory_bytes.
///
/// ## Mapping
/// Invocation (tx, ty, kz) of workgroup (bx, by, z) owns rows
///   by·BR + ty·g + row_step(i),  row_step(i) = (i div g)·threads_y·g + i mod g  (i < regs_y)
/// and columns  bx·BC + tx·w + j·threads_x·w + e                         (j < regs_x/w, e < w)
/// of layer z, with BR = threads_y·regs_y, BC = threads_x·regs_x, w = 4 when columns are vec4,
/// else 1, and g = 4 when shared A rows are read as vec4 (vec4_a_rows, vec4, use_shared and
/// regs_y % 4 == 0), else 1: neighbouring invocations touch neighbouring addresses.
/// With k_groups > 1 (gles-compute, whose columns run over all images: batch 1) z is the
/// k-group instead of the layer: k_groups workgroups share each output tile.
///
/// ## Edges
/// Tile splits are SplitPolicy::kVerbose: a tile may run past the end of its axis (an axis of
/// 1000 gets inner tiles 8, 16, 32 beside its divisors). The kernels then GUARD the edge: loads
/// of rows or columns past it, whose accumulators are never stored, read a clamped address;
/// shared-memory tiles are filled with zeros past the edge (rows, columns or depth), so they
/// add nothing; stores past it are skipped (GemmEdges writes the conditions). Padded buffers
/// were the other way; they are not used because a model's buffers are shared between ops: a
/// padded one would need a copy, or a layout change in every producer and consumer. Exact
/// splits emit no guard, so the kernels of existing records are unchanged.
///
/// ## Default
/// untuned_default(): per knob the candidate closest to "8 threads along x and y, one output
/// per invocation, the smallest of every other knob"; if the device limits exclude that entity,
/// the valid entity with the smallest summed distance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// Bounds every compute-shader template (GEMM or direct) applies: a register tile of at most
/// 8×8 (64 accumulators stay in registers; what fast SGEMM kernels use), at most 1024 unrolled
/// multiply-adds per loop body (source size, driver compile time), and at most 65535
/// workgroups per dispatch dimension (the minimum of ES 3.1's GL_MAX_COMPUTE_WORK_GROUP_COUNT
/// and WebGPU's maxComputeWorkgroupsPerDimension).
inline constexpr int64_t kComputeMaxRegsPerDim = 8;
inline constexpr int64_t kComputeMaxUnrolledMultiplyAdds = 1024;
inline constexpr int64_t kComputeMaxGroupCount = 65535;

/// How conv2d's GEMM columns run over the images; see the file comment.
enum class GemmColumns { kAllImages, kPerImage };

/// What a target turns on in the shared schedule.
struct GemmScheduleOptions {
  std::string_view target;           ///< "gles-compute", "webgpu": names templates in errors
  int64_t max_threads_per_dim = 32;  ///< max_factor of the tile_x / tile_y splits
  GemmColumns columns = GemmColumns::kAllImages;
  bool double_buffer_knob = false;  ///< define double_buffer {0, 1}
  bool k_split_knob = false;        ///< define k_split {1, 2, 4}
  bool k_groups_knob = false;       ///< define k_groups {1, 2, 4, 8} (last, allow_absent)
  bool vec4_conv_columns = false;   ///< conv2d columns as vec4 when cols, regs_x % 4 == 0
  bool vec4_a_rows = false;         ///< shared A read as vec4s of four rows (regs_y % 4 == 0)
  bool shared_step_scalar = false;  ///< with shared memory an unrolled step is one depth value
  bool i32_indices = false;         ///< rule: every tensor < 2^31 elements
  SplitPolicy split_policy = SplitPolicy::kVerbose;  ///< of tile_y, tile_x and tile_k
};

/// A dense or conv2d workload seen as a GEMM; see the file comment.
struct GemmView {
  bool conv = false;
  int64_t rows = 0, cols = 0, depth = 0;
  int64_t batch = 1;  ///< dispatch layers (z): 1, or N images with GemmColumns::kPerImage
  // conv2d only: the input and window geometry.
  int64_t images = 1, in_c = 0, in_h = 0, in_w = 0, kh = 1, kw = 1, stride = 1, pad = 0;
  int64_t out_h = 1, out_w = 1;

  /// Throws std::invalid_argument for an op other than dense and conv2d.
  static GemmView of(const Workload& workload, GemmColumns columns);
};

/// One entity of the GEMM space, decoded, with what the target's options make of it.
struct GemmTiling {
  int64_t blocks_y = 1, threads_y = 1, regs_y = 1;
  int64_t blocks_x = 1, threads_x = 1, regs_x = 1;
  int64_t k_outer = 1, k_depth = 1;
  bool use_shared = false;
  bool vec4 = false;
  int64_t unroll = 1;
  bool double_buffer = false;
  int64_t k_split = 1;
  /// Workgroups per output tile splitting the k-tiles between them (the dispatch's z).
  int64_t k_groups = 1;
  /// Columns per B atom, accumulator and store: 4 with vec4 columns, else 1.
  int64_t width = 1;
  /// Shared A rows are read four at a time (the row group g of the mapping is 4).
  bool a_rows_vec4 = false;
  /// Depth values one unrolled loop body covers.
  int64_t body_depth = 1;
  /// Whether each split multiplies to its extent exactly (else its last tile is guarded).
  bool rows_exact = true, cols_exact = true, depth_exact = true;

  int64_t block_rows() const { return threads_y * regs_y; }
  int64_t block_cols() const { return threads_x * regs_x; }
  /// Invocations of one k-slice (the owners of the output tile), and of the workgroup.
  int64_t slice_invocations() const { return threads_x * threads_y; }
  int64_t invocations() const { return threads_x * threads_y * k_split; }
  /// Depth values per A load: 4 with vec4, else 1.
  int64_t a_width() const { return vec4 ? 4 : 1; }
  int64_t col_atoms() const { return regs_x / width; }
  int64_t row_group() const { return a_rows_vec4 ? 4 : 1; }
  /// Offset of owned row i from the invocation's first row (block row + ty·g).
  int64_t row_step(int64_t i) const {
    return a_rows_vec4 ? (i / 4) * threads_y * 4 + i % 4 : i * threads_y;
  }
  /// Offset, in columns, of owned column atom j from the invocation's first column (tx·w).
  int64_t col_step(int64_t j) const { return j * threads_x * width; }
  int64_t a_tile_floats() const { return k_depth * block_rows(); }
  int64_t b_tile_floats() const { return k_depth * block_cols(); }
  /// Floats of the k-split reduction area: slices 1.. hand their register tiles to slice 0.
  int64_t reduction_floats() const { return (k_split - 1) * block_rows() * block_cols(); }
  /// k-tiles per k-group: ceil(k_outer / k_groups); group g runs tiles
  /// [g·T, min((g + 1)·T, k_outer)), which is empty for the last groups when T does not divide.
  int64_t group_tiles() const { return (k_outer + k_groups - 1) / k_groups; }
  /// Whether some k-group has no k-tile ((k_groups − 1)·T ≥ k_outer); it adds zeros.
  bool has_empty_group() const { return (k_groups - 1) * group_tiles() >= k_outer; }
  int64_t shared_bytes() const {
    const int64_t tiles =
        use_shared ? (double_buffer ? 2 : 1) * (a_tile_floats() + b_tile_floats()) : 0;
    // k_groups > 1: one uint telling the workgroup whether it is its tile's last group.
    return 4 * (tiles + reduction_floats() + (k_groups > 1 ? 1 : 0));
  }
};

/// The schedule of one workload for one target; see the file comment.
class GemmSchedule {
 public:
  /// Throws std::invalid_argument for an op other than dense and conv2d, and for options with
  /// k_groups_knob and GemmColumns::kPerImage (both would need the dispatch's z).
  GemmSchedule(const Workload& workload, const GemmScheduleOptions& options);

  const GemmView& view() const { return view_; }
  const GemmScheduleOptions& options() const { return options_; }
  /// "<target> <op>", the template's name in error messages.
  const std::string& template_name() const { return template_name_; }

  /// The config space: knobs, rules and device-limit filters (limits not yet applied).
  std::shared_ptr<ConfigSpace> space() const;
  /// The entity decoded. Throws MeasureError(kInstantiation) naming the knob when the entity
  /// lacks one, or its splits do not tile this workload.
  GemmTiling read(const ConfigEntity& entity) const;
  /// read(), then every structural rule; throws MeasureError(kInstantiation) naming the
  /// first broken rule.
  GemmTiling read_checked(const ConfigEntity& entity) const;

  /// The (row, col) outputs of the view's C that invocation (tx, ty) of workgroup (bx, by)
  /// stores, for any layer z (k-slice 0; the other slices store nothing; with k_groups > 1 the
  /// tile's last k-group to finish, and each group writes its partial sums of the same outputs).
  /// Only outputs inside the view are listed: stores past a guarded edge are skipped.
  std::vector<std::pair<int64_t, int64_t>> owned_outputs(const GemmTiling& t, int64_t bx,
                                                         int64_t by, int64_t tx, int64_t ty) const;

  /// Global loads one invocation makes per shared tile (A then B): the double_buffer rule's
  /// count of prefetch registers.
  int64_t loads_per_invocation(const GemmTiling& t) const;

  /// Scratch a k_groups > 1 kernel needs (KernelArtifact::scratch_floats / scratch_counters):
  /// the partial sums, k_groups · rows · cols floats ([k_group][row][col] of the view's C), and
  /// one arrival counter per output tile, blocks_x · blocks_y. Both 0 for k_groups 1.
  int64_t partial_floats(const GemmTiling& t) const;
  int64_t tile_counters(const GemmTiling& t) const;

 private:
  GemmView view_;
  GemmScheduleOptions options_;
  std::string template_name_;
};

/// Edge guards of one tiling as shader text that GLSL and WGSL read alike (`min(a, b)`,
/// `(a) < b`, the conjunction `and_op` between conditions: " && " or the branch-free " & "). An
/// exact axis gives an unchanged index and an empty condition, so exact tilings emit no guard.
class GemmEdges {
 public:
  GemmEdges(const GemmView& view, const GemmTiling& t, std::string and_op)
      : view_(view), t_(t), and_op_(std::move(and_op)) {}
  /// `index` (a row, column or depth expression) clamped to the last row, to the last column
  /// atom of `width` columns, or to the last depth value, where that axis is guarded.
  std::string row(const std::string& index) const;
  std::string col(const std::string& index, int64_t width = 1) const;
  std::string depth(const std::string& index) const;
  /// "((index) < rows)" (cols, depth) where that axis is guarded, else "".
  std::string row_ok(const std::string& index) const;
  std::string col_ok(const std::string& index) const;
  std::string depth_ok(const std::string& index) const;
  /// The non-empty `conditions` joined by and_op ("" when all are empty).
  std::string all(const std::vector<std::string>& conditions) const;

 private:
  GemmView view_;
  GemmTiling t_;
  std::string and_op_;
};

/// The untuned default of any compute-shader space (GEMM or direct): per knob the candidate
/// closest to "8 threads along x and y (tile_x, tile_y = [blocks, threads, regs]), one output
/// per invocation, the smallest value of every other knob"; if that entity is invalid, the
/// valid entity with the smallest summed distance. Throws std::runtime_error naming `target`
/// when the space has no valid entity.
ConfigEntity untuned_default(const ConfigSpace& space, std::string_view target);

}  // namespace webtune
