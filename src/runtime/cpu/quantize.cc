// Linear quantization: QuantizeLinear and DequantizeLinear (per tensor, per axis and, from
// opset 21, blocked), DynamicQuantizeLinear, and the integer products MatMulInteger,
// ConvInteger, QLinearMatMul and QLinearConv. Integer products run in double (exact for
// 8- and 16-bit operands: every partial sum stays far below 2^53) and round back.
// Rounding follows ONNX's reference: to nearest, ties to even (the default FP mode).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels.h"
#include "window.h"

namespace tpc::runtime::cpu {
namespace {

// The elements of a numeric tensor (f16/bf16 arrive as f32) as doubles.
std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = ElementAsDouble(t, static_cast<int64_t>(i));
  return out;
}

// Saturating conversion of a rounded value to the integer type T.
template <typename T>
T Saturate(double v) {
  return static_cast<T>(math::Saturate(v, static_cast<double>(std::numeric_limits<T>::min()),
                                       static_cast<double>(std::numeric_limits<T>::max())));
}

}  // namespace

absl::StatusOr<math::QuantIndex> ReadQuantIndex(const KernelContext& ctx, const Tensor& x,
                                                const Tensor& scale, const Tensor* zero_point) {
  if (zero_point != nullptr && zero_point->shape() != scale.shape()) {
    return ctx.Error(absl::StrCat("the zero point ", zero_point->TypeString(), " and the scale ",
                                  scale.TypeString(), " differ in shape"));
  }
  math::QuantIndex p;
  if (scale.num_elements() == 1 && scale.rank() <= 1) return p;
  TPC_ASSIGN_OR_RETURN(const int64_t axis,
                       NormalizeAxis(ctx, ctx.node().attr_int("axis", 1), x.rank()));
  p.dim = x.dim(axis);
  for (int64_t d = axis + 1; d < x.rank(); ++d) p.inner *= x.dim(d);
  const int64_t block = ctx.node().attr_int("block_size", 0);
  if (block <= 0) {
    if (scale.rank() != 1 || scale.dim(0) != p.dim) {
      return ctx.Error(absl::StrCat("a per-axis scale must be [", p.dim, "] (dim ", axis, " of x ",
                                    x.TypeString(), "), got ", scale.TypeString()));
    }
    p.mode = math::QuantIndex::Mode::kAxis;
    return p;
  }
  p.mode = math::QuantIndex::Mode::kBlocked;
  p.block = block;
  p.blocks = (p.dim + block - 1) / block;
  Shape want = x.shape();
  want[static_cast<size_t>(axis)] = p.blocks;
  if (scale.shape() != want) {
    return ctx.Error(absl::StrCat("a blocked scale (block_size ", block, " on axis ", axis,
                                  ") must be ", ShapeString(want), ", got ", scale.TypeString()));
  }
  return p;
}

namespace {

// Calls f.template operator()<T>() for the integer types a quantized tensor may have.
template <typename F>
absl::Status VisitQuantized(const KernelContext& ctx, ir::DType t, F&& f) {
  switch (t) {
    case ir::DType::kU8:
      return f.template operator()<uint8_t>();
    case ir::DType::kI8:
      return f.template operator()<int8_t>();
    case ir::DType::kU16:
      return f.template operator()<uint16_t>();
    case ir::DType::kI16:
      return f.template operator()<int16_t>();
    case ir::DType::kI32:
      return f.template operator()<int32_t>();
    default:
      break;
  }
  return ctx.Error(absl::StrCat("quantized element type ", ir::DTypeName(t), " is not supported"));
}

// Zero point or scale of a matrix operand as a shape that broadcasts numpy-style against the
// operand: a single element for the whole tensor, a vector of `rows` elements per row
// ([rows, 1]), anything else as it is (per column, or [..., M, 1] / [..., 1, N]).
Shape MatrixParamShape(const Tensor& t, bool per_row, int64_t rows) {
  if (t.num_elements() == 1) return {};
  if (per_row && t.rank() == 1 && t.dim(0) == rows) return {rows, 1};
  return t.shape();
}

}  // namespace

absl::StatusOr<Shape> ReadMatrixZeroPoint(const KernelContext& ctx, const Tensor& x,
                                          const Shape& shape, const Tensor* zero_point,
                                          bool per_row, const std::string& what) {
  if (zero_point == nullptr) return Shape{};
  if (zero_point->dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat(what, "'s zero point ", zero_point->TypeString(),
                                  " differs in type from ", what, " ", x.TypeString()));
  }
  const Shape zs = MatrixParamShape(*zero_point, per_row, shape[shape.size() - 2]);
  auto b = BroadcastShapes(ctx, {shape, zs});
  if (!b.ok() || *b != shape) {
    return ctx.Error(absl::StrCat(what, "'s zero point ", zero_point->TypeString(),
                                  " does not fit ", what, " ", x.TypeString()));
  }
  return zs;
}

