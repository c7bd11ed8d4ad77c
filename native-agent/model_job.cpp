/// \file model_job.cpp
/// The native agent's model jobs (model_job.hpp): the package download into the hash-keyed
/// cache, and the measurement in the GL worker. The input is the farm's (tracker/model_job.hpp).
#include "native_agent/model_job.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "codegen/json_util.hpp"
#include "codegen/reference.hpp"
#include "codegen/seeded_random.hpp"
#include "deploy/package.hpp"
#include "native_agent/egl_context.hpp"
#include "native_agent/model_runner.hpp"
#include "tracker/http_fetch.hpp"

namespace webtune {

namespace bj = boost::json;
namespace fs = std::filesystem;
using tracker::ModelMeasureInput;
using tracker::sha256_hex;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string seconds_string(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

/// Writes `bytes` to `path` (binary); throws ModelJobError (COMPILE_HOST) naming it.
void write_file(const fs::path& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    throw ModelJobError(MeasureErrorNo::kCompileHost,
                        "cannot write " + path.string() + " into the model cache");
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

// ---- package files ----

bool safe_package_path(std::string_view path) {
  if (path.empty() || path.size() > 200) return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, slash - start);
    // A component obeys the rule of a package folder name (the tracker's): no "", "." or
    // "..", no hidden file, nothing but [A-Za-z0-9._-].
    if (!tracker::valid_model_name(part)) return false;
    start = slash + 1;
  }
  return true;
}

std::vector<std::string> package_files(const deploy::Manifest& manifest) {
  std::vector<std::string> files{"weights.bin"};
  std::set<std::string> seen;
  for (size_t i = 0; i < manifest.steps.size(); ++i) {
    const deploy::PackageStep& step = manifest.steps[i];
    if (step.kind != deploy::PackageStep::Kind::kKernel) continue;
    if (!safe_package_path(step.kernel))
      throw ModelJobError(MeasureErrorNo::kCompileHost,
                          "step " + std::to_string(i) + " (node '" + step.node +
                              "') names the kernel file '" + step.kernel.substr(0, 200) +
                              "', which is not a plain relative path inside the package");
    if (seen.insert(step.kernel).second) files.push_back(step.kernel);
    if (files.size() > kMaxPackageFiles)
      throw ModelJobError(
          MeasureErrorNo::kCompileHost,
          "the package names more than " + std::to_string(kMaxPackageFiles) + " files");
  }
  return files;
}

std::string fetch_model_package(const std::string& tracker_url, const ModelMeasureInput& input,
                                const std::string& cache_root, double timeout_s,
                                const PackageFetchLimits& limits) {
  const auto start = Clock::now();
  const std::string base = "/models/" + input.model + "/";
  // Each GET gets what is left of the budget; none less than a millisecond.
  auto time_left = [&](const std::string& file) {
    const double left = timeout_s - seconds_since(start);
    if (timeout_s > 0 && left <= 0)
      throw ModelJobError(MeasureErrorNo::kRunTimeout,
                          "the package download ran past the job's timeout of " +
                              seconds_string(timeout_s) + " s (before " + base + file + ")");
    return std::chrono::milliseconds(timeout_s > 0 ? std::max<int64_t>(1, std::llround(left * 1e3))
                                                   : int64_t{3'600'000});
  };
  auto get = [&](const std::string& file, size_t max_bytes) {
    try {
      return tracker::http_get(tracker_url, base + file, max_bytes, time_left(file));
    } catch (const tracker::HttpFetchError& e) {
      if (timeout_s > 0 && seconds_since(start) >= timeout_s)
        throw ModelJobError(
            MeasureErrorNo::kRunTimeout,
            std::string("the package download ran past the job's timeout: ") + e.what());
      throw ModelJobError(MeasureErrorNo::kCompileHost,
                          std::string("cannot fetch the package: ") + e.what());
    } catch (const std::invalid_argument& e) {
      throw ModelJobError(MeasureErrorNo::kCompileHost,
                          std::string("cannot fetch the package: ") + e.what());
    }
  };

  const std::string manifest_bytes = get("manifest.json", limits.manifest_bytes);
  const std::string got = sha256_hex(manifest_bytes);
  if (got != input.manifest_sha256)
    throw ModelJobError(MeasureErrorNo::kCompileHost,
                        "package changed: manifest sha256 " + got + " != " + input.manifest_sha256);
  deploy::Manifest manifest;
  try {
    manifest = deploy::Manifest::from_json(bj::parse(manifest_bytes));
  } catch (const std::exception& e) {
    throw ModelJobError(MeasureErrorNo::kCompileHost,
                        base + "manifest.json is not a valid manifest: " + e.what());
  }
  if (manifest.target != "gles-compute" && manifest.target != "gles-frag")
    throw ModelJobError(MeasureErrorNo::kCompileHost,
                        "the package " + input.model + " is for " + manifest.target +
                            "; native agents run gles-compute and gles-frag packages");
  const std::vector<std::string> files = package_files(manifest);

  const fs::path folder = fs::path(cache_root) / got;
  std::error_code ec;
  if (fs::exists(folder, ec)) {
    // Complete by construction (renamed into place whole); a manifest that no longer hashes
    // right (a disk error, a person's edit) sends it back to the download.
    if (fs::exists(folder / "manifest.json", ec) &&
        sha256_hex(read_text(folder / "manifest.json")) == got) {
      bool all = true;
      for (const std::string& f : files) all = all && fs::exists(folder / f, ec);
      if (all) {
        spdlog::info("model job: {} from the cache at {}", input.model, folder.string());
        return folder.string();
      }
    }
    spdlog::warn("model job: the cached package at {} is damaged; fetching it again",
                 folder.string());
    fs::remove_all(folder, ec);
  }

  const fs::path temporary = fs::path(cache_root) / (got + ".part-" + std::to_string(::getpid()));
  fs::remove_all(temporary, ec);
  fs::create_directories(temporary, ec);
  if (ec)
    throw ModelJobError(MeasureErrorNo::kCompileHost, "cannot create the model cache folder " +
                                                          temporary.string() + ": " + ec.message());
  try {
    write_file(temporary / "manifest.json", manifest_bytes);
    for (const std::string& f : files)
      write_file(temporary / f,
                 get(f, f == "weights.bin" ? limits.weights_bytes : limits.kernel_bytes));
  } catch (...) {
    fs::remove_all(temporary, ec);
    throw;
  }
  fs::rename(temporary, folder, ec);
  if (ec) {
    // Another agent sharing the cache put the same package there first: use it.
    fs::remove_all(temporary, ec);
    if (!fs::exists(folder / "manifest.json"))
      throw ModelJobError(MeasureErrorNo::kCompileHost,
                          "cannot move the package into the cache at " + folder.string());
  }
  spdlog::info("model job: fetched {} ({} files) into {} in {:.2f} s", input.model,
               files.size() + 1, folder.string(), seconds_since(start));
  return folder.string();
}

// ---- the measurement (in the GL worker) ----

namespace {

/// Load errors: a step's kernel that the driver rejects or that does not fit its step is the
/// device's (COMPILE_DEVICE); a file that cannot be read, or anything of no step, the package's.
MeasureErrorNo load_error_no(const ModelRunError& e) {
  const std::string_view message = e.what();
  if (e.step() < 0 || message.find("cannot read") != std::string_view::npos)
    return MeasureErrorNo::kCompileHost;
  return MeasureErrorNo::kCompileDevice;
}

/// The contract's samples as the reference checker takes them (abs_sum is only informative).
std::vector<ReferenceSample> reference_samples_of(
    const std::vector<tracker::ModelSample>& samples) {
  std::vector<ReferenceSample> out;
  out.reserve(samples.size());
  for (const tracker::ModelSample& s : samples) {
    ReferenceSample r;
    r.index = s.index;
    r.value = s.value;
    r.tolerance = s.tolerance;
    out.push_back(r);
  }
  return out;
}

/// The first non-finite output element, as a message ("" when all are finite).
std::string non_finite(const std::vector<float>& output) {
  for (size_t i = 0; i < output.size(); ++i)
    if (!std::isfinite(output[i]))
      return "output[" + std::to_string(i) + "] = " + std::to_string(output[i]) + " is not finite";
  return {};
}

}  // namespace

MeasureResult measure_model_package(const std::string& dir, const ModelMeasureInput& input,
                                    double time_left_s) {
  const auto start = Clock::now();
  auto finish = [&](MeasureResult r) {
    r.all_cost = seconds_since(start);
    r.timestamp = unix_now();
    return r;
  };
  auto fail = [&](MeasureErrorNo error, const std::string& message) {
    return finish(MeasureResult::failure(error, message));
  };
  auto check_deadline = [&](const char* stage, int64_t runs) {
    if (time_left_s <= 0 || seconds_since(start) <= time_left_s) return;
    throw ModelJobError(MeasureErrorNo::kRunTimeout, "model job ran past its timeout of " +
                                                         seconds_string(input.options.timeout_s) +
                                                         " s (" + stage + ", after " +
                                                         std::to_string(runs) + " inferences)");
  };

  std::unique_ptr<ModelRunner> runner;
  try {
    runner = std::make_unique<ModelRunner>(dir, EglContext::create());
  } catch (const ModelRunError& e) {
    return fail(load_error_no(e), e.what());
  } catch (const std::bad_alloc&) {
    return fail(MeasureErrorNo::kRuntimeDevice, "out of host memory while loading the package");
  } catch (const std::exception& e) {  // no EGL context
    return fail(MeasureErrorNo::kRuntimeDevice, e.what());
  }

  try {
    const std::vector<float> data = seeded_tensor(input.seed, 0, runner->input_elements());
    const std::vector<ReferenceSample> samples = reference_samples_of(input.samples);
    std::vector<float> output;
    auto check = [&](const std::vector<float>& out) {
      if (std::string bad = non_finite(out); !bad.empty())
        throw ModelJobError(MeasureErrorNo::kWrongAnswer, bad);
      const CheckResult result = check_samples(out, samples);
      if (!result.ok) throw ModelJobError(MeasureErrorNo::kWrongAnswer, result.message);
    };
    // The first warm-up inference is the checked one: a wrong model wastes no timed runs.
    int64_t runs = 0;
    for (int i = 0; i < input.warmup; ++i) {
      output = runner->run(data);
      ++runs;
      if (i == 0) check(output);
      check_deadline("warming up", runs);
    }

    const MeasureOptions& options = input.options;
    int64_t number = std::max(1, options.number);
    constexpr int64_t kMaxNumber = int64_t{1} << 30;
    MeasureResult result;
    for (int r = 0; r < std::max(1, options.repeat); ++r) {
      double duration_s = 0;
      for (;;) {
        const auto begin = Clock::now();
        for (int64_t j = 0; j < number; ++j) output = runner->run(data);
        duration_s = seconds_since(begin);
        runs += number;
        check_deadline("timing", runs);
        if (options.min_repeat_ms <= 0 || duration_s * 1e3 >= options.min_repeat_ms ||
            number >= kMaxNumber)
          break;
        // TVM's rule, as GlRuntime's kernel measurements grow `number`.
        const double per_run_ms = std::max(duration_s * 1e3 / static_cast<double>(number), 1e-6);
        const double next =
            std::max(options.min_repeat_ms / per_run_ms + 1, static_cast<double>(number) * 1.618);
        number = std::min<int64_t>(kMaxNumber, std::max<int64_t>(number + 1, std::llround(next)));
      }
      result.costs.push_back(duration_s / static_cast<double>(number));
    }
    if (input.warmup == 0) check(output);
    spdlog::info("model job: {} median of {} measurements {:.3f} ms ({} inferences)", input.model,
                 result.costs.size(), 1e3 * result.costs[result.costs.size() / 2], runs);
    return finish(std::move(result));
  } catch (const ModelJobError& e) {
    return fail(e.error(), e.what());
  } catch (const ModelRunError& e) {
    return fail(MeasureErrorNo::kRuntimeDevice, e.what());
  } catch (const std::bad_alloc&) {
    return fail(MeasureErrorNo::kRuntimeDevice, "out of host memory while running the model");
  } catch (const std::exception& e) {
    return fail(MeasureErrorNo::kUnknown, e.what());
  }
}

bj::object model_worker_request(const std::string& dir, const ModelMeasureInput& input,
                                double time_left_s) {
  return bj::object{
      {"kind", "model"}, {"dir", dir}, {"input", input.to_json()}, {"time_left_s", time_left_s}};
}

MeasureResult run_model_worker_request(const bj::object& request) {
  ModelMeasureInput input;
  std::string dir;
  double time_left = 0;
  try {
    input = ModelMeasureInput::from_json(json::field(request, "input"));
    dir = json::get_string(request, "dir");
    time_left = json::get_double(request, "time_left_s");
  } catch (const std::exception& e) {
    MeasureResult r = MeasureResult::failure(
        MeasureErrorNo::kUnknown,
        std::string("the GL worker could not read the model request: ") + e.what());
    r.timestamp = unix_now();
    return r;
  }
  return measure_model_package(dir, input, time_left);
}

std::string default_model_cache_dir() {
  if (const char* env = std::getenv("WEBTUNE_MODEL_CACHE"); env != nullptr && *env != '\0')
    return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return (fs::path(xdg) / "webtune" / "models").string();
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return (fs::path(home) / ".cache" / "webtune" / "models").string();
  return "/tmp/webtune-models-" + std::to_string(::getuid());
}

}  // namespace webtune
