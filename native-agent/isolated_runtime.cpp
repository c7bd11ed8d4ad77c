/// \file isolated_runtime.cpp
/// The worker process behind IsolatedRuntime, and the parent's side of its protocol.
///
/// A GL kernel cannot be interrupted: a shader that loops for minutes holds the driver (and on
/// llvmpipe the CPU) until it ends. Killing a process is the only reliable way out, so each
/// measurement runs in a forked worker that the parent SIGKILLs at the deadline.
#include "native_agent/isolated_runtime.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "native_agent/gl_runtime.hpp"

namespace webtune {
namespace detail {
int live_egl_contexts();  // egl_context.cpp
}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

/// Extra time past options.timeout_s before the worker is killed: GlRuntime's own (soft) check
/// counts compile time too, and reports RUN_TIMEOUT itself when it gets the chance; the hard
/// deadline only has to catch a run that never returns.
constexpr double kHardDeadlineMarginS = 2.0;
/// How long a fresh worker may take to create its context (llvmpipe: tens of ms; a loaded
/// machine or a cold driver: seconds).
constexpr double kHelloTimeoutS = 60.0;
/// How long a worker may take to exit after its channel closed, before it is SIGKILLed.
constexpr double kExitGraceS = 2.0;
/// Refuse absurd lengths rather than allocate them (a garbled header).
constexpr uint32_t kMaxMessageBytes = 1u << 30;

std::string errno_string(const char* call) {
  return std::string(call) + ": " + std::strerror(errno);
}

std::string seconds_string(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---- length-prefixed messages ----

/// Sends all bytes; false when the peer is gone (EPIPE, ECONNRESET) or on another error.
/// MSG_NOSIGNAL: a dead peer must not SIGPIPE this process.
bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t sent = ::send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

bool send_message(int fd, const std::string& body) {
  if (body.size() > kMaxMessageBytes) return false;
  uint32_t length = static_cast<uint32_t>(body.size());
  const char header[4] = {static_cast<char>(length & 0xff), static_cast<char>((length >> 8) & 0xff),
                          static_cast<char>((length >> 16) & 0xff),
                          static_cast<char>((length >> 24) & 0xff)};
  return send_all(fd, header, sizeof header) && send_all(fd, body.data(), body.size());
}

enum class ReadStatus { kOk, kTimeout, kClosed, kError };

/// Reads exactly `size` bytes, waiting no later than `deadline` (none: block).
ReadStatus recv_exact(int fd, char* data, size_t size, std::optional<Clock::time_point> deadline) {
  while (size > 0) {
    int wait_ms = -1;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) return ReadStatus::kTimeout;
      wait_ms = static_cast<int>(std::min<int64_t>(left, 1 << 30));
    }
    pollfd entry{fd, POLLIN, 0};
    int ready = ::poll(&entry, 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return ReadStatus::kError;
    }
    if (ready == 0) continue;  // the deadline check above decides
    ssize_t got = ::recv(fd, data, size, 0);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == ECONNRESET ? ReadStatus::kClosed : ReadStatus::kError;
    }
    if (got == 0) return ReadStatus::kClosed;
    data += got;
    size -= static_cast<size_t>(got);
  }
  return ReadStatus::kOk;
}

ReadStatus recv_message(int fd, std::string& body, std::optional<Clock::time_point> deadline) {
  unsigned char header[4];
  ReadStatus status = recv_exact(fd, reinterpret_cast<char*>(header), sizeof header, deadline);
  if (status != ReadStatus::kOk) return status;
  uint32_t length = uint32_t{header[0]} | uint32_t{header[1]} << 8 | uint32_t{header[2]} << 16 |
                    uint32_t{header[3]} << 24;
  if (length > kMaxMessageBytes) return ReadStatus::kError;
  body.assign(length, '\0');
  return recv_exact(fd, body.data(), body.size(), deadline);
}

// ---- the worker ----

/// Closes inherited sockets and pipes other than `keep`. A worker forked late (a restart) would
/// otherwise hold copies of the parent's connections and of other workers' channels, so the
/// parent closing one would not be seen as EOF by its peer. Regular files (logs) stay open.
void close_inherited_channels(int keep) {
  std::vector<int> to_close;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    int own = ::dirfd(dir);
    while (dirent* entry = ::readdir(dir)) {
      char* end = nullptr;
      long fd = std::strtol(entry->d_name, &end, 10);
      if (end == entry->d_name || *end != '\0' || fd <= 2 || fd == keep || fd == own) continue;
      struct stat info {};
      if (::fstat(static_cast<int>(fd), &info) == 0 &&
          (S_ISSOCK(info.st_mode) || S_ISFIFO(info.st_mode))) {
        to_close.push_back(static_cast<int>(fd));
      }
    }
    ::closedir(dir);
  }
  for (int fd : to_close) ::close(fd);
}

