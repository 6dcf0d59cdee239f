// Linear algebra: MatMul (batched, broadcasting, 1-D operands), Gemm, Einsum.
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rules.h"

namespace tpc::onnx::shape_rules {
namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// True when two contracted dims cannot be equal.
bool Mismatch(const Dim& a, const Dim& b) { return a.is_static() && b.is_static() && a != b; }

}  // namespace

absl::Status InferMatMul(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 2));
  const DType t = ctx.input_type(0).dtype;
  const auto& sa = ctx.input_type(0).shape;
  const auto& sb = ctx.input_type(1).shape;
  if (!sa.has_value() || !sb.has_value()) {
    SetUnknownRank(ctx, 0, t);
    return absl::OkStatus();
  }
  if (sa->empty() || sb->empty()) return ctx.Error("MatMul of a scalar");
  Dims a = *sa;
  Dims b = *sb;
  const bool vec_a = a.size() == 1;
  const bool vec_b = b.size() == 1;
  if (vec_a) a.insert(a.begin(), Dim(1));
  if (vec_b) b.push_back(Dim(1));
  const Dim& ka = a.back();
  const Dim& kb = b[b.size() - 2];
  if (Mismatch(ka, kb)) {
    return ctx.Error(
        absl::StrCat("cannot multiply ", ir::DimsToString(*sa), " by ", ir::DimsToString(*sb)));
  }
  TPC_ASSIGN_OR_RETURN(
      Dims out, BroadcastShapes(ctx, Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2)));
  if (!vec_a) out.push_back(a[a.size() - 2]);
  if (!vec_b) out.push_back(b.back());
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

// onnxruntime's MatMulNBits: Y[..., N] = A[..., K] · dequant(B)ᵀ (+ bias); B uint8
// [N, k_blocks, block_size · bits / 8], scales N · k_blocks elements ([N, k_blocks] or
// flattened), zero points packed uint8 (N · ceil(k_blocks · bits / 8)) or in A's type
// (N · k_blocks), bias [N]. See include/tpc/runtime/math/nbits.h.
absl::Status InferMatMulNBits(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  const ir::Node& node = ctx.node();
  const int64_t k = node.attr_int("K", 0), n = node.attr_int("N", 0);
  const int64_t bits = node.attr_int("bits", 4), block = node.attr_int("block_size", 0);
  if (k <= 0 || n <= 0 || !(bits == 2 || bits == 4 || bits == 8) || block < 16 ||
      (block & (block - 1)) != 0) {
    return ctx.Error(absl::StrCat("K = ", k, ", N = ", n, ", bits = ", bits,
                                  ", block_size = ", block,
                                  ": needs positive K and N, bits 2, 4 or 8 and a power-of-two "
                                  "block_size of at least 16"));
  }
  if (ctx.has_input(4)) return ctx.Error("g_idx (a permutation of K) is not supported");
  const int64_t blocks = (k + block - 1) / block;
  const TensorType& a = ctx.input_type(0);
  // Every constant-sized operand must hold its element count.
  auto check = [&](int i, int64_t want, const char* what) -> absl::Status {
    if (!ctx.has_input(i) || !ctx.input_type(i).shape) return absl::OkStatus();
    int64_t have = 1;
    for (const Dim& d : *ctx.input_type(i).shape) {
      if (!d.is_static()) return absl::OkStatus();
      have *= d.value();
    }
    if (have != want) {
      return ctx.Error(absl::StrCat(what, " has ", have, " elements, expected ", want, " (N = ", n,
                                    ", ", blocks, " blocks of ", block, " along K = ", k, ")"));
    }
    return absl::OkStatus();
  };
  if (ctx.input_type(1).dtype != DType::kU8) return ctx.Error("B must be uint8");
  TPC_RETURN_IF_ERROR(check(1, n * blocks * block * bits / 8, "B"));
  TPC_RETURN_IF_ERROR(check(2, n * blocks, "scales"));
  if (ctx.has_input(3)) {
    const bool packed = ctx.input_type(3).dtype == DType::kU8;
    TPC_RETURN_IF_ERROR(
        check(3, packed ? n * ((blocks * bits + 7) / 8) : n * blocks, "zero_points"));
  }
  TPC_RETURN_IF_ERROR(check(5, n, "bias"));
  if (!a.shape) {
    SetUnknownRank(ctx, 0, a.dtype);
    return absl::OkStatus();
  }
  if (a.shape->empty()) return ctx.Error("A is a scalar");
  if (Mismatch(a.shape->back(), Dim(k))) {
    return ctx.Error(absl::StrCat("A ", ir::DimsToString(*a.shape), " does not end in K = ", k));
  }
  Dims out = *a.shape;
  out.back() = Dim(n);
  ctx.set_output_type(0, TensorType(a.dtype, std::move(out)));
  return absl::OkStatus();
}

