/// \file postgres_backend.cpp
/// The PostgreSQL backend of the record store's SQL interface (sql_backend.hpp), over libpq, and
/// the dialect translation from the store's SQLite spelling.
///
/// A statement keeps its translated text and runs it with PQexecParams when first stepped: the
/// parameters travel as text with their types given (int8, float8, text), so PostgreSQL never has
/// to guess a parameter's type from its context (a `$1 = 0` would otherwise make it a 32-bit
/// int), and results come back as text that is parsed here. Doubles are written with
/// std::to_chars (shortest round-trip form), and PostgreSQL (12 and later) prints float8 in its
/// shortest exact form too, so a double reads back bit for bit.
#include <libpq-fe.h>

#include <algorithm>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "sql_backend.hpp"

namespace webtune::sql {

namespace {

// Parameter types (pg_type OIDs, stable since PostgreSQL's first releases).
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;
constexpr Oid kFloat8Oid = 701;

/// The advisory lock every write transaction of a store takes (see Connection::begin). Advisory
/// locks are per database, so stores in other databases of one server do not wait on each other.
constexpr const char* kWriterLock = "SELECT pg_advisory_xact_lock(7766279631452241920)";

std::string trimmed(const char* message) {
  std::string text = message ? message : "";
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

[[noreturn]] void fail(std::string_view what, const std::string& message) {
  throw std::runtime_error("records: " + std::string(what) + ": " + message);
}

/// Owns a PGresult.
struct Result {
  PGresult* res = nullptr;
  Result() = default;
  explicit Result(PGresult* r) : res(r) {}
  ~Result() { PQclear(res); }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  void reset(PGresult* r = nullptr) {
    PQclear(res);
    res = r;
  }
};

/// Throws unless `res` finished a command or returned rows; names the SQLSTATE.
void check_result(PGconn* conn, const PGresult* res, std::string_view what) {
  const ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return;
  std::string message = trimmed(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
  if (message.empty()) message = trimmed(PQerrorMessage(conn));
  if (res) {
    if (const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE))
      message += std::string(" (SQLSTATE ") + state + ")";
  }
  fail(what, message);
}

/// The connection as its statements see it. A connection that broke (the server restarted, a
/// network blip) is re-established before the next statement, but only between transactions:
/// inside one, the statements after the break must fail with it rather than run on their own.
struct Link {
  PGconn* conn = nullptr;
  bool in_transaction = false;

  PGconn* ready() {
    if (!in_transaction && PQstatus(conn) == CONNECTION_BAD) {
      PQreset(conn);
      if (PQstatus(conn) == CONNECTION_OK) PQsetClientEncoding(conn, "UTF8");
    }
    return conn;
  }
};

class PostgresStatement final : public Statement {
 public:
  PostgresStatement(Link* link, std::string_view sql, std::string_view what)
      : link_(link), what_(what) {
    int parameters = 0;
    sql_ = to_postgres(sql, &parameters);
    values_.resize(parameters);
    types_.assign(parameters, 0);
    nulls_.assign(parameters, true);
  }

  void bind_int(int i, int64_t v) override { set(i, std::to_string(v), kInt8Oid); }
  void bind_double(int i, double v) override {
    char buffer[64];
    const auto end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
    set(i, std::string(buffer, end), kFloat8Oid);
  }
  void bind_text(int i, std::string_view v) override { set(i, std::string(v), kTextOid); }
  void bind_null(int i) override {
    slot(i);
    nulls_[i - 1] = true;
    types_[i - 1] = 0;
  }

  bool step() override {
    if (!result_.res) {
      std::vector<const char*> values(values_.size());
      for (size_t i = 0; i < values_.size(); ++i)
        values[i] = nulls_[i] ? nullptr : values_[i].c_str();
      PGconn* conn = link_->ready();
      result_.reset(PQexecParams(conn, sql_.c_str(), static_cast<int>(values.size()), types_.data(),
                                 values.data(), nullptr, nullptr, 0));
      check_result(conn, result_.res, what_);
      row_ = -1;
      const char* tuples = PQcmdTuples(result_.res);
      changes_ = tuples && *tuples ? std::strtoll(tuples, nullptr, 10) : 0;
    }
    return ++row_ < PQntuples(result_.res);
  }
  void reset() override {
    result_.reset();
    nulls_.assign(nulls_.size(), true);
    types_.assign(types_.size(), 0);
    changes_ = 0;
  }
  int64_t changes() const override { return changes_; }

  bool is_null(int col) const override { return PQgetisnull(result_.res, row_, col) != 0; }
  int64_t get_int(int col) const override {
    const std::string text = get_text(col);
    if (text.empty()) return 0;
    if (text == "t" || text == "f") return text == "t";  // a boolean column
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && end == text.data() + text.size()) return value;
    return static_cast<int64_t>(std::strtod(text.c_str(), nullptr));  // numeric, float8
  }
  double get_double(int col) const override {
    const std::string text = get_text(col);
    return text.empty() ? 0 : std::strtod(text.c_str(), nullptr);  // "Infinity", "NaN" too
  }
  std::string get_text(int col) const override {
    if (!result_.res || row_ < 0 || row_ >= PQntuples(result_.res) || col < 0 ||
        col >= PQnfields(result_.res))
      fail(what_, "column " + std::to_string(col) + " read outside a row");
    if (PQgetisnull(result_.res, row_, col)) return {};
    return std::string(PQgetvalue(result_.res, row_, col),
                       static_cast<size_t>(PQgetlength(result_.res, row_, col)));
  }

 private:
  void slot(int i) {
    if (i < 1 || i > static_cast<int>(values_.size()))
      fail(what_, "parameter " + std::to_string(i) + " out of range (the statement has " +
                      std::to_string(values_.size()) + ")");
  }
  void set(int i, std::string value, Oid type) {
    slot(i);
    values_[i - 1] = std::move(value);
    types_[i - 1] = type;
    nulls_[i - 1] = false;
  }

  Link* link_;
  std::string what_, sql_;
  std::vector<std::string> values_;
  std::vector<Oid> types_;
  std::vector<bool> nulls_;
  Result result_;
  int row_ = -1;
  int64_t changes_ = 0;
};

class PostgresConnection final : public Connection {
 public:
  explicit PostgresConnection(const std::string& url) {
    PGconn*& conn_ = link_.conn;
    conn_ = PQconnectdb(url.c_str());
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      const std::string message = conn_ ? trimmed(PQerrorMessage(conn_)) : "out of memory";
      PQfinish(conn_);
      throw std::runtime_error("records: connecting to '" + redact_url(url) + "': " + message);
    }
    // Notices ("relation already exists, skipping") are not errors; stderr stays quiet.
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    try {
      exec("SET client_encoding = 'UTF8'", "setting the client encoding");
    } catch (...) {
      PQfinish(conn_);
      throw;
    }
  }
  ~PostgresConnection() override { PQfinish(link_.conn); }

