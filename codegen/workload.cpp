/// \file workload.cpp
/// Workload shapes, FLOP counts and their JSON form.
#include "codegen/workload.hpp"

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "codegen/json_util.hpp"

namespace webtune {

namespace bj = boost::json;

std::string_view op_name(OpKind op) {
  switch (op) {
    case OpKind::kDense:
      return "dense";
    case OpKind::kConv2d:
      return "conv2d";
    case OpKind::kDepthwiseConv2d:
      return "depthwise_conv2d";
  }
  return "unknown";
}

static OpKind op_from_name(std::string_view name) {
  if (name == "dense") return OpKind::kDense;
  if (name == "conv2d") return OpKind::kConv2d;
  if (name == "depthwise_conv2d") return OpKind::kDepthwiseConv2d;
  throw std::invalid_argument("unknown op '" + std::string(name) +
                              "' (known: dense, conv2d, depthwise_conv2d)");
}

Workload Workload::dense(int64_t m, int64_t n, int64_t k, std::string name) {
  Workload w;
  w.op = OpKind::kDense;
  w.m = m;
  w.n = n;
  w.k = k;
  w.name = std::move(name);
  w.validate();
  return w;
}

Workload Workload::conv2d(int64_t batch, int64_t in_channels, int64_t height, int64_t width,
                          int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad,
                          std::string name) {
  Workload w;
  w.op = OpKind::kConv2d;
  w.batch = batch;
  w.in_channels = in_channels;
  w.height = height;
  w.width = width;
  w.out_channels = out_channels;
  w.kernel_h = w.kernel_w = kernel;
  w.stride = stride;
  w.pad = pad;
  w.name = std::move(name);
  w.validate();
  return w;
}

Workload Workload::depthwise_conv2d(int64_t batch, int64_t channels, int64_t height, int64_t width,
                                    int64_t kernel, int64_t stride, int64_t pad, std::string name) {
  Workload w =
      conv2d(batch, channels, height, width, channels, kernel, stride, pad, std::move(name));
  w.op = OpKind::kDepthwiseConv2d;
  return w;
}

int64_t Workload::out_h() const {
  return (height + 2 * pad - kernel_h) / stride + 1;
}
int64_t Workload::out_w() const {
  return (width + 2 * pad - kernel_w) / stride + 1;
}

std::vector<int64_t> Workload::data_shape() const {
  if (op == OpKind::kDense) return {m, k};
  return {batch, in_channels, height, width};
}

std::vector<int64_t> Workload::weight_shape() const {
  switch (op) {
    case OpKind::kDense:
      return {k, n};
    case OpKind::kConv2d:
      return {out_channels, in_channels, kernel_h, kernel_w};
    case OpKind::kDepthwiseConv2d:
      return {in_channels, 1, kernel_h, kernel_w};
  }
  return {};
}

std::vector<int64_t> Workload::output_shape() const {
  if (op == OpKind::kDense) return {m, n};
  return {batch, out_channels, out_h(), out_w()};
}

std::vector<int64_t> Workload::input_shape(int index) const {
  if (index == 0) return data_shape();
  if (index == 1) return weight_shape();
  const std::string name = input_name(index);
  if (name == "bias") return {output_channels()};
  return output_shape();
}

std::string Workload::input_name(int index) const {
  if (index == 0) return "data";
  if (index == 1) return "weight";
  if (index == 2 && epilogue.bias) return "bias";
  if (index == input_count() - 1 && index >= 2 && epilogue.residual != Residual::kNone)
    return "residual";
  throw std::out_of_range("workload " + key() + " has inputs 0 … " +
                          std::to_string(input_count() - 1) + ", not " + std::to_string(index));
}

static int64_t product(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

int64_t Workload::input_size(int index) const {
  return product(input_shape(index));
}

int64_t Workload::data_size() const {
  return product(data_shape());
}
int64_t Workload::weight_size() const {
  return product(weight_shape());
}
int64_t Workload::output_size() const {
  return product(output_shape());
}

int64_t Workload::reduction_size() const {
  switch (op) {
    case OpKind::kDense:
      return k;
    case OpKind::kConv2d:
      return in_channels * kernel_h * kernel_w;
    case OpKind::kDepthwiseConv2d:
      return kernel_h * kernel_w;
  }
  return 0;
}

double Workload::flops() const {
  return 2.0 * static_cast<double>(output_size()) * static_cast<double>(reduction_size());
}

std::string Workload::key() const {
  std::string s(op_name(op));
  auto add = [&s](int64_t v) { s += "_" + std::to_string(v); };
  if (op == OpKind::kDense) {
    add(m);
    add(n);
    add(k);
    return s + epilogue.suffix();
  }
  add(batch);
  add(in_channels);
  add(height);
  add(width);
  if (op == OpKind::kConv2d) add(out_channels);
  s += "_" + std::to_string(kernel_h) + "x" + std::to_string(kernel_w);
  s += "_s" + std::to_string(stride) + "_p" + std::to_string(pad);
  return s + epilogue.suffix();
}

namespace {

/// "[1,64,56,56]".
std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

/// A dimension in [minimum, kMaxWorkloadDim]; `what` names the field.
void check_dim(int64_t value, const char* what, int64_t minimum = 1) {
  if (value < minimum)
    throw std::invalid_argument(std::string("workload: ") + what + " = " + std::to_string(value) +
                                " must be >= " + std::to_string(minimum));
  if (value > kMaxWorkloadDim)
    throw std::invalid_argument(std::string("workload: ") + what + " = " + std::to_string(value) +
                                " is above the limit of " + std::to_string(kMaxWorkloadDim) +
                                " (2^24)");
}

/// A tensor of at most kMaxTensorElements elements, its product computed with overflow checks
/// (the dimensions are already known to be in [1, 2^24]).
void check_tensor(const std::vector<int64_t>& dims, const char* what) {
  int64_t elements = 1;
  bool overflow = false;
  long double exact = 1;  // for the message when the int64 product overflows
  for (int64_t d : dims) {
    exact *= static_cast<long double>(d);
    overflow = overflow || __builtin_mul_overflow(elements, d, &elements);
  }
  if (!overflow && elements <= kMaxTensorElements) return;
  char count[64];
  std::snprintf(count, sizeof count, "%.0Lf", exact);
  throw std::invalid_argument(std::string("workload: the ") + what + " tensor " + shape_text(dims) +
                              " has " + count + " elements, above the limit of " +
                              std::to_string(kMaxTensorElements) + " (2^28, 1 GiB of fp32)");
}

}  // namespace

void Workload::validate() const {
  if (op != OpKind::kDense && op != OpKind::kConv2d && op != OpKind::kDepthwiseConv2d)
    throw std::invalid_argument("workload: unknown op " + std::to_string(static_cast<int>(op)));
  if (op == OpKind::kDense) {
    check_dim(m, "M");
    check_dim(n, "N");
    check_dim(k, "K");
  } else {
    check_dim(batch, "N (batch)");
    check_dim(in_channels, "C");
    check_dim(height, "H");
    check_dim(width, "W");
    check_dim(out_channels, "K (out channels)");
    check_dim(kernel_h, "R");
    check_dim(kernel_w, "S");
    check_dim(stride, "stride");
    check_dim(pad, "pad", 0);
    if (op == OpKind::kDepthwiseConv2d && out_channels != in_channels)
      throw std::invalid_argument(
          "workload: depthwise_conv2d needs K == C (K = " + std::to_string(out_channels) +
          ", C = " + std::to_string(in_channels) + ")");
    // Every term is at most 3·2^24 now: no overflow.
    if (out_h() <= 0 || out_w() <= 0)
      throw std::invalid_argument("workload: the kernel is larger than the padded input (R×S = " +
                                  std::to_string(kernel_h) + "×" + std::to_string(kernel_w) +
                                  ", padded input " + std::to_string(height + 2 * pad) + "×" +
                                  std::to_string(width + 2 * pad) + ")");
    check_dim(out_h(), "output height OH");
    check_dim(out_w(), "output width OW");
  }
  check_tensor(data_shape(), "data");
  check_tensor(weight_shape(), "weight");
  check_tensor(output_shape(), "output");
  epilogue.validate();
}

bj::object Workload::to_json() const {
  bj::object o;
  o["op"] = std::string(op_name(op));
  if (!name.empty()) o["name"] = name;
  if (op == OpKind::kDense) {
    o["M"] = m;
    o["N"] = n;
    o["K"] = k;
    if (!epilogue.empty()) o["epilogue"] = epilogue.to_json();
    return o;
  }
  o["N"] = batch;
  o["C"] = in_channels;
  o["H"] = height;
  o["W"] = width;
  if (op == OpKind::kConv2d) o["K"] = out_channels;
  o["R"] = kernel_h;
  o["S"] = kernel_w;
  o["stride"] = stride;
  o["pad"] = pad;
  if (!epilogue.empty()) o["epilogue"] = epilogue.to_json();
  return o;
}

Workload Workload::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "workload");
  Workload w;
  w.op = op_from_name(json::get_string(o, "op"));
  w.name = json::get_string_or(o, "name", "");
  if (w.op == OpKind::kDense) {
    w.m = json::get_int(o, "M");
    w.n = json::get_int(o, "N");
    w.k = json::get_int(o, "K");
  } else {
    w.batch = json::get_int_or(o, "N", 1);
    w.in_channels = json::get_int(o, "C");
    w.height = json::get_int(o, "H");
    w.width = json::get_int(o, "W");
    w.out_channels =
        w.op == OpKind::kConv2d ? json::get_int(o, "K") : json::get_int_or(o, "K", w.in_channels);
    w.kernel_h = json::get_int(o, "R");
    w.kernel_w = json::get_int_or(o, "S", w.kernel_h);
    w.stride = json::get_int_or(o, "stride", 1);
    w.pad = json::get_int_or(o, "pad", 0);
  }
  if (const bj::value* e = o.if_contains("epilogue")) w.epilogue = Epilogue::from_json(*e);
  w.validate();
  return w;
}

