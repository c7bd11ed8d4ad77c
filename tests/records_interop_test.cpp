/// \file records_interop_test.cpp
/// Records that travel (issue 18, items 1-2): AutoTVM logs checked line by line against the
/// rules of TVM's autotvm/record.py decode() (version 0.2), reimplemented here; the real TopHub
/// logs of tests/data/tophub/ imported with --skip-invalid and --keep-foreign, their counts
/// checked; Kernel Tuner cache files and T4 results, the latter validated against the T4
/// results schema copied in tests/data/t4/.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/task.hpp"
#include "support/run_webtune.hpp"
#include "tuner/autotvm_log.hpp"
#include "tuner/kernel_tuner_export.hpp"
#include "tuner/records.hpp"

namespace webtune {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;

const std::string kData = std::string(WEBTUNE_SOURCE_DIR) + "/tests/data/";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---- TVM's decode rules (python/tvm/autotvm/record.py, AUTOTVM_LOG_VERSION 0.2) -------------

/// A TVM target string as tvm.target.Target(str) parses it: a registered kind, then "-name=value"
/// or "-name" options whose names the kind registers.
struct TvmTarget {
  std::string kind;
  std::map<std::string, std::string> options;
};

/// Options of the kinds TVM registers (src/target/target_kind.cc, TVM 0.9 to today; every kind
/// also takes keys, libs, device, model, tag, host, from_device). "opengl" is TVM 0.6's kind
/// (removed in 0.7), webtune's for the GLES targets: no options of its own.
const std::map<std::string, std::set<std::string>>& tvm_kinds() {
  static const std::map<std::string, std::set<std::string>> kinds{
      {"llvm",
       {"mattr", "mcpu", "mtriple", "mfloat-abi", "mabi", "num-cores", "fast-math", "opt-level",
        "cl-opt", "jit", "vector-width", "system-lib", "runtime", "link-params"}},
      {"c", {"mcpu", "march", "system-lib", "runtime"}},
      {"cuda", {"mcpu", "arch", "max_num_threads", "thread_warp_size", "max_threads_per_block"}},
      {"opencl", {"max_num_threads", "thread_warp_size", "max_threads_per_block"}},
      {"vulkan", {"mattr", "max_num_threads"}},
      {"metal", {"max_num_threads"}},
      {"rocm", {"mcpu", "mtriple", "mattr", "max_num_threads"}},
      {"webgpu", {"max_num_threads", "system-lib"}},
      {"opengl", {}},
  };
  return kinds;
}

/// Throws std::invalid_argument where TVM's Target() would refuse the string.
TvmTarget parse_tvm_target(std::string text) {
  // decode(): '"-target" is deprecated, use "-mtriple" instead'.
  if (const size_t at = text.find("-target"); at != std::string::npos)
    text.replace(at, 7, "-mtriple");
  std::vector<std::string> words;
  std::string word;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == ' ') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  if (quote) throw std::invalid_argument("unterminated quote in '" + text + "'");
  if (!word.empty()) words.push_back(word);
  if (words.empty()) throw std::invalid_argument("empty target string");
  TvmTarget t;
  t.kind = words[0];
  const auto kind = tvm_kinds().find(t.kind);
  if (kind == tvm_kinds().end()) throw std::invalid_argument("unknown target kind " + t.kind);
  static const std::set<std::string> common{"keys", "libs",        "device", "model",
                                            "tag",  "from_device", "host"};
  static const std::regex option(R"(-([A-Za-z][A-Za-z0-9_-]*)(=(.+))?)");
  for (size_t i = 1; i < words.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(words[i], m, option))
      throw std::invalid_argument("not an option: '" + words[i] + "'");
    const std::string name = m[1];
    if (!common.count(name) && !kind->second.count(name))
      throw std::invalid_argument("target kind " + t.kind + " has no option " + name);
    if (t.options.count(name)) throw std::invalid_argument("option " + name + " given twice");
    t.options[name] = m[3].matched ? std::string(m[3]) : "true";
  }
  return t;
}

/// What decode() gives: the input and the result.
struct Decoded {
  TvmTarget target;
  std::string task_name;
  bj::array args;
  bj::object config;
  bj::array result;
};

