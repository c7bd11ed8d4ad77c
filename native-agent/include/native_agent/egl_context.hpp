/// \file egl_context.hpp
/// A headless OpenGL ES 3.x context through EGL, with no display and no window.
///
/// Display selection, first that works: EGL_EXT_device_enumeration + EGL_PLATFORM_DEVICE_EXT
/// (NVIDIA, Mesa), then EGL_PLATFORM_SURFACELESS_MESA (Mesa llvmpipe), then
/// eglGetDisplay(EGL_DEFAULT_DISPLAY). Config with EGL_PBUFFER_BIT; made current with
/// EGL_NO_SURFACE (EGL_KHR_surfaceless_context). Asks for ES 3.2, then 3.1, then 3.0.
/// Among enumerated devices, hardware comes before software renderers (EGL_MESA_device_software).
/// The environment variable WEBTUNE_EGL_PLATFORM=device|surfaceless|default restricts the paths
/// tried. Several EglContexts may live at once (they share the EGL display, which is terminated
/// with the last of them).
#pragma once

#include <boost/json/fwd.hpp>
#include <memory>
#include <string>

#include "codegen/config_space.hpp"

namespace webtune {

/// What the device says about itself, reported at an agent's hello.
struct GlDeviceInfo {
  std::string platform;  ///< "device", "surfaceless" or "default": which display path worked
  std::string vendor, renderer, version, glsl_version;  ///< glGetString values
  int major = 0, minor = 0;                             ///< context's ES version
  bool color_buffer_float = false;                      ///< EXT_color_buffer_float present
  DeviceLimits limits;

  /// A short key suffix, e.g. "llvmpipe" or "nvidia-h200": lower-case, [a-z0-9-] only.
  std::string short_name() const;
  boost::json::object to_json() const;
  static GlDeviceInfo from_json(const boost::json::value& value);
};

/// Owns the EGL display and context; the context is current on the creating thread.
class EglContext {
 public:
  /// Creates the context and makes it current on the calling thread; throws std::runtime_error
  /// naming each display path tried and why it failed.
  static std::unique_ptr<EglContext> create();
  ~EglContext();
  EglContext(const EglContext&) = delete;
  EglContext& operator=(const EglContext&) = delete;

  const GlDeviceInfo& info() const { return info_; }
  /// Makes the context current on the calling thread.
  void make_current();

 private:
  EglContext() = default;
  void* display_ = nullptr;  // EGLDisplay
  void* context_ = nullptr;  // EGLContext
  GlDeviceInfo info_;
};

}  // namespace webtune
