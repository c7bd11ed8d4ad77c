/// \file epilogue.cpp
/// Epilogue names, parsing, JSON, the double reference and the shader functions.
#include "codegen/epilogue.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "codegen/json_util.hpp"

namespace webtune {

namespace bj = boost::json;

std::string_view activation_name(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return "none";
    case Activation::kRelu:
      return "relu";
    case Activation::kClip:
      return "clip";
    case Activation::kHardSwish:
      return "hard_swish";
    case Activation::kSilu:
      return "silu";
    case Activation::kSigmoid:
      return "sigmoid";
    case Activation::kHardSigmoid:
      return "hard_sigmoid";
  }
  return "none";
}

namespace {

/// Every activation, in enum order: activation_named's search space.
constexpr Activation kActivations[] = {
    Activation::kNone, Activation::kRelu,    Activation::kClip,       Activation::kHardSwish,
    Activation::kSilu, Activation::kSigmoid, Activation::kHardSigmoid};

/// The activation whose activation_name is `name`, or nullopt: one spelling for suffix, parse
/// and JSON.
std::optional<Activation> activation_named(std::string_view name) {
  for (Activation a : kActivations)
    if (activation_name(a) == name) return a;
  return std::nullopt;
}

}  // namespace

std::string_view residual_name(Residual residual) {
  switch (residual) {
    case Residual::kNone:
      return "none";
    case Residual::kBeforeActivation:
      return "before_activation";
    case Residual::kAfterActivation:
      return "after_activation";
  }
  return "none";
}

namespace {

/// The shortest decimal that reads back as `value` ("6", "0.5", "-1e-07").
std::string shortest(float value) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, end);
}

/// A float literal every shading language takes: always with a '.' or an exponent.
std::string float_literal(float value) {
  std::string s = shortest(value);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

float parse_float(const std::string& text, const std::string& token) {
  float value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    throw std::invalid_argument("epilogue: '" + text + "' in '" + token +
                                "' is not a finite number");
  return value;
}

const char* const kForms =
    "the accepted tokens, in op order, are bias, then one of relu | relu6 | clip(MIN,MAX) | "
    "hard_swish | silu | sigmoid | hard_sigmoid, with residual before or after it (e.g. "
    "+bias+residual+relu)";

}  // namespace

std::string Epilogue::suffix() const {
  std::string s;
  if (bias) s += "+bias";
  if (residual == Residual::kBeforeActivation) s += "+residual";
  if (activation == Activation::kClip)
    s += "+clip(" + shortest(clip_min) + "," + shortest(clip_max) + ")";
  else if (activation != Activation::kNone)
    s += "+" + std::string(activation_name(activation));
  if (residual == Residual::kAfterActivation) s += "+residual";
  return s;
}

Epilogue Epilogue::parse(const std::vector<std::string>& tokens) {
  Epilogue e;
  bool activation_seen = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t == "bias") {
      if (i != 0)
        throw std::invalid_argument("epilogue: 'bias' must come first; " + std::string(kForms));
      e.bias = true;
    } else if (t == "residual") {
      if (e.residual != Residual::kNone)
        throw std::invalid_argument("epilogue: 'residual' appears twice; " + std::string(kForms));
      e.residual = activation_seen ? Residual::kAfterActivation : Residual::kBeforeActivation;
    } else {
      if (activation_seen)
        throw std::invalid_argument("epilogue: a second activation '" + t + "'; " + kForms);
      activation_seen = true;
      const std::optional<Activation> named = activation_named(t);
      if (named && *named != Activation::kNone && *named != Activation::kClip) {
        e.activation = *named;  // clip takes its bounds: clip(MIN,MAX)
      } else if (t == "relu6") {
        e.activation = Activation::kClip;
        e.clip_min = 0;
        e.clip_max = 6;
      } else if (t.rfind("clip(", 0) == 0 && t.back() == ')' && t.find(',') != std::string::npos) {
        const std::string inside = t.substr(5, t.size() - 6);
        const size_t comma = inside.find(',');
        e.activation = Activation::kClip;
        e.clip_min = parse_float(inside.substr(0, comma), t);
        e.clip_max = parse_float(inside.substr(comma + 1), t);
      } else {
        throw std::invalid_argument("epilogue: unknown token '" + t + "'; " + kForms);
      }
    }
  }
  // A residual with no activation is "before": both orders compute the same.
  if (e.activation == Activation::kNone && e.residual == Residual::kAfterActivation)
    e.residual = Residual::kBeforeActivation;
  e.validate();
  return e;
}

double Epilogue::apply(double v, double b, double r) const {
  if (bias) v += b;
  if (residual == Residual::kBeforeActivation) v += r;
  switch (activation) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      v = std::max(v, 0.0);
      break;
    case Activation::kClip:
      v = std::min(std::max(v, static_cast<double>(clip_min)), static_cast<double>(clip_max));
      break;
    case Activation::kHardSwish:
      v = v * std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0;
      break;
    case Activation::kSilu:
      v = v / (1.0 + std::exp(-v));
      break;
    case Activation::kSigmoid:
      v = 1.0 / (1.0 + std::exp(-v));
      break;
    case Activation::kHardSigmoid:
      v = std::min(std::max(v + 3.0, 0.0), 6.0) / 6.0;
      break;
  }
  if (residual == Residual::kAfterActivation) v += r;
  return v;
}

void Epilogue::validate() const {
  if (activation == Activation::kClip &&
      (!std::isfinite(clip_min) || !std::isfinite(clip_max) || clip_min > clip_max))
    throw std::invalid_argument("epilogue: clip(" + shortest(clip_min) + ", " + shortest(clip_max) +
                                ") needs finite bounds with min <= max");
}