/// decode(row) for protocol 'json', version 0.2: throws std::invalid_argument where it raises.
Decoded tvm_decode(const std::string& row) {
  const bj::value root = bj::parse(row);  // json.loads
  const bj::object& o = root.as_object();
  if (o.contains("v")) throw std::invalid_argument("a version 0.1 record ('v')");
  Decoded d;
  // tgt, task_name, task_args, task_kwargs = row["input"]
  const bj::array& input = o.at("input").as_array();
  if (input.size() != 4) throw std::invalid_argument("input is not 4 items");
  d.target = parse_tvm_target(std::string(input[0].as_string()));
  d.task_name = std::string(input[1].as_string());
  d.args = input[2].as_array();
  input[3].as_object();
  // ConfigEntity.from_json_dict(row["config"]): index, code_hash, entity knobs by type.
  d.config = o.at("config").as_object();
  d.config.at("index").to_number<int64_t>();
  d.config.at("code_hash");
  for (const bj::value& item : d.config.at("entity").as_array()) {
    const bj::array& knob = item.as_array();
    if (knob.size() != 3) throw std::invalid_argument("knob is not [key, type, args]");
    knob[0].as_string();
    const std::string type(knob[1].as_string());
    if (type == "sp" || type == "re") {
      for (const bj::value& v : knob[2].as_array()) v.to_number<int64_t>();
    } else if (type == "an") {
      for (const bj::value& v : knob[2].as_array()) v.as_string();
    } else if (type == "ot") {
      if (knob[2].is_array() || knob[2].is_object())
        throw std::invalid_argument("an 'ot' value is a scalar");
    } else {
      throw std::invalid_argument("Invalid config knob type: " + type);
    }
  }
  // MeasureResult(*row["result"]): costs, error_no, all_cost, timestamp; then
  // config.cost = np.mean(result.costs).
  d.result = o.at("result").as_array();
  if (d.result.size() != 4) throw std::invalid_argument("result is not 4 items");
  if (d.result[0].as_array().empty()) throw std::invalid_argument("no costs to average");
  for (const bj::value& c : d.result[0].as_array()) c.to_number<double>();
  d.result[1].to_number<int64_t>();
  d.result[2].to_number<double>();
  d.result[3].to_number<double>();
  if (o.at("version").to_number<double>() != 0.2) throw std::invalid_argument("version");
  o.at("tvm_version").as_string();
  return d;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// ---- fixtures ---------------------------------------------------------------------------

class RecordsInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = ::testing::TempDir() + "interop_" + info->name() + ".db";
    remove_db(path_);
  }
  void TearDown() override { remove_db(path_); }
  static void remove_db(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(path + suffix);
  }
  std::string path_;
};

/// The `nth` valid config of `workload` on `target` as a trial with `costs` (empty: failed).
TrialRecord trial_of(const Workload& workload, Target target, size_t nth, std::vector<double> costs,
                     MeasureErrorNo error = MeasureErrorNo::kNoError) {
  const Task task = Task::create(workload, target);
  const ConfigEntity entity = task.space->get(task.space->valid_indices().at(nth));
  TrialRecord t;
  t.config_index = entity.index();
  t.config_json = bj::serialize(entity.to_json());
  if (error == MeasureErrorNo::kNoError)
    t.result.costs = std::move(costs);
  else
    t.result = MeasureResult::failure(error, "failed on purpose");
  t.result.all_cost = 0.5 + 0.01 * static_cast<double>(nth);
  t.result.timestamp = 1764100000.25 + static_cast<double>(nth);
  t.agent = "agent-" + std::to_string(nth);
  return t;
}

/// One job on every target (with a failed and a suspect trial), as the exports see them.
struct FourTargets {
  int64_t conv_webgpu = 0, dense_wasm = 0, dw_frag = 0, dense_compute = 0;
};

FourTargets fill_four_targets(RecordStore& store) {
  FourTargets ids;
  const Workload conv = Workload::conv2d(1, 32, 28, 28, 64, 3, 1, 1, "C1");
  const Workload dense = Workload::dense(4, 96, 64, "M1");
  const Workload dw = Workload::depthwise_conv2d(1, 32, 28, 28, 3, 2, 1, "D1");
  ids.conv_webgpu = store.open_job(conv, Target::kWebgpu, "webgpu:nvidia-rtx:chrome-130:linux");
  store.add_trials(ids.conv_webgpu,
                   {trial_of(conv, Target::kWebgpu, 0, {1e-3, 1.5e-3}),
                    trial_of(conv, Target::kWebgpu, 1, {}, MeasureErrorNo::kCompileDevice),
                    trial_of(conv, Target::kWebgpu, 2, {2e-4})});
  ids.dense_wasm = store.open_job(dense, Target::kWasm, "wasm:threads:firefox-153:linux:8t");
  store.add_trials(ids.dense_wasm, {trial_of(dense, Target::kWasm, 3, {5e-5, 6e-5, 7e-5})});
  ids.dw_frag = store.open_job(dw, Target::kGlesFrag, "gles:llvmpipe");
  store.add_trials(ids.dw_frag, {trial_of(dw, Target::kGlesFrag, 0, {3e-4})});
  ids.dense_compute = store.open_job(dense, Target::kGlesCompute, "gles:llvmpipe");
  store.add_trials(ids.dense_compute,
                   {trial_of(dense, Target::kGlesCompute, 0, {2e-4}),
                    trial_of(dense, Target::kGlesCompute, 1, {}, MeasureErrorNo::kRunTimeout)});
  // The webgpu job's last trial is judged suspect: it leaves as a failure.
  VerificationRecord v;
  v.trial_id = store.trials(ids.conv_webgpu).back().id;
  v.verdict = kSuspect;
  v.message = "too fast";
  store.add_verification(v);
  return ids;
}

// ---- AutoTVM export, checked by TVM's rules ---------------------------------------------