// onnxruntime's MoE: the output is the input's type. The experts' weights must be 3-D
// ([E, F·I, H] and [E, H, I]), with H the input's last dim and E their common first dim
// where those are known; the kernel checks the rest (cpu/moe.cc).
absl::Status InferMoE(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  if (!ctx.has_input(4)) return ctx.Error("fc2_experts_weights (input 4) is missing");
  const TensorType& x = ctx.input_type(0);
  const auto& w1 = ctx.input_type(2).shape;
  const auto& w2 = ctx.input_type(4).shape;
  if ((w1 && w1->size() != 3) || (w2 && w2->size() != 3) || (x.shape && x.shape->size() < 2)) {
    return ctx.Error(
        "input must be [tokens, H] or [B, S, H], fc1_experts_weights [E, F·I, H] "
        "and fc2_experts_weights [E, H, I]");
  }
  if (w1 && w2 &&
      (Mismatch((*w1)[0], (*w2)[0]) ||
       (x.shape && (Mismatch(x.shape->back(), (*w1)[2]) || Mismatch(x.shape->back(), (*w2)[1]))))) {
    return ctx.Error(absl::StrCat("fc1_experts_weights ", ir::DimsToString(*w1),
                                  " and fc2_experts_weights ", ir::DimsToString(*w2),
                                  " do not fit each other or the input's hidden size"));
  }
  ctx.set_output_type(0, x);
  return absl::OkStatus();
}

// QMoE: MoE's output (the input's type and shape); the experts' codes are [E, F·I,
// H·bits/8] and [E, H, I·bits/8] (the kernels check them with the scales).
absl::Status InferQMoE(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 3));
  if (!ctx.has_input(5)) return ctx.Error("fc2_experts_weights (input 5) is missing");
  const TensorType& x = ctx.input_type(0);
  const auto& w1 = ctx.input_type(2).shape;
  const auto& w2 = ctx.input_type(5).shape;
  if ((w1 && w1->size() != 3) || (w2 && w2->size() != 3) || (x.shape && x.shape->size() < 2) ||
      (w1 && w2 && Mismatch((*w1)[0], (*w2)[0]))) {
    return ctx.Error(
        "input must be [tokens, H] or [B, S, H], fc1_experts_weights [E, F·I, H·bits/8] "
        "and fc2_experts_weights [E, H, I·bits/8]");
  }
  // onnxruntime's CPU kernel (1.32) renormalizes the k routing weights whatever the
  // attribute says (its results equal normalize_routing_weights = 1's): with 0, which
  // result the model means is unclear.
  if (const int64_t normalize = ctx.node().attr_int("normalize_routing_weights", 0);
      normalize != 1) {
    return ctx.Error(absl::StrCat(
        "normalize_routing_weights ", normalize,
        " is not supported: onnxruntime's CPU kernel normalizes the routing weights whatever it "
        "says, so which result is meant is unclear (set 1)"));
  }
  ctx.set_output_type(0, x);
  return absl::OkStatus();
}

absl::Status InferGemm(InferenceContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const Dims* a, RankedInput(ctx, 0));
  TPC_ASSIGN_OR_RETURN(const Dims* b, RankedInput(ctx, 1));
  if (a->size() != 2 || b->size() != 2) {
    return ctx.Error(absl::StrCat("Gemm needs 2-D operands, got ", ir::DimsToString(*a), " and ",
                                  ir::DimsToString(*b)));
  }
  const bool ta = ctx.node().attr_int("transA", 0) != 0;
  const bool tb = ctx.node().attr_int("transB", 0) != 0;
  const Dim& m = (*a)[ta ? 1 : 0];
  const Dim& ka = (*a)[ta ? 0 : 1];
  const Dim& kb = (*b)[tb ? 1 : 0];
  const Dim& n = (*b)[tb ? 0 : 1];
  if (Mismatch(ka, kb)) {
    return ctx.Error(absl::StrCat("cannot multiply ", ir::DimsToString(*a), " by ",
                                  ir::DimsToString(*b), " (transA=", ta, ", transB=", tb, ")"));
  }
  Dims out = {m, n};
  if (ctx.has_input(2) && ctx.input_type(2).shape.has_value()) {
    // C broadcasts to [M, N] (unidirectionally).
    TPC_ASSIGN_OR_RETURN(Dims c, BroadcastShapes(ctx, out, *ctx.input_type(2).shape));
    if (c.size() != 2) return ctx.Error("C has more than 2 dims");
  }
  ctx.set_output_type(0, TensorType(ctx.input_type(0).dtype, std::move(out)));
  return absl::OkStatus();
}

