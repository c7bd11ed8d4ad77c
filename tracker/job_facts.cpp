/// \file job_facts.cpp
/// Reading a job's facts from its MeasureInput JSON.
#include "tracker/job_facts.hpp"

#include <boost/json.hpp>
#include <filesystem>

#include "codegen/json_util.hpp"
#include "codegen/measure.hpp"
#include "codegen/workload.hpp"
#include "tracker/model_job.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

JobFacts JobFacts::from_input(const bj::value& input) {
  const bj::object& o = json::as_object(input, "measure input");
  const Workload workload = Workload::from_json(json::field(o, "workload"));
  workload.validate();
  MeasureOptions options;
  if (auto it = o.find("options"); it != o.end()) options = MeasureOptions::from_json(it->value());
  JobFacts f;
  f.flops = workload.flops();
  // Every input (the epilogue's bias and residual too) and the output, read or written once.
  double elements = static_cast<double>(workload.output_size());
  for (int i = 0; i < workload.input_count(); ++i)
    elements += static_cast<double>(workload.input_size(i));
  f.bytes = 4.0 * elements;
  f.repeat = options.repeat;
  f.timeout_s = options.timeout_s;
  return f;
}

JobFacts JobFacts::from_model_input(const bj::value& input, const std::string& models_root,
                                    const std::string& key, ModelPackageCache* cache) {
  if (models_root.empty())
    throw std::invalid_argument("this tracker serves no models (start it with --models DIR)");
  const ModelMeasureInput m = ModelMeasureInput::from_json(input);
  const std::filesystem::path dir = std::filesystem::path(models_root) / m.model;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "manifest.json", ec))
    throw std::invalid_argument("no package '" + m.model +
                                "' under the models folder (no manifest.json)");
  const ModelPackageFacts package =
      cache ? cache->get(dir.string()) : read_model_package(dir.string());
  if (package.manifest_sha256 != m.manifest_sha256)
    throw std::invalid_argument("package '" + m.model + "' changed: manifest sha256 " +
                                package.manifest_sha256 + " != " + m.manifest_sha256);
  const std::string family = key_family_for_target(package.target);
  if (key_family(key) != family)
    throw std::invalid_argument("package '" + m.model + "' is for target " + package.target +
                                ", which agents of key family '" + family + "' run, not '" +
                                key_family(key).substr(0, 32) + "'");
  for (const ModelSample& s : m.samples)
    if (s.index >= package.output_elements)
      throw std::invalid_argument("sample index " + std::to_string(s.index) +
                                  " is outside the model's output of " +
                                  std::to_string(package.output_elements) + " elements");
  JobFacts f;
  f.kind = JobKind::kModel;
  f.flops = package.flops;
  f.bytes = package.bytes;
  f.repeat = m.options.repeat;
  f.timeout_s = m.options.timeout_s;
  return f;
}

}  // namespace webtune::tracker
