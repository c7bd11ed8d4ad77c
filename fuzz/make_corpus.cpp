/// \file make_corpus.cpp
/// Writes the seed corpus of every harness (fuzz/corpus/<harness>/) from webtune's own code, so
/// that the seeds are real messages, configs and records of today's formats:
///   fuzz_make_corpus SOURCE_DIR
/// writes SOURCE_DIR/fuzz/corpus/{protocol,tracker_frames,workload,config,measure,records_json,
/// autotvm_log}/ (existing files of the same name are replaced; others are kept). The AutoTVM
/// seeds also copy three lines of ../shared/tophub logs when they are there. Errors go to
/// stderr with exit status 1. Not a fuzzer: a helper for whoever changes a format.
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "codegen/measure.hpp"
#include "codegen/reference.hpp"
#include "codegen/task.hpp"
#include "tracker/protocol.hpp"
#include "tuner/autotvm_log.hpp"
#include "tuner/records.hpp"

namespace bj = boost::json;
namespace fs = std::filesystem;
using namespace webtune;

namespace {

fs::path g_corpus;

void write(const std::string& harness, const std::string& name, const std::string& content) {
  const fs::path dir = g_corpus / harness;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + (dir / name).string());
}

/// The measure input a tuner submits for the default config of `workload` on `target`.
MeasureInput input_for(const Workload& workload, Target target) {
  const Task task = Task::create(workload, target);
  MeasureInput input;
  input.workload = workload;
  input.artifact = task.build(task.default_config());
  input.seed = 7;
  input.samples = reference_samples(workload, input.seed, 4);
  input.options.number = 2;
  input.options.repeat = 3;
  return input;
}

MeasureResult ok_result() {
  MeasureResult r;
  r.costs = {0.00125, 0.00121, 0.00123};
  r.all_cost = 0.42;
  r.timestamp = 1700000000.5;
  return r;
}

