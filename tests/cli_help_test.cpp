/// \file cli_help_test.cpp
/// The `webtune` command line as a user meets it (issue 17, item 3), without running anything:
///  - every subcommand and every option has help text, found by walking the app that main.cpp
///    parses with (build_app);
///  - options that cannot work are refused at parse time, before any command callback runs, with
///    the exact message (an unknown tuner, target or WebGL backend, values out of range);
///  - the exit status of each kind of parse error;
///  - the time line of tune's progress (elapsed, ETA) and the runner's words for "no agent can
///    serve the key", checked on values.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "commands.hpp"
#include "progress_line.hpp"
#include "tuner/measure_pipeline.hpp"

namespace webtune::cli {
namespace {

namespace bj = boost::json;

/// "webtune tune --number: no help text" for each option (and subcommand) of `app` and below
/// without a description.
void find_undocumented(CLI::App& app, const std::string& path, std::vector<std::string>& missing,
                       int* options_seen) {
  if (app.get_parent() != nullptr && app.get_description().empty())
    missing.push_back(path + ": the subcommand has no description");
  for (const CLI::Option* option : app.get_options()) {
    ++*options_seen;
    if (option->get_description().empty())
      missing.push_back(path + " " + option->get_name(false, true) + ": no help text");
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    find_undocumented(*sub, path + " " + sub->get_name(), missing, options_seen);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TEST(CliHelp, TheWalkerFindsAnOptionWithoutHelpText) {
  // The walker itself: an app with one documented and one undocumented option, one level down.
  CLI::App app{"top"};
  CLI::App* sub = app.add_subcommand("sub", "a subcommand");
  int a = 0, b = 0;
  sub->add_option("--documented", a, "has words");
  sub->add_option("--bare", b);
  std::vector<std::string> missing;
  int seen = 0;
  find_undocumented(app, "webtune", missing, &seen);
  EXPECT_EQ(joined(missing), "webtune sub --bare: no help text\n");
  EXPECT_EQ(seen, 4);  // --help of each, and the two
}

TEST(CliHelp, EveryOptionOfEverySubcommandHasHelpText) {
  CLI::App app;
  std::string log_level = "info";
  build_app(app, log_level);
  std::vector<std::string> missing;
  int seen = 0;
  find_undocumented(app, "webtune", missing, &seen);
  EXPECT_EQ(joined(missing), "") << "options and subcommands without help text";
  // The walk reached the whole program: every subcommand main.cpp registers, and their options.
  std::vector<std::string> names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  for (const char* expected :
       {"measure", "space", "device", "tracker", "agent", "log", "tune", "serve", "farm",
        "artifact", "import", "zoo", "run", "build", "measure-model"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  EXPECT_GT(seen, 150);
}

/// Parses `args` (after the program name) with the real app; returns the message of the parse
/// error it throws ("" when it parses). Only for arguments that are refused: a command line that
/// parses runs its command.
std::string refusal(std::vector<std::string> args, int* status = nullptr) {
  CLI::App app;
  std::string log_level = "info";
  build_app(app, log_level);
  args.insert(args.begin(), "webtune");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    if (status) *status = exit_status(e, e.get_exit_code());
    return e.what();
  }
  ADD_FAILURE() << "the command line parsed (and ran)";
  return "";
}

TEST(CliOptions, AnUnknownTunerIsRefusedNamingTheKnownOnes) {
  int status = -1;
  EXPECT_EQ(refusal({"tune", "--workload", "dense:64,64,64", "--tuner", "bayes"}, &status),
            "--tuner: 'bayes' is not a known tuner (known: xgb, ga, random, grid)");
  EXPECT_EQ(status, kExitUsage);
}

TEST(CliOptions, AnUnknownTargetOrBackendIsRefusedNamingTheKnownOnes) {
  const std::string target =
      refusal({"tune", "--workload", "dense:64,64,64", "--target", "webgl3"});
  EXPECT_EQ(target.rfind("--target: ", 0), 0u) << target;
  for (const char* known : {"'webgl3'", "gles-frag", "gles-compute", "webgl2", "webgpu", "wasm"})
    EXPECT_NE(target.find(known), std::string::npos) << known << " not in: " << target;
  EXPECT_EQ(refusal({"tune", "--workload", "dense:64,64,64", "--farm-gl", "angle"}),
            "--farm-gl: 'angle' is not a known WebGL backend (known: swiftshader, llvmpipe)");
}

TEST(CliOptions, MeasurementOptionsAreRangeChecked) {
  const std::vector<std::string> tune = {"tune", "--workload", "dense:64,64,64"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = tune;
    args.insert(args.end(), extra.begin(), extra.end());
    return refusal(args);
  };
  EXPECT_EQ(with({"--number", "0"}), "--number: Value 0 not in range 1 to 1000000");
  EXPECT_EQ(with({"--repeat", "1001"}), "--repeat: Value 1001 not in range 1 to 1000");
  EXPECT_EQ(with({"--min-repeat-ms", "-1"}), "--min-repeat-ms: Value -1 not in range 0 to 60000");
  EXPECT_EQ(with({"--agent-wait", "-1"}), "--agent-wait: Value -1 not in range 0 to 604800");
  EXPECT_EQ(with({"--verify-tolerance", "0.5"}),
            "--verify-tolerance: Value 0.5 is not a number in [1, 1000]");
  EXPECT_EQ(with({"--reconnect-timeout", "nan"}),
            "--reconnect-timeout: Value nan is not a number of seconds in (0, 604800]");
  EXPECT_EQ(refusal({"space", "--workload", "dense:64,64,64", "--max-threads", "0"}),
            "--max-threads: Value 0 not in range 1 to 256");
  EXPECT_EQ(refusal({"space", "--workload", "dense:64,64,64", "--max-texture-size", "70000"}),
            "--max-texture-size: Value 70000 not in range 1 to 65536");
}

TEST(CliOptions, ParseErrorsExitTwoHelpZeroAndACommandsOwnStatusStays) {
  int status = -1;
  refusal({"tune", "--no-such-option"}, &status);
  EXPECT_EQ(status, kExitUsage);
  refusal({"no-such-command"}, &status);
  EXPECT_EQ(status, kExitUsage);
  EXPECT_EQ(exit_status(CLI::CallForHelp(), 0), kExitOk);
  EXPECT_EQ(exit_status(CLI::RuntimeError(kExitNoAgent), kExitNoAgent), kExitNoAgent);
  EXPECT_EQ(exit_status(CLI::RuntimeError(130), 130), 130);
  EXPECT_EQ(exit_status(CLI::ValidationError("x"), 105), kExitUsage);
}

TEST(CliProgress, DurationsReadAsMinutesAndHours) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(59.4), "0:59");
  EXPECT_EQ(format_duration(59.6), "1:00");
  EXPECT_EQ(format_duration(65), "1:05");
  EXPECT_EQ(format_duration(3599), "59:59");
  EXPECT_EQ(format_duration(3600), "1:00:00");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-3), "0:00");
  EXPECT_EQ(format_duration(std::nan("")), "0:00");
}

TEST(CliProgress, EtaFollowsTheRateOfThisRunAndIsADashUntilThereIsOne) {
  EXPECT_EQ(format_elapsed_eta(0, 0, 100), "elapsed 0:00, ETA \u2014");
  EXPECT_EQ(format_elapsed_eta(30, 0, 100), "elapsed 0:30, ETA \u2014");
  EXPECT_EQ(format_elapsed_eta(0, 5, 100), "elapsed 0:00, ETA \u2014");
  // 20 trials in 60 s: 3 s a trial, 40 left.
  EXPECT_EQ(format_elapsed_eta(60, 20, 40), "elapsed 1:00, ETA 2:00");
  EXPECT_EQ(format_elapsed_eta(60, 20, 1200), "elapsed 1:00, ETA 1:00:00");
  // A wall-clock budget ends the run sooner.
  EXPECT_EQ(format_elapsed_eta(60, 20, 40, 45), "elapsed 1:00, ETA 0:45");
  EXPECT_EQ(format_elapsed_eta(60, 20, 40, 500), "elapsed 1:00, ETA 2:00");
  EXPECT_EQ(format_elapsed_eta(60, 20, 0), "elapsed 1:00, ETA 0:00");
}

SessionProgress session(std::vector<std::pair<int, int>> trials_resumed, int per_task,
                        int64_t total, double elapsed_s) {
  SessionProgress p;
  for (const auto& [trials, resumed] : trials_resumed) {
    TaskProgress t;
    t.trials = trials;
    t.resumed = resumed;
    t.done = per_task > 0 && trials >= per_task;
    p.trials += trials;
    p.tasks.push_back(t);
  }
  p.trials_per_task = per_task;
  p.total_trials = total;
  p.elapsed_s = elapsed_s;
  return p;
}

TEST(CliProgress, TrialsLeftHonourTheCapPerTaskAndTheTotalBudget) {
  // A cap of 16 per task: 16-4 + 16-0, and a finished task adds nothing.
  EXPECT_EQ(trials_left(session({{4, 0}, {0, 0}}, 16, 0, 0)), 28);
  EXPECT_EQ(trials_left(session({{16, 0}, {10, 0}}, 16, 0, 0)), 6);
  // A total budget alone, and both (the smaller bound wins).
  EXPECT_EQ(trials_left(session({{30, 0}, {20, 0}}, 0, 200, 0)), 150);
  EXPECT_EQ(trials_left(session({{30, 0}, {20, 0}}, 40, 200, 0)), 30);
  EXPECT_EQ(trials_left(session({{30, 0}, {20, 0}}, 100, 60, 0)), 10);
  EXPECT_EQ(trials_left(session({{16, 0}, {16, 0}}, 16, 0, 0)), 0);
  // Resumed trials count toward the budget but not toward this run's rate.
  EXPECT_EQ(trials_this_run(session({{12, 8}, {4, 0}}, 16, 0, 0)), 8);
}

TEST(CliProgress, TheTimeLineSaysElapsedEtaAndWhatIsLeft) {
  // 24 trials, 8 of them resumed: 16 in this run in 40 s, 2.5 s a trial; 8 left.
  EXPECT_EQ(format_time_line(session({{16, 8}, {8, 0}}, 16, 0, 40)),
            "elapsed 0:40, ETA 0:20 (16 trials in this run, at most 8 left)");
  EXPECT_EQ(format_time_line(session({{0, 0}}, 16, 0, 0)),
            "elapsed 0:00, ETA \u2014 (0 trials in this run, at most 16 left)");
  EXPECT_EQ(format_time_line(session({{1, 0}}, 0, 9, 2), 10),
            "elapsed 0:02, ETA 0:08 (1 trial in this run, at most 8 left)");
  EXPECT_EQ(format_time_line(session({{16, 0}}, 16, 0, 50)),
            "elapsed 0:50, ETA 0:00 (16 trials in this run, none left)");
}

bj::object agents_answer(int agents, int idle, int busy, int quarantined, int unresponsive,
                         bj::object reasons = {}) {
  return bj::object{{"key", "K"},
                    {"agents", agents},
                    {"idle", idle},
                    {"busy", busy},
                    {"quarantined", quarantined},
                    {"unresponsive", unresponsive},
                    {"quarantine_reasons", std::move(reasons)}};
}

TEST(AgentShortage, SaysWhyNoAgentCanServeTheKey) {
  const std::string k = "webgl2:swiftshader:chromium-156:linux-x86_64:2t";
  EXPECT_EQ(agent_shortage(k, agents_answer(0, 0, 0, 0, 0)),
            "no agent connected for key '" + k + "'");
  EXPECT_EQ(agent_shortage("gles", agents_answer(2, 0, 0, 2, 0, {{"lease expired \u00d73", 2}})),
            "all 2 agents for key 'gles' are quarantined (lease expired \u00d73)");
  EXPECT_EQ(agent_shortage("gles", agents_answer(1, 0, 0, 1, 0, {{"lease expired \u00d73", 1}})),
            "the only agent for key 'gles' is quarantined (lease expired \u00d73)");
  EXPECT_EQ(agent_shortage("gles", agents_answer(2, 0, 0, 0, 2)),
            "all 2 agents for key 'gles' are unresponsive (their leases expired and nothing was "
            "heard from them since)");
  EXPECT_EQ(agent_shortage("gles", agents_answer(3, 0, 0, 2, 1,
                                                 {{"RUNTIME_DEVICE \u00d73", 1},
                                                  {"suspect (a refused result)", 1}})),
            "none of the 3 agents for key 'gles' can take a job: 2 quarantined (1 RUNTIME_DEVICE "
            "\u00d73; 1 suspect (a refused result)), 1 unresponsive");
}

TEST(AgentShortage, AnIdleOrBusyAgentIsEnough) {
  EXPECT_EQ(agent_shortage("gles", agents_answer(3, 1, 0, 2, 0)), "");
  EXPECT_EQ(agent_shortage("gles", agents_answer(3, 0, 1, 1, 1)), "");
  bj::object partial = agents_answer(1, 1, 0, 0, 0);
  partial.erase("busy");
  EXPECT_THROW(agent_shortage("gles", partial), std::invalid_argument);
}

}  // namespace
}  // namespace webtune::cli
