/// \file progress_line.hpp
/// The time line of `webtune tune`'s progress: "elapsed 1:05, ETA 2:10, 42/200 trials this run"
/// ETA from the rate of this run's trials (earlier runs' resumed trials do not count: they took
/// no time now). Header-only, so that tests check the text on values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "tuner/tune_session.hpp"

namespace webtune::cli {

/// A duration as "m:ss" below an hour and "h:mm:ss" from one on (59.6 s rounds to "1:00");
/// negative or not finite: "0:00".
inline std::string format_duration(double seconds) {
  const int64_t s = std::isfinite(seconds) && seconds > 0 ? std::llround(seconds) : 0;
  char text[48];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(text, sizeof text, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return text;
}

/// "elapsed E, ETA T": T = trials_left ÷ (trials_done ÷ elapsed_s), or at most `time_left_s` when
/// that is ≥ 0 (a wall-clock budget ends the run then). "ETA —" until there is a rate (no trial
/// done in this run yet, or no time elapsed); "ETA 0:00" when nothing is left.
inline std::string format_elapsed_eta(double elapsed_s, int64_t trials_done, int64_t trials_left,
                                      double time_left_s = -1) {
  std::string eta;
  if (trials_left <= 0) {
    eta = format_duration(0);
  } else if (trials_done > 0 && elapsed_s > 0 && std::isfinite(elapsed_s)) {
    double left = static_cast<double>(trials_left) * elapsed_s / static_cast<double>(trials_done);
    if (time_left_s >= 0) left = std::min(left, time_left_s);
    eta = format_duration(left);
  } else {
    eta = "\u2014";  // an em dash: no rate yet
  }
  return "elapsed " + format_duration(elapsed_s) + ", ETA " + eta;
}

/// Trials of this run so far: the session's, less those resumed from earlier runs.
inline int64_t trials_this_run(const SessionProgress& progress) {
  int64_t resumed = 0;
  for (const TaskProgress& t : progress.tasks) resumed += t.resumed;
  return std::max<int64_t>(0, progress.trials - resumed);
}

/// Trials the session may still run: each unfinished task up to its per-task cap, and no more
/// than the total budget has left (either alone when the other is not set). Early stopping and
/// the wall-clock budget can end it sooner: an upper bound.
inline int64_t trials_left(const SessionProgress& progress) {
  int64_t capped = 0;
  bool all_done = true;
  for (const TaskProgress& t : progress.tasks) {
    if (t.done) continue;
    all_done = false;
    if (progress.trials_per_task > 0) capped += std::max(0, progress.trials_per_task - t.trials);
  }
  if (all_done) return 0;
  if (progress.total_trials <= 0) return capped;
  const int64_t total_left = std::max<int64_t>(0, progress.total_trials - progress.trials);
  return progress.trials_per_task > 0 ? std::min(total_left, capped) : total_left;
}

/// The time line of a progress report: "elapsed 1:05, ETA 2:10 (42 trials in this run, at most
/// 158 left)". `timeout_s` > 0: the session's wall-clock budget, which bounds the ETA.
inline std::string format_time_line(const SessionProgress& progress, double timeout_s = 0) {
  const int64_t done = trials_this_run(progress), left = trials_left(progress);
  const double time_left = timeout_s > 0 ? std::max(0.0, timeout_s - progress.elapsed_s) : -1;
  return format_elapsed_eta(progress.elapsed_s, done, left, time_left) + " (" +
         std::to_string(done) + " trial" + (done == 1 ? "" : "s") + " in this run, " +
         (left > 0 ? "at most " + std::to_string(left) : std::string("none")) + " left)";
}

}  // namespace webtune::cli
