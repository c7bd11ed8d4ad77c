/// \file log_lines.hpp
/// How many log lines `webtune` has written so far (every sink of its logger), so that output
/// redrawn in place on a terminal (`tune`'s progress) can tell whether a log line came in between
/// and must not be overwritten.
#pragma once

#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace webtune::cli {

/// The count, raised by LineCountingSink.
inline std::atomic<uint64_t>& log_lines() {
  static std::atomic<uint64_t> lines{0};
  return lines;
}

/// A sink that writes nothing and counts what the logger emits (after its level filter).
class LineCountingSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg&) override { log_lines().fetch_add(1); }
  void flush_() override {}
};

}  // namespace webtune::cli
