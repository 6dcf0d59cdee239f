// Internal to the ONNX stage: libonnx's own shape inference, the fallback for an operator
// of the default domain that has no shape rule in tpc.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "tpc/onnx/shape_inference.h"

namespace tpc::onnx::internal {

// True when libonnx has a schema with an inference function for the operator.
bool HasLibOnnxInference(std::string_view domain, std::string_view op_type, int64_t opset);

// Types the node's outputs by its schema's inference function. Static dims are exact; a
// dim libonnx gives as a dim_param naming an input's dim is that dim (`batch` passes
// through); any other dim is unknown. For an operator whose shapes changed after the
// newest opset libonnx knows, only the element types and ranks are kept.
absl::Status InferWithLibOnnx(InferenceContext& ctx);

}  // namespace tpc::onnx::internal
