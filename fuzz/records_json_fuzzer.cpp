/// \file records_json_fuzzer.cpp
/// libFuzzer harness for the JSON that tuner/records.cpp reads back from a records file: a
/// damaged or foreign database must give errors, never crashes.
///
/// Feeds: the input as lines, written with raw SQL into the tables of a real RecordStore (an
/// in-memory SQLite database in shared-cache mode, so that a second connection can write what
/// the store's own API would refuse):
///   line 1: workloads.json of the one job     line 2: targets.name of the job
///   line 3: devices.info_json of its device
///   then one trial per line: error_no TAB config_index TAB entity_json TAB costs_json TAB gflops
/// then reads everything back through the store: jobs(), job(), trials(), best() with and
/// without filters, trial_number(), error_counts(), agents(), related_trials() and
/// export_autotvm(); an export that succeeds is imported into a fresh ":memory:" store.
///
/// Asserts: only std::runtime_error or std::invalid_argument escape the readers, with a message;
/// what export_autotvm writes, import_autotvm reads back (one trial per distinct kernel of a job:
/// the import renumbers entities into the space, so a damaged store's two indices of one kernel
/// import once) without an error when
/// every trial's config is an entity of its template's space (config_in_space), and refuses,
/// naming a line, when one is not (export writes configs as recorded; import checks them).
#include <sqlite3.h>

#include <boost/json.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "tuner/autotvm_log.hpp"
#include "tuner/records.hpp"

using namespace webtune;
using webtune::fuzz::check;
using webtune::fuzz::finding;
using webtune::fuzz::throws_only;

namespace {

constexpr const char* kDatabase = "file:records_json_fuzzer?mode=memory&cache=shared";

/// The store under test and a raw connection to the same in-memory database; both live for
/// the whole run (the database is emptied before every input).
struct Databases {
  std::unique_ptr<RecordStore> store;
  sqlite3* raw = nullptr;
};

Databases& databases() {
  static Databases d = [] {
    Databases out;
    out.store = std::make_unique<RecordStore>(kDatabase);
    if (sqlite3_open_v2(kDatabase, &out.raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, nullptr) !=
        SQLITE_OK)
      finding(std::string("cannot open the raw connection: ") + sqlite3_errmsg(out.raw));
    return out;
  }();
  return d;
}

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK)
    finding(std::string("harness SQL failed: ") + (message ? message : "?") + ": " + sql);
}

/// Runs `sql` with text parameters ?1.. bound to `params`; a constraint failure (the fuzzer's
/// row breaks NOT NULL or UNIQUE) is not a finding, it just leaves the row out.
void insert(sqlite3* db, const char* sql, const std::vector<std::string>& params) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK)
    finding(std::string("harness SQL does not prepare: ") + sqlite3_errmsg(db));
  for (size_t i = 0; i < params.size(); ++i)
    sqlite3_bind_text(stmt, static_cast<int>(i + 1), params[i].data(),
                      static_cast<int>(params[i].size()), SQLITE_TRANSIENT);
  sqlite3_step(stmt);
  sqlite3_finalize(stmt);
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(sep, begin);
    if (end == std::string_view::npos) end = text.size();
    out.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

/// Writes the fuzzer's rows: one workload, target, device, agent and job (all id 1), trials.
void write_rows(sqlite3* db, const std::vector<std::string>& lines) {
  exec(db,
       "BEGIN; DELETE FROM trials; DELETE FROM tuning_jobs; DELETE FROM agents; "
       "DELETE FROM devices; DELETE FROM workloads; DELETE FROM targets;");
  insert(db,
         "INSERT INTO workloads(id, key, op, json, flops) "
         "VALUES(1, 'dense_8_8_8', 'dense', ?1, 1024)",
         {lines[0]});
  insert(db, "INSERT INTO targets(id, name) VALUES(1, ?1)", {lines[1]});
  insert(db, "INSERT INTO devices(id, key, info_json, updated) VALUES(1, 'gles:fuzz', ?1, 0)",
         {lines[2]});
  exec(db,
       "INSERT INTO agents(id, name, device_id, last_seen) VALUES(1, 'fuzz-agent', 1, 0);"
       "INSERT INTO tuning_jobs(id, workload_id, target_id, device_id, task_name, tuner, "
       "options_json, status, created, updated) VALUES(1, 1, 1, 1, 'T', 'random', '{}', 'done', "
       "0, 0);");
  for (size_t i = 3; i < lines.size() && i < 64; ++i) {
    std::vector<std::string> f = split(lines[i], '\t');
    f.resize(5);
    // CAST: the numeric columns get numbers when the text is one (as SQLite's affinity would).
    insert(db,
           "INSERT INTO trials(job_id, config_index, entity_json, error_no, message, costs_json, "
           "mean_cost, gflops, all_cost, timestamp, agent_id) VALUES(1, CAST(?2 AS INTEGER), ?3, "
           "CAST(?1 AS INTEGER), 'm', ?4, NULL, CAST(?5 AS REAL), 0.5, 1700000000, 1)",
           f);
  }
  exec(db, "COMMIT");
}

