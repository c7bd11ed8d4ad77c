/// \file log_merge_command.cpp
/// `webtune log merge --from A --into B`: copies tuning records between two stores, each an
/// SQLite file or a `postgresql://` database (tuner/records_merge.hpp says what is copied and
/// what is skipped). Registered under `webtune log` by log_command.cpp.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "commands.hpp"
#include "tuner/records.hpp"
#include "tuner/records_merge.hpp"

namespace webtune::cli {

namespace {

struct MergeArgs {
  std::string from, into;
};

void run_merge(const MergeArgs& args) {
  // The source must exist: a mistyped path should not read as an empty store.
  if (!is_postgres_url(args.from) && !std::filesystem::exists(args.from))
    throw std::runtime_error("no records database at '" + args.from + "'");
  const RecordStore from(args.from);
  RecordStore into(args.into);
  if (from.path() == into.path())
    throw std::runtime_error("log merge: --from and --into are the same store (" + from.path() +
                             ")");
  const MergeCounts c = merge_records(from, into);
  std::printf(
      "merged %s into %s: %lld jobs (%lld new), %lld trials copied (%lld already there), "
      "%lld verifications copied (%lld already there), %lld device infos, %lld model "
      "measurements copied (%lld already there)\n",
      from.path().c_str(), into.path().c_str(), static_cast<long long>(c.jobs),
      static_cast<long long>(c.jobs_created), static_cast<long long>(c.trials),
      static_cast<long long>(c.trials_skipped), static_cast<long long>(c.verifications),
      static_cast<long long>(c.verifications_skipped), static_cast<long long>(c.devices),
      static_cast<long long>(c.model_measurements),
      static_cast<long long>(c.model_measurements_skipped));
}

}  // namespace

void add_log_merge_command(CLI::App* log) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* merge = log->add_subcommand(
      "merge", "Copy jobs, trials, verifications and devices from one store into another");
  merge
      ->add_option("--from", args->from,
                   "source records: an SQLite file or postgresql://user@host/db")
      ->required();
  merge
      ->add_option("--into", args->into,
                   "destination records (created when missing): an SQLite file or "
                   "postgresql://user@host/db")
      ->required();
  merge->callback([args] { run_merge(*args); });
}

}  // namespace webtune::cli
