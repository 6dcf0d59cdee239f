// The pools: MaxPool (with its Indices), AveragePool and LpPool over a sliding window, and
// their global forms over every spatial element. One image plane ([N, C] each) at a time.
// MaxUnpool puts MaxPool's values back where its indices say.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels.h"
#include "window.h"

namespace tpc::runtime::cpu {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

// |v|^p, with the common p = 1 and 2 exact.
inline double LpTerm(double v, double p) {
  const double a = std::fabs(v);
  return p == 1 ? a : p == 2 ? a * a : std::pow(a, p);
}
inline double LpRoot(double sum, double p) {
  return p == 1 ? sum : p == 2 ? std::sqrt(sum) : std::pow(sum, 1.0 / p);
}

struct PoolOptions {
  PoolKind kind = PoolKind::kMax;
  bool count_include_pad = false;  // AveragePool: the padding counts in the divisor
  double p = 2;                    // LpPool
  bool column_major = false;       // MaxPool's Indices: storage_order 1
};

// One output element per position of `w.out` for plane `x` (an `w.in` box); `index`
// (MaxPool) gets the argmax as an index into the whole input: `plane_base` + its position.
template <typename T>
void PoolPlane(const Window& w, const PoolOptions& opt, const T* x, T* y, int64_t* index,
               int64_t plane_base) {
  const size_t s = w.in.size();
  const int64_t taps = NumElements(w.kernel), outs = NumElements(w.out);
  const Shape strides = Strides(w.in);
  Shape cm_strides(s, 1);  // column-major strides of the spatial dims
  for (size_t d = 1; d < s; ++d) cm_strides[d] = cm_strides[d - 1] * w.in[d - 1];
  Shape o(s), k(s);
  for (int64_t i = 0; i < outs; ++i) {
    Unravel(i, w.out, &o);
    double acc = opt.kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0;
    int64_t best = -1, count = 0, padded_count = 0;
    for (int64_t t = 0; t < taps; ++t) {
      Unravel(t, w.kernel, &k);
      int64_t off = 0, cm_off = 0;
      bool inside = true, in_padded = true;
      for (size_t d = 0; d < s; ++d) {
        const int64_t c =
            WindowInputCoord(o[d], k[d], w.strides[d], w.dilations[d], w.pad_begin[d]);
        inside = inside && c >= 0 && c < w.in[d];
        in_padded = in_padded && c >= -w.pad_begin[d] && c < w.in[d] + w.pad_end[d];
        off += c * strides[d];
        cm_off += c * cm_strides[d];
      }
      padded_count += in_padded ? 1 : 0;
      if (!inside) continue;
      ++count;
      const double v = static_cast<double>(x[off]);
      if (opt.kind == PoolKind::kMax) {
        if (best < 0 || v > acc) {
          acc = v;
          best = opt.column_major ? cm_off : off;
        }
      } else {
        acc += opt.kind == PoolKind::kLp ? LpTerm(v, opt.p) : v;
      }
    }
    if (opt.kind == PoolKind::kAverage) {
      const int64_t divisor = opt.count_include_pad ? padded_count : count;
      acc = divisor > 0 ? acc / static_cast<double>(divisor) : 0;
    } else if (opt.kind == PoolKind::kLp) {
      acc = LpRoot(acc, opt.p);
    }
    if (opt.kind == PoolKind::kMax && best < 0) {
      y[i] = std::numeric_limits<T>::lowest();
    } else {
      y[i] = static_cast<T>(acc);
    }
    if (index != nullptr) index[i] = plane_base + std::max<int64_t>(best, 0);
  }
}

}  // namespace

absl::StatusOr<PoolShape> ReadPoolShape(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) {
    return ctx.Error(absl::StrCat("X must be [N, C, spatial...], got ", x.TypeString()));
  }
  if (!ctx.node().has_attr("kernel_shape")) return ctx.Error("attribute 'kernel_shape' is missing");
  const Shape in(x.shape().begin() + 2, x.shape().end());
  const bool ceil_mode = ctx.node().attr_int("ceil_mode", 0) != 0;
  PoolShape shape;
  TPC_ASSIGN_OR_RETURN(shape.win,
                       MakeWindow(ctx, in, ctx.node().attr_ints("kernel_shape"), ceil_mode));
  shape.out = {x.dim(0), x.dim(1)};
  shape.out.insert(shape.out.end(), shape.win.out.begin(), shape.win.out.end());
  shape.planes = x.dim(0) * x.dim(1);
  return shape;
}

namespace {

absl::Status PoolImpl(KernelContext& ctx, PoolOptions opt) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const PoolShape shape, ReadPoolShape(ctx));
  const Window& w = shape.win;
  const Shape& out_shape = shape.out;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape, x.dtype()));
  Tensor* indices = nullptr;
  if (opt.kind == PoolKind::kMax && ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(indices, ctx.Output(1, out_shape, ir::DType::kI64));
  }
  const int64_t planes = shape.planes;
  const int64_t in_size = NumElements(w.in), out_size = NumElements(w.out);
  auto run = [&]<typename T>() -> absl::Status {
    ctx.pool().ParallelFor(planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        PoolPlane<T>(w, opt, x.data<T>() + p * in_size, y->data<T>() + p * out_size,
                     indices ? indices->data<int64_t>() + p * out_size : nullptr, p * in_size);
      }
    });
    return absl::OkStatus();
  };
  if (opt.kind == PoolKind::kMax) return VisitNumeric(ctx, x.dtype(), run);
  return VisitFloat(ctx, x.dtype(), run);
}

