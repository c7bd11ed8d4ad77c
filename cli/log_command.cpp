/// \file log_command.cpp
/// `webtune log list|best|export|import --db FILE`: reads and moves the SQLite tuning records
/// (tuner/records.hpp): a table of jobs, the best config of each, AutoTVM JSON-lines logs out of
/// and into a database (tuner/autotvm_log.hpp), and one job as a Kernel Tuner cache file or T4
/// results JSON (tuner/kernel_tuner_export.hpp). docs/records.md describes the formats.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "codegen/template.hpp"
#include "commands.hpp"
#include "tuner/autotvm_log.hpp"
#include "tuner/kernel_tuner_export.hpp"
#include "tuner/records.hpp"

namespace webtune::cli {

namespace {

struct LogArgs {
  std::string db;
  std::string workload, target;  // filters: substring of key / task name; target name
  std::string format = "autotvm", out = "-", in, device_key;
  int64_t job = 0;            // export --job (kerneltuner, t4)
  bool skip_invalid = false;  // import --skip-invalid
  bool keep_foreign = false;  // import --keep-foreign
};

/// Opens a database that must exist: reading a mistyped path should not create an empty file.
std::unique_ptr<RecordStore> open_existing(const std::string& path) {
  if (!is_postgres_url(path) && !std::filesystem::exists(path))
    throw std::runtime_error("no records database at '" + path + "'");
  return std::make_unique<RecordStore>(path);
}

/// Checks a --target filter early, so a typo is an error and not an empty listing.
void check_target(const std::string& target) {
  if (!target.empty()) target_from_name(target);
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

/// Prints rows as columns padded to their widest cell; numeric columns align right.
void print_table(const std::vector<std::vector<std::string>>& rows,
                 const std::vector<bool>& right) {
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += right[c] ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : "");
      if (c + 1 < row.size()) line += "  ";
    }
    std::puts(line.c_str());
  }
}

void run_list(const LogArgs& args) {
  auto store = open_existing(args.db);
  const std::vector<TuningJobInfo> jobs = store->jobs();
  if (jobs.empty()) {
    // A note, not data: stdout stays empty.
    std::fprintf(stderr, "no tuning jobs in %s\n", args.db.c_str());
    return;
  }
  std::vector<std::vector<std::string>> rows{{"job", "task", "workload", "target", "device",
                                              "tuner", "status", "trials", "errors", "GFLOP/s"}};
  for (const TuningJobInfo& j : jobs)
    rows.push_back({std::to_string(j.id), j.task_name.empty() ? "-" : j.task_name, j.workload.key(),
                    std::string(target_name(j.target)), j.device_key,
                    j.tuner.empty() ? "-" : j.tuner, j.status, std::to_string(j.trials),
                    std::to_string(j.errors), fixed(j.best_gflops, 2)});
  print_table(rows, {true, false, false, false, false, false, false, true, true, true});
}

void run_best(const LogArgs& args) {
  check_target(args.target);
  auto store = open_existing(args.db);
  const std::vector<BestRecord> best = store->best(args.workload, args.target);
  if (best.empty()) {
    std::fprintf(stderr, "no successful trial matches in %s\n", args.db.c_str());
    return;
  }
  int misfits = 0;
  for (const BestRecord& b : best) {
    const TuningJobInfo& j = b.job;
    // A best config that its template's space no longer holds (records of another webtune, or
    // edited) is reported, not printed as if it could be built.
    try {
      config_in_space(j.workload, j.target, b.trial.config_json, true);
    } catch (const std::invalid_argument& e) {
      ++misfits;
      spdlog::error("job {} ({} {} on {}): its best trial, config {}, is left out: {}", j.id,
                    j.task_name.empty() ? "-" : j.task_name, j.workload.key(), j.device_key,
                    b.trial.config_index, e.what());
      continue;
    }
    std::printf("job %lld  %s  %s  %s  %s\n", static_cast<long long>(j.id),
                j.task_name.empty() ? "-" : j.task_name.c_str(), j.workload.key().c_str(),
                std::string(target_name(j.target)).c_str(), j.device_key.c_str());
    std::printf("  %.2f GFLOP/s  %.4f ms  config %lld (best of %lld trials)  %s\n", b.trial.gflops,
                b.trial.result.mean_cost() * 1e3, static_cast<long long>(b.trial.config_index),
                static_cast<long long>(j.trials), b.trial.config_json.c_str());
    // Whether a second agent confirmed it (webtune tune --verify-best); suspect trials are
    // never shown as a best.
    if (!b.verification)
      std::printf("  unverified (never re-measured on a second agent)\n");
    else
      std::printf("  %s: %s\n", b.verification->verdict.c_str(), b.verification->message.c_str());
  }
  if (misfits > 0)
    throw std::runtime_error(std::to_string(misfits) +
                             " job(s) hold a best config outside their template's space");
}

void run_export(const LogArgs& args) {
  check_target(args.target);
  const bool per_job = args.format == "kerneltuner" || args.format == "t4";
  if (per_job && args.job <= 0)
    throw std::runtime_error("--format " + args.format +
                             " exports one job: give --job ID "
                             "(`webtune log list` shows the ids)");
  if (per_job && (!args.workload.empty() || !args.target.empty()))
    throw std::runtime_error("--workload and --target filter --format autotvm only; --format " +
                             args.format + " takes --job");
  if (!per_job && args.job > 0)
    throw std::runtime_error(
        "--job applies to --format kerneltuner and t4; filter an autotvm "
        "export with --workload and --target");
  auto store = open_existing(args.db);
  std::ofstream file;
  if (args.out != "-") {
    file.open(args.out);
    if (!file) throw std::runtime_error("cannot write '" + args.out + "'");
  }
  std::ostream& out = args.out == "-" ? std::cout : file;
  const std::string where = args.out == "-" ? "stdout" : args.out;
  // Counts on stderr (spdlog), so that `--out -` leaves clean data on stdout.
  if (args.format == "kerneltuner") {
    const int64_t n = export_kernel_tuner_cache(*store, args.job, out);
    spdlog::info("exported job {} ({} trials) as a Kernel Tuner cache file to {}", args.job, n,
                 where);
  } else if (args.format == "t4") {
    const int64_t n = export_t4_results(*store, args.job, out);
    spdlog::info("exported job {} ({} trials) as T4 results to {}", args.job, n, where);
  } else {
    const int64_t lines = export_autotvm(*store, out, args.workload, args.target);
    spdlog::info("exported {} AutoTVM records to {}", lines, where);
  }
}

