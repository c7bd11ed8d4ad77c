/// \file protocol.cpp
/// Parsing and building tracker protocol messages.
#include "tracker/protocol.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

namespace webtune::tracker {

namespace bj = boost::json;

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kAgent:
      return "agent";
    case Role::kClient:
      return "client";
    case Role::kViewer:
      return "viewer";
  }
  return "unknown";
}

std::string truncate_utf8(std::string_view text, size_t max_bytes) {
  // Decode sequence by sequence; keep whole valid ones, replace invalid bytes by '?'.
  std::string out;
  size_t i = 0;
  auto sequence_length = [&](size_t at) -> size_t {
    const auto c = static_cast<unsigned char>(text[at]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || at + n > text.size()) return 0;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(text[at + k]) >> 6) != 0x2) return 0;
    return n;
  };
  std::vector<size_t> ends;  // end offset in `out` after each character
  while (i < text.size()) {
    const size_t n = sequence_length(i);
    if (n == 0) {
      out += '?';
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
    ends.push_back(out.size());
  }
  if (out.size() <= max_bytes) return out;
  const std::string ellipsis = max_bytes >= 3 ? "..." : "";
  size_t keep = 0;
  for (size_t end : ends) {
    if (end + ellipsis.size() > max_bytes) break;
    keep = end;
  }
  out.resize(keep);
  return out + ellipsis;
}

namespace {

// Boost.JSON reads a number too large for a double (1e999) as infinity, and writes infinity
// back as `Infinity`, which is not JSON: a frame relayed or stored by the tracker would then
// break whoever reads it next. Such numbers are refused where frames come in.
bool all_finite(const bj::value& v, int depth = 0) {
  if (depth > 64) return true;  // Boost.JSON's own depth limit stops deeper documents
  switch (v.kind()) {
    case bj::kind::double_:
      return std::isfinite(v.get_double());
    case bj::kind::array:
      for (const bj::value& e : v.get_array())
        if (!all_finite(e, depth + 1)) return false;
      return true;
    case bj::kind::object:
      for (const auto& e : v.get_object())
        if (!all_finite(e.value(), depth + 1)) return false;
      return true;
    default:
      return true;
  }
}

}  // namespace

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bj::object parse_message(std::string_view text) {
  boost::system::error_code ec;
  bj::value value = bj::parse(text, ec);
  if (ec) throw ProtocolError("invalid_json", "frame is not valid JSON: " + ec.message());
  if (!all_finite(value))
    throw ProtocolError("bad_message", "numbers must be finite (1e999 and the like are refused)");
  if (!value.is_object()) throw ProtocolError("bad_message", "a message must be a JSON object");
  bj::object& o = value.get_object();
  auto it = o.find("type");
  if (it == o.end() || !it->value().is_string())
    throw ProtocolError("bad_message", "a message needs a string field 'type'");
  return std::move(o);
}

std::string message_type(const bj::object& message) {
  return std::string(message.at("type").get_string());
}

const bj::value& get_field(const bj::object& message, std::string_view key) {
  auto it = message.find(key);
  if (it == message.end())
    throw ProtocolError("bad_message", "missing field '" + std::string(key) + "'");
  return it->value();
}

uint64_t get_u64(const bj::object& message, std::string_view key) {
  const bj::value& v = get_field(message, key);
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<uint64_t>(v.get_int64());
  throw ProtocolError("bad_message", "field '" + std::string(key) + "' must be a whole number");
}

static std::string get_str(const bj::object& message, std::string_view key,
                           const std::string& fallback) {
  auto it = message.find(key);
  if (it == message.end()) return fallback;
  if (!it->value().is_string())
    throw ProtocolError("bad_message", "field '" + std::string(key) + "' must be a string");
  return std::string(it->value().get_string());
}

bool Hello::takes(std::string_view kind) const {
  return std::find(job_kinds.begin(), job_kinds.end(), kind) != job_kinds.end();
}

