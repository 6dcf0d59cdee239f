// GridSample (X sampled at the normalized coordinates of a grid: nearest, linear or cubic,
// zeros / border / reflection padding, 1 to 3 spatial dims) and AffineGrid (the grid of an
// affine transform). The element math is math/grid_sample.h's, shared with the CUDA
// kernels; coordinates are computed in double, as onnx's reference does.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels.h"
#include "tpc/runtime/math/grid_sample.h"

namespace tpc::runtime::cpu {
namespace {

using math::GridMode;
using math::GridPadding;

absl::StatusOr<GridMode> ReadMode(const KernelContext& ctx) {
  const std::string mode =
      ctx.node().attr_string("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "nearest") return GridMode::kNearest;
  if (mode == "linear" || mode == "bilinear") return GridMode::kLinear;
  if (mode == "cubic" || mode == "bicubic") return GridMode::kCubic;
  return ctx.Error(absl::StrCat("unknown mode '", mode, "'"));
}

absl::StatusOr<GridPadding> ReadPadding(const KernelContext& ctx) {
  const std::string padding = ctx.node().attr_string("padding_mode", "zeros");
  if (padding == "zeros") return GridPadding::kZeros;
  if (padding == "border") return GridPadding::kBorder;
  if (padding == "reflection") return GridPadding::kReflection;
  return ctx.Error(absl::StrCat("unknown padding_mode '", padding, "'"));
}

// The grid's values as doubles.
std::vector<double> ReadDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(t, static_cast<int64_t>(i));
  return v;
}

}  // namespace

absl::StatusOr<math::GridSampleGeometry> ReadGridSample(const KernelContext& ctx,
                                                        Shape* out_shape) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const int64_t r = x.rank() - 2;
  if (r < 1 || grid.rank() != r + 2 || grid.dim(0) != x.dim(0) || grid.dim(r + 1) != r) {
    return ctx.Error(absl::StrCat("X ", x.TypeString(), " and grid ", grid.TypeString(),
                                  " do not fit: expected [N, C, D1..Dr] and [N, H1..Hr, r]"));
  }
  if (r > math::kMaxSpatial) {
    return ctx.Error(absl::StrCat("X has ", r, " spatial dims, over ", math::kMaxSpatial));
  }
  math::GridSampleGeometry g;
  TPC_ASSIGN_OR_RETURN(g.mode, ReadMode(ctx));
  TPC_ASSIGN_OR_RETURN(g.padding, ReadPadding(ctx));
  g.align_corners = ctx.node().attr_int("align_corners", 0) != 0;
  g.spatial = static_cast<int>(r);
  g.channels = x.dim(1);
  *out_shape = {x.dim(0), x.dim(1)};
  const Shape in_strides = Strides(Shape(x.shape().begin() + 2, x.shape().end()));
  for (int d = 0; d < g.spatial; ++d) {
    const int64_t size = x.dim(d + 2);
    g.in_points *= size;
    g.in_strides[d] = in_strides[static_cast<size_t>(d)];
    g.axes[d] = math::MakeGridAxis(size, g.align_corners);
    out_shape->push_back(grid.dim(d + 1));
    g.out_points *= grid.dim(d + 1);
  }
  return g;
}

// X [N, C, D1..Dr], grid [N, H1..Hr, r] (coordinates x, y, ... : the last dim first) ->
// Y [N, C, H1..Hr]; an output point's taps found once and read for every channel.
absl::Status GridSample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape out_shape;
  TPC_ASSIGN_OR_RETURN(const math::GridSampleGeometry geo, ReadGridSample(ctx, &out_shape));
  const int64_t batch = x.dim(0), channels = geo.channels;
  const std::vector<double> g = ReadDoubles(ctx.input(1));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    math::GridTaps taps[math::kMaxSpatial];
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t o = 0; o < geo.out_points; ++o) {
        math::GridPointTaps(
            geo, n, o, [&](int64_t j) { return g[static_cast<size_t>(j)]; }, taps);
        for (int64_t c = 0; c < channels; ++c) {
          const T* plane = px + (n * channels + c) * geo.in_points;
          py[(n * channels + c) * geo.out_points + o] = static_cast<T>(math::GridPlaneSum(
              geo, taps, [&](int64_t off) { return static_cast<double>(plane[off]); }));
        }
      }
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<AffineGridShape> ReadAffineGrid(const KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> size, ReadInts(ctx, ctx.input(1)));
  const int64_t r = static_cast<int64_t>(size.size()) - 2;
  if ((r != 2 && r != 3) || theta.rank() != 3 || theta.dim(0) != size[0] || theta.dim(1) != r ||
      theta.dim(2) != r + 1) {
    return ctx.Error(absl::StrCat("theta ", theta.TypeString(), " does not fit size ",
                                  ShapeString(size),
                                  ": expected [N, 2, 3] with [N, C, H, W] or [N, 3, 4] with "
                                  "[N, C, D, H, W]"));
  }
  for (int64_t s : size) {
    if (s < 0) return ctx.Error("size has a negative dim");
  }
  AffineGridShape a;
  a.spatial.assign(size.begin() + 2, size.end());
  a.out = {size[0]};
  a.out.insert(a.out.end(), a.spatial.begin(), a.spatial.end());
  a.out.push_back(r);
  a.points = NumElements(a.spatial);
  a.align_corners = ctx.node().attr_int("align_corners", 0) != 0;
  return a;
}

// theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D), size [N, C, H, W] or [N, C, D, H, W] ->
// grid [N, H, W, 2] or [N, D, H, W, 3]: theta times the normalized coordinates
// (x, y[, z], 1) of each output point.
absl::Status AffineGrid(KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const AffineGridShape a, ReadAffineGrid(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * grid, ctx.Output(0, a.out));
  return VisitFloat(ctx, theta.dtype(), [&]<typename T>() {
    const T* th = theta.data<T>();
    T* out = grid->data<T>();
    for (int64_t i = 0; i < grid->num_elements(); ++i) {
      out[i] = static_cast<T>(math::AffineGridElement(
          static_cast<int>(a.spatial.size()), a.spatial.data(), a.points, a.align_corners, i,
          [&](int64_t j) { return static_cast<double>(th[j]); }));
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
