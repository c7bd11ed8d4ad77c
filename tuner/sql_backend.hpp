/// \file sql_backend.hpp
/// The small SQL interface the record store (records.cpp) is written against, with two backends:
/// SQLite files (sqlite_backend.cpp) and PostgreSQL servers over libpq (postgres_backend.cpp).
///
/// Every statement is written once, in SQLite's spelling with numbered parameters (`?1`, `?2`),
/// and each backend translates what differs (to_postgres below) when it prepares it, so that the
/// store's SQL stays a set of constants whose values only ever travel as bound parameters.
/// Dialect rules the SQL texts follow so that one spelling runs on both:
///  - parameters are numbered (`?N`), never bare `?`;
///  - new ids come back through `INSERT … RETURNING id` (no last_insert_rowid);
///  - upserts are `ON CONFLICT(cols) DO NOTHING | DO UPDATE SET col = excluded.col`, and an
///    update that reads the stored row names it with its table (`tuning_jobs.status`): an
///    unqualified column is ambiguous to PostgreSQL there;
///  - booleans are compared (`?9 = 1`), not used bare; `LIMIT` takes a non-negative count;
///  - schema types are INTEGER, REAL and TEXT; `INTEGER PRIMARY KEY` is the row id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace webtune::sql {

enum class Dialect { kSqlite, kPostgres };

/// A prepared statement. Parameters are 1-based, columns 0-based; an unbound parameter is NULL.
/// Errors throw std::runtime_error "records: <what>: <the server's message>", `what` being the
/// text given to Connection::prepare.
class Statement {
 public:
  virtual ~Statement() = default;
  virtual void bind_int(int i, int64_t v) = 0;
  virtual void bind_double(int i, double v) = 0;
  virtual void bind_text(int i, std::string_view v) = 0;  ///< copied
  virtual void bind_null(int i) = 0;
  /// Runs the statement on the first call, then moves to the next row: true while there is a row
  /// to read, false when done.
  virtual bool step() = 0;
  /// Makes the statement ready to run again; clears the bindings.
  virtual void reset() = 0;
  /// Rows the statement inserted, updated or deleted when it last ran (0 for a skipped
  /// `ON CONFLICT DO NOTHING`).
  virtual int64_t changes() const = 0;
  virtual bool is_null(int col) const = 0;
  virtual int64_t get_int(int col) const = 0;
  virtual double get_double(int col) const = 0;
  virtual std::string get_text(int col) const = 0;  ///< "" for NULL
};

/// One connection to one database. Use it from one thread at a time.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual Dialect dialect() const = 0;
  /// Prepares `sql` (translated to the backend's dialect); `what` names it in errors.
  virtual std::unique_ptr<Statement> prepare(std::string_view sql, std::string_view what) = 0;
  /// Runs SQL without parameters, possibly several statements (schema, transaction control).
  virtual void exec(std::string_view sql, std::string_view what) = 0;
  /// Starts a write transaction that holds the database's writer lock until commit or rollback:
  /// SQLite's BEGIN IMMEDIATE; on PostgreSQL a transaction-scoped advisory lock of the store
  /// (pg_advisory_xact_lock), so that writers of one store run one at a time there too and never
  /// deadlock on each other's rows.
  virtual void begin(std::string_view what) = 0;
  virtual void commit(std::string_view what) = 0;
  /// Rolls the open transaction back; never throws (it runs in destructors).
  virtual void rollback() noexcept = 0;
  /// The schema version stored in the database (0 for an empty one): SQLite's PRAGMA
  /// user_version; on PostgreSQL the one row of a `schema_version` table, created when missing.
  /// Call inside a transaction.
  virtual int schema_version() = 0;
  virtual void set_schema_version(int version) = 0;
};

/// True when `location` is a PostgreSQL connection URI (`postgresql://…` or `postgres://…`);
/// anything else is an SQLite path (":memory:" included).
bool is_postgres_url(std::string_view location);

/// `url` with its password, if any, replaced by "***", for messages and logs.
std::string redact_url(std::string_view url);

/// Opens an SQLite file (created when missing) in WAL mode with foreign keys on and a busy
/// timeout. Throws std::runtime_error "records: opening '<path>': <SQLite's message>".
std::unique_ptr<Connection> open_sqlite(const std::string& path);

/// Opens an in-memory copy of the SQLite file at `path`: the file is opened read-only, copied in
/// one read transaction (SQLite's backup API) and closed, so nothing is ever written to it (no
/// WAL switch, no schema migration: those happen on the copy). For readers that must not
/// modify the records they read (`webtune build`). Throws std::runtime_error "records: opening
/// '<path>' read-only: …" (missing or unreadable file) or "records: reading '<path>': …" (not a
/// database).
std::unique_ptr<Connection> open_sqlite_snapshot(const std::string& path);

/// Connects to a PostgreSQL server by libpq URI (`postgresql://user@host:port/db`, and libpq's
/// query parameters such as `?host=/run/postgresql` for a Unix socket). Throws
/// std::runtime_error "records: connecting to '<redacted url>': <libpq's message>".
std::unique_ptr<Connection> open_postgres(const std::string& url);

/// open_postgres for a PostgreSQL URI, open_sqlite for anything else.
std::unique_ptr<Connection> open(const std::string& location);

/// Translates a statement from the store's spelling (SQLite) to PostgreSQL's, outside string
/// literals, quoted names and `--` comments: `?N` → `$N`; `INTEGER PRIMARY KEY` → `BIGINT
/// GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY`; the types INTEGER → BIGINT (SQLite's
/// integers are 64-bit) and REAL → DOUBLE PRECISION (PostgreSQL's REAL is 32-bit);
/// AUTOINCREMENT dropped; instr( → strpos( (same argument order). Returns the text and sets
/// `parameters` to the highest parameter number. Throws std::invalid_argument for a bare `?`.
std::string to_postgres(std::string_view sql, int* parameters = nullptr);

}  // namespace webtune::sql