bj::object Hello::to_json() const {
  bj::array k;
  for (const std::string& key : keys) k.emplace_back(key);
  bj::object o{{"type", "hello"}, {"protocol", protocol}, {"role", role_name(role)},
               {"token", token},  {"name", name},         {"keys", std::move(k)},
               {"device", device}};
  if (role == Role::kAgent) {
    bj::array kinds;
    for (const std::string& kind : job_kinds) kinds.emplace_back(kind);
    o["job_kinds"] = std::move(kinds);
  }
  return o;
}

Hello Hello::from_json(const bj::object& message) {
  if (message_type(message) != "hello")
    throw ProtocolError("handshake", "the first message must be 'hello'");
  Hello h;
  // Errors quote at most a short prefix of what the peer sent.
  auto quote = [](std::string_view text) { return "'" + truncate_utf8(text, 32) + "'"; };
  const bj::value& version = get_field(message, "protocol");
  if (!version.is_int64() || version.get_int64() != kProtocolVersion)
    throw ProtocolError("version", "protocol version " + truncate_utf8(bj::serialize(version), 24) +
                                       " is not supported; this tracker speaks " +
                                       std::to_string(kProtocolVersion));
  const std::string role = get_str(message, "role", "");
  if (role == "agent")
    h.role = Role::kAgent;
  else if (role == "client")
    h.role = Role::kClient;
  else if (role == "viewer")
    h.role = Role::kViewer;
  else
    throw ProtocolError("handshake", "role must be agent, client or viewer, not " + quote(role));
  h.token = get_str(message, "token", "");
  if (h.token.size() > kMaxTokenBytes)
    throw ProtocolError("handshake",
                        "'token' is longer than " + std::to_string(kMaxTokenBytes) + " bytes");
  h.name = get_str(message, "name", "");
  if (h.name.size() > kMaxNameBytes)
    throw ProtocolError("handshake",
                        "'name' is longer than " + std::to_string(kMaxNameBytes) + " bytes");
  for (char c : h.name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw ProtocolError("handshake", "'name' holds a control character");
  if (auto it = message.find("keys"); it != message.end()) {
    if (!it->value().is_array()) throw ProtocolError("handshake", "'keys' must be an array");
    if (it->value().get_array().size() > kMaxKeys)
      throw ProtocolError("handshake",
                          "an agent may announce at most " + std::to_string(kMaxKeys) + " keys");
    for (const bj::value& k : it->value().get_array()) {
      if (!k.is_string() || k.get_string().empty())
        throw ProtocolError("handshake", "each key must be a non-empty string");
      const std::string_view key = k.get_string();
      if (key.size() > kMaxKeyBytes)
        throw ProtocolError("handshake", "key " + quote(key) + " is longer than " +
                                             std::to_string(kMaxKeyBytes) + " characters");
      for (char c : key)
        if (!std::isalnum(static_cast<unsigned char>(c)) && (c == 0 || !std::strchr("._:+-", c)))
          throw ProtocolError("handshake",
                              "key " + quote(key) + " holds a character outside [A-Za-z0-9._:+-]");
      h.keys.emplace_back(key);
    }
  }
  if (h.role == Role::kAgent && h.keys.empty())
    throw ProtocolError("handshake", "an agent must announce at least one key");
  if (auto it = message.find("job_kinds"); it != message.end()) {
    if (!it->value().is_array()) throw ProtocolError("handshake", "'job_kinds' must be an array");
    const bj::array& kinds = it->value().get_array();
    if (kinds.size() > kMaxJobKinds)
      throw ProtocolError("handshake", "an agent may announce at most " +
                                           std::to_string(kMaxJobKinds) + " job kinds");
    h.job_kinds.clear();
    for (const bj::value& k : kinds) {
      if (!k.is_string() || k.get_string().empty() || k.get_string().size() > kMaxJobKindBytes)
        throw ProtocolError("handshake", "each job kind must be a string of 1 to " +
                                             std::to_string(kMaxJobKindBytes) + " characters");
      const std::string_view kind = k.get_string();
      for (char c : kind)
        if (!std::islower(static_cast<unsigned char>(c)) &&
            !std::isdigit(static_cast<unsigned char>(c)) && c != '_' && c != '-')
          throw ProtocolError("handshake",
                              "job kind " + quote(kind) + " holds a character outside [a-z0-9_-]");
      if (!h.takes(kind)) h.job_kinds.emplace_back(kind);
    }
    // An agent that names only kinds this tracker does not know could never take a job.
    if (h.role == Role::kAgent && !h.takes(kJobKindKernel) && !h.takes(kJobKindModel))
      throw ProtocolError("handshake",
                          "'job_kinds' names no kind this tracker knows (kernel, model)");
  }
  if (auto it = message.find("device"); it != message.end() && it->value().is_object()) {
    if (bj::serialize(it->value()).size() > kMaxDeviceBytes)
      throw ProtocolError("handshake",
                          "'device' is larger than " + std::to_string(kMaxDeviceBytes) + " bytes");
    h.device = it->value().get_object();
  }
  return h;
}

std::vector<SubmitItem> parse_submit(const bj::object& message, int* batch_priority) {
  int priority = 0;
  if (auto it = message.find("priority"); it != message.end()) {
    if (!it->value().is_int64())
      throw ProtocolError("bad_message", "'priority' must be an integer");
    priority = static_cast<int>(it->value().get_int64());
  }
  if (batch_priority) *batch_priority = priority;
  const bj::value& batch = get_field(message, "batch");
  if (!batch.is_array()) throw ProtocolError("bad_message", "'batch' must be an array");
  std::vector<SubmitItem> items;
  size_t i = 0;
  for (const bj::value& v : batch.get_array()) {
    const std::string where = "batch[" + std::to_string(i++) + "]: ";
    if (!v.is_object()) throw ProtocolError("bad_message", where + "must be an object");
    const bj::object& o = v.get_object();
    SubmitItem item;
    try {
      item.tag = get_u64(o, "tag");
      item.key = get_str(o, "key", "");
      if (item.key.empty()) throw ProtocolError("bad_message", "missing field 'key'");
      if (auto p = o.find("priority"); p != o.end()) {
        if (!p->value().is_int64())
          throw ProtocolError("bad_message", "'priority' must be an integer");
        item.priority = static_cast<int>(p->value().get_int64());
      }
      if (o.contains("lease_ms")) {
        item.lease_ms = static_cast<int64_t>(get_u64(o, "lease_ms"));
        if (item.lease_ms <= 0) throw ProtocolError("bad_message", "'lease_ms' must be > 0");
      }
      item.avoid_agent = get_str(o, "avoid_agent", "");
      item.input = get_field(o, "input");
    } catch (const ProtocolError& e) {
      throw ProtocolError(e.code(), where + e.what());
    }
    items.push_back(std::move(item));
  }
  return items;
}

bj::object make_error(std::string_view code, std::string_view message) {
  return bj::object{{"type", "error"}, {"code", code}, {"message", message}};
}

bj::object make_welcome(uint64_t session, int heartbeat_ms) {
  return bj::object{{"type", "welcome"},
                    {"protocol", kProtocolVersion},
                    {"session", session},
                    {"heartbeat_ms", heartbeat_ms}};
}

bj::object make_job(uint64_t job, int attempt, int64_t lease_ms, const bj::value& input) {
  return bj::object{{"type", "job"},
                    {"job", job},
                    {"attempt", attempt},
                    {"lease_ms", lease_ms},
                    {"input", input}};
}

bj::object make_result_for_client(uint64_t job, uint64_t tag, int attempt,
                                  const bj::value& result) {
  return bj::object{
      {"type", "result"}, {"job", job}, {"tag", tag}, {"attempt", attempt}, {"result", result}};
}

}  // namespace webtune::tracker
