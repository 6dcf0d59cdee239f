#include "window.h"

#include <string>

namespace tpc::runtime::cpu {
namespace {

// Attribute `name` with one value per spatial dim, or `def` repeated when absent.
absl::StatusOr<Shape> PerDim(const KernelContext& ctx, const std::string& name, size_t n,
                             int64_t def, int64_t min) {
  if (!ctx.node().has_attr(name)) return Shape(n, def);
  Shape v = ctx.node().attr_ints(name);
  if (v.size() != n) {
    return ctx.Error(
        absl::StrCat("attribute '", name, "' has ", v.size(), " values for ", n, " spatial dims"));
  }
  for (int64_t x : v) {
    if (x < min) return ctx.Error(absl::StrCat("attribute '", name, "' has a value below ", min));
  }
  return v;
}

}  // namespace

absl::StatusOr<Window> MakeWindow(const KernelContext& ctx, const Shape& in, const Shape& kernel,
                                  bool ceil_mode) {
  const size_t n = in.size();
  if (kernel.size() != n) {
    return ctx.Error(
        absl::StrCat("the kernel has ", kernel.size(), " spatial dims, the input ", n));
  }
  Window w;
  w.in = in;
  w.kernel = kernel;
  TPC_ASSIGN_OR_RETURN(w.strides, PerDim(ctx, "strides", n, 1, 1));
  TPC_ASSIGN_OR_RETURN(w.dilations, PerDim(ctx, "dilations", n, 1, 1));
  TPC_ASSIGN_OR_RETURN(Shape pads, PerDim(ctx, "pads", 2 * n, 0, 0));
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(n));
  w.pad_end.assign(pads.begin() + static_cast<int64_t>(n), pads.end());
  const std::string auto_pad = ctx.node().attr_string("auto_pad", "NOTSET");
  w.out.resize(n);
  for (size_t d = 0; d < n; ++d) {
    if (kernel[d] < 1) return ctx.Error("the kernel has an empty spatial dim");
    const int64_t extent = DilatedKernel(kernel[d], w.dilations[d]);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // Output = ceil(in / stride); the padding that takes, the odd element at the end
      // (SAME_UPPER) or the beginning (SAME_LOWER).
      const int64_t out = (in[d] + w.strides[d] - 1) / w.strides[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[d] + extent - in[d]);
      w.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[d] = total - w.pad_begin[d];
    } else if (auto_pad == "VALID") {
      w.pad_begin[d] = w.pad_end[d] = 0;
    } else if (auto_pad != "NOTSET") {
      return ctx.Error(absl::StrCat("auto_pad '", auto_pad, "' is not one of NOTSET, ",
                                    "SAME_UPPER, SAME_LOWER, VALID"));
    }
    w.out[d] = WindowOutputSize(in[d], kernel[d], w.strides[d], w.dilations[d], w.pad_begin[d],
                                w.pad_end[d], ceil_mode);
  }
  return w;
}

}  // namespace tpc::runtime::cpu
