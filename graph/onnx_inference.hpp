#pragma once
/// \file onnx_inference.hpp
/// ONNX's checker and shape inference, run where a crash cannot take webtune down.
///
/// libonnx 1.12's shape inference trusts the model: fuzzing found a Conv with a zero stride
/// dividing by zero inside `convPoolShapeInference` (SIGFPE), and the library is not webtune's to
/// fix. A model file comes from a stranger (`webtune import`, `tune --model`, the farm), so the
/// checker and inference run in a forked child process: the child runs
/// onnx::checker::check_model and onnx::shape_inference::InferShapes (strict mode, data
/// propagation) on its copy-on-write copy of the model and sends back only what inference
/// added (the graph's value_info and outputs, a few KiB, never the weights). A child that dies
/// on a signal, exits otherwise, or runs past the time limit is a refused model, not a crash.
/// Private to graph/ (the importer's implementation).

#include <onnx/onnx_pb.h>

#include <string>

namespace webtune::graph::detail {

/// The most seconds inference may take before the model is refused (a real model takes
/// milliseconds; ResNet-50 about 50 ms).
inline constexpr int kInferenceTimeoutS = 60;

/// Checks `model` and infers its shapes into `model.graph().value_info()` and the graph
/// outputs' types. Returns "" on success, or the reason the model is refused: the checker's or
/// inference's message, or how the isolated child ended ("shape inference crashed (signal 8,
/// SIGFPE) ..."). Throws std::runtime_error only when no child process can be made.
std::string check_and_infer_shapes(onnx::ModelProto& model);

}  // namespace webtune::graph::detail