TEST_F(RecordsInteropTest, EveryExportedLineDecodesWithTvmRules) {
  RecordStore store(path_);
  fill_four_targets(store);
  std::ostringstream out;
  ASSERT_EQ(export_autotvm(store, out), 7);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 7u);

  std::vector<Decoded> decoded;
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    try {
      decoded.push_back(tvm_decode(line));
    } catch (const std::exception& e) {
      FAIL() << "TVM's decode would refuse it: " << e.what();
    }
  }
  // Target kinds and options.
  for (size_t i : {0, 1, 2}) {
    EXPECT_EQ(decoded[i].target.kind, "webgpu");
    EXPECT_EQ(decoded[i].target.options.at("keys"), "webgpu");
    EXPECT_EQ(decoded[i].target.options.at("model"), "webgpu:nvidia-rtx:chrome-130:linux");
    EXPECT_EQ(decoded[i].task_name, "conv2d_nchw.webgpu");
  }
  EXPECT_EQ(decoded[3].target.kind, "llvm");
  EXPECT_EQ(decoded[3].target.options.at("mtriple"), "wasm32-unknown-unknown-wasm");
  EXPECT_EQ(decoded[3].target.options.at("mattr"), "+simd128");
  EXPECT_EQ(decoded[3].target.options.at("keys"), "wasm");
  EXPECT_EQ(decoded[3].target.options.at("model"), "wasm:threads:firefox-153:linux:8t");
  EXPECT_EQ(decoded[3].task_name, "dense.wasm");
  EXPECT_EQ(decoded[4].target.kind, "opengl");
  EXPECT_EQ(decoded[4].target.options.at("keys"), "gles-frag");
  EXPECT_EQ(decoded[4].task_name, "depthwise_conv2d_nchw.gles_frag");
  EXPECT_EQ(decoded[5].target.kind, "opengl");
  EXPECT_EQ(decoded[5].target.options.at("keys"), "gles-compute");
  EXPECT_EQ(decoded[5].task_name, "dense.gles_compute");

  // TVM's topi argument conventions: dense weight [N,K]; conv weight [K,C,R,S].
  EXPECT_EQ(decoded[3].args, bj::parse(R"([["TENSOR",[4,64],"float32"],)"
                                       R"(["TENSOR",[96,64],"float32"],null,"float32"])"));
  EXPECT_EQ(decoded[0].args, bj::parse(R"([["TENSOR",[1,32,28,28],"float32"],)"
                                       R"(["TENSOR",[64,32,3,3],"float32"],[1,1],[1,1,1,1],)"
                                       R"([1,1],"float32"])"));
  EXPECT_EQ(decoded[4].args[1], bj::parse(R"(["TENSOR",[32,1,3,3],"float32"])"));

  // Results: costs of a success, AutoTVM's [1e9] for failures (the suspect one included).
  EXPECT_EQ(decoded[0].result[0], (bj::array{1e-3, 1.5e-3}));
  EXPECT_EQ(decoded[0].result[1].to_number<int>(), 0);
  EXPECT_EQ(decoded[1].result[0], bj::array{1e9});
  EXPECT_EQ(decoded[1].result[1].to_number<int>(), 3);  // COMPILE_DEVICE
  EXPECT_EQ(decoded[2].result[0], bj::array{1e9});
  EXPECT_EQ(decoded[2].result[1].to_number<int>(), 8);  // suspect: UNKNOWN_ERROR
  EXPECT_EQ(decoded[6].result[1].to_number<int>(), 7);  // RUN_TIMEOUT

  // A split's outermost factor is written −1, as AutoTVM writes it.
  bool any_split = false;
  for (const Decoded& d : decoded)
    for (const bj::value& knob : d.config.at("entity").as_array())
      if (knob.as_array()[1].as_string() == "sp") {
        any_split = true;
        EXPECT_EQ(knob.as_array()[2].as_array()[0].to_number<int64_t>(), -1);
      }
  EXPECT_TRUE(any_split);
}

TEST_F(RecordsInteropTest, TheDecoderRefusesWhatTvmRefuses) {
  // The checker itself must be able to fail: each of these is a line TVM's decode() rejects.
  RecordStore store(path_);
  fill_four_targets(store);
  std::ostringstream out;
  export_autotvm(store, out);
  const std::string good = lines_of(out.str()).at(0);
  EXPECT_NO_THROW(tvm_decode(good));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_ANY_THROW(tvm_decode(with("\"webgpu -keys", "\"gles -keys")));
  EXPECT_THROW(tvm_decode(with("-keys=webgpu", "-keys=webgpu -mtriple=x")),
               std::invalid_argument);  // webgpu has no mtriple
  EXPECT_ANY_THROW(tvm_decode(with("\"sp\"", "\"xx\"")));
  EXPECT_ANY_THROW(tvm_decode(with("\"code_hash\": null, ", "")));
  EXPECT_ANY_THROW(tvm_decode(with("\"float32\"], {}]", "\"float32\"]]")));
}

