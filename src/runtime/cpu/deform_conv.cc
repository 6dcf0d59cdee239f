// DeformConv: a 2-D convolution whose taps are moved by learned offsets (read bilinearly,
// zero outside the input) and optionally scaled by a mask.
#include <vector>

#include "kernels.h"
#include "window.h"

namespace tpc::runtime::cpu {
// X [N, C, H, W], W [oC, C / group, kH, kW], offset [N, offset_group * kH * kW * 2, oH, oW]
// ((dy, dx) per tap), B [oC], mask [N, offset_group * kH * kW, oH, oW] -> [N, oC, oH, oW].
absl::StatusOr<DeformShape> ReadDeformConv(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* bias = ctx.optional_input(3);
  const Tensor* mask = ctx.optional_input(4);
  if (x.rank() != 4 || w.rank() != 4 || offset.rank() != 4) {
    return ctx.Error("only 2-D DeformConv is supported (X, W and offset of rank 4)");
  }
  const ir::Node& node = ctx.node();
  DeformShape r;
  math::DeformGeometry& g = r.g;
  r.group = node.attr_int("group", 1);
  g.offset_group = node.attr_int("offset_group", 1);
  r.n = x.dim(0);
  g.c = x.dim(1);
  g.h = x.dim(2);
  g.w = x.dim(3);
  r.oc = w.dim(0);
  g.kh = w.dim(2);
  g.kw = w.dim(3);
  if (r.group < 1 || g.offset_group < 1 || g.c % r.group != 0 || r.oc % r.group != 0 ||
      g.c % g.offset_group != 0 || w.dim(1) != g.c / r.group) {
    return ctx.Error(absl::StrCat("X ", x.TypeString(), " and W ", w.TypeString(),
                                  " do not fit group ", r.group, " and offset_group ",
                                  g.offset_group));
  }
  if (node.has_attr("kernel_shape") && node.attr_ints("kernel_shape") != Shape{g.kh, g.kw}) {
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
  for (size_t d = 0; d < 2; ++d) {
    g.stride[d] = strides[d];
    g.dilation[d] = dilations[d];
    g.pad[d] = pads[d];
  }
  g.oh = (g.h + pads[0] + pads[2] - ((g.kh - 1) * dilations[0] + 1)) / strides[0] + 1;
  g.ow = (g.w + pads[1] + pads[3] - ((g.kw - 1) * dilations[1] + 1)) / strides[1] + 1;
  const int64_t taps = g.taps();
  if (offset.shape() != Shape{r.n, g.offset_group * taps * 2, g.oh, g.ow}) {
    return ctx.Error(absl::StrCat("offset has shape ", ShapeString(offset.shape()), ", expected ",
                                  ShapeString({r.n, g.offset_group * taps * 2, g.oh, g.ow})));
  }
  if (mask != nullptr && mask->shape() != Shape{r.n, g.offset_group * taps, g.oh, g.ow}) {
    return ctx.Error(absl::StrCat("mask has shape ", ShapeString(mask->shape()), ", expected ",
                                  ShapeString({r.n, g.offset_group * taps, g.oh, g.ow})));
  }
  if (bias != nullptr && bias->num_elements() != r.oc) return ctx.Error("B must have oC values");
  return r;
}

// X [N, C, H, W], W [oC, C / group, kH, kW], offset [N, offset_group * kH * kW * 2, oH, oW]
// ((dy, dx) per tap), B [oC], mask [N, offset_group * kH * kW, oH, oW] -> [N, oC, oH, oW]:
// per image the sampled columns (math::DeformColElement), then their product with W.
absl::Status DeformConv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  const Tensor* bias = ctx.optional_input(3);
  const Tensor* mask = ctx.optional_input(4);
  TPC_ASSIGN_OR_RETURN(const DeformShape r, ReadDeformConv(ctx));
  const math::DeformGeometry& g = r.g;
  const int64_t n = r.n, c = g.c, oc = r.oc, group = r.group, taps = g.taps();
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {n, oc, g.oh, g.ow}));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const int64_t cg = c / group, ocg = oc / group, plane = g.plane();
    const int64_t x_image = c * g.h * g.w, off_image = g.offset_group * taps * 2 * plane,
                  mask_image = g.offset_group * taps * plane;
    // The sampled input of one image: cols[ci * taps + t][p] for output position p.
    std::vector<double> cols(static_cast<size_t>(c * taps * plane));
    for (int64_t b = 0; b < n; ++b) {
      const T* xb = x.data<T>() + b * x_image;
      const T* ob = offset.data<T>() + b * off_image;
      const T* mb = mask != nullptr ? mask->data<T>() + b * mask_image : nullptr;
      for (int64_t i = 0; i < static_cast<int64_t>(cols.size()); ++i) {
        cols[static_cast<size_t>(i)] = math::DeformColElement(
            g, i, mb != nullptr, [&](int64_t j) { return static_cast<double>(xb[j]); },
            [&](int64_t j) { return static_cast<double>(ob[j]); },
            [&](int64_t j) { return static_cast<double>(mb[j]); });
      }
      for (int64_t o = 0; o < oc; ++o) {
        const int64_t gi = o / ocg;
        const T* wo = w.data<T>() + o * cg * taps;
        T* yo = y->data<T>() + (b * oc + o) * plane;
        for (int64_t p = 0; p < plane; ++p) {
          double sum = bias != nullptr ? static_cast<double>(bias->data<T>()[o]) : 0.0;
          for (int64_t k = 0; k < cg * taps; ++k) {
            sum += static_cast<double>(wo[k]) *
                   cols[static_cast<size_t>((gi * cg * taps + k) * plane + p)];
          }
          yo[p] = static_cast<T>(sum);
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
