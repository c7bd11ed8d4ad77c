/// \file protocol_fuzzer.cpp
/// libFuzzer harness for the tracker protocol's message parser (tracker/protocol.hpp).
///
/// Feeds: the input bytes as one text frame to `parse_message`; a parsed message to
/// `Hello::from_json`, `parse_submit` and `get_u64(message, "job")` (what the result and cancel
/// handlers read), whatever its type.
///
/// Asserts: only `ProtocolError` escapes, with one of the error codes docs/protocol.md lists
/// and a non-empty message; a parsed message is an object with a string "type"; a parsed hello
/// has protocol 1, an agent has at least one key and no key is empty, and it survives
/// to_json → parse_message → from_json unchanged (device doubles within 1e-12); a parsed submit's
/// items have a non-empty key, a lease > 0 and the priority the batch or item gave, and the job
/// frame built from each
/// (`make_job`) parses back as a message of type "job".
///
/// K3 (issue 13; docs/fuzzing.md), numbers that Boost.JSON reads as infinity or NaN (1e999,
/// 0e400) and writes back as non-JSON Infinity and NaN, is fixed where frames come in:
/// parse_message refuses them, so every message it returns serializes to JSON again.
#include <boost/json.hpp>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz_common.hpp"
#include "tracker/protocol.hpp"

namespace bj = boost::json;
using namespace webtune::tracker;
using webtune::fuzz::check;
using webtune::fuzz::finding;

namespace {

/// The error codes of docs/protocol.md ("Errors").
void check_code(const ProtocolError& e, std::string_view call) {
  static const std::set<std::string> kCodes = {
      "handshake",    "version",     "bad_token", "invalid_json", "bad_message",
      "unknown_type", "unknown_job", "forbidden", "over_quota",   "implausible_result"};
  check(kCodes.count(e.code()) == 1,
        std::string(call) + " raised undocumented error code '" + e.code() + "'");
  check(e.what()[0] != '\0', std::string(call) + " raised '" + e.code() + "' with no message");
}

/// Runs `fn`; ProtocolError is the parser's documented refusal, anything else a finding.
template <class Fn>
bool protocol_call(std::string_view call, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const ProtocolError& e) {
    check_code(e, call);
    return false;
  } catch (const std::exception& e) {
    finding(std::string(call) + " threw " + webtune::fuzz::type_name(e) + ": " + e.what());
  } catch (...) {
    finding(std::string(call) + " threw something that is not a std::exception");
  }
}

void check_hello(const Hello& h) {
  check(h.protocol == kProtocolVersion, "Hello::from_json accepted another protocol version");
  if (h.role == Role::kAgent) check(!h.keys.empty(), "Hello::from_json: an agent without keys");
  for (const std::string& key : h.keys) check(!key.empty(), "Hello::from_json: an empty key");
  // What a client library sends must read back as the same hello.
  const std::string text = bj::serialize(h.to_json());
  Hello again;
  if (!protocol_call("Hello round trip", [&] { again = Hello::from_json(parse_message(text)); }))
    finding("a hello built by Hello::to_json does not parse back: " + text);
  check(again.role == h.role && again.token == h.token && again.name == h.name &&
            again.keys == h.keys && webtune::fuzz::json_close(again.device, h.device),
        "Hello changed on its round trip: " + text);
}

void check_submit(const bj::object& message, const std::vector<SubmitItem>& items,
                  int batch_priority) {
  const bj::array& batch = message.at("batch").as_array();
  check(items.size() == batch.size(), "parse_submit: item count differs from the batch's");
  for (size_t i = 0; i < items.size(); ++i) {
    const SubmitItem& item = items[i];
    check(!item.key.empty(), "parse_submit: an item with an empty key");
    check(item.lease_ms > 0, "parse_submit: lease_ms " + std::to_string(item.lease_ms));
    const bj::object& o = batch[i].as_object();
    if (!o.contains("priority"))
      check(item.priority.value_or(batch_priority) == batch_priority,
            "parse_submit: an item without priority did not get the batch's");
    check(webtune::fuzz::json_close(item.input, o.at("input")),
          "parse_submit: the input was not passed through");
    // The frame the tracker sends an agent for this item must be a message again.
    const std::string frame = bj::serialize(make_job(7, 1, item.lease_ms, item.input));
    bj::object job;
    if (!protocol_call("parse_message(make_job)", [&] { job = parse_message(frame); }))
      finding("make_job built a frame that does not parse: " + frame);
    check(message_type(job) == "job", "make_job built a frame of another type");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bj::object message;
  if (!protocol_call("parse_message", [&] { message = parse_message(text); })) return 0;
  auto type = message.find("type");
  check(type != message.end() && type->value().is_string(),
        "parse_message returned a message without a string 'type'");
  // Whatever the tracker accepts it may write back out (relayed, stored): it must stay JSON.
  check(!webtune::fuzz::has_non_finite(bj::value(message)),
        "parse_message returned a number that is not finite");
  std::string type_name;
  if (!protocol_call("message_type", [&] { type_name = message_type(message); }))
    finding("message_type refused a message that parse_message accepted");

  Hello hello;
  if (protocol_call("Hello::from_json", [&] { hello = Hello::from_json(message); })) {
    check(type_name == "hello", "Hello::from_json accepted type '" + type_name + "'");
    check_hello(hello);
  }

  int batch_priority = 0;
  std::vector<SubmitItem> items;
  if (protocol_call("parse_submit", [&] { items = parse_submit(message, &batch_priority); }))
    check_submit(message, items, batch_priority);

  uint64_t job = 0;
  protocol_call("get_u64(job)", [&] { job = get_u64(message, "job"); });
  protocol_call("get_field(result)", [&] { (void)get_field(message, "result"); });
  return 0;
}
