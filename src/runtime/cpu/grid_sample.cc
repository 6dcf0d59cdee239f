// GridSample (X sampled at the normalized coordinates of a grid: nearest, linear or cubic,
// zeros / border / reflection padding, any number of spatial dims) and AffineGrid (the grid
// of an affine transform). Coordinates are computed in double, as onnx's reference does;
// an output point's taps are found once and read for every channel.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels.h"
#include "tpc/runtime/math/resize.h"

namespace tpc::runtime::cpu {
namespace {

enum class Padding { kZeros, kBorder, kReflection };
enum class SampleMode { kNearest, kLinear, kCubic };

// Reflects `x` at the borders [lo, hi] until it lies between them.
double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const double n = std::floor(dx / range);
    const double r = dx - n * range;
    return std::fmod(n, 2) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const double n = std::floor(dx / range);
    const double r = dx - n * range;
    return std::fmod(n, 2) == 0 ? hi - r : lo + r;
  }
  return x;
}

// One spatial dim of the input: its size and the borders a coordinate may reach (the
// outer edges of the end pixels, or their centres with align_corners).
struct Axis {
  int64_t size;
  double lo, hi;
};

// Input index `i` after padding, or -1 for a zero (padding "zeros" outside the input).
int64_t ResolveIndex(int64_t i, const Axis& a, Padding padding) {
  if (i >= 0 && i < a.size) return i;
  switch (padding) {
    case Padding::kZeros:
      return -1;
    case Padding::kBorder:
      return std::clamp<int64_t>(i, 0, a.size - 1);
    case Padding::kReflection:
      break;
  }
  const auto r = static_cast<int64_t>(Reflect(static_cast<double>(i), a.lo, a.hi));
  return std::clamp<int64_t>(r, 0, a.size - 1);
}

// The taps (index, weight) one coordinate reads along one axis.
struct Tap {
  int64_t index;
  double weight;
};
std::vector<Tap> AxisTaps(double x, const Axis& a, SampleMode mode, Padding padding) {
  if (x < a.lo || x > a.hi) {
    if (padding == Padding::kBorder) x = std::clamp(x, 0.0, static_cast<double>(a.size - 1));
    if (padding == Padding::kReflection) x = Reflect(x, a.lo, a.hi);
  }
  std::vector<Tap> taps;
  if (mode == SampleMode::kNearest) {
    taps.push_back({ResolveIndex(static_cast<int64_t>(x), a, padding), 1.0});
    return taps;
  }
  const double f = std::floor(x);
  const double t = x - f;
  const auto i0 = static_cast<int64_t>(f);
  if (mode == SampleMode::kLinear) {
    taps.push_back({ResolveIndex(i0, a, padding), 1 - t});
    taps.push_back({ResolveIndex(i0 + 1, a, padding), t});
    return taps;
  }
  for (int64_t k = -1; k <= 2; ++k) {
    taps.push_back({ResolveIndex(i0 + k, a, padding),
                    math::ResizeCubicWeight(static_cast<double>(k) - t, -0.75)});
  }
  return taps;
}

// A normalized coordinate in [-1, 1] as a position along `size` pixels.
double Denormalize(double n, int64_t size, bool align_corners) {
  const auto s = static_cast<double>(size);
  return align_corners ? (n + 1) / 2 * (s - 1) : ((n + 1) * s - 1) / 2;
}

absl::StatusOr<SampleMode> ReadMode(const KernelContext& ctx) {
  const std::string mode =
      ctx.node().attr_string("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "nearest") return SampleMode::kNearest;
  if (mode == "linear" || mode == "bilinear") return SampleMode::kLinear;
  if (mode == "cubic" || mode == "bicubic") return SampleMode::kCubic;
  return ctx.Error(absl::StrCat("unknown mode '", mode, "'"));
}

absl::StatusOr<Padding> ReadPadding(const KernelContext& ctx) {
  const std::string padding = ctx.node().attr_string("padding_mode", "zeros");
  if (padding == "zeros") return Padding::kZeros;
  if (padding == "border") return Padding::kBorder;
  if (padding == "reflection") return Padding::kReflection;
  return ctx.Error(absl::StrCat("unknown padding_mode '", padding, "'"));
}

// The grid's values as doubles.
std::vector<double> ReadDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ElementAsDouble(t, static_cast<int64_t>(i));
  return v;
}

}  // namespace

