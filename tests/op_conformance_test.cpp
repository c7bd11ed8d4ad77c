/// \file op_conformance_test.cpp
/// Every target's operators against ONNX's own node conformance cases (libonnx-testdata, the
/// cases tests/graph_executor_cases.txt runs on the reference executor), so each op body is
/// checked on the exporters' attribute combinations, not only on cases written here.
///
/// A case applies to a target when its graph is one node of an operator that
/// graph/operators.hpp marks for it (kRunsOnGpu: gles-frag, gles-compute, webgpu;
/// kRunsInWasmJs: wasm's runtime/ops.mjs), its data inputs and output 0 are float32, and its
/// build-time parameters (operators.hpp's build_time_inputs: starts, pads, scales, ...) are given
/// (they become constants, as in an exported model). Output 0 must match the expected values
/// (|error| <= 1e-4 · max(1, max |expected|), NaN where NaN is expected, infinities exactly):
/// packages run one output per node. Each applicable case passes, or is listed in
/// tests/op_conformance_refusals.txt with the reason and must still fail there.
///   gles-frag, gles-compute: in-process on EGL (llvmpipe in CI);
///   webgpu: headless Chromium's WebGPU (SwiftShader), tests/run_glue_kernels.mjs;
///   wasm: runtime/ops.mjs under node, tests/run_js_ops.mjs.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "deploy/glue_kernels.hpp"
#include "graph/executor.hpp"
#include "graph/operators.hpp"
#include "support/gl_harness.hpp"
#include "support/onnx_cases.hpp"

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;
using graph::Graph;
using graph::Node;
using graph::Value;

const fs::path kRefusals = fs::path(WEBTUNE_SOURCE_DIR) / "tests" / "op_conformance_refusals.txt";

/// tests/op_conformance_refusals.txt: "<target> <case> <reason>", target one of gles-frag,
/// gles-compute, webgpu, wasm, or gpu (the three GPU targets). The reason for each refused
/// (target, case).
std::map<std::pair<std::string, std::string>, std::string> listed_refusals() {
  std::map<std::pair<std::string, std::string>, std::string> refusals;
  std::ifstream in(kRefusals);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string target, name, reason;
    s >> target >> name;
    std::getline(s >> std::ws, reason);
    const std::vector<std::string> targets =
        target == "gpu" ? std::vector<std::string>{"gles-frag", "gles-compute", "webgpu"}
                        : std::vector<std::string>{target};
    for (const std::string& t : targets) refusals[{t, name}] = reason;
  }
  return refusals;
}

/// One applicable case: the graph with its build-time inputs as constants, the feeds of the
/// bound inputs, and the expected output 0.
struct OpCase {
  std::string name;
  Graph graph;
  int64_t opset = 13;
  std::map<std::string, Value> feeds;  ///< graph inputs left (data), by name
  Value expected;
};

/// The cases that apply to targets running operators with `runs` (see the file comment).
std::vector<OpCase> applicable_cases(unsigned runs) {
  std::vector<OpCase> cases;
  if (!fs::exists(test::kOnnxTestData)) return cases;
  for (const test::ConformanceCase& listed : test::listed_cases()) {
    if (listed.status == "skip") continue;
    test::LoadedCase loaded;
    try {
      loaded = test::load_case(listed.name, listed.status == "run7");
    } catch (const std::exception&) {
      continue;  // the executor's conformance test reports it
    }
    Graph& g = loaded.graph;
    if (g.nodes.size() != 1 || g.outputs.empty()) continue;
    const Node& node = g.nodes[0];
    const graph::OperatorInfo* info = graph::find_operator(node.op_type);
    if (info == nullptr || (info->runs & runs) == 0) continue;
    if (node.outputs.empty() || node.outputs[0] != g.outputs[0]) continue;
    const auto expected = loaded.expected.find(g.outputs[0]);
    if (expected == loaded.expected.end() || !expected->second.is_float()) continue;
    // Build-time parameters given as graph inputs become constants, as an exporter writes them.
    bool usable = true;
    for (size_t i = 0; i < node.inputs.size() && i < 32; ++i) {
      const std::string& in = node.inputs[i];
      if (in.empty() || ((info->build_time_inputs >> i) & 1u) == 0) continue;
      const auto feed = loaded.inputs.find(in);
      if (feed == loaded.inputs.end()) continue;  // already a constant
      graph::Tensor& t = g.tensors.at(in);
      if (feed->second.is_float())
        t.float_data = feed->second.data;
      else
        t.int_data = feed->second.ints;
      loaded.inputs.erase(feed);
    }
    std::vector<std::string> inputs;
    for (const std::string& in : g.inputs)
      if (loaded.inputs.count(in)) inputs.push_back(in);
    g.inputs = inputs;
    for (const auto& [name, value] : loaded.inputs) usable = usable && value.is_float();
    if (!usable) continue;
    cases.push_back({listed.name, std::move(g), loaded.report.opset, std::move(loaded.inputs),
                     expected->second});
  }
  return cases;
}

