#include "tpc/ir/sharding.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpc::ir {

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "sum";
}

std::optional<ReduceOp> ReduceOpFromName(std::string_view name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "max") return ReduceOp::kMax;
  if (name == "min") return ReduceOp::kMin;
  if (name == "avg") return ReduceOp::kAvg;
  return std::nullopt;
}

Placement Placement::ShardInWeightedBlocks(int64_t d, std::vector<int64_t> weights) {
  if (std::any_of(weights.begin(), weights.end(), [](int64_t w) { return w < 1; })) {
    return Shard(d);  // not blocks (callers check BlockUnits against the dim)
  }
  int64_t g = 0;
  for (int64_t w : weights) g = std::gcd(g, w);
  if (g > 1) {
    for (int64_t& w : weights) w /= g;
  }
  const int64_t k = static_cast<int64_t>(weights.size());
  if (k <= 1) return Shard(d);
  if (std::all_of(weights.begin(), weights.end(), [&](int64_t w) { return w == weights[0]; })) {
    return Shard(d, k);
  }
  return {Kind::kShard, d, k, ReduceOp::kSum, {}, 0, std::move(weights)};
}

int64_t Placement::BlockUnits() const {
  if (block_weights.empty()) return blocks;
  // (Saturating: weights read from a file may be anything; PartRuns refuses the result.)
  int64_t units = 0;
  for (int64_t w : block_weights) {
    if (w < 1 || w > kMaxBlockUnits || units + w > kMaxBlockUnits) return kMaxBlockUnits + 1;
    units += w;
  }
  return units;
}

std::vector<DimRun> PartRuns(const Placement& p, int64_t size, int64_t part, int64_t parts) {
  const int64_t units = p.BlockUnits();
  if (p.kind != Placement::Kind::kShard || p.has_symbolic_blocks() || units < 1 ||
      units > Placement::kMaxBlockUnits || parts < 1 || parts > Placement::kMaxBlockUnits ||
      part < 0 || part >= parts || size < 0 || size % (units * parts) != 0 ||
      (!p.block_weights.empty() && p.blocks != static_cast<int64_t>(p.block_weights.size()))) {
    return {};
  }
  const int64_t unit = size / units;
  std::vector<DimRun> runs;
  int64_t begin = 0;
  for (int64_t b = 0; b < p.blocks; ++b) {
    const int64_t block =
        unit * (p.block_weights.empty() ? 1 : p.block_weights[static_cast<size_t>(b)]);
    runs.push_back({begin + part * (block / parts), block / parts});
    begin += block;
  }
  return runs;
}

std::string Placement::ToString() const {
  switch (kind) {
    case Kind::kReplicate:
      return "R";
    case Kind::kShard:
      if (!symbolic_blocks.empty()) return absl::StrCat("S(", dim, "/", symbolic_blocks, ")");
      if (groups > 0) return absl::StrCat("S(", dim, "@", groups, ")");
      if (!block_weights.empty()) {
        return absl::StrCat("S(", dim, "/", absl::StrJoin(block_weights, ":"), ")");
      }
      return blocks == 1 ? absl::StrCat("S(", dim, ")") : absl::StrCat("S(", dim, "/", blocks, ")");
    case Kind::kPartial:
      return absl::StrCat("P(", ReduceOpName(reduce), ")");
  }
  return "R";
}

std::optional<Placement> Placement::Parse(std::string_view text, bool symbolic) {
  if (text == "R") return Replicate();
  if (text.size() < 4 || text[1] != '(' || text.back() != ')') return std::nullopt;
  std::string_view arg = text.substr(2, text.size() - 3);
  if (text[0] == 'S') {
    int64_t d = 0;
    int64_t blocks = 1;
    const char* end = arg.data() + arg.size();
    auto [ptr, ec] = std::from_chars(arg.data(), end, d);
    if (ec != std::errc()) return std::nullopt;
    if (ptr != end && *ptr == '/' && symbolic && ptr + 1 != end &&
        !(ptr[1] >= '0' && ptr[1] <= '9')) {
      const std::string_view count(ptr + 1, static_cast<size_t>(end - ptr - 1));
      for (char c : count) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '*';
        if (!ok) return std::nullopt;
      }
      return ShardInSymbolicBlocks(d, std::string(count));
    }
    if (ptr != end && *ptr == '@') {
      int64_t groups = 0;
      auto [p2, ec2] = std::from_chars(ptr + 1, end, groups);
      if (ec2 != std::errc() || groups < 2 || p2 != end) return std::nullopt;
      return ShardInGroups(d, groups);
    }
    if (ptr != end && *ptr == '/') {
      auto [p2, ec2] = std::from_chars(ptr + 1, end, blocks);
      if (ec2 != std::errc() || blocks < 1) return std::nullopt;
      ptr = p2;
      if (ptr != end && *ptr == ':') {  // unequal blocks, `S(2/1:1:2)`
        std::vector<int64_t> weights = {blocks};
        while (ptr != end && *ptr == ':') {
          int64_t w = 0;
          auto [p3, ec3] = std::from_chars(ptr + 1, end, w);
          if (ec3 != std::errc() || w < 1) return std::nullopt;
          weights.push_back(w);
          ptr = p3;
        }
        if (ptr != end) return std::nullopt;
        Placement p = ShardInWeightedBlocks(d, weights);
        // Only the normalized form reads back (equal weights are written `S(d/k)`).
        if (p.block_weights != weights) return std::nullopt;
        return p;
      }
      if (blocks < 2) return std::nullopt;
    }
    if (ptr != end) return std::nullopt;
    return Shard(d, blocks);
  }
  if (text[0] == 'P') {
    std::optional<ReduceOp> op = ReduceOpFromName(arg);
    if (!op) return std::nullopt;
    return Partial(*op);
  }
  return std::nullopt;
}

std::string Sharding::ToString() const {
  return absl::StrJoin(placements, ", ",
                       [](std::string* out, const Placement& p) { out->append(p.ToString()); });
}

}  // namespace tpc::ir
