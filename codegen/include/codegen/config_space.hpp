/// \file config_space.hpp
/// Config spaces in AutoTVM's terms: knobs, their product, constraints and device-limit filters.
///
/// A space is the Cartesian product of its knobs. `define_split` (AutoTVM's SplitSpace) gives
/// every way of factoring an axis into `num_outputs` factors (policy `factors`: any divisors;
/// `power2`: powers of two only, the product still equal to the extent, optionally no factor
/// above `max_factor`); `define_knob` (AutoTVM's OtherOptionSpace) a list of integers or strings.
/// A config index is the mixed-radix number of the knobs' choice indices, the first knob the
/// least significant digit (as AutoTVM's ConfigSpace.get does), so index ↔ entity is a bijection
/// over [0, raw_size()). Constraints (structural) and device limits mark some entities invalid;
/// search only ever proposes valid ones.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <variant>
#include <vector>

namespace webtune {

/// How define_split picks factors. kFactors: exact divisors (the product equals the extent).
/// kPower2: powers of two that divide. kVerbose (AutoTVM's "verbose"): divisors and powers of
/// two, the inner ones need not divide: the outermost factor is then ceil(extent / product of
/// the inner ones), so the product may exceed the extent and the kernel guards or pads the tail
/// (split_is_exact tells which). An axis of 1000 thus gets inner tiles 8, 16, 32, 64 beside its
/// divisors 5, 10, 20, 25, 40, 50.
enum class SplitPolicy { kFactors, kPower2, kVerbose };

/// True when `factors` (a split's value) multiply to exactly `extent`; false for a kVerbose
/// split whose tiles run past the end of the axis.
bool split_is_exact(const std::vector<int64_t>& factors, int64_t extent);

/// The value of one knob in one entity: the factors of a split, an integer or a string.
using KnobValue = std::variant<std::vector<int64_t>, int64_t, std::string>;

/// One knob: its name, its kind and its candidate values.
struct Knob {
  enum class Kind { kSplit, kInt, kString };
  std::string name;
  Kind kind = Kind::kInt;
  std::vector<KnobValue> candidates;
  int64_t split_extent = 0;  ///< for kSplit: the axis length the factors cover (multiply to, or
                             ///< with kVerbose exceed by less than the inner product)
  /// Added to its template after records existed (ConfigSpace::allow_absent): an entity JSON
  /// without this knob means its first candidate.
  bool absent_means_first = false;
};

using KnobList = std::vector<Knob>;

/// One point of a space: its index and the chosen candidate of every knob. It shares the knob
/// list of its space, so it stays usable when the space is moved or gone.
class ConfigEntity {
 public:
  ConfigEntity() = default;
  ConfigEntity(std::shared_ptr<const KnobList> knobs, int64_t index, std::vector<int> choices)
      : knobs_(std::move(knobs)), index_(index), choices_(std::move(choices)) {}

  int64_t index() const { return index_; }
  /// Choice index of every knob, in definition order.
  const std::vector<int>& choices() const { return choices_; }
  const KnobList& knobs() const { return *knobs_; }
  /// The chosen value of knob `name`; throws std::out_of_range for an unknown knob.
  const KnobValue& value(const std::string& name) const;

  /// The factors of split knob `name` (outermost first). Throws std::out_of_range for an unknown
  /// knob, std::invalid_argument when the knob is not a split.
  const std::vector<int64_t>& split(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;

  /// AutoTVM's entity JSON: {"index": 12, "entity": [["tile_y","sp",[16,4]],
  /// ["unroll","ot",4], ["layout","ot","2d"]]}. Split factors are stored exactly (AutoTVM
  /// writes −1 for the first; the AutoTVM export does that).
  boost::json::object to_json() const;
  /// "tile_y=[16,4] unroll=4 layout=2d", for logs.
  std::string to_string() const;

 private:
  std::shared_ptr<const KnobList> knobs_;
  int64_t index_ = -1;
  std::vector<int> choices_;
};

/// What a device allows; the device-limit filters of a space read these.
/// Sources: GL_MAX_TEXTURE_SIZE, GL_MAX_DRAW_BUFFERS, GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS,
/// GL_MAX_COMPUTE_WORK_GROUP_SIZE, GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, GL_MAX_VARYING_VECTORS,
/// GL_MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS (WebGPU's
/// maxComputeInvocationsPerWorkgroup etc. map onto the same fields); max_threads is what a wasm
/// tab reports (navigator.hardwareConcurrency capped at 8, 1 without cross-origin isolation,
/// docs/wasm_abi.md).
struct DeviceLimits {
  int64_t max_texture_size = 4096;
  int64_t max_draw_buffers = 4;
  int64_t max_workgroup_invocations = 128;
  int64_t max_workgroup_size_x = 128, max_workgroup_size_y = 128, max_workgroup_size_z = 64;
  int64_t max_shared_memory_bytes = 16384;
  int64_t max_threads = 1;  ///< threads a wasm kernel may use (JSON "max_threads"; 1 if absent)
  /// wasm: the engine validates relaxed SIMD's f32x4.relaxed_madd (JSON "relaxed_simd", a
  /// boolean; false if absent). Chromium ≥ 114 has it on by default; Node 20 only behind
  /// --experimental-wasm-relaxed-simd.
  bool relaxed_simd = false;
  /// Vertex-stage (transform feedback) kernels: GL_MAX_VARYING_VECTORS and
  /// GL_MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS; absent in JSON: the OpenGL ES 3.0
  /// minimums (15 and 64, ES 3.0 table 6.33).
  int64_t max_varying_vectors = 15;
  int64_t max_feedback_components = 64;

