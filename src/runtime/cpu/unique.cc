// Unique: the distinct elements (or, with `axis`, the distinct slices along it) of a
// tensor, sorted or in the order of their first occurrence, with the index of each first
// occurrence, the inverse mapping and the counts. The output length depends on the data.
#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>
#include <vector>

#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

// Lexicographic order of slices in which NaN is above every number and equal to NaN (a
// strict weak order, which `<` on floats is not).
struct SliceLess {
  template <typename T>
  bool operator()(const std::vector<T>& a, const std::vector<T>& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](T l, T r) {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(l)) return false;
        if (std::isnan(r)) return true;
      }
      return l < r;
    });
  }
};

}  // namespace

absl::Status Unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool sorted = ctx.node().attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.node().has_attr("axis");
  // The input as [outer, len, inner]; a slice is the len-th entries of every outer row.
  int64_t axis = 0, outer = 1, len = x.num_elements(), inner = 1;
  if (has_axis) {
    TPC_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
    len = x.dim(axis);
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (d < axis) outer *= x.dim(d);
      if (d > axis) inner *= x.dim(d);
    }
  }
  return VisitType(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    const T* px = x.data<T>();
    // Slice i as its elements in row-major order (outer, then inner).
    auto slice = [&](int64_t i) {
      std::vector<T> s;
      s.reserve(static_cast<size_t>(outer * inner));
      for (int64_t o = 0; o < outer; ++o) {
        const T* p = px + (o * len + i) * inner;
        s.insert(s.end(), p, p + inner);
      }
      return s;
    };
    // Distinct slices (lexicographic order) -> their first index.
    std::map<std::vector<T>, int64_t, SliceLess> first;
    std::vector<std::vector<T>> slices(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) {
      slices[static_cast<size_t>(i)] = slice(i);
      first.emplace(slices[static_cast<size_t>(i)], i);
    }
    // The unique slices by first index; sorted: in the map's (ascending) order.
    std::vector<int64_t> picks;
    for (const auto& entry : first) picks.push_back(entry.second);
    if (!sorted) std::sort(picks.begin(), picks.end());
    std::map<std::vector<T>, int64_t, SliceLess> rank;  // slice -> position in the output
    for (size_t k = 0; k < picks.size(); ++k) {
      rank[slices[static_cast<size_t>(picks[k])]] = static_cast<int64_t>(k);
    }
    const auto u = static_cast<int64_t>(picks.size());
    std::vector<int64_t> inverse(static_cast<size_t>(len)), counts(static_cast<size_t>(u), 0);
    for (int64_t i = 0; i < len; ++i) {
      const int64_t k = rank[slices[static_cast<size_t>(i)]];
      inverse[static_cast<size_t>(i)] = k;
      ++counts[static_cast<size_t>(k)];
    }
    Shape y_shape{u};
    if (has_axis) {
      y_shape = x.shape();
      y_shape[static_cast<size_t>(axis)] = u;
    }
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, y_shape));
    T* py = y->data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < u; ++k) {
        const T* src = px + (o * len + picks[static_cast<size_t>(k)]) * inner;
        std::copy(src, src + inner, py + (o * u + k) * inner);
      }
    }
    auto write = [&](int i, const std::vector<int64_t>& v) -> absl::Status {
      if (ctx.num_outputs() <= i || !ctx.wants_output(i)) return absl::OkStatus();
      TPC_ASSIGN_OR_RETURN(Tensor * t,
                           ctx.Output(i, {static_cast<int64_t>(v.size())}, ir::DType::kI64));
      std::copy(v.begin(), v.end(), t->data<int64_t>());
      return absl::OkStatus();
    };
    TPC_RETURN_IF_ERROR(write(1, picks));
    TPC_RETURN_IF_ERROR(write(2, inverse));
    return write(3, counts);
  });
}

}  // namespace tpc::runtime::cpu
