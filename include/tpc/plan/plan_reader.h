// Reading a plan folder written by plan_writer.h: the manifest `plan.json`, and each
// rank's files checked against it (present, regular, the size and SHA-256 the manifest
// records), so that a truncated, swapped or edited file is refused before any rank runs.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tpc/proto/plan.pb.h"

namespace tpc::plan {

// The most ranks a manifest may name.
inline constexpr int64_t kMaxRanks = 65536;

// Parses and checks `dir/plan.json`: one "tp" mesh axis of N ranks, ranks 0..N-1 in
// order, file names that stay inside the folder, sizes that are not negative. Errors
// name the file and the field.
absl::StatusOr<proto::Plan> ReadManifest(const std::string& dir);

// Checks rank `rank`'s model and weights files against `plan`: regular files of the
// recorded sizes and, when `hashes`, the recorded SHA-256. Errors name the rank and file.
absl::Status VerifyRankFiles(const std::string& dir, const proto::Plan& plan, int64_t rank,
                             bool hashes);

}  // namespace tpc::plan
