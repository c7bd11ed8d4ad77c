/// \file zoo_command.cpp
/// `webtune zoo resnet18|mobilenet_v2 -o FILE.onnx [--seed N] [--batch N]`: writes a standard
/// architecture as an ONNX model with seeded weights (graph/zoo.hpp), so that a model job runs
/// on a machine with nothing downloaded. Prints one line to stdout:
///
///   resnet18 -> resnet18.onnx: 46749205 bytes, 11684712 parameters (seed 1, batch 1)
///
/// `webtune zoo --skeleton SKELETON.onnx -o FILE.onnx` instead restores a corpus skeleton
/// (tests/data/corpus; graph/model_recipe.hpp): a real export whose large weights are seeded
/// recipes, written with those weights filled ("corpus x.onnx -> FILE.onnx: N bytes, K
/// initializers restored").
///
/// An unknown model name is an error on stderr that lists the zoo's models, exit status 2 (as
/// `measure` ends a build that fails with 2). The file is written beside its final name and
/// renamed into place, so a failed write leaves no truncated model behind.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include "commands.hpp"
#include "graph/graph.hpp"
#include "graph/model_recipe.hpp"
#include "graph/zoo.hpp"
#include "option_checks.hpp"

namespace webtune::cli {

namespace {

struct ZooArgs {
  std::string model, out, skeleton;
  uint64_t seed = 1;
  int64_t batch = 1;
};

std::string known_models() {
  std::string text;
  for (const std::string& m : graph::zoo_models()) text += (text.empty() ? "" : ", ") + m;
  return text;
}

void write_file(const std::string& path, const std::string& bytes) {
  const std::string part = path + ".part";
  {
    std::ofstream file(part, std::ios::binary | std::ios::trunc);
    if (!file || !file.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) ||
        !file.flush()) {
      std::error_code ignored;
      std::filesystem::remove(part, ignored);
      throw std::runtime_error("cannot write '" + path + "'");
    }
  }
  std::error_code error;
  std::filesystem::rename(part, path, error);
  if (error) {
    std::filesystem::remove(part, error);
    throw std::runtime_error("cannot write '" + path + "': " + error.message());
  }
}

int restore_skeleton(const ZooArgs& args) {
  std::ifstream in(args.skeleton, std::ios::binary);
  if (!in || !std::filesystem::is_regular_file(args.skeleton)) {
    spdlog::error("zoo: cannot read the skeleton '{}'", args.skeleton);
    return 2;
  }
  const std::string skeleton((std::istreambuf_iterator<char>(in)), {});
  int restored = 0;
  std::string bytes;
  try {
    bytes = graph::restore_recipes(skeleton, args.skeleton, &restored);
  } catch (const graph::GraphError& e) {
    spdlog::error("zoo: {}", e.what());
    return 2;
  }
  write_file(args.out, bytes);
  std::printf("corpus %s -> %s: %zu bytes, %d initializer%s restored\n", args.skeleton.c_str(),
              args.out.c_str(), bytes.size(), restored, restored == 1 ? "" : "s");
  return 0;
}

int run_zoo(const ZooArgs& args) {
  if (!args.skeleton.empty()) {
    if (!args.model.empty()) {
      spdlog::error("zoo: give an architecture or --skeleton, not both");
      return 2;
    }
    return restore_skeleton(args);
  }
  if (args.model.empty()) {
    spdlog::error("zoo: give an architecture ({}) or --skeleton FILE", known_models());
    return 2;
  }
  const auto& models = graph::zoo_models();
  if (std::find(models.begin(), models.end(), args.model) == models.end()) {
    spdlog::error("unknown zoo model '{}'; the zoo has: {}", args.model, known_models());
    return 2;
  }
  const std::string bytes = graph::zoo_model(args.model, args.seed, args.batch);
  write_file(args.out, bytes);
  std::printf("%s -> %s: %zu bytes, %lld parameters (seed %llu, batch %lld)\n", args.model.c_str(),
              args.out.c_str(), bytes.size(),
              static_cast<long long>(graph::zoo_parameter_count(args.model)),
              static_cast<unsigned long long>(args.seed), static_cast<long long>(args.batch));
  return 0;
}

}  // namespace

void add_zoo_command(CLI::App& app) {
  auto args = std::make_shared<ZooArgs>();
  CLI::App* cmd = app.add_subcommand(
      "zoo",
      "Write a standard architecture (" + known_models() +
          ") as an ONNX model with seeded weights: torchvision's graph as PyTorch exports it, "
          "BatchNorm folded, for tuning and deployment without downloading a model");
  cmd->add_option("model", args->model, "architecture: " + known_models());
  cmd->add_option("--skeleton", args->skeleton,
                  "restore this corpus skeleton (tests/data/corpus: a real export whose large "
                  "weights are seeded recipes) instead of writing an architecture");
  cmd->add_option("-o,--out", args->out, "ONNX file to write (replaced if it exists)")->required();
  cmd->add_option("--seed", args->seed,
                  "seed of the weights (splitmix64; the same seed writes the same bytes)")
      ->capture_default_str();
  cmd->add_option("--batch", args->batch, "batch size N of the input [N,3,224,224]")
      ->check(int_range(1, graph::kMaxZooBatch))
      ->capture_default_str();
  cmd->callback([args] {
    const int code = run_zoo(*args);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace webtune::cli