TEST_F(RecordsInteropTest, ExportRoundTripsAndOldFormsStillImport) {
  std::string log;
  std::vector<std::vector<TrialRecord>> source_trials;
  {
    RecordStore store(path_);
    fill_four_targets(store);
    std::ostringstream out;
    export_autotvm(store, out);
    log = out.str();
    for (const TuningJobInfo& job : store.jobs()) source_trials.push_back(store.trials(job.id));
  }
  RecordStore copy(":memory:");
  std::istringstream in(log);
  EXPECT_EQ(import_autotvm(copy, in, ""), 7);
  const std::vector<TuningJobInfo> jobs = copy.jobs();
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].target, Target::kWebgpu);
  EXPECT_EQ(jobs[0].device_key, "webgpu:nvidia-rtx:chrome-130:linux");
  EXPECT_EQ(jobs[1].target, Target::kWasm);
  EXPECT_EQ(jobs[1].workload.key(), Workload::dense(4, 96, 64).key());
  EXPECT_EQ(jobs[2].target, Target::kGlesFrag);
  EXPECT_EQ(jobs[3].target, Target::kGlesCompute);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const std::vector<TrialRecord> trials = copy.trials(jobs[j].id);
    ASSERT_EQ(trials.size(), source_trials[j].size());
    for (size_t t = 0; t < trials.size(); ++t) {
      EXPECT_EQ(trials[t].config_json, source_trials[j][t].config_json);
      EXPECT_EQ(trials[t].result.timestamp, source_trials[j][t].result.timestamp);
    }
  }

  // The form webtune wrote before issue 18: "opengl -keys=<target>" for every target, task
  // "<op>.<webtune target>", dense weight [K,N].
  std::string old = log;
  auto replace_all = [&old](const std::string& from, const std::string& to) {
    for (size_t at = 0; (at = old.find(from, at)) != std::string::npos; at += to.size())
      old.replace(at, from.size(), to);
  };
  replace_all("\"webgpu -keys=webgpu", "\"opengl -keys=webgpu");
  replace_all("llvm -keys=wasm -mtriple=wasm32-unknown-unknown-wasm -mattr=+simd128",
              "opengl -keys=wasm");
  replace_all("conv2d_nchw.webgpu", "conv2d_nchw.webgpu");
  replace_all("dense.gles_compute", "dense.gles-compute");
  replace_all("depthwise_conv2d_nchw.gles_frag", "depthwise_conv2d_nchw.gles-frag");
  replace_all("[\"TENSOR\", [96, 64], \"float32\"]", "[\"TENSOR\", [64, 96], \"float32\"]");
  ASSERT_EQ(old.find("llvm -keys"), std::string::npos);
  ASSERT_EQ(old.find("[96, 64]"), std::string::npos);
  RecordStore old_copy(":memory:");
  std::istringstream old_in(old);
  EXPECT_EQ(import_autotvm(old_copy, old_in, ""), 7);
  const std::vector<TuningJobInfo> old_jobs = old_copy.jobs();
  ASSERT_EQ(old_jobs.size(), 4u);
  for (size_t j = 0; j < jobs.size(); ++j) {
    EXPECT_EQ(old_jobs[j].workload.key(), jobs[j].workload.key());
    EXPECT_EQ(old_jobs[j].target, jobs[j].target);
    EXPECT_EQ(old_jobs[j].trials, jobs[j].trials);
  }
}

TEST_F(RecordsInteropTest, ADeviceKeyWithASpaceIsQuotedAndReadBack) {
  EXPECT_EQ(tvm_target_string(Target::kWebgpu, "my lab gpu"),
            "webgpu -keys=webgpu -model='my lab gpu'");
  EXPECT_EQ(parse_tvm_target(tvm_target_string(Target::kWebgpu, "my lab gpu")).options.at("model"),
            "my lab gpu");
  EXPECT_EQ(tvm_target_string(Target::kGlesFrag, ""), "opengl -keys=gles-frag");
  EXPECT_EQ(tvm_task_name(OpKind::kDepthwiseConv2d, Target::kGlesCompute),
            "depthwise_conv2d_nchw.gles_compute");
  RecordStore store(":memory:");
  const Workload dense = Workload::dense(4, 96, 64);
  store.open_job(dense, Target::kWebgpu, "my lab gpu");
  store.add_trials(store.jobs()[0].id, {trial_of(dense, Target::kWebgpu, 0, {1e-4})});
  std::ostringstream out;
  export_autotvm(store, out);
  RecordStore copy(":memory:");
  std::istringstream in(out.str());
  EXPECT_EQ(import_autotvm(copy, in, ""), 1);
  EXPECT_EQ(copy.jobs().at(0).device_key, "my lab gpu");
}

// ---- TopHub's real logs ------------------------------------------------------------------

AutoTvmImportReport import_file(RecordStore& store, const std::string& name, bool skip_invalid,
                                bool keep_foreign) {
  std::ifstream in(kData + "tophub/" + name);
  EXPECT_TRUE(in) << "missing " << kData << "tophub/" << name;
  AutoTvmImportOptions options;
  options.skip_invalid = skip_invalid;
  options.keep_foreign = keep_foreign;
  options.source = name;
  return import_autotvm(store, in, options);
}

using Counts = std::map<std::string, int64_t>;

TEST_F(RecordsInteropTest, TopHubLogsAreRefusedAtTheirFirstRecordAndCountedWhenSkipped) {
  RecordStore store(path_);
  // Strict: the two '#' lines are comments, line 3 is the first record, of another target.
  for (const char* name : {"mali_v0.06.log", "opencl_v0.04.log"}) {
    SCOPED_TRACE(name);
    try {
      import_file(store, name, false, false);
      ADD_FAILURE() << "imported " << name;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("AutoTVM log line 3: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not one of webtune's targets"), std::string::npos)
          << e.what();
    }
  }
  const AutoTvmImportReport mali = import_file(store, "mali_v0.06.log", true, false);
  EXPECT_EQ(mali.lines, 528);
  EXPECT_EQ(mali.imported, 0);
  EXPECT_EQ(mali.skipped, (Counts{{"foreign target 'mali'", 528}}));
  const AutoTvmImportReport cuda = import_file(store, "opencl_v0.04.log", true, false);
  EXPECT_EQ(cuda.lines, 97);
  EXPECT_EQ(cuda.skipped, (Counts{{"foreign target 'cuda'", 97}}));
  EXPECT_EQ(cuda.foreign, 0);
  EXPECT_TRUE(store.jobs().empty());
  EXPECT_EQ(store.foreign_record_count(), 0);
}

