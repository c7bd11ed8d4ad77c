/// \file model_job.cpp
/// The model measure input and the package facts the farm reads (model_job.hpp).
#include "tracker/model_job.hpp"

#include <openssl/evp.h>

#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "codegen/json_util.hpp"
#include "codegen/workload.hpp"
#include "tracker/protocol.hpp"

namespace webtune::tracker {

namespace bj = boost::json;
namespace fs = std::filesystem;

namespace {

bool is_lower_hex64(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

int64_t elements_of(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    // Bounded as Workload::validate bounds tensors: the product stays far from overflow.
    if (d < 1 || d > (int64_t{1} << 28) || n > (int64_t{1} << 28) / d)
      throw std::invalid_argument(what +
                                  ": a shape of positive dimensions with at most 2^28 "
                                  "elements");
    n *= d;
  }
  return n;
}

}  // namespace

bj::object ModelMeasureInput::to_json() const {
  bj::array s;
  for (const ModelSample& sample : samples)
    s.push_back(bj::object{
        {"index", sample.index}, {"value", sample.value}, {"tolerance", sample.tolerance}});
  bj::object o = options.to_json();
  o["warmup"] = warmup;
  return bj::object{
      {"kind", kJobKindModel}, {"model", model},          {"manifest_sha256", manifest_sha256},
      {"seed", seed},          {"samples", std::move(s)}, {"options", std::move(o)}};
}

ModelMeasureInput ModelMeasureInput::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "model measure input");
  if (!is_model_input(value))
    throw std::invalid_argument("model measure input: 'kind' must be \"model\"");
  ModelMeasureInput m;
  m.model = json::get_string(o, "model");
  if (!valid_model_name(m.model))
    throw std::invalid_argument(
        "model measure input: 'model' must be 1 to 100 characters of [A-Za-z0-9._-], not "
        "starting with '.'");
  m.manifest_sha256 = json::get_string(o, "manifest_sha256");
  if (!is_lower_hex64(m.manifest_sha256))
    throw std::invalid_argument(
        "model measure input: 'manifest_sha256' must be 64 lowercase hex digits");
  const bj::value& seed = json::field(o, "seed");
  if (seed.is_uint64())
    m.seed = seed.get_uint64();
  else {
    const int64_t s = json::to_int(seed, "model measure input: 'seed'");
    if (s < 0) throw std::invalid_argument("model measure input: 'seed' must be >= 0");
    m.seed = static_cast<uint64_t>(s);
  }
  if (auto it = o.find("samples"); it != o.end()) {
    if (!it->value().is_array())
      throw std::invalid_argument("model measure input: 'samples' must be an array");
    const bj::array& samples = it->value().get_array();
    if (samples.size() > static_cast<size_t>(kMaxSamples))
      throw std::invalid_argument("model measure input: " + std::to_string(samples.size()) +
                                  " samples, more than the limit of " +
                                  std::to_string(kMaxSamples));
    for (size_t i = 0; i < samples.size(); ++i) {
      const std::string where = "model measure input: samples[" + std::to_string(i) + "]";
      const bj::object& so = json::as_object(samples[i], where);
      ModelSample s;
      s.index = json::to_int(json::field(so, "index"), where + ".index");
      s.value = json::to_double(json::field(so, "value"), where + ".value");
      s.tolerance = json::to_double(json::field(so, "tolerance"), where + ".tolerance");
      if (s.index < 0) throw std::invalid_argument(where + ": 'index' must be >= 0");
      if (!std::isfinite(s.value) || !std::isfinite(s.tolerance) || s.tolerance < 0)
        throw std::invalid_argument(where + ": needs a finite value and a tolerance >= 0");
      m.samples.push_back(s);
    }
  }
  if (auto it = o.find("options"); it != o.end()) {
    m.options = MeasureOptions::from_json(it->value());
    const int64_t warmup = json::get_int_or(it->value().get_object(), "warmup", m.warmup);
    if (warmup < 0 || warmup > kMaxModelWarmup)
      throw std::invalid_argument(
          "model measure input: options.warmup = " + std::to_string(warmup) + " must be in [0, " +
          std::to_string(kMaxModelWarmup) + "]");
    m.warmup = static_cast<int>(warmup);
  }
  return m;
}

bool is_model_input(const bj::value& input) {
  if (!input.is_object()) return false;
  auto it = input.get_object().find("kind");
  if (it == input.get_object().end()) return false;
  if (!it->value().is_string())
    throw std::invalid_argument("'kind' must be a string: \"kernel\" or \"model\"");
  const std::string_view kind = it->value().get_string();
  if (kind == kJobKindModel) return true;
  if (kind == kJobKindKernel) return false;
  throw std::invalid_argument("'kind' must be \"kernel\" or \"model\"");
}

