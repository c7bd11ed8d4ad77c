/// \file autotvm_log.cpp
/// AutoTVM JSON-lines logs out of and into a RecordStore; see autotvm_log.hpp.
#include "tuner/autotvm_log.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <istream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include "codegen/json_util.hpp"
#include "codegen/task.hpp"
#include "codegen/template.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

constexpr std::string_view kTvmVersion = "0.9.dev0";
constexpr double kAutoTvmVersion = 0.2;
/// AutoTVM's cost of a failed trial (record.py writes (1e9,) in place of the costs).
constexpr double kAutoTvmErrorCost = 1e9;

// tvm_op_name: codegen/template.hpp.

bj::array tvm_tensor(const std::vector<int64_t>& shape) {
  return bj::array{"TENSOR", json::to_array(shape), "float32"};
}

/// TVM's topi arguments of a workload; see the file comment of autotvm_log.hpp.
bj::array tvm_args(const Workload& w) {
  if (w.op == OpKind::kDense)
    return bj::array{tvm_tensor({w.m, w.k}), tvm_tensor({w.n, w.k}), nullptr, "float32"};
  return bj::array{tvm_tensor(w.data_shape()),
                   tvm_tensor(w.weight_shape()),
                   bj::array{w.stride, w.stride},
                   bj::array{w.pad, w.pad, w.pad, w.pad},
                   bj::array{1, 1},
                   "float32"};
}

/// AutoTVM's form of an entity: the outermost factor of every split written as −1.
bj::array autotvm_entity(const bj::array& entity) {
  bj::array out = entity;
  for (bj::value& knob : out) {
    if (!knob.is_array()) continue;
    bj::array& k = knob.get_array();
    if (k.size() == 3 && k[1].is_string() && k[1].get_string() == "sp" && k[2].is_array() &&
        !k[2].get_array().empty())
      k[2].get_array()[0] = -1;
  }
  return out;
}

/// Appends a double as Python's repr() writes it (shortest round-trip digits; fixed notation for
/// 1e-4 <= |v| < 1e16, else scientific; a ".0" on integral values), so exported lines read like
/// the ones TVM writes: 0.2, 1000000000.0, 1e-05.
void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "null";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "1e99999" : "-1e99999";  // parses back to ±inf (Boost.JSON does the same)
    return;
  }
  const double a = std::fabs(v);
  const bool fixed = a == 0 || (a >= 1e-4 && a < 1e16);
  char buffer[64];
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof buffer, v,
                    fixed ? std::chars_format::fixed : std::chars_format::scientific);
  std::string_view text(buffer, static_cast<size_t>(end - buffer));
  out += text;
  if (fixed && text.find('.') == std::string_view::npos) out += ".0";
}

/// Serializes as Python's json.dumps() with its default separators (", " and ": "), which is
/// what TVM's record.py writes.
void append_json(std::string& out, const bj::value& value) {
  switch (value.kind()) {
    case bj::kind::null:
      out += "null";
      break;
    case bj::kind::bool_:
      out += value.get_bool() ? "true" : "false";
      break;
    case bj::kind::int64:
      out += std::to_string(value.get_int64());
      break;
    case bj::kind::uint64:
      out += std::to_string(value.get_uint64());
      break;
    case bj::kind::double_:
      append_double(out, value.get_double());
      break;
    case bj::kind::string:
      out += bj::serialize(value);  // quoted and escaped
      break;
    case bj::kind::array: {
      out += '[';
      bool first = true;
      for (const bj::value& item : value.get_array()) {
        if (!first) out += ", ";
        first = false;
        append_json(out, item);
      }
      out += ']';
      break;
    }
    case bj::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& kv : value.get_object()) {
        if (!first) out += ", ";
        first = false;
        out += bj::serialize(bj::value(kv.key()));
        out += ": ";
        append_json(out, kv.value());
      }
      out += '}';
      break;
    }
  }
}

const bj::array& as_array(const bj::value& value, std::string_view what) {
  if (!value.is_array()) throw std::invalid_argument(std::string(what) + " must be a JSON array");
  return value.get_array();
}

