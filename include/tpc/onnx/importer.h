// ONNX → IR.
//
// Validates hard, so later stages can trust the graph: every error names the file or
// the node and the reason (not a protobuf, truncated, missing initializer or input,
// cycle, type mismatch, unsupported operator, external data missing or outside the
// model's folder).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/model_file.h"

namespace tpc::onnx {

struct ImportOptions {
  // Run tpc's shape inference (and fail on unsupported operators).
  bool infer_shapes = true;
  // Verify the resulting IR.
  bool verify = true;
};

// Imports `path` (external data is looked up beside it). Weights stay in the mapped
// files; the graph holds views.
absl::StatusOr<std::unique_ptr<ir::Graph>> ImportModel(const std::string& path,
                                                       const ImportOptions& options = {});

// Imports an already-read model; `model_dir` is where its external data lives.
absl::StatusOr<std::unique_ptr<ir::Graph>> ImportModelFile(const ModelFile& model,
                                                           const std::string& model_dir,
                                                           const ImportOptions& options = {});

// Opsets of the default domain that tpc imports.
inline constexpr int64_t kMinOpset = 11;
inline constexpr int64_t kMaxOpset = 23;

}  // namespace tpc::onnx
