#include "tpc/runtime/placement_io.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tpc/util/status_macros.h"

namespace tpc::runtime {

namespace {

// dim `d` of a rank-`rank` tensor, negative counting from the end; -1 when out of range.
int64_t NormalizeDim(int64_t d, int64_t rank) {
  if (d < 0) d += rank;
  return d >= 0 && d < rank ? d : -1;
}

// A shape as [outer, dim, inner] around dim `d`, inner in bytes.
struct Blocks {
  int64_t outer = 1, dim = 1, inner_bytes = 1;
};

Blocks BlocksAround(const Tensor& t, int64_t d) {
  Blocks b;
  for (int64_t i = 0; i < d; ++i) b.outer *= t.dim(i);
  b.dim = t.dim(d);
  b.inner_bytes = ir::DTypeSize(t.dtype());
  for (int64_t i = d + 1; i < t.rank(); ++i) b.inner_bytes *= t.dim(i);
  return b;
}

// A blocked split S(d/k) is k splits of dim `dim / k` side by side: the same
// [outer, dim, inner] view with the blocks moved into `outer` (dim % k == 0).
Blocks InBlocks(Blocks b, int64_t k) {
  b.outer *= k;
  b.dim /= k;
  return b;
}

absl::StatusOr<ir::Placement> FromProto(const proto::Placement& p, const std::string& what) {
  switch (p.kind()) {
    case proto::Placement::REPLICATE:
      return ir::Placement::Replicate();
    case proto::Placement::SHARD:
      if (p.blocks() < 0 || (p.blocks() > 1 && p.groups() != 0)) {
        return absl::InvalidArgumentError(absl::StrCat("plan.json: ", what, ": blocks ", p.blocks(),
                                                       " (0, 1, or more than 1 ",
                                                       "without groups)"));
      }
      if (p.groups() == 0) return ir::Placement::Shard(p.dim(), std::max<int64_t>(p.blocks(), 1));
      if (p.groups() < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan.json: ", what, ": groups ", p.groups(), " (0, or at least 2)"));
      }
      return ir::Placement::ShardInGroups(p.dim(), p.groups());
    case proto::Placement::PARTIAL: {
      auto op = ir::ReduceOpFromName(p.reduce());
      if (!op) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan.json: ", what, ": reduce '", p.reduce(), "' is not one of sum, max, min, avg"));
      }
      return ir::Placement::Partial(*op);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("plan.json: ", what, ": unknown placement kind ", p.kind()));
  }
}

}  // namespace

absl::StatusOr<IoPlacements> IoPlacementsFromPlan(const proto::Plan& plan) {
  IoPlacements io;
  io.ranks = plan.ranks_size();
  auto read = [&](const google::protobuf::RepeatedPtrField<proto::ValuePlacement>& values,
                  const char* kind, std::map<std::string, ir::Placement>& out) -> absl::Status {
    for (const proto::ValuePlacement& v : values) {
      const std::string what = absl::StrCat(kind, " '", v.value(), "'");
      if (v.placements_size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("plan.json: ", what, " has ",
                                                       v.placements_size(),
                                                       " placements, expected 1 (one mesh axis)"));
      }
      TPC_ASSIGN_OR_RETURN(out[v.value()], FromProto(v.placements(0), what));
    }
    return absl::OkStatus();
  };
  TPC_RETURN_IF_ERROR(read(plan.inputs(), "input", io.inputs));
  TPC_RETURN_IF_ERROR(read(plan.outputs(), "output", io.outputs));
  for (const auto* placements : {&io.inputs, &io.outputs}) {
    for (const auto& [name, p] : *placements) {
      if (p.has_groups() && (p.groups >= io.ranks || io.ranks % p.groups != 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("plan.json: '", name, "' is placed ", p.ToString(), ": ", p.groups,
                         " groups do not divide the plan's ", io.ranks, " ranks"));
      }
    }
  }
  for (const auto& kv : io.inputs) {
    if (kv.second.kind == ir::Placement::Kind::kPartial) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.json: input '", kv.first,
                       "' is placed P: a full input cannot be given as partial sums"));
    }
  }
  return io;
}

ir::Placement PlacementOf(const std::map<std::string, ir::Placement>& placements,
                          const std::string& name) {
  auto it = placements.find(name);
  return it == placements.end() ? ir::Placement::Replicate() : it->second;
}

ir::TensorType FullType(const ir::TensorType& rank_type, const ir::Placement& p, int ranks) {
  if (p.kind != ir::Placement::Kind::kShard || !rank_type.shape) return rank_type;
  ir::TensorType full = rank_type;
  const int64_t d = NormalizeDim(p.dim, rank_type.rank());
  if (d < 0) return full;
  ir::Dim& dim = (*full.shape)[static_cast<size_t>(d)];
  if (!dim.is_unknown()) dim = dim * ir::Dim(p.Parts(ranks));
  return full;
}

std::vector<IoSpec> FullSpecs(const std::vector<IoSpec>& rank_specs,
                              const std::map<std::string, ir::Placement>& placements, int ranks) {
  std::vector<IoSpec> out;
  for (const IoSpec& s : rank_specs)
    out.push_back({s.name, FullType(s.type, PlacementOf(placements, s.name), ranks)});
  return out;
}