/// ["TENSOR", shape, "float32"] → shape with `rank` dimensions.
std::vector<int64_t> parse_tensor(const bj::value& value, size_t rank, std::string_view what) {
  const bj::array& a = as_array(value, what);
  if (a.size() != 3 || !a[0].is_string() || a[0].get_string() != "TENSOR")
    throw std::invalid_argument(std::string(what) + " must be [\"TENSOR\", shape, dtype]");
  if (!a[2].is_string() || a[2].get_string() != "float32")
    throw std::invalid_argument(std::string(what) + ": only float32 is supported");
  std::vector<int64_t> shape;
  for (const bj::value& d : as_array(a[1], what)) shape.push_back(json::to_int(d, what));
  if (shape.size() != rank)
    throw std::invalid_argument(std::string(what) + " must have " + std::to_string(rank) +
                                " dimensions");
  return shape;
}

/// An int or a list of equal ints (TVM takes strides, padding and dilation either way).
int64_t parse_uniform(const bj::value& value, std::string_view what) {
  if (!value.is_array()) return json::to_int(value, what);
  const bj::array& a = value.get_array();
  if (a.empty()) throw std::invalid_argument(std::string(what) + " is empty");
  const int64_t first = json::to_int(a[0], what);
  for (const bj::value& v : a)
    if (json::to_int(v, what) != first)
      throw std::invalid_argument(std::string(what) +
                                  ": webtune supports equal values on every side only");
  return first;
}

Workload workload_from_tvm(std::string_view op, const bj::value& args_value) {
  const bj::array& args = as_array(args_value, "input args");
  if (op == "dense") {
    if (args.size() < 2) throw std::invalid_argument("dense args: expected [data, weight, ...]");
    const std::vector<int64_t> data = parse_tensor(args[0], 2, "dense data");
    const std::vector<int64_t> weight = parse_tensor(args[1], 2, "dense weight");
    const int64_t m = data[0], k = data[1];
    // TVM (and webtune since issue 18) writes [N,K], older webtune exports [K,N]: the dimension
    // equal to K tells which (and when both are, the weight is square and either reading gives
    // the same N).
    int64_t n;
    if (weight[1] == k)
      n = weight[0];
    else if (weight[0] == k)
      n = weight[1];
    else
      throw std::invalid_argument("dense weight shape does not match the data's K");
    return Workload::dense(m, n, k);
  }
  const bool depthwise = op == "depthwise_conv2d_nchw";
  if (!depthwise && op != "conv2d_nchw")
    throw std::invalid_argument("unsupported task op '" + std::string(op) +
                                "' (known: conv2d_nchw, depthwise_conv2d_nchw, dense)");
  if (args.size() < 5)
    throw std::invalid_argument(std::string(op) +
                                " args: expected [data, weight, strides, padding, dilation, ...]");
  const std::vector<int64_t> data = parse_tensor(args[0], 4, "conv data");
  const std::vector<int64_t> weight = parse_tensor(args[1], 4, "conv weight");
  if (parse_uniform(args[4], "dilation") != 1)
    throw std::invalid_argument("dilation: webtune supports 1 only");
  Workload w;
  w.op = depthwise ? OpKind::kDepthwiseConv2d : OpKind::kConv2d;
  w.batch = data[0];
  w.in_channels = data[1];
  w.height = data[2];
  w.width = data[3];
  if (depthwise) {
    if (weight[0] != data[1] || weight[1] != 1)
      throw std::invalid_argument("depthwise weight must be [C,1,R,S] with the data's C");
    w.out_channels = data[1];
  } else {
    if (weight[1] != data[1])
      throw std::invalid_argument("conv2d weight must be [K,C,R,S] with the data's C");
    w.out_channels = weight[0];
  }
  w.kernel_h = weight[2];
  w.kernel_w = weight[3];
  w.stride = parse_uniform(args[2], "strides");
  w.pad = parse_uniform(args[3], "padding");
  w.validate();
  return w;
}

/// One parsed log line.
struct ImportedTrial {
  Workload workload;
  Target target = Target::kGlesFrag;
  std::string device_key;
  std::string task_name;
  TrialRecord trial;
};

/// A line that import_autotvm cannot store as a trial: `reason` is its class, counted by
/// --skip-invalid (AutoTvmImportReport::skipped); what() says exactly why.
class LineError : public std::invalid_argument {
 public:
  LineError(std::string reason, const std::string& message)
      : std::invalid_argument(message), reason_(std::move(reason)) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

constexpr const char* kMalformed = "malformed record";

/// Runs `f`, turning any other exception into a LineError of `reason`.
template <typename F>
auto classified(const char* reason, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const LineError&) {
    throw;
  } catch (const std::exception& e) {
    throw LineError(reason, e.what());
  }
}

