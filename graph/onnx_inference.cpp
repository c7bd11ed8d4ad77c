/// \file onnx_inference.cpp
/// ONNX's checker and shape inference in a forked child (onnx_inference.hpp): fork, let the
/// child infer on its copy, read back a GraphProto of value_info and outputs through a pipe.

#include "onnx_inference.hpp"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

// Sanitizer runtimes export this; a weak reference is null in a build without them.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace webtune::graph::detail {
namespace {

/// What the child writes: one status byte ('0' inferred, '1' refused) and the payload (the
/// serialized GraphProto, or the message).
std::string infer_in_child(onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return std::string("1the ONNX checker refuses the model: ") + e.what();
  }
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/1,
                                        /*data_prop=*/true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return std::string("1ONNX shape inference failed: ") + e.what();
  }
  onnx::GraphProto inferred;
  *inferred.mutable_value_info() = model.graph().value_info();
  *inferred.mutable_output() = model.graph().output();
  std::string bytes;
  if (!inferred.SerializeToString(&bytes)) return "1the inferred shapes do not serialize";
  return "0" + bytes;
}

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string check_and_infer_shapes(onnx::ModelProto& model) {
  int fds[2];
  if (::pipe(fds) != 0)
    throw std::runtime_error(std::string("shape inference: pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("shape inference: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Die by the signal itself: handlers inherited from the parent (a sanitizer's, libFuzzer's,
    // a crash reporter's) would report the child's crash as the parent's.
    for (int sig : {SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT, SIGTRAP}) ::signal(sig, SIG_DFL);
    // Likewise a sanitizer's death callback (libFuzzer's writes a crash input): a memory error
    // that ASan finds inside libonnx ends the child, and the parent refuses the model.
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
    ::close(fds[0]);
    write_all(fds[1], infer_in_child(model));
    ::close(fds[1]);
    ::_exit(0);  // no atexit handlers or destructors of the parent's state
  }
  ::close(fds[1]);

  std::string reply;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kInferenceTimeoutS);
  char buffer[1 << 16];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: done or dead
    reply.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return "ONNX shape inference took longer than " + std::to_string(kInferenceTimeoutS) +
           " s and was stopped";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "ONNX shape inference crashed on this model (signal " + std::to_string(sig) +
           (name ? std::string(", SIG") + name : std::string()) +
           "): libonnx trusts its input, and this model breaks an operator's rules (e.g. a "
           "zero stride or kernel size)";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || reply.empty())
    return "ONNX shape inference ended without an answer (exit status " +
           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
  if (reply[0] == '1') return reply.substr(1);
  onnx::GraphProto inferred;
  if (reply[0] != '0' ||
      !inferred.ParseFromArray(reply.data() + 1, static_cast<int>(reply.size() - 1)))
    return "ONNX shape inference sent back something unreadable";
  *model.mutable_graph()->mutable_value_info() = inferred.value_info();
  *model.mutable_graph()->mutable_output() = inferred.output();
  return "";
}

}  // namespace webtune::graph::detail
