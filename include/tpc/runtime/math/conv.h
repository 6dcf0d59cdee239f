// Index math of the device convolution: the window's taps laid out as the columns of a
// matrix (im2col), then one GEMM, as the CPU kernel does it (cpu/conv.cc, cpu/window.h).
#pragma once

#include <cstdint>

#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

inline constexpr int kMaxSpatial = 3;

// One convolution's spatial geometry (1 to 3 spatial dims) in a kernel argument.
struct ConvGeometry {
  int spatial = 0;
  int64_t in[kMaxSpatial] = {}, kernel[kMaxSpatial] = {}, strides[kMaxSpatial] = {},
          dilations[kMaxSpatial] = {}, pad_begin[kMaxSpatial] = {}, pad_end[kMaxSpatial] = {},
          out[kMaxSpatial] = {};
  int64_t taps = 1, outs = 1, in_size = 1;  // products of kernel, out and in
};

// Element i of the im2col matrix of `channels` channels of one image x ([channels, in...]):
// col [channels · taps, outs], row r = c · taps + t (t: the kernel tap, row-major over the
// kernel dims), column o (the output position, row-major over the output dims) holds
// x[c, o · stride + t · dilation - pad_begin] per dim, or 0 in the padding.
template <typename Word>
TPC_HOST_DEVICE inline void Im2ColElement(const ConvGeometry& g, const Word* x, Word* col,
                                          int64_t i) {
  const int64_t r = DivIndex(i, g.outs);
  int64_t o = i - r * g.outs;
  const int64_t c = DivIndex(r, g.taps);
  int64_t t = r - c * g.taps;
  int64_t offset = 0, in_stride = 1;
  bool inside = true;
  for (int d = g.spatial - 1; d >= 0; --d) {
    const int64_t tq = DivIndex(t, g.kernel[d]);
    const int64_t k = t - tq * g.kernel[d];
    t = tq;
    const int64_t oq = DivIndex(o, g.out[d]);
    const int64_t od = o - oq * g.out[d];
    o = oq;
    const int64_t p = od * g.strides[d] + k * g.dilations[d] - g.pad_begin[d];
    inside = inside && p >= 0 && p < g.in[d];
    offset += p * in_stride;
    in_stride *= g.in[d];
  }
  col[i] = inside ? x[c * g.in_size + offset] : Word{};
}

}  // namespace tpc::runtime::math
