// Spectral operators: DFT (along one axis, real or complex input, forward or inverse,
// one-sided), STFT (windowed frames of a signal, each through the DFT) and
// MelWeightMatrix (the triangular filter bank of a mel spectrogram). The DFT is the direct
// sum with twiddles computed in double (the lengths of these ops are short), one output
// bin at a time (math/spectral.h, shared with the CUDA kernels).
#include <cmath>
#include <vector>

#include "kernels.h"

namespace tpc::runtime::cpu {
namespace {

// A scalar integer input.
absl::StatusOr<int64_t> ScalarInt(const KernelContext& ctx, int i) {
  TPC_ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInts(ctx, ctx.input(i)));
  if (v.size() != 1) return ctx.Error(absl::StrCat("input ", i, " must be a scalar"));
  return v[0];
}

}  // namespace

absl::StatusOr<math::DftLayout> ReadDft(const KernelContext& ctx, Shape* out_shape) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  if (rank < 2 || (x.dim(rank - 1) != 1 && x.dim(rank - 1) != 2)) {
    return ctx.Error("the input's last dim must be 1 (real) or 2 (complex)");
  }
  int64_t axis = ctx.opset() >= 20 ? -2 : ctx.node().attr_int("axis", 1);
  if (ctx.opset() >= 20 && ctx.has_input(2)) {
    TPC_ASSIGN_OR_RETURN(axis, ScalarInt(ctx, 2));
  }
  if (axis < -rank || axis >= rank) return ctx.Error("axis is out of range");
  if (axis < 0) axis += rank;
  if (axis == 0 || axis == rank - 1) return ctx.Error("axis must be a signal dim");
  math::DftLayout l;
  l.axis_len = x.dim(axis);
  l.n = l.axis_len;
  if (ctx.has_input(1)) {
    TPC_ASSIGN_OR_RETURN(l.n, ScalarInt(ctx, 1));
    if (l.n < 1) return ctx.Error("dft_length must be positive");
  }
  l.inverse = ctx.node().attr_int("inverse", 0) != 0;
  l.bins = ctx.node().attr_int("onesided", 0) != 0 ? l.n / 2 + 1 : l.n;
  *out_shape = x.shape();
  (*out_shape)[static_cast<size_t>(axis)] = l.bins;
  out_shape->back() = 2;
  for (int64_t d = 0; d < axis; ++d) l.outer *= x.dim(d);
  for (int64_t d = axis + 1; d < rank - 1; ++d) l.inner *= x.dim(d);
  l.comps = x.dim(rank - 1);
  return l;
}

// input [batch, n1, ..., nk, 1 or 2] (the last dim: real, or real and imaginary) ->
// [batch, ..., m, ..., 2] along `axis` (opset 20: an input, default -2; before: an
// attribute, default 1); m is dft_length (default: the axis' length), or m / 2 + 1 when
// one-sided (math::DftOutputBin).
absl::Status DFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Shape out_shape;
  TPC_ASSIGN_OR_RETURN(const math::DftLayout l, ReadDft(ctx, &out_shape));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, out_shape));
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    ctx.pool().ParallelFor(y->num_elements() / 2, 32, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        const math::ComplexD v =
            math::DftOutputBin(l, j, [&](int64_t t) { return static_cast<double>(px[t]); });
        py[2 * j] = static_cast<T>(v.re);
        py[2 * j + 1] = static_cast<T>(v.im);
      }
    });
    return absl::OkStatus();
  });
}

absl::StatusOr<math::StftLayout> ReadStft(const KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2)) {
    return ctx.Error("the signal must be [batch, length, 1 or 2]");
  }
  math::StftLayout l;
  TPC_ASSIGN_OR_RETURN(l.step, ScalarInt(ctx, 1));
  const Tensor* window = ctx.optional_input(2);
  if (window != nullptr && window->rank() != 1) return ctx.Error("the window must be 1-D");
  l.frame = window != nullptr ? window->dim(0) : -1;
  if (ctx.has_input(3)) {
    TPC_ASSIGN_OR_RETURN(l.frame, ScalarInt(ctx, 3));
    if (window != nullptr && window->dim(0) != l.frame) {
      return ctx.Error("the window's length is not frame_length");
    }
  }
  if (l.frame < 1) return ctx.Error("frame_length (or a window) must be given and positive");
  if (l.step < 1) return ctx.Error("frame_step must be positive");
  l.length = x.dim(1);
  l.comps = x.dim(2);
  if (l.frame > l.length) return ctx.Error("frame_length is longer than the signal");
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  if (onesided && l.comps == 2) return ctx.Error("a one-sided STFT needs a real signal");
  l.frames = 1 + (l.length - l.frame) / l.step;
  l.bins = onesided ? l.frame / 2 + 1 : l.frame;
  return l;
}

