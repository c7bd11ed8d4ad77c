/// \file config_fuzzer.cpp
/// libFuzzer harness for the config readers (codegen/config_space.hpp) of real templates.
///
/// Feeds: the first byte picks one of the real templates below (gles-frag, gles-compute, webgpu
/// and wasm spaces of ResNet-18's C2, a dense 512 and a depthwise layer); the second byte's low
/// bit picks what the rest of the input is:
///   0: a config as `webtune measure --config` takes it, to `ConfigSpace::parse` (an index, or
///      entity JSON for `ConfigSpace::from_json`);
///   1: device limits JSON, to `DeviceLimits::from_json`, then applied to the space.
///
/// Asserts: only std::invalid_argument or MeasureError (a std::runtime_error) escape, with a
/// message; a parsed entity has one choice per knob, within its candidates, and the same index
/// and choices after to_json → from_json and after get(index); a valid entity builds a kernel
/// (Task::build) of the template's target, except wasm without LLVM (COMPILE_HOST); parsed
/// limits survive to_json → from_json, and the default config's validity can be decided under
/// them.
#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/error_no.hpp"
#include "codegen/task.hpp"
#include "fuzz_common.hpp"

namespace bj = boost::json;
using namespace webtune;
using webtune::fuzz::check;
using webtune::fuzz::throws_only;

namespace {

const std::vector<Task>& templates() {
  static const std::vector<Task> tasks = [] {
    const Workload c2 = Workload::conv2d(1, 64, 56, 56, 64, 3, 1, 1, "C2");
    const Workload dense = Workload::dense(512, 512, 512);
    const Workload depthwise = Workload::depthwise_conv2d(1, 32, 112, 112, 3, 1, 1);
    std::vector<Task> out;
    for (Target target : {Target::kGlesFrag, Target::kGlesCompute, Target::kWebgpu, Target::kWasm})
      for (const Workload& w : {c2, dense, depthwise}) {
        try {
          out.push_back(Task::create(w, target));
        } catch (const std::invalid_argument&) {
          // this target has no template for this op
        }
      }
    return out;
  }();
  return tasks;
}

void check_entity(const Task& task, const ConfigEntity& entity) {
  const ConfigSpace& space = *task.space;
  const std::string where = "config " + std::to_string(entity.index()) + " of " +
                            task.workload.key() + " on " + std::string(target_name(task.target));
  check(entity.choices().size() == space.knobs().size(), where + ": wrong number of choices");
  for (size_t k = 0; k < space.knobs().size(); ++k)
    check(entity.choices()[k] >= 0 &&
              static_cast<size_t>(entity.choices()[k]) < space.knobs()[k].candidates.size(),
          where + ": choice outside the candidates of " + space.knobs()[k].name);
  check(entity.index() >= 0 && entity.index() < space.raw_size(), where + ": index out of range");
  ConfigEntity again, by_index;
  throws_only<>("ConfigSpace::from_json(to_json)",
                [&] { again = space.from_json(entity.to_json()); });
  check(again.index() == entity.index() && again.choices() == entity.choices(),
        where + ": changed on its JSON round trip");
  throws_only<>("ConfigSpace::get", [&] { by_index = space.get(entity.index()); });
  check(by_index.choices() == entity.choices(), where + ": get(index) has other choices");
  (void)entity.to_string();

  std::string why;
  bool valid = false;
  throws_only<>("ConfigSpace::is_valid", [&] { valid = space.is_valid(entity, &why); });
  if (!valid) return;
  try {
    const KernelArtifact artifact = task.build(entity);
    check(!artifact.source.empty() || task.target == Target::kWasm, where + ": empty kernel");
  } catch (const MeasureError& e) {
    check(task.target == Target::kWasm && e.error() == MeasureErrorNo::kCompileHost,
          where + " is valid but does not build: " + e.what());
  } catch (const std::exception& e) {
    webtune::fuzz::finding(where + ": Task::build threw " + webtune::fuzz::type_name(e) + ": " +
                           e.what());
  }
}

void check_limits(const Task& task, const DeviceLimits& limits) {
  DeviceLimits again;
  throws_only<>("DeviceLimits round trip",
                [&] { again = DeviceLimits::from_json(limits.to_json()); });
  check(bj::serialize(again.to_json()) == bj::serialize(limits.to_json()),
        "DeviceLimits changed on its JSON round trip");
  ConfigSpace space = *task.space;  // a copy: the templates stay as built
  space.set_device_limits(limits);
  throws_only<>("is_valid under parsed limits",
                [&] { (void)space.is_valid(task.default_config()); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Task& task = templates()[data[0] % templates().size()];
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  if ((data[1] & 1) == 0) {
    ConfigEntity entity;
    if (throws_only<std::invalid_argument, MeasureError>("ConfigSpace::parse",
                                                         [&] { entity = task.space->parse(rest); }))
      check_entity(task, entity);
  } else {
    boost::system::error_code ec;
    const bj::value value = bj::parse(rest, ec);
    if (ec) return 0;
    DeviceLimits limits;
    if (throws_only<std::invalid_argument>("DeviceLimits::from_json",
                                           [&] { limits = DeviceLimits::from_json(value); }))
      check_limits(task, limits);
  }
  return 0;
}
