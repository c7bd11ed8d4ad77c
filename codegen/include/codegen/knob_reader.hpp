/// \file knob_reader.hpp
/// Checked reading of a config entity's knobs by name, for emitters.
///
/// An emitter reads its knobs from an entity that may come from anywhere: its own space, a
/// record written by an older build, a hand-written `--config` JSON. KnobReader turns every way
/// that can go wrong (a knob the entity lacks, a knob of another kind, split factors that do
/// not tile this workload's axis) into MeasureError(kInstantiation) whose message names the
/// template and the knob, e.g. "gles-compute dense: knob 'vec4' is missing". It depends only on
/// ConfigEntity, so every emitter (gles-compute, webgpu, and later gles-frag and wasm) can use
/// it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/config_space.hpp"

namespace webtune {

/// How a split's factors must cover its axis.
enum class SplitCover {
  kExact,  ///< the factors multiply to exactly the extent (SplitPolicy kFactors, kPower2)
  /// the outermost factor is ceil(extent / product of the inner ones): exact, or a tiling whose
  /// last tile runs past the axis (SplitPolicy kVerbose; the kernel guards the tail)
  kCeil,
};

/// Reads the knobs of one entity for one template (see the file comment).
class KnobReader {
 public:
  /// `template_name` names the template in messages ("gles-compute dense"); the reader keeps
  /// references to both arguments, which must outlive it.
  KnobReader(const ConfigEntity& entity, std::string_view template_name)
      : entity_(entity), template_name_(template_name) {}

  /// The `parts` factors (outermost first) of split knob `name`, checked to cover `extent` as
  /// `cover` says and to be at least 1 each. Throws MeasureError(kInstantiation) naming the
  /// knob when it is missing, not a split, or its factors do not fit.
  std::vector<int64_t> split(const std::string& name, size_t parts, int64_t extent,
                             SplitCover cover = SplitCover::kExact) const;
  /// The value of integer knob `name`, checked to be at least `min`. Throws
  /// MeasureError(kInstantiation) naming the knob when it is missing, not an integer, or below
  /// `min`.
  int64_t get_int(const std::string& name, int64_t min = INT64_MIN) const;
  /// The value of string knob `name`; throws MeasureError(kInstantiation) naming the knob when
  /// it is missing or not a string knob.
  const std::string& get_string(const std::string& name) const;

  /// Throws MeasureError(kInstantiation) "<template>: <why>".
  [[noreturn]] void refuse(const std::string& why) const;
  std::string_view template_name() const { return template_name_; }

 private:
  const ConfigEntity& entity_;
  std::string_view template_name_;
};

}  // namespace webtune
