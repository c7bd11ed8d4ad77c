/// \file tune_command.cpp
/// `webtune tune --workload FILE [--tasks C2,C4] --target gles-frag --trials 200 --db webtune.db
/// [--tracker ws://...]`: tunes a model's tasks on the farm and records every trial.
/// `webtune tune --model MODEL.onnx --trials N` takes the tasks from an ONNX model (imported,
/// fused and extracted as `webtune import` does, graph/task_extraction.hpp), each weighted by
/// how often the model runs it, and spends N trials in total on them (TVM's `tvmc tune`), by
/// the gradient task scheduler unless --schedule says otherwise, recorded as a model run named
/// after the file.
/// `--total-trials N` gives the whole tuning one budget that the task scheduler (`--schedule
/// gradient`, Ansor's, the default then; or round-robin) spends where it cuts the estimated model
/// latency most; `--model-name NAME` records the tuning as a model run whose estimated latency
/// the dashboard plots (tuner/tune_session.hpp). Without
/// --tracker it starts an embedded tracker and --local-agents native agents (headless Chromium
/// tabs for --target webgl2), and prints the URL of the tracker's dashboard over the records
/// (kept up --linger seconds after the tuning).
///
/// Every option is checked before anything starts (no farm, no tracker connection, no records
/// file): a bad value, an unknown tuner or target, a workload spec or model that cannot be read
/// ends with status 2 (exit_codes.hpp).
///
/// Progress goes to stderr (redrawn in place on a terminal unless a log line came in between):
/// one line per task, the session's line, and the time line (elapsed, ETA; progress_line.hpp).
/// While no agent can serve the key (none connected, all quarantined) the runner says so at once
/// and every 10 s; after --agent-wait seconds without one the tuning ends with status 3.
///
/// It outlives the tracker (reconnects and resubmits, tuner/measure_pipeline.hpp). SIGINT,
/// SIGTERM and SIGHUP drop the batch in flight, mark the unfinished jobs "interrupted" and exit
/// with 128 + the signal (130, 143, 129); running the same command again resumes them. A second
/// signal kills at once (the handler is reset after the first).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "commands.hpp"
#include "deploy/record_selection.hpp"
#include "graph/task_extraction.hpp"
#include "local_farm.hpp"
#include "log_lines.hpp"
#include "option_checks.hpp"
#include "progress_line.hpp"
#include "tracker/tracker_client.hpp"
#include "tuner/tune_session.hpp"
#include "tuner/tune_target.hpp"

namespace webtune::cli {

namespace {

struct TuneArgs {
  std::string model;              ///< --model: an ONNX file instead of --workload
  std::vector<std::string> dims;  ///< --dim NAME=VALUE bindings for the model's inputs
  std::string workload, tasks, target = "gles-frag", db = "webtune.db", tracker, token, key;
  std::string ca_file;
  std::string farm_gl = "swiftshader";
  std::string farm_browser;  // "": $WEBTUNE_BROWSER, else chromium (browser_farm.hpp)
  int local_agents = 1;
  int agent_wait_s = 120;
  int linger_s = 0;
  double reconnect_timeout_s = 600;
  double lease_margin_s = 30;
  TuneOptions options;
  bool trials_given = false, schedule_given = false;  // set from the parsed options
};

/// The signal that asked the tuning to stop (0: none). Set by the handler, read by the runner's
/// waits; a lock-free atomic is safe to store from a signal handler.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int signal) {
  g_stop_signal.store(signal);
}

/// Installs on_stop_signal for SIGINT, SIGTERM and SIGHUP, once: SA_RESETHAND makes a second
/// signal take its default action (end the process) for a user who does not want to wait.
void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
}

/// What run_tune needs, worked out from the options before anything starts.
struct Prepared {
  TuneTarget target;
  std::vector<WorkloadFileTask> tasks;
  std::string key;
};

/// Checks and resolves everything the options name (budget, target, tasks); throws
/// std::invalid_argument or std::runtime_error (an unreadable file) naming what is wrong.
/// Starts nothing.
Prepared prepare(TuneArgs& args) {
  if (!args.model.empty()) {
    // A model's --trials are for all its tasks together, as `tvmc tune --trials` counts them.
    if (args.options.total_trials == 0) {
      args.options.total_trials = args.options.trials;
      args.trials_given = false;
    }
    if (args.options.model_name.empty())
      args.options.model_name = std::filesystem::path(args.model).stem().string();
  }
  // A total budget without --trials puts no cap on a task, and lets the gradient scheduler
  // decide unless --schedule says otherwise.
  if (args.options.total_trials > 0) {
    if (!args.trials_given) args.options.trials = 0;
    if (!args.schedule_given) args.options.schedule = "gradient";
  }
  Prepared p;
  p.target = tune_target_from_name(args.target);
  args.options.target = p.target.kernel;
  if (!args.model.empty()) {
    graph::ImportOptions import;
    import.symbolic_dims = symbolic_dims(args.dims);
    try {
      p.tasks = graph::tuning_tasks(graph::extract_model_tasks(args.model, import));
    } catch (const graph::GraphError& e) {
      throw std::invalid_argument(std::string("--model: ") + e.what());
    }
    if (p.tasks.empty())
      throw std::invalid_argument("--model: " + args.model +
                                  " has no Conv, Gemm or MatMul that webtune can tune");
    p.tasks = pick_tasks(std::move(p.tasks), args.tasks, args.model);
  } else {
    try {
      p.tasks = resolve_workloads(args.workload, args.tasks);
    } catch (const std::exception& e) {
      throw std::invalid_argument(std::string("--workload: ") + e.what());
    }
  }
  p.key = args.key.empty() ? p.target.key : args.key;
  return p;
}

