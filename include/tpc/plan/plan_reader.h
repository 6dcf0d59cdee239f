// Reading a plan folder written by plan_writer.h: the manifest `plan.json`, and each
// rank's files checked against it (present, regular, the size and SHA-256 the manifest
// records), so that a truncated, swapped or edited file is refused before any rank runs.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tpc/proto/plan.pb.h"

namespace tpc::plan {

// The most ranks a manifest may name (tp-run starts one thread or process per rank).
inline constexpr int64_t kMaxRanks = 1024;

// What a verified file was: compared again after the ranks are imported, so a plan
// rewritten meanwhile (tp-compile --force into the same folder) is not run half old.
struct FileStamp {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
struct RankStamps {
  FileStamp model;
  FileStamp weights;
};

// Parses and checks `dir/plan.json`: one "tp" mesh axis of N ranks, ranks 0..N-1 in
// order, file names that stay inside the folder, sizes that are not negative. Errors
// name the file and the field.
absl::StatusOr<proto::Plan> ReadManifest(const std::string& dir);

// Checks rank `rank`'s model and weights files against `plan`: regular files of the
// recorded sizes and, when `hashes`, the recorded SHA-256. Errors name the rank and file.
// `stamps`, when given, receives what the files were.
absl::Status VerifyRankFiles(const std::string& dir, const proto::Plan& plan, int64_t rank,
                             bool hashes, RankStamps* stamps = nullptr);

// An error when rank `rank`'s files are no longer the ones `stamps` describes.
absl::Status CheckRankUnchanged(const std::string& dir, const proto::Plan& plan, int64_t rank,
                                const RankStamps& stamps);

}  // namespace tpc::plan
