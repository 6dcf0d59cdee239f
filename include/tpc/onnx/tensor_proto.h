// ONNX TensorProto ⇄ ir::Tensor.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "tpc/ir/tensor.h"
#include "tpc/onnx/model_file.h"

namespace tpc::onnx {

// Maps external-data files of one model, each once, and checks their paths: relative,
// inside the model's folder, present.
class ExternalDataFiles {
 public:
  explicit ExternalDataFiles(std::string model_dir) : model_dir_(std::move(model_dir)) {}
  absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& location,
                                                         const std::string& tensor_name);

 private:
  std::string model_dir_;
  std::map<std::string, std::shared_ptr<const MappedFile>> files_;
};

// Converts a tensor. `raw` (optional) is the tensor's raw_data left in the mapped model
// file by ReadModelFile; external data is mapped through `external`. Typed fields
// (float_data, int64_data, ...) are copied, they are small by nature.
absl::StatusOr<ir::Tensor> TensorFromProto(const ::onnx::TensorProto& proto,
                                           const std::optional<ByteSpan>& raw,
                                           const std::shared_ptr<const MappedFile>& model_file,
                                           ExternalDataFiles* external);

// A TensorProto with the data inline as raw_data (for small tensors and attributes).
::onnx::TensorProto TensorToProto(const ir::Tensor& tensor, const std::string& name);

}  // namespace tpc::onnx
