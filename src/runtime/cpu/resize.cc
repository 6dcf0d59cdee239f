// Resize (and Upsample, its deprecated form: Resize-10's semantics): nearest, linear and cubic
// interpolation, one axis at a time (the interpolation is separable), in double as onnx's
// reference.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "kernels.h"
#include "tpc/runtime/math/resize.h"

namespace tpc::runtime::cpu {
namespace {

using math::ResizeCoord;
using math::ResizeMode;
using math::ResizeNearest;
using math::ResizeOptions;

// The taps of one axis: output coordinate o reads input indices idx[first[o] ..
// first[o + 1]) with their weights, or the extrapolation value where `outside[o]`.
struct AxisTaps {
  std::vector<int64_t> first, idx;
  std::vector<double> weight;
  std::vector<bool> outside;
};

AxisTaps MakeAxisTaps(const ResizeOptions& opt, const math::ResizeAxisGeometry& a) {
  AxisTaps t;
  t.first.push_back(0);
  for (int64_t o = 0; o < a.out; ++o) {
    const bool inside = math::ResizeTaps(opt, a, o, [&](int64_t k, double w) {
      t.idx.push_back(k);
      t.weight.push_back(w);
    });
    t.outside.push_back(!inside);
    t.first.push_back(static_cast<int64_t>(t.idx.size()));
  }
  return t;
}

// y[outer, o, inner] from x[outer, i, inner] along one axis.
void ResizeAxis(ThreadPool& pool, const AxisTaps& t, double extrapolation, int64_t outer,
                int64_t in, int64_t out, int64_t inner, const double* x, double* y) {
  pool.ParallelFor(outer * out, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(inner, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t r = b; r < e; ++r) {
                       const int64_t n = r / out, o = r % out;
                       double* yr = y + r * inner;
                       if (t.outside[static_cast<size_t>(o)]) {
                         std::fill(yr, yr + inner, extrapolation);
                         continue;
                       }
                       std::fill(yr, yr + inner, 0.0);
                       const double* xn = x + n * in * inner;
                       for (int64_t k = t.first[static_cast<size_t>(o)];
                            k < t.first[static_cast<size_t>(o) + 1]; ++k) {
                         const double w = t.weight[static_cast<size_t>(k)];
                         const double* xr = xn + t.idx[static_cast<size_t>(k)] * inner;
                         for (int64_t j = 0; j < inner; ++j) yr[j] += w * xr[j];
                       }
                     }
                   });
}

absl::StatusOr<ResizeOptions> ReadOptions(const KernelContext& ctx) {
  const ir::Node& node = ctx.node();
  ResizeOptions opt;
  const std::string mode = node.attr_string("mode", "nearest");
  if (mode == "nearest") {
    opt.mode = ResizeMode::kNearest;
  } else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") {
    opt.mode = ResizeMode::kLinear;
  } else if (mode == "cubic" || mode == "bicubic") {
    opt.mode = ResizeMode::kCubic;
  } else {
    return ctx.Error(absl::StrCat("mode '", mode, "' is not supported"));
  }
  // Resize-10 (and Upsample) map coordinates as asymmetric and round nearest down.
  const bool v10 = ctx.opset() < 11;
  const std::string coord =
      node.attr_string("coordinate_transformation_mode", v10 ? "asymmetric" : "half_pixel");
  if (coord == "half_pixel") {
    opt.coord = ResizeCoord::kHalfPixel;
  } else if (coord == "half_pixel_symmetric") {
    opt.coord = ResizeCoord::kHalfPixelSymmetric;
  } else if (coord == "pytorch_half_pixel") {
    opt.coord = ResizeCoord::kPytorchHalfPixel;
  } else if (coord == "align_corners") {
    opt.coord = ResizeCoord::kAlignCorners;
  } else if (coord == "asymmetric") {
    opt.coord = ResizeCoord::kAsymmetric;
  } else if (coord == "tf_crop_and_resize") {
    opt.coord = ResizeCoord::kTfCropAndResize;
  } else {
    return ctx.Error(absl::StrCat("coordinate_transformation_mode '", coord, "' is not supported"));
  }
  const std::string nearest =
      node.attr_string("nearest_mode", v10 ? "floor" : "round_prefer_floor");
  if (nearest == "round_prefer_floor") {
    opt.nearest = ResizeNearest::kRoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    opt.nearest = ResizeNearest::kRoundPreferCeil;
  } else if (nearest == "floor") {
    opt.nearest = ResizeNearest::kFloor;
  } else if (nearest == "ceil") {
    opt.nearest = ResizeNearest::kCeil;
  } else {
    return ctx.Error(absl::StrCat("nearest_mode '", nearest, "' is not supported"));
  }
  opt.cubic_a = node.attr_float("cubic_coeff_a", -0.75f);
  opt.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  opt.antialias = node.attr_int("antialias", 0) != 0;
  opt.extrapolation = node.attr_float("extrapolation_value", 0.0f);
  return opt;
}

// A float tensor (f32 or f64) as doubles; empty when absent or empty.
absl::StatusOr<std::vector<double>> ReadDoubles(const KernelContext& ctx, const Tensor* t) {
  std::vector<double> v;
  if (t == nullptr || t->num_elements() == 0) return v;
  TPC_RETURN_IF_ERROR(VisitFloat(ctx, t->dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < t->num_elements(); ++i)
      v.push_back(static_cast<double>(t->data<T>()[i]));
    return absl::OkStatus();
  }));
  return v;
}

}  // namespace