void run_import(const LogArgs& args) {
  std::ifstream file;
  if (args.in != "-") {
    file.open(args.in);
    if (!file) throw std::runtime_error("cannot read '" + args.in + "'");
  }
  // A refused log imports nothing (import_autotvm is one transaction); a database that this
  // import created is removed again rather than left behind empty.
  const bool created =
      args.db != ":memory:" && !is_postgres_url(args.db) && !std::filesystem::exists(args.db);
  AutoTvmImportOptions options;
  options.device_key = args.device_key;
  options.skip_invalid = args.skip_invalid;
  options.keep_foreign = args.keep_foreign;
  options.source = args.in == "-" ? "stdin" : std::filesystem::path(args.in).filename().string();
  AutoTvmImportReport report;
  try {
    RecordStore store(args.db);
    report = import_autotvm(store, args.in == "-" ? std::cin : file, options);
  } catch (...) {
    if (created) {
      std::error_code ignored;
      for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        std::filesystem::remove(args.db + suffix, ignored);
    }
    throw;
  }
  // What was skipped, by reason, on stderr: one "reason: count" line each.
  if (report.skipped_total() > 0) {
    std::fprintf(stderr, "skipped %lld of %lld lines:\n",
                 static_cast<long long>(report.skipped_total()),
                 static_cast<long long>(report.lines));
    for (const auto& [reason, count] : report.skipped)
      std::fprintf(stderr, "  %s: %lld\n", reason.c_str(), static_cast<long long>(count));
  }
  std::printf("imported %lld trials into %s\n", static_cast<long long>(report.imported),
              args.db.c_str());
  if (args.keep_foreign)
    std::printf("kept %lld foreign records (%lld new)\n", static_cast<long long>(report.foreign),
                static_cast<long long>(report.foreign_new));
}

void add_filters(CLI::App* cmd, LogArgs& args) {
  cmd->add_option("--workload", args.workload,
                  "only jobs whose workload key or task name contains this text");
  cmd->add_option("--target", args.target, "only jobs of this target (" + target_names() + ")");
}

}  // namespace

void add_log_command(CLI::App& app) {
  auto args = std::make_shared<LogArgs>();
  CLI::App* log = app.add_subcommand("log", "Tuning records: list, best configs, AutoTVM logs");
  log->require_subcommand(1);
  // --db on every subcommand, after it, as the usage reads: `webtune log list --db F`.
  auto add_db = [&](CLI::App* cmd) {
    cmd->add_option("--db", args->db, "records: an SQLite file or postgresql://user@host/db")
        ->required();
  };

  CLI::App* list = log->add_subcommand("list", "Table of tuning jobs and their best GFLOP/s");
  add_db(list);
  list->callback([args] { run_list(*args); });

  CLI::App* best = log->add_subcommand("best", "Best config of each job");
  add_db(best);
  add_filters(best, *args);
  best->callback([args] { run_best(*args); });

  CLI::App* exp = log->add_subcommand(
      "export",
      "Write trials as an AutoTVM JSON-lines log, or one job as a Kernel Tuner cache "
      "file or T4 results (docs/records.md)");
  add_db(exp);
  exp->add_option("--format", args->format,
                  "autotvm: AutoTVM v0.2 JSON lines (TVM's target strings and task names); "
                  "kerneltuner: a Kernel Tuner cache file of one --job; t4: the T4 results JSON "
                  "of one --job")
      ->check(CLI::IsMember({"autotvm", "kerneltuner", "t4"}))
      ->capture_default_str();
  exp->add_option("--job", args->job,
                  "the job to export with --format kerneltuner or t4 (an id of `webtune log "
                  "list`)")
      ->check(CLI::PositiveNumber);
  exp->add_option("--out", args->out, "output file, or - for stdout")->capture_default_str();
  add_filters(exp, *args);
  exp->callback([args] { run_export(*args); });

  CLI::App* imp = log->add_subcommand("import", "Read an AutoTVM JSON-lines log into the database");
  add_db(imp);
  imp->add_option("--in", args->in, "log file, or - for stdin")->required();
  imp->add_option("--device-key", args->device_key,
                  "device key of the imported jobs (default: each line's -model=, else "
                  "'imported')");
  imp->add_flag("--skip-invalid", args->skip_invalid,
                "skip lines that cannot be imported (not JSON, other targets, knobs outside the "
                "template's space, ...) and print their counts by reason on stderr, instead of "
                "refusing the whole log at the first one");
  imp->add_flag("--keep-foreign", args->keep_foreign,
                "keep lines of other targets (TopHub's mali, cuda, ...) as read-only foreign "
                "records, looked up by workload for transfer learning, instead of refusing "
                "(or, with --skip-invalid, skipping) them");
  imp->callback([args] { run_import(*args); });

  add_log_merge_command(log);  // `webtune log merge` (log_merge_command.cpp)
}

}  // namespace webtune::cli
