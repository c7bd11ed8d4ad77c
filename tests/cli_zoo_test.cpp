/// \file cli_zoo_test.cpp
/// `webtune zoo` through the real binary (a child process, tests/support/run_webtune.hpp): the
/// file it writes imports as the model with its batch and holds exactly zoo_model's bytes, the
/// one line on stdout states model, file, bytes and parameters; an unknown model exits 2 with
/// the zoo's models on stderr and writes nothing; a bad --batch is a parse error naming it.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "graph/onnx_import.hpp"
#include "graph/zoo.hpp"
#include "support/run_webtune.hpp"

namespace fs = std::filesystem;
using webtune::testing_support::read_file_text;
using webtune::testing_support::run_webtune;
using webtune::testing_support::WebtuneRun;

namespace {

class CliZoo : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           ("webtune_cli_zoo_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliZoo, WritesAModelThatImportsWithItsBatchAndSaysWhatItWrote) {
  const std::string path = (dir_ / "mobilenet.onnx").string();
  const WebtuneRun run =
      run_webtune({"zoo", "mobilenet_v2", "-o", path, "--seed", "3", "--batch", "2"});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  const std::string bytes = read_file_text(path);
  EXPECT_EQ(bytes, webtune::graph::zoo_model("mobilenet_v2", 3, 2));
  EXPECT_EQ(run.out, "mobilenet_v2 -> " + path + ": " + std::to_string(bytes.size()) +
                         " bytes, 3487816 parameters (seed 3, batch 2)\n");
  EXPECT_FALSE(fs::exists(path + ".part"));

  webtune::graph::ImportReport report;
  const webtune::graph::Graph g = webtune::graph::import_onnx_file(path, {}, &report);
  EXPECT_TRUE(report.unsupported.empty());
  EXPECT_EQ(g.tensor("input").shape, (std::vector<int64_t>{2, 3, 224, 224}));
  EXPECT_EQ(g.tensor("logits").shape, (std::vector<int64_t>{2, 1000}));
  EXPECT_EQ(g.op_counts().at("Conv"), 52);
}

TEST_F(CliZoo, AnUnknownModelExitsTwoNamingTheZoosModelsAndWritesNothing) {
  const std::string path = (dir_ / "resnet50.onnx").string();
  const WebtuneRun run = run_webtune({"zoo", "resnet50", "-o", path});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 2) << run.describe();
  for (const char* text : {"'resnet50'", "resnet18", "mobilenet_v2"})
    EXPECT_NE(run.err.find(text), std::string::npos) << "stderr lacks " << text << "\n"
                                                     << run.describe();
  EXPECT_EQ(run.out, "");
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(CliZoo, ABatchOutOfRangeOrAMissingOutputIsAParseError) {
  const std::string path = (dir_ / "r.onnx").string();
  WebtuneRun run = run_webtune({"zoo", "resnet18", "-o", path, "--batch", "0"});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.err.find("--batch"), std::string::npos) << run.describe();
  EXPECT_FALSE(fs::exists(path));
  run = run_webtune({"zoo", "resnet18"});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.err.find("--out"), std::string::npos) << run.describe();
}

TEST_F(CliZoo, AnUnwritableOutputIsAnErrorNamingTheFile) {
  const std::string path = (dir_ / "no-such-dir" / "r.onnx").string();
  const WebtuneRun run = run_webtune({"zoo", "mobilenet_v2", "-o", path});
  ASSERT_TRUE(run.exited) << run.describe();
  EXPECT_EQ(run.status, 1) << run.describe();
  EXPECT_NE(run.err.find("cannot write '" + path + "'"), std::string::npos) << run.describe();
  EXPECT_EQ(run.out, "");
}

TEST_F(CliZoo, ASkeletonIsRestoredWithItsRecipeWeightsAndImports) {
  const std::string skeleton =
      (fs::path(WEBTUNE_CORPUS_DIR) / "resnet18.torchscript.opset17.64px.onnx").string();
  ASSERT_TRUE(fs::exists(skeleton)) << skeleton << " (CMake unpacks tests/data/corpus)";
  const std::string path = (dir_ / "resnet18.onnx").string();
  const WebtuneRun run = run_webtune({"zoo", "--skeleton", skeleton, "-o", path});
  ASSERT_TRUE(run.exited && run.status == 0) << run.describe();
  const std::string bytes = read_file_text(path);
  EXPECT_EQ(run.out, "corpus " + skeleton + " -> " + path + ": " + std::to_string(bytes.size()) +
                         " bytes, 26 initializers restored\n");
  webtune::graph::ImportReport report;
  const webtune::graph::Graph g = webtune::graph::import_onnx_file(path, {}, &report);
  EXPECT_TRUE(report.unsupported.empty());
  EXPECT_EQ(g.op_counts().at("Conv"), 20);
  EXPECT_EQ(g.tensor(g.inputs.at(0)).shape, (std::vector<int64_t>{1, 3, 64, 64}));
  // The same skeleton gives the same bytes.
  ASSERT_EQ(run_webtune({"zoo", "--skeleton", skeleton, "-o", path + "2"}).status, 0);
  EXPECT_EQ(read_file_text(path + "2"), bytes);
}

TEST_F(CliZoo, ASkeletonWithAModelNameOrNotOnnxIsRefusedWithTwo) {
  const std::string path = (dir_ / "x.onnx").string();
  const std::string junk = (dir_ / "junk.onnx").string();
  std::ofstream(junk) << "not a model";
  WebtuneRun run = run_webtune({"zoo", "resnet18", "--skeleton", junk, "-o", path});
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("not both"), std::string::npos) << run.describe();
  run = run_webtune({"zoo", "--skeleton", junk, "-o", path});
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("not an ONNX model"), std::string::npos) << run.describe();
  run = run_webtune({"zoo", "-o", path});
  EXPECT_EQ(run.status, 2) << run.describe();
  EXPECT_NE(run.err.find("--skeleton"), std::string::npos) << run.describe();
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
