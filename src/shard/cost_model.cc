#include "tpc/shard/cost_model.h"

#include <cmath>

namespace tpc::shard {

using ir::Placement;
using Kind = ir::Placement::Kind;

// Figures are the usual public ones: NVLink 4 gives H100 450 GB/s per direction,
// NVLink 3 gives A100 300 GB/s, PCIe 4 x16 about 25 GB/s; dense bf16 rates of
// ~990 and ~312 TFLOP/s are derated to what large GEMMs reach.
DeviceProfile DeviceProfile::H100NvLink() { return {"h100-nvlink", 450e9, 3e-6, 700e12}; }
DeviceProfile DeviceProfile::A100NvLink() { return {"a100-nvlink", 300e9, 5e-6, 250e12}; }
DeviceProfile DeviceProfile::Pcie4() { return {"pcie4", 25e9, 10e-6, 250e12}; }

std::optional<DeviceProfile> DeviceProfile::ByName(const std::string& name) {
  if (name == "h100-nvlink") return H100NvLink();
  if (name == "a100-nvlink") return A100NvLink();
  if (name == "pcie4") return Pcie4();
  return std::nullopt;
}

std::vector<std::string> DeviceProfile::Names() { return {"h100-nvlink", "a100-nvlink", "pcie4"}; }

const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all-reduce";
    case CollectiveKind::kAllGather:
      return "all-gather";
    case CollectiveKind::kReduceScatter:
      return "reduce-scatter";
    case CollectiveKind::kAllToAll:
      return "all-to-all";
  }
  return "?";
}

double CollectivePicos(const DeviceProfile& p, CollectiveKind kind, int64_t n, double bytes) {
  if (n <= 1) return 0;
  const double steps = static_cast<double>(n - 1);
  const double frac = steps / static_cast<double>(n);
  // One pass around the ring: what an all-gather or a reduce-scatter costs.
  const double pass =
      std::round((steps * p.latency_s + frac * bytes / p.link_bandwidth_bytes_per_s) * 1e12);
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2 * pass;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return pass;
    case CollectiveKind::kAllToAll:
      return std::round((steps * p.latency_s +
                         frac * bytes / static_cast<double>(n) / p.link_bandwidth_bytes_per_s) *
                        1e12);
  }
  return 0;
}

bool GroupSlice(const Placement& from, const Placement& to) {
  return from.has_groups() && to.kind == Kind::kShard && !to.has_groups() && to.blocks == 1 &&
         !to.has_symbolic_blocks() && to.dim == from.dim;
}

bool TransitionPossible(const Placement& from, const Placement& to) {
  if (from == to) return true;
  // Blocks counted only at run time, or unequal blocks: no collective or local slice
  // knows them (unequal blocks come from weights and graph inputs, sliced when the plan
  // is written or the run starts, and end at the Split that cuts them).
  if (from.has_symbolic_blocks() || to.has_symbolic_blocks()) return false;
  if (from.has_weighted_blocks() || to.has_weighted_blocks()) return false;
  if (to.kind == Kind::kPartial) {
    // R → P(sum): keep the value on one rank; R → P(max|min|avg): the value itself.
    // S → P(sum): zero-pad the local block. Nothing else becomes partial locally (a
    // group's ranks hold the same part of S(d@g): it is not a sum of theirs; a blocked
    // split's parts are not one run of the dim, which one Pad cannot place).
    if (from.kind == Kind::kReplicate) return true;
    return from.kind == Kind::kShard && !from.has_groups() && from.blocks == 1 &&
           to.reduce == ir::ReduceOp::kSum;
  }
  // S → R, S → S', P → R, P → S: a collective; R → S(d@g), S(d@g) → S(d): local.
  return true;
}

std::optional<CollectiveKind> TransitionCollective(const Placement& from, const Placement& to) {
  if (from == to || from.kind == Kind::kReplicate) return std::nullopt;
  if (to.kind == Kind::kPartial) return std::nullopt;  // local, see TransitionPossible
  if (from.has_groups() || to.has_groups()) {
    // A rank's part of its group's part is a local slice. Anything else goes through
    // the whole value: an all-reduce of partial sums, or an all-gather (S(d@g) first
    // sliced to S(d), so each rank brings a different N-th), then a local slice.
    if (GroupSlice(from, to)) return std::nullopt;
    return from.kind == Kind::kPartial ? CollectiveKind::kAllReduce : CollectiveKind::kAllGather;
  }
  if (from.kind == Kind::kShard) {
    return to.kind == Kind::kReplicate ? CollectiveKind::kAllGather : CollectiveKind::kAllToAll;
  }
  // from partial
  return to.kind == Kind::kReplicate ? CollectiveKind::kAllReduce : CollectiveKind::kReduceScatter;
}

double TransitionPicos(const DeviceProfile& profile, const Placement& from, const Placement& to,
                       int64_t n, double bytes) {
  auto kind = TransitionCollective(from, to);
  if (!kind) return 0.0;
  // Gathering S(d@g) moves every rank's copy of its group's part: N/g times the bytes.
  if (from.has_groups() && *kind == CollectiveKind::kAllGather && from.groups > 0) {
    bytes *= static_cast<double>(n) / static_cast<double>(from.groups);
  }
  return CollectivePicos(profile, *kind, n, bytes);
}

}  // namespace tpc::shard
