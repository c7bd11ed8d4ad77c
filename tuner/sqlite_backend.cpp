/// \file sqlite_backend.cpp
/// The SQLite backend of the record store's SQL interface (sql_backend.hpp): raw sqlite3 with
/// the statement finalized by its owner, and the connection settings the store relies on.
#include <sqlite3.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "sql_backend.hpp"

namespace webtune::sql {

namespace {

/// How long a writer waits for another connection's transaction before SQLITE_BUSY.
constexpr int kBusyTimeoutMs = 10000;

[[noreturn]] void fail(sqlite3* db, std::string_view what) {
  throw std::runtime_error("records: " + std::string(what) + ": " + sqlite3_errmsg(db));
}

class SqliteStatement final : public Statement {
 public:
  SqliteStatement(sqlite3* db, std::string_view sql, std::string_view what) : db_(db), what_(what) {
    if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
        SQLITE_OK)
      fail(db, what_);
  }
  ~SqliteStatement() override { sqlite3_finalize(stmt_); }

  void bind_int(int i, int64_t v) override { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_double(int i, double v) override { check(sqlite3_bind_double(stmt_, i, v)); }
  void bind_text(int i, std::string_view v) override {
    // SQLITE_TRANSIENT: SQLite copies the text, so temporaries are safe to pass.
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  void bind_null(int i) override { check(sqlite3_bind_null(stmt_, i)); }

  bool step() override {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) {
      changes_ = sqlite3_changes(db_);
      return false;
    }
    fail(db_, what_);
  }
  void reset() override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    changes_ = 0;
  }
  int64_t changes() const override { return changes_; }

  bool is_null(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t get_int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double get_double(int col) const override { return sqlite3_column_double(stmt_, col); }
  std::string get_text(int col) const override {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return text ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
                : std::string();
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(db_, what_);
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string what_;
  int64_t changes_ = 0;
};

class SqliteConnection final : public Connection {
 public:
  /// A snapshot: an in-memory database holding a copy of the file at `path`, which is opened
  /// read-only (SQLite's backup API, one read transaction) and closed again.
  struct Snapshot {};

  SqliteConnection(const std::string& path, Snapshot) {
    sqlite3* source = nullptr;
    // No SQLITE_OPEN_CREATE: a missing file is an error, not a new empty store.
    int rc = sqlite3_open_v2(path.c_str(), &source, SQLITE_OPEN_READONLY, nullptr);
    if (rc != SQLITE_OK) {
      std::string message = source ? sqlite3_errmsg(source) : sqlite3_errstr(rc);
      sqlite3_close_v2(source);
      throw std::runtime_error("records: opening '" + path + "' read-only: " + message);
    }
    sqlite3_busy_timeout(source, kBusyTimeoutMs);
    rc = sqlite3_open_v2(":memory:", &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_close_v2(source);
      sqlite3_close_v2(db_);
      db_ = nullptr;
      throw std::runtime_error("records: an in-memory copy of '" + path +
                               "': " + sqlite3_errstr(rc));
    }
    sqlite3_backup* backup = sqlite3_backup_init(db_, "main", source, "main");
    if (backup != nullptr) {
      // -1: every page in one step, so the copy is one consistent read of the file (a tuner
      // writing meanwhile waits, or its commit is not in the copy).
      rc = sqlite3_backup_step(backup, -1);
      sqlite3_backup_finish(backup);
    }
    const std::string error = backup == nullptr   ? sqlite3_errmsg(db_)
                              : rc != SQLITE_DONE ? sqlite3_errstr(rc)
                                                  : std::string();
    // The copy is checked on the file: a file that is not a database fails here.
    sqlite3_close_v2(source);
    if (!error.empty()) {
      sqlite3_close_v2(db_);
      db_ = nullptr;
      throw std::runtime_error("records: reading '" + path + "': " + error);
    }
    sqlite3_extended_result_codes(db_, 1);
    exec("PRAGMA foreign_keys=ON", "enabling foreign keys on the copy of '" + path + "'");
  }

  explicit SqliteConnection(const std::string& path) {
    const int rc =
        sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    if (rc != SQLITE_OK) {
      // The handle exists (and holds the message) even when opening failed.
      std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close_v2(db_);
      db_ = nullptr;
      throw std::runtime_error("records: opening '" + path + "': " + message);
    }
    try {
      sqlite3_extended_result_codes(db_, 1);
      sqlite3_busy_timeout(db_, kBusyTimeoutMs);
      // WAL: readers never block the writer, and a commit is one append to the log. Switching a
      // new file to WAL answers SQLITE_BUSY at once, past the busy handler, while another
      // connection does the same (two tuners starting on one new file): retried here.
      enable_wal(path);
      // FULL syncs the log on every commit: a committed batch survives power loss too; batches
      // are rare next to the measurements they hold.
      exec("PRAGMA synchronous=FULL", "setting synchronous on '" + path + "'");
      exec("PRAGMA foreign_keys=ON", "enabling foreign keys on '" + path + "'");
    } catch (...) {
      sqlite3_close_v2(db_);
      throw;
    }
  }
  ~SqliteConnection() override {
    // Every statement is finalized by its owner first (the store destroys its statements before
    // the connection), so the close is immediate; closing the last connection also checkpoints
    // the WAL into the database file.
    sqlite3_close_v2(db_);
  }

  void enable_wal(const std::string& path) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
    for (;;) {
      const int rc = sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return;
      const int primary = rc & 0xff;
      if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) ||
          std::chrono::steady_clock::now() > deadline)
        fail(db_, "enabling WAL on '" + path + "'");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  Dialect dialect() const override { return Dialect::kSqlite; }
  std::unique_ptr<Statement> prepare(std::string_view sql, std::string_view what) override {
    return std::make_unique<SqliteStatement>(db_, sql, what);
  }
  void exec(std::string_view sql, std::string_view what) override {
    const std::string text(sql);  // sqlite3_exec wants a terminated string
    char* message = nullptr;
    if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      std::string error = message ? message : sqlite3_errmsg(db_);
      sqlite3_free(message);
      throw std::runtime_error("records: " + std::string(what) + ": " + error);
    }
  }
  // IMMEDIATE takes the write lock up front, so a concurrent writer waits in the busy handler at
  // BEGIN instead of failing midway.
  void begin(std::string_view what) override {
    exec("BEGIN IMMEDIATE", std::string(what) + " (begin)");
  }
  void commit(std::string_view what) override { exec("COMMIT", std::string(what) + " (commit)"); }
  void rollback() noexcept override { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }
  int schema_version() override {
    SqliteStatement s(db_, "PRAGMA user_version", "reading the schema version");
    return s.step() ? static_cast<int>(s.get_int(0)) : 0;
  }
  void set_schema_version(int version) override {
    // PRAGMA takes no bound parameters; the value is the store's own constant.
    exec("PRAGMA user_version=" + std::to_string(version), "setting the schema version");
  }

 private:
  sqlite3* db_ = nullptr;
};

}  // namespace

std::unique_ptr<Connection> open_sqlite(const std::string& path) {
  return std::make_unique<SqliteConnection>(path);
}

std::unique_ptr<Connection> open_sqlite_snapshot(const std::string& path) {
  return std::make_unique<SqliteConnection>(path, SqliteConnection::Snapshot{});
}

}  // namespace webtune::sql