/// The words of a TVM target string, split at spaces; a '...' or "..." quoted part keeps its
/// spaces and loses its quotes (as TVM's target parser reads them).
std::vector<std::string> target_words(std::string_view target) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : target) {
    if (quote != 0) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

/// The value of option `-name=` in a TVM target string, or "".
std::string target_option(std::string_view target, std::string_view name) {
  const std::string flag = "-" + std::string(name) + "=";
  for (const std::string& word : target_words(target))
    if (word.rfind(flag, 0) == 0) return word.substr(flag.size());
  return {};
}

/// The webtune target named `name` (webtune's "gles-frag" or TVM-key "gles_frag"), or nullopt.
std::optional<Target> webtune_target(std::string_view name) {
  std::string dashed(name);
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  for (Target t : targets())
    if (dashed == target_name(t)) return t;
  return std::nullopt;
}

/// The line's webtune target: the first one among -keys=..., else the suffix of the task name
/// ("conv2d_nchw.gles_frag"). When both are there they must name the same target. A line for
/// any other target (cuda, mali, opencl, ...) throws LineError "foreign target 'mali'".
Target parse_target(std::string_view target_string, std::string_view task_name) {
  const std::string where =
      "target '" + std::string(target_string) + "', task '" + std::string(task_name) + "'";
  std::optional<Target> from_keys;
  const std::string keys = target_option(target_string, "keys");
  for (size_t begin = 0; begin < keys.size() && !from_keys;) {
    const size_t end = std::min(keys.find(',', begin), keys.size());
    from_keys = webtune_target(std::string_view(keys).substr(begin, end - begin));
    begin = end + 1;
  }
  const size_t dot = task_name.rfind('.');
  const std::string suffix =
      dot == std::string_view::npos ? std::string() : std::string(task_name.substr(dot + 1));
  const std::optional<Target> from_task = webtune_target(suffix);
  if (from_keys && !suffix.empty() && from_task != from_keys)
    throw LineError("-keys= and task name disagree", where + ": -keys= names " +
                                                         std::string(target_name(*from_keys)) +
                                                         " but the task is for '" + suffix + "'");
  if (from_keys) return *from_keys;
  if (from_task && keys.empty()) return *from_task;
  const std::vector<std::string> words = target_words(target_string);
  const std::string foreign = !suffix.empty() ? suffix : words.empty() ? "" : words.front();
  throw LineError("foreign target '" + foreign + "'",
                  where + ": not one of webtune's targets (" + target_names() +
                      "); this line is from another AutoTVM target (--keep-foreign keeps such "
                      "lines as history, --skip-invalid skips them)");
}

/// The "input" of a line: [target string, task name, args, kwargs].
const bj::array& line_input(const bj::object& o) {
  if (o.contains("version") && json::get_double(o, "version") != kAutoTvmVersion)
    throw std::invalid_argument("unsupported AutoTVM log version (expected 0.2)");
  const bj::array& input = as_array(json::field(o, "input"), "'input'");
  if (input.size() != 4 || !input[0].is_string() || !input[1].is_string())
    throw std::invalid_argument("'input' must be [target, task name, args, kwargs]");
  return input;
}

/// The config index and entity, and the result, of a line.
const bj::array& parse_config_and_result(const bj::object& o, int64_t& index, MeasureResult& r) {
  const bj::object& config = json::as_object(json::field(o, "config"), "'config'");
  index = json::get_int(config, "index");
  const bj::array& entity = as_array(json::field(config, "entity"), "'config.entity'");

  const bj::array& result = as_array(json::field(o, "result"), "'result'");
  if (result.size() != 4)
    throw std::invalid_argument("'result' must be [costs, error_no, all_cost, timestamp]");
  // Checked as int64: 2^32 must not narrow to 0, NO_ERROR.
  const int64_t error_no = json::to_int(result[1], "error_no");
  if (error_no < 0 || error_no > 255)
    throw std::invalid_argument("error number " + std::to_string(error_no) + " is not in 0..8");
  r.error = error_from_int(static_cast<int>(error_no));
  if (r.ok())
    for (const bj::value& c : as_array(result[0], "'result' costs")) {
      r.costs.push_back(json::to_double(c, "cost"));
      if (!std::isfinite(r.costs.back())) throw std::invalid_argument("a cost is not finite");
    }
  r.all_cost = json::to_double(result[2], "all_cost");
  r.timestamp = json::to_double(result[3], "timestamp");
  return entity;
}

ImportedTrial parse_autotvm_line(const bj::object& o, const bj::array& input,
                                 const std::string& device_key) {
  const std::string_view target_string = input[0].get_string();
  const std::string_view tvm_task = input[1].get_string();
  ImportedTrial t;
  t.target = parse_target(target_string, tvm_task);
  t.workload = classified("unsupported workload", [&] {
    return workload_from_tvm(tvm_task.substr(0, tvm_task.find('.')), input[2]);
  });
  t.device_key = device_key;
  if (t.device_key.empty()) t.device_key = target_option(target_string, "model");
  if (t.device_key.empty()) t.device_key = "imported";

  classified(kMalformed, [&] {
    int64_t index = 0;
    MeasureResult& r = t.trial.result;
    const bj::array& entity = parse_config_and_result(o, index, r);
    // The exact entity and what AutoTVM has no field for, when webtune wrote the line.
    bj::array exact = entity;
    if (auto it = o.find("webtune"); it != o.end()) {
      const bj::object& w = json::as_object(it->value(), "'webtune'");
      t.task_name = json::get_string_or(w, "task", "");
      t.trial.agent = json::get_string_or(w, "agent", "");
      r.message = json::get_string_or(w, "message", "");
      if (auto e = w.find("entity"); e != w.end()) exact = as_array(e->value(), "'webtune.entity'");
      if (auto e = w.find("epilogue"); e != w.end())
        t.workload.epilogue = Epilogue::from_json(e->value());
    }
    t.workload.name = t.task_name;
    t.trial.config_index = index;
    t.trial.config_json = bj::serialize(bj::object{{"index", index}, {"entity", std::move(exact)}});
    // bj::serialize writes a number read as infinity or NaN (1e999, 0e400) as a non-JSON token.
    boost::system::error_code ec;
    bj::parse(t.trial.config_json, ec);
    if (ec) throw std::invalid_argument("the entity holds a number that is not finite");
    return 0;
  });
  return t;
}

/// The webtune workload key of a foreign task's anchor op, or "" when webtune has none: TVM's
/// task names are "<compute>[_<variant>].<key>" ("conv2d_nchw_winograd.cuda",
/// "conv2d_nchw_spatial_pack.mali"), and every variant takes its compute's arguments.
std::string foreign_workload_key(std::string_view task_name, const bj::value& args) {
  const std::string_view compute = task_name.substr(0, task_name.find('.'));
  std::string_view op;
  for (std::string_view known : {"depthwise_conv2d_nchw", "conv2d_nchw", "dense"})
    if (compute.substr(0, known.size()) == known) {
      op = known;
      break;
    }
  if (op.empty()) return {};
  try {
    return workload_from_tvm(op, args).key();
  } catch (const std::exception&) {
    return {};  // shapes webtune has no template for (dilation, asymmetric pads, int8, ...)
  }
}

/// A line of another target, kept as a foreign record.
ForeignRecord parse_foreign_line(const bj::object& o, const bj::array& input,
                                 const std::string& reason, const std::string& line) {
  ForeignRecord f;
  f.target = std::string(input[0].get_string());
  f.task_name = std::string(input[1].get_string());
  // reason is "foreign target 'X'": X is the name.
  const size_t open = reason.find('\'');
  f.foreign_target = reason.substr(open + 1, reason.size() - open - 2);
  f.workload_key = foreign_workload_key(f.task_name, input[2]);
  classified(kMalformed, [&] {
    f.entity_json = bj::serialize(parse_config_and_result(o, f.config_index, f.result));
    return 0;
  });
  f.line = line;
  return f;
}

/// The longest AutoTVM log line import_autotvm reads (a line is about 1 KB).
constexpr size_t kMaxLogLineBytes = size_t{4} << 20;

/// std::getline that gives up past `max_bytes` (std::length_error) instead of growing the line
/// without bound (an --in /dev/zero has no newline). False at the end of the input.
bool read_line(std::istream& in, std::string& line, size_t max_bytes) {
  line.clear();
  std::streambuf* buffer = in.rdbuf();
  if (buffer == nullptr || !in.good()) return false;
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return !line.empty();
    }
    if (c == '\n') return true;
    if (line.size() >= max_bytes)
      throw std::length_error("longer than the limit of " + std::to_string(max_bytes) + " bytes");
    line.push_back(static_cast<char>(c));
  }
}

}  // namespace

