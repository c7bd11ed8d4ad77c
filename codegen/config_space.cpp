/// \file config_space.cpp
/// Knob definitions, mixed-radix indexing, validity filters, sampling and neighbours.
#include "codegen/config_space.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "codegen/error_no.hpp"
#include "codegen/json_util.hpp"

namespace webtune {

namespace bj = boost::json;

namespace {

// Every ordered factorisation of `extent` into `parts` factors (outermost first). With
// kVerbose an inner factor may also be a power of two that does not divide what is left of the
// axis; what is left is then rounded up (ceil), so the product covers the axis with a padded or
// guarded tail (AutoTVM's "verbose" split policy: factors and powers of two).
void factorisations(int64_t extent, int parts, SplitPolicy policy, int64_t max_factor,
                    std::vector<int64_t>& prefix, std::vector<KnobValue>& out) {
  if (parts == 1) {
    // The outermost factor takes what is left; it is exempt from max_factor and the policy,
    // as in AutoTVM where the outer loop absorbs the remainder of the axis.
    std::vector<int64_t> factors = {extent};
    factors.insert(factors.end(), prefix.rbegin(), prefix.rend());
    out.emplace_back(std::move(factors));
    return;
  }
  for (int64_t f = 1; f <= extent; ++f) {
    if (max_factor > 0 && f > max_factor) break;
    const bool divides = extent % f == 0;
    const bool power_of_two = (f & (f - 1)) == 0;
    if (policy == SplitPolicy::kFactors && !divides) continue;
    if (policy == SplitPolicy::kPower2 && !(divides && power_of_two)) continue;
    if (policy == SplitPolicy::kVerbose && !divides && !power_of_two) continue;
    prefix.push_back(f);
    factorisations((extent + f - 1) / f, parts - 1, policy, max_factor, prefix, out);
    prefix.pop_back();
  }
}

std::string value_to_string(const KnobValue& value) {
  if (const auto* factors = std::get_if<std::vector<int64_t>>(&value)) {
    std::string s = "[";
    for (size_t i = 0; i < factors->size(); ++i)
      s += (i ? "," : "") + std::to_string((*factors)[i]);
    return s + "]";
  }
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  return std::get<std::string>(value);
}

bj::value value_to_json(const KnobValue& value) {
  if (const auto* factors = std::get_if<std::vector<int64_t>>(&value))
    return json::to_array(*factors);
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  return bj::string(std::get<std::string>(value));
}

// Finds the candidate equal to a JSON value, or -1.
int find_candidate(const Knob& knob, const bj::value& value) {
  for (size_t c = 0; c < knob.candidates.size(); ++c) {
    const KnobValue& cand = knob.candidates[c];
    if (knob.kind == Knob::Kind::kSplit) {
      if (!value.is_array()) return -1;
      const auto& factors = std::get<std::vector<int64_t>>(cand);
      const bj::array& a = value.get_array();
      if (a.size() != factors.size()) return -1;
      bool same = true;
      for (size_t i = 0; i < a.size() && same; ++i) {
        // AutoTVM writes -1 for the outermost factor: accept it as "whatever is left".
        const int64_t v = json::to_int(a[i], knob.name);
        same = v == factors[i] || (i == 0 && v == -1);
      }
      if (same) return static_cast<int>(c);
    } else if (knob.kind == Knob::Kind::kInt) {
      if ((value.is_int64() || value.is_uint64() || value.is_double()) &&
          json::to_int(value, knob.name) == std::get<int64_t>(cand))
        return static_cast<int>(c);
    } else if (value.is_string() && value.get_string() == std::get<std::string>(cand)) {
      return static_cast<int>(c);
    }
  }
  return -1;
}

}  // namespace

bool split_is_exact(const std::vector<int64_t>& factors, int64_t extent) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f <= 0 || product > extent) return false;
    product *= f;
  }
  return product == extent;
}

// ---- ConfigEntity -------------------------------------------------------------------------

const KnobValue& ConfigEntity::value(const std::string& name) const {
  for (size_t i = 0; i < knobs_->size(); ++i)
    if ((*knobs_)[i].name == name) return (*knobs_)[i].candidates[choices_[i]];
  throw std::out_of_range("config has no knob '" + name + "'");
}

const std::vector<int64_t>& ConfigEntity::split(const std::string& name) const {
  const auto* factors = std::get_if<std::vector<int64_t>>(&value(name));
  if (!factors) throw std::invalid_argument("knob '" + name + "' is not a split");
  return *factors;
}

int64_t ConfigEntity::get_int(const std::string& name) const {
  const auto* v = std::get_if<int64_t>(&value(name));
  if (!v) throw std::invalid_argument("knob '" + name + "' is not an integer knob");
  return *v;
}

