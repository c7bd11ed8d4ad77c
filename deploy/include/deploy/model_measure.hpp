#pragma once
/// \file model_measure.hpp
/// `webtune measure-model` as a library (issue 16 item 3, MODEL_JOBS.md): reads a built package
/// (docs/package.md), computes reference samples of its output with the CPU reference executor
/// (graph/executor.hpp) on the seeded input, submits one model job to the farm through a
/// tracker (docs/protocol.md "Model jobs"), waits for its result, records it in the records
/// database (RecordStore::add_model_measurement) and summarises it beside the package's
/// estimate (Σ weight × best cost, the manifest's estimated_ms).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracker/model_job.hpp"
#include "tuner/records.hpp"

namespace webtune::deploy {

/// The model's seeded input: seeded_tensor(seed, 0, elements) (codegen/seeded_random.hpp), the
/// values every agent regenerates for a model job.
std::vector<float> model_seeded_input(uint64_t seed, int64_t elements);

/// Reference samples of the first output of the ONNX model at `onnx_path`, run by the CPU
/// reference executor on `model_seeded_input(seed, package.input_elements)` (shaped as the
/// package's input, under its name): every output element when the output has at most
/// kMaxSamples of them, else kMaxSamples evenly spaced ones (the first and last among them).
/// Each sample's absolute tolerance is 1e-3 × max |output| (issue 16's accuracy bound for a
/// package against the reference), at least 1e-6. Throws std::runtime_error when the model
/// cannot be imported or has operators the executor does not run (naming them), or when its
/// output's element count differs from the package's.
std::vector<tracker::ModelSample> model_reference_samples(const std::string& onnx_path,
                                                          const tracker::ModelPackageFacts& package,
                                                          uint64_t seed);

/// What `webtune measure-model` is asked to do.
struct ModelMeasureRequest {
  std::string tracker_url;  ///< ws://HOST:PORT/ws or wss://
  std::string token;        ///< client token ("" when the tracker needs none)
  std::string models_dir;   ///< the folder of packages the tracker serves (its --models)
  std::string model;        ///< the package's folder name under models_dir
  std::string key;          ///< agent key or key pattern; its family must run the target
  std::string db;           ///< records file
  std::string reference;    ///< the ONNX model for reference samples ("" = no samples)
  uint64_t seed = 1;
  int runs = 20;           ///< costs (MeasureOptions::repeat), each one inference
  int warmup = 3;          ///< untimed inferences first
  double timeout_s = 120;  ///< the job's whole budget (download, load, warm-up, runs)
  /// How long to wait for the result after the submit (queue time included); 0: the job's
  /// worst case, 3 × (timeout_s + 30 s) + 120 s.
  double wait_s = 0;
};

/// What came back, as recorded.
struct ModelMeasureOutcome {
  tracker::ModelPackageFacts package;
  tracker::ModelMeasureInput input;  ///< as submitted
  ModelMeasurementRecord record;     ///< as stored (median_ms, min_ms filled in)
  int64_t record_id = 0;
  std::optional<double> max_ms;  ///< slowest cost (ms); nullopt on error
  std::optional<double> ratio;   ///< median / estimate; nullopt without either
  bool ok() const { return record.error == MeasureErrorNo::kNoError; }
};

/// Does the whole job: reads `request.models_dir`/`request.model`, samples (when `reference`
/// is set), connects as a client, submits one model job, waits up to `wait_s` for its result,
/// records it (a failed measurement too, with its error) and returns it. Throws
/// std::runtime_error naming what failed when the package cannot be read, the tracker refuses
/// the connection or the submit (its message, e.g. "bad_message: batch[0]: model job refused:
/// ..."), or no result comes in time (the job is cancelled then; nothing is recorded).
ModelMeasureOutcome measure_model(const ModelMeasureRequest& request);

/// The summary `webtune measure-model` prints (stdout), e.g.
///   model     resnet18-webgl2 (resnet18, target webgl2)
///   measured  on webgl2:swiftshader:... by tab-1, seed 1, 128 reference samples
///   latency   median 412.301 ms  min 409.800 ms  max 420.000 ms  (20 runs after 3 warm-up)
///   estimate  380.200 ms (sum of weight x best cost)  measured / estimate 1.084
///   record    17 in records.db
/// A failed job says "error     WRONG_ANSWER: <message>" instead of latency.
std::string format_model_measurement(const ModelMeasureOutcome& outcome, const std::string& db);

}  // namespace webtune::deploy