int64_t export_autotvm(const RecordStore& store, std::ostream& out,
                       const std::string& workload_filter, const std::string& target_filter) {
  int64_t lines = 0;
  for (const TuningJobInfo& job : store.jobs(workload_filter, target_filter)) {
    const std::string target_string = tvm_target_string(job.target, job.device_key);
    // Not Template::name(): a foreign records file may hold a job that no template builds,
    // and its lines still export.
    const std::string task = tvm_task_name(job.workload.op, job.target);
    const bj::array args = tvm_args(job.workload);
    for (const TrialRecord& trial : store.trials(job.id)) {
      // A damaged or foreign records file may hold anything here: say which trial it is.
      boost::system::error_code ec;
      const bj::value config = bj::parse(trial.config_json, ec);
      const bj::value* entity_value =
          !ec && config.is_object() ? config.get_object().if_contains("entity") : nullptr;
      if (!entity_value || !entity_value->is_array())
        throw std::runtime_error("records: export_autotvm: trial " + std::to_string(trial.id) +
                                 " of job " + std::to_string(job.id) +
                                 " has no entity list in its config JSON");
      // The row's index column and its config JSON (ConfigEntity::to_json always writes the
      // index) must agree: otherwise which one is the config?
      const bj::value* index = config.get_object().if_contains("index");
      if (index == nullptr || !((index->is_int64() && index->get_int64() == trial.config_index) ||
                                (index->is_uint64() &&
                                 index->get_uint64() == static_cast<uint64_t>(trial.config_index))))
        throw std::runtime_error("records: export_autotvm: trial " + std::to_string(trial.id) +
                                 " of job " + std::to_string(job.id) + " has config index " +
                                 std::to_string(trial.config_index) + " but its config JSON says " +
                                 (index ? bj::serialize(*index) : "none"));
      const bj::array& entity = entity_value->get_array();
      // A suspect trial (its cost was not believed: docs/protocol.md, "Result checks") leaves
      // as a failure, so that TVM's apply_history_best, or a re-import, never picks it; its
      // costs travel in webtune's own field.
      const bool suspect = trial.result.ok() && trial.verdict == kSuspect;
      bj::array costs, suspect_costs;
      if (trial.result.ok())
        for (double c : trial.result.costs) (suspect ? suspect_costs : costs).emplace_back(c);
      if (costs.empty()) costs.emplace_back(kAutoTvmErrorCost);
      const MeasureErrorNo error = suspect ? MeasureErrorNo::kUnknown : trial.result.error;
      bj::object line;
      line["input"] = bj::array{target_string, task, args, bj::object{}};
      line["config"] = bj::object{{"index", trial.config_index},
                                  {"code_hash", nullptr},
                                  {"entity", autotvm_entity(entity)}};
      line["result"] = bj::array{std::move(costs), static_cast<int>(error), trial.result.all_cost,
                                 trial.result.timestamp};
      line["version"] = kAutoTvmVersion;
      line["tvm_version"] = kTvmVersion;
      line["webtune"] = bj::object{{"task", job.task_name},
                                   {"agent", trial.agent},
                                   {"gflops", trial.gflops},
                                   {"message", suspect ? "suspect: its cost was not confirmed "
                                                         "by a second agent"
                                                       : trial.result.message},
                                   {"entity", entity}};
      if (suspect) line["webtune"].get_object()["suspect_costs"] = std::move(suspect_costs);
      // TVM's task is the anchor operator (its args have no epilogue: TVM fuses injective ops
      // at build time), so a fused job's epilogue travels in webtune's own field.
      if (!job.workload.epilogue.empty())
        line["webtune"].get_object()["epilogue"] = job.workload.epilogue.to_json();
      std::string text;
      append_json(text, line);
      text += '\n';
      out << text;
      ++lines;
    }
  }
  out.flush();
  if (!out) throw std::runtime_error("records: export_autotvm: writing the log failed");
  return lines;
}

