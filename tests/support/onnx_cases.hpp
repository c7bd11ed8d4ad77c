#pragma once
/// \file onnx_cases.hpp
/// ONNX's node conformance cases (Debian's libonnx-testdata: one directory per case with
/// model.onnx and test_data_set_0/{input,output}_<i>.pb) as tests/graph_executor_cases.txt
/// lists them, loaded into webtune's graph: shared by the reference executor's conformance
/// test (graph_executor_test.cpp) and the targets' op-kernel conformance test
/// (op_conformance_test.cpp).

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/executor.hpp"
#include "graph/onnx_import.hpp"

namespace webtune::test {

inline const std::filesystem::path kOnnxTestData = "/usr/share/libonnx-testdata/data/node";
inline const std::filesystem::path kOnnxCaseList =
    std::filesystem::path(WEBTUNE_SOURCE_DIR) / "tests" / "graph_executor_cases.txt";

inline std::string read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// One line of tests/graph_executor_cases.txt: "<case> run", "<case> run7 <why>" (run with the
/// model's opset raised to 7, the importer's minimum) or "<case> skip <reason>".
struct ConformanceCase {
  std::string name;
  std::string status;
  std::string reason;
};

inline void PrintTo(const ConformanceCase& c, std::ostream* os) {
  *os << c.name << " " << c.status;
}

inline std::vector<ConformanceCase> listed_cases() {
  std::vector<ConformanceCase> cases;
  std::ifstream in(kOnnxCaseList);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    ConformanceCase c;
    s >> c.name >> c.status;
    std::getline(s >> std::ws, c.reason);
    cases.push_back(c);
  }
  return cases;
}

/// A TensorProto's values, read here (not by the importer): float32 into data; int64, int32 and
/// bool into ints. Other element types throw.
inline graph::Value value_of_proto(const onnx::TensorProto& t) {
  graph::Value v;
  v.shape.assign(t.dims().begin(), t.dims().end());
  size_t n = 1;
  for (int64_t d : v.shape) n *= static_cast<size_t>(d);
  const std::string& raw = t.raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto_DataType_FLOAT:
      if (t.has_raw_data()) {
        v.data.resize(raw.size() / 4);
        if (!raw.empty()) std::memcpy(v.data.data(), raw.data(), v.data.size() * 4);
      } else {
        v.data.assign(t.float_data().begin(), t.float_data().end());
      }
      break;
    case onnx::TensorProto_DataType_INT64:
      v.type = graph::DataType::kInt64;
      if (t.has_raw_data()) {
        v.ints.resize(raw.size() / 8);
        if (!raw.empty()) std::memcpy(v.ints.data(), raw.data(), v.ints.size() * 8);
      } else {
        v.ints.assign(t.int64_data().begin(), t.int64_data().end());
      }
      break;
    case onnx::TensorProto_DataType_INT32:
    case onnx::TensorProto_DataType_BOOL: {
      const bool is_bool = t.data_type() == onnx::TensorProto_DataType_BOOL;
      v.type = is_bool ? graph::DataType::kBool : graph::DataType::kInt32;
      if (t.has_raw_data()) {
        for (size_t i = 0; i < n; ++i) {
          int32_t x = 0;
          if (is_bool)
            x = raw.at(i) != 0;
          else
            std::memcpy(&x, raw.data() + 4 * i, 4);
          v.ints.push_back(x);
        }
      } else {
        v.ints.assign(t.int32_data().begin(), t.int32_data().end());
      }
      break;
    }
    default:
      throw std::runtime_error("tensor '" + t.name() + "' has element type " +
                               std::to_string(t.data_type()) + ", which this test does not read");
  }
  const size_t size = v.is_float() ? v.data.size() : v.ints.size();
  if (size != n) throw std::runtime_error("tensor '" + t.name() + "' does not fill its shape");
  return v;
}

/// A case loaded: its graph (imported as webtune imports a model), the inputs by graph input
/// name and the expected outputs by graph output name.
struct LoadedCase {
  graph::Graph graph;
  graph::ImportReport report;
  graph::ValueMap inputs;
  graph::ValueMap expected;
};

/// Loads case directory `name`; with `raise_opset` the model's default-domain opset is raised to
/// the importer's minimum (kMinOpset) first. Throws (GraphError from the importer,
/// std::runtime_error for unreadable data).
inline LoadedCase load_case(const std::string& name, bool raise_opset) {
  const std::filesystem::path dir = kOnnxTestData / name;
  LoadedCase c;
  if (raise_opset) {
    onnx::ModelProto model;
    if (!model.ParseFromString(read_file_bytes(dir / "model.onnx")))
      throw std::runtime_error("model does not parse");
    for (auto& opset : *model.mutable_opset_import())
      if (opset.domain().empty() && opset.version() < graph::kMinOpset)
        opset.set_version(graph::kMinOpset);
    std::string bytes;
    model.SerializeToString(&bytes);
    c.graph = graph::import_onnx_bytes(bytes, (dir / "model.onnx").string(), {}, &c.report);
  } else {
    c.graph = graph::import_onnx_file((dir / "model.onnx").string(), {}, &c.report);
  }
  const std::filesystem::path data = dir / "test_data_set_0";
  for (size_t i = 0; i < c.graph.inputs.size(); ++i) {
    onnx::TensorProto t;
    if (!t.ParseFromString(read_file_bytes(data / ("input_" + std::to_string(i) + ".pb"))))
      throw std::runtime_error("input_" + std::to_string(i) + ".pb does not parse");
    c.inputs[t.name().empty() ? c.graph.inputs[i] : t.name()] = value_of_proto(t);
  }
  for (size_t i = 0; i < c.graph.outputs.size(); ++i) {
    onnx::TensorProto t;
    if (!t.ParseFromString(read_file_bytes(data / ("output_" + std::to_string(i) + ".pb"))))
      throw std::runtime_error("output_" + std::to_string(i) + ".pb does not parse");
    c.expected[t.name().empty() ? c.graph.outputs[i] : t.name()] = value_of_proto(t);
  }
  return c;
}

}  // namespace webtune::test
