/// \file pg_server.hpp
/// A throwaway PostgreSQL server for tests: `initdb` and `pg_ctl start` in a fresh temporary
/// directory, listening only on a Unix socket there (no TCP port, no system service), with
/// trust authentication for its one superuser "webtune"; `pg_ctl stop` and the directory removed
/// when the test process ends. Header-only; link libpq (PkgConfig::LIBPQ).
///
/// The binaries are found, in order: $WEBTUNE_PG_BINDIR (when set, the only place looked at);
/// `pg_config --bindir` (Debian's
/// libpq-dev points it at /usr/lib/postgresql/<major>/bin); the highest
/// /usr/lib/postgresql/<major>/bin; initdb and pg_ctl on $PATH. When none has both,
/// available() is false and why_not() says so: the tests GTEST_SKIP with that message.
///
/// initdb and postgres refuse to run as root. A test process running as root (CI containers)
/// runs them as the unprivileged `postgres` user when the system has one (Debian's postgresql
/// package creates it), else as `nobody`: the child process drops to that user (setgid, setuid)
/// before exec, and the temporary directory is handed to it (chown). Root can still reach the
/// socket.
#pragma once

#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace webtune::testing_support {

class PgServer {
 public:
  /// The server of this test process, started on first use and stopped at exit.
  static PgServer& shared() {
    static PgServer server;
    return server;
  }

  bool available() const { return why_not_.empty(); }
  /// Why no server runs: the binaries are missing, or initdb / pg_ctl failed (with its log).
  const std::string& why_not() const { return why_not_; }

