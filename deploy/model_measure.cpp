/// \file model_measure.cpp
/// `webtune measure-model`'s work: package facts, reference samples, one model job on the farm,
/// its record (model_measure.hpp).
#include "deploy/model_measure.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "codegen/seeded_random.hpp"
#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune::deploy {

namespace bj = boost::json;

std::vector<float> model_seeded_input(uint64_t seed, int64_t elements) {
  return seeded_tensor(seed, 0, elements);
}

std::vector<tracker::ModelSample> model_reference_samples(const std::string& onnx_path,
                                                          const tracker::ModelPackageFacts& package,
                                                          uint64_t seed) {
  graph::ImportReport report;
  const graph::Graph graph = graph::import_onnx_file(onnx_path, {}, &report);
  if (!report.unsupported.empty()) {
    std::string ops;
    for (const auto& [op, count] : report.unsupported) ops += (ops.empty() ? "" : ", ") + op;
    throw std::runtime_error("the reference executor does not run " + ops + " of '" + onnx_path +
                             "'");
  }
  graph::ExecuteOptions options;
  options.opset = report.opset;
  graph::ValueMap inputs;
  inputs[package.input_name] =
      graph::Value::floats(package.input_shape, model_seeded_input(seed, package.input_elements));
  const graph::ValueMap outputs = graph::execute(graph, inputs, options);
  auto it = outputs.find(package.output_name);
  if (it == outputs.end()) {
    if (outputs.size() != 1)
      throw std::runtime_error("the reference model '" + onnx_path + "' has no output '" +
                               package.output_name + "'");
    it = outputs.begin();
  }
  const std::vector<float>& output = it->second.data;
  if (static_cast<int64_t>(output.size()) != package.output_elements)
    throw std::runtime_error("the reference model '" + onnx_path + "' gives " +
                             std::to_string(output.size()) + " output values, the package " +
                             std::to_string(package.output_elements));
  double max_abs = 0;
  for (float v : output) max_abs = std::max(max_abs, std::fabs(double{v}));
  const double tolerance = std::max(1e-3 * max_abs, 1e-6);
  const int64_t n = package.output_elements;
  const int64_t count = std::min<int64_t>(n, kMaxSamples);
  std::vector<tracker::ModelSample> samples;
  samples.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    // Evenly spaced, the first and the last included.
    const int64_t index = count == 1 ? 0 : i * (n - 1) / (count - 1);
    samples.push_back({index, double{output[static_cast<size_t>(index)]}, tolerance});
  }
  return samples;
}

