/// \file task.hpp
/// Tasks: a workload on a target, with its config space, and the builder that turns a config
/// entity into a kernel artifact. This is where targets' templates are looked up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/target.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// A tuning task (AutoTVM's Task): one workload, one target and the config space of its template
/// for a device with the given limits.
struct Task {
  Workload workload;
  Target target = Target::kGlesFrag;
  std::shared_ptr<ConfigSpace> space;

  /// Builds the space for `workload` on `target` and applies `limits`. Throws
  /// std::invalid_argument for a workload the target has no template for.
  static Task create(const Workload& workload, Target target, const DeviceLimits& limits = {});

  /// Emits the kernel of one entity. Throws MeasureError(kInstantiation) when the entity is
  /// invalid in this space (the message names the broken constraint).
  KernelArtifact build(const ConfigEntity& entity) const;

  /// The entity that a user gets without tuning: the template's documented default
  /// (for fragment shaders one output per fragment, scalar textures).
  ConfigEntity default_config() const;
};

}  // namespace webtune
