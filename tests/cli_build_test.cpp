/// \file cli_build_test.cpp
/// `webtune build` through the real binary (a child process, tests/support/run_webtune.hpp): a
/// zoo ResNet-18 package for gles-compute with no records (the report on stdout, the same as
/// report.txt, says every task took its default config; the manifest reads back); errors exit 2
/// with the reason on stderr and nothing on stdout: an unknown target, a missing records file,
/// an output folder that holds something else (left as it was); a records file is read, never
/// written (an older schema is migrated in memory, the file keeps every byte).

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "deploy/package.hpp"
#include "graph/zoo.hpp"
#include "support/run_webtune.hpp"
#include "tuner/records.hpp"

namespace fs = std::filesystem;
using webtune::testing_support::read_file_text;
using webtune::testing_support::run_webtune;
using webtune::testing_support::WebtuneRun;

namespace {

class CliBuild : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("webtune_cli_build_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
    model_ = (dir_ / "resnet18.onnx").string();
    const std::string bytes = webtune::graph::zoo_model("resnet18");
    std::ofstream(model_, std::ios::binary).write(bytes.data(), bytes.size());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string model_;
};

TEST_F(CliBuild, WritesAPackageAndPrintsItsReport) {
  const std::string out = (dir_ / "package").string();
  const WebtuneRun run =
      run_webtune({"build", "--model", model_, "--target", "gles-compute", "-o", out});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  for (const char* text : {"tasks: 16 (0 from a record", "16 default", "layout transforms: 0",
                           "no records database", "estimated_ms: null"})
    EXPECT_NE(run.out.find(text), std::string::npos) << "stdout lacks " << text << "\n" << run.out;
  EXPECT_EQ(run.out, read_file_text((fs::path(out) / "report.txt").string()));
  const webtune::deploy::Manifest m = webtune::deploy::read_manifest(out);
  EXPECT_EQ(m.target, "gles-compute");
  EXPECT_EQ(m.tasks.size(), 16u);
  EXPECT_EQ(m.model.file, "resnet18.onnx");
  EXPECT_TRUE(fs::exists(fs::path(out) / "weights.bin"));
  EXPECT_TRUE(fs::exists(fs::path(out) / "kernels" / "000.json"));
}

TEST_F(CliBuild, ErrorsExitTwoWithTheReason) {
  const std::string out = (dir_ / "package").string();
  WebtuneRun run = run_webtune({"build", "--model", model_, "--target", "cuda", "-o", out});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("webgl2"), std::string::npos) << run.describe();
  EXPECT_EQ(run.out, "");
  EXPECT_FALSE(fs::exists(out));

  run = run_webtune({"build", "--model", model_, "--target", "wasm", "--db",
                     (dir_ / "none.db").string(), "-o", out});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("no records database"), std::string::npos) << run.describe();
  EXPECT_FALSE(fs::exists(dir_ / "none.db"));  // not created by opening it

  fs::create_directories(dir_ / "mine");
  std::ofstream(dir_ / "mine" / "notes.txt") << "keep";
  run = run_webtune(
      {"build", "--model", model_, "--target", "webgl2", "-o", (dir_ / "mine").string()});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("refusing"), std::string::npos) << run.describe();
  EXPECT_EQ(read_file_text((dir_ / "mine" / "notes.txt").string()), "keep");
  EXPECT_FALSE(fs::exists(dir_ / "mine" / "manifest.json"));
}

TEST_F(CliBuild, InputWritesTheSeededInputFileOfTheModel) {
  const std::string a = (dir_ / "a.f32").string(), b = (dir_ / "b.f32").string(),
                    c = (dir_ / "c.f32").string(), d = (dir_ / "d.f32").string();
  auto floats_of = [](const std::string& path) {
    const std::string bytes = read_file_text(path);
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
  };
  WebtuneRun run = run_webtune({"input", "--model", model_, "-o", a, "--seed", "7"});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  EXPECT_EQ(run.out, "");  // data goes to the file, what was written to stderr
  EXPECT_NE(run.err.find("[1x3x224x224]: 150528 float32 values (602112 bytes), seed 7"),
            std::string::npos)
      << run.err;
  const std::vector<float> first = floats_of(a);
  ASSERT_EQ(first.size(), 150528u);
  for (float v : first) ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  run = run_webtune({"input", "--model", model_, "-o", b, "--seed", "7"});
  ASSERT_EQ(run.status, 0) << run.describe();
  EXPECT_EQ(floats_of(b), first);  // the same seed, the same bytes
  run = run_webtune({"input", "--model", model_, "-o", c, "--seed", "8", "--range", "-2,2"});
  ASSERT_EQ(run.status, 0) << run.describe();
  const std::vector<float> other = floats_of(c);
  EXPECT_NE(other, first);
  float lo = 0, hi = 0;
  for (float v : other) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, -1.9f);
  EXPECT_GT(hi, 1.9f);
  EXPECT_GE(lo, -2.0f);
  EXPECT_LT(hi, 2.0f);
  // Refusals: a bad range (usage, 2) and an input the model lacks (2), nothing written.
  run = run_webtune({"input", "--model", model_, "-o", d, "--range", "1,0"});
  EXPECT_EQ(run.status, 2) << run.describe();
  run = run_webtune({"input", "--model", model_, "-o", d, "--input-name", "nope"});
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("no float32 input 'nope'"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(d));
}

TEST_F(CliBuild, ReadsTheRecordsWithoutWritingThem) {
  const std::string db = (dir_ / "old.db").string();
  { webtune::RecordStore store(db); }
  // What an older webtune left: schema version 3, no WAL (a copy of a checkpointed file).
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(handle,
                         "DROP TABLE model_measurements; PRAGMA user_version = 3; "
                         "PRAGMA journal_mode = DELETE;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(handle);
  sqlite3_close(handle);
  const std::string before = read_file_text(db);

  const std::string out = (dir_ / "package").string();
  const WebtuneRun run =
      run_webtune({"build", "--model", model_, "--target", "wasm", "--db", db, "-o", out});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  EXPECT_NE(run.out.find("records: " + db), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("16 default"), std::string::npos) << run.out;
  // Most tasks untuned: said loudly on stderr, with the command that tunes this target.
  EXPECT_NE(run.err.find("16 of 16 tasks have no tuning record for target wasm in " + db),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("webtune tune --model " + model_ + " --target wasm --db " + db),
            std::string::npos)
      << run.err;
  EXPECT_EQ(read_file_text(db), before) << "webtune build changed the records file";
  EXPECT_FALSE(fs::exists(db + "-wal"));
}

}  // namespace