/// The floats a bound input holds: its feed, or the constant's values.
std::vector<float> bound_values(const OpCase& c, const std::string& name) {
  const auto feed = c.feeds.find(name);
  if (feed != c.feeds.end()) return feed->second.data;
  const graph::Tensor& t = c.graph.tensor(name);
  if (t.float_data) return *t.float_data;
  throw std::runtime_error("input '" + name + "' is neither fed nor a float constant");
}

/// "" when `got` matches `expected` (see the file comment), else what differs.
std::string compare(const std::vector<float>& got, const std::vector<float>& expected) {
  if (got.size() < expected.size())
    return "got " + std::to_string(got.size()) + " values for " + std::to_string(expected.size());
  double scale = 1.0;
  for (float x : expected)
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(static_cast<double>(x)));
  for (size_t i = 0; i < expected.size(); ++i) {
    const float e = expected[i], g = got[i];
    const bool ok = std::isnan(e)   ? std::isnan(g)
                    : std::isinf(e) ? g == e
                                    : std::fabs(static_cast<double>(g) - e) <= 1e-4 * scale;
    if (!ok) {
      std::ostringstream s;
      s << "element " << i << ": got " << g << ", expected " << e;
      return s.str();
    }
  }
  return "";
}

bj::value json_float(float v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return static_cast<double>(v);
}

bj::array json_floats(const std::vector<float>& values) {
  bj::array a;
  for (float v : values) a.push_back(json_float(v));
  return a;
}

std::vector<float> floats_of(const bj::value& output) {
  std::vector<float> got;
  for (const bj::value& v : output.as_array()) {
    if (v.is_null())
      got.push_back(NAN);
    else if (v.is_string())
      got.push_back(v.as_string() == "inf" ? INFINITY : -INFINITY);
    else
      got.push_back(static_cast<float>(v.to_number<double>()));
  }
  return got;
}

