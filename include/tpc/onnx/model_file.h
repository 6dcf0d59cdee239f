// Reading an ONNX file without copying its weights.
//
// The file is mapped; a scan of the protobuf wire format finds the `raw_data` bytes of
// every graph initializer and leaves them in place. Everything else (nodes, types,
// small tensors) is parsed normally. A model with gigabytes of embedded weights
// therefore costs a parse of its small parts, not a copy of the weights.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "tpc/util/mapped_file.h"

namespace tpc::onnx {

struct ByteSpan {
  size_t offset = 0;
  size_t length = 0;
};

struct ModelFile {
  std::string path;
  std::shared_ptr<const MappedFile> file;
  // The model with every graph initializer's raw_data cleared.
  ::onnx::ModelProto proto;
  // For graph initializer i, the bytes of its raw_data inside `file`, if it had any.
  std::vector<std::optional<ByteSpan>> raw_data;
};

// Errors name the file: not a protobuf, truncated, not an ONNX model.
absl::StatusOr<ModelFile> ReadModelFile(const std::string& path);

// The same for bytes already in memory (tests); raw_data spans refer to `bytes`, which
// must outlive the result's use — they are kept alive through `keep`.
absl::StatusOr<ModelFile> ReadModelBytes(std::shared_ptr<const MappedFile> keep,
                                         const std::string& name);

}  // namespace tpc::onnx
