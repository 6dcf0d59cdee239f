// Casts and tensor generators: Cast, CastLike, ConstantOfShape, EyeLike, OneHot, Range, Shape,
// Size and the window functions (Hann, Hamming, Blackman).
#include <cmath>
#include <vector>

#include "kernels.h"
#include "tpc/runtime/math/generators.h"
#include "tpc/util/checked_math.h"

namespace tpc::runtime::cpu {

absl::Status Cast(KernelContext& ctx) {
  const ir::DType to = static_cast<ir::DType>(ctx.node().attr_int("to", 1));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, ctx.input(0).shape(), to));
  return CastInto(ctx, ctx.input(0), *y);
}

absl::Status CastLike(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, ctx.input(0).shape(), ctx.input(1).dtype()));
  return CastInto(ctx, ctx.input(0), *y);
}

absl::Status ConstantOfShape(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(Shape shape, ReadInts(ctx, ctx.input(0)));
  ir::DType dtype = ir::DType::kF32;
  const uint8_t* value = nullptr;
  auto it = ctx.node().attrs().find("value");
  if (it != ctx.node().attrs().end()) {
    const auto* t = std::get_if<ir::Tensor>(&it->second);
    if (t == nullptr || t->num_elements() != 1 || !t->has_data()) {
      return ctx.Error("attribute 'value' must be a one-element tensor");
    }
    dtype = t->dtype();
    value = t->data();
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape, dtype));
  const size_t es = static_cast<size_t>(ir::DTypeSize(dtype));
  if (value == nullptr) {
    std::memset(y->raw(), 0, y->nbytes());
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < y->num_elements(); ++i) std::memcpy(y->raw() + i * es, value, es);
  return absl::OkStatus();
}

absl::Status Range(KernelContext& ctx) {
  const Tensor& start = ctx.input(0);
  return VisitNumeric(ctx, start.dtype(), [&]<typename T>() -> absl::Status {
    const T s = start.data<T>()[0], limit = ctx.input(1).data<T>()[0],
            delta = ctx.input(2).data<T>()[0];
    if (delta == 0) return ctx.Error("delta is zero");
    const double count = std::ceil((static_cast<double>(limit) - static_cast<double>(s)) /
                                   static_cast<double>(delta));
    // NaN, infinite or absurd counts are refused before the conversion to int64.
    if (!(count <= static_cast<double>(kMaxTensorElements))) {
      return ctx.Error(absl::StrCat("Range(", static_cast<double>(s), ", ",
                                    static_cast<double>(limit), ", ", static_cast<double>(delta),
                                    ") has no size up to 2^48 elements"));
    }
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {n}, start.dtype()));
    // s + i·delta, with integer types wrapping as ONNX runtimes do.
    for (int64_t i = 0; i < n; ++i)
      y->data<T>()[i] = WrapAdd<T>(s, WrapMul<T>(static_cast<T>(i), delta));
    return absl::OkStatus();
  });
}

absl::Status Shape_(KernelContext& ctx) {
  const Shape& shape = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t start = ctx.node().attr_int("start", 0);
  int64_t end = ctx.node().attr_int("end", rank);
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clamp(start);
  end = clamp(end);
  const int64_t n = std::max<int64_t>(0, end - start);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {n}, ir::DType::kI64));
  for (int64_t i = 0; i < n; ++i) y->data<int64_t>()[i] = shape[static_cast<size_t>(start + i)];
  return absl::OkStatus();
}

absl::Status Size(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {}, ir::DType::kI64));
  y->data<int64_t>()[0] = ctx.input(0).num_elements();
  return absl::OkStatus();
}

// Ones on diagonal k of a 2-D tensor shaped as the input.
absl::Status EyeLike(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.Error("the input must be 2-D");
  const int64_t k = ctx.node().attr_int("k", 0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape()));
  return VisitType(ctx, y->dtype(), [&]<typename T>() {
    T* py = y->data<T>();
    for (int64_t i = 0; i < y->num_elements(); ++i) {
      py[i] = math::EyeLikeOne(i, x.dim(1), k) ? T(1) : T(0);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<OneHotShape> ReadOneHot(const KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& depth_t = ctx.input(1);
  const Tensor& values = ctx.input(2);
  if (depth_t.num_elements() != 1 || values.num_elements() != 2) {
    return ctx.Error("depth must have one element and values two");
  }
  OneHotShape r;
  TPC_RETURN_IF_ERROR(VisitNumeric(ctx, depth_t.dtype(), [&]<typename T>() {
    r.depth = static_cast<int64_t>(depth_t.data<T>()[0]);
    return absl::OkStatus();
  }));
  if (r.depth < 0) return ctx.Error("depth must not be negative");
  const int64_t rank = indices.rank();
  TPC_ASSIGN_OR_RETURN(const int64_t axis,
                       NormalizeAxis(ctx, ctx.node().attr_int("axis", -1), rank + 1));
  r.out = indices.shape();
  r.out.insert(r.out.begin() + axis, r.depth);
  for (int64_t d = axis; d < rank; ++d) r.inner *= indices.dim(d);
  return r;
}

// values[1] where an index (negative: from the end of `depth`) hits, values[0] elsewhere;
// the depth dim goes in at `axis`.
absl::Status OneHot(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  TPC_ASSIGN_OR_RETURN(const OneHotShape r, ReadOneHot(ctx));
  std::vector<int64_t> idx(static_cast<size_t>(indices.num_elements()));
  TPC_RETURN_IF_ERROR(VisitNumeric(ctx, indices.dtype(), [&]<typename T>() {
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(indices.data<T>()[i]);
    return absl::OkStatus();
  }));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, r.out, values.dtype()));
  return VisitBySize(ctx, values.dtype(), [&]<typename U>() {
    const U off = values.data<U>()[0], on = values.data<U>()[1];
    U* py = y->data<U>();
    for (int64_t i = 0; i < y->num_elements(); ++i) {
      py[i] = math::OneHotHit(idx.data(), r.depth, r.inner, i) ? on : off;
    }
    return absl::OkStatus();
  });
}

namespace {

// A window of `size` (input 0) points: sum_k a[k] cos(2 pi k n / D), D = size when periodic
// else size - 1.
absl::Status CosineWindow(KernelContext& ctx, const std::vector<double>& a) {
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> size, ReadInts(ctx, ctx.input(0)));
  if (size.size() != 1 || size[0] < 0) return ctx.Error("size must be one non-negative value");
  const int64_t n = size[0];
  const bool periodic = ctx.node().attr_int("periodic", 1) != 0;
  const double den = static_cast<double>(periodic ? n : n - 1);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {n}));
  return VisitNumeric(ctx, y->dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < n; ++i) {
      double v = 0;
      for (size_t k = 0; k < a.size(); ++k) {
        v += a[k] * std::cos(2 * M_PI * static_cast<double>(k) * static_cast<double>(i) / den);
      }
      y->data<T>()[i] = static_cast<T>(v);
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status HannWindow(KernelContext& ctx) { return CosineWindow(ctx, {0.5, -0.5}); }
absl::Status HammingWindow(KernelContext& ctx) {
  return CosineWindow(ctx, {25.0 / 46.0, -(1 - 25.0 / 46.0)});
}
absl::Status BlackmanWindow(KernelContext& ctx) { return CosineWindow(ctx, {0.42, -0.5, 0.08}); }

}  // namespace tpc::runtime::cpu
