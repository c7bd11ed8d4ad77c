/// \file egl_context.cpp
/// Headless EGL display and OpenGL ES context selection, and what the device reports about itself.
///
/// Three display paths are tried in order, because no single one works everywhere: device
/// enumeration (the only one that reaches an NVIDIA GPU without an X server), Mesa's surfaceless
/// platform (llvmpipe in containers), and the default display (whatever EGL_PLATFORM says).
/// Every failure is remembered so that, when nothing works, the exception says why for each path.
#include "native_agent/egl_context.hpp"

#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl32.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "codegen/json_util.hpp"

namespace webtune {
namespace {

std::string egl_error_name(EGLint code) {
  switch (code) {
    case EGL_SUCCESS:
      return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED:
      return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS:
      return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC:
      return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE:
      return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG:
      return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT:
      return "EGL_BAD_CONTEXT";
    case EGL_BAD_CURRENT_SURFACE:
      return "EGL_BAD_CURRENT_SURFACE";
    case EGL_BAD_DISPLAY:
      return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH:
      return "EGL_BAD_MATCH";
    case EGL_BAD_NATIVE_PIXMAP:
      return "EGL_BAD_NATIVE_PIXMAP";
    case EGL_BAD_NATIVE_WINDOW:
      return "EGL_BAD_NATIVE_WINDOW";
    case EGL_BAD_PARAMETER:
      return "EGL_BAD_PARAMETER";
    case EGL_BAD_SURFACE:
      return "EGL_BAD_SURFACE";
    case EGL_CONTEXT_LOST:
      return "EGL_CONTEXT_LOST";
    default: {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "EGL error 0x%04X", static_cast<unsigned>(code));
      return buffer;
    }
  }
}

/// "<call> failed: EGL_BAD_MATCH", from the thread's last EGL error.
std::string egl_failure(std::string_view call) {
  return std::string(call) + " failed: " + egl_error_name(eglGetError());
}

/// True when the space-separated extension list `list` names `name` exactly (a substring test
/// would confuse EGL_EXT_device_base with EGL_EXT_device_base_foo).
bool has_extension(const char* list, std::string_view name) {
  if (list == nullptr) return false;
  std::string_view rest(list);
  while (!rest.empty()) {
    size_t space = rest.find(' ');
    std::string_view word = rest.substr(0, space);
    if (word == name) return true;
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
  }
  return false;
}

std::string gl_string(GLenum name) {
  const GLubyte* value = glGetString(name);
  return value != nullptr ? reinterpret_cast<const char*>(value) : "";
}

int64_t gl_integer(GLenum name) {
  GLint64 value = 0;
  glGetInteger64v(name, &value);
  return value;
}

int64_t gl_integer_indexed(GLenum name, GLuint index) {
  GLint64 value = 0;
  glGetInteger64i_v(name, index, &value);
  return value;
}

/// One display to try, with a label for logs and errors.
struct Candidate {
  std::string platform;  // "device", "surfaceless" or "default"
  std::string label;     // e.g. "device 1 (/dev/dri/renderD128)"
  EGLDisplay display = EGL_NO_DISPLAY;
};

// EGL hands out one display handle per (platform, native display) and process, and eglTerminate
// destroys every context on it: count our live contexts per display so that destroying one
// EglContext (or a failed attempt) never terminates a display another EglContext still uses.
std::mutex display_mutex;
std::map<EGLDisplay, int> display_users;

int display_user_count(EGLDisplay display) {
  std::lock_guard lock(display_mutex);
  auto it = display_users.find(display);
  return it == display_users.end() ? 0 : it->second;
}

void add_display_user(EGLDisplay display) {
  std::lock_guard lock(display_mutex);
  ++display_users[display];
}

/// Returns true when this was the last user, so the display may be terminated.
bool remove_display_user(EGLDisplay display) {
  std::lock_guard lock(display_mutex);
  auto it = display_users.find(display);
  if (it == display_users.end()) return true;
  if (--it->second > 0) return false;
  display_users.erase(it);
  return true;
}

PFNEGLGETPLATFORMDISPLAYEXTPROC platform_display_function() {
  // EGL 1.5 has eglGetPlatformDisplay in core, but the EXT entry point takes the same arguments
  // and also exists on 1.4 implementations; look it up rather than link it.
  return reinterpret_cast<PFNEGLGETPLATFORMDISPLAYEXTPROC>(
      eglGetProcAddress("eglGetPlatformDisplayEXT"));
}

/// Displays of EGL_EXT_device_enumeration, hardware before software renderers (Mesa marks its
/// software device with EGL_MESA_device_software), each in enumeration order.
std::vector<Candidate> device_candidates(const char* client_extensions,
                                         std::vector<std::string>& failures) {
  std::vector<Candidate> candidates;
  if (!has_extension(client_extensions, "EGL_EXT_device_enumeration") &&
      !has_extension(client_extensions, "EGL_EXT_device_base")) {
    failures.push_back("device: EGL_EXT_device_enumeration is not supported by this EGL");
    return candidates;
  }
  if (!has_extension(client_extensions, "EGL_EXT_platform_device")) {
    failures.push_back("device: EGL_EXT_platform_device is not supported by this EGL");
    return candidates;
  }
  auto query_devices =
      reinterpret_cast<PFNEGLQUERYDEVICESEXTPROC>(eglGetProcAddress("eglQueryDevicesEXT"));
  auto query_device_string = reinterpret_cast<PFNEGLQUERYDEVICESTRINGEXTPROC>(
      eglGetProcAddress("eglQueryDeviceStringEXT"));
  auto get_platform_display = platform_display_function();
  if (query_devices == nullptr || query_device_string == nullptr ||
      get_platform_display == nullptr) {
    failures.push_back("device: eglQueryDevicesEXT or eglGetPlatformDisplayEXT is missing");
    return candidates;
  }
  EGLint count = 0;
  if (query_devices(0, nullptr, &count) != EGL_TRUE) {
    failures.push_back("device: " + egl_failure("eglQueryDevicesEXT"));
    return candidates;
  }
  if (count <= 0) {
    failures.push_back("device: eglQueryDevicesEXT found no device");
    return candidates;
  }
  std::vector<EGLDeviceEXT> devices(static_cast<size_t>(count));
  if (query_devices(count, devices.data(), &count) != EGL_TRUE) {
    failures.push_back("device: " + egl_failure("eglQueryDevicesEXT"));
    return candidates;
  }
  devices.resize(static_cast<size_t>(count));

  std::vector<Candidate> software;
  for (size_t i = 0; i < devices.size(); ++i) {
    const char* extensions = query_device_string(devices[i], EGL_EXTENSIONS);
    bool is_software = has_extension(extensions, "EGL_MESA_device_software");
    std::string label = "device " + std::to_string(i);
    if (has_extension(extensions, "EGL_EXT_device_drm")) {
      if (const char* file = query_device_string(devices[i], EGL_DRM_DEVICE_FILE_EXT)) {
        label += std::string(" (") + file + ")";
      }
    } else if (is_software) {
      label += " (software)";
    }
    EGLDisplay display = get_platform_display(EGL_PLATFORM_DEVICE_EXT, devices[i], nullptr);
    if (display == EGL_NO_DISPLAY) {
      failures.push_back(label + ": " + egl_failure("eglGetPlatformDisplayEXT"));
      continue;
    }
    (is_software ? software : candidates).push_back({"device", label, display});
  }
  candidates.insert(candidates.end(), software.begin(), software.end());
  return candidates;
}

}  // namespace