// X [N, C, D1..Dr], grid [N, H1..Hr, r] (coordinates x, y, ... : the last dim first) ->
// Y [N, C, H1..Hr].
absl::Status GridSample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const int64_t r = x.rank() - 2;
  if (r < 1 || grid.rank() != r + 2 || grid.dim(0) != x.dim(0) || grid.dim(r + 1) != r) {
    return ctx.Error(absl::StrCat("X ", x.TypeString(), " and grid ", grid.TypeString(),
                                  " do not fit: expected [N, C, D1..Dr] and [N, H1..Hr, r]"));
  }
  TPC_ASSIGN_OR_RETURN(SampleMode mode, ReadMode(ctx));
  TPC_ASSIGN_OR_RETURN(Padding padding, ReadPadding(ctx));
  const bool align_corners = ctx.node().attr_int("align_corners", 0) != 0;
  const int64_t batch = x.dim(0), channels = x.dim(1);
  std::vector<Axis> axes;
  int64_t in_points = 1;
  for (int64_t d = 0; d < r; ++d) {
    const int64_t size = x.dim(d + 2);
    in_points *= size;
    axes.push_back(align_corners ? Axis{size, 0.0, static_cast<double>(size - 1)}
                                 : Axis{size, -0.5, static_cast<double>(size) - 0.5});
  }
  Shape out_shape{batch, channels};
  int64_t out_points = 1;
  for (int64_t d = 0; d < r; ++d) {
    out_shape.push_back(grid.dim(d + 1));
    out_points *= grid.dim(d + 1);
  }
  const Shape in_strides = Strides(Shape(x.shape().begin() + 2, x.shape().end()));
  const std::vector<double> g = ReadDoubles(grid);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    std::vector<std::vector<Tap>> per_axis(static_cast<size_t>(r));
    std::vector<int64_t> offsets;
    std::vector<double> weights;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t o = 0; o < out_points; ++o) {
        const double* coords = g.data() + (n * out_points + o) * r;
        for (int64_t d = 0; d < r; ++d) {
          const Axis& a = axes[static_cast<size_t>(d)];
          double c = Denormalize(coords[r - 1 - d], a.size, align_corners);
          if (mode == SampleMode::kNearest) c = std::nearbyint(c);  // ties to even
          per_axis[static_cast<size_t>(d)] = AxisTaps(c, a, mode, padding);
        }
        // The product of the axes' taps; a zero of the padding drops the tap.
        offsets.assign(1, 0);
        weights.assign(1, 1.0);
        for (int64_t d = 0; d < r; ++d) {
          std::vector<int64_t> next_offsets;
          std::vector<double> next_weights;
          for (size_t k = 0; k < offsets.size(); ++k) {
            for (const Tap& t : per_axis[static_cast<size_t>(d)]) {
              if (t.index < 0) continue;
              next_offsets.push_back(offsets[k] + t.index * in_strides[static_cast<size_t>(d)]);
              next_weights.push_back(weights[k] * t.weight);
            }
          }
          offsets.swap(next_offsets);
          weights.swap(next_weights);
        }
        for (int64_t c = 0; c < channels; ++c) {
          const T* plane = px + (n * channels + c) * in_points;
          double sum = 0;
          for (size_t k = 0; k < offsets.size(); ++k) {
            sum += weights[k] * static_cast<double>(plane[offsets[k]]);
          }
          py[(n * channels + c) * out_points + o] = static_cast<T>(sum);
        }
      }
    }
    return absl::OkStatus();
  });
}

// theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D), size [N, C, H, W] or [N, C, D, H, W] ->
// grid [N, H, W, 2] or [N, D, H, W, 3]: theta times the normalized coordinates
// (x, y[, z], 1) of each output point.
absl::Status AffineGrid(KernelContext& ctx) {
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
  const bool align_corners = ctx.node().attr_int("align_corners", 0) != 0;
  // Normalized coordinates along each spatial dim (the dims of `size` after N, C).
  std::vector<std::vector<double>> base(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d) {
    const int64_t len = size[static_cast<size_t>(d + 2)];
    for (int64_t i = 0; i < len; ++i) {
      const auto fi = static_cast<double>(i), fl = static_cast<double>(len);
      double v = align_corners ? (len > 1 ? -1 + 2 * fi / (fl - 1) : 0.0) : (2 * fi + 1) / fl - 1;
      base[static_cast<size_t>(d)].push_back(v);
    }
  }
  Shape out_shape{size[0]};
  int64_t points = 1;
  for (int64_t d = 0; d < r; ++d) {
    out_shape.push_back(size[static_cast<size_t>(d + 2)]);
    points *= size[static_cast<size_t>(d + 2)];
  }
  out_shape.push_back(r);
  const Shape spatial(out_shape.begin() + 1, out_shape.end() - 1);
  TPC_ASSIGN_OR_RETURN(Tensor * grid, ctx.Output(0, out_shape));
  return VisitFloat(ctx, theta.dtype(), [&]<typename T>() {
    Shape idx(static_cast<size_t>(r));
    for (int64_t n = 0; n < size[0]; ++n) {
      const T* th = theta.data<T>() + n * r * (r + 1);
      for (int64_t p = 0; p < points; ++p) {
        int64_t rem = p;
        for (int64_t d = r; d-- > 0;) {
          idx[static_cast<size_t>(d)] = rem % spatial[static_cast<size_t>(d)];
          rem /= spatial[static_cast<size_t>(d)];
        }
        // The point (x, y[, z], 1): x along the last dim.
        std::vector<double> point(static_cast<size_t>(r + 1), 1.0);
        for (int64_t k = 0; k < r; ++k) {
          const size_t d = static_cast<size_t>(r - 1 - k);
          point[static_cast<size_t>(k)] = base[d][static_cast<size_t>(idx[d])];
        }
        T* out = grid->data<T>() + (n * points + p) * r;
        for (int64_t row = 0; row < r; ++row) {
          double sum = 0;
          for (int64_t k = 0; k <= r; ++k) {
            sum += static_cast<double>(th[row * (r + 1) + k]) * point[static_cast<size_t>(k)];
          }
          out[row] = static_cast<T>(sum);
        }
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
