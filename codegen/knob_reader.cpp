/// \file knob_reader.cpp
/// KnobReader: knobs of an entity read by name, every failure a MeasureError(kInstantiation).
#include "codegen/knob_reader.hpp"

#include <variant>

#include "codegen/error_no.hpp"

namespace webtune {

namespace {

const char* kind_name(Knob::Kind kind) {
  switch (kind) {
    case Knob::Kind::kSplit:
      return "a split";
    case Knob::Kind::kInt:
      return "an integer knob";
    case Knob::Kind::kString:
      return "a string knob";
  }
  return "a knob";
}

}  // namespace

void KnobReader::refuse(const std::string& why) const {
  throw MeasureError(MeasureErrorNo::kInstantiation, std::string(template_name_) + ": " + why);
}

namespace {

/// The knob `name` of `entity`, checked to exist and be of `kind`.
const KnobValue& knob_value(const KnobReader& reader, const ConfigEntity& entity,
                            const std::string& name, Knob::Kind kind) {
  const KnobList& knobs = entity.knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (knobs[k].name != name) continue;
    if (knobs[k].kind != kind)
      reader.refuse("knob '" + name + "' is " + kind_name(knobs[k].kind) + ", not " +
                    kind_name(kind));
    return entity.value(name);
  }
  reader.refuse("knob '" + name + "' is missing");
}

}  // namespace

std::vector<int64_t> KnobReader::split(const std::string& name, size_t parts, int64_t extent,
                                       SplitCover cover) const {
  const auto& factors =
      std::get<std::vector<int64_t>>(knob_value(*this, entity_, name, Knob::Kind::kSplit));
  const std::string axis = "split '" + name + "' ";
  if (factors.size() != parts)
    refuse(axis + "has " + std::to_string(factors.size()) + " factors, not " +
           std::to_string(parts));
  int64_t inner = 1;
  for (size_t i = 0; i < factors.size(); ++i) {
    if (factors[i] < 1) refuse(axis + "has a factor below 1");
    if (i > 0) {
      if (inner > extent) refuse(axis + "has inner factors past the extent");
      inner *= factors[i];
    }
  }
  const bool exact = factors[0] * inner == extent;
  const bool ceil = factors[0] == (extent + inner - 1) / inner;
  if (!(exact || (cover == SplitCover::kCeil && ceil)))
    refuse(axis + "does not " + (cover == SplitCover::kCeil ? "cover" : "factor") +
           " this workload's extent " + std::to_string(extent));
  return factors;
}

int64_t KnobReader::get_int(const std::string& name, int64_t min) const {
  const int64_t v = std::get<int64_t>(knob_value(*this, entity_, name, Knob::Kind::kInt));
  if (v < min) refuse("knob '" + name + "' must be at least " + std::to_string(min));
  return v;
}

const std::string& KnobReader::get_string(const std::string& name) const {
  return std::get<std::string>(knob_value(*this, entity_, name, Knob::Kind::kString));
}

}  // namespace webtune
