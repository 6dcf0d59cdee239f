// Einsum, any number of operands, with ellipses, broadcasting, repeated labels (diagonals)
// and the implicit output: each operand gets one stride per label (summed over repeated
// labels, 0 where it broadcasts), then every output element sums the product of the operands
// over the labels that are not in the output.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_split.h"
#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

constexpr int kEllipsisLabel = 1000;  // the e-th dim of the ellipsis is label 1000 + e

// The labels of one term (`ab...c`) for an operand of `rank` dims (-1: the output, whose
// ellipsis is `ellipsis` dims long); ellipsis dims are right-aligned across operands.
absl::StatusOr<std::vector<int>> ParseTerm(const KernelContext& ctx, const std::string& term,
                                           int64_t rank, int64_t ellipsis) {
  std::vector<int> labels;
  const size_t dots = term.find("...");
  int64_t letters = 0;
  for (char ch : term) letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
  const int64_t ell = dots == std::string::npos ? 0 : (rank < 0 ? ellipsis : rank - letters);
  if (rank >= 0 && (ell < 0 || (dots == std::string::npos && letters != rank))) {
    return ctx.Error(absl::StrCat("term '", term, "' does not fit an operand of rank ", rank));
  }
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t e = 0; e < ell; ++e)
        labels.push_back(kEllipsisLabel + static_cast<int>(ellipsis - ell + e));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      labels.push_back(static_cast<unsigned char>(term[i]));
    } else {
      return ctx.Error(absl::StrCat("term '", term, "' has a character that is not a letter"));
    }
  }
  return labels;
}

}  // namespace

absl::StatusOr<EinsumShape> ReadEinsum(const KernelContext& ctx) {
  std::string eq = ctx.node().attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::vector<std::string> terms = absl::StrSplit(eq.substr(0, arrow), ',');
  const int n = ctx.num_inputs();
  if (static_cast<int>(terms.size()) != n) {
    return ctx.Error(
        absl::StrCat("equation '", eq, "' has ", terms.size(), " terms for ", n, " inputs"));
  }
  int64_t ellipsis = 0;
  for (int i = 0; i < n; ++i) {
    int64_t letters = 0;
    for (char ch : terms[static_cast<size_t>(i)])
      letters += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    if (terms[static_cast<size_t>(i)].find("...") != std::string::npos) {
      ellipsis = std::max(ellipsis, ctx.input(i).rank() - letters);
    }
  }
  std::vector<std::vector<int>> in_labels;
  std::map<int, int64_t> size;  // label -> size (broadcast over operands)
  std::map<int, int> count;     // label -> occurrences in the inputs
  for (int i = 0; i < n; ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != ctx.input(0).dtype()) return ctx.Error("the operands differ in type");
    TPC_ASSIGN_OR_RETURN(std::vector<int> labels,
                         ParseTerm(ctx, terms[static_cast<size_t>(i)], t.rank(), ellipsis));
    for (size_t d = 0; d < labels.size(); ++d) {
      const int64_t dim = t.dim(static_cast<int64_t>(d));
      auto [it, fresh] = size.emplace(labels[d], dim);
      if (!fresh && it->second != dim) {
        if (it->second != 1 && dim != 1) {
          return ctx.Error(
              absl::StrCat("equation '", eq, "': a label has sizes ", it->second, " and ", dim));
        }
        if (it->second == 1) it->second = dim;  // a 1 broadcasts to the other size, 0 too
      }
      ++count[labels[d]];
    }
    in_labels.push_back(std::move(labels));
  }
  std::vector<int> out_labels;
  if (arrow != std::string::npos) {
    TPC_ASSIGN_OR_RETURN(out_labels, ParseTerm(ctx, eq.substr(arrow + 2), -1, ellipsis));
    for (int l : out_labels) {
      if (!size.count(l))
        return ctx.Error(absl::StrCat("equation '", eq, "': an output label is in no input"));
    }
  } else {
    // Implicit output: the ellipsis, then the labels seen once, in alphabetical order.
    for (int64_t e = 0; e < ellipsis; ++e)
      out_labels.push_back(kEllipsisLabel + static_cast<int>(e));
    for (const auto& [l, c] : count) {
      if (l < kEllipsisLabel && c == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> summed;
  for (const auto& [l, s] : size) {
    if (std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) summed.push_back(l);
  }
  // Per operand, the stride of every label (0 where absent or broadcast).
  auto label_strides = [&](const std::vector<int>& labels) {
    std::vector<std::vector<int64_t>> out(static_cast<size_t>(n),
                                          std::vector<int64_t>(labels.size(), 0));
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx.input(i);
      const Shape st = Strides(t.shape());
      const auto& il = in_labels[static_cast<size_t>(i)];
      for (size_t d = 0; d < il.size(); ++d) {
        if (t.dim(static_cast<int64_t>(d)) == 1) continue;
        const auto at = std::find(labels.begin(), labels.end(), il[d]);
        if (at != labels.end())
          out[static_cast<size_t>(i)][static_cast<size_t>(at - labels.begin())] += st[d];
      }
    }
    return out;
  };
  EinsumShape r;
  r.out_strides = label_strides(out_labels);
  r.sum_strides = label_strides(summed);
  for (int l : out_labels) r.out.push_back(size[l]);
  for (int l : summed) r.sum.push_back(size[l]);
  return r;
}

absl::Status Einsum(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const EinsumShape plan, ReadEinsum(ctx));
  const Shape &out_shape = plan.out, &sum_shape = plan.sum;
  const auto &out_strides = plan.out_strides, &sum_strides = plan.sum_strides;
  const int n = ctx.num_inputs();
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape, ctx.input(0).dtype()));
  const int64_t outs = NumElements(out_shape), sums = NumElements(sum_shape);
  return VisitNumeric(ctx, ctx.input(0).dtype(), [&]<typename T>() -> absl::Status {
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    ctx.pool().ParallelFor(
        outs, std::max<int64_t>(1, 4096 / std::max<int64_t>(sums, 1)), [&](int64_t b, int64_t e) {
          std::vector<int64_t> base(static_cast<size_t>(n)), off(static_cast<size_t>(n));
          Shape idx(out_shape.size()), sidx(sum_shape.size());
          for (int64_t o = b; o < e; ++o) {
            int64_t rem = o;
            std::fill(base.begin(), base.end(), 0);
            for (size_t d = out_shape.size(); d-- > 0;) {
              const int64_t i = rem % out_shape[d];
              rem /= out_shape[d];
              for (int k = 0; k < n; ++k)
                base[static_cast<size_t>(k)] += i * out_strides[static_cast<size_t>(k)][d];
            }
            Acc acc = 0;
            std::fill(sidx.begin(), sidx.end(), 0);
            off = base;
            for (int64_t s = 0; s < sums; ++s) {
              Acc prod = 1;
              for (int k = 0; k < n; ++k)
                prod = WrapMul<Acc>(
                    prod, static_cast<Acc>(ctx.input(k).data<T>()[off[static_cast<size_t>(k)]]));
              acc = WrapAdd<Acc>(acc, prod);
              for (size_t d = sum_shape.size(); d-- > 0;) {
                for (int k = 0; k < n; ++k)
                  off[static_cast<size_t>(k)] += sum_strides[static_cast<size_t>(k)][d];
                if (++sidx[d] < sum_shape[d]) break;
                for (int k = 0; k < n; ++k)
                  off[static_cast<size_t>(k)] -= sidx[d] * sum_strides[static_cast<size_t>(k)][d];
                sidx[d] = 0;
              }
            }
            y->data<T>()[o] = static_cast<T>(acc);
          }
        });
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
