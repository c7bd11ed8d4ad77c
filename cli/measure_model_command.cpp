/// \file measure_model_command.cpp
/// `webtune measure-model --tracker URL --models DIR --model NAME --key KEY --db RECORDS
/// [--runs 20] [--warmup 3] [--reference MODEL.onnx] [--timeout S] [--seed N]`: one whole
/// compiled model measured end to end on the farm (issue 16 item 3, MODEL_JOBS.md), recorded in
/// the records and printed beside its estimate. The work is deploy::measure_model
/// (deploy/model_measure.hpp); this file only parses flags.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "deploy/model_measure.hpp"
#include "option_checks.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune::cli {

namespace {

struct MeasureModelArgs {
  deploy::ModelMeasureRequest request;
  std::string ca_file;
};

}  // namespace

void add_measure_model_command(CLI::App& app) {
  auto args = std::make_shared<MeasureModelArgs>();
  deploy::ModelMeasureRequest& r = args->request;
  CLI::App* cmd = app.add_subcommand(
      "measure-model",
      "Measure a built model package end to end on the farm (one model job), record it and "
      "print its median latency beside the package's estimate");
  cmd->add_option("--tracker", r.tracker_url, "ws://HOST:PORT/ws or wss://HOST:PORT/ws")
      ->required();
  cmd->add_option("--token", r.token, "client token (or $WEBTUNE_CLIENT_TOKEN)")
      ->envname("WEBTUNE_CLIENT_TOKEN");
  cmd->add_option("--ca-file", args->ca_file,
                  "CA certificate(s) that signed a wss:// tracker's certificate (or "
                  "$WEBTUNE_CA_FILE)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--models", r.models_dir,
                  "the folder of packages the tracker serves (its --models): the package is read "
                  "here for its manifest hash, shapes and estimate")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--model", r.model, "the package's folder name under --models")->required();
  cmd->add_option("--key", r.key,
                  "agent key or prefix; its family must run the package's target (webgl2, "
                  "webgpu, wasm, gles for gles-frag / gles-compute)")
      ->required();
  cmd->add_option("--db", r.db, "SQLite records file the measurement is added to")->required();
  cmd->add_option("--runs", r.runs, "timed inferences (costs), each upload + steps + read-back")
      ->check(int_range(1, kMaxRepeat))
      ->capture_default_str();
  cmd->add_option("--warmup", r.warmup, "untimed inferences before them")
      ->check(int_range(0, tracker::kMaxModelWarmup))
      ->capture_default_str();
  cmd->add_option("--reference", r.reference,
                  "the ONNX model: reference samples of the output from the CPU reference "
                  "executor on the same seeded input (a miss is WRONG_ANSWER)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--timeout", r.timeout_s,
                  "the job's whole budget in seconds (download, load, warm-up, runs)")
      ->check(seconds(kMaxTimeoutS))
      ->capture_default_str();
  cmd->add_option("--seed", r.seed, "seed of the model's input (seeded_random, input 0)")
      ->capture_default_str();
  cmd->add_option("--wait", r.wait_s,
                  "seconds to wait for the result, queue time included (0: the job's worst "
                  "case, 3 x (timeout + 30) + 120)")
      ->check(seconds(7 * 24 * 3600.0, true))
      ->capture_default_str();
  cmd->footer(
      "Output (latency, estimate, measured / estimate, record id) goes to stdout, logs and "
      "errors to stderr.\nExit status: 0 = measured; 1 = the job failed (its error is printed "
      "and recorded), the tracker refused it, or no result came in time.");
  cmd->callback([args] {
    if (!args->ca_file.empty()) tracker::set_tracker_ca_file(args->ca_file);
    const deploy::ModelMeasureOutcome outcome = deploy::measure_model(args->request);
    std::fputs(deploy::format_model_measurement(outcome, args->request.db).c_str(), stdout);
    std::fflush(stdout);
    if (!outcome.ok()) {
      spdlog::error("measure-model: {}: {}", error_name(outcome.record.error),
                    outcome.record.message);
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace webtune::cli
