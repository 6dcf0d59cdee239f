// Reductions: Reduce* (by op type), ArgMax/ArgMin, CumSum, TopK.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels.h"

namespace tpc::runtime::cpu {
AxisSplit SplitAt(const Shape& s, int64_t axis) {
  AxisSplit r;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    if (i < axis)
      r.outer *= s[static_cast<size_t>(i)];
    else if (i == axis)
      r.len = s[static_cast<size_t>(i)];
    else
      r.inner *= s[static_cast<size_t>(i)];
  }
  return r;
}

absl::Status Reduce(KernelContext& ctx) {
  const std::string& op = ctx.node().op_type();
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  // ReduceSum takes axes as an input from opset 13, the others from opset 18.
  TPC_ASSIGN_OR_RETURN(auto axes_opt, AxesFromAttrOrInput(ctx, "axes", 1));
  std::vector<int64_t> axes = axes_opt.value_or(std::vector<int64_t>{});
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  if (axes.empty() && ctx.node().attr_int("noop_with_empty_axes", 0) != 0) {
    return CopyWithShape(ctx, x.shape());
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes) {
    TPC_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(ctx, a, rank));
    reduced[static_cast<size_t>(ax)] = true;
  }
  Shape kept, out_shape;
  for (int64_t i = 0; i < rank; ++i) {
    const bool r = reduced[static_cast<size_t>(i)];
    kept.push_back(r ? 1 : x.dim(i));
    if (!r)
      out_shape.push_back(x.dim(i));
    else if (keepdims)
      out_shape.push_back(1);
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape, x.dtype()));
  const int64_t out_n = NumElements(kept);
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (reduced[static_cast<size_t>(i)]) count *= x.dim(i);
  }
  double init = 0;
  if (op == "ReduceMax") init = -std::numeric_limits<double>::infinity();
  if (op == "ReduceMin") init = std::numeric_limits<double>::infinity();
  if (op == "ReduceProd") init = 1;
  std::vector<double> acc(static_cast<size_t>(out_n), init);
  // Out-of-place accumulation: every input element maps to its kept-dims slot.
  Shape out_strides = BroadcastStrides(kept, x.shape());
  const Shape& xs = x.shape();
  const int64_t n = x.num_elements();
  enum Kind { kSum, kMax, kMin, kProd, kL1, kSquare, kExp } kind = kSum;
  if (op == "ReduceMax")
    kind = kMax;
  else if (op == "ReduceMin")
    kind = kMin;
  else if (op == "ReduceProd")
    kind = kProd;
  else if (op == "ReduceL1")
    kind = kL1;
  else if (op == "ReduceL2" || op == "ReduceSumSquare")
    kind = kSquare;
  else if (op == "ReduceLogSumExp")
    kind = kExp;
  auto add = [kind](double& a, double v) {
    switch (kind) {
      case kSum:
        a += v;
        break;
      case kMax:
        a = std::max(a, v);
        break;
      case kMin:
        a = std::min(a, v);
        break;
      case kProd:
        a *= v;
        break;
      case kL1:
        a += std::abs(v);
        break;
      case kSquare:
        a += v * v;
        break;
      case kExp:
        a += std::exp(v);
        break;
    }
  };
  bool suffix = true;  // reduced axes are the trailing ones: rows of `count` elements
  for (int64_t i = 0; i < rank; ++i) {
    if (reduced[static_cast<size_t>(i)] && i + 1 < rank && !reduced[static_cast<size_t>(i + 1)])
      suffix = false;
  }
  if (suffix && x.dtype() == ir::DType::kF32) {
    const float* px = x.data<float>();
    ctx.pool().ParallelFor(out_n, std::max<int64_t>(1, 16384 / std::max<int64_t>(count, 1)),
                           [&](int64_t b, int64_t e) {
                             for (int64_t r = b; r < e; ++r) {
                               double& a = acc[static_cast<size_t>(r)];
                               const float* row = px + r * count;
                               if (kind == kSum || kind == kSquare) {
                                 // 8 double lanes: a loop the vectorizer takes.
                                 double lanes[8] = {};
                                 int64_t j = 0;
                                 for (; j + 8 <= count; j += 8) {
                                   for (int l = 0; l < 8; ++l) {
                                     const double v = row[j + l];
                                     lanes[l] += kind == kSum ? v : v * v;
                                   }
                                 }
                                 for (double v : lanes) a += v;
                                 for (; j < count; ++j) add(a, row[j]);
                               } else {
                                 for (int64_t j = 0; j < count; ++j) add(a, row[j]);
                               }
                             }
                           });
  } else {
    Shape idx(static_cast<size_t>(rank), 0);
    int64_t o = 0;
    for (int64_t i = 0; i < n; ++i) {
      add(acc[static_cast<size_t>(o)], ElementAsDouble(x, i));
      for (size_t d = static_cast<size_t>(rank); d-- > 0;) {
        o += out_strides[d];
        if (++idx[d] < xs[d]) break;
        o -= idx[d] * out_strides[d];
        idx[d] = 0;
      }
    }
  }
  for (double& a : acc) {
    if (op == "ReduceMean")
      a /= static_cast<double>(count);
    else if (op == "ReduceL2")
      a = std::sqrt(a);
    else if (op == "ReduceLogSum" || op == "ReduceLogSumExp")
      a = std::log(a);
  }
  return VisitType(ctx, x.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < out_n; ++i) {
      double v = acc[static_cast<size_t>(i)];
      if constexpr (std::is_integral_v<T>) {
        v = std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()),
                       static_cast<double>(std::numeric_limits<T>::max()));
      }
      y->data<T>()[i] = static_cast<T>(v);
    }
    return absl::OkStatus();
  });
}

