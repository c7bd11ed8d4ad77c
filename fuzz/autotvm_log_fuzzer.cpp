/// \file autotvm_log_fuzzer.cpp
/// libFuzzer harness for the AutoTVM log reader, `import_autotvm` (tuner/autotvm_log.hpp)
/// (tuner/records.hpp), into an in-memory (":memory:") store.
///
/// Feeds: the input as the text of a log, JSON lines as TVM's autotvm/record.py and
/// `webtune log export --format autotvm` write them; the device key is taken from each line's
/// "-model=" (as `webtune log import` without --device does).
///
/// Asserts: only std::runtime_error escapes the import, with a message that names a line
/// ("AutoTVM log line N: ..."), and then nothing was stored; an import that succeeds stores as
/// many trials as it says, each job of a known target with a valid workload; exporting those
/// records and importing the export into a second store succeeds, stores the same number of
/// trials, and exports the same text again (export ∘ import is a fixed point). The lenient import
/// (skip_invalid and keep_foreign, `log import --skip-invalid --keep-foreign`) of the same text
/// never throws, accounts for every line (trials, foreign records and skipped lines are at most
/// the lines read), and, where the strict import succeeds, skips nothing and imports as many.
#include <boost/json.hpp>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_common.hpp"
#include "tuner/autotvm_log.hpp"
#include "tuner/records.hpp"

using namespace webtune;
using webtune::fuzz::check;
using webtune::fuzz::finding;
using webtune::fuzz::throws_only;

namespace {

int64_t stored_trials(const RecordStore& store) {
  int64_t n = 0;
  for (const TuningJobInfo& job : store.jobs()) {
    throws_only<>("validate of an imported workload", [&] { job.workload.validate(); });
    n += job.trials;
  }
  return n;
}

std::string export_all(const RecordStore& store) {
  std::ostringstream out;
  throws_only<>("export_autotvm of imported records", [&] { export_autotvm(store, out); });
  return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  AutoTvmImportReport lenient;
  {
    RecordStore store(":memory:");
    AutoTvmImportOptions options;
    options.device_key = "";
    options.skip_invalid = true;
    options.keep_foreign = true;
    try {
      std::istringstream in(text);
      lenient = import_autotvm(store, in, options);
    } catch (const std::exception& e) {
      finding("import_autotvm with skip_invalid threw " + webtune::fuzz::type_name(e) + ": " +
              e.what());
    }
    check(lenient.imported + lenient.foreign + lenient.skipped_total() <= lenient.lines,
          "the lenient import counts more than the lines it read");
    check(lenient.foreign_new <= lenient.foreign &&
              store.foreign_record_count() == lenient.foreign_new,
          "foreign records stored and counted differ");
    check(stored_trials(store) == lenient.imported, "the lenient import miscounts its trials");
  }
  RecordStore store(":memory:");
  int64_t imported = 0;
  try {
    std::istringstream in(text);
    imported = import_autotvm(store, in, "");
  } catch (const std::runtime_error& e) {
    check(std::string_view(e.what()).find("AutoTVM log line ") != std::string_view::npos,
          std::string("import_autotvm's error names no line: ") + e.what());
    check(store.jobs().empty(), "a refused import stored jobs");
    return 0;
  } catch (const std::exception& e) {
    finding("import_autotvm threw " + webtune::fuzz::type_name(e) + ": " + e.what());
  }
  check(lenient.skipped.empty() && lenient.imported == imported,
        "the strict import took every line but the lenient one skipped some or imported " +
            std::to_string(lenient.imported) + " of " + std::to_string(imported));
  check(stored_trials(store) == imported, "import_autotvm said " + std::to_string(imported) +
                                              " trials, the store holds " +
                                              std::to_string(stored_trials(store)));

  const std::string first = export_all(store);
  RecordStore again(":memory:");
  int64_t reimported = 0;
  try {
    std::istringstream in(first);
    reimported = import_autotvm(again, in, "");
  } catch (const std::exception& e) {
    finding("the export of imported records does not import (" + std::string(e.what()) + "):\n" +
            first);
  }
  check(reimported == imported, "re-import stored " + std::to_string(reimported) + " of " +
                                    std::to_string(imported) + " trials");
  const std::string second = export_all(again);
  check(second == first, "export differs after a re-import:\n" + first + "---\n" + second);
  return 0;
}
