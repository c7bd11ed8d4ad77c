/// \file exit_codes.hpp
/// The exit statuses of `webtune` (README.md, "Exit codes"), one place for main.cpp and the
/// subcommands that end with a status of their own.
#pragma once

namespace webtune::cli {

/// The command did what it was asked.
inline constexpr int kExitOk = 0;
/// An error while it ran: a file that cannot be read or written, a tracker that refused us or
/// stayed unreachable past --reconnect-timeout, a failed check (`run --reference`), ...
inline constexpr int kExitError = 1;
/// A usage error, refused before anything started: an unknown option or subcommand, a value out
/// of range or not among the known ones (`--tuner bayes`), a workload spec or model that cannot
/// be read as one (`matmul:64,64,64`). `build`, `import` and `zoo` also end with 2 for a model
/// they cannot handle.
inline constexpr int kExitUsage = 2;
/// `tune`: no agent could serve the key (none connected, or all quarantined)
/// for --agent-wait seconds.
inline constexpr int kExitNoAgent = 3;
/// Stopped by signal N (SIGINT 130, SIGTERM 143, SIGHUP 129): 128 + N. `tune` marks its
/// unfinished jobs "interrupted"; the same command resumes them.
inline constexpr int kExitSignalBase = 128;

}  // namespace webtune::cli
