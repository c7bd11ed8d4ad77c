/// \file records_merge.hpp
/// Copies tuning records from one store into another (`webtune log merge --from A --into B`),
/// between any two backends (SQLite file → PostgreSQL, PostgreSQL → SQLite, or the same kind):
/// the way to bring one host's records into a shared store, or a shared store's onto a laptop.
///
/// What is copied, each skipped when the destination already holds it, so that merging twice
/// copies nothing the second time:
///  - devices: a device key the destination does not know, or knows without its info ("{}");
///  - jobs, by (workload key, target, device key): a missing job is created with the source's
///    task name, tuner and status; an existing one keeps its own;
///  - trials, by (job, config index), as RecordStore::add_trials skips them: the destination's
///    trial wins where both measured a config (its store is the one being added to);
///  - verifications of copied or existing trials, by (config index, verdict, agent, timestamp);
///  - model measurements, by (created, model, manifest sha256, device key, agent).
/// Not copied: model runs (a run belongs to the session that tuned it, and its estimates to
/// that store's trials) and a job's options JSON (not part of the public API).
///
/// Trial ids and insertion order are the destination's own: copied trials come after the
/// trials already there, in the source's order. Each job is copied in one transaction (trials);
/// an error stops the merge with the jobs before it copied, and merging again resumes it.
#pragma once

#include <cstdint>

#include "tuner/records.hpp"

namespace webtune {

/// What merge_records copied and skipped.
struct MergeCounts {
  int64_t jobs = 0;          ///< source jobs visited
  int64_t jobs_created = 0;  ///< of them, new in the destination
  int64_t trials = 0, trials_skipped = 0;
  int64_t verifications = 0, verifications_skipped = 0;
  int64_t devices = 0;  ///< device infos copied
  int64_t model_measurements = 0, model_measurements_skipped = 0;
};

/// Copies `from`'s records into `into` as the file comment says. Throws what RecordStore throws
/// (std::runtime_error for a database error, std::invalid_argument for a record the destination
/// refuses); jobs copied before the error stay copied.
MergeCounts merge_records(const RecordStore& from, RecordStore& into);

}  // namespace webtune
