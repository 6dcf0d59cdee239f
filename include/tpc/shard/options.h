// Every option of the shard stage, in one documented struct.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tpc/ir/dim.h"
#include "tpc/ir/sharding.h"
#include "tpc/shard/cost_model.h"
#include "tpc/shard/mesh.h"

namespace tpc::shard {

enum class Objective {
  // Per-rank weight bytes within `weight_slack` of the memory objective's plan, then the
  // shortest modelled step (collectives + compute): what a deployer wants (a few percent
  // more weights for fewer collectives, such as K/V heads replicated when there are
  // fewer than N).
  kBalanced,
  // Minimise per-rank weight bytes first, then modelled collective time, then (with
  // sequence parallelism) values off sequence shards.
  kMemory,
  // Minimise modelled step time (compute at the profile's rate + collectives), with
  // per-rank weight bytes at most `memory_budget_bytes` when given.
  kTime,
};

struct ShardOptions {
  Mesh mesh = Mesh::Tp(1);
  Objective objective = Objective::kBalanced;
  // kBalanced: the most per-rank weight bytes above the memory objective's plan, as a
  // fraction of it (0.05: 5% more). 0 is the memory objective.
  double weight_slack = 0.05;
  DeviceProfile profile = DeviceProfile::H100NvLink();
  // Sizes of symbolic dims for the cost model (`--dim seq=2048`). A size given here
  // that N divides also makes the symbol divisible.
  std::map<std::string, int64_t> dim_sizes;
  // Symbols assumed divisible by N (`--divisible seq`).
  std::set<std::string> divisible;
  // Size used for a symbol with no --dim, and for an unknown dim.
  int64_t default_dim_size = 512;
  // Size used for a dim the data sizes (Dim::SizedByData: NonZero's count, the tokens a
  // mixture of experts routes to one expert), `--dim ?=SIZE`. tp-compile's default is the
  // most elements the symbolic dims of one graph input span (batch·seq of token ids; a
  // cached decoder's attention mask, batch·(past+seq)), since such a count selects rows
  // of the activations: priced as one dim, the
  // collectives on them would look free beside the whole stream's.
  int64_t data_sized_dim_size = 512;
  bool sequence_parallel = false;
  // Name of the sequence symbol for sequence parallelism.
  std::string seq_symbol = "seq";
  std::optional<int64_t> memory_budget_bytes;
  // Placements of graph inputs / outputs by name; default R.
  std::map<std::string, ir::Placement> input_placements;
  std::map<std::string, ir::Placement> output_placements;

  // Filled by the shard pass, not by users: block counts of equal Splits/Concats on
  // float values (3 for a fused QKV), tried as blocked splits `S(d/k)`.
  std::set<int64_t> block_counts;
  // Filled by the shard pass: the relative sizes of unequal Splits' parts on float
  // values (1:1:2 for a fused Q/K/V of 2 query, 2 key and 4 value heads), tried as
  // splits in unequal blocks `S(d/1:1:2)`.
  std::set<std::vector<int64_t>> block_weights;
  // Filled by the shard pass: symbolic block counts, the batch dims that ops fold heads
  // into (`[batch·heads, s, d]`), tried as `S(d/batch)`.
  std::vector<ir::Dim> symbolic_block_counts;
  // Filled by the shard pass: group counts g (1 < g < N, g divides N) of ops that repeat
  // each of g parts across ranks (K/V heads repeated for the query heads of grouped-query
  // attention), tried as splits in groups `S(d@g)`.
  std::set<int64_t> group_counts;
  // Set by the shard pass under --memory-budget: the price of a weight byte in
  // picoseconds of step time (the Lagrange multiplier of the budget).
  double weight_price_ps_per_byte = 0;
  // Set by the shard pass under kBalanced: the per-rank weight bytes the slack allows.
  double slack_budget_bytes = 0;
};

// "balanced", "memory", "time".
const char* ObjectiveName(Objective objective);
// The size the cost model gives d: a static dim's value, a symbolic one's at the sizes
// of `options` (a symbol with no --dim at default_dim_size), an unknown one
// default_dim_size, or data_sized_dim_size when the data sizes it.
double DimSize(const ir::Dim& d, const ShardOptions& options);
std::optional<Objective> ObjectiveFromName(const std::string& name);

}  // namespace tpc::shard