/// A byte b with b % n == index, printable where possible, so seeds stay readable.
char selector(size_t index, size_t n) {
  for (int b = '0'; b < 127; ++b)
    if (static_cast<size_t>(b) % n == index) return static_cast<char>(b);
  return static_cast<char>(index);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void protocol_seeds(const MeasureInput& dense) {
  using namespace webtune::tracker;
  Hello agent;
  agent.role = Role::kAgent;
  agent.name = "host-1/gl";
  agent.keys = {"gles:llvmpipe"};
  agent.device = bj::object{{"renderer", "llvmpipe (LLVM 15.0.6, 256 bits)"},
                            {"limits", DeviceLimits{}.to_json()}};
  write("protocol", "hello_agent", bj::serialize(agent.to_json()));
  Hello client;
  client.role = Role::kClient;
  client.name = "tuner";
  client.token = "client-t";
  write("protocol", "hello_client", bj::serialize(client.to_json()));
  write("protocol", "hello_viewer", R"({"type":"hello","protocol":1,"role":"viewer"})");
  bj::object submit{
      {"type", "submit"},
      {"priority", 1},
      {"batch", bj::array{bj::object{{"tag", 7},
                                     {"key", "gles"},
                                     {"lease_ms", 60000},
                                     {"priority", 2},
                                     {"input", dense.to_json()}},
                          bj::object{{"tag", 8}, {"key", "gles:llvmpipe"}, {"input", 0}}}}};
  write("protocol", "submit", bj::serialize(submit));
  write("protocol", "result",
        bj::serialize(
            bj::object{{"type", "result"}, {"job", 42}, {"result", ok_result().to_json()}}));
  write("protocol", "result_error",
        bj::serialize(bj::object{
            {"type", "result"},
            {"job", 43},
            {"result",
             MeasureResult::failure(MeasureErrorNo::kWrongAnswer, "C[3,5] = 1 != 2").to_json()}}));
  write("protocol", "job", bj::serialize(make_job(42, 1, 60000, dense.to_json())));
  write("protocol", "cancel", R"({"type":"cancel","job":42})");
  write("protocol", "summary", R"({"type":"summary"})");
  write("protocol", "ping", R"({"type":"ping","t":123})");
}

void tracker_frames_seeds() {
  const std::string agent =
      R"({"type":"hello","protocol":1,"role":"agent","name":"a1","keys":["gles:llvmpipe"],)"
      R"("device":{"renderer":"llvmpipe"}})";
  const std::string client = R"({"type":"hello","protocol":1,"role":"client","name":"tuner"})";
  const std::string submit3 =
      R"({"type":"submit","priority":0,"batch":[{"tag":1,"key":"gles","input":{"n":1}},)"
      R"({"tag":2,"key":"gles","lease_ms":500,"input":{"n":2}},)"
      R"({"tag":3,"key":"gles:llvmpipe","priority":5,"input":{"n":3}}]})";
  // Two agents and a client: results, an error result, a late duplicate, a summary.
  write("tracker_frames", "two_agents_one_client",
        "o\no\no\nt0 " + agent + "\nt1 " + agent + "\nt2 " + client + "\nt2 " + submit3 +
            "\nr0 0 0.0012\nr1 5\nr0 0 0.0011\nr0 0 0.0011\nt2 {\"type\":\"summary\"}\n"
            "t0 {\"type\":\"ping\",\"t\":1}\np1\nk100\n");
  // Leases that expire until the job fails; the agent answers late.
  write("tracker_frames", "lease_expiry",
        "o\no\nt0 " + agent + "\nt1 " + client + "\nt1 " + submit3 +
            "\nk600\nk600\nk600\nk61000\nr0 0\nk61000\nk61000\nr0 7\nk31000\n");
  // A client that cancels and one that leaves with leased jobs; an agent that dies.
  write("tracker_frames", "cancel_and_leave",
        "o\no\no\nt0 " + agent + "\nt1 " + client + "\nt1 " + submit3 + "\nx1\nt2 " + client +
            "\nt2 " + submit3 + "\nc1\nr0 0\nc0\no\nt3 " + agent + "\nr3 0\nk100\n");
  // With tokens: a wrong token, a right one, a viewer, binary frames, bad messages.
  write("tracker_frames", "tokens_and_refusals",
        "tokens\no\no\no\no\nt0 " + agent + "\nt1 " +
            R"({"type":"hello","protocol":1,"role":"agent","token":"agent-t","keys":["gles"]})" +
            "\nt2 " + R"({"type":"hello","protocol":1,"role":"viewer","token":"viewer-t"})" +
            "\nt2 {\"type\":\"submit\",\"batch\":[]}\nb1 12\nt3 " +
            R"({"type":"hello","protocol":2,"role":"client"})" +
            "\nt1 {\"type\":\"result\",\"job\":99,\"result\":{}}\nt1 not json\n");
}

void workload_seeds(const fs::path& source) {
  const bj::value resnet = bj::parse(read_text(source / "configs/workloads/resnet18.json"));
  const bj::array& tasks = resnet.at("tasks").as_array();
  for (size_t i : {size_t{0}, size_t{1}, tasks.size() - 1})
    write("workload", "json_" + std::string(tasks[i].at("name").as_string()),
          "0 " + bj::serialize(tasks[i]));
  write("workload", "json_depthwise",
        "0 " + bj::serialize(Workload::depthwise_conv2d(1, 32, 112, 112, 3, 1, 1, "DW").to_json()));
  write("workload", "spec_dense", "10512,512,512");
  write("workload", "spec_conv2d", "111,64,56,56,64,3,1,1");
  write("workload", "spec_depthwise", "121,32,112,112,3,1,1");
  write("workload", "file_resnet18_C2_C4",
        "2 C2,C4\n" + read_text(source / "configs/workloads/resnet18.json"));
  write("workload", "file_demo", "2 \n" + read_text(source / "configs/workloads/demo.json"));
  write("workload", "file_single", "2 \n" + bj::serialize(Workload::dense(64, 32, 16).to_json()));
}

void config_seeds() {
  // The templates in config_fuzzer.cpp's order.
  const Workload c2 = Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2");
  const Workload dense = Workload::dense(512, 512, 512);
  const Workload depthwise = Workload::depthwise_conv2d(1, 32, 112, 112, 3, 1, 1);
  std::vector<Task> tasks;
  for (Target target : {Target::kGlesFrag, Target::kGlesCompute, Target::kWebgpu, Target::kWasm})
    for (const Workload& w : {c2, dense, depthwise}) try {
        tasks.push_back(Task::create(w, target));
      } catch (const std::invalid_argument&) {
      }
  DeviceLimits swiftshader;
  swiftshader.max_texture_size = 8192;
  swiftshader.max_workgroup_invocations = 256;
  swiftshader.max_threads = 8;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const std::string name = std::string(target_name(tasks[t].target)) + "_" +
                             std::string(op_name(tasks[t].workload.op));
    const char sel = selector(t, tasks.size());
    write("config", name + "_default",
          std::string{sel, '0'} + bj::serialize(tasks[t].default_config().to_json()));
    write("config", name + "_index",
          std::string{sel, '0'} + std::to_string(tasks[t].space->raw_size() / 3));
  }
  write("config", "limits_default",
        std::string{selector(0, tasks.size()), '1'} + bj::serialize(DeviceLimits{}.to_json()));
  write("config", "limits_swiftshader",
        std::string{selector(1, tasks.size()), '1'} + bj::serialize(swiftshader.to_json()));
}

void measure_seeds(const MeasureInput& dense, const MeasureInput& conv) {
  write("measure", "input_dense_gles_frag", "0" + bj::serialize(dense.to_json()));
  write("measure", "input_conv2d_webgpu", "0" + bj::serialize(conv.to_json()));
  write("measure", "result_ok", "1" + bj::serialize(ok_result().to_json()));
  write("measure", "result_timeout",
        "1" + bj::serialize(
                  MeasureResult::failure(MeasureErrorNo::kRunTimeout, "ran past 10 s").to_json()));
  write("measure", "options", "2" + bj::serialize(dense.options.to_json()));
  write("measure", "artifact", "3" + bj::serialize(conv.artifact.to_json()));
}