absl::StatusOr<std::array<Shape, 4>> ReadQLinearParams(const KernelContext& ctx,
                                                       const Shape& full) {
  const int64_t m = full[full.size() - 2];
  std::array<Shape, 4> shapes;
  const int params[4] = {1, 4, 6, 7};  // a_scale, b_scale, y_scale, y_zero_point
  for (size_t q = 0; q < 4; ++q) {
    const Tensor& t = ctx.input(params[q]);
    shapes[q] = MatrixParamShape(t, params[q] != 4, m);
    auto b = BroadcastShapes(ctx, {full, shapes[q]});
    if (!b.ok() || *b != full) {
      return ctx.Error(absl::StrCat("input ", params[q], " ", t.TypeString(),
                                    " does not fit the output ", ShapeString(full)));
    }
  }
  return shapes;
}

namespace {

// An integer matrix operand minus its zero point, as doubles; `shape` is the operand's shape
// with a 1-D operand made a matrix.
absl::StatusOr<std::vector<double>> Centered(const KernelContext& ctx, const Tensor& x,
                                             const Shape& shape, const Tensor* zero_point,
                                             bool per_row, const std::string& what) {
  std::vector<double> out = ToDoubles(x);
  TPC_ASSIGN_OR_RETURN(const Shape zs,
                       ReadMatrixZeroPoint(ctx, x, shape, zero_point, per_row, what));
  if (zero_point == nullptr) return out;
  const std::vector<double> zp = ToDoubles(*zero_point);
  ForEachBroadcast<1>(ctx.pool(), shape, {zs}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    out[static_cast<size_t>(i)] -= zp[static_cast<size_t>(o[0])];
  });
  return out;
}

// A numpy matmul of A and B (zero points subtracted): `full` is the output with both
// operands as matrices ([batch..., M, N]), `shape` the output as ONNX gives it.
struct IntProduct {
  Shape full, shape;
  std::vector<double> c;
};

// A is input 0, B input `b_input`; zero points at `a_zp_input` and `b_zp_input`.
absl::StatusOr<IntProduct> IntegerMatMul(const KernelContext& ctx, int b_input, int a_zp_input,
                                         int b_zp_input) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(b_input);
  TPC_ASSIGN_OR_RETURN(const MatMulShape g, MatMulShapes(ctx, a, b));
  const int64_t m = g.m, k = g.k, n = g.n;
  TPC_ASSIGN_OR_RETURN(std::vector<double> pa,
                       Centered(ctx, a, g.a, ctx.optional_input(a_zp_input), true, "A"));
  TPC_ASSIGN_OR_RETURN(std::vector<double> pb,
                       Centered(ctx, b, g.b, ctx.optional_input(b_zp_input), false, "B"));
  IntProduct r;
  r.full = g.batch;
  r.full.push_back(m);
  r.full.push_back(n);
  r.shape = g.out;
  r.c.resize(static_cast<size_t>(NumElements(r.full)));
  g.ForEachMatrix([&](int64_t i, int64_t oa, int64_t ob) {
    Gemm2D<double>(false, false, m, n, k, 1.0, pa.data() + oa, k, pb.data() + ob, n, 0.0,
                   r.c.data() + i * m * n, n);
  });
  return r;
}

}  // namespace

