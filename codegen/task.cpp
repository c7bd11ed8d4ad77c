/// \file task.cpp
/// Tasks: a workload, its target's template (template.hpp) and the config space it builds.
#include "codegen/task.hpp"

#include "codegen/error_no.hpp"

namespace webtune {

Task Task::create(const Workload& workload, Target target, const DeviceLimits& limits) {
  workload.validate();
  Task task;
  task.workload = workload;
  task.target = target;
  task.kernel_template = &template_for(target, workload);
  task.space = task.kernel_template->space(workload);
  task.space->set_device_limits(limits);
  return task;
}

const Template& Task::get_template() const {
  if (kernel_template == nullptr)
    throw std::logic_error("task has no template: make tasks with Task::create");
  return *kernel_template;
}

KernelArtifact Task::build(const ConfigEntity& entity) const {
  std::string why;
  if (!space->is_valid(entity, &why))
    throw MeasureError(MeasureErrorNo::kInstantiation,
                       "config " + std::to_string(entity.index()) + " is not valid: " + why);
  return get_template().emit(workload, entity);
}

ConfigEntity Task::default_config() const {
  return get_template().default_config(*space);
}

}  // namespace webtune
