/// \file gemm_schedule.cpp
/// The shared GEMM schedule of the compute-shader targets: view, knobs, rules, limits, mapping
/// and the untuned default (gemm_schedule.hpp says what each is and why).
#include "codegen/gemm_schedule.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>

#include "codegen/knob_reader.hpp"

namespace webtune {

namespace {

constexpr int64_t kMaxTileDepth = 16;
constexpr int64_t kMaxPrefetchLoads = 16;
constexpr int64_t kDefaultThreadsPerDim = 8;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct Rule {
  const char* description;
  std::function<bool(const GemmSchedule&, const GemmTiling&)> holds;
};

/// The structural rules that apply under `options` (gemm_schedule.hpp lists them).
std::vector<Rule> rules(const GemmScheduleOptions& options) {
  std::vector<Rule> out = {
      {"register tile at most 8x8 (regs_y, regs_x <= 8)",
       [](const GemmSchedule&, const GemmTiling& t) {
         return t.regs_y <= kComputeMaxRegsPerDim && t.regs_x <= kComputeMaxRegsPerDim;
       }},
      {"vec4 needs the reduction length (K, or C*R*S) to be a multiple of 4",
       [](const GemmSchedule& s, const GemmTiling& t) {
         return !t.vec4 || s.view().depth % 4 == 0;
       }},
      {"vec4 on dense needs N and regs_x to be multiples of 4",
       [](const GemmSchedule& s, const GemmTiling& t) {
         const GemmView& v = s.view();
         return !t.vec4 || v.conv || (v.cols % 4 == 0 && t.regs_x % 4 == 0);
       }},
      {"tile_k is only used with shared (workgroup) memory: k_depth must be 1 without it",
       [](const GemmSchedule&, const GemmTiling& t) { return t.use_shared || t.k_depth == 1; }},
      {"k_split times the unrolled step divides the reduction loop (the depth, or k_depth with "
       "shared memory)",
       [](const GemmSchedule& s, const GemmTiling& t) {
         const int64_t loop = t.use_shared ? t.k_depth : s.view().depth;
         return loop % (t.k_split * t.body_depth) == 0;
       }},
  };
  if (options.double_buffer_knob) {
    out.push_back(
        {"double_buffer needs shared memory", [](const GemmSchedule&, const GemmTiling& t) {
           return t.use_shared || !t.double_buffer;
         }});
    out.push_back({"double_buffer: at most 16 prefetched global loads per invocation and tile",
                   [](const GemmSchedule& s, const GemmTiling& t) {
                     return !t.double_buffer || s.loads_per_invocation(t) <= kMaxPrefetchLoads;
                   }});
  }
  out.push_back({"at most 1024 unrolled multiply-adds per loop body",
                 [](const GemmSchedule&, const GemmTiling& t) {
                   return t.body_depth * t.regs_y * t.regs_x <= kComputeMaxUnrolledMultiplyAdds;
                 }});
  out.push_back({"at most 65535 workgroups per dispatch dimension",
                 [](const GemmSchedule& s, const GemmTiling& t) {
                   return t.blocks_x <= kComputeMaxGroupCount &&
                          t.blocks_y <= kComputeMaxGroupCount &&
                          s.view().batch * t.k_groups <= kComputeMaxGroupCount;
                 }});
  if (options.k_groups_knob) {
    // The k-groups split the shared tiles' loop; the loop without shared memory is not split
    // (its configs are far from the fast region, and the space stays smaller).
    out.push_back(
        {"k_groups > 1 needs shared memory",
         [](const GemmSchedule&, const GemmTiling& t) { return t.k_groups == 1 || t.use_shared; }});
    out.push_back({"k_groups <= k_outer (the shared tiles the k-groups split)",
                   [](const GemmSchedule&, const GemmTiling& t) {
                     return t.k_groups == 1 || t.k_groups <= t.k_outer;
                   }});
    out.push_back({"k_groups partial sums (k_groups * rows * cols floats) below 2^31 (int indices)",
                   [](const GemmSchedule& s, const GemmTiling& t) {
                     return s.partial_floats(t) <= std::numeric_limits<int32_t>::max();
                   }});
  }
  if (options.i32_indices) {
    out.push_back({"at most 2^31 - 1 elements per tensor (indexes are i32)",
                   [](const GemmSchedule& s, const GemmTiling&) {
                     const GemmView& v = s.view();
                     const int64_t max = std::numeric_limits<int32_t>::max();
                     const int64_t data = v.conv ? v.images * v.in_c * v.in_h * v.in_w : 0;
                     return v.rows * v.depth <= max && v.depth * v.cols <= max && data <= max &&
                            v.batch * v.rows * v.cols <= max;
                   }});
  }
  return out;
}

struct Limit {
  const char* description;
  bool (*holds)(const GemmTiling&, const DeviceLimits&);
};

std::vector<Limit> limits(const GemmScheduleOptions& options) {
  std::vector<Limit> out = {
      {"workgroup invocations (threads_x * threads_y * k_split) <= max_workgroup_invocations",
       [](const GemmTiling& t, const DeviceLimits& d) {
         return t.invocations() <= d.max_workgroup_invocations;
       }},
      {"threads_x <= max_workgroup_size_x",
       [](const GemmTiling& t, const DeviceLimits& d) {
         return t.threads_x <= d.max_workgroup_size_x;
       }},
      {"threads_y <= max_workgroup_size_y",
       [](const GemmTiling& t, const DeviceLimits& d) {
         return t.threads_y <= d.max_workgroup_size_y;
       }},
  };
  if (options.k_split_knob)
    out.push_back(
        {"k_split <= max_workgroup_size_z", [](const GemmTiling& t, const DeviceLimits& d) {
           return t.k_split <= d.max_workgroup_size_z;
         }});
  out.push_back(
      {"shared tiles (4 * k_depth * (block_rows + block_cols) bytes, twice with "
       "double_buffer) and the k_split reduction area (4 * (k_split - 1) * block_rows "
       "* block_cols bytes) <= max_shared_memory_bytes",
       [](const GemmTiling& t, const DeviceLimits& d) {
         return t.shared_bytes() <= d.max_shared_memory_bytes;
       }});
  return out;
}

/// How far a candidate is from the untuned default (smaller is closer).
double default_distance(const Knob& knob, const KnobValue& value) {
  if (const auto* factors = std::get_if<std::vector<int64_t>>(&value)) {
    const bool is_xy = knob.name == "tile_x" || knob.name == "tile_y";
    if (is_xy && factors->size() == 3) {
      // Register tile first (must be 1), then the log-distance of the threads from 8, with a
      // small tie-break towards fewer threads.
      const double threads = static_cast<double>((*factors)[1]);
      return 1000.0 * static_cast<double>((*factors)[2] - 1) +
             std::abs(std::log2(threads / kDefaultThreadsPerDim)) + 1e-3 * threads;
    }
    return static_cast<double>(factors->back());  // tile_k depth, planes per workgroup
  }
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  return 0.0;
}

}  // namespace

GemmView GemmView::of(const Workload& wl, GemmColumns columns) {
  GemmView v;
  if (wl.op == OpKind::kDense) {
    v.rows = wl.m, v.cols = wl.n, v.depth = wl.k;
    return v;
  }
  if (wl.op != OpKind::kConv2d)
    throw std::invalid_argument("the GEMM schedule has no view of op '" +
                                std::string(op_name(wl.op)) + "' (only dense and conv2d)");
  v.conv = true;
  v.rows = wl.out_channels;
  v.depth = wl.in_channels * wl.kernel_h * wl.kernel_w;
  v.images = wl.batch;
  v.in_c = wl.in_channels, v.in_h = wl.height, v.in_w = wl.width;
  v.kh = wl.kernel_h, v.kw = wl.kernel_w, v.stride = wl.stride, v.pad = wl.pad;
  v.out_h = wl.out_h(), v.out_w = wl.out_w();
  if (columns == GemmColumns::kPerImage) {
    v.cols = v.out_h * v.out_w;
    v.batch = wl.batch;
  } else {
    v.cols = wl.batch * v.out_h * v.out_w;
  }
  return v;
}

GemmSchedule::GemmSchedule(const Workload& workload, const GemmScheduleOptions& options)
    : view_(GemmView::of(workload, options.columns)),
      options_(options),
      template_name_(std::string(options_.target) + " " + std::string(op_name(workload.op))) {
  if (options_.k_groups_knob && options_.columns == GemmColumns::kPerImage)
    throw std::invalid_argument(
        "the GEMM schedule's k_groups needs columns over all images (the dispatch's z)");
}

std::shared_ptr<ConfigSpace> GemmSchedule::space() const {
  const SplitPolicy policy = options_.split_policy;
  auto space = std::make_shared<ConfigSpace>();
  space->define_split("tile_y", view_.rows, 3, policy, options_.max_threads_per_dim);
  space->define_split("tile_x", view_.cols, 3, policy, options_.max_threads_per_dim);
  space->define_split("tile_k", view_.depth, 2, policy, kMaxTileDepth);
  space->define_knob("use_shared", std::vector<int64_t>{0, 1});
  space->define_knob("vec4", std::vector<int64_t>{0, 1});
  space->define_knob("unroll", std::vector<int64_t>{1, 2, 4, 8});
  if (options_.double_buffer_knob) space->define_knob("double_buffer", std::vector<int64_t>{0, 1});
  if (options_.k_split_knob) space->define_knob("k_split", std::vector<int64_t>{1, 2, 4});
  if (options_.k_groups_knob) {
    // Last, and 1 where a record lacks it: records from before it keep their kernels and indices.
    space->define_knob("k_groups", std::vector<int64_t>{1, 2, 4, 8});
    space->allow_absent("k_groups");
  }
  // Every rule and limit needs the decoded entity. Enumerating a space (valid_indices) runs them
  // all on each of millions of entities, so each thread keeps its last decode, keyed by this
  // space (a process-unique number), the entity's knob list and its index (which names its
  // choices).
  struct LastDecode {
    uint64_t space = 0;
    const KnobList* knobs = nullptr;
    int64_t index = -1;
    GemmTiling tiling;
  };
  static std::atomic<uint64_t> next_space{1};
  const uint64_t space_id = next_space.fetch_add(1);
  auto self = std::make_shared<const GemmSchedule>(*this);
  auto decode = [self, space_id](const ConfigEntity& e) -> GemmTiling {
    thread_local LastDecode last;
    if (e.index() >= 0 && last.space == space_id && last.knobs == &e.knobs() &&
        last.index == e.index())
      return last.tiling;
    GemmTiling t = self->read(e);
    last = {space_id, &e.knobs(), e.index(), t};
    return t;
  };
  for (Rule& rule : rules(options_)) {
    space->add_constraint(rule.description,
                          [self, decode, holds = std::move(rule.holds)](const ConfigEntity& e) {
                            return holds(*self, decode(e));
                          });
  }
  for (const Limit& limit : limits(options_)) {
    space->add_device_limit(limit.description, [decode, holds = limit.holds](
                                                   const ConfigEntity& e, const DeviceLimits& d) {
      return holds(decode(e), d);
    });
  }
  return space;
}

GemmTiling GemmSchedule::read(const ConfigEntity& entity) const {
  const KnobReader knobs(entity, template_name_);
  const SplitCover cover =
      options_.split_policy == SplitPolicy::kVerbose ? SplitCover::kCeil : SplitCover::kExact;
  GemmTiling t;
  const auto y = knobs.split("tile_y", 3, view_.rows, cover);
  const auto x = knobs.split("tile_x", 3, view_.cols, cover);
  const auto k = knobs.split("tile_k", 2, view_.depth, cover);
  t.blocks_y = y[0], t.threads_y = y[1], t.regs_y = y[2];
  t.blocks_x = x[0], t.threads_x = x[1], t.regs_x = x[2];
  t.k_outer = k[0], t.k_depth = k[1];
  t.rows_exact = split_is_exact(y, view_.rows);
  t.cols_exact = split_is_exact(x, view_.cols);
  t.depth_exact = split_is_exact(k, view_.depth);
  t.use_shared = knobs.get_int("use_shared") != 0;
  t.vec4 = knobs.get_int("vec4") != 0;
  t.unroll = knobs.get_int("unroll", 1);
  if (options_.double_buffer_knob) t.double_buffer = knobs.get_int("double_buffer") != 0;
  if (options_.k_split_knob) t.k_split = knobs.get_int("k_split", 1);
  if (options_.k_groups_knob) t.k_groups = knobs.get_int("k_groups", 1);
  const bool vec4_cols = !view_.conv || options_.vec4_conv_columns;
  t.width = t.vec4 && vec4_cols && view_.cols % 4 == 0 && t.regs_x % 4 == 0 ? 4 : 1;
  t.a_rows_vec4 = options_.vec4_a_rows && t.vec4 && t.use_shared && t.regs_y % 4 == 0;
  t.body_depth = t.unroll * (options_.shared_step_scalar && t.use_shared ? 1 : t.a_width());
  return t;
}

GemmTiling GemmSchedule::read_checked(const ConfigEntity& entity) const {
  const GemmTiling t = read(entity);
  for (const Rule& rule : rules(options_))
    if (!rule.holds(*this, t))
      KnobReader(entity, template_name_).refuse(std::string("config breaks: ") + rule.description);
  return t;
}

std::vector<std::pair<int64_t, int64_t>> GemmSchedule::owned_outputs(const GemmTiling& t,
                                                                     int64_t bx, int64_t by,
                                                                     int64_t tx, int64_t ty) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t row0 = by * t.block_rows() + ty * t.row_group();
  const int64_t col0 = bx * t.block_cols() + tx * t.width;
  for (int64_t i = 0; i < t.regs_y; ++i)
    for (int64_t j = 0; j < t.col_atoms(); ++j)
      for (int64_t e = 0; e < t.width; ++e) {
        const int64_t row = row0 + t.row_step(i), col = col0 + t.col_step(j) + e;
        if (row < view_.rows && col < view_.cols) out.emplace_back(row, col);
      }
  return out;
}