  Dialect dialect() const override { return Dialect::kPostgres; }
  std::unique_ptr<Statement> prepare(std::string_view sql, std::string_view what) override {
    return std::make_unique<PostgresStatement>(&link_, sql, what);
  }
  void exec(std::string_view sql, std::string_view what) override {
    // PQexec runs several statements in one call when there are no parameters (the schema).
    const std::string text = to_postgres(sql);
    PGconn* conn = link_.ready();
    Result res(PQexec(conn, text.c_str()));
    check_result(conn, res.res, what);
  }
  void begin(std::string_view what) override {
    const std::string where = std::string(what) + " (begin)";
    exec("BEGIN", where);
    link_.in_transaction = true;
    try {
      exec(kWriterLock, where);
    } catch (...) {
      rollback();
      throw;
    }
  }
  void commit(std::string_view what) override {
    // Whatever COMMIT answers, the transaction is over (a failed one rolled back).
    link_.in_transaction = false;
    exec("COMMIT", std::string(what) + " (commit)");
  }
  void rollback() noexcept override {
    link_.in_transaction = false;
    if (PQstatus(link_.conn) == CONNECTION_OK) PQclear(PQexec(link_.conn, "ROLLBACK"));
  }
  int schema_version() override {
    exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
         "creating the schema_version table");
    PostgresStatement s(&link_, "SELECT max(version) FROM schema_version",
                        "reading the schema version");
    return s.step() ? static_cast<int>(s.get_int(0)) : 0;
  }
  void set_schema_version(int version) override {
    exec("DELETE FROM schema_version", "setting the schema version");
    PostgresStatement s(&link_, "INSERT INTO schema_version(version) VALUES(?1)",
                        "setting the schema version");
    s.bind_int(1, version);
    while (s.step()) {
    }
  }