absl::StatusOr<IntegerConvShape> ReadIntegerConv(const KernelContext& ctx, bool qlinear) {
  const int w_input = qlinear ? 3 : 1, w_zp_input = qlinear ? 5 : 3;
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(w_input);
  if (x.rank() < 3 || w.rank() != x.rank()) {
    return ctx.Error(absl::StrCat("X must be [N, C, spatial...] and W of its rank, got ",
                                  x.TypeString(), " and ", w.TypeString()));
  }
  IntegerConvShape r;
  r.n = x.dim(0);
  r.c = x.dim(1);
  r.m = w.dim(0);
  r.group = ctx.node().attr_int("group", 1);
  if (r.group < 1 || r.c % r.group != 0 || r.m % r.group != 0 || w.dim(1) * r.group != r.c) {
    return ctx.Error(absl::StrCat("X has ", r.c, " channels, W ", w.TypeString(),
                                  " does not fit them in ", r.group, " groups"));
  }
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.node().has_attr("kernel_shape") && ctx.node().attr_ints("kernel_shape") != kernel) {
    return ctx.Error("attribute 'kernel_shape' differs from W's spatial dims");
  }
  const Shape in(x.shape().begin() + 2, x.shape().end());
  TPC_ASSIGN_OR_RETURN(r.win, MakeWindow(ctx, in, kernel, false));
  if (const Tensor* zp = ctx.optional_input(2); zp != nullptr) {
    if (zp->num_elements() != 1) return ctx.Error("x's zero point must be a single value");
  }
  if (const Tensor* zp = ctx.optional_input(w_zp_input); zp != nullptr) {
    const int64_t count = zp->num_elements();
    if (zp->rank() > 1 || (count != 1 && count != r.m)) {
      return ctx.Error(absl::StrCat("w's zero point must be a single value or [", r.m, "], got ",
                                    zp->TypeString()));
    }
  }
  r.out = {r.n, r.m};
  r.out.insert(r.out.end(), r.win.out.begin(), r.win.out.end());
  if (!qlinear) return r;
  const Tensor& w_scale = ctx.input(4);
  if (w_scale.rank() > 1 || (w_scale.num_elements() != 1 && w_scale.num_elements() != r.m)) {
    return ctx.Error(
        absl::StrCat("w_scale must be a single value or [", r.m, "], got ", w_scale.TypeString()));
  }
  for (int i : {1, 6, 7}) {
    if (ctx.input(i).num_elements() != 1) {
      return ctx.Error(
          absl::StrCat("input ", i, " must be a single value, got ", ctx.input(i).TypeString()));
    }
  }
  const Tensor* bias = ctx.optional_input(8);
  if (bias != nullptr && (bias->rank() != 1 || bias->dim(0) != r.m)) {
    return ctx.Error(absl::StrCat("B must be [", r.m, "], got ", bias->TypeString()));
  }
  return r;
}

namespace {

// The integer convolution of ConvInteger and QLinearConv (x = input 0; w and the zero
// points where `qlinear` puts them; the zero point of w per output channel or for all), in
// doubles; `shape` receives the output's shape.
absl::StatusOr<std::vector<double>> IntegerConv(const KernelContext& ctx, bool qlinear,
                                                Shape* shape) {
  TPC_ASSIGN_OR_RETURN(const IntegerConvShape r, ReadIntegerConv(ctx, qlinear));
  const int w_zp_input = qlinear ? 5 : 3;
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(qlinear ? 3 : 1);
  const int64_t n = r.n, c = r.c, m = r.m, group = r.group;
  const Window& win = r.win;
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  const Shape in(x.shape().begin() + 2, x.shape().end());
  std::vector<double> xs = ToDoubles(x), ws = ToDoubles(w);
  if (const Tensor* zp = ctx.optional_input(2); zp != nullptr) {
    const double z = ElementAsDouble(*zp, 0);
    for (double& v : xs) v -= z;
  }
  const int64_t per_channel = NumElements(w.shape()) / std::max<int64_t>(m, 1);
  if (const Tensor* zp = ctx.optional_input(w_zp_input); zp != nullptr) {
    const int64_t count = zp->num_elements();
    const std::vector<double> z = ToDoubles(*zp);
    for (size_t i = 0; i < ws.size(); ++i) {
      ws[i] -= z[count == 1 ? 0 : i / static_cast<size_t>(per_channel)];
    }
  }
  *shape = {n, m};
  shape->insert(shape->end(), win.out.begin(), win.out.end());
  const int64_t cg = c / group, mg = m / group, outs = NumElements(win.out);
  const int64_t in_size = NumElements(in), taps = NumElements(kernel);
  const Shape in_strides = Strides(in);
  const size_t s = in.size();
  std::vector<double> y(static_cast<size_t>(n * m * outs));
  ctx.pool().ParallelFor(n * m, 1, [&](int64_t b, int64_t e) {
    Shape o(s), k(s);
    for (int64_t nm = b; nm < e; ++nm) {
      const int64_t img = nm / m, oc = nm % m, g = oc / mg;
      const double* wc = ws.data() + oc * per_channel;
      double* yc = y.data() + nm * outs;
      for (int64_t op = 0; op < outs; ++op) {
        Unravel(op, win.out, &o);
        double acc = 0;
        for (int64_t t = 0; t < taps; ++t) {
          Unravel(t, kernel, &k);
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < s && inside; ++d) {
            const int64_t p =
                WindowInputCoord(o[d], k[d], win.strides[d], win.dilations[d], win.pad_begin[d]);
            inside = p >= 0 && p < in[d];
            off += p * in_strides[d];
          }
          if (!inside) continue;
          const double* xc = xs.data() + (img * c + g * cg) * in_size + off;
          for (int64_t ci = 0; ci < cg; ++ci) acc += xc[ci * in_size] * wc[ci * taps + t];
        }
        yc[op] = acc;
      }
    }
  });
  return y;
}