/// Runs `script` (under tests/) on `job` with node; its parsed output.
bj::object run_node_script(const std::string& script, const bj::object& job) {
  const fs::path dir =
      fs::temp_directory_path() / ("webtune_conformance_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string in = (dir / "in.json").string(), out = (dir / "out.json").string();
  std::ofstream(in) << bj::serialize(job);
  const std::string cmd =
      "node '" WEBTUNE_SOURCE_DIR "/tests/" + script + "' '" + in + "' '" + out + "'";
  const int status = std::system(cmd.c_str());
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  fs::remove_all(dir);
  if (status != 0) throw std::runtime_error(cmd + " exited with " + std::to_string(status));
  return bj::parse(text.str()).as_object();
}

/// Checks every case's outcome ("" = matched, else why it failed) against the refusal list.
void check_outcomes(const std::string& target, const std::vector<std::string>& names,
                    const std::vector<std::string>& problems) {
  const auto refusals = listed_refusals();
  int matched = 0, refused = 0;
  for (size_t k = 0; k < names.size(); ++k) {
    const auto listed = refusals.find({target, names[k]});
    if (listed != refusals.end()) {
      EXPECT_NE(problems[k], "") << target << " " << names[k] << " is listed as refused ("
                                 << listed->second << ") but passes: remove it from "
                                 << kRefusals.filename().string();
      ++refused;
    } else {
      EXPECT_EQ(problems[k], "") << target << " " << names[k];
      matched += problems[k].empty() ? 1 : 0;
    }
  }
  std::cout << target << ": " << names.size() << " ONNX conformance cases apply, " << matched
            << " match, " << refused << " listed as refused\n";
}

test::GlHarness& harness() {
  static test::GlHarness h;
  return h;
}

DeviceLimits limits() {
  DeviceLimits l;
  l.max_texture_size = 4096;
  return l;
}

/// Builds `c`'s op kernel for `target`; "" on success, else the refusal (an invalid_argument).
std::string build(const OpCase& c, Target target, KernelArtifact& artifact) {
  try {
    artifact = deploy::op_kernel(target, c.graph, c.graph.nodes[0], limits(), {c.opset});
    return "";
  } catch (const std::invalid_argument& e) {
    return std::string("refused: ") + e.what();
  }
}

void run_gl(Target target) {
  if (!fs::exists(test::kOnnxTestData)) GTEST_SKIP() << test::kOnnxTestData << " is absent";
  const std::vector<OpCase> cases = applicable_cases(graph::kRunsOnGpu);
  ASSERT_GT(cases.size(), 100u);
  std::vector<std::string> names, problems;
  for (const OpCase& c : cases) {
    names.push_back(c.name);
    KernelArtifact a;
    std::string problem = build(c, target, a);
    if (problem.empty()) {
      try {
        const std::vector<std::string> bound = deploy::op_kernel_inputs(c.graph.nodes[0]);
        std::vector<float> got;
        if (target == Target::kGlesFrag) {
          std::vector<std::vector<float>> texels;
          for (size_t i = 0; i < bound.size(); ++i)
            texels.push_back(a.inputs[i].pack(bound_values(c, bound[i])));
          got = harness().run_fragment(a, texels).at(0);
        } else {
          std::vector<std::vector<float>> buffers;
          std::vector<int> bindings;
          for (size_t i = 0; i < bound.size(); ++i) {
            buffers.push_back(bound_values(c, bound[i]));
            bindings.push_back(i < 2 ? static_cast<int>(i) : static_cast<int>(i) + 1);
          }
          got = harness().run_compute(a, buffers, bindings);
        }
        problem = compare(got, c.expected.data);
      } catch (const std::exception& e) {
        problem = e.what();
      }
    }
    problems.push_back(problem);
  }
  check_outcomes(std::string(target_name(target)), names, problems);
}

TEST(OpConformance, GlesFragKernelsMatchOnnxCases) {
  run_gl(Target::kGlesFrag);
}

TEST(OpConformance, GlesComputeKernelsMatchOnnxCases) {
  run_gl(Target::kGlesCompute);
}

TEST(OpConformance, WebgpuKernelsMatchOnnxCasesInHeadlessChromium) {
  if (!fs::exists(test::kOnnxTestData)) GTEST_SKIP() << test::kOnnxTestData << " is absent";
  const char* chromium = std::getenv("CHROMIUM") ? std::getenv("CHROMIUM") : "/usr/bin/chromium";
  if (!fs::exists(chromium)) GTEST_SKIP() << "no Chromium at " << chromium;
  const std::vector<OpCase> cases = applicable_cases(graph::kRunsOnGpu);
  ASSERT_GT(cases.size(), 100u);
  std::vector<std::string> names, problems;
  std::vector<size_t> sent;  // case index of each kernel sent
  bj::array kernels;
  for (size_t k = 0; k < cases.size(); ++k) {
    const OpCase& c = cases[k];
    names.push_back(c.name);
    KernelArtifact a;
    problems.push_back(build(c, Target::kWebgpu, a));
    if (!problems.back().empty()) continue;
    const std::vector<std::string> bound = deploy::op_kernel_inputs(c.graph.nodes[0]);
    bj::array inputs, bindings;
    for (size_t i = 0; i < bound.size(); ++i) {
      inputs.push_back(json_floats(bound_values(c, bound[i])));
      bindings.push_back(i < 2 ? static_cast<int64_t>(i) : static_cast<int64_t>(i) + 1);
    }
    kernels.push_back(bj::object{{"name", c.name},
                                 {"source", a.source},
                                 {"inputs", std::move(inputs)},
                                 {"bindings", std::move(bindings)},
                                 {"output_floats", a.output.elements()},
                                 {"dispatch", bj::array{a.dispatch[0], a.dispatch[1], 1}}});
    sent.push_back(k);
  }
  const bj::object result =
      run_node_script("run_glue_kernels.mjs", {{"kernels", kernels}, {"fragments", bj::array{}}});
  if (!result.at("adapter").as_bool()) GTEST_SKIP() << "Chromium gave no WebGPU adapter";
  const bj::array& results = result.at("results").as_array();
  ASSERT_EQ(results.size(), sent.size());
  for (size_t j = 0; j < sent.size(); ++j) {
    const bj::object& r = results[j].as_object();
    problems[sent[j]] = r.contains("error")
                            ? std::string(r.at("error").as_string().c_str())
                            : compare(floats_of(r.at("output")), cases[sent[j]].expected.data);
  }
  check_outcomes("webgpu", names, problems);
}

/// A node attribute as runtime/ops.mjs reads it (the planner's op step JSON).
bj::value attribute_json(const graph::Attribute& a) {
  if (const auto* i = std::get_if<int64_t>(&a)) return *i;
  if (const auto* f = std::get_if<float>(&a)) return static_cast<double>(*f);
  if (const auto* s = std::get_if<std::string>(&a)) return bj::value(*s);
  if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) {
    bj::array out;
    for (int64_t v : *is) out.push_back(v);
    return out;
  }
  bj::array floats;
  for (float f : std::get<std::vector<float>>(a)) floats.push_back(static_cast<double>(f));
  return floats;
}

