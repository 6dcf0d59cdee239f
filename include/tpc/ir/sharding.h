// The sharding slot of an IR value: one placement per mesh axis. The shard stage
// decides placements; the IR only stores and prints them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpc::ir {

enum class ReduceOp { kSum, kMax, kMin, kAvg };
// "sum", "max", "min", "avg" (the `reduce` attribute of the tpc collectives).
const char* ReduceOpName(ReduceOp op);
std::optional<ReduceOp> ReduceOpFromName(std::string_view name);

struct Placement {
  enum class Kind { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int64_t dim = 0;  // for kShard
  // For kShard: dim `dim` is viewed as `blocks` equal blocks and each block is split
  // N ways (a fused QKV projection split so every rank holds its part of Q, K and V).
  // Printed `S(2/3)`; 1 is a plain contiguous split, `S(2)`.
  int64_t blocks = 1;
  ReduceOp reduce = ReduceOp::kSum;  // for kPartial
  // For kShard: a block count known only at run time, a symbolic dim (`batch`; `blocks`
  // is then 0). Heads folded into the batch, `[batch·heads, s, d]` split by heads, is
  // `S(0/batch)`: batch blocks of heads·s·d, each split N ways. Such a value only ever
  // meets ops that keep it as it is (the shard stage allows no transition from or to it).
  std::string symbolic_blocks;
  // For kShard: 0, the dim is split across all N ranks. g (1 < g < N, g divides N): the
  // dim is split in g parts and part p is held whole by the N/g consecutive ranks
  // p·N/g, ..., (p+1)·N/g - 1, a group. Printed `S(1@2)`. Megatron's and vLLM's layout
  // for fewer K/V heads than ranks: each K/V head on its group of N/KV ranks, whose
  // query heads use it. Never with blocks or symbolic blocks.
  int64_t groups = 0;
  // For kShard: empty, or the relative sizes of `blocks` unequal blocks (at least two,
  // not all equal, their gcd 1), each split N ways: a fused projection whose parts
  // differ, `[q | k | v]` of 32, 32 and 64 columns, is `S(2/1:1:2)`; rank r holds its
  // part of each. Values so placed are sliced from weights and graph inputs and cut by a
  // Split; no collective moves them (the shard stage allows no transition from or to
  // them).
  std::vector<int64_t> block_weights;

  static Placement Replicate() { return {}; }
  static Placement Shard(int64_t d, int64_t blocks = 1) {
    return {Kind::kShard, d, blocks, ReduceOp::kSum, {}, 0, {}};
  }
  // Blocks of the relative sizes `weights` (divided by their gcd): S(d/k) when they are
  // k equal ones, S(d) for one (or for a weight below 1).
  static Placement ShardInWeightedBlocks(int64_t d, std::vector<int64_t> weights);
  static Placement Partial(ReduceOp op) { return {Kind::kPartial, 0, 1, op, {}, 0, {}}; }
  static Placement ShardInSymbolicBlocks(int64_t d, std::string blocks) {
    return {Kind::kShard, d, 0, ReduceOp::kSum, std::move(blocks), 0, {}};
  }
  static Placement ShardInGroups(int64_t d, int64_t groups) {
    return {Kind::kShard, d, 1, ReduceOp::kSum, {}, groups, {}};
  }
  bool has_symbolic_blocks() const { return !symbolic_blocks.empty(); }
  bool has_groups() const { return kind == Kind::kShard && groups > 0; }
  bool has_weighted_blocks() const { return !block_weights.empty(); }
  // The units the split dim is cut into before each is split: the sum of the weights of
  // unequal blocks, else `blocks` (the dim must be a multiple of units · parts); past
  // kMaxBlockUnits (a weight below 1 or a sum past it) kMaxBlockUnits + 1.
  int64_t BlockUnits() const;
  static constexpr int64_t kMaxBlockUnits = int64_t{1} << 31;
  // How many distinct parts of the split dim there are over `n` ranks (each block's, for
  // a blocked split): g for a split in groups, else n. 1 when not split.
  int64_t Parts(int64_t n) const {
    if (kind != Kind::kShard) return 1;
    return groups > 0 ? groups : n;
  }
  // Which of those parts rank `rank` of `n` holds.
  int64_t PartOf(int64_t rank, int64_t n) const {
    if (kind != Kind::kShard) return 0;
    return groups > 0 ? rank / (n / groups) : rank;
  }
  bool operator==(const Placement&) const = default;
  // `R`, `S(2)`, `S(2/3)`, `S(2/1:1:2)`, `S(0/batch)`, `S(1@2)`, `P(sum)`.
  std::string ToString() const;
  // `symbolic`: also `S(0/batch)` (the IR text reads it back; users never write one).
  static std::optional<Placement> Parse(std::string_view text, bool symbolic = false);
};

// The runs [begin, begin + length) of a split dim of `size` that part `part` of `parts`
// holds under `p` (a kShard placement without symbolic blocks; parts = p.Parts(n), part
// = p.PartOf(rank, n)), in order: one for a plain split or a split in groups, one per
// block for a blocked one. Empty when `size` is not a multiple of units · parts.
struct DimRun {
  int64_t begin = 0, length = 0;
};
std::vector<DimRun> PartRuns(const Placement& p, int64_t size, int64_t part, int64_t parts);

// Calls f(at, length) for each contiguous run of a part (`runs`, PartRuns') in a tensor
// seen as [outer, size, inner], in the part's own order: `at` and `length` count inner
// slices (at from the tensor's start). Slicing a weight, an input, or assembling an
// output walk the same runs.
template <typename F>
void ForEachPartRun(const std::vector<DimRun>& runs, int64_t outer, int64_t size, F&& f) {
  for (int64_t o = 0; o < outer; ++o) {
    for (const DimRun& run : runs) f(o * size + run.begin, run.length);
  }
}

// Placements in the order of the mesh axes (one axis, `tp`, for now).
struct Sharding {
  std::vector<Placement> placements;
  bool operator==(const Sharding&) const = default;
  std::string ToString() const;  // `S(2)` or `S(2), R` for several axes
};

}  // namespace tpc::ir
