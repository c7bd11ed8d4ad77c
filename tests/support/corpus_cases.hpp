/// \file corpus_cases.hpp
/// The corpus models × targets of tests/data/corpus/targets.txt (issue 48: every corpus model
/// builds for every target and matches the CPU reference), for the whole-model tests on the
/// local GL device (model_runner_test) and in headless Chromium (model_runtime_test).
/// Header-only.
#pragma once

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "graph/model_recipe.hpp"

namespace webtune::testing_support {

/// One line of targets.txt: "<file> <target> run" or "<file> <target> skip <reason>".
struct CorpusTargetCase {
  std::string file;    ///< a skeleton in the unpacked corpus (WEBTUNE_CORPUS_DIR)
  std::string target;  ///< webgl2, webgpu, wasm, gles-compute, gles-frag
  bool run = false;
  std::string reason;  ///< why it is skipped
};

inline void PrintTo(const CorpusTargetCase& c, std::ostream* os) {
  *os << c.file << " on " << c.target << (c.run ? "" : " (skip)");
}

/// The cases of `list` whose target is one of `targets`, in file order.
inline std::vector<CorpusTargetCase> corpus_target_cases(const std::filesystem::path& list,
                                                         const std::set<std::string>& targets) {
  std::vector<CorpusTargetCase> cases;
  std::ifstream in(list);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    CorpusTargetCase c;
    std::string verdict;
    words >> c.file >> c.target >> verdict;
    c.run = verdict == "run";
    std::getline(words, c.reason);
    if (targets.count(c.target)) cases.push_back(c);
  }
  return cases;
}

/// "resnet50_64px_gles_compute" for gtest.
inline std::string corpus_case_name(const CorpusTargetCase& c) {
  std::string model = c.file.substr(0, c.file.find('.'));
  std::string name = model + "_" + c.target;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

/// Restores the skeleton `file` of `corpus_dir` (graph/model_recipe.hpp) into `out`.
inline void restore_corpus_model(const std::filesystem::path& corpus_dir, const std::string& file,
                                 const std::filesystem::path& out) {
  std::ifstream in(corpus_dir / file, std::ios::binary);
  const std::string skeleton((std::istreambuf_iterator<char>(in)), {});
  const std::string bytes = graph::restore_recipes(skeleton, file);
  std::ofstream(out, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace webtune::testing_support