namespace {

absl::Status ArgReduce(KernelContext& ctx, bool max) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", 0), x.rank()));
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
  Shape out = x.shape();
  if (keepdims)
    out[static_cast<size_t>(axis)] = 1;
  else
    out.erase(out.begin() + axis);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, ir::DType::kI64));
  const AxisSplit s = SplitAt(x.shape(), axis);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t in = 0; in < s.inner; ++in) {
      int64_t best = 0;
      double bv = ElementAsDouble(x, o * s.len * s.inner + in);
      for (int64_t j = 1; j < s.len; ++j) {
        const double v = ElementAsDouble(x, (o * s.len + j) * s.inner + in);
        const bool better = max ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv));
        if (better) {
          best = j;
          bv = v;
        }
      }
      y->data<int64_t>()[o * s.inner + in] = best;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ArgMax(KernelContext& ctx) { return ArgReduce(ctx, true); }
absl::Status ArgMin(KernelContext& ctx) { return ArgReduce(ctx, false); }

absl::Status CumSum(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(auto axis_v, ReadInts(ctx, ctx.input(1)));
  if (axis_v.size() != 1) return ctx.Error("axis must hold one value");
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_v[0], x.rank()));
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.node().attr_int("reverse", 0) != 0;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  const AxisSplit s = SplitAt(x.shape(), axis);
  return VisitNumeric(ctx, x.dtype(), [&]<typename T>() {
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t in = 0; in < s.inner; ++in) {
        T acc = 0;
        for (int64_t step = 0; step < s.len; ++step) {
          const int64_t j = reverse ? s.len - 1 - step : step;
          const int64_t at = (o * s.len + j) * s.inner + in;
          const T v = x.data<T>()[at];
          if (exclusive) {
            y->data<T>()[at] = acc;
            acc = WrapAdd<T>(acc, v);
          } else {
            acc = WrapAdd<T>(acc, v);
            y->data<T>()[at] = acc;
          }
        }
      }
    }
    return absl::OkStatus();
  });
}

absl::Status TopK(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(auto kv, ReadInts(ctx, ctx.input(1)));
  if (kv.size() != 1) return ctx.Error("K must hold one value");
  TPC_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), x.rank()));
  const bool largest = ctx.node().attr_int("largest", 1) != 0;
  const int64_t k = kv[0];
  const AxisSplit s = SplitAt(x.shape(), axis);
  if (k < 0 || k > s.len) return ctx.Error(absl::StrCat("K = ", k, " is out of range"));
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] = k;
  TPC_ASSIGN_OR_RETURN(Tensor * values, ctx.Output(0, out, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * indices, ctx.Output(1, out, ir::DType::kI64));
  return VisitNumeric(ctx, x.dtype(), [&]<typename T>() {
    std::vector<int64_t> order(static_cast<size_t>(s.len));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t in = 0; in < s.inner; ++in) {
        auto at = [&](int64_t j) { return x.data<T>()[(o * s.len + j) * s.inner + in]; };
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
          return largest ? at(p) > at(q) : at(p) < at(q);
        });
        for (int64_t j = 0; j < k; ++j) {
          const int64_t dst = (o * k + j) * s.inner + in;
          values->data<T>()[dst] = at(order[static_cast<size_t>(j)]);
          indices->data<int64_t>()[dst] = order[static_cast<size_t>(j)];
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
