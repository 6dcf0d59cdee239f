// Helpers shared by the CPU kernels: element types, shapes, broadcasting.
#include <algorithm>

#include "kernels.h"
#include "tpc/runtime/backend.h"
#include "tpc/util/half.h"

namespace tpc::runtime::cpu {

namespace {

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace

absl::StatusOr<Tensor> CastTensor(const KernelContext& ctx, const Tensor& src, ir::DType to) {
  Tensor out = Tensor::Allocate(to, src.shape());
  TPC_RETURN_IF_ERROR(CastInto(ctx, src, out));
  return out;
}

absl::Status CastInto(const KernelContext& ctx, const Tensor& src, const Tensor& dst) {
  const ir::DType to = dst.dtype();
  const int64_t n = src.num_elements();
  TPC_CHECK(n == dst.num_elements());
  if (src.dtype() == to) {
    if (n > 0) std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return absl::OkStatus();
  }
  // f32 to and from f16/bf16 16 lanes at a time (a half plan's logits, a half export's
  // norms); other pairs element by element.
  const bool f32_src = src.dtype() == ir::DType::kF32;
  if ((f32_src && IsHalfType(to)) || (IsHalfType(src.dtype()) && to == ir::DType::kF32)) {
    ConvertFloats(src, dst);
    return absl::OkStatus();
  }
  if (IsHalfType(to)) {
    const bool half = to == ir::DType::kF16;
    uint16_t* d = dst.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) {
      float v = static_cast<float>(ElementAsDouble(src, i));
      d[i] = half ? FloatToHalf(v) : FloatToBFloat16(v);
    }
    return absl::OkStatus();
  }
  // Integer to integer keeps all 64 bits (a double would round large int64 values).
  const bool int_src = ir::IsInteger(src.dtype()) || src.dtype() == ir::DType::kBool;
  return VisitType(ctx, to, [&]<typename T>() -> absl::Status {
    T* d = dst.data<T>();
    if (int_src && !std::is_floating_point_v<T>) {
      return VisitType(ctx, src.dtype(), [&]<typename S>() -> absl::Status {
        const S* p = src.data<S>();
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<T, bool>) {
            d[i] = p[i] != 0;
          } else {
            d[i] = static_cast<T>(p[i]);
          }
        }
        return absl::OkStatus();
      });
    }
    for (int64_t i = 0; i < n; ++i) d[i] = FromDouble<T>(ElementAsDouble(src, i));
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<int64_t>> ReadInts(const KernelContext& ctx, const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == ir::DType::kI64) {
    if (!out.empty()) std::memcpy(out.data(), t.raw(), out.size() * sizeof(int64_t));
  } else if (t.dtype() == ir::DType::kI32) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<int32_t>()[i];
  } else {
    return ctx.Error(absl::StrCat("expected an i64 or i32 tensor, got ", t.TypeString()));
  }
  return out;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape Strides(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

absl::StatusOr<int64_t> NormalizeAxis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return ctx.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<Shape> BroadcastShapes(const KernelContext& ctx, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      const int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::vector<std::string> parts;
      for (const Shape& x : shapes) parts.push_back(ShapeString(x));
      std::string all;
      for (const auto& p : parts) all += (all.empty() ? "" : " and ") + p;
      return ctx.Error(absl::StrCat("shapes ", all, " do not broadcast"));
    }
  }
  return out;
}

Shape Scaled(Shape strides, int64_t factor) {
  for (int64_t& s : strides) s *= factor;
  return strides;
}

Shape BroadcastStrides(const Shape& in, const Shape& out) {
  Shape strides(out.size(), 0);
  Shape own = Strides(in);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) strides[lead + i] = in[i] == 1 ? 0 : own[i];
  return strides;
}

namespace detail {

BroadcastWalk::BroadcastWalk(const Shape& out, const Shape* strides, size_t inputs, int64_t begin)
    : out_(out), strides_(strides), inputs_(inputs), idx_(out.size(), 0), off_(inputs, 0) {
  int64_t rem = begin;
  for (size_t d = out.size(); d-- > 0;) {
    idx_[d] = out[d] == 0 ? 0 : rem % out[d];
    rem = out[d] == 0 ? 0 : rem / out[d];
    for (size_t k = 0; k < inputs; ++k) off_[k] += idx_[d] * strides[k][d];
  }
}

void BroadcastWalk::Next(int64_t count, int64_t* offsets) {
  const size_t rank = out_.size();
  for (int64_t j = 0; j < count; ++j) {
    for (size_t k = 0; k < inputs_; ++k) offsets[k * kChunk + j] = off_[k];
    for (size_t d = rank; d-- > 0;) {
      for (size_t k = 0; k < inputs_; ++k) off_[k] += strides_[k][d];
      if (++idx_[d] < out_[d]) break;
      for (size_t k = 0; k < inputs_; ++k) off_[k] -= idx_[d] * strides_[k][d];
      idx_[d] = 0;
    }
  }
}

}  // namespace detail

absl::StatusOr<std::optional<std::vector<int64_t>>> AxesFromAttrOrInput(const KernelContext& ctx,
                                                                        const std::string& name,
                                                                        int input) {
  if (ctx.node().has_attr(name)) return ctx.node().attr_ints(name);
  if (ctx.has_input(input)) {
    TPC_ASSIGN_OR_RETURN(auto v, ReadInts(ctx, ctx.input(input)));
    return std::optional<std::vector<int64_t>>(std::move(v));
  }
  return std::optional<std::vector<int64_t>>();
}

absl::Status CopyWithShape(KernelContext& ctx, const Shape& shape) {
  const Tensor& x = ctx.input(0);
  if (NumElements(shape) != x.num_elements()) {
    return ctx.Error(
        absl::StrCat("cannot give ", x.TypeString(), " the shape ", ShapeString(shape)));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape, x.dtype()));
  if (x.nbytes() > 0 && y->raw() != x.raw()) ctx.backend().Copy(y->raw(), x.raw(), x.nbytes());
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cpu
