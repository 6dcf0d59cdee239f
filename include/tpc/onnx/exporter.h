// IR → ONNX. The result passes onnx.checker and runs in onnxruntime with the results of
// the model it came from.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "tpc/ir/graph.h"

namespace tpc::onnx {

struct ExportOptions {
  // File name (relative to the model's folder) for external data; empty keeps every
  // tensor inside the model.
  std::string weights_file;
  // Tensors of at least this many bytes go to `weights_file`.
  int64_t external_threshold_bytes = 1024;
  // Offsets in the weights file are multiples of this (page-friendly for mmap).
  int64_t alignment = 64;
  // Write value_info entries with the inferred types of intermediate values.
  bool value_info = true;
  std::string producer_name = "tpc";
  std::string producer_version;
  // The model's metadata_props, in order.
  std::vector<std::pair<std::string, std::string>> metadata;
  // Writes the bytes of a constant whose value's type differs from its data (a
  // per-rank constant: each rank's file holds its slice). Called with the constant
  // node; must write exactly the bytes of the value's type.
  std::function<absl::Status(const ir::Node& constant, std::ostream& out)> write_constant;
  // Sees every byte written to the weights file, in order (to hash it on the way).
  std::function<void(const char* data, size_t size)> observe_weights;
};

// Writes `graph` to `onnx_path` (and `weights_file` beside it). Weight bytes stream
// from their mapped source into the file; nothing is copied in memory.
absl::Status ExportModel(const ir::Graph& graph, const std::string& onnx_path,
                         const ExportOptions& options = {});

// The model with every tensor inline (small graphs, tests).
absl::StatusOr<::onnx::ModelProto> ExportModelProto(const ir::Graph& graph,
                                                    const ExportOptions& options = {});

}  // namespace tpc::onnx
