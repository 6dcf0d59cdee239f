// Writing per-rank plans: `rank{i}.onnx` with its weight shard in `rank{i}.weights`
// for every rank, and the manifest `plan.json` (protobuf's JSON form of
// tpc.proto.Plan, proto/plan.proto).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "tpc/ir/graph.h"

namespace tpc::plan {

struct RankFiles {
  int64_t rank = 0;
  std::string model;         // file name inside the plan folder
  std::string weights;       // file name inside the plan folder (may be absent if no weights)
  int64_t weight_bytes = 0;  // bytes of weights this rank holds (inline ones included)
  std::string model_sha256;
  std::string weights_sha256;
  int64_t model_size = 0;     // bytes of the model file
  int64_t weights_size = 0;   // bytes of the weights file
  std::string source_sha256;  // of the source model (also in the rank file's metadata)
};

struct PlanOptions {
  int64_t tp = 1;
  std::string source_model;  // the path given by the user (or a name for bytes)
  // The source model's SHA-256; empty: hashed from `source_model`.
  std::string source_sha256;
  // Recorded in the manifest (the command-line options that shaped the plan).
  std::map<std::string, std::string> options;
  // Called as weight bytes are written (bytes so far, total), for a progress bar.
  std::function<void(int64_t done, int64_t total)> progress;
};

// Writes every rank's files into `dir` (which must exist) from the partitioned graph.
// Each rank file carries metadata_props tpc.rank, tpc.tp, tpc.source_sha256 and
// tpc.version, and producer tpc with its version.
// Per-rank constants (those with an S(d) sharding) are sliced straight from their
// mapped source; the source files are checked to be intact before each rank.
absl::StatusOr<std::vector<RankFiles>> WriteRankFiles(const ir::Graph& graph,
                                                      const std::string& dir,
                                                      const PlanOptions& options);

// Rank `rank`'s model with every weight inline (its slice of the per-rank ones), with
// the metadata WriteRankFiles gives the file.
absl::StatusOr<::onnx::ModelProto> RankModelProto(const ir::Graph& graph, int64_t rank,
                                                  const PlanOptions& options);

// Bytes of one rank's weights, as its file holds them (inline ones included).
int64_t RankWeightBytes(const ir::Graph& graph, int64_t tp);

// Writes `dir/plan.json`.
absl::Status WriteManifest(const ir::Graph& graph, const std::vector<RankFiles>& ranks,
                           const std::string& dir, const PlanOptions& options);

// The tpc version this build writes into manifests.
const char* Version();

}  // namespace tpc::plan