namespace detail {
/// EglContexts alive in this process (all displays). IsolatedRuntime refuses to fork while any
/// is: a child would inherit the initialised driver screen without its threads and hang in its
/// first draw (measured on Mesa 22.3 llvmpipe). Not in the header: an internal handshake only.
int live_egl_contexts() {
  std::lock_guard lock(display_mutex);
  int count = 0;
  for (const auto& [display, users] : display_users) count += users;
  return count;
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// GlDeviceInfo

std::string GlDeviceInfo::short_name() const {
  // Renderer strings carry decorations that change between driver versions:
  // "llvmpipe (LLVM 15.0.6, 256 bits)", "NVIDIA H200/PCIe/SSE2", "Mesa Intel(R) UHD 620 (KBL GT2)".
  // Keep the name before the first "/" or " (", drop (R)/(TM), and slugify the rest so the key
  // stays stable across driver updates of the same device.
  std::string text = renderer;
  for (std::string_view mark : {"(R)", "(r)", "(TM)", "(tm)"}) {
    for (size_t at; (at = text.find(mark)) != std::string::npos;) text.erase(at, mark.size());
  }
  size_t cut = std::min(text.find('/'), text.find('('));
  if (cut != std::string::npos) text.resize(cut);
  std::string name;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      name += static_cast<char>(std::tolower(u));
    } else if (!name.empty() && name.back() != '-') {
      name += '-';
    }
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name.empty() ? "unknown" : name;
}

boost::json::object GlDeviceInfo::to_json() const {
  boost::json::object object;
  object["platform"] = platform;
  object["vendor"] = vendor;
  object["renderer"] = renderer;
  object["version"] = version;
  object["glsl_version"] = glsl_version;
  object["major"] = major;
  object["minor"] = minor;
  object["color_buffer_float"] = color_buffer_float;
  object["limits"] = limits.to_json();
  // Derived, for readers that do not link this code (the tracker's UI, logs).
  object["short_name"] = short_name();
  return object;
}

GlDeviceInfo GlDeviceInfo::from_json(const boost::json::value& value) {
  const auto& object = json::as_object(value, "GL device info");
  GlDeviceInfo info;
  info.platform = json::get_string_or(object, "platform", "");
  info.vendor = json::get_string_or(object, "vendor", "");
  info.renderer = json::get_string(object, "renderer");
  info.version = json::get_string_or(object, "version", "");
  info.glsl_version = json::get_string_or(object, "glsl_version", "");
  info.major = static_cast<int>(json::get_int(object, "major"));
  info.minor = static_cast<int>(json::get_int(object, "minor"));
  if (const auto* flag = object.if_contains("color_buffer_float")) {
    if (!flag->is_bool()) throw std::invalid_argument("'color_buffer_float' must be a boolean");
    info.color_buffer_float = flag->as_bool();
  }
  if (const auto* limits = object.if_contains("limits")) {
    info.limits = DeviceLimits::from_json(*limits);
  }
  return info;
}

// ---------------------------------------------------------------------------------------------
// EglContext

namespace {

/// Initialises `candidate.display` and makes an ES 3.x context current on it. On success
/// returns the context; on failure terminates the display, appends the reason and returns
/// EGL_NO_CONTEXT.
EGLContext try_display(const Candidate& candidate, std::vector<std::string>& failures) {
  EGLDisplay display = candidate.display;
  auto fail = [&](const std::string& why) {
    failures.push_back(candidate.label + ": " + why);
    // Another EglContext may still use this display (and be current on this thread).
    if (display_user_count(display) == 0) eglTerminate(display);
    return EGL_NO_CONTEXT;
  };
  EGLint egl_major = 0, egl_minor = 0;
  if (eglInitialize(display, &egl_major, &egl_minor) != EGL_TRUE) {
    failures.push_back(candidate.label + ": " + egl_failure("eglInitialize"));
    return EGL_NO_CONTEXT;
  }
  if (eglBindAPI(EGL_OPENGL_ES_API) != EGL_TRUE) return fail(egl_failure("eglBindAPI(ES)"));

  // No surface is ever created, but a PBUFFER-capable config is what every driver tested offers
  // for ES 3; fall back to any surface type for drivers that only list surfaceless configs.
  EGLConfig config = nullptr;
  EGLint config_count = 0;
  for (EGLint surface_type : {EGLint{EGL_PBUFFER_BIT}, EGLint{EGL_DONT_CARE}}) {
    const EGLint attributes[] = {EGL_SURFACE_TYPE,
                                 surface_type,
                                 EGL_RENDERABLE_TYPE,
                                 EGL_OPENGL_ES3_BIT,
                                 EGL_RED_SIZE,
                                 8,
                                 EGL_GREEN_SIZE,
                                 8,
                                 EGL_BLUE_SIZE,
                                 8,
                                 EGL_ALPHA_SIZE,
                                 8,
                                 EGL_NONE};
    if (eglChooseConfig(display, attributes, &config, 1, &config_count) == EGL_TRUE &&
        config_count > 0) {
      break;
    }
  }
  if (config_count <= 0) return fail("no EGL config with EGL_OPENGL_ES3_BIT");

  EGLContext context = EGL_NO_CONTEXT;
  std::string context_error;
  struct Version {
    EGLint major, minor;
  };
  for (Version version : {Version{3, 2}, Version{3, 1}, Version{3, 0}}) {
    const EGLint attributes[] = {EGL_CONTEXT_MAJOR_VERSION, version.major,
                                 EGL_CONTEXT_MINOR_VERSION, version.minor, EGL_NONE};
    // ES 3.0 is asked for with the EGL 1.4 attribute alone, which every ES 3 driver accepts.
    const EGLint legacy[] = {EGL_CONTEXT_CLIENT_VERSION, 3, EGL_NONE};
    context =
        eglCreateContext(display, config, EGL_NO_CONTEXT, version.minor == 0 ? legacy : attributes);
    if (context != EGL_NO_CONTEXT) break;
    context_error = egl_failure("eglCreateContext");
  }
  if (context == EGL_NO_CONTEXT) return fail(context_error + " (asked for ES 3.2, 3.1, 3.0)");

  if (eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, context) != EGL_TRUE) {
    std::string why =
        egl_failure("eglMakeCurrent(EGL_NO_SURFACE)") + " (needs EGL_KHR_surfaceless_context)";
    eglDestroyContext(display, context);
    return fail(why);
  }
  if (glGetString(GL_VERSION) == nullptr) {
    eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    eglDestroyContext(display, context);
    return fail("context is current but glGetString(GL_VERSION) returned null");
  }
  spdlog::debug("EGL {}.{} on {}: context created", egl_major, egl_minor, candidate.label);
  return context;
}

/// What the current context reports about its device.
GlDeviceInfo query_device_info(const std::string& platform) {
  GlDeviceInfo info;
  info.platform = platform;
  info.vendor = gl_string(GL_VENDOR);
  info.renderer = gl_string(GL_RENDERER);
  info.version = gl_string(GL_VERSION);
  info.glsl_version = gl_string(GL_SHADING_LANGUAGE_VERSION);
  GLint major = 0, minor = 0;
  glGetIntegerv(GL_MAJOR_VERSION, &major);
  glGetIntegerv(GL_MINOR_VERSION, &minor);
  info.major = major;
  info.minor = minor;
  GLint extension_count = 0;
  glGetIntegerv(GL_NUM_EXTENSIONS, &extension_count);
  for (GLint i = 0; i < extension_count; ++i) {
    const GLubyte* name = glGetStringi(GL_EXTENSIONS, static_cast<GLuint>(i));
    if (name != nullptr &&
        std::strcmp(reinterpret_cast<const char*>(name), "GL_EXT_color_buffer_float") == 0) {
      info.color_buffer_float = true;
    }
  }
  DeviceLimits& limits = info.limits;
  limits.max_texture_size = gl_integer(GL_MAX_TEXTURE_SIZE);
  // A fragment kernel writes one render target per draw buffer, so both limits bind.
  limits.max_draw_buffers =
      std::min(gl_integer(GL_MAX_DRAW_BUFFERS), gl_integer(GL_MAX_COLOR_ATTACHMENTS));
  // A vertex-stage (transform feedback) kernel writes one output varying per row of its item
  // and captures all of them interleaved in one buffer, so both limits bind (both ES 3.0).
  limits.max_varying_vectors = gl_integer(GL_MAX_VARYING_VECTORS);
  limits.max_feedback_components = gl_integer(GL_MAX_TRANSFORM_FEEDBACK_INTERLEAVED_COMPONENTS);
  if (major > 3 || (major == 3 && minor >= 1)) {
    limits.max_workgroup_invocations = gl_integer(GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS);
    limits.max_workgroup_size_x = gl_integer_indexed(GL_MAX_COMPUTE_WORK_GROUP_SIZE, 0);
    limits.max_workgroup_size_y = gl_integer_indexed(GL_MAX_COMPUTE_WORK_GROUP_SIZE, 1);
    limits.max_workgroup_size_z = gl_integer_indexed(GL_MAX_COMPUTE_WORK_GROUP_SIZE, 2);
    limits.max_shared_memory_bytes = gl_integer(GL_MAX_COMPUTE_SHARED_MEMORY_SIZE);
  } else {
    // ES 3.0 has no compute shaders: zero limits make every compute config invalid.
    limits.max_workgroup_invocations = 0;
    limits.max_workgroup_size_x = limits.max_workgroup_size_y = limits.max_workgroup_size_z = 0;
    limits.max_shared_memory_bytes = 0;
  }
  // Queries above are all valid on ES 3.1+; drop any error so the first trial starts clean.
  for (int i = 0; i < 16 && glGetError() != GL_NO_ERROR; ++i) {
  }
  return info;
}

}  // namespace