// Writes `values` (exact integers) to output 0 as i32, wrapping as int32 arithmetic would.
absl::Status WriteInt32(KernelContext& ctx, const Shape& shape, const std::vector<double>& values) {
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape, ir::DType::kI32));
  int32_t* py = y->data<int32_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    py[i] = math::WrapInt32(values[i]);
  }
  return absl::OkStatus();
}

}  // namespace

// y = saturate(round(x / scale) + zero_point); the zero point's type, else `output_dtype`,
// else uint8.
absl::Status QuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zero_point = ctx.optional_input(2);
  const ir::DType out_type = ctx.output_dtype(0);
  if (zero_point != nullptr && zero_point->dtype() != out_type) {
    return ctx.Error(absl::StrCat("the zero point ", zero_point->TypeString(),
                                  " differs in type from the output (", ir::DTypeName(out_type),
                                  ")"));
  }
  TPC_ASSIGN_OR_RETURN(const math::QuantIndex p, ReadQuantIndex(ctx, x, scale, zero_point));
  const std::vector<double> s = ToDoubles(scale);
  // No zero point: zeros, one per scale.
  const std::vector<double> z = zero_point ? ToDoubles(*zero_point) : std::vector<double>(s.size());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), out_type));
  const bool single = x.dtype() == ir::DType::kF32;
  if (!single && x.dtype() != ir::DType::kF64 && x.dtype() != ir::DType::kI32) {
    return ctx.Error(absl::StrCat("x of type ", ir::DTypeName(x.dtype()), " is not supported"));
  }
  return VisitQuantized(ctx, out_type, [&]<typename T>() -> absl::Status {
    T* py = y->data<T>();
    ctx.pool().ParallelFor(x.num_elements(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const auto j = static_cast<size_t>(p.At(i));
        // f32 / f32 rounds in f32 as ONNX's reference does; i32 and f64 divide in f64.
        if (single) {
          py[i] = static_cast<T>(
              math::QuantizeElement(x.data<float>()[i], static_cast<float>(s[j]), z[j],
                                    static_cast<double>(std::numeric_limits<T>::min()),
                                    static_cast<double>(std::numeric_limits<T>::max())));
        } else {
          py[i] = Saturate<T>(std::nearbyint(ElementAsDouble(x, i) / s[j]) + z[j]);
        }
      }
    });
    return absl::OkStatus();
  });
}

// y = (x - zero_point) * scale, of the scale's type.
absl::Status DequantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zero_point = ctx.optional_input(2);
  if (zero_point != nullptr && zero_point->dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("the zero point ", zero_point->TypeString(),
                                  " differs in type from x ", x.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(const math::QuantIndex p, ReadQuantIndex(ctx, x, scale, zero_point));
  const std::vector<double> s = ToDoubles(scale);
  // No zero point: zeros, one per scale.
  const std::vector<double> z = zero_point ? ToDoubles(*zero_point) : std::vector<double>(s.size());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape()));
  return VisitFloat(ctx, y->dtype(), [&]<typename F>() -> absl::Status {
    F* py = y->data<F>();
    return VisitQuantized(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
      const T* px = x.data<T>();
      ctx.pool().ParallelFor(x.num_elements(), 1 << 14, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const auto j = static_cast<size_t>(p.At(i));
          py[i] = static_cast<F>(math::DequantizeElement(static_cast<double>(px[i]), z[j], s[j]));
        }
      });
      return absl::OkStatus();
    });
  });
}

