/// \file model_job.hpp
/// A whole compiled model as a farm job (issue 16 item 3; the contract is MODEL_JOBS.md): the
/// native agent's side. A job whose input has `"kind":"model"` names a package the tracker
/// serves under `/models/<model>/`; the agent
///   1. fetches `manifest.json` over HTTP(S) from the tracker it is connected to
///      (tracker/http_fetch.hpp), checks its SHA-256 against `manifest_sha256` (a mismatch is
///      COMPILE_HOST "package changed: manifest sha256 <got> != <want>"),
///   2. fetches `weights.bin` and the kernel files the manifest's steps name into a cache folder
///      keyed by that hash (reused by later jobs of the same package; fetch_model_package),
///   3. in its GL worker process (IsolatedRuntime::run_request), loads the package with
///      ModelRunner, makes the input from seeded_tensor(seed, 0, input elements) (the generator
///      kernel inputs use, codegen/seeded_random.hpp), runs `warmup` untimed inferences, times
///      `repeat` measurements of `number` inferences each (grown by `min_repeat_ms` as kernel
///      measurements are), checks every output element is finite and the reference samples
///      match (measure_model_package).
/// One cost is the seconds of one ModelRunner::run: input upload, every step, read-back, glFinish.
///
/// Error numbers (codegen/error_no.hpp): COMPILE_HOST (2) for a package that cannot be fetched,
/// read or is of another target, or whose manifest hash differs; COMPILE_DEVICE (3) for a
/// kernel the driver rejects or a step that does not fit its kernel while loading; RUNTIME_DEVICE
/// (4) for a failing run (GL error, lost context, worker crash); WRONG_ANSWER (5) for a missed
/// sample or a non-finite output; RUN_TIMEOUT (7) past `timeout_s`, the budget of the whole job
/// (download, load, warm-up, runs); INSTANTIATION (1) for a model input that is not valid JSON
/// of the contract's shape (as for a bad kernel MeasureInput).
///
/// The input itself (tracker::ModelMeasureInput, tracker::is_model_input, its bounds) and
/// tracker::sha256_hex are the farm's (tracker/model_job.hpp): the tracker, the client and this
/// agent read the one contract with one parser.
#pragma once

#include <boost/json/fwd.hpp>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/measure.hpp"
#include "tracker/model_job.hpp"

namespace webtune {

namespace deploy {
struct Manifest;
}

/// A model job step that failed with a given error number (see the file comment).
class ModelJobError : public std::runtime_error {
 public:
  ModelJobError(MeasureErrorNo error, const std::string& message)
      : std::runtime_error(message), error_(error) {}
  MeasureErrorNo error() const { return error_; }

 private:
  MeasureErrorNo error_;
};

/// Whether a file path named by a manifest stays inside its package: relative, non-empty, at
/// most 200 characters, '/'-separated components each a tracker::valid_model_name (1 to 100
/// characters of [A-Za-z0-9._-], not starting with '.': so no "..", no hidden files, no
/// absolute path, no backslash).
bool safe_package_path(std::string_view path);

/// The files of a native package besides manifest.json: "weights.bin", then every distinct
/// kernel file its steps name, in step order. Throws ModelJobError (COMPILE_HOST) naming the step
/// for a kernel path that is not safe_package_path, or for more than kMaxPackageFiles files.
std::vector<std::string> package_files(const deploy::Manifest& manifest);

/// Bounds of one package download (a tracker that serves more is refused, not obeyed).
struct PackageFetchLimits {
  size_t manifest_bytes = size_t{16} << 20;
  size_t weights_bytes = size_t{1} << 30;
  size_t kernel_bytes = size_t{16} << 20;
};
inline constexpr size_t kMaxPackageFiles = 10000;

/// Fetches the package `input.model` from the tracker at `tracker_url` (the agent's ws:// or
/// wss:// URL) into `cache_root`/<manifest sha256>/ and returns that folder. The manifest is
/// always fetched and its hash checked against input.manifest_sha256 first (a package rebuilt
/// since the job was submitted must not be measured under the old name); a folder already
/// complete for that hash is reused as is, otherwise the files are fetched into a temporary
/// folder beside it that is renamed into place when complete (so concurrent agents sharing the
/// cache, or a fetch cut short, never leave a half package under the hash). The manifest must
/// be of target gles-compute or gles-frag. `timeout_s` bounds the whole download. Throws
/// ModelJobError: COMPILE_HOST for a fetch that fails (the URL and status named), a hash
/// mismatch ("package changed: manifest sha256 <got> != <want>"), a manifest that does not
/// parse, a web target, an unsafe path, a file over its limit; RUN_TIMEOUT when `timeout_s`
/// runs out.
std::string fetch_model_package(const std::string& tracker_url,
                                const tracker::ModelMeasureInput& input,
                                const std::string& cache_root, double timeout_s,
                                const PackageFetchLimits& limits = {});

/// Loads the package in `dir` on a fresh EGL context of this process and measures it (steps 3
/// of the file comment), within `time_left_s` (≤ 0: no limit). Never throws: every failure is
/// a MeasureResult with its error number and a message naming the step, node and kernel file
/// (ModelRunError's). all_cost is this call's seconds; the caller adds the download.
MeasureResult measure_model_package(const std::string& dir, const tracker::ModelMeasureInput& input,
                                    double time_left_s);

/// The request IsolatedRuntime::run_request carries to the GL worker for a model job, and the
/// worker's handler of it (measure_model_package on the request's fields).
boost::json::object model_worker_request(const std::string& dir,
                                         const tracker::ModelMeasureInput& input,
                                         double time_left_s);
MeasureResult run_model_worker_request(const boost::json::object& request);

/// Where `webtune agent` caches packages unless told: $WEBTUNE_MODEL_CACHE, else
/// $XDG_CACHE_HOME/webtune/models, else $HOME/.cache/webtune/models, else
/// /tmp/webtune-models-<uid>.
std::string default_model_cache_dir();

}  // namespace webtune
