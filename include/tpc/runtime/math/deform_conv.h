// DeformConv's sampled columns, shared by the CPU kernel (cpu/deform_conv.cc) and the CUDA
// one (cuda/conv.cu): the im2col of a 2-D convolution whose taps are moved by learned
// offsets (read bilinearly, zero outside the input) and optionally scaled by a mask; the
// GEMM with W follows. Coordinates and interpolation in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct DeformGeometry {
  int64_t c = 0, h = 0, w = 0;                                        // X's channels and plane
  int64_t kh = 1, kw = 1;                                             // the kernel
  int64_t oh = 0, ow = 0;                                             // the output plane
  int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dilation[2] = {1, 1};  // (y, x)
  int64_t offset_group = 1;
  TPC_HOST_DEVICE int64_t taps() const { return kh * kw; }
  TPC_HOST_DEVICE int64_t plane() const { return oh * ow; }
};

// A plane at (y, x), bilinear between its four neighbours; zero outside.
template <typename Load>
TPC_HOST_DEVICE inline double DeformBilinear(int64_t h, int64_t w, double y, double x, Load plane) {
  const double fy = floor(y), fx = floor(x);
  const auto y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double ly = y - fy, lx = x - fx;
  double v = 0;
  for (int64_t dy = 0; dy <= 1; ++dy) {
    for (int64_t dx = 0; dx <= 1; ++dx) {
      const int64_t yi = y0 + dy, xi = x0 + dx;
      if (yi < 0 || yi >= h || xi < 0 || xi >= w) continue;
      const double wy = dy == 0 ? 1 - ly : ly, wx = dx == 0 ? 1 - lx : lx;
      v += wy * wx * plane(yi * w + xi);
    }
  }
  return v;
}

// Element i of one image's columns [C · taps, oh · ow]: row ci · taps + t (channel ci, tap
// t = (ki, kj)), column p (the output position): X's channel ci at the tap's position moved
// by the offsets (dy, dx) of its offset group, times the mask when there is one. `x(j)`
// reads element j of the image's X [C, H, W], `offset(j)` of its offsets
// [offset_group · taps · 2, oh, ow], `mask(j)` of its mask [offset_group · taps, oh, ow].
template <typename LoadX, typename LoadOffset, typename LoadMask>
TPC_HOST_DEVICE inline double DeformColElement(const DeformGeometry& g, int64_t i, bool has_mask,
                                               LoadX x, LoadOffset offset, LoadMask mask) {
  const int64_t plane = g.plane(), taps = g.taps();
  const int64_t p = i % plane, row = i / plane, t = row % taps, ci = row / taps;
  const int64_t grp = ci / (g.c / g.offset_group);
  const int64_t ki = t / g.kw, kj = t % g.kw, py = p / g.ow, px = p % g.ow;
  const int64_t off = ((grp * taps + t) * 2) * plane + p;
  const double yy =
      static_cast<double>(py * g.stride[0] - g.pad[0] + ki * g.dilation[0]) + offset(off);
  const double xx =
      static_cast<double>(px * g.stride[1] - g.pad[1] + kj * g.dilation[1]) + offset(off + plane);
  const int64_t base = ci * g.h * g.w;
  double v = DeformBilinear(g.h, g.w, yy, xx, [&](int64_t j) { return x(base + j); });
  if (has_mask) v *= mask((grp * taps + t) * plane + p);
  return v;
}

}  // namespace tpc::runtime::math
