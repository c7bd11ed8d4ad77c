/// \file device_class.cpp
/// Host facts and device-class keys of native agents.
#include "native_agent/device_class.hpp"

#include <sched.h>
#include <sys/utsname.h>

#include <boost/json.hpp>
#include <cctype>
#include <fstream>
#include <thread>

namespace webtune {

std::string slug(std::string_view text) {
  std::string t(text);
  if (auto at = t.find(" @ "); at != std::string::npos) t.resize(at);  // "@ 2.70GHz"
  for (std::string_view mark : {"(R)", "(r)", "(TM)", "(tm)"})
    for (size_t at; (at = t.find(mark)) != std::string::npos;) t.erase(at, mark.size());
  std::string out;
  std::string word;
  auto flush = [&] {
    if (word.empty() || word == "cpu") {
      word.clear();
      return;
    }
    if (!out.empty()) out += '-';
    out += word;
    word.clear();
  };
  for (char c : t) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '.')
      word += static_cast<char>(std::tolower(u));
    else
      flush();
  }
  flush();
  return out.empty() ? "unknown" : out;
}

std::string driver_name(std::string_view version) {
  std::string v(version);
  for (const char* vendor : {"Mesa", "NVIDIA", "ANGLE"}) {
    if (auto at = v.find(vendor); at != std::string::npos) return slug(v.substr(at));
  }
  // Skip "OpenGL ES 3.2 " and keep what follows.
  size_t at = v.find("OpenGL ES");
  if (at != std::string::npos) {
    at = v.find(' ', at + 10);
    v = at == std::string::npos ? "" : v.substr(at + 1);
  }
  return slug(v);
}

bool is_software_renderer(const GlDeviceInfo& device) {
  const std::string r = slug(device.renderer);
  for (const char* name : {"llvmpipe", "softpipe", "swiftshader", "lavapipe"})
    if (r.find(name) != std::string::npos) return true;
  return false;
}

HostInfo HostInfo::current() {
  HostInfo h;
  utsname u{};
  if (uname(&u) == 0)
    h.os = slug(std::string(u.sysname) + "-" + u.machine);
  else
    h.os = "unknown-os";
  // slug() keeps '.' and turns '_' into '-': "x86_64" → "x86-64"; keep the usual spelling.
  for (size_t at; (at = h.os.find("x86-64")) != std::string::npos;) h.os.replace(at, 6, "x86_64");
  h.cpu_model = "unknown-cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      if (auto colon = line.find(':'); colon != std::string::npos)
        h.cpu_model = slug(line.substr(colon + 1));
      break;
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  h.cpu_threads = sched_getaffinity(0, sizeof set, &set) == 0
                      ? CPU_COUNT(&set)
                      : static_cast<int>(std::thread::hardware_concurrency());
  return h;
}

std::string device_class_key(std::string_view family, const GlDeviceInfo& device,
                             const HostInfo& host) {
  std::string key = std::string(family) + ":" + device.short_name() + ":" +
                    driver_name(device.version) + ":" + host.os;
  if (is_software_renderer(device))
    key += ":" + host.cpu_model + ":" + std::to_string(host.cpu_threads) + "t";
  return key;
}

boost::json::object device_class_json(const GlDeviceInfo& device, const HostInfo& host) {
  boost::json::object o = device.to_json();
  o["os"] = host.os;
  o["cpu_model"] = host.cpu_model;
  o["cpu_threads"] = host.cpu_threads;
  o["driver"] = driver_name(device.version);
  return o;
}

}  // namespace webtune
