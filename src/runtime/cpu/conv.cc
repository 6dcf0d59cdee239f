// Conv and ConvTranspose, N-D with groups, strides, dilations and padding: the window's
// taps laid out as the columns of a matrix (im2col) and one GEMM per image and group; the
// transposed convolution is the GEMM followed by the scatter-add back (col2im).
// Col2Im (the operator) is that scatter-add alone.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels.h"
#include "window.h"

namespace tpc::runtime::cpu {
namespace {

// col[r, o] = x[c, input coord of tap t at output position o] (0 in the padding), for
// r = c * taps + t; x is one image's `channels` channels.
template <typename T>
void Im2Col(ThreadPool& pool, const Window& w, int64_t channels, const T* x, T* col) {
  const int64_t taps = NumElements(w.kernel), outs = NumElements(w.out);
  const int64_t in_size = NumElements(w.in);
  const Shape in_strides = Strides(w.in);
  const size_t s = w.in.size();
  const int64_t last = w.out[s - 1];
  const Shape outer_dims(w.out.begin(), w.out.end() - 1);
  const int64_t outer = NumElements(outer_dims);
  pool.ParallelFor(channels * taps, 4, [&](int64_t b, int64_t e) {
    Shape k(s), o(s);
    for (int64_t r = b; r < e; ++r) {
      const T* xc = x + (r / taps) * in_size;
      Unravel(r % taps, w.kernel, &k);
      T* dst = col + r * outs;
      for (int64_t oo = 0; oo < outer; ++oo, dst += last) {
        Unravel(oo, outer_dims, &o);
        int64_t base = 0;
        bool inside = true;
        for (size_t d = 0; d + 1 < s; ++d) {
          const int64_t c =
              WindowInputCoord(o[d], k[d], w.strides[d], w.dilations[d], w.pad_begin[d]);
          inside = inside && c >= 0 && c < w.in[d];
          base += c * in_strides[d];
        }
        if (!inside) {
          std::fill(dst, dst + last, T(0));
          continue;
        }
        const size_t d = s - 1;
        for (int64_t ol = 0; ol < last; ++ol) {
          const int64_t c =
              WindowInputCoord(ol, k[d], w.strides[d], w.dilations[d], w.pad_begin[d]);
          dst[ol] = c >= 0 && c < w.in[d] ? xc[base + c] : T(0);
        }
      }
    }
  });
}

// The reverse of Im2Col: y[c, coord] += col[c * taps + t, i] for every input position i
// (here the convolution's output) and tap t. `w.in` is the scattered-to image (y), `w.out`
// the positions of col; channels run in parallel, each channel's taps in order.
template <typename T>
void Col2Im(ThreadPool& pool, const Window& w, int64_t channels, const T* col, T* y) {
  const int64_t taps = NumElements(w.kernel), outs = NumElements(w.out);
  const int64_t in_size = NumElements(w.in);
  const Shape in_strides = Strides(w.in);
  const size_t s = w.in.size();
  pool.ParallelFor(channels, 1, [&](int64_t b, int64_t e) {
    Shape k(s), o(s);
    for (int64_t c = b; c < e; ++c) {
      T* yc = y + c * in_size;
      for (int64_t t = 0; t < taps; ++t) {
        Unravel(t, w.kernel, &k);
        const T* src = col + (c * taps + t) * outs;
        for (int64_t i = 0; i < outs; ++i) {
          Unravel(i, w.out, &o);
          int64_t off = 0;
          bool inside = true;
          for (size_t d = 0; d < s && inside; ++d) {
            const int64_t p =
                WindowInputCoord(o[d], k[d], w.strides[d], w.dilations[d], w.pad_begin[d]);
            inside = p >= 0 && p < w.in[d];
            off += p * in_strides[d];
          }
          if (inside) yc[off] += src[i];
        }
      }
    }
  });
}

// y[n, m, ...] += bias[m].
template <typename T>
void AddBias(ThreadPool& pool, int64_t batch, int64_t channels, int64_t size, const T* bias, T* y) {
  pool.ParallelFor(batch * channels, std::max<int64_t>(1, 8192 / std::max<int64_t>(size, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t i = b; i < e; ++i) {
                       const T v = bias[i % channels];
                       for (int64_t j = 0; j < size; ++j) y[i * size + j] += v;
                     }
                   });
}

// Shared checks of X, W and B: X is [N, C, spatial...], W has X's rank, B is [`channels`].
absl::Status CheckOperands(const KernelContext& ctx, const Tensor& x, const Tensor& w,
                           const Tensor* b, int64_t out_channels) {
  if (x.rank() < 3)
    return ctx.Error(absl::StrCat("X must be [N, C, spatial...], got ", x.TypeString()));
  if (w.rank() != x.rank()) {
    return ctx.Error(
        absl::StrCat("W ", w.TypeString(), " and X ", x.TypeString(), " differ in rank"));
  }
  if (w.dtype() != x.dtype()) return ctx.Error("X and W differ in element type");
  if (b != nullptr && (b->rank() != 1 || b->dim(0) != out_channels || b->dtype() != x.dtype())) {
    return ctx.Error(
        absl::StrCat("B must be [", out_channels, "] of X's type, got ", b->TypeString()));
  }
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  if (ctx.node().has_attr("kernel_shape") && ctx.node().attr_ints("kernel_shape") != kernel) {
    return ctx.Error("attribute 'kernel_shape' differs from W's spatial dims");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConvShape> ReadConvShape(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  ConvShape s;
  s.group = ctx.node().attr_int("group", 1);
  s.m = w.rank() > 0 ? w.dim(0) : 0;
  TPC_RETURN_IF_ERROR(CheckOperands(ctx, x, w, ctx.optional_input(2), s.m));
  s.n = x.dim(0);
  s.c = x.dim(1);
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0 || w.dim(1) * s.group != s.c) {
    return ctx.Error(absl::StrCat("X has ", s.c, " channels, W ", w.TypeString(),
                                  " does not fit them in ", s.group, " groups"));
  }
  const Shape in(x.shape().begin() + 2, x.shape().end());
  TPC_ASSIGN_OR_RETURN(s.win,
                       MakeWindow(ctx, in, Shape(w.shape().begin() + 2, w.shape().end()), false));
  s.out = {s.n, s.m};
  s.out.insert(s.out.end(), s.win.out.begin(), s.win.out.end());
  return s;
}

absl::Status Conv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.optional_input(2);
  TPC_ASSIGN_OR_RETURN(const ConvShape shape, ReadConvShape(ctx));
  const int64_t n = shape.n, c = shape.c, group = shape.group, out_channels = shape.m;
  const Window& win = shape.win;
  const Shape in(x.shape().begin() + 2, x.shape().end());
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    const int64_t cg = c / group, mg = out_channels / group;
    const int64_t taps = NumElements(win.kernel), outs = NumElements(win.out);
    const int64_t in_size = NumElements(in), rows = cg * taps;
    // A 1x1 window that reads every input once in order: the image is its own im2col.
    bool direct = taps == 1 && win.out == in;
    for (int64_t s = 0; s < win.spatial(); ++s) {
      direct = direct && win.strides[s] == 1 && win.pad_begin[s] == 0;
    }
    std::vector<T> col(direct ? 0 : static_cast<size_t>(rows * outs));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t g = 0; g < group; ++g) {
        const T* xg = x.data<T>() + (i * c + g * cg) * in_size;
        if (!direct) Im2Col(ctx.pool(), win, cg, xg, col.data());
        ParallelGemm2D<T>(ctx.pool(), false, false, mg, outs, rows, T(1),
                          w.data<T>() + g * mg * rows, rows, direct ? xg : col.data(), outs, T(0),
                          y->data<T>() + (i * out_channels + g * mg) * outs, outs);
      }
    }
    if (b != nullptr) AddBias(ctx.pool(), n, out_channels, outs, b->data<T>(), y->data<T>());
    return absl::OkStatus();
  });
}