std::vector<WorkloadFileTask> load_workload_file(const std::string& path) {
  bj::value root = json::read_file(path);
  std::vector<WorkloadFileTask> tasks;
  try {
    const bj::object& o = json::as_object(root, "workload file");
    if (!o.contains("tasks")) {
      tasks.push_back({Workload::from_json(root), 1});
      return tasks;
    }
    const bj::value& list = json::field(o, "tasks");
    if (!list.is_array()) throw std::invalid_argument("'tasks' must be an array");
    for (const bj::value& item : list.get_array()) {
      WorkloadFileTask task{Workload::from_json(item), 1};
      const int64_t occurrences = json::get_int_or(json::as_object(item, "task"), "occurrences", 1);
      if (occurrences < 1 || occurrences > kMaxOccurrences)
        throw std::invalid_argument("task '" + task.workload.name +
                                    "': occurrences = " + std::to_string(occurrences) +
                                    " must be in [1, " + std::to_string(kMaxOccurrences) + "]");
      task.occurrences = static_cast<int>(occurrences);
      tasks.push_back(std::move(task));
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("'" + path + "': " + e.what());
  }
  return tasks;
}

}  // namespace webtune

namespace webtune {

namespace {

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t end = text.find(sep, begin);
    parts.push_back(text.substr(begin, end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

std::vector<int64_t> parse_dims(const std::string& text, size_t expected, const std::string& form) {
  std::vector<int64_t> dims;
  for (const std::string& part : split_on(text, ',')) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size())
      throw std::invalid_argument("'" + part + "' is not an integer; expected " + form);
    dims.push_back(v);
  }
  if (dims.size() != expected)
    throw std::invalid_argument("expected " + std::to_string(expected) + " numbers: " + form);
  return dims;
}

}  // namespace

std::vector<WorkloadFileTask> resolve_workloads(const std::string& spec, const std::string& names) {
  std::vector<WorkloadFileTask> tasks;
  const auto colon = spec.find(':');
  const std::string head = spec.substr(0, colon);
  if (colon != std::string::npos &&
      (head == "dense" || head == "conv2d" || head == "depthwise_conv2d")) {
    // Shapes, then the epilogue's tokens: "conv2d:1,64,56,56,64,3,1,1+bias+relu".
    std::vector<std::string> pieces = split_on(spec.substr(colon + 1), '+');
    const std::string body = pieces.front();
    pieces.erase(pieces.begin());
    try {
      if (head == "dense") {
        auto d = parse_dims(body, 3, "dense:M,N,K");
        tasks.push_back({Workload::dense(d[0], d[1], d[2], spec), 1});
      } else if (head == "conv2d") {
        auto d = parse_dims(body, 8, "conv2d:N,C,H,W,K,R,stride,pad");
        tasks.push_back(
            {Workload::conv2d(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], spec), 1});
      } else {
        auto d = parse_dims(body, 7, "depthwise_conv2d:N,C,H,W,R,stride,pad");
        tasks.push_back(
            {Workload::depthwise_conv2d(d[0], d[1], d[2], d[3], d[4], d[5], d[6], spec), 1});
      }
      if (!pieces.empty()) {
        tasks.back().workload.epilogue = Epilogue::parse(pieces);
        tasks.back().workload.validate();
      }
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("'" + spec + "': " + e.what());
    }
  } else if (colon != std::string::npos && !head.empty() &&
             head.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos &&
             !std::filesystem::exists(spec)) {
    // "matmul:64,64,64": meant as a spec, not a file; say which ops there are.
    throw std::invalid_argument(
        "'" + spec + "': unknown op '" + head +
        "'; the known ops are dense:M,N,K, conv2d:N,C,H,W,K,R,stride,pad and "
        "depthwise_conv2d:N,C,H,W,R,stride,pad (or give a workload file)");
  } else {
    tasks = load_workload_file(spec);
  }
  return pick_tasks(std::move(tasks), names, spec);
}

std::vector<WorkloadFileTask> pick_tasks(std::vector<WorkloadFileTask> tasks,
                                         const std::string& names, const std::string& source) {
  if (names.empty()) return tasks;
  std::vector<WorkloadFileTask> picked;
  for (const std::string& name : split_on(names, ',')) {
    bool found = false;
    for (const WorkloadFileTask& t : tasks)
      if (t.workload.name == name) {
        picked.push_back(t);
        found = true;
      }
    if (!found) throw std::invalid_argument("no task named '" + name + "' in " + source);
  }
  return picked;
}

}  // namespace webtune