  boost::json::object to_json() const;
  static DeviceLimits from_json(const boost::json::value& value);
};

/// A config space; see the file comment.
class ConfigSpace {
 public:
  using Predicate = std::function<bool(const ConfigEntity&)>;
  using LimitPredicate = std::function<bool(const ConfigEntity&, const DeviceLimits&)>;

  /// All factorisations of `extent` into `num_outputs` factors whose product is `extent`.
  /// `max_factor` > 0 drops candidates with any inner factor (all but the first) above it.
  /// Throws std::invalid_argument for a non-positive extent or num_outputs < 1.
  void define_split(const std::string& name, int64_t extent, int num_outputs,
                    SplitPolicy policy = SplitPolicy::kFactors, int64_t max_factor = 0);
  void define_knob(const std::string& name, std::vector<int64_t> candidates);
  void define_knob(const std::string& name, std::vector<std::string> candidates);

  /// Marks knob `name` as added to its template after records were made: from_json reads an
  /// entity without it as its first candidate, which must be the behaviour from before the
  /// knob. Defined last, such a knob also keeps the old records' indices (its stride is the
  /// product of all earlier knobs, and choice 0 adds nothing). Throws std::out_of_range when
  /// there is no such knob.
  void allow_absent(const std::string& name);

  /// A structural constraint, e.g. "unroll divides the K loop". `description` is what
  /// is_valid's explanation says when it fails.
  void add_constraint(std::string description, Predicate predicate);
  /// A device-limit filter, evaluated against the limits given to set_device_limits.
  void add_device_limit(std::string description, LimitPredicate predicate);
  void set_device_limits(const DeviceLimits& limits);
  const DeviceLimits& device_limits() const { return limits_; }

  const KnobList& knobs() const { return *knobs_; }
  /// Index of knob `name`; throws std::out_of_range when absent.
  int knob_index(const std::string& name) const;

  /// Size of the product of all knobs, valid or not.
  int64_t raw_size() const;

  /// The entity at `index`; throws std::out_of_range outside [0, raw_size()).
  ConfigEntity get(int64_t index) const;
  /// The entity with these choice indices; throws std::out_of_range for a bad choice.
  ConfigEntity from_choices(const std::vector<int>& choices) const;

  /// True when the entity passes every constraint and device limit. When not, `why` (if given)
  /// names the first one it breaks.
  bool is_valid(const ConfigEntity& entity, std::string* why = nullptr) const;
  bool is_valid_index(int64_t index) const { return is_valid(get(index)); }
  /// True when the entity passes the structural constraints (device limits ignored).
  bool satisfies_constraints(const ConfigEntity& entity) const;

  /// All valid indices, ascending (enumerates the whole space once, then caches).
  const std::vector<int64_t>& valid_indices() const;

  /// A uniformly random valid entity; throws std::runtime_error when the space has none.
  ConfigEntity sample(std::mt19937_64& rng) const;
  /// `count` distinct valid entities (fewer when the space is smaller), uniformly at random.
  std::vector<ConfigEntity> sample_distinct(std::mt19937_64& rng, int64_t count) const;
  /// The valid entities that differ from `entity` in exactly one knob.
  std::vector<ConfigEntity> neighbours(const ConfigEntity& entity) const;

  /// What from_json does with an "index" that disagrees with the entity's knob values.
  enum class StaleIndex {
    /// Refuse it: a config typed by a user or sent by a peer must say one thing.
    kRefuse,
    /// The entity wins and the index is recomputed. For stored records: a space that grew
    /// (e.g. kFactors → kVerbose splits, a knob with more candidates) renumbers its configs,
    /// while the knob values of an old record still name the same kernel. TVM's
    /// ConfigEntity.from_json_dict likewise instantiates from the entity map.
    kRenumber,
  };

  /// Parses AutoTVM-style entity JSON (see ConfigEntity::to_json), with or without "index".
  /// Knobs are matched by name and values by value, never by position. Throws
  /// MeasureError(kInstantiation) when a knob is missing (unless allow_absent), unknown, or names
  /// a value outside its candidates, or (with StaleIndex::kRefuse) when "index" disagrees with
  /// the entity: a config outside the space is refused with a message that says which knob.
  ConfigEntity from_json(const boost::json::value& value,
                         StaleIndex stale = StaleIndex::kRefuse) const;
  /// An index ("123") or entity JSON ("{...}"), as a CLI takes a config. Errors as from_json;
  /// an index out of range is kInstantiation too.
  ConfigEntity parse(const std::string& text) const;

 private:
  // Shared with every entity; knobs are only added while the space is being defined.
  std::shared_ptr<KnobList> knobs_ = std::make_shared<KnobList>();
  std::map<std::string, int> knob_by_name_;
  std::vector<std::pair<std::string, Predicate>> constraints_;
  std::vector<std::pair<std::string, LimitPredicate>> limits_checks_;
  DeviceLimits limits_;
  mutable std::vector<int64_t> valid_cache_;
  mutable bool valid_cached_ = false;
};

}  // namespace webtune