[[noreturn]] void worker_main(int channel, pid_t parent, const WorkerRequestHandler& other) {
  // The parent may have blocked signals in the forking thread; the worker wants the defaults
  // (SIGTERM must work), except SIGPIPE: a write into a closed pipe anywhere (a driver, a log)
  // must fail with EPIPE, not kill the worker.
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  close_inherited_channels(channel);

  // When the parent dies while a kernel hangs, nobody reads the channel and nothing would ever
  // kill this process: watch the parent and leave with it.
  std::thread([parent] {
    while (::getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::_exit(3);
  }).detach();

  int code = 0;
  try {
    std::unique_ptr<GlRuntime> runtime;
    try {
      runtime = std::make_unique<GlRuntime>(EglContext::create());
    } catch (const std::exception& e) {
      boost::json::object hello{{"error", e.what()}};
      send_message(channel, boost::json::serialize(hello));
      ::_exit(1);
    }
    boost::json::object hello{{"info", runtime->info().to_json()}};
    if (!send_message(channel, boost::json::serialize(hello))) ::_exit(1);

    std::string request;
    for (;;) {
      ReadStatus status = recv_message(channel, request, std::nullopt);
      if (status != ReadStatus::kOk) break;  // the parent closed the channel: done
      MeasureResult result;
      try {
        boost::json::value parsed = boost::json::parse(request);
        if (parsed.is_object() && parsed.get_object().contains("kind")) {
          if (other) {
            result = other(parsed.get_object());
          } else {
            result = MeasureResult::failure(MeasureErrorNo::kUnknown,
                                            "this GL worker runs kernel measurements only");
            result.timestamp = unix_now();
          }
        } else {
          result = runtime->measure(MeasureInput::from_json(parsed));
        }
      } catch (const std::exception& e) {
        result = MeasureResult::failure(
            MeasureErrorNo::kUnknown,
            std::string("the GL worker could not read the request: ") + e.what());
        result.timestamp = unix_now();
      }
      if (!send_message(channel, boost::json::serialize(result.to_json()))) {
        code = 1;
        break;
      }
    }
    // Destroy the context here: it frees driver threads before the process ends.
    runtime.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "GL worker: %s\n", e.what());
    code = 2;
  } catch (...) {
    code = 2;
  }
  // Never return into the parent's code (in tests: gtest's main); no atexit handlers either.
  ::_exit(code);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    int signal = WTERMSIG(status);
    const char* name = ::strsignal(signal);
    return "was killed by signal " + std::to_string(signal) + " (" +
           (name != nullptr ? name : "unknown") + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

}  // namespace

IsolatedRuntime::IsolatedRuntime(WorkerRequestHandler other_requests)
    : other_requests_(std::move(other_requests)) {
  start_worker();
}

IsolatedRuntime::~IsolatedRuntime() {
  stop_worker();
}

void IsolatedRuntime::start_worker() {
  if (int live = detail::live_egl_contexts(); live > 0) {
    throw std::runtime_error(
        "cannot fork the GL worker: this process holds " + std::to_string(live) +
        " live EGL context(s), and a forked worker would inherit the driver's state without its "
        "threads and hang; create the IsolatedRuntime before any EglContext or GlRuntime, or "
        "destroy those first");
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw std::runtime_error("cannot create the GL worker's channel: " +
                             errno_string("socketpair"));
  }
  // Unflushed stdio buffers would be copied into the child and written twice.
  std::fflush(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("cannot fork the GL worker: ") + std::strerror(error));
  }
  if (pid == 0) {
    ::close(fds[0]);
    worker_main(fds[1], parent, other_requests_);
  }
  ::close(fds[1]);
  pid_ = pid;
  channel_ = fds[0];

  std::string hello;
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(kHelloTimeoutS));
  ReadStatus status = recv_message(channel_, hello, deadline);
  if (status != ReadStatus::kOk) {
    bool timed_out = status == ReadStatus::kTimeout;
    std::string how = reap_worker(timed_out);
    throw std::runtime_error(timed_out ? "the GL worker did not report its device within " +
                                             seconds_string(kHelloTimeoutS) + " s and was killed"
                                       : "the GL worker " + how +
                                             " before reporting its device (see its log above)");
  }
  std::string failure;
  try {
    boost::json::value parsed = boost::json::parse(hello);
    const auto& object = parsed.as_object();
    if (const auto* error = object.if_contains("error")) {
      failure = std::string(error->as_string());
    } else {
      info_ = GlDeviceInfo::from_json(object.at("info"));
    }
  } catch (const std::exception& e) {
    failure = std::string("the GL worker's hello is not valid: ") + e.what();
  }
  if (!failure.empty()) {
    reap_worker(false);
    throw std::runtime_error(failure);
  }
  spdlog::debug("GL worker {} ready on '{}'", pid_, info_.renderer);
}

