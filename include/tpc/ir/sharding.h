// The sharding slot of an IR value: one placement per mesh axis. The shard stage
// decides placements; the IR only stores and prints them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpc::ir {

enum class ReduceOp { kSum, kMax, kMin, kAvg };

struct Placement {
  enum class Kind { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int64_t dim = 0;                 // for kShard
  ReduceOp reduce = ReduceOp::kSum;  // for kPartial

  static Placement Replicate() { return {}; }
  static Placement Shard(int64_t d) { return {Kind::kShard, d, ReduceOp::kSum}; }
  static Placement Partial(ReduceOp op) { return {Kind::kPartial, 0, op}; }
  bool operator==(const Placement&) const = default;
  // `R`, `S(2)`, `P(sum)`.
  std::string ToString() const;
  static std::optional<Placement> Parse(std::string_view text);
};

// Placements in the order of the mesh axes (one axis, `tp`, for now).
struct Sharding {
  std::vector<Placement> placements;
  bool operator==(const Sharding&) const = default;
  std::string ToString() const;  // `S(2)` or `S(2), R` for several axes
};

}  // namespace tpc::ir
