/// \file workload_fuzzer.cpp
/// libFuzzer harness for the workload readers (codegen/workload.hpp).
///
/// Feeds, by the input's first byte (modulo 3), the rest of the input to:
///   0: `Workload::from_json` of the rest parsed as JSON (a task of a workload file);
///   1: `resolve_workloads` of an inline spec, "dense:", "conv2d:" or "depthwise_conv2d:" (by the
///      second byte) followed by the rest, as `--workload` takes it;
///   2: `resolve_workloads` of a workload file whose first line is the `--tasks` names and whose
///      remainder is the file (an in-memory file, /proc/self/fd/N of a memfd).
///
/// Asserts: only std::invalid_argument or std::runtime_error escape, with a message; every
/// workload returned passes validate(), has positive sizes and a finite positive FLOP count, and
/// survives to_json → from_json with the same key; a file's tasks occur at least once; with
/// names given, every task returned has one of them.
#include <sys/mman.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "codegen/workload.hpp"
#include "fuzz_common.hpp"

namespace bj = boost::json;
using webtune::Workload;
using webtune::WorkloadFileTask;
using webtune::fuzz::check;
using webtune::fuzz::throws_only;

namespace {

void check_workload(const Workload& w, std::string_view from) {
  const std::string where = std::string(from) + " returned " + w.key() + ": ";
  throws_only<>("validate", [&] { w.validate(); });
  check(w.data_size() > 0 && w.weight_size() > 0 && w.output_size() > 0,
        where + "a size is not positive");
  check(std::isfinite(w.flops()) && w.flops() > 0, where + "FLOPs not finite and positive");
  Workload again;
  throws_only<>("Workload round trip", [&] { again = Workload::from_json(w.to_json()); });
  check(again.key() == w.key() && again.name == w.name, where + "changed on its JSON round trip");
}

/// An in-memory file with `content`, readable by path while the object lives.
class MemFile {
 public:
  explicit MemFile(std::string_view content) : fd_(memfd_create("workload", 0)) {
    check(fd_ >= 0, "memfd_create failed");
    size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = write(fd_, content.data() + done, content.size() - done);
      check(n > 0, "writing the memfd failed");
      done += static_cast<size_t>(n);
    }
  }
  ~MemFile() { close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

std::set<std::string> split_names(const std::string& names) {
  std::set<std::string> out;
  size_t begin = 0;
  while (begin <= names.size()) {
    size_t end = names.find(',', begin);
    if (end == std::string::npos) end = names.size();
    out.insert(names.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  switch (data[0] % 3) {
    case 0: {
      boost::system::error_code ec;
      const bj::value value = bj::parse(rest, ec);
      if (ec) return 0;
      Workload w;
      if (throws_only<std::invalid_argument>("Workload::from_json",
                                             [&] { w = Workload::from_json(value); }))
        check_workload(w, "Workload::from_json");
      break;
    }
    case 1: {
      static const char* kHeads[] = {"dense:", "conv2d:", "depthwise_conv2d:"};
      const std::string spec = kHeads[data[1] % 3] + std::string(rest);
      std::vector<WorkloadFileTask> tasks;
      if (throws_only<std::invalid_argument, std::runtime_error>(
              "resolve_workloads(spec)", [&] { tasks = webtune::resolve_workloads(spec); })) {
        check(tasks.size() == 1, "an inline spec gave " + std::to_string(tasks.size()) + " tasks");
        check_workload(tasks[0].workload, "resolve_workloads(spec)");
      }
      break;
    }
    case 2: {
      const size_t newline = rest.find('\n');
      if (newline == std::string_view::npos) return 0;
      const std::string names(rest.substr(0, newline));
      MemFile file(rest.substr(newline + 1));
      std::vector<WorkloadFileTask> tasks;
      if (throws_only<std::invalid_argument, std::runtime_error>("resolve_workloads(file)", [&] {
            tasks = webtune::resolve_workloads(file.path(), names);
          })) {
        const std::set<std::string> wanted = split_names(names);
        for (const WorkloadFileTask& t : tasks) {
          check_workload(t.workload, "resolve_workloads(file)");
          check(t.occurrences >= 1,
                "task " + t.workload.key() + " occurs " + std::to_string(t.occurrences) + " times");
          if (!names.empty())
            check(wanted.count(t.workload.name) == 1,
                  "task '" + t.workload.name + "' returned, but not asked for");
        }
      }
      break;
    }
  }
  return 0;
}
