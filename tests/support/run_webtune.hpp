/// \file run_webtune.hpp
/// Runs the real `webtune` binary (WEBTUNE_BINARY) to completion as a test's child process,
/// with stdin from /dev/null and stdout and stderr captured apart: for tests that check what a
/// command prints where (data on stdout, logs and errors on stderr) and how it ends. Header-only.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace webtune::testing_support {

/// How a run ended and what it printed.
struct WebtuneRun {
  bool exited = false;  ///< ended by exit(), not by a signal
  int status = -1;      ///< the exit status when exited, else -1
  int signal = 0;       ///< the signal that ended it otherwise
  std::string out, err;
  /// For failure messages.
  std::string describe() const {
    std::ostringstream s;
    if (exited)
      s << "exit status " << status;
    else
      s << "killed by signal " << signal;
    s << "\n--- stdout ---\n" << out << "\n--- stderr ---\n" << err;
    return s.str();
  }
};

struct RunOptions {
  /// Where stdout goes, kept after the run (empty: a temporary file, removed).
  std::string out_path;
  /// The child's RLIMIT_AS in bytes (0: no limit; sanitizer builds cannot run under one).
  rlim_t address_space = 0;
};

inline std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `webtune ARGS...` and waits for it.
inline WebtuneRun run_webtune(const std::vector<std::string>& args, RunOptions options = {}) {
  static int serial = 0;
  const std::string base = ::testing::TempDir() + "webtune_run_" + std::to_string(getpid()) + "_" +
                           std::to_string(++serial);
  const bool keep_out = !options.out_path.empty();
  const std::string out_path = keep_out ? options.out_path : base + ".out";
  const std::string err_path = base + ".err";
  std::vector<std::string> text = {WEBTUNE_BINARY};
  text.insert(text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) _exit(127);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (options.address_space != 0) {
      const rlimit limit{options.address_space, options.address_space};
      setrlimit(RLIMIT_AS, &limit);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  WebtuneRun run;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid) {
    run.exited = WIFEXITED(status);
    run.status = run.exited ? WEXITSTATUS(status) : -1;
    run.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  run.out = read_file_text(out_path);
  run.err = read_file_text(err_path);
  if (!keep_out) std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return run;
}

}  // namespace webtune::testing_support
