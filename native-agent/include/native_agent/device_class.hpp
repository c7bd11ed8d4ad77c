/// \file device_class.hpp
/// The device class a native agent measures on, and the tracker key that names it.
///
/// Results of one tuning job must all come from one class of device (docs/protocol.md, "Device
/// classes"): two agents that share a key must be interchangeable for timing. A native agent's
/// key is therefore
///
///   gles:<device>:<driver>:<os>-<arch>                   a GPU, e.g.
///       gles:nvidia-h200:nvidia-550.90.07:linux-x86_64
///   gles:<device>:<driver>:<os>-<arch>:<cpu>:<N>t        a software renderer, whose speed is
///       the CPU's, e.g. gles:llvmpipe:mesa-22.3.6:linux-x86_64:intel-xeon-platinum-8481c:2t
///
/// Every part is lower case from [a-z0-9.-]; the first two parts are what keys were before
/// (`gles:llvmpipe`), so key prefixes that tuners and records use keep matching.
#pragma once

#include <boost/json/fwd.hpp>
#include <string>
#include <string_view>

#include "native_agent/egl_context.hpp"

namespace webtune {

/// What the host machine adds to the device class.
struct HostInfo {
  std::string os;         ///< "linux-x86_64" (uname's system and machine, lower case)
  std::string cpu_model;  ///< /proc/cpuinfo's "model name", slugified; "unknown-cpu" if absent
  int cpu_threads = 0;    ///< hardware threads this process may run on (sched_getaffinity)

  /// Reads the running machine.
  static HostInfo current();
};

/// Lower case, runs of anything outside [a-z0-9.] become one '-', "(R)", "(TM)", "CPU" and an
/// "@ 2.70GHz" clock suffix dropped; never empty ("unknown").
std::string slug(std::string_view text);
/// The driver part of a GL version string: "OpenGL ES 3.2 Mesa 22.3.6" → "mesa-22.3.6",
/// "OpenGL ES 3.2 NVIDIA 550.90.07" → "nvidia-550.90.07"; else the slug of what follows the ES
/// version.
std::string driver_name(std::string_view gl_version);
/// True for Mesa's and Google's software renderers (llvmpipe, softpipe, SwiftShader).
bool is_software_renderer(const GlDeviceInfo& device);
/// The key of the device class (see the file comment) for target family `family` ("gles").
std::string device_class_key(std::string_view family, const GlDeviceInfo& device,
                             const HostInfo& host);
/// The agent's hello `device` object: GlDeviceInfo::to_json plus "os", "cpu_model",
/// "cpu_threads" and "driver".
boost::json::object device_class_json(const GlDeviceInfo& device, const HostInfo& host);

}  // namespace webtune