void records_seeds(const Task& task) {
  const ConfigEntity a = task.default_config(), b = task.space->get(task.space->raw_size() / 2);
  const std::string limits =
      bj::serialize(bj::object{{"renderer", "llvmpipe"}, {"limits", DeviceLimits{}.to_json()}});
  write("records_json", "two_trials",
        bj::serialize(Workload::dense(8, 8, 8).to_json()) + "\ngles-frag\n" + limits + "\n0\t" +
            std::to_string(a.index()) + "\t" + bj::serialize(a.to_json()) +
            "\t[0.001,0.0011]\t1.0\n5\t" + std::to_string(b.index()) + "\t" +
            bj::serialize(b.to_json()) + "\t[]\t0\n");
  write("records_json", "conv2d_webgpu",
        bj::serialize(Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1).to_json()) +
            "\nwebgpu\n{}\n0\t12\t{\"index\":12,\"entity\":[[\"tile_y\",\"sp\",[-1,4]]]}\t[2e-3]"
            "\t3\n");
}

void autotvm_seeds(const fs::path& source) {
  RecordStore store(":memory:");
  const Task dense = Task::create(Workload::dense(64, 64, 64, "D"), Target::kGlesFrag);
  const Task conv =
      Task::create(Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2"), Target::kWebgpu);
  int64_t trial_index = 0;
  for (const Task* task : {&dense, &conv}) {
    const int64_t job = store.open_job(task->workload, task->target, "gles:llvmpipe", "", "xgb");
    std::vector<TrialRecord> trials;
    for (int64_t index : {task->default_config().index(), task->space->raw_size() / 2}) {
      TrialRecord t;
      t.config_index = index;
      t.config_json = bj::serialize(task->space->get(index).to_json());
      t.result = trial_index++ % 3 == 1
                     ? MeasureResult::failure(MeasureErrorNo::kWrongAnswer, "C[1,2] = 0 != 3")
                     : ok_result();
      t.agent = "host-1/gl";
      trials.push_back(t);
    }
    store.add_trials(job, trials);
  }
  std::ostringstream log;
  export_autotvm(store, log);
  write("autotvm_log", "webtune_export", log.str());
  // webtune_export_old_form (kept, not rewritten): the same lines as webtune wrote them before
  // issue 18 ("opengl -keys=webgpu", "dense.gles-frag"), which the import still reads.
  // Real lines written by TVM (TopHub), when the shared directory is there.
  std::string tophub;
  for (const char* file : {"mali_v0.06.log", "opencl_v0.04.log"}) {
    const fs::path path = source / "../shared/tophub" / file;
    if (!fs::exists(path)) continue;
    std::istringstream lines(read_text(path));
    std::string line;
    int taken = 0;
    while (taken < (file[0] == 'm' ? 2 : 1) && std::getline(lines, line))
      if (!line.empty() && line[0] == '{') tophub += line + "\n", ++taken;
  }
  if (!tophub.empty()) write("autotvm_log", "tophub_lines", tophub);
  // A TopHub conv2d line addressed to a webtune target, as a user might edit one.
  write("autotvm_log", "foreign_gles_frag",
        R"({"input": ["opencl -keys=gles-frag -model=gles:llvmpipe", "conv2d_nchw.gles-frag", )"
        R"([["TENSOR", [1, 64, 56, 56], "float32"], ["TENSOR", [64, 64, 3, 3], "float32"], )"
        R"([1, 1], [1, 1, 1, 1], [1, 1], "float32"], {}], "config": {"index": 599486, )"
        R"("code_hash": null, "entity": [["tile_f", "sp", [-1, 1, 16, 1]], ["tile_rc", "sp", )"
        R"([-1, 16]], ["auto_unroll_max_step", "ot", 512]]}, "result": [[3.3e-05], 0, 2.17, )"
        R"(1535942689.12], "version": 0.2, "tvm_version": "0.7.dev0"})"
        "\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_corpus SOURCE_DIR\n";
    return 1;
  }
  try {
    const fs::path source = argv[1];
    g_corpus = source / "fuzz" / "corpus";
    const MeasureInput dense = input_for(Workload::dense(64, 64, 64), Target::kGlesFrag);
    const MeasureInput conv =
        input_for(Workload::conv2d(1, 8, 14, 14, 8, 3, 1, 1), Target::kWebgpu);
    protocol_seeds(dense);
    tracker_frames_seeds();
    workload_seeds(source);
    config_seeds();
    measure_seeds(dense, conv);
    records_seeds(Task::create(Workload::dense(8, 8, 8), Target::kGlesFrag));
    autotvm_seeds(source);
  } catch (const std::exception& e) {
    std::cerr << "fuzz_make_corpus: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
