/// \file quad_layer_records.hpp
/// A records file that makes a model's frag package chain its convolutions through quad layers
/// (OutputLayout::quad_layers, deploy/planner.cpp): every conv2d and depthwise_conv2d task gets
/// one trial of a config with out_cols 4, out_rows 4 or 8 (alternating by task, so producers and
/// readers of both heights meet) and packing c, its other knobs drawn from a seeded generator;
/// dense tasks keep their default. The device stores limits under which those configs are valid
/// (8 draw buffers, 8192 texels a side: SwiftShader's and llvmpipe's). Header-only.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>

#include "codegen/task.hpp"
#include "graph/task_extraction.hpp"
#include "tuner/records.hpp"

namespace webtune::testing_support {

/// The limits quad_layer_config's configs are valid under.
inline DeviceLimits quad_layer_limits() {
  DeviceLimits limits;
  limits.max_texture_size = 8192;
  limits.max_draw_buffers = 8;
  return limits;
}

/// A valid gles-frag config of `workload` with out_cols 4, out_rows `rows` and packing c, the
/// other knobs drawn from `rng`. Throws std::runtime_error when none is found.
inline ConfigEntity quad_layer_config(const Workload& workload, int rows, std::mt19937_64& rng) {
  const Task task = Task::create(workload, Target::kGlesFrag, quad_layer_limits());
  std::uniform_int_distribution<int64_t> index(0, task.space->raw_size() - 1);
  for (int tries = 0; tries < 400000; ++tries) {
    const ConfigEntity e = task.space->get(index(rng));
    if (e.get_int("out_cols") == 4 && e.get_int("out_rows") == rows &&
        e.get_string("packing") == "c" && e.get_string("stage") == "fragment" &&
        task.space->is_valid(e))
      return e;
  }
  throw std::runtime_error("no quad-layer config of " + workload.key());
}

/// Writes `db_path`: for each convolution task of the model at `onnx_path` (fusion passes on,
/// as `webtune build`), one successful gles-frag trial of device `device_key` (whose limits are
/// quad_layer_limits) with a quad_layer_config. Returns how many tasks got one.
inline int write_quad_layer_records(const std::string& onnx_path, const std::string& db_path,
                                    const std::string& device_key, uint64_t seed) {
  namespace bj = boost::json;
  RecordStore store(db_path);
  store.upsert_device(device_key,
                      bj::serialize(bj::object{{"limits", quad_layer_limits().to_json()}}));
  std::mt19937_64 rng(seed);
  int written = 0;
  for (const graph::ExtractedTask& t : graph::extract_model_tasks(onnx_path).tasks) {
    if (t.workload.op == OpKind::kDense) continue;
    const ConfigEntity config = quad_layer_config(t.workload, written % 2 == 0 ? 8 : 4, rng);
    const int64_t job = store.open_job(t.workload, Target::kGlesFrag, device_key);
    TrialRecord trial;
    trial.config_index = config.index();
    trial.config_json = bj::serialize(config.to_json());
    trial.result.costs = {0.001, 0.001};
    trial.agent = "test";
    store.add_trials(job, {trial});
    store.set_status(job, "done");
    ++written;
  }
  return written;
}

}  // namespace webtune::testing_support
