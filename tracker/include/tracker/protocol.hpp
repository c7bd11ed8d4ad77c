/// \file protocol.hpp
/// Messages of the tracker protocol (docs/protocol.md): parsing with clear errors, and builders.
/// No networking here.
#pragma once

#include <boost/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace webtune::tracker {

/// The protocol version checked at the handshake.
constexpr int kProtocolVersion = 1;

/// Bounds on what a hello may carry (refused with `handshake` beyond them): a name of at most
/// kMaxNameBytes printable bytes, at most kMaxKeys keys of at most kMaxKeyBytes characters from
/// [A-Za-z0-9._:+-], a token of at most kMaxTokenBytes and a device object of at most
/// kMaxDeviceBytes serialized.
constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMaxKeys = 16;
constexpr size_t kMaxKeyBytes = 200;
constexpr size_t kMaxTokenBytes = 1024;
constexpr size_t kMaxDeviceBytes = 64 * 1024;
/// A hello's "job_kinds": at most kMaxJobKinds names of at most kMaxJobKindBytes characters of
/// [a-z0-9_-] each.
constexpr size_t kMaxJobKinds = 8;
constexpr size_t kMaxJobKindBytes = 32;
/// A WebSocket close frame's reason holds at most 123 bytes (RFC 6455 5.5.1: 125-byte control
/// payload minus the 2-byte code).
constexpr size_t kMaxCloseReasonBytes = 123;

/// `text` cut to at most `max_bytes` without splitting a UTF-8 sequence, with "..." at the end when
/// cut (within the bound); invalid UTF-8 bytes become '?'. For close reasons and for echoing a
/// peer's input in an error message.
std::string truncate_utf8(std::string_view text, size_t max_bytes);
/// `text` with ASCII letters in lower case (header names, host names, keys).
std::string ascii_lower(std::string_view text);

enum class Role { kAgent, kClient, kViewer };
std::string_view role_name(Role role);

/// A message that breaks the protocol; `code` is the error code sent back (docs/protocol.md).
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

/// Parses a text frame into a JSON object with a string "type". Throws ProtocolError
/// (invalid_json, bad_message; a number that does not fit a finite double, e.g. 1e999, is a
/// bad_message: it could not be written back as JSON).
boost::json::object parse_message(std::string_view text);
/// The "type" of a parsed message.
std::string message_type(const boost::json::object& message);

/// The kinds of job the tracker knows (docs/protocol.md "Model jobs"): a kernel measurement
/// (a MeasureInput) or a whole compiled model (a model measure input, model_job.hpp).
inline constexpr std::string_view kJobKindKernel = "kernel";
inline constexpr std::string_view kJobKindModel = "model";

struct Hello {
  int protocol = kProtocolVersion;
  Role role = Role::kClient;
  std::string token, name;
  std::vector<std::string> keys;  ///< agents only
  boost::json::object device;     ///< agents only: GlDeviceInfo JSON or a browser's equivalent
  /// Agents only: the job kinds it runs ("kernel", "model"); absent from the hello means
  /// {"kernel"} (agents older than model jobs). Names the tracker does not know are kept but
  /// never matched.
  std::vector<std::string> job_kinds{std::string(kJobKindKernel)};

  /// Whether `job_kinds` holds `kind`.
  bool takes(std::string_view kind) const;
  boost::json::object to_json() const;
  /// Throws ProtocolError: handshake (not a hello / bad role / agent without keys / job_kinds
  /// not an array of at most kMaxJobKinds short lower-case names, or naming no kind the tracker
  /// knows), version.
  static Hello from_json(const boost::json::object& message);
};

/// One job of a submit batch.
struct SubmitItem {
  uint64_t tag = 0;
  std::string key;
  std::optional<int> priority;
  int64_t lease_ms = 60000;
  boost::json::value input;  ///< MeasureInput JSON, passed through to the agent
  /// Never lease this job to an agent of this name (a re-measurement on a second agent).
  std::string avoid_agent;
};

/// Parses a submit's batch; throws ProtocolError(bad_message) naming the bad item.
std::vector<SubmitItem> parse_submit(const boost::json::object& message, int* batch_priority);

boost::json::object make_error(std::string_view code, std::string_view message);
boost::json::object make_welcome(uint64_t session, int heartbeat_ms);
boost::json::object make_job(uint64_t job, int attempt, int64_t lease_ms,
                             const boost::json::value& input);
boost::json::object make_result_for_client(uint64_t job, uint64_t tag, int attempt,
                                           const boost::json::value& result);

/// Field helpers that throw ProtocolError(bad_message) with the field's name.
uint64_t get_u64(const boost::json::object& message, std::string_view key);
const boost::json::value& get_field(const boost::json::object& message, std::string_view key);

}  // namespace webtune::tracker
