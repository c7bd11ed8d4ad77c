#pragma once
/// \file record_selection.hpp
/// Which config a package runs for each task (docs/package.md, "tasks"): the best record of the
/// device key itself, else the best record of another device of the same family (the key's text
/// before its first ':', e.g. "webgl2" of "webgl2:swiftshader"), else the template's default
/// config. Then the task's kernel, emitted through the template registry with the device limits
/// the records stored for the record's device (as `webtune artifact` does), else the defaults.

#include <optional>
#include <string>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/workload.hpp"
#include "deploy/package.hpp"
#include "tuner/records.hpp"
#include "tuner/tune_target.hpp"

namespace webtune::deploy {

/// The family of a device key: its text before the first ':' ("gles" of "gles:llvmpipe"); the
/// whole key when it has no ':'.
std::string device_family(const std::string& device_key);

/// The config chosen for one task, and its kernel.
struct TaskChoice {
  TaskSource source = TaskSource::kDefault;
  std::string device_key;            ///< the record's device key; "" for kDefault
  std::optional<int64_t> record_id;  ///< the trial's id; nullopt for kDefault
  std::optional<double> cost_ms;     ///< the trial's mean cost in ms; nullopt for kDefault
  ConfigEntity entity;
  DeviceLimits limits;  ///< the limits the kernel was emitted for
  KernelArtifact artifact;
  /// What the report should say besides the choice (a vertex-stage best passed over, a record
  /// that no longer builds), one line each; empty when nothing.
  std::vector<std::string> notes;
};

/// The device key a build takes when none is given: of the devices whose records tune kernels
/// of `target`'s kind in its key family, the one with the most tuning jobs (ties: the key that
/// sorts first); "" when there is no store or no such device. Taking it (instead of "the
/// family") gives the build that device's limits too: a webgl2 kernel tuned where textures may
/// be 8192 texels tall needs relayouts into such textures, which the default limits (4096)
/// refuse.
std::string default_device_key(const RecordStore* store, const TuneTarget& target);

/// The device limits `store` keeps for `device_key` (its device info's "limits"); the defaults
/// (DeviceLimits{}) when there is no store, no such device, or it stored none.
DeviceLimits stored_limits(const RecordStore* store, const std::string& device_key);

/// The device limits a model's tuning builds its config spaces with (`webtune tune --model`), so
/// that every trial is of a config a package can run: for gles-frag kernels (targets gles-frag
/// and webgl2) `limits` with max_feedback_components 0, which leaves out every vertex-stage
/// config (they capture at least one component; choose_config skips them); for other targets
/// `limits` as they are. The device's own info (and so its records) keeps the real limits. On
/// 2026-11-25 half of MobileNet-v2's webgl2 trials (220 of 440) went to vertex-stage configs.
DeviceLimits package_tuning_limits(DeviceLimits limits, const TuneTarget& target);

/// Chooses the config of `workload` for tune target `target` (its kernel kind) and `device_key`
/// (see the file comment) and emits its kernel. Records: the successful trials that are not
/// suspect of the jobs with exactly this workload key (epilogue included) and kernel kind; a
/// tier (exact key, then family) takes its fastest mean cost (ties: the earlier job, then the
/// earlier trial), across the family's devices too. An empty `device_key` skips the exact tier
/// and takes the tune target's family (its tracker key prefix: "gles", "webgl2", ...). On
/// gles-frag only fragment-stage configs count (knob `stage` other than "vertex"): a
/// transform-feedback kernel's output is a buffer the next fragment kernel cannot sample (a
/// note says when a vertex-stage trial was faster). A record whose config no longer builds
/// (outside the current space or the device's limits) is skipped with a note. `store` null:
/// the default config; on gles-frag, when the default is a vertex-stage kernel (the template's
/// fallback under tight limits), the first valid fragment-stage config instead, with a note.
/// Throws std::invalid_argument when the target has no template for the workload, when no
/// fragment-stage config fits (gles-frag), or when even the default config does not build.
TaskChoice choose_config(const RecordStore* store, const Workload& workload,
                         const TuneTarget& target, const std::string& device_key);

}  // namespace webtune::deploy