absl::StatusOr<Tensor> SliceForRank(const std::string& name, const Tensor& full,
                                    const ir::Placement& p, int rank, int ranks) {
  if (p.kind != ir::Placement::Kind::kShard || ranks == 1) return full;
  const int64_t d = NormalizeDim(p.dim, full.rank());
  if (d < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", name, "': the plan splits dim ", p.dim, " (", p.ToString(),
        ") but the tensor given has ", full.rank(), " dims (", full.TypeString(), ")"));
  }
  const int64_t parts = p.Parts(ranks);
  const int64_t k = std::max<int64_t>(p.blocks, 1);
  if (full.dim(d) % (parts * k) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("input '", name, "': dim ", d, " is ", full.dim(d), ", not a multiple of ",
                     parts * k, ": the plan splits it in ", parts, " parts over ", ranks, " ranks",
                     k > 1 ? absl::StrCat(", in each of ", k, " blocks") : "", " (", p.ToString(),
                     "; given ", full.TypeString(), ")"));
  }
  const Blocks b = InBlocks(BlocksAround(full, d), k);
  const int64_t part = b.dim / parts;
  const int64_t index = p.PartOf(rank, ranks);
  std::vector<int64_t> shape = full.shape();
  shape[static_cast<size_t>(d)] = part * k;
  Tensor out = Tensor::Allocate(full.dtype(), shape);
  const size_t chunk = static_cast<size_t>(part * b.inner_bytes);
  for (int64_t o = 0; o < b.outer; ++o) {
    const uint8_t* src = full.raw() + (o * b.dim + index * part) * b.inner_bytes;
    if (chunk > 0) std::memcpy(out.raw() + static_cast<size_t>(o) * chunk, src, chunk);
  }
  return out;
}

absl::StatusOr<std::map<std::string, Tensor>> InputsForRank(
    const std::map<std::string, Tensor>& full, const IoPlacements& io, int rank) {
  std::map<std::string, Tensor> out;
  for (const auto& kv : full) {
    TPC_ASSIGN_OR_RETURN(
        out[kv.first],
        SliceForRank(kv.first, kv.second, PlacementOf(io.inputs, kv.first), rank, io.ranks));
  }
  return out;
}

absl::StatusOr<Tensor> AssembleOutput(const std::string& name, const Tensor& local,
                                      const ir::Placement& p, Communicator& comm) {
  const int n = comm.size();
  if (n == 1 || p.kind == ir::Placement::Kind::kReplicate) return local;
  if (p.kind == ir::Placement::Kind::kPartial) {
    Tensor out = Tensor::Allocate(local.dtype(), local.shape());
    absl::Status s =
        comm.AllReduce(local.raw(), out.raw(), local.num_elements(), local.dtype(), p.reduce);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("assembling output '", name, "' (", p.ToString(),
                                                 "): ", std::string(s.message())));
    }
    return out;
  }
  const int64_t d = NormalizeDim(p.dim, local.rank());
  if (d < 0) {
    return absl::InternalError(absl::StrCat("output '", name, "' is placed ", p.ToString(),
                                            " but has ", local.rank(), " dims"));
  }
  Tensor gathered = Tensor::Allocate(local.dtype(), {n * local.num_elements()});
  absl::Status s = comm.AllGather(local.raw(), gathered.raw(), local.num_elements(), local.dtype());
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("assembling output '", name, "' (", p.ToString(),
                                               "): ", std::string(s.message())));
  }
  // Block k of `gathered` is rank k's part; its slabs go to part k's span of dim d (of
  // each block of it, S(d/b)). In groups (S(d@g)) part k is held by ranks k·n/g, ...,
  // (k+1)·n/g - 1: the first one's.
  const int64_t parts = p.Parts(n);
  const int64_t blocks = std::max<int64_t>(p.blocks, 1);
  if (local.dim(d) % blocks != 0) {
    return absl::InternalError(absl::StrCat("output '", name, "' is placed ", p.ToString(),
                                            " but its dim ", d, " is ", local.dim(d)));
  }
  const Blocks b = InBlocks(BlocksAround(local, d), blocks);
  std::vector<int64_t> shape = local.shape();
  shape[static_cast<size_t>(d)] *= parts;
  Tensor out = Tensor::Allocate(local.dtype(), shape);
  const size_t chunk = static_cast<size_t>(b.dim * b.inner_bytes);
  const size_t block = static_cast<size_t>(b.outer) * chunk;
  for (int64_t k = 0; k < parts; ++k) {
    const int64_t holder = k * (n / parts);
    for (int64_t o = 0; o < b.outer; ++o) {
      const uint8_t* src =
          gathered.raw() + static_cast<size_t>(holder) * block + static_cast<size_t>(o) * chunk;
      uint8_t* dst = out.raw() + static_cast<size_t>((o * parts + k) * b.dim * b.inner_bytes);
      if (chunk > 0) std::memcpy(dst, src, chunk);
    }
  }
  return out;
}

}  // namespace tpc::runtime
