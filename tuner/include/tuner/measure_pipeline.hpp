/// \file measure_pipeline.hpp
/// AutoTVM's measure pipeline: a builder turns config entities into measure inputs (kernel
/// artifact, seed, reference samples), a runner has them measured by the farm through the
/// tracker and returns one measure result per input, in order.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "codegen/measure.hpp"
#include "codegen/task.hpp"

namespace webtune {

namespace tracker {
class TrackerClient;
}

/// Builds measure inputs for one task. Reference samples are computed once per builder.
class Builder {
 public:
  Builder(const Task& task, uint64_t seed, int samples, MeasureOptions options);
  /// The input for `entity`, or an error result (INSTANTIATION for an invalid config,
  /// COMPILE_HOST for an emitter failure) in `error`.
  bool build(const ConfigEntity& entity, MeasureInput* input, MeasureResult* error) const;

 private:
  const Task& task_;
  uint64_t seed_;
  MeasureOptions options_;
  std::vector<ReferenceSample> samples_;
};

/// Runs measure inputs on the farm's agents for one key. The whole batch is submitted at once,
/// so as many run in parallel as the tracker has idle agents for the key.
class TrackerRunner {
 public:
  /// Connects as a client. `key` is a key or prefix ("gles", "gles:llvmpipe"). Throws
  /// std::runtime_error when the tracker refuses or cannot be reached.
  TrackerRunner(const std::string& url, const std::string& token, const std::string& key);
  ~TrackerRunner();

  /// Waits until some agent serves `key` (or `timeout`); returns its full key and device JSON.
  /// Throws std::runtime_error on timeout, or when agents of different keys match (ask for a
  /// full key then).
  std::pair<std::string, std::string> wait_for_device(std::chrono::seconds timeout);

  /// Measures the inputs; results come back in input order, with the agent that measured each
  /// in `agents`. A job the tracker gives up on comes back as its error result.
  std::vector<MeasureResult> run(const std::vector<MeasureInput>& inputs,
                                 std::vector<std::string>* agents);
  /// Lease of each job: the measure timeout plus this margin for compile and transfer.
  std::chrono::milliseconds lease_margin{30000};

 private:
  std::unique_ptr<tracker::TrackerClient> client_;
  std::string key_;
  uint64_t next_tag_ = 1;
};

}  // namespace webtune
