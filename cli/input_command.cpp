/// \file input_command.cpp
/// `webtune input --model M.onnx -o input.f32 [--seed S] [--range LO,HI] [--dim N=V]`: writes a
/// model's input file for `webtune run --input` and the web runtime: the graph input's element
/// count of raw little-endian float32, row-major, from the seeded generator every agent shares
/// (codegen/seeded_random.hpp, tensor 0 of seed S) mapped linearly from [−1, 1) onto [LO, HI)
/// (default [0, 1): the range of an image's pixels before normalisation). The same seed gives
/// the same bytes on every machine. What was written goes to stderr; stdout stays empty.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "codegen/seeded_random.hpp"
#include "commands.hpp"
#include "graph/onnx_import.hpp"
#include "option_checks.hpp"

namespace webtune::cli {
namespace {

struct InputArgs {
  std::string model, out, name;
  uint64_t seed = 1;
  std::vector<double> range = {0.0, 1.0};
  std::vector<std::string> dims;
};

void run_input(const InputArgs& args) {
  if (args.range.size() != 2 || !(args.range[0] < args.range[1]))
    throw CLI::ValidationError("--range", "needs LO,HI with LO < HI");
  graph::ImportOptions options;
  options.symbolic_dims = symbolic_dims(args.dims);
  graph::Graph graph;
  try {
    graph = graph::import_onnx_file(args.model, options, nullptr);
  } catch (const graph::GraphError& e) {
    spdlog::error("input: {}", e.what());
    throw CLI::RuntimeError(2);
  }
  std::vector<std::string> floats;
  for (const std::string& in : graph.inputs)
    if (graph.tensor(in).type == graph::DataType::kFloat32) floats.push_back(in);
  std::string name = args.name;
  if (name.empty()) {
    if (floats.size() != 1) {
      spdlog::error("input: {} has {} float32 inputs; name one with --input-name", args.model,
                    floats.size());
      throw CLI::RuntimeError(2);
    }
    name = floats[0];
  } else if (std::find(floats.begin(), floats.end(), name) == floats.end()) {
    spdlog::error("input: {} has no float32 input '{}'", args.model, name);
    throw CLI::RuntimeError(2);
  }
  const graph::Tensor& t = graph.tensor(name);
  const int64_t n = t.elements();
  std::vector<float> values = seeded_tensor(args.seed, 0, n);
  const double lo = args.range[0], scale = (args.range[1] - args.range[0]) / 2.0;
  for (float& v : values) v = static_cast<float>(lo + (static_cast<double>(v) + 1.0) * scale);
  std::ofstream file(args.out, std::ios::binary);
  if (!file) {
    spdlog::error("input: cannot write '{}'", args.out);
    throw CLI::RuntimeError(1);
  }
  file.write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(float)));
  if (!file) {
    spdlog::error("input: writing '{}' failed", args.out);
    throw CLI::RuntimeError(1);
  }
  std::string shape;
  for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "x" : "") + std::to_string(t.shape[i]);
  spdlog::info("wrote input '{}' [{}]: {} float32 values ({} bytes), seed {}, range [{}, {}) to {}",
               name, shape, n, n * 4, args.seed, args.range[0], args.range[1], args.out);
}

}  // namespace

void add_input_command(CLI::App& app) {
  auto args = std::make_shared<InputArgs>();
  CLI::App* cmd = app.add_subcommand(
      "input",
      "Write a model's input file (raw float32, for `run --input`) from a seed: the same bytes "
      "on every machine");
  cmd->add_option("--model", args->model, "the ONNX model whose input to write")->required();
  cmd->add_option("-o,--out", args->out, "the file to write (raw little-endian float32)")
      ->required();
  cmd->add_option("--seed", args->seed, "the seed (codegen/seeded_random.hpp)");
  cmd->add_option("--range", args->range, "LO,HI: the values' range (default 0,1)")
      ->delimiter(',')
      ->expected(2);
  cmd->add_option("--input-name", args->name, "the graph input, where the model has several");
  cmd->add_option("--dim", args->dims,
                  "NAME=VALUE: a value for a symbolic input dimension, e.g. batch_size=1; "
                  "*=VALUE binds every symbolic dimension not named (repeatable)")
      ->check(dim_binding());
  cmd->callback([args] { run_input(*args); });
}

}  // namespace webtune::cli