int64_t AutoTvmImportReport::skipped_total() const {
  int64_t total = 0;
  for (const auto& [reason, count] : skipped) total += count;
  return total;
}

std::string tvm_target_string(Target target, const std::string& device_key) {
  std::string s;
  const std::string keys = "-keys=" + std::string(target_name(target));
  switch (target) {
    case Target::kWebgpu:
      s = "webgpu " + keys;
      break;
    case Target::kWasm:
      s = "llvm " + keys + " -mtriple=wasm32-unknown-unknown-wasm -mattr=+simd128";
      break;
    case Target::kGlesFrag:
    case Target::kGlesCompute:
      s = "opengl " + keys;
      break;
  }
  if (device_key.empty()) return s;
  // TVM's target parser takes a quoted value whole; device keys have no spaces as the agents
  // build them (docs/protocol.md), but --key may be given any text.
  const bool quote = device_key.find_first_of(" \t'\"") != std::string::npos;
  std::string value = device_key;
  if (quote) value.erase(std::remove(value.begin(), value.end(), '\''), value.end());
  return s + " -model=" + (quote ? "'" + value + "'" : value);
}

std::string tvm_task_name(OpKind op, Target target) {
  std::string key(target_name(target));
  std::replace(key.begin(), key.end(), '-', '_');
  return std::string(tvm_op_name(op)) + "." + key;
}

