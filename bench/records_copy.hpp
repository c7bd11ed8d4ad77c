/// \file records_copy.hpp
/// A temporary copy of a committed records file for a benchmark to open. Opening a records file
/// migrates it to this webtune's schema (tuner/records.hpp), and the results under
/// bench/results/ must stay as they were measured; the copy (and its -wal / -shm files) is
/// removed when the RecordsCopy goes out of scope.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace webtune::bench {

class RecordsCopy {
 public:
  /// Copies `db` to the temporary directory, named after `bench` and this process. Throws
  /// std::filesystem::filesystem_error when `db` cannot be read or the copy written.
  RecordsCopy(const std::string& db, const std::string& bench)
      : path_(std::filesystem::temp_directory_path() /
              ("webtune_" + bench + "_" + std::to_string(::getpid()) + ".db")) {
    std::filesystem::copy_file(db, path_, std::filesystem::copy_options::overwrite_existing);
  }
  ~RecordsCopy() {
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm"})
      std::filesystem::remove(path_.string() + suffix, ignored);
  }
  RecordsCopy(const RecordsCopy&) = delete;
  RecordsCopy& operator=(const RecordsCopy&) = delete;

  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace webtune::bench
