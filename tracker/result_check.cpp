/// \file result_check.cpp
/// Job facts, device peaks and the plausibility rules of result_check.hpp.
#include "tracker/result_check.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "codegen/json_util.hpp"
#include "tracker/protocol.hpp"

namespace webtune::tracker {

namespace bj = boost::json;

namespace {

bool names_software_rasterizer(const std::string& text) {
  for (const char* name : {"llvmpipe", "softpipe", "swiftshader", "lavapipe"})
    if (text.find(name) != std::string::npos) return true;
  return false;
}

}  // namespace

DevicePeak DevicePeak::estimate(std::string_view key, const bj::object& device,
                                const PlausibilityPolicy& policy) {
  std::string renderer;
  if (auto r = device.find("renderer"); r != device.end() && r->value().is_string())
    renderer = ascii_lower(r->value().get_string());
  const std::string k = ascii_lower(key);
  DevicePeak peak;
  peak.cpu = k.rfind("wasm:", 0) == 0 || k == "wasm" || names_software_rasterizer(k) ||
             names_software_rasterizer(renderer);
  if (!peak.cpu) {
    peak.gflops = policy.gpu_gflops;
    peak.gbps = policy.gpu_gbps;
    return peak;
  }
  double threads = policy.cpu_threads_when_unknown;
  if (auto t = device.find("cpu_threads"); t != device.end() && t->value().is_number()) {
    const double n = t->value().to_number<double>();
    if (std::isfinite(n) && n >= 1) threads = std::min(n, double(policy.cpu_threads_when_unknown));
  }
  peak.gflops = threads * policy.cpu_gflops_per_thread;
  peak.gbps = threads * policy.cpu_gbps_per_thread;
  return peak;
}

CheckedResult check_result(const bj::value& value, const JobFacts& job, const DevicePeak& peak) {
  CheckedResult out;
  if (!value.is_object()) {
    out.refusal = "'result' must be an object";
    return out;
  }
  const bj::object& r = value.get_object();
  auto e = r.find("error_no");
  if (e == r.end() || !e->value().is_int64() || e->value().get_int64() < 0 ||
      e->value().get_int64() > 8) {
    out.refusal = "'error_no' must be an integer from 0 to 8";
    return out;
  }
  out.error = static_cast<MeasureErrorNo>(e->value().get_int64());
  if (auto m = r.find("message"); m != r.end() && !m->value().is_string()) {
    out.refusal = "'message' must be a string";
    return out;
  }
  for (const char* field : {"all_cost", "timestamp"}) {
    auto f = r.find(field);
    if (f == r.end()) continue;
    if (!f->value().is_number() || !std::isfinite(f->value().to_number<double>()) ||
        f->value().to_number<double>() < 0) {
      out.refusal = "'" + std::string(field) + "' must be a finite number >= 0";
      return out;
    }
  }
  std::vector<double> costs;
  if (auto c = r.find("costs"); c != r.end()) {
    if (!c->value().is_array()) {
      out.refusal = "'costs' must be an array";
      return out;
    }
    for (const bj::value& v : c->value().get_array()) {
      if (!v.is_number()) {
        out.refusal = "'costs' must hold numbers";
        return out;
      }
      costs.push_back(v.to_number<double>());
    }
  }
  if (out.error != MeasureErrorNo::kNoError) return out;  // a failure claims no speed

  if (static_cast<int>(costs.size()) != job.repeat) {
    out.refusal = "a successful result must carry " + std::to_string(job.repeat) +
                  " cost(s), the job's repeat, not " + std::to_string(costs.size());
    return out;
  }
  double fastest = std::numeric_limits<double>::infinity();
  for (double c : costs) {
    if (!std::isfinite(c) || c <= 0) {
      out.refusal = "costs must be finite and positive seconds";
      return out;
    }
    fastest = std::min(fastest, c);
  }
  const double gflops = job.flops / fastest / 1e9;
  const double gbps = job.bytes / fastest / 1e9;
  char text[256];
  if (peak.gflops > 0 && gflops > peak.gflops) {
    std::snprintf(text, sizeof text,
                  "a cost of %.3g s means %.4g GFLOP/s, beyond this device's peak estimate of "
                  "%.4g GFLOP/s",
                  fastest, gflops, peak.gflops);
    out.refusal = text;
  } else if (peak.gbps > 0 && gbps > peak.gbps) {
    std::snprintf(text, sizeof text,
                  "a cost of %.3g s means %.4g GB/s of compulsory traffic, beyond this device's "
                  "peak estimate of %.4g GB/s",
                  fastest, gbps, peak.gbps);
    out.refusal = text;
  }
  return out;
}

}  // namespace webtune::tracker
