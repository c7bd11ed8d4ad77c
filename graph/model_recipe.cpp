/// \file model_recipe.cpp
/// Filling a corpus skeleton's recipe initializers (model_recipe.hpp).

#include "graph/model_recipe.hpp"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "codegen/seeded_random.hpp"
#include "graph/graph.hpp"

namespace webtune::graph {
namespace {

/// "uniform lo=.. hi=.. seed=.." → its fields; throws GraphError(`where` + why).
std::map<std::string, std::string> fields_of(const std::string& recipe, const std::string& where) {
  std::istringstream in(recipe);
  std::string kind;
  in >> kind;
  if (kind != "uniform")
    throw GraphError(where + ": recipe kind '" + kind + "' is not known (uniform)");
  std::map<std::string, std::string> fields;
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw GraphError(where + ": recipe field '" + item + "' is not NAME=VALUE");
    fields[item.substr(0, eq)] = item.substr(eq + 1);
  }
  for (const char* key : {"lo", "hi", "seed"})
    if (!fields.count(key)) throw GraphError(where + ": the recipe has no " + key);
  return fields;
}

}  // namespace

std::string restore_recipes(const std::string& model_bytes, const std::string& source,
                            int* restored) {
  onnx::ModelProto model;
  if (!model.ParseFromString(model_bytes))
    throw GraphError(source + ": not an ONNX model (the ModelProto does not parse)");
  int count = 0;
  const size_t prefix = std::strlen(kRecipePrefix);
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.doc_string().compare(0, prefix, kRecipePrefix) != 0) continue;
    const std::string where = source + ": initializer '" + t.name() + "'";
    if (t.data_type() != onnx::TensorProto_DataType_FLOAT)
      throw GraphError(where + ": a recipe on a tensor that is not float32");
    if (t.has_raw_data() || t.float_data_size() > 0)
      throw GraphError(where + ": a recipe on a tensor that already has data");
    const auto fields = fields_of(t.doc_string().substr(prefix), where);
    double lo = 0, hi = 0;
    uint64_t seed = 0;
    try {
      size_t used = 0;
      lo = std::stod(fields.at("lo"));
      hi = std::stod(fields.at("hi"));
      seed = std::stoull(fields.at("seed"), &used);
      if (used != fields.at("seed").size()) throw std::invalid_argument("seed");
    } catch (const std::exception&) {
      throw GraphError(where + ": the recipe's lo, hi or seed is not a number");
    }
    if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo)
      throw GraphError(where + ": the recipe's range [" + fields.at("lo") + ", " + fields.at("hi") +
                       "] is not a finite range");
    int64_t elements = 1;
    for (int64_t d : t.dims()) {
      if (d < 0 || (d > 0 && elements > (int64_t{1} << 31) / d))
        throw GraphError(where + ": its dims are negative or too large");
      elements *= d;
    }
    std::vector<float> data(static_cast<size_t>(elements));
    uint64_t state = seed;
    for (float& v : data) {
      const double u = static_cast<double>(splitmix64_next(state) >> 40) * 0x1p-24;
      v = static_cast<float>(lo + (hi - lo) * u);
    }
    t.set_raw_data(
        std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
    t.clear_doc_string();
    ++count;
  }
  if (restored) *restored = count;
  std::string out;
  model.SerializeToString(&out);
  return out;
}

}  // namespace webtune::graph