void run_tune(TuneArgs& args, const Prepared& prepared) {
  const std::vector<WorkloadFileTask>& tasks = prepared.tasks;
  const TuneTarget& target = prepared.target;
  const std::string& key = prepared.key;
  if (!args.ca_file.empty()) tracker::set_tracker_ca_file(args.ca_file);
  // Opened before the farm starts: a records file that cannot be opened stops nothing running.
  RecordStore store(args.db);

  std::unique_ptr<LocalFarm> farm;
  std::string url = args.tracker;
  if (url.empty()) {
    std::optional<BrowserFarmOptions> browser;
    if (target.browser) {
      browser.emplace();
      browser->targets = target.key;
      browser->gl = args.farm_gl;
      browser->browser = args.farm_browser;
      browser->quiet = true;
    }
    farm = std::make_unique<LocalFarm>(args.local_agents, key, args.db, browser);
    url = farm->url();
    std::printf("dashboard: %s\n", farm->dashboard_url().c_str());
    std::fflush(stdout);
  }
  ReconnectPolicy policy;
  policy.give_up = std::chrono::milliseconds(static_cast<int64_t>(args.reconnect_timeout_s * 1000));
  TrackerRunner runner(url, args.token, key, policy, &g_stop_signal);
  runner.lease_margin = std::chrono::milliseconds(static_cast<int64_t>(args.lease_margin_s * 1000));
  runner.agent_wait = std::chrono::seconds(args.agent_wait_s);
  // Pins the runner: jobs go to agents of exactly this device class from now on, and results
  // measured under another key are not recorded.
  auto [device_key, device_json] = runner.wait_for_device(std::chrono::seconds(args.agent_wait_s));
  const boost::json::value device = boost::json::parse(device_json);
  DeviceLimits limits;
  if (device.is_object() && device.as_object().contains("limits"))
    limits = DeviceLimits::from_json(device.as_object().at("limits"));
  // A model is tuned to be built into a package: only configs a package can run.
  if (!args.model.empty()) {
    const DeviceLimits package_limits = deploy::package_tuning_limits(limits, target);
    if (package_limits.max_feedback_components != limits.max_feedback_components)
      std::printf(
          "model tuning: fragment-stage configs only (a package runs no vertex-stage "
          "kernel)\n");
    limits = package_limits;
  }

  store.upsert_device(device_key, device_json);
  std::string budget;
  if (args.options.total_trials > 0)
    budget =
        std::to_string(args.options.total_trials) + " trials in total" +
        (args.options.trials > 0 ? " (at most " + std::to_string(args.options.trials) + " per task)"
                                 : "");
  else
    budget = std::to_string(args.options.trials) + " trials each";
  const std::string schedule =
      args.options.schedule == "latency" ? "gradient" : args.options.schedule;
  std::printf("tuning %zu task(s) on %s (%s) with %s, %s, %s schedule; records in %s\n",
              tasks.size(), args.target.c_str(), device_key.c_str(), args.options.tuner.c_str(),
              budget.c_str(), schedule.c_str(), args.db.c_str());
  // Progress on stderr, with the logs: redrawn in place on a terminal, unless a log line came
  // in between (moving the cursor up would overwrite it).
  const bool tty = isatty(fileno(stderr));
  int lines_printed = 0;
  uint64_t log_lines_then = 0;
  TuneSession session(store, runner, device_key, limits, args.options);
  auto progress = [&](const SessionProgress& all) {
    const std::string text =
        format_progress(all) + format_time_line(all, args.options.timeout_s) + "\n";
    if (tty && lines_printed > 0 && log_lines().load() == log_lines_then)
      std::fprintf(stderr, "\033[%dA\033[J", lines_printed);  // up, and clear to the end
    std::fputs(text.c_str(), stderr);
    if (!tty) std::fputs("\n", stderr);
    std::fflush(stderr);
    lines_printed = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    log_lines_then = log_lines().load();
  };
  std::vector<TaskProgress> result = session.run(tasks, progress);
  const RunnerStats& stats = runner.stats();
  if (stats.disconnects > 0 || stats.foreign_keys > 0 || stats.stale_results > 0)
    spdlog::warn(
        "tracker: {} disconnect(s), {} reconnect(s), {} job(s) resubmitted, {} duplicate, {} "
        "foreign-key and {} stale result(s) ignored",
        stats.disconnects, stats.reconnects, stats.resubmitted, stats.duplicates,
        stats.foreign_keys, stats.stale_results);
  std::printf("\n%s", format_summary(result).c_str());
  for (const TaskProgress& p : result)
    if (!p.best_config.empty())
      std::printf("best %-8s %s\n", p.name.c_str(), p.best_config.c_str());
  if (args.options.verify_best)
    for (const TaskProgress& p : result)
      if (!p.best_config.empty())
        std::printf("verification %-8s %s\n", p.name.c_str(),
                    p.verification.empty() ? "not re-measured" : p.verification.c_str());
  std::printf("records: %s (webtune log best --db %s)\n", args.db.c_str(), args.db.c_str());
  if (farm && args.linger_s > 0) {
    // The dashboard of the embedded farm lives as long as this process: keep it up a while so
    // the results can be looked at (SIGINT/SIGTERM end it sooner).
    std::printf("dashboard stays at %s for %d s\n", farm->dashboard_url().c_str(), args.linger_s);
    std::fflush(stdout);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(args.linger_s);
    while (g_stop_signal.load() == 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand("tune", "Tune a model's tasks on the farm");
  CLI::Option* workload =
      cmd->add_option("--workload", args->workload, "workload file or inline spec (see measure)");
  CLI::Option* model = cmd->add_option(
      "--model", args->model,
      "an ONNX model: tune the tasks `webtune import` lists, --trials for all of them together, "
      "recorded as a model run");
  workload->excludes(model);
  model->excludes(workload);
  cmd->add_option("--dim", args->dims,
                  "with --model: NAME=VALUE for a symbolic input dimension, e.g. batch_size=1; "
                  "*=VALUE for every one not named (repeatable)")
      ->check(dim_binding());
  cmd->add_option("--tasks", args->tasks, "task names to tune, e.g. C2,C4,D1 (default: all)");
  cmd->add_option("--target", args->target, tune_target_help())
      ->check(parses_as([](const std::string& name) { tune_target_from_name(name); },
                        "{" + tune_target_names() + "}"))
      ->capture_default_str();
  CLI::Option* trials =
      cmd->add_option("--trials", args->options.trials,
                      "trials per task, earlier runs' included (with --total-trials: a cap per "
                      "task, none unless given; with --model: for all the model's tasks "
                      "together)")
          ->check(int_range(1, 1'000'000))
          ->capture_default_str();
  cmd->add_option("--total-trials", args->options.total_trials,
                  "trials for all the tasks together, earlier runs' included; the --schedule "
                  "decides which tasks get them")
      ->check(int_range(1, 1'000'000'000));
  cmd->add_option("--model-name", args->options.model_name,
                  "record the tuning as a model run of this name: its estimated latency (sum of "
                  "occurrences x best time) after every batch, plotted on the dashboard");
  cmd->add_option("--tuner", args->options.tuner,
                  "search strategy: xgb (a cost model of boosted trees, AutoTVM's default), ga "
                  "(genetic), random or grid")
      ->check(one_of({"xgb", "ga", "random", "grid"}, "tuner"))
      ->capture_default_str();
  cmd->add_option("--db", args->db, "SQLite records file")->capture_default_str();
  cmd->add_option("--tracker", args->tracker,
                  "ws://HOST:PORT/ws or wss://HOST:PORT/ws (default: embedded)");
  cmd->add_option("--token", args->token, "client token (or $WEBTUNE_CLIENT_TOKEN)")
      ->envname("WEBTUNE_CLIENT_TOKEN");
  cmd->add_option("--ca-file", args->ca_file,
                  "CA certificate(s) that signed a wss:// tracker's certificate (or "
                  "$WEBTUNE_CA_FILE)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--key", args->key, "agent key or prefix (default: the target's, e.g. gles)");
  cmd->add_option("--local-agents", args->local_agents,
                  "agents (browser tabs for webgl2, webgpu and wasm) of the embedded farm")
      ->check(int_range(1, 256))
      ->capture_default_str();
  cmd->add_option("--farm-gl", args->farm_gl,
                  "WebGL backend of the embedded browser farm: swiftshader or llvmpipe")
      ->check(one_of({"swiftshader", "llvmpipe"}, "WebGL backend"))
      ->capture_default_str();
  cmd->add_option("--farm-browser", args->farm_browser,
                  "browser of the embedded farm: chromium (headless) or firefox (Firefox ESR on "
                  "a private Xvfb display; default: $WEBTUNE_BROWSER, else chromium)")
      ->check(one_of({"chromium", "firefox"}, "browser"));
  cmd->add_option("--agent-wait", args->agent_wait_s,
                  "seconds to wait while no agent can serve the key (none connected, all "
                  "quarantined or unresponsive), saying why every 10 s, before giving up with "
                  "exit status 3 (0: wait for ever)")
      ->check(int_range(0, 7 * 86400))
      ->capture_default_str();
  cmd->add_option("--linger", args->linger_s,
                  "seconds the embedded farm's dashboard stays up after tuning")
      ->check(int_range(0, 7 * 86400))
      ->capture_default_str();
  cmd->add_option("--early-stopping", args->options.early_stopping,
                  "stop a task after N trials without improvement")
      ->check(int_range(1, 1'000'000'000));
  cmd->add_option("--timeout", args->options.timeout_s, "wall-clock budget in seconds (0: none)")
      ->check(seconds(1e7, true));
  cmd->add_option("--batch", args->options.batch_size, "configs per round")
      ->check(int_range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "search and input seed")->capture_default_str();
  CLI::Option* schedule =
      cmd->add_option("--schedule", args->options.schedule,
                      "which task gets the next batch: gradient (Ansor's task scheduler: where "
                      "the estimated model latency drops most; the default with --total-trials) "
                      "or round-robin (the default otherwise); latency is gradient's older name")
          ->check(CLI::IsMember({"gradient", "round-robin", "latency"}))
          ->capture_default_str();
  cmd->add_flag("--transfer", args->options.transfer,
                "warm-start the cost model from records of other workloads");
  cmd->add_option("--number", args->options.measure.number,
                  "kernel runs averaged into one cost (TVM time_evaluator's number)")
      ->check(int_range(1, kMaxNumber))
      ->capture_default_str();
  cmd->add_option("--repeat", args->options.measure.repeat,
                  "costs measured per config (TVM time_evaluator's repeat)")
      ->check(int_range(1, kMaxRepeat))
      ->capture_default_str();
  cmd->add_option("--min-repeat-ms", args->options.measure.min_repeat_ms,
                  "grow --number until one cost takes at least this many ms (0: never)")
      ->check(int_range(0, kMaxMinRepeatMs))
      ->capture_default_str();
  cmd->add_option("--run-timeout", args->options.measure.timeout_s,
                  "seconds before a kernel is RUN_TIMEOUT")
      ->check(seconds(kMaxTimeoutS))
      ->capture_default_str();
  cmd->add_flag("--verify-best", args->options.verify_best,
                "re-measure each task's best config on a second agent before believing it");
  cmd->add_option("--verify-wait", args->options.verify_wait_s,
                  "seconds a re-measurement waits for a second agent")
      ->check(seconds(86400))
      ->capture_default_str();
  cmd->add_option("--verify-tolerance", args->options.verify_tolerance,
                  "a re-measurement slower than the recorded best by more than this factor "
                  "disagrees with it")
      ->check(number_in(1, 1000))
      ->capture_default_str();
  cmd->add_option("--reconnect-timeout", args->reconnect_timeout_s,
                  "seconds to keep reconnecting to an unreachable tracker before giving up")
      ->check(seconds(7 * 86400))
      ->capture_default_str();
  cmd->add_option("--lease-margin", args->lease_margin_s,
                  "seconds added to --run-timeout for a job's lease (compile and transfer)")
      ->check(seconds(3600, true))
      ->capture_default_str();
  cmd->callback([args, trials, schedule] {
    if (args->workload.empty() && args->model.empty())
      throw CLI::ValidationError("tune", "give --workload FILE|SPEC or --model MODEL.onnx");
    args->trials_given = trials->count() > 0;
    args->schedule_given = schedule->count() > 0;
    // Everything the options name is read before anything starts: a bad one is a usage error.
    Prepared prepared;
    try {
      prepared = prepare(*args);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      throw CLI::ValidationError(e.what());
    }
    install_stop_handlers();
    try {
      run_tune(*args, prepared);
    } catch (const NoAgent& e) {
      // The records and the farm are closed by now; the unfinished jobs are marked failed.
      spdlog::error("{}", e.what());
      throw CLI::RuntimeError(kExitNoAgent);
    } catch (const Interrupted& e) {
      // Everything of run_tune (the farm, the records) is closed by now.
      spdlog::warn(
          "{}: the batch in flight was dropped; unfinished jobs are marked interrupted in {}; "
          "run the same command again to resume",
          e.what(), args->db);
      throw CLI::RuntimeError(kExitSignalBase + e.signal());
    }
  });
}

}  // namespace webtune::cli