/// Every reader of the store; an export that works is returned for the round trip.
std::optional<std::string> read_everything(const RecordStore& store) {
  using Allowed = std::runtime_error;
  throws_only<Allowed, std::invalid_argument>("jobs", [&] { (void)store.jobs(); });
  throws_only<Allowed, std::invalid_argument>("job", [&] { (void)store.job(1); });
  throws_only<Allowed, std::invalid_argument>("trials", [&] { (void)store.trials(1); });
  throws_only<Allowed, std::invalid_argument>("best", [&] { (void)store.best(); });
  throws_only<Allowed, std::invalid_argument>("best(filtered)",
                                              [&] { (void)store.best("dense", "gles-frag"); });
  throws_only<Allowed, std::invalid_argument>("trial_number",
                                              [&] { (void)store.trial_number(1, 1); });
  throws_only<Allowed, std::invalid_argument>("error_counts", [&] { (void)store.error_counts(); });
  throws_only<Allowed, std::invalid_argument>("agents", [&] { (void)store.agents(); });
  throws_only<Allowed, std::invalid_argument>("device_info",
                                              [&] { (void)store.device_info("gles:fuzz"); });
  throws_only<Allowed, std::invalid_argument>(
      "related_trials", [&] { (void)store.related_trials(OpKind::kDense, Target::kGlesFrag, 0); });
  std::ostringstream log;
  if (!throws_only<Allowed, std::invalid_argument>("export_autotvm",
                                                   [&] { (void)export_autotvm(store, log); }))
    return std::nullopt;
  return log.str();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Shared-cache in-memory databases are named by URI; the store opens paths without the flag.
  sqlite3_config(SQLITE_CONFIG_URI, 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> lines =
      split(std::string_view(reinterpret_cast<const char*>(data), size), '\n');
  if (lines.size() < 3) return 0;
  Databases& d = databases();
  write_rows(d.raw, lines);
  const std::optional<std::string> log = read_everything(*d.store);
  if (!log || log->empty()) return 0;
  // Does every recorded config fit its template's space, as an import will check? And how many
  // distinct kernels per job are there: the import renumbers each entity into the space (a
  // stale index is renumbered by its knob values), so two trials of one job whose entities name
  // the same kernel under different indices (a damaged store) import as one.
  bool all_fit = true;
  std::set<std::pair<int64_t, int64_t>> kernels;  // (job, index in the space)
  try {
    for (const TuningJobInfo& job : d.store->jobs())
      for (const TrialRecord& t : d.store->trials(job.id))
        kernels.emplace(
            job.id,
            config_in_space(job.workload, job.target, t.config_json, t.result.ok()).index());
  } catch (const std::exception&) {
    all_fit = false;
  }
  RecordStore again(":memory:");
  std::istringstream in(*log);
  int64_t imported = 0;
  try {
    imported = import_autotvm(again, in, "");
  } catch (const std::exception& e) {
    if (!all_fit) {
      check(std::string(e.what()).find("line ") != std::string::npos,
            "import_autotvm refused without naming the line: " + std::string(e.what()));
      return 0;
    }
    finding("export_autotvm wrote a log that import_autotvm refuses (" + std::string(e.what()) +
            "):\n" + *log);
  }
  check(all_fit, "import_autotvm took a config that does not fit its template's space:\n" + *log);
  int64_t lines_written = 0;
  for (char c : *log) lines_written += c == '\n';
  const auto distinct = static_cast<int64_t>(kernels.size());
  check(imported == distinct, "export wrote " + std::to_string(lines_written) + " lines of " +
                                  std::to_string(distinct) + " distinct kernels, import read " +
                                  std::to_string(imported));
  return 0;
}
