// Reading and writing tensors: ONNX TensorProto files (`input_0.pb`, the ONNX test-data
// layout) and numpy `.npy` files; deterministic random inputs.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tpc/ir/tensor_type.h"
#include "tpc/runtime/shape_eval.h"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime {

struct NamedTensor {
  std::string name;  // the TensorProto's name; empty for .npy
  Tensor tensor;
};

// By extension: `.pb` (onnx.TensorProto) or `.npy`. Errors name the file.
absl::StatusOr<NamedTensor> ReadTensorFile(const std::string& path);
absl::StatusOr<NamedTensor> ReadTensorProtoFile(const std::string& path);
absl::StatusOr<Tensor> ReadNpyFile(const std::string& path);

absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& t,
                                  const std::string& name);
absl::Status WriteNpyFile(const std::string& path, const Tensor& t);

// A tensor of `type` with its symbols bound by `bindings` (an error names the unbound
// symbol), filled deterministically from `seed`: floats uniform in [-1, 1), integers
// uniform in [0, int_high), bools uniform.
absl::StatusOr<Tensor> RandomTensor(const std::string& name, const ir::TensorType& type,
                                    const SymbolBindings& bindings, uint64_t seed,
                                    int64_t int_high = 32);

}  // namespace tpc::runtime