AutoTvmImportReport import_autotvm(RecordStore& store, std::istream& in,
                                   const AutoTvmImportOptions& options) {
  AutoTvmImportReport report;
  // Parse and check everything first: without skip_invalid, a bad line anywhere imports nothing.
  std::vector<ImportedTrial> parsed;
  std::vector<ForeignRecord> foreign;
  // One space per template and workload (a log holds many trials of few tasks).
  std::map<std::pair<std::string, Target>, std::shared_ptr<ConfigSpace>> spaces;
  std::string line;
  for (int64_t number = 1;; ++number) {
    try {
      try {
        if (!read_line(in, line, kMaxLogLineBytes)) break;
      } catch (const std::length_error& e) {
        // The rest of the line is not read: the next one starts after its newline.
        if (options.skip_invalid) in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
        ++report.lines;
        throw LineError("line too long", e.what());
      }
      const size_t first = line.find_first_not_of(" \t\r");
      if (first == std::string::npos || line[first] == '#') continue;
      ++report.lines;
      boost::system::error_code ec;
      bj::value root = bj::parse(line, ec);
      if (ec) throw LineError("not JSON", "not JSON: " + ec.message());
      const bj::object& o = classified(
          kMalformed, [&]() -> const bj::object& { return json::as_object(root, "record"); });
      const bj::array& input =
          classified(kMalformed, [&]() -> const bj::array& { return line_input(o); });
      ImportedTrial t;
      try {
        t = parse_autotvm_line(o, input, options.device_key);
      } catch (const LineError& e) {
        if (!options.keep_foreign || e.reason().rfind("foreign target", 0) != 0) throw;
        foreign.push_back(parse_foreign_line(o, input, e.reason(), line));
        foreign.back().source = options.source;
        continue;
      }
      const ConfigEntity entity = classified("config outside its template's space", [&] {
        auto& space = spaces[{t.workload.key(), t.target}];
        if (!space) space = Task::create(t.workload, t.target).space;
        return config_in_space(*space, t.workload, t.target, t.trial.config_json,
                               t.trial.result.ok());
      });
      t.trial.config_json = bj::serialize(entity.to_json());
      t.trial.config_index = entity.index();
      parsed.push_back(std::move(t));
    } catch (const LineError& e) {
      if (options.skip_invalid) {
        ++report.skipped[e.reason()];
        continue;
      }
      throw std::runtime_error("records: AutoTVM log line " + std::to_string(number) + ": " +
                               e.what());
    }
  }
  if (in.bad()) throw std::runtime_error("records: import_autotvm: reading the log failed");

  // Group by job, keeping line order within a job.
  using JobKey = std::tuple<std::string, std::string, std::string>;
  std::map<JobKey, size_t> job_index;
  std::vector<std::vector<const ImportedTrial*>> groups;
  for (const ImportedTrial& t : parsed) {
    JobKey key{t.workload.key(), std::string(target_name(t.target)), t.device_key};
    auto [it, fresh] = job_index.emplace(std::move(key), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(&t);
  }

  std::vector<ImportedJob> jobs;
  jobs.reserve(groups.size());
  for (const auto& group : groups) {
    const ImportedTrial& first = *group.front();
    ImportedJob job{first.workload, first.target, first.device_key, first.task_name, {}};
    job.trials.reserve(group.size());
    for (const ImportedTrial* t : group) job.trials.push_back(t->trial);
    jobs.push_back(std::move(job));
  }
  if (!jobs.empty()) report.imported = store.import_jobs(jobs);
  report.foreign = static_cast<int64_t>(foreign.size());
  if (!foreign.empty()) report.foreign_new = store.add_foreign_records(foreign);
  return report;
}

int64_t import_autotvm(RecordStore& store, std::istream& in, const std::string& device_key) {
  AutoTvmImportOptions options;
  options.device_key = device_key;
  return import_autotvm(store, in, options).imported;
}

}  // namespace webtune