int64_t GemmSchedule::loads_per_invocation(const GemmTiling& t) const {
  const int64_t n = t.invocations();
  const int64_t b_loads = ceil_div(t.b_tile_floats() / t.width, n);
  if (t.a_rows_vec4) {
    // Items of 4 rows × 4 depth values, 4 vec4 loads each.
    return 4 * ceil_div(t.a_tile_floats() / 16, n) + b_loads;
  }
  return ceil_div(t.a_tile_floats() / t.a_width(), n) + b_loads;
}

int64_t GemmSchedule::partial_floats(const GemmTiling& t) const {
  return t.k_groups > 1 ? t.k_groups * view_.rows * view_.cols : 0;
}

int64_t GemmSchedule::tile_counters(const GemmTiling& t) const {
  return t.k_groups > 1 ? t.blocks_x * t.blocks_y : 0;
}

namespace {

std::string clamp(const std::string& index, bool exact, int64_t last) {
  return exact ? index : "min(" + index + ", " + std::to_string(last) + ")";
}

std::string below(const std::string& index, bool exact, int64_t extent) {
  return exact ? "" : "((" + index + ") < " + std::to_string(extent) + ")";
}

}  // namespace

std::string GemmEdges::row(const std::string& index) const {
  return clamp(index, t_.rows_exact, view_.rows - 1);
}
std::string GemmEdges::col(const std::string& index, int64_t width) const {
  return clamp(index, t_.cols_exact, view_.cols - width);
}
std::string GemmEdges::depth(const std::string& index) const {
  return clamp(index, t_.depth_exact, view_.depth - 1);
}
std::string GemmEdges::row_ok(const std::string& index) const {
  return below(index, t_.rows_exact, view_.rows);
}
std::string GemmEdges::col_ok(const std::string& index) const {
  return below(index, t_.cols_exact, view_.cols);
}
std::string GemmEdges::depth_ok(const std::string& index) const {
  return below(index, t_.depth_exact, view_.depth);
}
std::string GemmEdges::all(const std::vector<std::string>& conditions) const {
  std::string out;
  for (const std::string& c : conditions)
    if (!c.empty()) out += (out.empty() ? "" : and_op_) + c;
  return out;
}

