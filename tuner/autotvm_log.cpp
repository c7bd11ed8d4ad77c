/// \file autotvm_log.cpp
/// AutoTVM JSON-lines logs out of and into a RecordStore; see autotvm_log.hpp.
#include "tuner/autotvm_log.hpp"

#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <istream>
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

/// TVM's topi arguments of a workload; see the file comment of records.hpp.
bj::array tvm_args(const Workload& w) {
  if (w.op == OpKind::kDense)
    return bj::array{tvm_tensor({w.m, w.k}), tvm_tensor({w.k, w.n}), nullptr, "float32"};
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
    // webtune writes [K,N], TVM [N,K]: the dimension equal to K tells which (and when both
    // are, the weight is square and either reading gives the same N).
    int64_t n;
    if (weight[0] == k)
      n = weight[1];
    else if (weight[1] == k)
      n = weight[0];
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

/// The value of option `-name=` in a TVM target string, or "".
std::string target_option(std::string_view target, std::string_view name) {
  const std::string flag = "-" + std::string(name) + "=";
  size_t pos = 0;
  while ((pos = target.find(flag, pos)) != std::string_view::npos) {
    if (pos == 0 || target[pos - 1] == ' ') {
      const size_t begin = pos + flag.size();
      const size_t end = target.find(' ', begin);
      return std::string(target.substr(begin, end == std::string_view::npos ? end : end - begin));
    }
    pos += flag.size();
  }
  return {};
}

/// The webtune target named `name`, or nullopt.
std::optional<Target> webtune_target(std::string_view name) {
  for (Target t : targets())
    if (name == target_name(t)) return t;
  return std::nullopt;
}

/// The line's webtune target: the first one among -keys=..., else the suffix of the task name
/// ("conv2d_nchw.gles-frag"). When both are there they must name the same target; a line for
/// any other target (cuda, mali, opencl, ...) is refused.
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
    throw std::invalid_argument(where + ": -keys= names " + std::string(target_name(*from_keys)) +
                                " but the task is for '" + suffix + "'");
  if (from_keys) return *from_keys;
  if (from_task && keys.empty()) return *from_task;
  throw std::invalid_argument(where + ": not one of webtune's targets (" + target_names() +
                              "); this line is from another AutoTVM target");
}

ImportedTrial parse_autotvm_line(const bj::value& root, const std::string& device_key) {
  const bj::object& o = json::as_object(root, "record");
  if (o.contains("version") && json::get_double(o, "version") != kAutoTvmVersion)
    throw std::invalid_argument("unsupported AutoTVM log version (expected 0.2)");

  const bj::array& input = as_array(json::field(o, "input"), "'input'");
  if (input.size() != 4 || !input[0].is_string() || !input[1].is_string())
    throw std::invalid_argument("'input' must be [target, task name, args, kwargs]");
  const std::string_view target_string = input[0].get_string();
  const std::string_view tvm_task = input[1].get_string();
  ImportedTrial t;
  t.target = parse_target(target_string, tvm_task);
  t.workload = workload_from_tvm(tvm_task.substr(0, tvm_task.find('.')), input[2]);
  t.device_key = device_key;
  if (t.device_key.empty()) t.device_key = target_option(target_string, "model");
  if (t.device_key.empty()) t.device_key = "imported";

  const bj::object& config = json::as_object(json::field(o, "config"), "'config'");
  const int64_t index = json::get_int(config, "index");
  const bj::array& entity = as_array(json::field(config, "entity"), "'config.entity'");

  const bj::array& result = as_array(json::field(o, "result"), "'result'");
  if (result.size() != 4)
    throw std::invalid_argument("'result' must be [costs, error_no, all_cost, timestamp]");
  MeasureResult& r = t.trial.result;
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
  return t;
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
    const std::string target(target_name(job.target));
    const std::string target_string = "opengl -keys=" + target + " -model=" + job.device_key;
    // Template::name() spelled out: a foreign records file may hold a job that no template
    // builds, and its lines still export.
    const std::string task = std::string(tvm_op_name(job.workload.op)) + "." + target;
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

int64_t import_autotvm(RecordStore& store, std::istream& in, const std::string& device_key) {
  // Parse and check everything first: a bad line anywhere imports nothing.
  std::vector<ImportedTrial> parsed;
  // One space per template and workload (a log holds many trials of few tasks).
  std::map<std::pair<std::string, Target>, std::shared_ptr<ConfigSpace>> spaces;
  std::string line;
  for (int64_t number = 1;; ++number) {
    try {
      if (!read_line(in, line, kMaxLogLineBytes)) break;
    } catch (const std::length_error& e) {
      throw std::runtime_error("records: AutoTVM log line " + std::to_string(number) + ": " +
                               e.what());
    }
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    try {
      boost::system::error_code ec;
      bj::value root = bj::parse(line, ec);
      if (ec) throw std::invalid_argument("not JSON: " + ec.message());
      ImportedTrial t = parse_autotvm_line(root, device_key);
      auto& space = spaces[{t.workload.key(), t.target}];
      if (!space) space = Task::create(t.workload, t.target).space;
      const ConfigEntity entity =
          config_in_space(*space, t.workload, t.target, t.trial.config_json, t.trial.result.ok());
      t.trial.config_json = bj::serialize(entity.to_json());
      t.trial.config_index = entity.index();
      parsed.push_back(std::move(t));
    } catch (const std::exception& e) {
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
  const int64_t imported = store.import_jobs(jobs);
  return imported;
}

}  // namespace webtune
