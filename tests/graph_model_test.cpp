/// \file graph_model_test.cpp
/// Whole models through the graph layer: import → fusion passes → reference executor. The
/// fused graph must compute what the ONNX graph computes (onnxruntime's logits for the real
/// PyTorch exports of ../shared/models, skipped with a message when it is absent), and the
/// model zoo's architectures must import to the same tuning tasks as those exports.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"
#include "graph/passes.hpp"
#include "graph/task_extraction.hpp"

namespace fs = std::filesystem;
using namespace webtune::graph;

namespace {

const fs::path kShared = fs::path(WEBTUNE_SOURCE_DIR) / ".." / "shared" / "models";

std::vector<float> read_f32(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), values.size() * 4);
  return values;
}

class SharedModel : public ::testing::TestWithParam<std::string> {};

}  // namespace

// The fused graph (FusedConv / FusedGemm with their epilogues) against onnxruntime's output:
// the passes keep the model's numbers. Tolerance: issue 15's 1e-4 × max |logit|.
TEST_P(SharedModel, FusedGraphMatchesOnnxruntime) {
  const std::string model = GetParam();
  if (!fs::exists(kShared / (model + ".onnx")))
    GTEST_SKIP() << "../shared/models is absent (a user's clone has none): " << model
                 << " is not run here";
  ImportReport report;
  Graph graph = import_onnx_file((kShared / (model + ".onnx")).string(), {}, &report);
  const PassReport passes = run_fusion_passes(graph);
  EXPECT_GT(passes.total(), 0);
  int fused = 0;
  for (const Node& n : graph.nodes) fused += n.op_type.rfind("Fused", 0) == 0;
  EXPECT_EQ(fused, model == "resnet18" ? 21 : 53);  // every Conv and the Gemm
  const auto input = read_f32(kShared / (model + ".input.f32"));
  const auto expected = read_f32(kShared / (model + ".logits.f32"));
  ASSERT_EQ(expected.size(), 1000u);
  const ValueMap out =
      execute(graph, {{graph.inputs.at(0), Value::floats({1, 3, 224, 224}, input)}},
              {.opset = report.opset});
  const Value& logits = out.at(graph.outputs.at(0));
  double max_logit = 0, err = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    max_logit = std::max(max_logit, std::fabs(static_cast<double>(expected[i])));
    err = std::max(err, std::fabs(static_cast<double>(logits.data.at(i)) - expected[i]));
  }
  std::cout << model << " fused: max abs error " << err << " (max |logit| " << max_logit << ")\n";
  EXPECT_LE(err, 1e-4 * max_logit);
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedModel, ::testing::Values("resnet18", "mobilenet_v2"),
                         [](const auto& info) { return info.param; });