TEST_F(RecordsInteropTest, TopHubLogsAreKeptAsForeignHistoryMatchedByWorkload) {
  {
    RecordStore store(path_);
    const AutoTvmImportReport mali = import_file(store, "mali_v0.06.log", false, true);
    EXPECT_EQ(mali.foreign, 528);
    EXPECT_EQ(mali.foreign_new, 528);
    EXPECT_TRUE(mali.skipped.empty());
    const AutoTvmImportReport cuda = import_file(store, "opencl_v0.04.log", true, true);
    EXPECT_EQ(cuda.foreign_new, 97);
    EXPECT_TRUE(cuda.skipped.empty());
    EXPECT_EQ(store.foreign_record_count(), 625);
    EXPECT_TRUE(store.jobs().empty());  // read-only history: no webtune job
  }
  RecordStore store(path_);  // kept on disk
  // Importing again stores nothing twice.
  EXPECT_EQ(import_file(store, "mali_v0.06.log", false, true).foreign_new, 0);
  EXPECT_EQ(store.foreign_record_count(), 625);

  // Mali's dense 1x1024 -> 1000 (weight [N,K] = [1000,1024]): 4 records, 2 of them float16
  // (webtune's workloads are float32: those match none).
  const std::vector<ForeignRecord> dense =
      store.foreign_trials(Workload::dense(1, 1000, 1024, "fc"));
  ASSERT_EQ(dense.size(), 2u);
  for (const ForeignRecord& r : dense) {
    EXPECT_EQ(r.task_name, "dense.mali");
    EXPECT_EQ(r.foreign_target, "mali");
    EXPECT_EQ(r.target, "opencl -model=rk3399 -device=mali");
    EXPECT_EQ(r.source, "mali_v0.06.log");
    EXPECT_EQ(r.result.error, MeasureErrorNo::kNoError);
    ASSERT_EQ(r.result.costs.size(), 1u);
    EXPECT_GT(r.result.costs[0], 0);
    EXPECT_EQ(bj::parse(r.entity_json).as_array().at(0).as_array().at(0).as_string(), "tile_y");
  }
  EXPECT_EQ(dense[0].config_index, 407);  // mali_v0.06.log line 3
  EXPECT_DOUBLE_EQ(dense[0].result.costs[0], 0.0008410332727272727);
  EXPECT_EQ(bj::parse(dense[0].line).as_object().at("input").as_array()[1].as_string(),
            "dense.mali");
  // A fused workload matches its anchor op (TVM's tasks have no epilogue).
  Workload fused = Workload::dense(1, 1000, 1024);
  fused.epilogue.bias = true;
  EXPECT_EQ(store.foreign_trials(fused).size(), 2u);
  // Mali's depthwise 960 channels 7x7 3x3 s1 p1: 1 record (and a float16 one that matches not).
  EXPECT_EQ(store.foreign_trials(Workload::depthwise_conv2d(1, 960, 7, 7, 3, 1, 1)).size(), 1u);
  // The conv2d 2048 -> 192 1x1 on 8x8 was tuned for both: Mali's spatial-pack template and
  // CUDA's (through OpenCL on a 1080 Ti), each its own foreign target.
  const std::vector<ForeignRecord> conv =
      store.foreign_trials(Workload::conv2d(1, 2048, 8, 8, 192, 1, 1, 0));
  ASSERT_EQ(conv.size(), 2u);
  EXPECT_EQ(conv[0].task_name, "conv2d_nchw_spatial_pack.mali");
  EXPECT_EQ(conv[0].foreign_target, "mali");
  EXPECT_EQ(conv[1].task_name, "conv2d_nchw.cuda");
  EXPECT_EQ(conv[1].foreign_target, "cuda");
  EXPECT_EQ(conv[1].target, "opencl -model=1080ti");
  EXPECT_EQ(conv[1].config_index, 599486);
  EXPECT_EQ(conv[1].source, "opencl_v0.04.log");
  EXPECT_TRUE(store.foreign_trials(Workload::dense(1, 1000, 1023)).empty());
}

