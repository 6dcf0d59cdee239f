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
// y [outer, bins, inner, 2]: output bin j (elements 2j and 2j + 1 of y).
struct DftLayout {
  int64_t outer = 1, axis_len = 0, inner = 1, comps = 1, n = 0, bins = 0;
  bool inverse = false;
};
template <typename Load>
TPC_HOST_DEVICE inline ComplexD DftOutputBin(const DftLayout& l, int64_t j, Load x) {
  const int64_t in = j % l.inner, k = (j / l.inner) % l.bins, o = j / (l.inner * l.bins);
  const int64_t len = l.axis_len < l.n ? l.axis_len : l.n;
  return DftBin(l.n, len, k, l.inverse, [&](int64_t t) {
    const int64_t e = ((o * l.axis_len + t) * l.inner + in) * l.comps;
    return ComplexD{x(e), l.comps == 2 ? x(e + 1) : 0.0};
  });
}

// STFT of x [batch, length, comps]: frames of `frame` samples every `step`, times the
// window (w(t); none: 1), into y [batch, frames, bins, 2]: output bin j.
struct StftLayout {
  int64_t length = 0, comps = 1, step = 1, frame = 0, frames = 0, bins = 0;
};
template <typename Load, typename Window>
TPC_HOST_DEVICE inline ComplexD StftOutputBin(const StftLayout& l, int64_t j, Load x, Window w) {
  const int64_t k = j % l.bins, f = (j / l.bins) % l.frames, b = j / (l.bins * l.frames);
  return DftBin(l.frame, l.frame, k, false, [&](int64_t t) {
    const int64_t e = (b * l.length + f * l.step + t) * l.comps;
    const double wt = w(t);
    return ComplexD{x(e) * wt, (l.comps == 2 ? x(e + 1) : 0.0) * wt};
  });
}

}  // namespace tpc::runtime::math