// signal [batch, length, 1 or 2], frame_step, window [frame_length] (optional),
// frame_length (optional) -> [batch, frames, bins, 2]: frame f is the signal from
// f * frame_step on, times the window, through the DFT; bins is frame_length / 2 + 1 when
// one-sided (the default) (math::StftOutputBin).
absl::Status STFT(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(const math::StftLayout l, ReadStft(ctx));
  const Tensor* window = ctx.optional_input(2);
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {x.dim(0), l.frames, l.bins, 2}));
  std::vector<double> w(static_cast<size_t>(l.frame), 1.0);
  if (window != nullptr) {
    for (int64_t j = 0; j < l.frame; ++j) w[static_cast<size_t>(j)] = ElementAsDouble(*window, j);
  }
  return VisitFloat(ctx, x.dtype(), [&]<typename T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    ctx.pool().ParallelFor(y->num_elements() / 2, 32, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        const math::ComplexD v = math::StftOutputBin(
            l, j, [&](int64_t t) { return static_cast<double>(px[t]); },
            [&](int64_t t) { return w[static_cast<size_t>(t)]; });
        py[2 * j] = static_cast<T>(v.re);
        py[2 * j + 1] = static_cast<T>(v.im);
      }
    });
    return absl::OkStatus();
  });
}

// [dft_length / 2 + 1, num_mel_bins]: column i is the triangle rising from mel point i to
// point i + 1 and falling to point i + 2, the num_mel_bins + 2 points evenly spaced in mel
// between the edge frequencies and mapped to DFT bins (as onnx's reference computes them).
absl::Status MelWeightMatrix(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const int64_t mel_bins, ScalarInt(ctx, 0));
  TPC_ASSIGN_OR_RETURN(const int64_t dft_length, ScalarInt(ctx, 1));
  TPC_ASSIGN_OR_RETURN(const int64_t sample_rate, ScalarInt(ctx, 2));
  if (ctx.input(3).num_elements() != 1 || ctx.input(4).num_elements() != 1) {
    return ctx.Error("lower_edge_hertz and upper_edge_hertz must be scalars");
  }
  const double lower = ElementAsDouble(ctx.input(3), 0);
  const double upper = ElementAsDouble(ctx.input(4), 0);
  if (mel_bins < 1 || dft_length < 1 || sample_rate < 1) {
    return ctx.Error("num_mel_bins, dft_length and sample_rate must be positive");
  }
  const int64_t spectrum_bins = dft_length / 2 + 1;
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = to_mel(lower);
  const double step = (to_mel(upper) - low_mel) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> points(static_cast<size_t>(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * step + low_mel) / 2595) - 1);
    points[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  std::vector<double> m(static_cast<size_t>(spectrum_bins * mel_bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> absl::StatusOr<double*> {
    if (j < 0 || j >= spectrum_bins) return ctx.Error("a mel point falls outside the spectrum");
    return &m[static_cast<size_t>(j * mel_bins + i)];
  };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t left = points[static_cast<size_t>(i)];
    const int64_t center = points[static_cast<size_t>(i + 1)];
    const int64_t right = points[static_cast<size_t>(i + 2)];
    if (center == left) {
      TPC_ASSIGN_OR_RETURN(double* e, at(center, i));
      *e = 1;
    } else {
      for (int64_t j = left; j <= center; ++j) {
        TPC_ASSIGN_OR_RETURN(double* e, at(j, i));
        *e = static_cast<double>(j - left) / static_cast<double>(center - left);
      }
    }
    for (int64_t j = center; j < right; ++j) {
      TPC_ASSIGN_OR_RETURN(double* e, at(j, i));
      *e = static_cast<double>(right - j) / static_cast<double>(right - center);
    }
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, {spectrum_bins, mel_bins}));
  return VisitNumeric(ctx, y->dtype(), [&]<typename T>() {
    for (size_t k = 0; k < m.size(); ++k) y->data<T>()[k] = static_cast<T>(m[k]);
    return absl::OkStatus();
  });
}

}  // namespace tpc::runtime::cpu