absl::Status InferEinsum(InferenceContext& ctx) {
  TPC_RETURN_IF_ERROR(RequireInputs(ctx, 1));
  const DType t = ctx.input_type(0).dtype;
  std::string eq;
  for (char c : ctx.node().attr_string("equation", "")) {
    if (c != ' ') eq.push_back(c);
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms = absl::StrSplit(lhs, ',');
  if (static_cast<int>(terms.size()) != ctx.num_inputs()) {
    return ctx.Error(absl::StrCat("equation '", eq, "' has ", terms.size(), " operands for ",
                                  ctx.num_inputs(), " inputs"));
  }
  std::map<char, Dim> letters;
  std::map<char, int> counts;
  std::optional<Dims> ellipsis;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    TPC_ASSIGN_OR_RETURN(const Dims* shape, RankedInput(ctx, i));
    const std::string& term = terms[static_cast<size_t>(i)];
    const size_t dots = term.find("...");
    const int64_t named = static_cast<int64_t>(term.size()) - (dots == std::string::npos ? 0 : 3);
    const int64_t rank = static_cast<int64_t>(shape->size());
    if (named > rank || (dots == std::string::npos && named != rank)) {
      return ctx.Error(
          absl::StrCat("operand '", term, "' does not fit ", ir::DimsToString(*shape)));
    }
    size_t pos = 0;
    for (size_t c = 0; c < term.size(); ++c) {
      if (c == dots) {
        const size_t n = static_cast<size_t>(rank - named);
        Dims e(shape->begin() + static_cast<int64_t>(pos),
               shape->begin() + static_cast<int64_t>(pos + n));
        if (ellipsis.has_value()) {
          TPC_ASSIGN_OR_RETURN(e, BroadcastShapes(ctx, *ellipsis, e));
        }
        ellipsis = std::move(e);
        pos += n;
        c += 2;
        continue;
      }
      const char l = term[c];
      if (!std::isalpha(static_cast<unsigned char>(l))) {
        return ctx.Error(absl::StrCat("bad equation '", eq, "'"));
      }
      const Dim& d = (*shape)[pos++];
      auto [it, inserted] = letters.emplace(l, d);
      if (!inserted) {
        std::optional<Dim> merged = BroadcastDim(it->second, d);
        if (!merged.has_value()) {
          return ctx.Error(absl::StrCat("label '", std::string(1, l), "' is both ",
                                        it->second.ToString(), " and ", d.ToString()));
        }
        it->second = *merged;
      }
      ++counts[l];
    }
  }
  std::string rhs;
  if (arrow != std::string::npos) {
    rhs = eq.substr(arrow + 2);
  } else {
    // Implicit output: the ellipsis, then the labels used once, in order.
    if (ellipsis.has_value()) rhs = "...";
    for (const auto& [l, n] : counts) {
      if (n == 1) rhs.push_back(l);
    }
  }
  Dims out;
  for (size_t c = 0; c < rhs.size(); ++c) {
    if (rhs.compare(c, 3, "...") == 0) {
      if (ellipsis.has_value()) out.insert(out.end(), ellipsis->begin(), ellipsis->end());
      c += 2;
      continue;
    }
    auto it = letters.find(rhs[c]);
    if (it == letters.end()) {
      return ctx.Error(
          absl::StrCat("output label '", std::string(1, rhs[c]), "' is not an input's"));
    }
    out.push_back(it->second);
  }
  ctx.set_output_type(0, TensorType(t, std::move(out)));
  return absl::OkStatus();
}

}  // namespace tpc::onnx::shape_rules