const std::string& ConfigEntity::get_string(const std::string& name) const {
  const auto* v = std::get_if<std::string>(&value(name));
  if (!v) throw std::invalid_argument("knob '" + name + "' is not a string knob");
  return *v;
}

bj::object ConfigEntity::to_json() const {
  bj::array entity;
  for (size_t i = 0; i < knobs_->size(); ++i) {
    const Knob& knob = (*knobs_)[i];
    entity.push_back(bj::array{bj::string(knob.name),
                               bj::string(knob.kind == Knob::Kind::kSplit ? "sp" : "ot"),
                               value_to_json(knob.candidates[choices_[i]])});
  }
  bj::object o;
  o["index"] = index_;
  o["entity"] = std::move(entity);
  return o;
}

std::string ConfigEntity::to_string() const {
  std::string s;
  for (size_t i = 0; i < knobs_->size(); ++i) {
    if (i) s += ' ';
    s += (*knobs_)[i].name + "=" + value_to_string((*knobs_)[i].candidates[choices_[i]]);
  }
  return s;
}

// ---- DeviceLimits -------------------------------------------------------------------------

bj::object DeviceLimits::to_json() const {
  return bj::object{{"max_texture_size", max_texture_size},
                    {"max_draw_buffers", max_draw_buffers},
                    {"max_workgroup_invocations", max_workgroup_invocations},
                    {"max_workgroup_size",
                     bj::array{max_workgroup_size_x, max_workgroup_size_y, max_workgroup_size_z}},
                    {"max_shared_memory_bytes", max_shared_memory_bytes},
                    {"max_threads", max_threads},
                    {"relaxed_simd", relaxed_simd},
                    {"max_varying_vectors", max_varying_vectors},
                    {"max_feedback_components", max_feedback_components}};
}

DeviceLimits DeviceLimits::from_json(const bj::value& value) {
  const bj::object& o = json::as_object(value, "limits");
  DeviceLimits d;
  d.max_texture_size = json::get_int_or(o, "max_texture_size", d.max_texture_size);
  d.max_draw_buffers = json::get_int_or(o, "max_draw_buffers", d.max_draw_buffers);
  d.max_workgroup_invocations =
      json::get_int_or(o, "max_workgroup_invocations", d.max_workgroup_invocations);
  if (o.contains("max_workgroup_size")) {
    std::vector<int64_t> size = json::get_int_array(o, "max_workgroup_size");
    if (size.size() != 3) throw std::invalid_argument("'max_workgroup_size' needs 3 numbers");
    d.max_workgroup_size_x = size[0];
    d.max_workgroup_size_y = size[1];
    d.max_workgroup_size_z = size[2];
  }
  d.max_shared_memory_bytes =
      json::get_int_or(o, "max_shared_memory_bytes", d.max_shared_memory_bytes);
  d.max_threads = json::get_int_or(o, "max_threads", d.max_threads);
  if (const bj::value* relaxed = o.if_contains("relaxed_simd")) {
    if (!relaxed->is_bool()) throw std::invalid_argument("'relaxed_simd' must be true or false");
    d.relaxed_simd = relaxed->get_bool();
  }
  d.max_varying_vectors = json::get_int_or(o, "max_varying_vectors", d.max_varying_vectors);
  d.max_feedback_components =
      json::get_int_or(o, "max_feedback_components", d.max_feedback_components);
  return d;
}

// ---- ConfigSpace --------------------------------------------------------------------------

static void check_new_knob(const std::map<std::string, int>& names, const std::string& name,
                           size_t candidates) {
  if (names.count(name)) throw std::invalid_argument("knob '" + name + "' defined twice");
  if (candidates == 0) throw std::invalid_argument("knob '" + name + "' has no candidates");
}

void ConfigSpace::define_split(const std::string& name, int64_t extent, int num_outputs,
                               SplitPolicy policy, int64_t max_factor) {
  if (extent <= 0 || num_outputs < 1)
    throw std::invalid_argument("define_split('" + name + "'): extent and num_outputs must be > 0");
  Knob knob{name, Knob::Kind::kSplit, {}, extent};
  std::vector<int64_t> prefix;
  factorisations(extent, num_outputs, policy, max_factor, prefix, knob.candidates);
  check_new_knob(knob_by_name_, name, knob.candidates.size());
  knob_by_name_[name] = static_cast<int>(knobs_->size());
  knobs_->push_back(std::move(knob));
  valid_cached_ = false;
}

