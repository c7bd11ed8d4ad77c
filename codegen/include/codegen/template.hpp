/// \file template.hpp
/// Templates: what turns a workload into kernels on one target. A template names itself as
/// records and AutoTVM exports do ("conv2d_nchw.gles-frag"), says which operator it accepts,
/// builds the config space of a workload, emits the kernel of one config entity, picks the
/// untuned default, and computes its own analytic features for the cost model. The registry
/// (template_for, all_templates, targets) is the one list of what exists: Task, the CLI and the
/// records importer ask it instead of listing targets or switching over them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/config_space.hpp"
#include "codegen/kernel_artifact.hpp"
#include "codegen/target.hpp"
#include "codegen/workload.hpp"

namespace webtune {

/// The operator name of AutoTVM's task names and exports: "dense", "conv2d_nchw" or
/// "depthwise_conv2d_nchw".
std::string_view tvm_op_name(OpKind op);

/// One kernel template: one operator on one target. Instances live in the registry for the
/// whole program and are stateless (every function is safe to call from several threads).
class Template {
 public:
  /// Number of analytic features every template computes (see features()).
  static constexpr size_t kAnalyticFeatureCount = 9;

  Template(Target target, OpKind op);
  virtual ~Template() = default;
  Template(const Template&) = delete;
  Template& operator=(const Template&) = delete;

  /// The task name, tvm_op_name(op) + "." + target_name(target), e.g. "dense.gles-frag" or
  /// "conv2d_nchw.webgpu", as records store it. AutoTVM exports write TVM-style names instead
  /// (tvm_task_name in tuner/autotvm_log.hpp; docs/records.md).
  const std::string& name() const { return name_; }
  Target target() const { return target_; }
  OpKind op() const { return op_; }
  /// True when this template builds kernels for `workload` (its op is op()).
  bool accepts(const Workload& workload) const { return workload.op == op_; }

  /// The config space of `workload`, device limits not yet applied (ConfigSpace::
  /// set_device_limits). Validates the workload (std::invalid_argument as Workload::validate)
  /// and throws std::invalid_argument when accepts(workload) is false.
  virtual std::shared_ptr<ConfigSpace> space(const Workload& workload) const = 0;

  /// The kernel of `entity`, an entity of space(workload). Throws MeasureError(kInstantiation)
  /// for an entity that breaks the template's rules (the message names the rule), and
  /// MeasureError(kCompileHost) when a host-side compile fails (wasm: LLVM unavailable).
  /// Does not check device limits: Task::build does.
  virtual KernelArtifact emit(const Workload& workload, const ConfigEntity& entity) const = 0;

  /// The entity a user gets without tuning (each target documents its default in its emitter
  /// header); `space` is a space of this template, with device limits applied.
  virtual ConfigEntity default_config(const ConfigSpace& space) const = 0;

  /// Whether features() needs the built kernel. When false, the cost model passes no artifact:
  /// building is too slow for the thousands of candidates it scores (wasm: an LLVM compile).
  virtual bool features_need_artifact() const { return true; }

  /// The template's analytic features of one entity for the cost model, log-scaled, exactly
  /// kAnalyticFeatureCount of them in the order of analytic_feature_names():
  /// log2 outputs per invocation (or per fragment / micro-tile), log2 invocations per workgroup
  /// (draw buffers, threads), log2 workgroups (fragments, micro-tiles), log2(1 + shared or
  /// scratch bytes), log2(1 + estimated input bytes fetched per output), log2 of the kernel's
  /// size (source characters, or K-loop instructions for wasm), then the channels (1 or 4) of
  /// the data, weight and output storage. `artifact` is emit(workload, entity) when
  /// features_need_artifact(), else null. Throws MeasureError(kInstantiation) for an entity
  /// that breaks the template's rules.
  virtual std::vector<float> features(const Workload& workload, const ConfigEntity& entity,
                                      const KernelArtifact* artifact) const = 0;

  /// Names of the analytic features, in order (the same for every template, so XGBoost models
  /// keep their meaning across them).
  static const std::vector<std::string>& analytic_feature_names();

 private:
  Target target_;
  OpKind op_;
  std::string name_;
};

/// The template for `workload` on `target`. Throws std::invalid_argument naming the templates
/// that exist for that target, e.g. "webgpu has no template for depthwise_conv2d (templates:
/// dense.webgpu, conv2d_nchw.webgpu)".
const Template& template_for(Target target, const Workload& workload);

/// Every registered template, by target (targets() order) then operator.
const std::vector<const Template*>& all_templates();

/// Every target that has at least one template, in a fixed order: gles-frag, gles-compute,
/// webgpu, wasm.
const std::vector<Target>& targets();

/// Target names of targets(), joined with ", " (for help texts and error messages).
std::string target_names();

}  // namespace webtune