ConfigEntity untuned_default(const ConfigSpace& space, std::string_view target) {
  // Each knob's closest candidate; knobs are independent, so this is the closest entity.
  const KnobList& knobs = space.knobs();
  std::vector<int> choices(knobs.size(), 0);
  for (size_t k = 0; k < knobs.size(); ++k) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < knobs[k].candidates.size(); ++c) {
      const double d = default_distance(knobs[k], knobs[k].candidates[c]);
      if (d < best) best = d, choices[k] = static_cast<int>(c);
    }
  }
  ConfigEntity entity = space.from_choices(choices);
  if (space.is_valid(entity)) return entity;
  // Device limits below 8×8 (or another rule) exclude it: the closest valid entity instead.
  double best = std::numeric_limits<double>::infinity();
  int64_t best_index = -1;
  for (int64_t index : space.valid_indices()) {
    const ConfigEntity candidate = space.get(index);
    double d = 0;
    for (size_t k = 0; k < knobs.size(); ++k)
      d += default_distance(knobs[k], knobs[k].candidates[candidate.choices()[k]]);
    if (d < best) best = d, best_index = index;
  }
  if (best_index < 0)
    throw std::runtime_error(std::string(target) + ": the config space has no valid config");
  return space.get(best_index);
}

}  // namespace webtune