absl::StatusOr<ResizePlan> ReadResize(const KernelContext& ctx) {
  ResizePlan plan;
  TPC_ASSIGN_OR_RETURN(plan.opt, ReadOptions(ctx));
  const Tensor& x = ctx.input(0);
  const Shape& in = x.shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  const bool v10 = ctx.opset() < 11;
  TPC_ASSIGN_OR_RETURN(std::vector<double> roi_in,
                       ReadDoubles(ctx, v10 ? nullptr : ctx.optional_input(1)));
  TPC_ASSIGN_OR_RETURN(std::vector<double> scales_in,
                       ReadDoubles(ctx, ctx.optional_input(v10 ? 1 : 2)));
  // Upsample-7 has its scales as an attribute.
  if (auto it = ctx.node().attrs().find("scales"); v10 && it != ctx.node().attrs().end()) {
    if (const auto* attr = std::get_if<std::vector<float>>(&it->second)) {
      scales_in.assign(attr->begin(), attr->end());
    }
  }
  std::vector<int64_t> sizes_in;
  if (const Tensor* t = v10 ? nullptr : ctx.optional_input(3); t && t->num_elements() > 0) {
    TPC_ASSIGN_OR_RETURN(sizes_in, ReadInts(ctx, *t));
  }
  std::vector<int64_t> axes = ctx.node().attr_ints("axes");
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) {
    TPC_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank));
  }
  const size_t na = axes.size();
  if (scales_in.empty() == sizes_in.empty()) {
    return ctx.Error("exactly one of scales and sizes must be given");
  }
  if ((!scales_in.empty() && scales_in.size() != na) ||
      (!sizes_in.empty() && sizes_in.size() != na)) {
    return ctx.Error(absl::StrCat("scales or sizes must have one value per axis (", na, ")"));
  }
  // Per dim: scale, output length and roi.
  std::vector<double> scale(static_cast<size_t>(rank), 1.0),
      roi_start(static_cast<size_t>(rank), 0), roi_end(static_cast<size_t>(rank), 1);
  Shape out = in;
  if (!roi_in.empty()) {
    if (roi_in.size() != 2 * na) return ctx.Error("roi must have two values per axis");
    for (size_t k = 0; k < na; ++k) {
      roi_start[static_cast<size_t>(axes[k])] = roi_in[k];
      roi_end[static_cast<size_t>(axes[k])] = roi_in[na + k];
    }
  }
  if (!scales_in.empty()) {
    for (size_t k = 0; k < na; ++k) {
      const size_t d = static_cast<size_t>(axes[k]);
      if (!(scales_in[k] > 0)) return ctx.Error("scales must be positive");
      scale[d] = scales_in[k];
      // As onnx's reference and onnxruntime: tf_crop_and_resize's roi does not count.
      out[d] = static_cast<int64_t>(std::floor(scales_in[k] * static_cast<double>(in[d])));
    }
  } else {
    for (size_t k = 0; k < na; ++k) {
      const size_t d = static_cast<size_t>(axes[k]);
      if (sizes_in[k] < 0) return ctx.Error("sizes must not be negative");
      scale[d] = static_cast<double>(sizes_in[k]) / static_cast<double>(in[d]);
      out[d] = sizes_in[k];
    }
    const std::string policy = ctx.node().attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger" || policy == "not_smaller") {
      double s = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t a : axes) {
        const double v = scale[static_cast<size_t>(a)];
        s = policy == "not_larger" ? std::min(s, v) : std::max(s, v);
      }
      for (int64_t a : axes) {
        const size_t d = static_cast<size_t>(a);
        scale[d] = s;
        out[d] = static_cast<int64_t>(s * static_cast<double>(in[d]) + 0.5);
      }
    } else if (policy != "stretch") {
      return ctx.Error(absl::StrCat("keep_aspect_ratio_policy '", policy, "' is not supported"));
    }
  }

  plan.axes.resize(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    plan.axes[ud] = {in[ud], out[ud], scale[ud], roi_start[ud], roi_end[ud]};
  }
  plan.out = out;
  return plan;
}

absl::Status Resize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Shape& in = x.shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  TPC_ASSIGN_OR_RETURN(const ResizePlan plan, ReadResize(ctx));
  const Shape& out = plan.out;
  const ResizeOptions& opt = plan.opt;
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out, x.dtype()));
  if (NumElements(out) == 0) return absl::OkStatus();
  return VisitNumeric(ctx, x.dtype(), [&]<typename T>() {
    std::vector<double> cur(static_cast<size_t>(x.num_elements()));
    for (size_t i = 0; i < cur.size(); ++i) cur[i] = static_cast<double>(x.data<T>()[i]);
    Shape shape = in;
    for (int64_t d = 0; d < rank; ++d) {
      const size_t ud = static_cast<size_t>(d);
      const math::ResizeAxisGeometry& a = plan.axes[ud];
      if (ResizeAxisIsIdentity(a)) continue;
      int64_t outer = 1, inner = 1;
      for (int64_t k = 0; k < d; ++k) outer *= shape[static_cast<size_t>(k)];
      for (int64_t k = d + 1; k < rank; ++k) inner *= shape[static_cast<size_t>(k)];
      const AxisTaps taps = MakeAxisTaps(opt, a);
      std::vector<double> next(static_cast<size_t>(outer * out[ud] * inner));
      ResizeAxis(ctx.pool(), taps, opt.extrapolation, outer, in[ud], out[ud], inner, cur.data(),
                 next.data());
      cur.swap(next);
      shape[ud] = out[ud];
    }
    T* py = y->data<T>();
    for (size_t i = 0; i < cur.size(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        const double v = std::nearbyint(cur[i]);
        py[i] = static_cast<T>(std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()),
                                          static_cast<double>(std::numeric_limits<T>::max())));
      } else {
        py[i] = static_cast<T>(cur[i]);
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
