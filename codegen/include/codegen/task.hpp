/// \file task.hpp
/// Tasks: a workload on a target, with its template (template.hpp), its config space, and the
/// builder that turns a config entity into a kernel artifact.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/target.hpp"
#include "codegen/template.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// A tuning task (AutoTVM's Task): one workload, one target and the config space of its template
/// for a device with the given limits.
struct Task {
  Workload workload;
  Target target = Target::kGlesFrag;
  /// The registry's template for workload on target (never owned; templates live as long as the
  /// program). Null only in a default-constructed Task.
  const Template* kernel_template = nullptr;
  std::shared_ptr<ConfigSpace> space;

  /// Looks up the template for `workload` on `target` (template_for), builds its space and
  /// applies `limits`. Throws std::invalid_argument for an invalid workload or one the target
  /// has no template for (the message names the templates that exist).
  static Task create(const Workload& workload, Target target, const DeviceLimits& limits = {});

  /// The task's template; throws std::logic_error for a default-constructed Task.
  const Template& get_template() const;

  /// Emits the kernel of one entity. Throws MeasureError(kInstantiation) when the entity is
  /// invalid in this space, device limits included (the message names the broken constraint),
  /// and whatever Template::emit throws.
  KernelArtifact build(const ConfigEntity& entity) const;

  /// The entity that a user gets without tuning: the template's documented default
  /// (for fragment shaders one output per fragment, scalar textures).
  ConfigEntity default_config() const;
};

}  // namespace webtune
