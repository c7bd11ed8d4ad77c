/// \file template.cpp
/// The template registry, and feature helpers shared by the templates (template_impl.hpp).
#include "codegen/template.hpp"

#include <cmath>
#include <stdexcept>
#include <variant>

#include "template_impl.hpp"

namespace webtune {

std::string_view tvm_op_name(OpKind op) {
  switch (op) {
    case OpKind::kDense:
      return "dense";
    case OpKind::kConv2d:
      return "conv2d_nchw";
    case OpKind::kDepthwiseConv2d:
      return "depthwise_conv2d_nchw";
  }
  return "unknown";
}

Template::Template(Target target, OpKind op)
    : target_(target),
      op_(op),
      name_(std::string(tvm_op_name(op)) + "." + std::string(target_name(target))) {}

const std::vector<std::string>& Template::analytic_feature_names() {
  static const std::vector<std::string> names = {
      "log2_outputs_per_invocation",  // register tile (compute) or outputs per fragment
      "log2_invocations_per_group",   // workgroup size (compute) or draw buffers (fragment)
      "log2_groups",                  // workgroups dispatched (compute) or fragments drawn
      "log2_shared_bytes",            // log2(1 + bytes of shared memory)
      "log2_input_bytes_per_output",  // log2(1 + estimated bytes fetched per output)
      "log2_source_length",           // GLSL characters: unrolling and register pressure
      "channels_data",                // 1 (R32F / float) or 4 (RGBA32F / vec4 packing)
      "channels_weight",
      "channels_output",
  };
  return names;
}

namespace {

struct Registry {
  std::vector<std::unique_ptr<Template>> owned;
  std::vector<const Template*> all;
  std::vector<Target> targets;
};

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    for (auto make : {detail::make_glsl_frag_templates, detail::make_glsl_compute_templates,
                      detail::make_wgsl_templates, detail::make_wasm_templates}) {
      for (auto& t : make()) {
        if (reg.targets.empty() || reg.targets.back() != t->target())
          reg.targets.push_back(t->target());
        reg.all.push_back(t.get());
        reg.owned.push_back(std::move(t));
      }
    }
    return reg;
  }();
  return r;
}

}  // namespace

const Template& template_for(Target target, const Workload& workload) {
  std::string names;
  for (const Template* t : registry().all) {
    if (t->target() != target) continue;
    if (t->accepts(workload)) return *t;
    names += (names.empty() ? "" : ", ") + t->name();
  }
  throw std::invalid_argument(std::string(target_name(target)) + " has no template for " +
                              std::string(op_name(workload.op)) +
                              " (templates: " + (names.empty() ? "none" : names) + ")");
}

const std::vector<const Template*>& all_templates() {
  return registry().all;
}

const std::vector<Target>& targets() {
  return registry().targets;
}

std::string target_names() {
  std::string out;
  for (Target t : targets()) out += (out.empty() ? "" : ", ") + std::string(target_name(t));
  return out;
}

namespace detail {

float log2f_of(double x) {
  return static_cast<float>(std::log2(x > 0 ? x : 1.0));
}

float log2p1(double x) {
  return static_cast<float>(std::log2(1.0 + (x > 0 ? x : 0.0)));
}

namespace {
const Knob* find_knob(const ConfigEntity& e, std::string_view name, size_t* position) {
  const KnobList& knobs = e.knobs();
  for (size_t i = 0; i < knobs.size(); ++i) {
    if (knobs[i].name == name) {
      *position = i;
      return &knobs[i];
    }
  }
  return nullptr;
}
}  // namespace

std::optional<int64_t> int_knob(const ConfigEntity& e, std::string_view name) {
  size_t i = 0;
  const Knob* knob = find_knob(e, name, &i);
  if (knob == nullptr || knob->kind != Knob::Kind::kInt) return std::nullopt;
  return std::get<int64_t>(knob->candidates[e.choices()[i]]);
}

std::optional<int64_t> split_factor(const ConfigEntity& e, std::string_view name, size_t which) {
  size_t i = 0;
  const Knob* knob = find_knob(e, name, &i);
  if (knob == nullptr || knob->kind != Knob::Kind::kSplit) return std::nullopt;
  const auto& factors = std::get<std::vector<int64_t>>(knob->candidates[e.choices()[i]]);
  if (which >= factors.size()) return std::nullopt;
  return factors[which];
}

std::vector<float> compute_kernel_features(const Workload& workload, const KernelArtifact& a,
                                           double input_bytes_per_output) {
  std::vector<float> f(Template::kAnalyticFeatureCount, 0.0f);
  const double outputs = static_cast<double>(workload.output_size());
  const double invocations = static_cast<double>(a.workgroup[0] * a.workgroup[1] * a.workgroup[2]);
  const double groups = static_cast<double>(a.dispatch[0] * a.dispatch[1] * a.dispatch[2]);
  f[0] = log2f_of(outputs / (invocations * groups));
  f[1] = log2f_of(invocations);
  f[2] = log2f_of(groups);
  f[3] = log2p1(static_cast<double>(a.shared_memory_bytes));
  f[4] = log2p1(input_bytes_per_output);
  f[5] = log2f_of(static_cast<double>(a.source.size()));
  // Compute buffers are plain floats in the artifact (pack_axis −1); their vec4 views show up in
  // the vec4 knob instead.
  f[6] = a.inputs.size() > 0 ? static_cast<float>(a.inputs[0].channels()) : 1.0f;
  f[7] = a.inputs.size() > 1 ? static_cast<float>(a.inputs[1].channels()) : 1.0f;
  f[8] = static_cast<float>(a.output.channels);
  return f;
}

double tiled_input_bytes_per_output(const Workload& w, const ConfigEntity& e) {
  const double reduction = static_cast<double>(w.reduction_size());
  const double no_reuse = 4.0 * 2.0 * reduction;  // every operand fetched once per use
  const bool depthwise = w.op == OpKind::kDepthwiseConv2d;
  const bool shared = int_knob(e, "use_shared").value_or(0) != 0;
  const auto ty = split_factor(e, "tile_y", 1), ry = split_factor(e, "tile_y", 2);
  const auto tx = split_factor(e, "tile_x", 1), rx = split_factor(e, "tile_x", 2);
  if (!ty || !ry || !tx || !rx) return no_reuse;
  // A register tile of a×b outputs over a reduction of length L fetches L·(a + b) values for a·b
  // outputs; with shared memory the workgroup's tile takes the place of the invocation's.
  if (!depthwise) {
    const double a = static_cast<double>(shared ? *ty * *ry : *ry);
    const double b = static_cast<double>(shared ? *tx * *rx : *rx);
    return 4.0 * reduction * (1.0 / a + 1.0 / b);
  }
  // Depthwise windows overlap instead.
  const double r = static_cast<double>(w.kernel_h), s = static_cast<double>(w.kernel_w);
  const double stride = static_cast<double>(w.stride);
  const bool unrolled = int_knob(e, "unroll").value_or(0) != 0;
  // The window of input pixels behind an h×w block of outputs.
  auto window = [&](double h, double wd) {
    return ((h - 1) * stride + r) * ((wd - 1) * stride + s);
  };
  const double bh = static_cast<double>(shared ? *ty * *ry : *ry);
  const double bw = static_cast<double>(shared ? *tx * *rx : *rx);
  if (!shared && !unrolled) return no_reuse;  // run-time r, s loops: a fetch per tap
  return 4.0 * (window(bh, bw) + r * s) / (bh * bw);
}

}  // namespace detail
}  // namespace webtune