std::unique_ptr<EglContext> EglContext::create() {
  // WEBTUNE_EGL_PLATFORM=device|surfaceless|default restricts the paths tried: for a machine
  // where the first working path is the wrong device, and to exercise each path in tests.
  const char* forced_env = std::getenv("WEBTUNE_EGL_PLATFORM");
  const std::string forced = forced_env != nullptr ? forced_env : "";
  if (!forced.empty() && forced != "device" && forced != "surfaceless" && forced != "default") {
    throw std::runtime_error(
        "WEBTUNE_EGL_PLATFORM must be 'device', 'surfaceless' or 'default', not '" + forced + "'");
  }
  auto wanted = [&](std::string_view platform) { return forced.empty() || forced == platform; };

  std::vector<std::string> failures;
  auto attempt = [&](const Candidate& candidate) -> std::unique_ptr<EglContext> {
    EGLContext context = try_display(candidate, failures);
    if (context == EGL_NO_CONTEXT) return nullptr;
    add_display_user(candidate.display);
    std::unique_ptr<EglContext> result(new EglContext());
    result->display_ = candidate.display;
    result->context_ = context;
    result->info_ = query_device_info(candidate.platform);
    const GlDeviceInfo& info = result->info_;
    spdlog::info("OpenGL ES {}.{} on '{}' ({}, {} display)", info.major, info.minor, info.renderer,
                 info.vendor, candidate.label);
    return result;
  };

  // Client extensions are queried on EGL_NO_DISPLAY; a null answer means no
  // EGL_EXT_client_extensions, hence no platform displays, and only the default display is left.
  eglGetError();
  const char* client_extensions = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
  if (client_extensions == nullptr) {
    eglGetError();
    failures.push_back("device, surfaceless: EGL has no client extensions");
  }
  if (!wanted("device")) {
    failures.push_back("device: skipped (WEBTUNE_EGL_PLATFORM=" + forced + ")");
  } else if (client_extensions != nullptr) {
    for (const Candidate& candidate : device_candidates(client_extensions, failures)) {
      if (auto result = attempt(candidate)) return result;
    }
  }
  if (!wanted("surfaceless")) {
    failures.push_back("surfaceless: skipped (WEBTUNE_EGL_PLATFORM=" + forced + ")");
  } else if (client_extensions != nullptr) {
    auto get_platform_display = platform_display_function();
    if (!has_extension(client_extensions, "EGL_MESA_platform_surfaceless") ||
        get_platform_display == nullptr) {
      failures.push_back("surfaceless: EGL_MESA_platform_surfaceless is not supported");
    } else {
      EGLDisplay display =
          get_platform_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
      if (display == EGL_NO_DISPLAY) {
        failures.push_back("surfaceless: " + egl_failure("eglGetPlatformDisplayEXT"));
      } else if (auto result = attempt({"surfaceless", "surfaceless", display})) {
        return result;
      }
    }
  }
  // Last, because with $DISPLAY set the default display may be an X server connection.
  if (!wanted("default")) {
    failures.push_back("default: skipped (WEBTUNE_EGL_PLATFORM=" + forced + ")");
  } else {
    EGLDisplay display = eglGetDisplay(EGL_DEFAULT_DISPLAY);
    if (display == EGL_NO_DISPLAY) {
      failures.push_back("default: " + egl_failure("eglGetDisplay(EGL_DEFAULT_DISPLAY)") +
                         " (no display server; EGL_PLATFORM=surfaceless may help)");
    } else if (auto result = attempt({"default", "default", display})) {
      return result;
    }
  }

  std::string message = "no headless OpenGL ES 3 context could be created; tried:";
  for (const std::string& failure : failures) message += "\n  " + failure;
  message +=
      "\n(needs libEGL with a Mesa or NVIDIA driver; on Mesa, check that libgl1-mesa-dri is "
      "installed)";
  throw std::runtime_error(message);
}

EglContext::~EglContext() {
  if (display_ == nullptr) return;
  EGLDisplay display = static_cast<EGLDisplay>(display_);
  if (eglGetCurrentContext() == static_cast<EGLContext>(context_)) {
    eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
  }
  if (context_ != nullptr) eglDestroyContext(display, static_cast<EGLContext>(context_));
  // Terminating lets the driver free its screen (and llvmpipe its threads); a later create()
  // initialises the display again.
  if (remove_display_user(display)) eglTerminate(display);
  eglReleaseThread();
}

void EglContext::make_current() {
  if (eglMakeCurrent(static_cast<EGLDisplay>(display_), EGL_NO_SURFACE, EGL_NO_SURFACE,
                     static_cast<EGLContext>(context_)) != EGL_TRUE) {
    throw std::runtime_error(egl_failure("eglMakeCurrent"));
  }
}

}  // namespace webtune
