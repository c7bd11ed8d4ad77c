/// \file event_feed.hpp
/// GET /api/events: the records' new trials and jobs pushed to the dashboard as server-sent
/// events (text/event-stream, the HTML Living Standard's EventSource), so the page is live per
/// trial without polling the API.
///
/// Each connection has its own TrialFeed. Every ~250 ms (tracker::EventStream::interval) the
/// session asks it for what is new; it first asks SQLite whether anything was committed since
/// (`PRAGMA data_version` on a read-only connection of its own: one cheap query, no table read),
/// and only then reads the job list and the new rows. Events:
///  - `jobs`: data {"jobs": [JOB]} as /api/jobs lists them; sent at once on connecting and again
///    after every change.
///  - `trials`: data {"job": ID, "trials": [TRIAL]} as /api/jobs/{id}/trials gives them (with
///    their 1-based "number"), only rows added since the connection opened (or since the last
///    event): history comes from /api/jobs/{id}/trials. Its `id:` field is "JOB:COUNT", the job
///    and how many of its trials the page has seen once it takes the event.
/// Trials of one job arrive in trial-number order and each at most once per connection.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tuner/records.hpp"

struct sqlite3;

namespace webtune::server {

class TrialFeed {
 public:
  /// `store` is the dashboard's own connection (the feed reads through it; it must outlive the
  /// feed); `path` its file, which the feed opens again read-only for `PRAGMA data_version`
  /// (a PostgreSQL URI: no such check, every poll reads the job list). Trials already recorded
  /// now are not sent. Throws std::runtime_error when the file cannot be opened.
  TrialFeed(const RecordStore& store, const std::string& path);
  ~TrialFeed();
  TrialFeed(const TrialFeed&) = delete;
  TrialFeed& operator=(const TrialFeed&) = delete;

  /// The events since the last call (the first call: the `jobs` event), in the event-stream
  /// format; empty when nothing was committed meanwhile.
  std::string poll();

 private:
  /// SQLite's data version of the file as this connection sees it.
  int64_t data_version() const;

  const RecordStore& store_;
  sqlite3* db_ = nullptr;
  bool first_ = true;
  int64_t version_ = -1;
  std::map<int64_t, int64_t> sent_;  ///< job id -> trials the page has (history included)
};

/// One server-sent event: "event: NAME\n" ("id: ID\n" when given) and the data, one "data:"
/// line per line of it, then a blank line.
std::string sse_event(const std::string& name, const std::string& data, const std::string& id = {});

}  // namespace webtune::server