std::string IsolatedRuntime::reap_worker(bool kill_now) {
  if (channel_ >= 0) {
    ::close(channel_);
    channel_ = -1;
  }
  if (pid_ < 0) return "was not running";
  int status = 0;
  pid_t done = 0;
  if (!kill_now) {
    // A worker whose channel closed exits by itself; give it time to release its context.
    auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(kExitGraceS));
    while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (done == 0) {
    ::kill(pid_, SIGKILL);
    while ((done = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  if (done < 0) return "could not be reaped (" + errno_string("waitpid") + ")";
  return describe_status(status);
}

void IsolatedRuntime::stop_worker() {
  if (pid_ < 0) return;
  // Closing the channel is the worker's signal to finish.
  std::string how = reap_worker(false);
  spdlog::debug("GL worker stopped: it {}", how);
}

void IsolatedRuntime::restart_worker() {
  ++restarts_;
  try {
    start_worker();
  } catch (const std::exception& e) {
    spdlog::error("could not restart the GL worker (will retry at the next trial): {}", e.what());
  }
}

MeasureResult IsolatedRuntime::measure(const MeasureInput& input) {
  return exchange(boost::json::serialize(input.to_json()), input.options.timeout_s, "kernel");
}

MeasureResult IsolatedRuntime::run_request(const boost::json::object& request, double timeout_s,
                                           const std::string& what) {
  return exchange(boost::json::serialize(request), timeout_s, what);
}

MeasureResult IsolatedRuntime::exchange(const std::string& body, double timeout,
                                        const std::string& what) {
  const auto start = Clock::now();
  auto finish = [&](MeasureResult result) {
    result.all_cost = std::chrono::duration<double>(Clock::now() - start).count();
    result.timestamp = unix_now();
    return result;
  };
  if (pid_ < 0) {
    try {
      start_worker();
    } catch (const std::exception& e) {
      return finish(
          MeasureResult::failure(MeasureErrorNo::kRuntimeDevice,
                                 std::string("no GL worker could be started: ") + e.what()));
    }
  }

  if (!send_message(channel_, body)) {
    std::string how = reap_worker(false);
    restart_worker();
    return finish(MeasureResult::failure(
        MeasureErrorNo::kRuntimeDevice,
        "the GL worker " + how + " before it could be sent the " + what + "; it was restarted"));
  }

  std::optional<Clock::time_point> deadline;
  if (timeout > 0) {
    deadline = start + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(timeout + kHardDeadlineMarginS));
  }
  std::string reply;
  ReadStatus status = recv_message(channel_, reply, deadline);
  switch (status) {
    case ReadStatus::kOk:
      try {
        return MeasureResult::from_json(boost::json::parse(reply));
      } catch (const std::exception& e) {
        // The stream may be out of step now: start over with a fresh worker.
        reap_worker(true);
        restart_worker();
        return finish(MeasureResult::failure(
            MeasureErrorNo::kUnknown,
            std::string("the GL worker's reply is not a measure result: ") + e.what()));
      }
    case ReadStatus::kTimeout: {
      std::string how = reap_worker(true);
      spdlog::warn("GL worker killed after {} s (timeout {} s): it {}",
                   seconds_string(timeout + kHardDeadlineMarginS), seconds_string(timeout), how);
      restart_worker();
      return finish(MeasureResult::failure(MeasureErrorNo::kRunTimeout,
                                           what + " ran past its timeout of " +
                                               seconds_string(timeout) +
                                               " s; its worker process was killed and replaced"));
    }
    case ReadStatus::kClosed:
    case ReadStatus::kError:
    default: {
      std::string how = reap_worker(false);
      restart_worker();
      return finish(MeasureResult::failure(
          MeasureErrorNo::kRuntimeDevice,
          "the GL worker " + how + " while measuring (a driver crash?); it was restarted"));
    }
  }
}

}  // namespace webtune