void ConfigSpace::define_knob(const std::string& name, std::vector<int64_t> candidates) {
  check_new_knob(knob_by_name_, name, candidates.size());
  Knob knob{name, Knob::Kind::kInt, {}, 0};
  for (int64_t c : candidates) knob.candidates.emplace_back(c);
  knob_by_name_[name] = static_cast<int>(knobs_->size());
  knobs_->push_back(std::move(knob));
  valid_cached_ = false;
}

void ConfigSpace::define_knob(const std::string& name, std::vector<std::string> candidates) {
  check_new_knob(knob_by_name_, name, candidates.size());
  Knob knob{name, Knob::Kind::kString, {}, 0};
  for (std::string& c : candidates) knob.candidates.emplace_back(std::move(c));
  knob_by_name_[name] = static_cast<int>(knobs_->size());
  knobs_->push_back(std::move(knob));
  valid_cached_ = false;
}

void ConfigSpace::allow_absent(const std::string& name) {
  (*knobs_)[knob_index(name)].absent_means_first = true;
}

void ConfigSpace::add_constraint(std::string description, Predicate predicate) {
  constraints_.emplace_back(std::move(description), std::move(predicate));
  valid_cached_ = false;
}

void ConfigSpace::add_device_limit(std::string description, LimitPredicate predicate) {
  limits_checks_.emplace_back(std::move(description), std::move(predicate));
  valid_cached_ = false;
}

void ConfigSpace::set_device_limits(const DeviceLimits& limits) {
  limits_ = limits;
  valid_cached_ = false;
}

int ConfigSpace::knob_index(const std::string& name) const {
  auto it = knob_by_name_.find(name);
  if (it == knob_by_name_.end()) throw std::out_of_range("space has no knob '" + name + "'");
  return it->second;
}

int64_t ConfigSpace::raw_size() const {
  int64_t size = 1;
  for (const Knob& k : *knobs_) size *= static_cast<int64_t>(k.candidates.size());
  return size;
}

ConfigEntity ConfigSpace::get(int64_t index) const {
  if (index < 0 || index >= raw_size())
    throw std::out_of_range("config index " + std::to_string(index) + " outside [0, " +
                            std::to_string(raw_size()) + ")");
  std::vector<int> choices(knobs_->size());
  int64_t rest = index;
  for (size_t i = 0; i < knobs_->size(); ++i) {
    const auto radix = static_cast<int64_t>((*knobs_)[i].candidates.size());
    choices[i] = static_cast<int>(rest % radix);
    rest /= radix;
  }
  return ConfigEntity(knobs_, index, std::move(choices));
}

ConfigEntity ConfigSpace::from_choices(const std::vector<int>& choices) const {
  if (choices.size() != knobs_->size())
    throw std::out_of_range("a config needs one choice per knob");
  int64_t index = 0, stride = 1;
  for (size_t i = 0; i < knobs_->size(); ++i) {
    const auto radix = static_cast<int64_t>((*knobs_)[i].candidates.size());
    if (choices[i] < 0 || choices[i] >= radix)
      throw std::out_of_range("choice " + std::to_string(choices[i]) + " of knob '" +
                              (*knobs_)[i].name + "' outside [0, " + std::to_string(radix) + ")");
    index += choices[i] * stride;
    stride *= radix;
  }
  return ConfigEntity(knobs_, index, choices);
}

bool ConfigSpace::satisfies_constraints(const ConfigEntity& entity) const {
  for (const auto& [description, predicate] : constraints_)
    if (!predicate(entity)) return false;
  return true;
}

bool ConfigSpace::is_valid(const ConfigEntity& entity, std::string* why) const {
  for (const auto& [description, predicate] : constraints_) {
    if (!predicate(entity)) {
      if (why) *why = "breaks constraint: " + description;
      return false;
    }
  }
  for (const auto& [description, predicate] : limits_checks_) {
    if (!predicate(entity, limits_)) {
      if (why) *why = "breaks device limit: " + description;
      return false;
    }
  }
  return true;
}

const std::vector<int64_t>& ConfigSpace::valid_indices() const {
  if (!valid_cached_) {
    valid_cache_.clear();
    const int64_t size = raw_size();
    for (int64_t i = 0; i < size; ++i)
      if (is_valid(get(i))) valid_cache_.push_back(i);
    valid_cached_ = true;
  }
  return valid_cache_;
}

ConfigEntity ConfigSpace::sample(std::mt19937_64& rng) const {
  const std::vector<int64_t>& valid = valid_indices();
  if (valid.empty()) throw std::runtime_error("the config space has no valid config");
  std::uniform_int_distribution<size_t> pick(0, valid.size() - 1);
  return get(valid[pick(rng)]);
}

