// Half-precision plans (tp-compile --dtype f16|bf16): every f32 value of the partitioned
// graph becomes f16 or bf16 (weights are converted as the plan writer slices them), and
// the graph's f32 inputs and outputs keep their declared type behind a Cast, so a plan
// takes and gives what the original model does.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "tpc/ir/graph.h"

namespace tpc::plan {

// Converts `graph` to `to` (kF32: nothing; kF16, kBF16). An operator whose ONNX schema
// does not take `to` (bf16 `Cos` at opset 7) computes in f32 between Casts. Refuses
// quantized operators (their scales are f32 by definition), naming the node.
absl::Status ConvertFloatPrecision(ir::Graph& graph, ir::DType to);

// Whether ConvertFloatPrecision to `to` would make a plan of that precision: it converts
// f32, so a model whose float weights are mostly of another type (f64, or f16 asked as
// bf16) is refused, naming the type (the plan would claim `to` and keep them).
absl::Status CheckConvertible(const ir::Graph& graph, ir::DType to);

// The tolerance documented (docs/cuda.md) for a plan of `dtype` (the manifest's "dtype"
// option: "f16", "bf16"; anything else is f32) against the unsharded f32 run:
// |got − want| ≤ atol + rtol · |want|.
struct Tolerance {
  double rtol = 1e-4, atol = 1e-5;
};
Tolerance DocumentedTolerance(const std::string& dtype);

}  // namespace tpc::plan
