/// \file job_facts.hpp
/// What the tracker reads of a job's MeasureInput when it is submitted: enough to choose the
/// job's lease and to judge the plausibility of its results (result_check.hpp), without keeping
/// the parsed input around.
#pragma once

#include <boost/json/fwd.hpp>
#include <string>

namespace webtune::tracker {

class ModelPackageCache;

/// What a job runs: one kernel (a MeasureInput) or a whole compiled model (model_job.hpp).
enum class JobKind { kKernel, kModel };

struct JobFacts {
  JobKind kind = JobKind::kKernel;
  double flops = 0;      ///< floating-point operations of one run
  double bytes = 0;      ///< compulsory traffic of one run (bytes): inputs read once, output once
  int repeat = 1;        ///< costs a successful result must carry
  double timeout_s = 0;  ///< the measurement budget (MeasureOptions::timeout_s); 0 when unknown

  /// Reads a MeasureInput JSON's "workload" and "options" (codegen/measure.hpp). Throws
  /// std::invalid_argument when they are missing or invalid: such a job is refused at submit.
  static JobFacts from_input(const boost::json::value& input);
  /// Reads a model measure input (model_job.hpp) and the package it names under `models_root`:
  /// checks the input's fields, that `models_root`/<model>/manifest.json exists and hashes to
  /// its `manifest_sha256`, and that the key pattern `key`'s family runs the package's target
  /// (key_family_for_target). flops = Σ task workload FLOPs × nodes, bytes = weights.bin + input
  /// + output bytes (ModelPackageFacts); repeat and timeout_s from the options. Throws
  /// std::invalid_argument saying why, e.g. "this tracker serves no models (start it with
  /// --models DIR)" when `models_root` is empty, "no package 'x' under the models folder",
  /// "package 'x' changed: manifest sha256 <got> != <want>", "package 'x' is for target webgl2,
  /// which agents of key family 'webgl2' run, not 'gles'".
  /// `cache` (optional) keeps packages read earlier (model_job.hpp's ModelPackageCache).
  static JobFacts from_model_input(const boost::json::value& input, const std::string& models_root,
                                   const std::string& key, ModelPackageCache* cache = nullptr);
};

}  // namespace webtune::tracker
