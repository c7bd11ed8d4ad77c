/// \file package_files.cpp
/// A package on disk: the model's hash, `build_package` (import → plan → write), the files of
/// write_package, and the JavaScript runtime embedded at build time (copy_web_runtime).
#include <openssl/evp.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>

#include "codegen/json_util.hpp"
#include "deploy/planner.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "tuner/tune_target.hpp"

namespace webtune::deploy {

namespace embedded {
/// One runtime file; the generated web_runtime_files.cpp (deploy/CMakeLists.txt) defines them.
struct RuntimeFile {
  const char* name;
  const unsigned char* data;
  size_t size;
};
extern const RuntimeFile kRuntimeFiles[];
extern const size_t kRuntimeFileCount;
}  // namespace embedded

namespace fs = std::filesystem;
namespace bj = boost::json;

namespace {

/// Files and folders a package consists of (write_package replaces them in an old package).
const std::vector<std::string>& package_entries() {
  static const std::vector<std::string> entries = {"manifest.json", "weights.bin", "kernels",
                                                   "report.txt",    "model.mjs",   "runtime",
                                                   "index.html"};
  return entries;
}

void write_file(const fs::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size)))
    throw std::runtime_error("cannot write '" + path.string() + "'");
}

void write_text(const fs::path& path, const std::string& text) {
  write_file(path, text.data(), text.size());
}

/// True when `dir` holds a package's manifest.json (format webtune-package).
bool is_package(const fs::path& dir) {
  const fs::path manifest = dir / "manifest.json";
  if (!fs::is_regular_file(manifest)) return false;
  try {
    const bj::value v = json::read_file(manifest.string());
    const bj::value* format = v.is_object() ? v.as_object().if_contains("format") : nullptr;
    return format && format->is_string() && format->as_string() == kPackageFormat;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL: cannot start a SHA-256");
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0)
      EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw std::runtime_error("cannot read '" + path + "'");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

std::vector<std::string> web_runtime_files() {
  std::vector<std::string> names;
  for (size_t i = 0; i < embedded::kRuntimeFileCount; ++i)
    names.emplace_back(embedded::kRuntimeFiles[i].name);
  return names;
}

int copy_web_runtime(const std::string& dir) {
  if (embedded::kRuntimeFileCount == 0) return 0;
  const fs::path runtime = fs::path(dir) / "runtime";
  fs::create_directories(runtime);
  for (size_t i = 0; i < embedded::kRuntimeFileCount; ++i) {
    const embedded::RuntimeFile& f = embedded::kRuntimeFiles[i];
    // The page (index.html) sits at the package's root, beside manifest.json; it loads
    // runtime/page.mjs. Modules go to runtime/.
    const bool page = fs::path(f.name).extension() == ".html";
    write_file((page ? fs::path(dir) : runtime) / f.name, f.data, f.size);
  }
  write_text(fs::path(dir) / "model.mjs", "export { load } from './runtime/model.mjs';\n");
  return static_cast<int>(embedded::kRuntimeFileCount);
}

void write_package(const PlannedPackage& package, const std::string& dir) {
  const fs::path root(dir);
  if (fs::exists(root)) {
    if (!fs::is_directory(root))
      throw std::runtime_error("output '" + dir + "' exists and is not a folder");
    const bool empty = fs::is_empty(root);
    if (!empty && !is_package(root))
      throw std::runtime_error("output folder '" + dir +
                               "' is not empty and holds no package (no manifest.json of a "
                               "webtune package): refusing to write into it");
    if (!empty)
      for (const std::string& entry : package_entries()) fs::remove_all(root / entry);
  }
  fs::create_directories(root / "kernels");
  for (size_t i = 0; i < package.kernels.size(); ++i)
    write_text(root / kernel_file(i), bj::serialize(package.kernels[i].to_json()) + "\n");
  const std::vector<float>& w = package.weights;
  write_file(root / "weights.bin", w.data(), w.size() * sizeof(float));  // little-endian hosts
  if (tune_target_from_name(package.manifest.target).browser) copy_web_runtime(dir);
  write_text(root / "report.txt", package.report());
  // The manifest last: a folder with a manifest is a complete package.
  write_text(root / "manifest.json", bj::serialize(package.manifest.to_json()) + "\n");
}

PlannedPackage build_package(const BuildOptions& options) {
  graph::ImportOptions import;
  import.symbolic_dims = options.symbolic_dims;
  graph::ImportReport import_report;
  graph::Graph graph = graph::import_onnx_file(options.model_path, import, &import_report);
  if (options.fuse) graph::run_fusion_passes(graph);

  std::unique_ptr<RecordStore> store;
  if (!options.db_path.empty()) {
    if (!is_postgres_url(options.db_path) && !fs::is_regular_file(options.db_path))
      throw std::runtime_error("no records database at '" + options.db_path + "'");
    // Read-only: building a package never changes the records it reads (an older file is
    // migrated in memory, not on disk).
    store = std::make_unique<RecordStore>(options.db_path, RecordStore::Access::kReadOnly);
  }
  PlanOptions plan;
  plan.target = options.target;
  plan.device_key = options.device_key;
  plan.records = store.get();
  plan.opset = import_report.opset > 0 ? import_report.opset : 13;
  plan.quad_layers = options.quad_layers;
  plan.workgroup_reductions = options.workgroup_reductions;
  const fs::path model(options.model_path);
  plan.model.name = model.stem().string();  // exporters name graphs "main_graph", "torch_jit"
  plan.model.file = model.filename().string();
  plan.model.sha256 = file_sha256(options.model_path);
  // Refuse a bad output folder before the (long) planning.
  if (fs::exists(options.out_dir) && fs::is_directory(options.out_dir) &&
      !fs::is_empty(options.out_dir) && !is_package(options.out_dir))
    throw std::runtime_error("output folder '" + options.out_dir +
                             "' is not empty and holds no package (no manifest.json of a "
                             "webtune package): refusing to write into it");
  PlannedPackage package = plan_package(graph, plan);
  if (!import_report.simplified.empty())
    package.notes.push_back("import simplified the model: " + import_report.simplified.summary());
  if (!options.fuse) package.notes.push_back("fusion passes off (--no-fusion)");
  if (!options.quad_layers)
    package.notes.push_back("quad layers off (--no-quad-layers): every tuned output as tuned");
  if (!options.workgroup_reductions)
    package.notes.push_back(
        "workgroup reductions off (--no-workgroup-reductions): one invocation per output");
  if (tune_target_from_name(options.target).browser) {
    const size_t files = web_runtime_files().size();
    package.notes.push_back(
        files > 0 ? "runtime: " + std::to_string(files) +
                        " JavaScript files copied into runtime/, and model.mjs"
                  : "runtime: none embedded (this webtune was built from a checkout without "
                    "runtime/*.mjs): copy the repository's runtime/ folder into the package "
                    "and write model.mjs (docs/package.md) by hand");
  }
  if (store) package.notes.insert(package.notes.begin(), "records: " + options.db_path);
  write_package(package, options.out_dir);
  return package;
}

}  // namespace webtune::deploy
