/// \file tuner_efficiency.cpp
/// bench_tuner_efficiency: how many trials each search strategy needs, on real cost landscapes.
///
/// Spaces measured in full once on a real device (bench/results/replay.db holds ResNet-18 C7,
/// C10 and D1 on gles-frag, Mesa llvmpipe: see docs/benchmarks.md for how it was made) are
/// replayed from the SQLite records: every tuner proposes configs as in a real run and gets the
/// stored measure result back. For each space and tuner the median, over `--seeds` seeds, of the
/// trials needed to reach `--fraction` (95%) of the space's best config is printed, with the
/// ratio XGB / random. Issue 4's target: XGB needs at most 0.4× the trials of random.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "records_copy.hpp"
#include "tuner/records.hpp"
#include "tuner/replayed_space.hpp"
#include "tuner/tuner.hpp"

using namespace webtune;

namespace {

double median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? static_cast<double>(v[n / 2]) : 0.5 * static_cast<double>(v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trials to reach 95% of the best config, XGB vs GA vs random, on replayed spaces"};
  std::string db = "bench/results/replay.db", tuners_list = "xgb,ga,random";
  int seeds = 20, batch = 16;
  double fraction = 0.95;
  app.add_option("--db", db, "records holding fully measured spaces")->capture_default_str();
  app.add_option("--tuners", tuners_list, "tuners to compare")->capture_default_str();
  app.add_option("--seeds", seeds, "seeds per tuner and space")->capture_default_str();
  app.add_option("--fraction", fraction, "fraction of the best to reach")->capture_default_str();
  app.add_option("--batch", batch, "configs per round, as in a tuning run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<std::string> tuners = split_list(tuners_list);

  const bench::RecordsCopy copy(db, "bench_tuner_efficiency");  // the committed file stays as is
  RecordStore store(copy.path());
  std::map<std::string, std::vector<double>> ratios;  // tuner → its median / random's median
  for (const TuningJobInfo& job : store.jobs()) {
    std::optional<ReplayedSpace> loaded;
    try {
      loaded = ReplayedSpace::load(store, job.id);
    } catch (const std::exception& e) {
      std::printf("skipping job %lld: %s\n", static_cast<long long>(job.id), e.what());
      continue;
    }
    const ReplayedSpace& space = *loaded;
    const double target = fraction * space.best_gflops();
    std::printf("\n%s %s on %s (%s): %lld configs, best %.3f GFLOP/s, %lld within %.0f%%\n",
                job.task_name.c_str(), job.workload.key().c_str(),
                std::string(target_name(job.target)).c_str(), job.device_key.c_str(),
                static_cast<long long>(space.size()), space.best_gflops(),
                static_cast<long long>(space.count_at_least(fraction)), 100 * fraction);
    std::map<std::string, double> medians;
    for (const std::string& name : tuners) {
      std::vector<int64_t> trials;
      for (int seed = 1; seed <= seeds; ++seed) {
        std::unique_ptr<Tuner> tuner = make_tuner(name, space.task(), static_cast<uint64_t>(seed));
        trials.push_back(trials_to_reach(
            *tuner, [&](const ConfigEntity& e) { return space.result(e); }, target, space.size(),
            batch));
      }
      medians[name] = median(trials);
      std::printf("  %-7s median %7.1f trials  (min %lld, max %lld)\n", name.c_str(), medians[name],
                  static_cast<long long>(*std::min_element(trials.begin(), trials.end())),
                  static_cast<long long>(*std::max_element(trials.begin(), trials.end())));
    }
    if (!medians.count("random")) continue;
    for (const auto& [name, m] : medians) {
      if (name == "random") continue;
      ratios[name].push_back(m / medians["random"]);
      std::printf("  ratio %s / random: %.2f\n", name.c_str(), m / medians["random"]);
    }
  }
  if (ratios.empty()) {
    std::printf("no complete space in %s\n", db.c_str());
    return 1;
  }
  std::printf("\ngeometric mean over spaces of trials to %.0f%%, relative to random:",
              100 * fraction);
  for (const auto& [name, r] : ratios) {
    double log_sum = 0;
    for (double x : r) log_sum += std::log(x);
    std::printf("  %s %.2fx", name.c_str(), std::exp(log_sum / static_cast<double>(r.size())));
  }
  std::printf("  (target for xgb: <= 0.40x)\n");
  return 0;
}
