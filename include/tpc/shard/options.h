// Every option of the shard stage, in one documented struct.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "tpc/ir/sharding.h"
#include "tpc/shard/cost_model.h"
#include "tpc/shard/mesh.h"

namespace tpc::shard {

enum class Objective {
  // Minimise per-rank weight bytes first, then (with sequence parallelism) per-rank
  // activation bytes of the values between blocks, then modelled collective time.
  kMemory,
  // Minimise modelled step time (compute at the profile's rate + collectives), with
  // per-rank weight bytes at most `memory_budget_bytes` when given.
  kTime,
};

struct ShardOptions {
  Mesh mesh = Mesh::Tp(1);
  Objective objective = Objective::kMemory;
  DeviceProfile profile = DeviceProfile::H100NvLink();
  // Sizes of symbolic dims for the cost model (`--dim seq=2048`). A size given here
  // that N divides also makes the symbol divisible.
  std::map<std::string, int64_t> dim_sizes;
  // Symbols assumed divisible by N (`--divisible seq`).
  std::set<std::string> divisible;
  // Size used for a symbol with no --dim.
  int64_t default_dim_size = 512;
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
  // Set by the shard pass under --memory-budget: the price of a weight byte in
  // picoseconds of step time (the Lagrange multiplier of the budget).
  double weight_price_ps_per_byte = 0;
};

}  // namespace tpc::shard
