/// \file event_feed.cpp
/// The trial feed of /api/events: PRAGMA data_version, then the new rows per job.
#include "server/event_feed.hpp"

#include <sqlite3.h>

#include <boost/json.hpp>
#include <stdexcept>

#include "server/api_router.hpp"

namespace webtune::server {

namespace bj = boost::json;

std::string sse_event(const std::string& name, const std::string& data, const std::string& id) {
  std::string out = "event: " + name + "\n";
  if (!id.empty()) out += "id: " + id + "\n";
  size_t start = 0;
  while (true) {
    const size_t end = data.find('\n', start);
    out += "data: " + data.substr(start, end == std::string::npos ? end : end - start) + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out + "\n";
}

TrialFeed::TrialFeed(const RecordStore& store, const std::string& path) : store_(store) {
  // PostgreSQL has no data_version: data_version() says -1, and every poll reads the job list
  // (one query every 250 ms per open page).
  if (is_postgres_url(path)) {
    for (const TuningJobInfo& j : store_.jobs()) sent_[j.id] = j.trials;
    return;
  }
  // Read-only and without creating: the dashboard's store opened (and created) it already.
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error("event feed: cannot open " + path + ": " + why);
  }
  sqlite3_busy_timeout(db_, 1000);
  // History is the page's to fetch: start from what is recorded now.
  for (const TuningJobInfo& j : store_.jobs()) sent_[j.id] = j.trials;
}

TrialFeed::~TrialFeed() {
  if (db_ != nullptr) sqlite3_close(db_);
}

int64_t TrialFeed::data_version() const {
  if (db_ == nullptr) return -1;
  sqlite3_stmt* stmt = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db_, "PRAGMA data_version", -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

std::string TrialFeed::poll() {
  const int64_t version = data_version();
  // -1 (a busy file) reads the tables anyway: missing a change is worse than one extra read.
  if (!first_ && version == version_ && version != -1) return {};
  version_ = version;
  const bool first = first_;
  first_ = false;
  std::string out;
  const std::vector<TuningJobInfo> jobs = store_.jobs();
  bj::array listed;
  for (const TuningJobInfo& j : jobs) {
    listed.push_back(job_json(j));
    int64_t& sent = sent_.try_emplace(j.id, 0).first->second;
    if (j.trials <= sent) continue;
    bj::array trials;
    int64_t number = sent;
    for (const TrialRecord& t : store_.trials(j.id, -1, sent))
      trials.push_back(trial_json(t, ++number));
    if (trials.empty()) continue;
    sent = number;
    out +=
        sse_event("trials", bj::serialize(bj::object{{"job", j.id}, {"trials", std::move(trials)}}),
                  std::to_string(j.id) + ":" + std::to_string(sent));
  }
  if (first || !out.empty() || version != -1)
    out += sse_event("jobs", bj::serialize(bj::object{{"jobs", std::move(listed)}}));
  return out;
}

}  // namespace webtune::server