TEST_F(RecordsInteropTest, SkipInvalidCountsEveryReasonAndImportsTheRest) {
  std::string good;
  {
    RecordStore source(":memory:");
    fill_four_targets(source);
    std::ostringstream out;
    export_autotvm(source, out);
    good = lines_of(out.str()).at(3);  // the wasm dense line
  }
  auto replaced = [](std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::string tophub = lines_of(read_text(kData + "tophub/opencl_v0.04.log")).at(2);
  // The first knob renamed in both entities, AutoTVM's and webtune's exact one.
  std::string unknown_knob = good;
  const std::string entity = "\"entity\": [[\"";
  for (size_t at = unknown_knob.find(entity); at != std::string::npos;
       at = unknown_knob.find(entity, at + 1))
    unknown_knob.insert(at + entity.size(), "x");
  ASSERT_EQ(unknown_knob.size(), good.size() + 2);
  const std::string log = "# a comment\n" + good + "\n" + "{not json\n" + tophub + "\n" +
                          replaced(good, "dense.wasm", "softmax.wasm") + "\n" +  // unsupported op
                          replaced(good, "\"result\"", "\"resolt\"") + "\n" +    // malformed
                          replaced(good, "dense.wasm", "dense.gles_frag") + "\n" +  // keys disagree
                          unknown_knob + "\n" +                                     // unknown knob
                          std::string(size_t{5} << 20, ' ') + "{}\n" +              // over 4 MiB
                          "\n";
  RecordStore store(path_);
  std::istringstream in(log);
  AutoTvmImportOptions options;
  options.skip_invalid = true;
  const AutoTvmImportReport report = import_autotvm(store, in, options);
  EXPECT_EQ(report.lines, 8);
  EXPECT_EQ(report.imported, 1);
  EXPECT_EQ(report.skipped, (Counts{{"not JSON", 1},
                                    {"foreign target 'cuda'", 1},
                                    {"unsupported workload", 1},
                                    {"malformed record", 1},
                                    {"-keys= and task name disagree", 1},
                                    {"config outside its template's space", 1},
                                    {"line too long", 1}}));
  EXPECT_EQ(report.skipped_total(), 7);
  ASSERT_EQ(store.jobs().size(), 1u);
  EXPECT_EQ(store.jobs()[0].target, Target::kWasm);

  // Without --skip-invalid the first bad line (line 3) stops it, and nothing is imported.
  RecordStore strict(":memory:");
  std::istringstream again(log);
  try {
    import_autotvm(strict, again, "");
    ADD_FAILURE() << "imported a log with bad lines";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 3: not JSON"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(strict.jobs().empty());
}

TEST_F(RecordsInteropTest, AStoreOfSchemaVersion4GainsTheForeignTable) {
  {
    RecordStore store(path_);
    store.open_job(Workload::dense(4, 96, 64), Target::kWasm, "wasm:x");
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE foreign_records; PRAGMA user_version = 4;", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  RecordStore store(path_);
  EXPECT_EQ(store.jobs().size(), 1u);
  EXPECT_EQ(store.foreign_record_count(), 0);
  EXPECT_EQ(import_file(store, "opencl_v0.04.log", false, true).foreign_new, 97);
}

// ---- Kernel Tuner and T4 -----------------------------------------------------------------

/// Kernel Tuner's read_cache(): a file is closed when it ends (stripped) in "}\n}" or "}}}";
/// otherwise it appends "}\n}", which would break a complete file.
bool kernel_tuner_sees_closed(const std::string& text) {
  const size_t end = text.find_last_not_of(" \n\t\r");
  const std::string tail = text.substr(end - 2, 3);
  return tail == "}\n}" || tail == "}}}";
}

TEST_F(RecordsInteropTest, KernelTunerCacheHoldsEveryTrialWithItsTimes) {
  RecordStore store(path_);
  const FourTargets ids = fill_four_targets(store);
  const TuningJobInfo job = *store.job(ids.conv_webgpu);
  const std::vector<TrialRecord> trials = store.trials(job.id);
  std::ostringstream out;
  ASSERT_EQ(export_kernel_tuner_cache(store, job.id, out), 3);
  const std::string text = out.str();
  EXPECT_TRUE(kernel_tuner_sees_closed(text)) << text.substr(text.size() - 20);
  const bj::object cache = bj::parse(text).as_object();

  EXPECT_EQ(cache.at("device_name").as_string(), "webgpu:nvidia-rtx:chrome-130:linux");
  EXPECT_EQ(cache.at("kernel_name").as_string(), "conv2d_nchw.webgpu");
  EXPECT_EQ(cache.at("objective").as_string(), "time");
  EXPECT_EQ(cache.at("problem_size"), (bj::array{28, 28, 64}));  // OW, OH, N·K
  // Parameters: the space's knobs, splits flattened one per factor.
  const Task task = Task::create(job.workload, job.target);
  std::vector<std::string> expected_names;
  for (const Knob& knob : task.space->knobs()) {
    if (knob.kind != Knob::Kind::kSplit) {
      expected_names.push_back(knob.name);
      continue;
    }
    const size_t n = std::get<std::vector<int64_t>>(knob.candidates.at(0)).size();
    for (size_t i = 0; i < n; ++i) expected_names.push_back(knob.name + "_" + std::to_string(i));
  }
  ASSERT_GT(expected_names.size(), task.space->knobs().size()) << "no split knob";
  std::vector<std::string> names;
  for (const bj::value& v : cache.at("tune_params_keys").as_array())
    names.emplace_back(v.as_string());
  EXPECT_EQ(names, expected_names);
  EXPECT_EQ(names, kernel_tuner_param_names(*task.space));
  const bj::object& params = cache.at("tune_params").as_object();
  EXPECT_EQ(params.size(), names.size());

  const bj::object& entries = cache.at("cache").as_object();
  ASSERT_EQ(entries.size(), 3u);
  size_t t = 0;
  for (const auto& [key, value] : entries) {
    SCOPED_TRACE(std::string(key));
    const bj::object& e = value.as_object();
    const TrialRecord& trial = trials.at(t++);
    // The key is the values in tune_params_keys order, joined by ','.
    std::string joined;
    for (size_t i = 0; i < names.size(); ++i) {
      const bj::value& v = e.at(names[i]);
      joined += (i ? "," : "") + (v.is_string() ? std::string(v.as_string()) : bj::serialize(v));
      // Every value is one of its parameter's listed values.
      const bj::array& allowed = params.at(names[i]).as_array();
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), v), allowed.end()) << names[i];
    }
    EXPECT_EQ(std::string(key), joined);
    // The split factors are the entity's.
    const ConfigEntity entity =
        config_in_space(*task.space, job.workload, job.target, trial.config_json, false);
    for (const Knob& knob : task.space->knobs())
      if (knob.kind == Knob::Kind::kSplit) {
        const std::vector<int64_t>& f = entity.split(knob.name);
        for (size_t i = 0; i < f.size(); ++i)
          EXPECT_EQ(e.at(knob.name + "_" + std::to_string(i)).to_number<int64_t>(), f[i]);
      }
    EXPECT_DOUBLE_EQ(e.at("benchmark_time").to_number<double>(), trial.result.all_cost * 1e3);
    for (const char* k : {"compile_time", "verification_time", "strategy_time", "framework_time"})
      EXPECT_EQ(e.at(k).to_number<double>(), 0) << k;
    EXPECT_EQ(e.at("timestamp").as_string().size(), 32u);
  }
  const bj::object& ok = entries.begin()->value().as_object();
  EXPECT_DOUBLE_EQ(ok.at("time").to_number<double>(), 1.25);  // mean of 1 and 1.5 ms
  EXPECT_EQ(ok.at("times"), (bj::array{1.0, 1.5}));
  EXPECT_FALSE(ok.contains("__error__"));
  EXPECT_DOUBLE_EQ(ok.at("GFLOP/s").to_number<double>(), trials[0].gflops);
  EXPECT_EQ(ok.at("timestamp").as_string(), "2025-11-25 19:46:40.250000+00:00");
  const bj::object& compile = (entries.begin() + 1)->value().as_object();
  EXPECT_EQ(compile.at("__error__").as_string(), "CompilationFailedConfig");
  EXPECT_EQ(compile.at("time").as_string(), "CompilationFailedConfig");
  EXPECT_FALSE(compile.contains("times"));
  const bj::object& suspect = (entries.begin() + 2)->value().as_object();
  EXPECT_EQ(suspect.at("__error__").as_string(), "RuntimeFailedConfig");

  // String knobs and a timeout on another job.
  std::ostringstream compute_out;
  ASSERT_EQ(export_kernel_tuner_cache(store, ids.dense_compute, compute_out), 2);
  const bj::object compute = bj::parse(compute_out.str()).as_object();
  EXPECT_EQ(compute.at("problem_size"), (bj::array{96, 4}));  // N, M
  EXPECT_EQ((compute.at("cache").as_object().begin() + 1)->value().at("__error__").as_string(),
            "RuntimeFailedConfig");

  std::ostringstream none;
  EXPECT_THROW(export_kernel_tuner_cache(store, 999, none), std::runtime_error);
}

