// RoiAlign's element math (onnxruntime's), shared by the CPU kernel (cpu/detection.cc) and
// the CUDA one (cuda/roi_align.cu): each output cell of a region is the average (or the
// maximum) of grid_h · grid_w bilinear samples of its bin. Coordinates and sums in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct RoiAlignParams {
  int64_t channels = 0, height = 0, width = 0, out_h = 1, out_w = 1;
  int64_t ratio = 0;  // sampling_ratio; 0: adaptive (ceil of the bin size)
  double scale = 1.0;
  bool half_pixel = true, max = false;
};

// A region's bins: where they start, their size, and the samples per bin.
struct RoiBins {
  double start_h = 0, start_w = 0, bin_h = 0, bin_w = 0, count = 1;
  int64_t grid_h = 1, grid_w = 1;
};

// The bins of the region (x1, y1, x2, y2) `roi`.
TPC_HOST_DEVICE inline RoiBins RoiAlignBins(const RoiAlignParams& p, const double* roi) {
  RoiBins b;
  const double offset = p.half_pixel ? 0.5 : 0.0;
  b.start_w = roi[0] * p.scale - offset;
  b.start_h = roi[1] * p.scale - offset;
  double roi_w = roi[2] * p.scale - offset - b.start_w,
         roi_h = roi[3] * p.scale - offset - b.start_h;
  if (!p.half_pixel) {
    roi_w = roi_w > 1.0 ? roi_w : 1.0;
    roi_h = roi_h > 1.0 ? roi_h : 1.0;
  }
  b.bin_h = roi_h / static_cast<double>(p.out_h);
  b.bin_w = roi_w / static_cast<double>(p.out_w);
  b.grid_h = p.ratio > 0 ? p.ratio : static_cast<int64_t>(ceil(b.bin_h));
  b.grid_w = p.ratio > 0 ? p.ratio : static_cast<int64_t>(ceil(b.bin_w));
  const int64_t n = b.grid_h * b.grid_w;
  b.count = static_cast<double>(n > 1 ? n : 1);
  return b;
}

// One bilinear sample: four corner offsets into a channel plane and their weights (all 0
// outside the image).
struct RoiSample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

// Sample (iy, ix) of bin (ph, pw).
TPC_HOST_DEVICE inline RoiSample RoiAlignSample(const RoiAlignParams& p, const RoiBins& b,
                                                int64_t ph, int64_t pw, int64_t iy, int64_t ix) {
  double yy = b.start_h + static_cast<double>(ph) * b.bin_h +
              (static_cast<double>(iy) + 0.5) * b.bin_h / static_cast<double>(b.grid_h);
  double xx = b.start_w + static_cast<double>(pw) * b.bin_w +
              (static_cast<double>(ix) + 0.5) * b.bin_w / static_cast<double>(b.grid_w);
  RoiSample s;
  const auto height = static_cast<double>(p.height), width = static_cast<double>(p.width);
  if (yy < -1.0 || yy > height || xx < -1.0 || xx > width) return s;
  yy = yy > 0.0 ? yy : 0.0;
  xx = xx > 0.0 ? xx : 0.0;
  auto y_low = static_cast<int64_t>(yy), x_low = static_cast<int64_t>(xx);
  int64_t y_high = y_low + 1, x_high = x_low + 1;
  if (y_low >= p.height - 1) {
    y_high = y_low = p.height - 1;
    yy = static_cast<double>(y_low);
  }
  if (x_low >= p.width - 1) {
    x_high = x_low = p.width - 1;
    xx = static_cast<double>(x_low);
  }
  const double ly = yy - static_cast<double>(y_low), lx = xx - static_cast<double>(x_low);
  const double hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = y_low * p.width + x_low;
  s.pos[1] = y_low * p.width + x_high;
  s.pos[2] = y_high * p.width + x_low;
  s.pos[3] = y_high * p.width + x_high;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

// Folds sample k of a cell into its value v: the weighted corners summed (avg), or
// onnxruntime's max, the largest weighted corner of each sample, then the largest of those.
template <typename LoadPlane>
TPC_HOST_DEVICE inline double RoiAlignFold(bool max, double v, int64_t k, const RoiSample& s,
                                           LoadPlane plane) {
  if (!max) {
    for (int q = 0; q < 4; ++q) v += s.w[q] * plane(s.pos[q]);
    return v;
  }
  double m = s.w[0] * plane(s.pos[0]);
  for (int q = 1; q < 4; ++q) {
    const double e = s.w[q] * plane(s.pos[q]);
    m = e > m ? e : m;
  }
  return k == 0 || m > v ? m : v;
}

// Output cell (ph, pw) of one channel plane of the region's image.
template <typename LoadPlane>
TPC_HOST_DEVICE inline double RoiAlignCell(const RoiAlignParams& p, const RoiBins& b, int64_t ph,
                                           int64_t pw, LoadPlane plane) {
  double v = 0;
  int64_t k = 0;
  for (int64_t iy = 0; iy < b.grid_h; ++iy) {
    for (int64_t ix = 0; ix < b.grid_w; ++ix, ++k) {
      v = RoiAlignFold(p.max, v, k, RoiAlignSample(p, b, ph, pw, iy, ix), plane);
    }
  }
  return p.max ? v : v / b.count;
}

}  // namespace tpc::runtime::math