absl::StatusOr<ConvShape> ReadConvTransposeShape(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const int64_t group = ctx.node().attr_int("group", 1);
  const int64_t out_channels = w.rank() > 1 ? w.dim(1) * group : 0;
  TPC_RETURN_IF_ERROR(CheckOperands(ctx, x, w, ctx.optional_input(2), out_channels));
  const int64_t n = x.dim(0), c = x.dim(1);
  if (group < 1 || c % group != 0 || w.dim(0) != c) {
    return ctx.Error(absl::StrCat("X has ", c, " channels, W ", w.TypeString(),
                                  " does not fit them in ", group, " groups"));
  }
  const size_t s = static_cast<size_t>(x.rank() - 2);
  const Shape in(x.shape().begin() + 2, x.shape().end());
  const Shape kernel(w.shape().begin() + 2, w.shape().end());
  // The geometry of the convolution this one transposes: its input is our output.
  Window win;
  win.kernel = kernel;
  win.out = in;
  win.in.resize(s);
  win.strides = ctx.node().has_attr("strides") ? ctx.node().attr_ints("strides") : Shape(s, 1);
  win.dilations =
      ctx.node().has_attr("dilations") ? ctx.node().attr_ints("dilations") : Shape(s, 1);
  Shape out_pad =
      ctx.node().has_attr("output_padding") ? ctx.node().attr_ints("output_padding") : Shape(s, 0);
  Shape pads = ctx.node().has_attr("pads") ? ctx.node().attr_ints("pads") : Shape(2 * s, 0);
  Shape out_shape_attr =
      ctx.node().has_attr("output_shape") ? ctx.node().attr_ints("output_shape") : Shape{};
  if (out_shape_attr.size() == s + 2)
    out_shape_attr.erase(out_shape_attr.begin(), out_shape_attr.begin() + 2);
  if (win.strides.size() != s || win.dilations.size() != s || out_pad.size() < s ||
      pads.size() != 2 * s || (!out_shape_attr.empty() && out_shape_attr.size() != s)) {
    return ctx.Error(
        "strides, dilations, output_padding, pads or output_shape do not match "
        "the spatial dims");
  }
  const std::string auto_pad = ctx.node().attr_string("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  win.pad_begin.resize(s);
  win.pad_end.resize(s);
  for (size_t d = 0; d < s; ++d) {
    if (win.strides[d] < 1 || win.dilations[d] < 1)
      return ctx.Error("strides and dilations must be positive");
    const int64_t full =
        win.strides[d] * (in[d] - 1) + out_pad[d] + DilatedKernel(kernel[d], win.dilations[d]);
    if (same && !ctx.node().has_attr("pads")) {
      // The padding that gives output_shape (or in * stride), odd element as SAME_* says.
      win.in[d] = out_shape_attr.empty() ? in[d] * win.strides[d] : out_shape_attr[d];
      const int64_t total = full - win.in[d];
      win.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      win.pad_end[d] = total - win.pad_begin[d];
    } else {
      win.pad_begin[d] = auto_pad == "VALID" ? 0 : pads[d];
      win.pad_end[d] = auto_pad == "VALID" ? 0 : pads[d + s];
      win.in[d] =
          out_shape_attr.empty() ? full - win.pad_begin[d] - win.pad_end[d] : out_shape_attr[d];
    }
    if (win.in[d] < 0) return ctx.Error("the output would have a negative size");
  }
  ConvShape shape;
  shape.n = n;
  shape.c = c;
  shape.m = out_channels;
  shape.group = group;
  shape.out = {n, out_channels};
  shape.out.insert(shape.out.end(), win.in.begin(), win.in.end());
  shape.win = std::move(win);
  return shape;
}

absl::Status ConvTranspose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.optional_input(2);
  TPC_ASSIGN_OR_RETURN(const ConvShape shape, ReadConvTransposeShape(ctx));
  const int64_t n = shape.n, c = shape.c, group = shape.group, out_channels = shape.m;
  const Window& win = shape.win;
  const Shape& kernel = win.kernel;
  const Shape& in = win.out;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, shape.out, x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    const int64_t cg = c / group, mg = out_channels / group;
    const int64_t taps = NumElements(kernel), ins = NumElements(in);
    const int64_t y_size = NumElements(win.in);
    std::fill(y->data<T>(), y->data<T>() + y->num_elements(), T(0));
    std::vector<T> col(static_cast<size_t>(mg * taps * ins));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t g = 0; g < group; ++g) {
        // col[mg * taps, ins] = W_g^T [mg * taps, cg] x X_g [cg, ins]
        ParallelGemm2D<T>(ctx.pool(), true, false, mg * taps, ins, cg, T(1),
                          w.data<T>() + g * cg * mg * taps, mg * taps,
                          x.data<T>() + (i * c + g * cg) * ins, ins, T(0), col.data(), ins);
        Col2Im(ctx.pool(), win, mg, col.data(),
               y->data<T>() + (i * out_channels + g * mg) * y_size);
      }
    }
    if (b != nullptr) AddBias(ctx.pool(), n, out_channels, y_size, b->data<T>(), y->data<T>());
    return absl::OkStatus();
  });
}

