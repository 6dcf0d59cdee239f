// One bin of a direct DFT, shared by the CPU kernels of DFT and STFT (cpu/spectral.cc) and
// the CUDA ones (cuda/spectral.cu, one thread per bin): twiddles and sums in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct ComplexD {
  double re = 0, im = 0;
};

// Bin k of the DFT of length n of line(j) (j < len ≤ n; zero beyond):
// Σ_j line(j) · exp(sign · 2πi · (j·k mod n) / n), sign −1 (forward) or +1 (inverse, then
// divided by n). Reducing j·k mod n keeps the angle small and its integer part exact.
template <typename Line>
TPC_HOST_DEVICE inline ComplexD DftBin(int64_t n, int64_t len, int64_t k, bool inverse, Line line) {
  constexpr double kPi = 3.14159265358979323846;
  const double sign = inverse ? 1.0 : -1.0;
  ComplexD sum;
  for (int64_t j = 0; j < len; ++j) {
    const double angle = sign * 2 * kPi * static_cast<double>((j * k) % n) / static_cast<double>(n);
    const double c = cos(angle), s = sin(angle);
    const ComplexD v = line(j);
    sum.re += v.re * c - v.im * s;
    sum.im += v.re * s + v.im * c;
  }
  if (inverse) {
    sum.re /= static_cast<double>(n);
    sum.im /= static_cast<double>(n);
  }
  return sum;
}

// DFT along one axis of x [outer, axis_len, inner, comps] (comps 1: real, 2: complex) into
// y [outer, bins, inner, 2]: output element i (real or imaginary part of one bin).
struct DftLayout {
  int64_t outer = 1, axis_len = 0, inner = 1, comps = 1, n = 0, bins = 0;
  bool inverse = false;
};
template <typename Load>
TPC_HOST_DEVICE inline double DftElement(const DftLayout& l, int64_t i, Load x) {
  const int64_t part = i % 2, in = (i / 2) % l.inner, k = (i / (2 * l.inner)) % l.bins,
                o = i / (2 * l.inner * l.bins);
  const int64_t len = l.axis_len < l.n ? l.axis_len : l.n;
  const ComplexD v = DftBin(l.n, len, k, l.inverse, [&](int64_t j) {
    const int64_t e = ((o * l.axis_len + j) * l.inner + in) * l.comps;
    return ComplexD{x(e), l.comps == 2 ? x(e + 1) : 0.0};
  });
  return part == 0 ? v.re : v.im;
}

// STFT of x [batch, length, comps]: frames of `frame` samples every `step`, times the
// window (w(j); none: 1), into y [batch, frames, bins, 2]: output element i.
struct StftLayout {
  int64_t length = 0, comps = 1, step = 1, frame = 0, frames = 0, bins = 0;
};
template <typename Load, typename Window>
TPC_HOST_DEVICE inline double StftElement(const StftLayout& l, int64_t i, Load x, Window w) {
  const int64_t part = i % 2, k = (i / 2) % l.bins, f = (i / (2 * l.bins)) % l.frames,
                b = i / (2 * l.bins * l.frames);
  const ComplexD v = DftBin(l.frame, l.frame, k, false, [&](int64_t j) {
    const int64_t e = (b * l.length + f * l.step + j) * l.comps;
    const double wj = w(j);
    return ComplexD{x(e) * wj, (l.comps == 2 ? x(e + 1) : 0.0) * wj};
  });
  return part == 0 ? v.re : v.im;
}

}  // namespace tpc::runtime::math