  /// Creates an empty database `name` (letters, digits, '_') and returns its libpq URI.
  /// Throws std::runtime_error with the server's message.
  std::string create_database(const std::string& name) {
    run_sql("CREATE DATABASE " + name);
    return url(name);
  }
  /// The URI of database `name` on this server, over its Unix socket.
  std::string url(const std::string& name) const {
    return "postgresql:///" + name + "?host=" + dir_ + "&port=" + std::to_string(kPort) +
           "&user=webtune";
  }
  /// Runs one SQL statement on database `database` (default: the maintenance database);
  /// returns the first column of the first row ("" when none). Throws std::runtime_error.
  std::string run_sql(const std::string& sql, const std::string& database = "postgres") {
    PGconn* conn = PQconnectdb(url(database).c_str());
    std::unique_ptr<PGconn, void (*)(PGconn*)> guard(conn, PQfinish);
    if (PQstatus(conn) != CONNECTION_OK)
      throw std::runtime_error("pg_server: connecting: " + std::string(PQerrorMessage(conn)));
    std::unique_ptr<PGresult, void (*)(PGresult*)> res(PQexec(conn, sql.c_str()), PQclear);
    const ExecStatusType status = PQresultStatus(res.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      throw std::runtime_error("pg_server: " + sql + ": " + PQresultErrorMessage(res.get()));
    if (status == PGRES_TUPLES_OK && PQntuples(res.get()) > 0 && PQnfields(res.get()) > 0)
      return PQgetvalue(res.get(), 0, 0);
    return {};
  }

  /// Restarts the server (pg_ctl restart -m fast): every open connection breaks. Returns false
  /// when pg_ctl failed.
  bool restart() {
    return run({bindir_ + "/pg_ctl", "restart", "-w", "-t", "60", "-m", "fast", "-D",
                dir_ + "/data", "-l", dir_ + "/server.log", "-o", options()},
               dir_ + "/pg_ctl_restart.log") == 0;
  }

  ~PgServer() {
    if (getpid() != owner_) return;  // a forked child leaves the server to its parent
    if (started_)
      run({bindir_ + "/pg_ctl", "stop", "-D", dir_ + "/data", "-m", "immediate", "-w"},
          dir_ + "/pg_ctl_stop.log");
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

 private:
  static constexpr int kPort = 5432;  // only names the socket file: no TCP listener

  PgServer() : owner_(getpid()) {
    bindir_ = find_bindir();
    if (bindir_.empty()) {
      why_not_ =
          "no PostgreSQL server binaries (initdb, pg_ctl): install Debian's postgresql "
          "(scripts/install-deps) or set WEBTUNE_PG_BINDIR";
      return;
    }
    char tmpl[] = "/tmp/webtune-pg-XXXXXX";  // short: a socket path has at most 107 bytes
    if (!mkdtemp(tmpl)) {
      why_not_ = "pg_server: mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    if (geteuid() == 0) {
      const passwd* user = getpwnam("postgres");
      if (!user) user = getpwnam("nobody");
      if (!user) {
        why_not_ = "running as root, with neither a 'postgres' nor a 'nobody' user to run as";
        return;
      }
      uid_ = user->pw_uid;
      gid_ = user->pw_gid;
      if (chown(dir_.c_str(), uid_, gid_) != 0) {
        why_not_ = "pg_server: cannot hand " + dir_ + " to uid " + std::to_string(uid_);
        return;
      }
    }
    const std::string data = dir_ + "/data";
    if (run({bindir_ + "/initdb", "-D", data, "-U", "webtune", "-A", "trust", "-E", "UTF8",
             "--no-locale", "--no-sync"},
            dir_ + "/initdb.log") != 0) {
      why_not_ = "initdb failed: " + read(dir_ + "/initdb.log");
      return;
    }
    if (run({bindir_ + "/pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", dir_ + "/server.log",
             "-o", options()},
            dir_ + "/pg_ctl.log") != 0) {
      why_not_ = "pg_ctl start failed: " + read(dir_ + "/pg_ctl.log") + read(dir_ + "/server.log");
      return;
    }
    started_ = true;
  }

  /// The server's options: no TCP (listen_addresses empty), the socket in the temporary
  /// directory; durability off, since the data dies with the test anyway.
  std::string options() const {
    return "-k " + dir_ + " -p " + std::to_string(kPort) +
           " -c listen_addresses='' -c fsync=off -c synchronous_commit=off"
           " -c full_page_writes=off -c max_connections=40";
  }

  static bool has_binaries(const std::string& dir) {
    return !dir.empty() && access((dir + "/initdb").c_str(), X_OK) == 0 &&
           access((dir + "/pg_ctl").c_str(), X_OK) == 0;
  }

  static std::string find_bindir() {
    // An explicit WEBTUNE_PG_BINDIR wins, even one without the binaries (to skip on purpose).
    if (const char* env = std::getenv("WEBTUNE_PG_BINDIR"); env && *env)
      return has_binaries(env) ? env : "";
    if (FILE* p = popen("pg_config --bindir 2>/dev/null", "r")) {
      char line[4096] = {};
      const bool got = std::fgets(line, sizeof line, p) != nullptr;
      pclose(p);
      std::string dir = got ? line : "";
      while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
      if (has_binaries(dir)) return dir;
    }
    std::vector<std::pair<int, std::string>> versions;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      const std::string name = entry.path().filename().string();
      const std::string bin = entry.path().string() + "/bin";
      if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit) && has_binaries(bin))
        versions.emplace_back(std::stoi(name), bin);
    }
    if (!versions.empty()) return std::max_element(versions.begin(), versions.end())->second;
    if (const char* path = std::getenv("PATH")) {
      std::stringstream dirs(path);
      for (std::string dir; std::getline(dirs, dir, ':');) {
        if (!has_binaries(dir)) continue;
        // /usr/local/bin/pg_ctl may be a link: its directory holds postgres itself.
        std::error_code link_ec;
        const auto real = std::filesystem::canonical(dir + "/pg_ctl", link_ec);
        return link_ec ? dir : real.parent_path().string();
      }
    }
    return {};
  }

  /// Runs `argv` with stdout and stderr to `log`, as the unprivileged user when root; returns
  /// its exit status (-1 when it could not run).
  int run(const std::vector<std::string>& argv, const std::string& log) const {
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      if (uid_ != 0) {
        if (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 || setuid(uid_) != 0) _exit(126);
      }
      if (chdir(dir_.c_str()) != 0) _exit(126);
      // The log is the child's own file (the unprivileged user may not reach the parent's).
      std::FILE* out = std::fopen(log.c_str(), "w");
      if (out) {
        dup2(fileno(out), 1);
        dup2(fileno(out), 2);
      }
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  pid_t owner_;
  std::string bindir_, dir_, why_not_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool started_ = false;
};

}  // namespace webtune::testing_support