bj::object Epilogue::to_json() const {
  bj::object o;
  o["bias"] = bias;
  o["activation"] = std::string(activation_name(activation));
  if (activation == Activation::kClip) {
    o["clip_min"] = static_cast<double>(clip_min);
    o["clip_max"] = static_cast<double>(clip_max);
  }
  o["residual"] = std::string(residual_name(residual));
  return o;
}

Epilogue Epilogue::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "epilogue");
  for (const auto& kv : o) {
    const std::string_view k = kv.key();
    if (k != "bias" && k != "activation" && k != "clip_min" && k != "clip_max" && k != "residual")
      throw std::invalid_argument("epilogue: unknown field '" + std::string(k) +
                                  "' (fields: bias, activation, clip_min, clip_max, residual)");
  }
  Epilogue e;
  if (const bj::value* b = o.if_contains("bias")) {
    if (!b->is_bool()) throw std::invalid_argument("epilogue: 'bias' must be true or false");
    e.bias = b->get_bool();
  }
  const std::string act = json::get_string_or(o, "activation", "none");
  const std::optional<Activation> named = activation_named(act);
  if (!named)
    throw std::invalid_argument(
        "epilogue: activation '" + act +
        "' is not one of none, relu, clip, hard_swish, silu, sigmoid, hard_sigmoid");
  e.activation = *named;
  if (e.activation == Activation::kClip) {
    e.clip_min = static_cast<float>(json::get_double_or(o, "clip_min", 0.0));
    e.clip_max = static_cast<float>(json::get_double_or(o, "clip_max", 6.0));
  }
  if (e.activation != Activation::kClip && (o.contains("clip_min") || o.contains("clip_max")))
    throw std::invalid_argument("epilogue: clip_min / clip_max need activation 'clip'");
  const std::string res = json::get_string_or(o, "residual", "none");
  if (res == "none") {
    e.residual = Residual::kNone;
  } else if (res == "before_activation") {
    e.residual = Residual::kBeforeActivation;
  } else if (res == "after_activation") {
    e.residual = e.activation == Activation::kNone ? Residual::kBeforeActivation
                                                   : Residual::kAfterActivation;
  } else {
    throw std::invalid_argument("epilogue: residual '" + res +
                                "' is not one of none, before_activation, after_activation");
  }
  e.validate();
  return e;
}

namespace {

// The body of webtune_epilogue in GLSL and WGSL: both spell max/min/clamp alike; `zero`,
// `three` and `six` are the literals of the scalar or vector type.
std::string epilogue_body(const Epilogue& e, const std::string& zero, const std::string& three,
                          const std::string& six, const std::string& lo, const std::string& hi) {
  std::string s;
  if (e.bias) s += "  v = v + b;\n";
  if (e.residual == Residual::kBeforeActivation) s += "  v = v + r;\n";
  switch (e.activation) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      s += "  v = max(v, " + zero + ");\n";
      break;
    case Activation::kClip:
      s += "  v = clamp(v, " + lo + ", " + hi + ");\n";
      break;
    case Activation::kHardSwish:
      s += "  v = v * clamp(v + " + three + ", " + zero + ", " + six + ") / " + six + ";\n";
      break;
    case Activation::kSilu:
      // A scalar 1.0 with a vector: GLSL and WGSL both take it. exp(−v) overflows to +inf for
      // v < −88, and v / inf is the −0 the limit is.
      s += "  v = v / (1.0 + exp(-v));\n";
      break;
    case Activation::kSigmoid:
      // exp(−v) = +inf for v < −88 gives 1 / inf = 0, the limit.
      s += "  v = 1.0 / (1.0 + exp(-v));\n";
      break;
    case Activation::kHardSigmoid:
      s += "  v = clamp(v + " + three + ", " + zero + ", " + six + ") / " + six + ";\n";
      break;
  }
  if (e.residual == Residual::kAfterActivation) s += "  v = v + r;\n";
  return s;
}

}  // namespace

std::string glsl_epilogue_functions(const Epilogue& e) {
  if (e.empty()) return {};
  const std::string lo = float_literal(e.clip_min), hi = float_literal(e.clip_max);
  std::string s = "// epilogue " + e.suffix() + " (codegen/include/codegen/epilogue.hpp)\n";
  s += "float webtune_epilogue(float v, float b, float r) {\n" +
       epilogue_body(e, "0.0", "3.0", "6.0", lo, hi) + "  return v;\n}\n";
  s += "vec4 webtune_epilogue(vec4 v, vec4 b, vec4 r) {\n" +
       epilogue_body(e, "vec4(0.0)", "vec4(3.0)", "vec4(6.0)", "vec4(" + lo + ")",
                     "vec4(" + hi + ")") +
       "  return v;\n}\n";
  return s;
}

std::string wgsl_epilogue_functions(const Epilogue& e) {
  if (e.empty()) return {};
  const std::string lo = float_literal(e.clip_min), hi = float_literal(e.clip_max);
  std::string s = "// epilogue " + e.suffix() + " (codegen/include/codegen/epilogue.hpp)\n";
  s += "fn webtune_epilogue(v_in: f32, b: f32, r: f32) -> f32 {\n  var v = v_in;\n" +
       epilogue_body(e, "0.0", "3.0", "6.0", lo, hi) + "  return v;\n}\n";
  s += "fn webtune_epilogue4(v_in: vec4<f32>, b: vec4<f32>, r: vec4<f32>) -> vec4<f32> {\n"
       "  var v = v_in;\n" +
       epilogue_body(e, "vec4<f32>(0.0)", "vec4<f32>(3.0)", "vec4<f32>(6.0)",
                     "vec4<f32>(" + lo + ")", "vec4<f32>(" + hi + ")") +
       "  return v;\n}\n";
  return s;
}

}  // namespace webtune