// uint8 quantization of x over the range [min(x, 0), max(x, 0)]: outputs y, its scale
// and its zero point (all arithmetic in f32, as ONNX's reference).
absl::Status DynamicQuantizeLinear(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != ir::DType::kF32) return ctx.Error("x must be f32");
  const float* px = x.data<float>();
  const int64_t count = x.num_elements();
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, px[i]);
    hi = std::max(hi, px[i]);
  }
  const math::DynamicQuant q = math::DynamicQuantParams(lo, hi);
  const float scale = q.scale, zp = q.zero_point;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), ir::DType::kU8));
  uint8_t* py = y->data<uint8_t>();
  ctx.pool().ParallelFor(count, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      py[i] = static_cast<uint8_t>(math::QuantizeElement(px[i], scale, zp, 0.0, 255.0));
    }
  });
  if (ctx.wants_output(1)) {
    TPC_ASSIGN_OR_RETURN(Tensor * s, ctx.Output(1, {}, ir::DType::kF32));
    *s->data<float>() = scale;
  }
  if (ctx.wants_output(2)) {
    TPC_ASSIGN_OR_RETURN(Tensor * z, ctx.Output(2, {}, ir::DType::kU8));
    *z->data<uint8_t>() = static_cast<uint8_t>(zp);
  }
  return absl::OkStatus();
}

// Y = (A - a_zero_point) x (B - b_zero_point) in int32.
absl::Status MatMulInteger(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(IntProduct r, IntegerMatMul(ctx, 1, 2, 3));
  return WriteInt32(ctx, r.shape, r.c);
}

// y = saturate(round((a - a_zp) x (b - b_zp) * (a_scale * b_scale / y_scale)) + y_zp).
absl::Status QLinearMatMul(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(IntProduct r, IntegerMatMul(ctx, 3, 2, 5));
  const Tensor& y_zp = ctx.input(7);
  TPC_ASSIGN_OR_RETURN(const auto shapes, ReadQLinearParams(ctx, r.full));
  std::array<std::vector<double>, 4> values;
  const int params[4] = {1, 4, 6, 7};  // a_scale, b_scale, y_scale, y_zero_point
  for (size_t q = 0; q < 4; ++q) values[q] = ToDoubles(ctx.input(params[q]));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, r.shape, y_zp.dtype()));
  return VisitQuantized(ctx, y_zp.dtype(), [&]<typename T>() -> absl::Status {
    T* py = y->data<T>();
    ForEachBroadcast<4>(
        ctx.pool(), r.full, shapes, [&](int64_t i, const std::array<int64_t, 4>& o) {
          py[i] = static_cast<T>(math::RequantizeElement(
              r.c[static_cast<size_t>(i)], static_cast<float>(values[0][static_cast<size_t>(o[0])]),
              static_cast<float>(values[1][static_cast<size_t>(o[1])]),
              static_cast<float>(values[2][static_cast<size_t>(o[2])]),
              values[3][static_cast<size_t>(o[3])],
              static_cast<double>(std::numeric_limits<T>::min()),
              static_cast<double>(std::numeric_limits<T>::max())));
        });
    return absl::OkStatus();
  });
}

// Y = conv(x - x_zero_point, w - w_zero_point) in int32.
absl::Status ConvInteger(KernelContext& ctx) {
  Shape shape;
  TPC_ASSIGN_OR_RETURN(std::vector<double> y, IntegerConv(ctx, false, &shape));
  return WriteInt32(ctx, shape, y);
}

// y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp),
// w_scale and w_zp per output channel or for all.
absl::Status QLinearConv(KernelContext& ctx) {
  Shape shape;
  TPC_ASSIGN_OR_RETURN(std::vector<double> acc, IntegerConv(ctx, true, &shape));
  const Tensor& y_zp = ctx.input(7);
  const int64_t m = shape[1], outs = NumElements(shape) / std::max<int64_t>(shape[0] * m, 1);
  const Tensor& w_scale = ctx.input(4);
  const Tensor* bias = ctx.optional_input(8);
  const std::vector<double> ws = ToDoubles(w_scale);
  const std::vector<double> bs = bias ? ToDoubles(*bias) : std::vector<double>();
  const auto x_scale = static_cast<float>(ElementAsDouble(ctx.input(1), 0));
  const auto y_scale = static_cast<float>(ElementAsDouble(ctx.input(6), 0));
  const double zp = ElementAsDouble(y_zp, 0);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape, y_zp.dtype()));
  return VisitQuantized(ctx, y_zp.dtype(), [&]<typename T>() -> absl::Status {
    T* py = y->data<T>();
    for (size_t i = 0; i < acc.size(); ++i) {
      const auto oc = static_cast<size_t>((static_cast<int64_t>(i) / outs) % m);
      py[i] = static_cast<T>(
          math::RequantizeElement(acc[i] + (bs.empty() ? 0.0 : bs[oc]), x_scale,
                                  static_cast<float>(ws[ws.size() == 1 ? 0 : oc]), y_scale, zp,
                                  static_cast<double>(std::numeric_limits<T>::min()),
                                  static_cast<double>(std::numeric_limits<T>::max())));
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