TEST(OpConformance, WasmJavaScriptOperatorsMatchOnnxCases) {
  if (!fs::exists(test::kOnnxTestData)) GTEST_SKIP() << test::kOnnxTestData << " is absent";
  const std::vector<OpCase> cases = applicable_cases(graph::kRunsInWasmJs);
  ASSERT_GT(cases.size(), 100u);
  std::vector<std::string> names;
  bj::array jobs;
  for (const OpCase& c : cases) {
    names.push_back(c.name);
    const Node& node = c.graph.nodes[0];
    bj::object attributes;
    for (const auto& [key, value] : node.attributes) attributes[key] = attribute_json(value);
    bj::array inputs;
    for (const std::string& in : node.inputs) {
      if (in.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      const graph::Tensor& t = c.graph.tensor(in);
      if (t.int_data) {  // as the planner writes an int constant (StepInput kInts)
        bj::array ints;
        for (int64_t v : *t.int_data) ints.push_back(v);
        inputs.push_back(bj::object{{"ints", std::move(ints)}});
        continue;
      }
      bj::array shape;
      for (int64_t d : t.shape) shape.push_back(d);
      if (shape.empty()) shape.push_back(1);  // a scalar weight is stored as [1]
      inputs.push_back(
          bj::object{{"shape", std::move(shape)}, {"data", json_floats(bound_values(c, in))}});
    }
    bj::array out_shape;
    for (int64_t d : c.graph.tensor(node.outputs[0]).shape) out_shape.push_back(d);
    jobs.push_back(bj::object{{"name", c.name},
                              {"type", node.op_type},
                              {"attributes", std::move(attributes)},
                              {"opset", c.opset},
                              {"inputs", std::move(inputs)},
                              {"out_shape", std::move(out_shape)}});
  }
  const bj::object result = run_node_script("run_js_ops.mjs", {{"cases", jobs}});
  const bj::array& results = result.at("results").as_array();
  ASSERT_EQ(results.size(), cases.size());
  std::vector<std::string> problems;
  for (size_t k = 0; k < cases.size(); ++k) {
    const bj::object& r = results[k].as_object();
    EXPECT_EQ(r.at("name").as_string(), cases[k].name);
    problems.push_back(r.contains("error")
                           ? std::string(r.at("error").as_string().c_str())
                           : compare(floats_of(r.at("output")), cases[k].expected.data));
  }
  check_outcomes("wasm", names, problems);
}

// ---------------------------------------------------------------------------------------------
// Large reductions: the compute targets' workgroup frame (deploy/glue_reduction.cpp), which the
// conformance cases' small groups never reach.
// ---------------------------------------------------------------------------------------------

struct Reduction {
  std::string name, op;
  std::vector<int64_t> x;
  std::map<std::string, graph::Attribute> attributes;
  bool with_nan = false;
};

std::vector<Reduction> large_reductions() {
  using A = std::map<std::string, graph::Attribute>;
  using I = std::vector<int64_t>;
  return {
      {"SqueezeExcitePool", "GlobalAveragePool", {1, 16, 56, 56}, {}},
      {"GlobalMaxWithNaN", "GlobalMaxPool", {2, 3, 17, 19}, {}, true},
      {"MeanOverSpatial", "ReduceMean", {1, 8, 30, 30}, A{{"axes", I{2, 3}}}},
      {"SumOverChannels", "ReduceSum", {2, 300, 3}, A{{"axes", I{1}}, {"keepdims", int64_t{0}}}},
      {"MaxWithNaN", "ReduceMax", {4, 257}, A{{"axes", I{-1}}}, true},
      {"MinOverAll", "ReduceMin", {5, 7, 11}, {}},
      {"L2", "ReduceL2", {3, 1000}, A{{"axes", I{1}}}},
      {"L1", "ReduceL1", {3, 1000}, A{{"axes", I{1}}}},
      {"SumSquare", "ReduceSumSquare", {2, 129}, A{{"axes", I{1}}}},
      {"LogSum", "ReduceLogSum", {2, 500}, A{{"axes", I{1}}}},
      {"Prod", "ReduceProd", {2, 160}, A{{"axes", I{1}}}},
      {"OneGroupPerThreadBlock", "ReduceMean", {70000, 128}, A{{"axes", I{1}}}},
  };
}

/// The case's graph, its input (values near 1 for Prod, positive for LogSum) and the reference.
OpCase reduction_case(const Reduction& r) {
  OpCase c;
  c.name = r.name;
  c.opset = 13;
  Graph& g = c.graph;
  graph::Tensor& x = g.tensors["x"];
  x.name = "x";
  x.shape = r.x;
  Node node;
  node.name = r.name;
  node.op_type = r.op;
  node.inputs = {"x"};
  node.outputs = {"y"};
  node.attributes = r.attributes;
  g.nodes = {node};
  g.inputs = {"x"};
  g.outputs = {"y"};
  int64_t n = 1;
  for (int64_t d : r.x) n *= d;
  std::vector<float> data(static_cast<size_t>(n));
  uint32_t state = 12345;
  for (size_t i = 0; i < data.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const float u = static_cast<float>(state >> 8) / 16777216.0f;  // [0, 1)
    data[i] = r.op == "ReduceProd"     ? 0.99f + 0.02f * u
              : r.op == "ReduceLogSum" ? u + 0.5f
                                       : 4.0f * u - 2.0f;
  }
  if (r.with_nan) data[data.size() / 3] = NAN;
  c.feeds["x"] = Value::floats(r.x, data);
  // The output's shape from the reference itself.
  graph::Tensor& y = g.tensors["y"];
  y.name = "y";
  c.expected = graph::run_node(node, 0, {&c.feeds.at("x")}, {graph::DataType::kFloat32}, 13).at(0);
  y.shape = c.expected.shape;
  return c;
}

TEST(LargeReductions, WorkgroupKernelsMatchTheReferenceOnGlesCompute) {
  for (const Reduction& r : large_reductions()) {
    SCOPED_TRACE(r.name);
    const OpCase c = reduction_case(r);
    KernelArtifact a;
    ASSERT_EQ(build(c, Target::kGlesCompute, a), "");
    // The workgroup frame: one workgroup per output element, shared memory.
    EXPECT_NE(a.source.find("shared float part["), std::string::npos) << a.source;
    EXPECT_GE(a.dispatch[0] * a.dispatch[1], c.expected.elements());
    EXPECT_LE(a.dispatch[0], 65535);
    const std::vector<float> got = harness().run_compute(a, {c.feeds.at("x").data}, {0});
    EXPECT_EQ(compare(got, c.expected.data), "");
    // Switched off, the element frame computes the same values.
    deploy::OpKernelOptions element{c.opset};
    element.workgroup_reductions = false;
    const KernelArtifact e =
        deploy::op_kernel(Target::kGlesCompute, c.graph, c.graph.nodes[0], limits(), element);
    EXPECT_EQ(e.source.find("shared float part["), std::string::npos);
    if (c.expected.elements() < 1000)  // the element frame is slow on llvmpipe for large ones
      EXPECT_EQ(compare(harness().run_compute(e, {c.feeds.at("x").data}, {0}), c.expected.data),
                "");
  }
}

TEST(LargeReductions, WorkgroupKernelsMatchTheReferenceInHeadlessChromium) {
  const char* chromium = std::getenv("CHROMIUM") ? std::getenv("CHROMIUM") : "/usr/bin/chromium";
  if (!fs::exists(chromium)) GTEST_SKIP() << "no Chromium at " << chromium;
  std::vector<OpCase> cases;
  bj::array kernels;
  for (const Reduction& r : large_reductions()) {
    if (r.x[0] == 70000) continue;  // 9 M floats through JSON: the GL test covers the 2-D grid
    cases.push_back(reduction_case(r));
    KernelArtifact a;
    ASSERT_EQ(build(cases.back(), Target::kWebgpu, a), "") << r.name;
    EXPECT_NE(a.source.find("var<workgroup> part"), std::string::npos) << a.source;
    kernels.push_back(
        bj::object{{"name", r.name},
                   {"source", a.source},
                   {"inputs", bj::array{json_floats(cases.back().feeds.at("x").data)}},
                   {"bindings", bj::array{0}},
                   {"output_floats", a.output.elements()},
                   {"dispatch", bj::array{a.dispatch[0], a.dispatch[1], 1}}});
  }
  const bj::object result =
      run_node_script("run_glue_kernels.mjs", {{"kernels", kernels}, {"fragments", bj::array{}}});
  if (!result.at("adapter").as_bool()) GTEST_SKIP() << "Chromium gave no WebGPU adapter";
  const bj::array& results = result.at("results").as_array();
  ASSERT_EQ(results.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const bj::object& r = results[k].as_object();
    ASSERT_FALSE(r.contains("error")) << cases[k].name << ": " << r.at("error").as_string().c_str();
    EXPECT_EQ(compare(floats_of(r.at("output")), cases[k].expected.data), "") << cases[k].name;
  }
}

/// The table and the runtime agree: runtime/ops.mjs's OP_TYPES are exactly the operators
/// graph/operators.hpp marks kRunsInWasmJs.
TEST(OperatorTable, WasmRuntimeRunsExactlyTheMarkedOperators) {
  const fs::path out =
      fs::temp_directory_path() / ("webtune_op_types_" + std::to_string(::getpid()));
  const std::string cmd =
      "node --input-type=module -e \"import('" WEBTUNE_SOURCE_DIR
      "/runtime/ops.mjs').then((m) => console.log(JSON.stringify(m.OP_TYPES)))\" > '" +
      out.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  fs::remove(out);
  std::set<std::string> runtime;
  const bj::value parsed = bj::parse(text.str());
  for (const bj::value& v : parsed.as_array()) runtime.insert(std::string(v.as_string().c_str()));
  const std::vector<std::string> marked = graph::operators_that_run(graph::kRunsInWasmJs);
  for (const std::string& op : marked)
    EXPECT_TRUE(runtime.count(op)) << op << " is marked kRunsInWasmJs but ops.mjs runs no " << op;
  for (const std::string& op : runtime)
    EXPECT_TRUE(std::find(marked.begin(), marked.end(), op) != marked.end())
        << "ops.mjs runs " << op << ", which graph/operators.cpp does not mark kRunsInWasmJs";
  EXPECT_EQ(runtime.size(), marked.size());
}

/// Every GPU-marked operator has a body and every body is marked (deploy's registry check).
TEST(OperatorTable, GpuBodiesAreExactlyTheMarkedOperators) {
  for (const graph::OperatorInfo& info : graph::operator_table()) {
    const bool marked = (info.runs & graph::kRunsOnGpu) != 0;
    for (Target t : {Target::kGlesFrag, Target::kGlesCompute, Target::kWebgpu})
      EXPECT_EQ(deploy::has_op_kernel(t, std::string(info.name)), marked) << info.name;
    EXPECT_FALSE(deploy::has_op_kernel(Target::kWasm, std::string(info.name)));
  }
  EXPECT_TRUE(std::is_sorted(graph::operator_table().begin(), graph::operator_table().end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
}

}  // namespace
}  // namespace webtune
