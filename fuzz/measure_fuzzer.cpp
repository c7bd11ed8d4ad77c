/// \file measure_fuzzer.cpp
/// libFuzzer harness for the measure input and result readers (codegen/measure.hpp): what an
/// agent reads from a job frame, and what a tuner reads from a result frame.
///
/// Feeds: the input after its first byte, parsed as JSON, to one reader picked by the first byte
/// (modulo 4): `MeasureInput::from_json`, `MeasureResult::from_json`, `MeasureOptions::from_json`
/// or `KernelArtifact::from_json` (with its tensor, output and wasm layouts).
///
/// Asserts: only std::invalid_argument escapes (with a message); what a reader accepts reads
/// back from its own to_json unchanged (to_json(from_json(to_json(x))) == to_json(x)); options
/// have number, repeat >= 1, a positive timeout and the counts the JSON gave; a result's
/// mean_cost() and gflops() are defined (no UB) and gflops() is 0 on error.
#include <boost/json.hpp>
#include <cstdint>
#include <string>

#include "codegen/measure.hpp"
#include "fuzz_common.hpp"

namespace bj = boost::json;
using namespace webtune;
using webtune::fuzz::check;
using webtune::fuzz::throws_only;

namespace {

/// Reads `value` with T::from_json; when accepted, checks the JSON round trip.
template <class T>
bool read_and_round_trip(const char* name, const bj::value& value, T* out) {
  if (!throws_only<std::invalid_argument>(name, [&] { *out = T::from_json(value); })) return false;
  const bj::object first = out->to_json();
  T again;
  throws_only<>(std::string(name) + " of its own to_json", [&] { again = T::from_json(first); });
  check(again.to_json() == first, std::string(name) +
                                      " changed on its round trip: " + bj::serialize(first) +
                                      " became " + bj::serialize(again.to_json()));
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  boost::system::error_code ec;
  const bj::value value =
      bj::parse(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), ec);
  if (ec) return 0;
  switch (data[0] % 4) {
    case 0: {
      MeasureInput input;
      if (read_and_round_trip("MeasureInput::from_json", value, &input))
        check(input.options.number >= 1 && input.options.repeat >= 1,
              "MeasureInput accepted options without runs");
      break;
    }
    case 1: {
      MeasureResult result;
      if (read_and_round_trip("MeasureResult::from_json", value, &result)) {
        const double gflops = result.gflops(2.0 * 512 * 512 * 512);
        (void)result.mean_cost();
        if (!result.ok()) check(gflops == 0, "a failed result has GFLOP/s");
      }
      break;
    }
    case 2: {
      MeasureOptions options;
      if (!read_and_round_trip("MeasureOptions::from_json", value, &options)) break;
      check(options.number >= 1 && options.repeat >= 1 && options.timeout_s > 0 &&
                options.min_repeat_ms >= 0,
            "MeasureOptions accepted " + bj::serialize(options.to_json()));
      // What was read is what was written: no silent narrowing of a count.
      for (const char* key : {"number", "repeat", "min_repeat_ms"})
        if (const bj::value* v = value.as_object().if_contains(key); v && v->is_int64())
          check(options.to_json().at(key).as_int64() == v->get_int64(),
                std::string("MeasureOptions read ") + key + " " + bj::serialize(*v) + " as " +
                    bj::serialize(options.to_json().at(key)));
      break;
    }
    case 3: {
      KernelArtifact artifact;
      read_and_round_trip("KernelArtifact::from_json", value, &artifact);
      break;
    }
  }
  return 0;
}