ModelMeasureOutcome measure_model(const ModelMeasureRequest& request) {
  if (!tracker::valid_model_name(request.model))
    throw std::runtime_error("--model '" + request.model +
                             "' must be a package folder name (1 to 100 characters of "
                             "[A-Za-z0-9._-], not starting with '.')");
  ModelMeasureOutcome out;
  try {
    out.package = tracker::read_model_package(
        (std::filesystem::path(request.models_dir) / request.model).string());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  const tracker::ModelPackageFacts& package = out.package;
  tracker::ModelMeasureInput& input = out.input;
  input.model = request.model;
  input.manifest_sha256 = package.manifest_sha256;
  input.seed = request.seed;
  input.options.number = 1;
  input.options.repeat = request.runs;
  input.options.timeout_s = request.timeout_s;
  input.warmup = request.warmup;
  input.options.validate();
  if (!request.reference.empty()) {
    input.samples = model_reference_samples(request.reference, package, request.seed);
    spdlog::info("{} reference samples of '{}' from the CPU reference executor",
                 input.samples.size(), request.reference);
  }

  // Open the records first: a bad path must not cost a measurement.
  RecordStore store(request.db);

  tracker::Hello hello;
  hello.role = tracker::Role::kClient;
  hello.token = request.token;
  hello.name = "webtune measure-model";
  tracker::TrackerClient client(request.tracker_url, hello);
  tracker::SubmitItem item;
  item.tag = 1;
  item.key = request.key;
  item.input = input.to_json();
  const auto accepted = client.submit({item});
  if (accepted.size() != 1) throw std::runtime_error("the tracker accepted no job");
  const uint64_t job = accepted[0].second;
  spdlog::info("submitted model job {} ({} on key {})", job, request.model, request.key);

  const double wait_s = request.wait_s > 0 ? request.wait_s : 3 * (request.timeout_s + 30) + 120;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
  std::optional<tracker::ClientResult> result;
  while (!result && std::chrono::steady_clock::now() < deadline) {
    auto r = client.next_result(std::chrono::milliseconds(500));
    if (r && r->job == job) result = std::move(r);
  }
  if (!result) {
    client.cancel(job);
    throw std::runtime_error("no result for model job " + std::to_string(job) + " within " +
                             std::to_string(static_cast<int64_t>(wait_s)) +
                             " s: is an agent of key '" + request.key +
                             "' that runs model jobs connected?");
  }
  const MeasureResult measured = MeasureResult::from_json(result->result);

  ModelMeasurementRecord& record = out.record;
  record.model = request.model;
  record.manifest_sha256 = package.manifest_sha256;
  record.model_sha256 = package.model_sha256;
  record.target = package.target;
  record.device_key = result->key;
  record.agent = result->agent;
  record.seed = request.seed;
  record.costs = measured.costs;
  record.estimated_ms = package.estimated_ms;
  record.error = measured.error;
  record.message = measured.message;
  out.record_id = store.add_model_measurement(record);
  record.id = out.record_id;
  if (record.error == MeasureErrorNo::kNoError && !record.costs.empty()) {
    // As add_model_measurement stored them.
    record.median_ms = median_of(record.costs) * 1e3;
    record.min_ms = *std::min_element(record.costs.begin(), record.costs.end()) * 1e3;
    out.max_ms = *std::max_element(record.costs.begin(), record.costs.end()) * 1e3;
    if (record.median_ms && record.estimated_ms && *record.estimated_ms > 0)
      out.ratio = *record.median_ms / *record.estimated_ms;
  }
  return out;
}

std::string format_model_measurement(const ModelMeasureOutcome& outcome, const std::string& db) {
  const ModelMeasurementRecord& r = outcome.record;
  std::string text;
  char line[1024];
  std::snprintf(line, sizeof line, "model     %s (%s, target %s)\n", r.model.c_str(),
                outcome.package.model_name.c_str(), r.target.c_str());
  text += line;
  std::snprintf(line, sizeof line, "measured  on %s by %s, seed %llu, %zu reference samples\n",
                r.device_key.empty() ? "-" : r.device_key.c_str(),
                r.agent.empty() ? "-" : r.agent.c_str(), static_cast<unsigned long long>(r.seed),
                outcome.input.samples.size());
  text += line;
  if (outcome.ok() && r.median_ms && r.min_ms && outcome.max_ms) {
    std::snprintf(line, sizeof line,
                  "latency   median %.3f ms  min %.3f ms  max %.3f ms  (%zu runs after %d "
                  "warm-up)\n",
                  *r.median_ms, *r.min_ms, *outcome.max_ms, r.costs.size(), outcome.input.warmup);
  } else {
    std::snprintf(line, sizeof line, "error     %s: %.900s\n",
                  std::string(error_name(r.error)).c_str(), r.message.c_str());
  }
  text += line;
  if (r.estimated_ms) {
    std::snprintf(line, sizeof line, "estimate  %.3f ms (sum of weight x best cost)",
                  *r.estimated_ms);
    text += line;
    if (outcome.ratio) {
      std::snprintf(line, sizeof line, "  measured / estimate %.3f", *outcome.ratio);
      text += line;
    }
    text += "\n";
  } else {
    text += "estimate  none (a task of the package has no recorded cost)\n";
  }
  std::snprintf(line, sizeof line, "record    %lld in %s\n",
                static_cast<long long>(outcome.record_id), db.c_str());
  text += line;
  return text;
}

}  // namespace webtune::deploy