// A small JSON Schema checker: the keywords the T4 results schema uses (type, properties,
// required, items, enum, const, pattern).
void validate_schema(const bj::value& v, const bj::object& schema, const std::string& where,
                     std::vector<std::string>& errors) {
  auto type_ok = [&v](std::string_view type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "number") return v.is_number();
    if (type == "integer") return v.is_int64() || v.is_uint64();
    if (type == "boolean") return v.is_bool();
    if (type == "null") return v.is_null();
    return false;
  };
  if (const bj::value* type = schema.if_contains("type")) {
    bool ok = false;
    if (type->is_string())
      ok = type_ok(type->as_string());
    else
      for (const bj::value& t : type->as_array()) ok = ok || type_ok(t.as_string());
    if (!ok) errors.push_back(where + ": not of type " + bj::serialize(*type));
  }
  if (const bj::value* e = schema.if_contains("enum")) {
    const bj::array& options = e->as_array();
    if (std::find(options.begin(), options.end(), v) == options.end())
      errors.push_back(where + ": " + bj::serialize(v) + " not in enum");
  }
  if (const bj::value* c = schema.if_contains("const"); c && *c != v)
    errors.push_back(where + ": not the const " + bj::serialize(*c));
  if (const bj::value* p = schema.if_contains("pattern"); p && v.is_string())
    if (!std::regex_search(std::string(v.as_string()), std::regex(std::string(p->as_string()))))
      errors.push_back(where + ": does not match " + std::string(p->as_string()));
  if (v.is_object()) {
    if (const bj::value* required = schema.if_contains("required"))
      for (const bj::value& name : required->as_array())
        if (!v.as_object().contains(name.as_string()))
          errors.push_back(where + ": lacks required '" + std::string(name.as_string()) + "'");
    if (const bj::value* props = schema.if_contains("properties"))
      for (const auto& [name, sub] : props->as_object())
        if (const bj::value* child = v.as_object().if_contains(name))
          validate_schema(*child, sub.as_object(), where + "." + std::string(name), errors);
  }
  if (v.is_array())
    if (const bj::value* items = schema.if_contains("items"))
      for (size_t i = 0; i < v.as_array().size(); ++i)
        validate_schema(v.as_array()[i], items->as_object(), where + "[" + std::to_string(i) + "]",
                        errors);
}