 private:
  Link link_;
};

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

/// The next word of `sql` at or after `pos` past whitespace; empty when none.
std::string_view next_word(std::string_view sql, size_t pos) {
  while (pos < sql.size() && std::isspace(static_cast<unsigned char>(sql[pos]))) ++pos;
  size_t end = pos;
  while (end < sql.size() && word_char(sql[end])) ++end;
  return sql.substr(pos, end - pos);
}

}  // namespace

std::string to_postgres(std::string_view sql, int* parameters) {
  std::string out;
  out.reserve(sql.size() + 16);
  int highest = 0;
  for (size_t i = 0; i < sql.size();) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {  // a literal or quoted name, with its doubled quotes, verbatim
      size_t end = i + 1;
      while (end < sql.size()) {
        if (sql[end] == c) {
          if (end + 1 < sql.size() && sql[end + 1] == c) {
            end += 2;
            continue;
          }
          break;
        }
        ++end;
      }
      end = std::min(end + 1, sql.size());
      out.append(sql.substr(i, end - i));
      i = end;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {  // a comment, verbatim
      const size_t end = std::min(sql.find('\n', i), sql.size());
      out.append(sql.substr(i, end - i));
      i = end;
    } else if (c == '?') {
      size_t end = i + 1;
      while (end < sql.size() && std::isdigit(static_cast<unsigned char>(sql[end]))) ++end;
      if (end == i + 1)
        throw std::invalid_argument("sql: a bare '?' parameter (number it: ?1, ?2, ...)");
      const int n = std::stoi(std::string(sql.substr(i + 1, end - i - 1)));
      highest = std::max(highest, n);
      out += '$';
      out.append(sql.substr(i + 1, end - i - 1));
      i = end;
    } else if (word_char(c) && !std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = i;
      while (end < sql.size() && word_char(sql[end])) ++end;
      const std::string_view word = sql.substr(i, end - i);
      const bool qualified = i > 0 && sql[i - 1] == '.';  // t.real would be a column
      if (qualified) {
        out.append(word);
      } else if (iequals(word, "INTEGER")) {
        // A row id: SQLite's INTEGER PRIMARY KEY is its 64-bit rowid, assigned in order.
        if (iequals(next_word(sql, end), "PRIMARY"))
          out += "BIGINT GENERATED BY DEFAULT AS IDENTITY";
        else
          out += "BIGINT";
      } else if (iequals(word, "REAL")) {
        out += "DOUBLE PRECISION";
      } else if (iequals(word, "AUTOINCREMENT")) {
        // identity columns never reuse a value; nothing to write
      } else if (iequals(word, "instr") && end < sql.size() && sql[end] == '(') {
        out += "strpos";
      } else {
        out.append(word);
      }
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {  // a number: 1e3 is not a word
      size_t end = i;
      while (end < sql.size() && (word_char(sql[end]) || sql[end] == '.')) ++end;
      out.append(sql.substr(i, end - i));
      i = end;
    } else {
      out += c;
      ++i;
    }
  }
  if (parameters) *parameters = highest;
  return out;
}

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string redact_url(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const size_t start = scheme + 3;
  const size_t at = url.find('@', start);
  const size_t slash = url.find('/', start);
  std::string out(url);
  if (at != std::string_view::npos && (slash == std::string_view::npos || at < slash)) {
    const size_t colon = url.find(':', start);
    if (colon != std::string_view::npos && colon < at)
      out = std::string(url.substr(0, colon + 1)) + "***" + std::string(url.substr(at));
  }
  // A password given as a query parameter.
  const size_t password = out.find("password=");
  if (password != std::string::npos) {
    const size_t end = out.find('&', password);
    out.replace(password + 9, (end == std::string::npos ? out.size() : end) - password - 9, "***");
  }
  return out;
}

std::unique_ptr<Connection> open_postgres(const std::string& url) {
  return std::make_unique<PostgresConnection>(url);
}

std::unique_ptr<Connection> open(const std::string& location) {
  return is_postgres_url(location) ? open_postgres(location) : open_sqlite(location);
}

}  // namespace webtune::sql
