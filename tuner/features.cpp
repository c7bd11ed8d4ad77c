/// \file features.cpp
/// Feature vectors of configs for the XGBoost cost model (see features.hpp).
///
/// AutoTVM's XGBoostCostModel offers "itervar", "knob" and "curve" features; the itervar and
/// curve kinds come from lowering the TIR loop nest, which webtune does not have. The knob
/// features here are AutoTVM's "knob" kind with values instead of choice indices: split factors
/// as log2, so that the same factor means the same feature on every workload of a template
/// (choice indices differ between workloads, since the candidate lists depend on the extents),
/// which is what transfer learning needs. The analytic features stand in for the itervar ones:
/// a handful of numbers that say how the work is parallelised and how much data each output
/// costs; each template computes its own (Template::features), this file knows no knob names.
/// Everything is log-scaled, as AutoTVM's itervar features are, because performance depends on
/// ratios of sizes rather than on differences.
#include "tuner/features.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <variant>

#include "codegen/error_no.hpp"

namespace webtune {

namespace {

float log2f_of(double x) {
  return static_cast<float>(std::log2(x > 0 ? x : 1.0));
}
float log2p1(double x) {
  return static_cast<float>(std::log2(1.0 + (x > 0 ? x : 0.0)));
}

/// Number of features one knob contributes: a split one per factor, others one.
size_t knob_width(const Knob& knob) {
  if (knob.kind == Knob::Kind::kSplit && !knob.candidates.empty())
    return std::get<std::vector<int64_t>>(knob.candidates.front()).size();
  return 1;
}

/// The template's analytic features of `entity`, or all zeros when the entity is invalid
/// (MeasureError from Task::build or from the template).
std::vector<float> analytic_features(const Task& task, const ConfigEntity& entity) {
  const Template& t = task.get_template();
  try {
    if (!t.features_need_artifact()) return t.features(task.workload, entity, nullptr);
    const KernelArtifact artifact = task.build(entity);  // checks device limits too
    return t.features(task.workload, entity, &artifact);
  } catch (const MeasureError&) {
    return std::vector<float>(Template::kAnalyticFeatureCount, 0.0f);
  }
}

}  // namespace

std::vector<float> config_features(const Task& task, const ConfigEntity& entity) {
  std::vector<float> features;
  const KnobList& knobs = entity.knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    const Knob& knob = knobs[k];
    const KnobValue& value = knob.candidates.at(entity.choices().at(k));
    switch (knob.kind) {
      case Knob::Kind::kSplit:
        for (int64_t factor : std::get<std::vector<int64_t>>(value))
          features.push_back(log2f_of(static_cast<double>(factor)));
        break;
      case Knob::Kind::kInt:
        features.push_back(log2p1(static_cast<double>(std::get<int64_t>(value))));
        break;
      case Knob::Kind::kString:
        // Category index: candidate lists of string knobs are the same on every workload of a
        // template, so positions transfer; trees split on them as on any ordinal.
        features.push_back(static_cast<float>(entity.choices()[k]));
        break;
    }
  }
  const std::vector<float> analytic = analytic_features(task, entity);
  if (analytic.size() != Template::kAnalyticFeatureCount)
    throw std::logic_error("template " + task.get_template().name() + " gave " +
                           std::to_string(analytic.size()) + " analytic features, not " +
                           std::to_string(Template::kAnalyticFeatureCount));
  features.insert(features.end(), analytic.begin(), analytic.end());
  return features;
}

std::vector<std::string> feature_names(const Task& task) {
  std::vector<std::string> names;
  for (const Knob& knob : task.space->knobs()) {
    if (knob.kind == Knob::Kind::kSplit) {
      const size_t width = knob_width(knob);
      for (size_t i = 0; i < width; ++i)
        names.push_back("log2_" + knob.name + "[" + std::to_string(i) + "]");
    } else if (knob.kind == Knob::Kind::kInt) {
      names.push_back("log2p1_" + knob.name);
    } else {
      names.push_back(knob.name + "_index");
    }
  }
  for (const std::string& name : Template::analytic_feature_names()) names.push_back(name);
  return names;
}

}  // namespace webtune