TEST_F(RecordsInteropTest, T4ResultsFollowTheSchemaAndTheRecords) {
  const bj::object schema = bj::parse(read_text(kData + "t4/results-schema.json")).as_object();
  // The checker fails where it should.
  {
    std::vector<std::string> errors;
    validate_schema(bj::parse(R"({"schema_version":"x","results":[{"configuration":{},)"
                              R"("times":{},"invalidity":"nope"}]})"),
                    schema, "$", errors);
    EXPECT_EQ(errors.size(), 3u);  // pattern, enum, required correctness
  }

  RecordStore store(path_);
  const FourTargets ids = fill_four_targets(store);
  for (int64_t job : {ids.conv_webgpu, ids.dense_wasm, ids.dw_frag, ids.dense_compute}) {
    SCOPED_TRACE("job " + std::to_string(job));
    const std::vector<TrialRecord> trials = store.trials(job);
    std::ostringstream out;
    ASSERT_EQ(export_t4_results(store, job, out), static_cast<int64_t>(trials.size()));
    const bj::value root = bj::parse(out.str());
    std::vector<std::string> errors;
    validate_schema(root, schema, "$", errors);
    EXPECT_TRUE(errors.empty()) << errors.front();
    const bj::array& results = root.at("results").as_array();
    ASSERT_EQ(results.size(), trials.size());
    EXPECT_EQ(root.at("metadata").at("timeunit").as_string(), "milliseconds");
    for (size_t i = 0; i < trials.size(); ++i) {
      const bj::object& r = results[i].as_object();
      EXPECT_EQ(r.at("objectives"), bj::array{"time"});
      const bj::array& runtimes = r.at("times").at("runtimes").as_array();
      const bool failed = !trials[i].result.ok() || trials[i].verdict == kSuspect;
      if (failed) {
        EXPECT_TRUE(runtimes.empty());
        EXPECT_TRUE(r.at("measurements").as_array().empty());
        EXPECT_NE(r.at("invalidity").as_string(), "correct");
        continue;
      }
      EXPECT_EQ(r.at("invalidity").as_string(), "correct");
      ASSERT_EQ(runtimes.size(), trials[i].result.costs.size());
      for (size_t c = 0; c < runtimes.size(); ++c)
        EXPECT_DOUBLE_EQ(runtimes[c].to_number<double>(), trials[i].result.costs[c] * 1e3);
      const bj::object& time = r.at("measurements").as_array().at(0).as_object();
      EXPECT_EQ(time.at("name").as_string(), "time");
      EXPECT_EQ(time.at("unit").as_string(), "ms");
      EXPECT_DOUBLE_EQ(time.at("value").to_number<double>(), trials[i].result.mean_cost() * 1e3);
    }
  }
  // The invalidity of each failure kind.
  std::ostringstream out;
  export_t4_results(store, ids.conv_webgpu, out);
  const bj::array results = bj::parse(out.str()).at("results").as_array();
  EXPECT_EQ(results[1].at("invalidity").as_string(), "compile");
  EXPECT_EQ(results[2].at("invalidity").as_string(), "runtime");  // suspect
  std::ostringstream timeout;
  export_t4_results(store, ids.dense_compute, timeout);
  EXPECT_EQ(bj::parse(timeout.str()).at("results").as_array()[1].at("invalidity").as_string(),
            "timeout");
}

// ---- the CLI -------------------------------------------------------------------------------

using testing_support::run_webtune;
using testing_support::WebtuneRun;

TEST_F(RecordsInteropTest, CliImportReportsSkipsByReasonAndKeepsForeign) {
  const std::string log = kData + "tophub/opencl_v0.04.log";
  WebtuneRun run = run_webtune({"log", "import", "--db", path_, "--in", log});
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.err.find("line 3"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(path_));  // a refused import leaves no new database behind

  run = run_webtune({"log", "import", "--db", path_, "--in", log, "--skip-invalid"});
  ASSERT_EQ(run.status, 0) << run.describe();
  EXPECT_NE(run.err.find("skipped 97 of 97 lines:\n  foreign target 'cuda': 97\n"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.out, "imported 0 trials into " + path_ + "\n");

  run = run_webtune({"log", "import", "--db", path_, "--in", log, "--keep-foreign"});
  ASSERT_EQ(run.status, 0) << run.describe();
  EXPECT_NE(run.out.find("kept 97 foreign records (97 new)"), std::string::npos) << run.out;
  EXPECT_EQ(RecordStore(path_).foreign_record_count(), 97);
}

TEST_F(RecordsInteropTest, CliExportsKernelTunerAndT4OfOneJob) {
  int64_t job = 0;
  {
    RecordStore store(path_);
    job = fill_four_targets(store).dense_wasm;
  }
  const std::string id = std::to_string(job);
  WebtuneRun run =
      run_webtune({"log", "export", "--db", path_, "--format", "kerneltuner", "--job", id});
  ASSERT_EQ(run.status, 0) << run.describe();
  const bj::value cache = bj::parse(run.out);
  EXPECT_EQ(cache.at("kernel_name").as_string(), "dense.wasm");
  EXPECT_EQ(cache.at("cache").as_object().size(), 1u);
  EXPECT_NE(run.err.find("Kernel Tuner cache file"), std::string::npos) << run.err;

  run = run_webtune({"log", "export", "--db", path_, "--format", "t4", "--job", id});
  ASSERT_EQ(run.status, 0) << run.describe();
  EXPECT_EQ(bj::parse(run.out).at("results").as_array().size(), 1u);

  run = run_webtune({"log", "export", "--db", path_, "--format", "t4"});
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.err.find("--job"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty());
}

}  // namespace
}  // namespace webtune
