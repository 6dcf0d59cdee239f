// DeformConv: a 2-D convolution whose taps are moved by learned offsets (read bilinearly,
// zero outside the input) and optionally scaled by a mask.
#include <cmath>
#include <vector>

#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

// X's plane at (y, x), bilinear between its four neighbours; zero outside.
template <typename T>
double Bilinear(const T* plane, int64_t h, int64_t w, double y, double x) {
  const double fy = std::floor(y), fx = std::floor(x);
  const auto y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double ly = y - fy, lx = x - fx;
  double v = 0;
  for (int64_t dy = 0; dy <= 1; ++dy) {
    for (int64_t dx = 0; dx <= 1; ++dx) {
      const int64_t yi = y0 + dy, xi = x0 + dx;
      if (yi < 0 || yi >= h || xi < 0 || xi >= w) continue;
      const double wy = dy == 0 ? 1 - ly : ly, wx = dx == 0 ? 1 - lx : lx;
      v += wy * wx * static_cast<double>(plane[yi * w + xi]);
    }
  }
  return v;
}

}  // namespace

// X [N, C, H, W], W [oC, C / group, kH, kW], offset [N, offset_group * kH * kW * 2, oH, oW]
// ((dy, dx) per tap), B [oC], mask [N, offset_group * kH * kW, oH, oW] -> [N, oC, oH, oW].
absl::Status DeformConv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* bias = ctx.optional_input(3);
  const Tensor* mask = ctx.optional_input(4);
  if (x.rank() != 4 || w.rank() != 4 || offset.rank() != 4) {
    return ctx.Error("only 2-D DeformConv is supported (X, W and offset of rank 4)");
  }
  const ir::Node& node = ctx.node();
  const int64_t group = node.attr_int("group", 1);
  const int64_t offset_group = node.attr_int("offset_group", 1);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t oc = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  if (group < 1 || offset_group < 1 || c % group != 0 || oc % group != 0 || c % offset_group != 0 ||
      w.dim(1) != c / group) {
    return ctx.Error(absl::StrCat("X ", x.TypeString(), " and W ", w.TypeString(),
                                  " do not fit group ", group, " and offset_group ", offset_group));
  }
  if (node.has_attr("kernel_shape") && node.attr_ints("kernel_shape") != Shape{kh, kw}) {
    return ctx.Error("kernel_shape does not match W");
  }
  auto pair = [&](const char* name, int64_t def, size_t count) {
    Shape v = node.attr_ints(name);
    return v.empty() ? Shape(count, def) : v;
  };
  const Shape strides = pair("strides", 1, 2), dilations = pair("dilations", 1, 2);
  const Shape pads = pair("pads", 0, 4);
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    return ctx.Error("strides, dilations and pads must have 2, 2 and 4 values");
  }
  const int64_t oh = (h + pads[0] + pads[2] - ((kh - 1) * dilations[0] + 1)) / strides[0] + 1;
  const int64_t ow = (wd + pads[1] + pads[3] - ((kw - 1) * dilations[1] + 1)) / strides[1] + 1;
  const int64_t taps = kh * kw;
  if (offset.shape() != Shape{n, offset_group * taps * 2, oh, ow}) {
    return ctx.Error(absl::StrCat("offset has shape ", ShapeString(offset.shape()), ", expected ",
                                  ShapeString({n, offset_group * taps * 2, oh, ow})));
  }
  if (mask != nullptr && mask->shape() != Shape{n, offset_group * taps, oh, ow}) {
    return ctx.Error(absl::StrCat("mask has shape ", ShapeString(mask->shape()), ", expected ",
                                  ShapeString({n, offset_group * taps, oh, ow})));
  }
  if (bias != nullptr && bias->num_elements() != oc) return ctx.Error("B must have oC values");
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {n, oc, oh, ow}));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const int64_t cg = c / group, ocg = oc / group, c_per_offset = c / offset_group;
    const int64_t plane = oh * ow;
    // The sampled input of one image: cols[ci * taps + t][p] for output position p.
    std::vector<double> cols(static_cast<size_t>(c * taps * plane));
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ci = 0; ci < c; ++ci) {
        const int64_t g = ci / c_per_offset;
        const T* xp = x.data<T>() + (b * c + ci) * h * wd;
        for (int64_t i = 0; i < kh; ++i) {
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t t = i * kw + j;
            const T* off_y = offset.data<T>() + ((b * offset_group + g) * taps * 2 + 2 * t) * plane;
            const T* off_x = off_y + plane;
            const T* m = mask != nullptr
                             ? mask->data<T>() + ((b * offset_group + g) * taps + t) * plane
                             : nullptr;
            double* col = cols.data() + (ci * taps + t) * plane;
            for (int64_t py = 0; py < oh; ++py) {
              for (int64_t px = 0; px < ow; ++px) {
                const int64_t p = py * ow + px;
                const double yy =
                    static_cast<double>(py * strides[0] - pads[0] + i * dilations[0]) +
                    static_cast<double>(off_y[p]);
                const double xx =
                    static_cast<double>(px * strides[1] - pads[1] + j * dilations[1]) +
                    static_cast<double>(off_x[p]);
                double v = Bilinear(xp, h, wd, yy, xx);
                if (m != nullptr) v *= static_cast<double>(m[p]);
                col[p] = v;
              }
            }
          }
        }
      }
      for (int64_t o = 0; o < oc; ++o) {
        const int64_t g = o / ocg;
        const T* wo = w.data<T>() + o * cg * taps;
        T* yo = y->data<T>() + (b * oc + o) * plane;
        for (int64_t p = 0; p < plane; ++p) {
          double sum = bias != nullptr ? static_cast<double>(bias->data<T>()[o]) : 0.0;
          for (int64_t k = 0; k < cg * taps; ++k) {
            sum += static_cast<double>(wo[k]) *
                   cols[static_cast<size_t>((g * cg * taps + k) * plane + p)];
          }
          yo[p] = static_cast<T>(sum);
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