absl::StatusOr<Col2ImShape> ReadCol2Im(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(Shape image, ReadInts(ctx, ctx.input(1)));
  TPC_ASSIGN_OR_RETURN(Shape block, ReadInts(ctx, ctx.input(2)));
  const size_t s = image.size();
  const auto& node = ctx.node();
  Col2ImShape r;
  Window& win = r.win;
  win.in = image;
  win.kernel = block;
  win.strides = node.has_attr("strides") ? node.attr_ints("strides") : Shape(s, 1);
  win.dilations = node.has_attr("dilations") ? node.attr_ints("dilations") : Shape(s, 1);
  const Shape pads = node.has_attr("pads") ? node.attr_ints("pads") : Shape(2 * s, 0);
  if (s == 0 || block.size() != s || win.strides.size() != s || win.dilations.size() != s ||
      pads.size() != 2 * s) {
    return ctx.Error("block_shape, strides, dilations or pads do not match image_shape");
  }
  win.pad_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(s));
  win.pad_end.assign(pads.begin() + static_cast<int64_t>(s), pads.end());
  for (size_t d = 0; d < s; ++d) {
    if (win.strides[d] < 1 || win.dilations[d] < 1 || block[d] < 1 || image[d] < 0) {
      return ctx.Error("strides, dilations and block_shape must be positive");
    }
    win.out.push_back(WindowOutputSize(image[d], block[d], win.strides[d], win.dilations[d],
                                       win.pad_begin[d], win.pad_end[d], false));
  }
  const int64_t taps = NumElements(block), outs = NumElements(win.out);
  if (x.rank() != 3 || x.dim(1) % taps != 0 || x.dim(2) != outs) {
    return ctx.Error(
        absl::StrCat("input must be [N, C * ", taps, ", ", outs, "], got ", x.TypeString()));
  }
  r.n = x.dim(0);
  r.c = x.dim(1) / taps;
  r.out = {r.n, r.c};
  r.out.insert(r.out.end(), image.begin(), image.end());
  return r;
}

// [N, C * prod(block_shape), L] columns summed back into [N, C, image_shape...]: column l
// holds the block at window position l, row c * taps + t its tap t of channel c.
absl::Status Col2Im(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const Col2ImShape r, ReadCol2Im(ctx));
  const int64_t taps = NumElements(r.win.kernel), outs = NumElements(r.win.out);
  const int64_t size = NumElements(r.win.in);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, r.out, x.dtype()));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() -> absl::Status {
    std::fill(y->data<T>(), y->data<T>() + y->num_elements(), T(0));
    for (int64_t i = 0; i < r.n; ++i) {
      Col2Im(ctx.pool(), r.win, r.c, x.data<T>() + i * r.c * taps * outs,
             y->data<T>() + i * r.c * size);
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