// Pools over every spatial element: [N, C, spatial...] -> [N, C, 1, ...].
absl::Status GlobalPoolImpl(KernelContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.Error(absl::StrCat("X must be [N, C, ...], got ", x.TypeString()));
  Shape out_shape = x.shape();
  std::fill(out_shape.begin() + 2, out_shape.end(), 1);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape, x.dtype()));
  const double p = static_cast<double>(ctx.node().attr_int("p", 2));
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = planes == 0 ? 0 : x.num_elements() / planes;
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    ctx.pool().ParallelFor(planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* px = x.data<T>() + i * size;
        double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0;
        for (int64_t j = 0; j < size; ++j) {
          const double v = static_cast<double>(px[j]);
          acc = kind == PoolKind::kMax ? std::max(acc, v)
                                       : acc + (kind == PoolKind::kLp ? LpTerm(v, p) : v);
        }
        if (kind == PoolKind::kAverage) acc /= static_cast<double>(std::max<int64_t>(size, 1));
        if (kind == PoolKind::kLp) acc = LpRoot(acc, p);
        y->data<T>()[i] = static_cast<T>(acc);
      }
    });
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status MaxPool(KernelContext& ctx) {
  PoolOptions opt;
  opt.kind = PoolKind::kMax;
  opt.column_major = ctx.node().attr_int("storage_order", 0) != 0;
  return PoolImpl(ctx, opt);
}

absl::Status AveragePool(KernelContext& ctx) {
  PoolOptions opt;
  opt.kind = PoolKind::kAverage;
  opt.count_include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  return PoolImpl(ctx, opt);
}

absl::Status LpPool(KernelContext& ctx) {
  PoolOptions opt;
  opt.kind = PoolKind::kLp;
  opt.p = static_cast<double>(ctx.node().attr_int("p", 2));
  return PoolImpl(ctx, opt);
}

absl::StatusOr<UnpoolShape> ReadMaxUnpool(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (x.rank() < 3 || indices.shape() != x.shape()) {
    return ctx.Error(absl::StrCat("X must be [N, C, spatial...] and I of its shape, got ",
                                  x.TypeString(), " and ", indices.TypeString()));
  }
  const auto s = static_cast<size_t>(x.rank() - 2);
  const Shape kernel = ctx.node().attr_ints("kernel_shape");
  const Shape strides =
      ctx.node().has_attr("strides") ? ctx.node().attr_ints("strides") : Shape(s, 1);
  const Shape pads = ctx.node().has_attr("pads") ? ctx.node().attr_ints("pads") : Shape(2 * s, 0);
  if (kernel.size() != s || strides.size() != s || pads.size() != 2 * s) {
    return ctx.Error("kernel_shape, strides or pads do not match the spatial dims");
  }
  UnpoolShape u;
  u.inferred = {x.dim(0), x.dim(1)};
  for (size_t d = 0; d < s; ++d) {
    u.inferred.push_back((x.dim(static_cast<int64_t>(d) + 2) - 1) * strides[d] - pads[d] -
                         pads[d + s] + kernel[d]);
  }
  u.out = u.inferred;
  if (const Tensor* shape = ctx.optional_input(2); shape != nullptr) {
    TPC_ASSIGN_OR_RETURN(u.out, ReadInts(ctx, *shape));
    if (u.out.size() != u.inferred.size()) return ctx.Error("output_shape has the wrong rank");
    for (size_t d = 0; d < u.out.size(); ++d) {
      if (u.out[d] < u.inferred[d]) {
        return ctx.Error(absl::StrCat("output_shape ", ShapeString(u.out), " is smaller than ",
                                      ShapeString(u.inferred)));
      }
    }
  }
  return u;
}

// y = zeros, y[I[i]] = X[i]: I indexes the flattened output of the pool's inverse geometry
// ((in - 1) * stride - pads + kernel); a larger output_shape holds that output in its
// leading corner (as ONNX's reference does).
absl::Status MaxUnpool(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  TPC_ASSIGN_OR_RETURN(const UnpoolShape u, ReadMaxUnpool(ctx));
  const Shape& inferred = u.inferred;
  TPC_ASSIGN_OR_RETURN(auto idx, ReadInts(ctx, indices));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, u.out, x.dtype()));
  const int64_t total = NumElements(inferred);
  const Shape out_strides = Strides(u.out);
  return VisitNumeric(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    std::fill(y->data<T>(), y->data<T>() + y->num_elements(), T(0));
    Shape pos(inferred.size());
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const int64_t at = idx[static_cast<size_t>(i)];
      if (at < 0 || at >= total) {
        return ctx.Error(absl::StrCat("index ", at, " is outside the output (", total, ")"));
      }
      Unravel(at, inferred, &pos);
      int64_t off = 0;
      for (size_t d = 0; d < pos.size(); ++d) off += pos[d] * out_strides[d];
      y->data<T>()[off] = x.data<T>()[i];
    }
    return absl::OkStatus();
  });
}

absl::Status GlobalAveragePool(KernelContext& ctx) {
  return GlobalPoolImpl(ctx, PoolKind::kAverage);
}
absl::Status GlobalLpPool(KernelContext& ctx) { return GlobalPoolImpl(ctx, PoolKind::kLp); }
absl::Status GlobalMaxPool(KernelContext& ctx) { return GlobalPoolImpl(ctx, PoolKind::kMax); }

}  // namespace tpc::runtime::cpu
