/// \file task.cpp
/// Looks up each target's template: its config space, emitter and default config.
#include "codegen/task.hpp"

#include "codegen/error_no.hpp"
#include "codegen/glsl_compute_emitter.hpp"
#include "codegen/glsl_frag_emitter.hpp"
#include "codegen/wasm_emitter.hpp"
#include "codegen/wgsl_emitter.hpp"

namespace webtune {

Task Task::create(const Workload& workload, Target target, const DeviceLimits& limits) {
  workload.validate();
  Task task;
  task.workload = workload;
  task.target = target;
  switch (target) {
    case Target::kGlesFrag:
      task.space = glsl_frag_space(workload);
      break;
    case Target::kGlesCompute:
      task.space = glsl_compute_space(workload);
      break;
    case Target::kWebgpu:
      task.space = wgsl_space(workload);
      break;
    case Target::kWasm:
      task.space = wasm_space(workload);
      break;
  }
  task.space->set_device_limits(limits);
  return task;
}

KernelArtifact Task::build(const ConfigEntity& entity) const {
  std::string why;
  if (!space->is_valid(entity, &why))
    throw MeasureError(MeasureErrorNo::kInstantiation,
                       "config " + std::to_string(entity.index()) + " is not valid: " + why);
  switch (target) {
    case Target::kGlesFrag:
      return emit_glsl_frag(workload, entity);
    case Target::kGlesCompute:
      return emit_glsl_compute(workload, entity);
    case Target::kWebgpu:
      return emit_wgsl(workload, entity);
    case Target::kWasm:
      return emit_wasm(workload, entity);
  }
  throw MeasureError(MeasureErrorNo::kInstantiation, "no emitter for this target");
}

ConfigEntity Task::default_config() const {
  switch (target) {
    case Target::kGlesFrag:
      return glsl_frag_default(*space);
    case Target::kGlesCompute:
      return glsl_compute_default(*space);
    case Target::kWebgpu:
      return wgsl_default(*space);
    case Target::kWasm:
      return wasm_default(*space);
  }
  return space->get(0);
}

}  // namespace webtune