std::vector<ConfigEntity> ConfigSpace::sample_distinct(std::mt19937_64& rng, int64_t count) const {
  std::vector<int64_t> pool = valid_indices();
  count = std::min<int64_t>(count, static_cast<int64_t>(pool.size()));
  std::vector<ConfigEntity> out;
  // Partial Fisher-Yates: the first `count` slots become a uniform sample without replacement.
  for (int64_t i = 0; i < count; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, static_cast<int64_t>(pool.size()) - 1);
    std::swap(pool[i], pool[pick(rng)]);
    out.push_back(get(pool[i]));
  }
  return out;
}

std::vector<ConfigEntity> ConfigSpace::neighbours(const ConfigEntity& entity) const {
  std::vector<ConfigEntity> out;
  std::vector<int> choices = entity.choices();
  for (size_t k = 0; k < knobs_->size(); ++k) {
    const int original = choices[k];
    for (int c = 0; c < static_cast<int>((*knobs_)[k].candidates.size()); ++c) {
      if (c == original) continue;
      choices[k] = c;
      ConfigEntity candidate = from_choices(choices);
      if (is_valid(candidate)) out.push_back(std::move(candidate));
    }
    choices[k] = original;
  }
  return out;
}

ConfigEntity ConfigSpace::from_json(const bj::value& value, StaleIndex stale) const {
  auto refuse = [](const std::string& message) {
    throw MeasureError(MeasureErrorNo::kInstantiation, "config outside the space: " + message);
  };
  if (!value.is_object()) refuse("a config must be a JSON object with an \"entity\" list");
  const bj::object& o = value.get_object();
  if (!o.contains("entity") || !o.at("entity").is_array()) refuse("missing \"entity\" list");
  std::vector<int> choices(knobs_->size(), -1);
  for (const bj::value& item : o.at("entity").get_array()) {
    if (!item.is_array() || item.get_array().size() != 3 || !item.get_array()[0].is_string())
      refuse("each entity item is [name, kind, value]");
    const bj::array& a = item.get_array();
    const std::string name(a[0].get_string());
    auto it = knob_by_name_.find(name);
    if (it == knob_by_name_.end()) refuse("unknown knob '" + name + "'");
    // The kind letter as AutoTVM writes it ("sp" for a split, "ot" for the others, as to_json
    // writes them); TVM's ConfigEntity.from_json_dict refuses a kind it does not know, too.
    const char* kind = (*knobs_)[it->second].kind == Knob::Kind::kSplit ? "sp" : "ot";
    if (!a[1].is_string() || a[1].get_string() != kind)
      refuse("knob '" + name + "' must have the kind \"" + kind + "\", not " + bj::serialize(a[1]));
    int choice = -1;
    try {
      choice = find_candidate((*knobs_)[it->second], a[2]);
    } catch (const std::invalid_argument&) {
      choice = -1;
    }
    if (choice < 0) refuse("knob '" + name + "' has no candidate " + bj::serialize(a[2]));
    choices[it->second] = choice;
  }
  for (size_t k = 0; k < knobs_->size(); ++k) {
    if (choices[k] >= 0) continue;
    if (!(*knobs_)[k].absent_means_first) refuse("knob '" + (*knobs_)[k].name + "' is missing");
    choices[k] = 0;
  }
  ConfigEntity entity = from_choices(choices);
  if (o.contains("index")) {
    int64_t index = -1;
    try {
      index = json::to_int(o.at("index"), "index");
    } catch (const std::invalid_argument&) {
      refuse("\"index\" must be an integer");
    }
    if (index != entity.index() && stale == StaleIndex::kRefuse)
      refuse("\"index\" " + std::to_string(index) + " does not match its entity (index " +
             std::to_string(entity.index()) + ")");
  }
  return entity;
}

ConfigEntity ConfigSpace::parse(const std::string& text) const {
  const auto first = text.find_first_not_of(" \t\n");
  if (first != std::string::npos && text[first] == '{') {
    boost::system::error_code ec;
    bj::value value = bj::parse(text, ec);
    if (ec)
      throw MeasureError(MeasureErrorNo::kInstantiation,
                         "config is not valid JSON: " + ec.message());
    return from_json(value);
  }
  size_t used = 0;
  int64_t index = -1;
  try {
    index = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw MeasureError(MeasureErrorNo::kInstantiation,
                       "config '" + text + "' is neither an index nor entity JSON");
  if (index < 0 || index >= raw_size())
    throw MeasureError(MeasureErrorNo::kInstantiation, "config index " + std::to_string(index) +
                                                           " outside the space [0, " +
                                                           std::to_string(raw_size()) + ")");
  return get(index);
}

}  // namespace webtune