bool valid_model_name(std::string_view name) {
  if (name.empty() || name.size() > 100 || name.front() == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string key_family_for_target(std::string_view target) {
  if (target == "webgl2" || target == "webgpu" || target == "wasm") return std::string(target);
  if (target == "gles-compute" || target == "gles-frag") return "gles";
  throw std::invalid_argument("unknown package target '" + std::string(target.substr(0, 32)) +
                              "' (webgl2, webgpu, wasm, gles-compute, gles-frag)");
}

std::string key_family(std::string_view key) {
  return std::string(key.substr(0, key.find(':')));
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

ModelPackageFacts read_model_package(const std::string& dir) {
  const std::string where = "package '" + dir + "': ";
  const fs::path manifest_path = fs::path(dir) / "manifest.json";
  std::error_code ec;
  if (!fs::is_regular_file(manifest_path, ec))
    throw std::invalid_argument(where + "no manifest.json (is it a built package?)");
  const std::uintmax_t size = fs::file_size(manifest_path, ec);
  if (ec || size > kMaxManifestBytes)
    throw std::invalid_argument(where + "manifest.json is larger than " +
                                std::to_string(kMaxManifestBytes >> 20) + " MiB");
  std::ifstream in(manifest_path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (!in) throw std::invalid_argument(where + "cannot read manifest.json");
  const std::string bytes = buffer.str();

  ModelPackageFacts f;
  f.dir = dir;
  f.manifest_sha256 = sha256_hex(bytes);
  try {
    boost::system::error_code parse_error;
    const bj::value document = bj::parse(bytes, parse_error);
    if (parse_error) throw std::invalid_argument("not JSON: " + parse_error.message());
    const bj::object& m = json::as_object(document, "the manifest");
    if (json::get_string(m, "format") != "webtune-package" || json::get_int(m, "version") != 1)
      throw std::invalid_argument("'format' must be \"webtune-package\" and 'version' 1");
    const bj::object& model = json::as_object(json::field(m, "model"), "'model'");
    f.model_name = json::get_string_or(model, "name", "");
    f.model_sha256 = json::get_string_or(model, "sha256", "");
    f.target = json::get_string(m, "target");
    key_family_for_target(f.target);  // throws for a target no agent runs
    if (auto k = m.find("device_key"); k != m.end() && k->value().is_string())
      f.device_key = std::string(k->value().get_string());
    for (const char* list : {"inputs", "outputs"}) {
      const bj::value& v = json::field(m, list);
      if (!v.is_array() || v.get_array().empty())
        throw std::invalid_argument("'" + std::string(list) + "' must be a non-empty array");
      const std::string what = std::string(list) + "[0].shape";
      const bj::object& tensor = json::as_object(v.get_array()[0], std::string(list) + "[0]");
      const std::vector<int64_t> shape = json::get_int_array(tensor, "shape");
      const std::string name = json::get_string_or(tensor, "name", "");
      const int64_t n = elements_of(shape, what);
      if (std::string_view(list) == "inputs") {
        f.input_name = name;
        f.input_shape = shape;
        f.input_elements = n;
      } else {
        f.output_name = name;
        f.output_shape = shape;
        f.output_elements = n;
      }
    }
    const bj::value& tasks = json::field(m, "tasks");
    if (!tasks.is_array()) throw std::invalid_argument("'tasks' must be an array");
    size_t i = 0;
    for (const bj::value& t : tasks.get_array()) {
      const std::string what = "tasks[" + std::to_string(i++) + "]";
      try {
        const bj::object& task = json::as_object(t, what);
        const Workload w = Workload::from_json(json::field(task, "workload"));
        w.validate();
        const bj::value& nodes = json::field(task, "nodes");
        if (!nodes.is_array()) throw std::invalid_argument("'nodes' must be an array");
        f.flops += w.flops() * static_cast<double>(nodes.get_array().size());
      } catch (const std::exception& e) {
        throw std::invalid_argument(what + ": " + e.what());
      }
    }
    if (auto e = m.find("estimated_ms"); e != m.end() && !e->value().is_null()) {
      const double ms = json::to_double(e->value(), "'estimated_ms'");
      if (!std::isfinite(ms) || ms < 0)
        throw std::invalid_argument("'estimated_ms' must be null or a finite number >= 0");
      f.estimated_ms = ms;
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + "manifest.json: " + e.what());
  }
  const fs::path weights = fs::path(dir) / "weights.bin";
  if (fs::is_regular_file(weights, ec)) {
    const std::uintmax_t w = fs::file_size(weights, ec);
    if (!ec) f.weights_bytes = static_cast<int64_t>(w);
  }
  f.bytes = static_cast<double>(f.weights_bytes) +
            4.0 * static_cast<double>(f.input_elements + f.output_elements);
  return f;
}

const ModelPackageFacts& ModelPackageCache::get(const std::string& dir) {
  auto stamp_of = [](const fs::path& file) {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec) return std::string("-");
    const auto time = fs::last_write_time(file, ec);
    return std::to_string(size) + "@" +
           std::to_string(ec ? 0 : static_cast<long long>(time.time_since_epoch().count()));
  };
  const std::string stamp =
      stamp_of(fs::path(dir) / "manifest.json") + "," + stamp_of(fs::path(dir) / "weights.bin");
  auto it = entries_.find(dir);
  if (it != entries_.end() && it->second.stamp == stamp) return it->second.facts;
  ModelPackageFacts facts = read_model_package(dir);  // throws: nothing cached
  ++reads_;
  if (entries_.size() >= kMaxEntries && it == entries_.end()) entries_.clear();
  Entry& e = entries_[dir];
  e.stamp = stamp;
  e.facts = std::move(facts);
  return e.facts;
}

}  // namespace webtune::tracker
