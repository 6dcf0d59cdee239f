// Index math of the device convolution: the window's taps laid out as the columns of a
// matrix (im2col), then one GEMM, as the CPU kernel does it (cpu/conv.cc, cpu/window.h).
#pragma once

#include <cstdint>

#include "tpc/runtime/math/floats.h"
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

// The scatter-add back (col2im) of ConvTranspose and Col2Im, as a gather: element i of y
// [channels, in...] (g.in: the scattered-to image; g.out: the positions of col [channels ·
// taps, outs]) is the sum, over taps t in order, of col[c · taps + t, o] for the position o
// whose tap t reads it: o_d = (p_d + pad_begin_d − k_d · dilation_d) / stride_d, whole and
// in [0, out_d) in every dim. The CPU's scatter adds the same terms in the same order.
template <FloatKind K>
TPC_HOST_DEVICE inline void Col2ImElement(const ConvGeometry& g,
                                          const typename FloatIO<K>::Storage* col,
                                          typename FloatIO<K>::Storage* y, int64_t i) {
  using IO = FloatIO<K>;
  const int64_t c = DivIndex(i, g.in_size);
  int64_t rest = i - c * g.in_size;
  int64_t p[kMaxSpatial] = {};
  for (int d = g.spatial - 1; d >= 0; --d) {
    const int64_t q = DivIndex(rest, g.in[d]);
    p[d] = rest - q * g.in[d];
    rest = q;
  }
  float acc = 0.0f;
  for (int64_t t = 0; t < g.taps; ++t) {
    int64_t kt = t, o = 0, o_stride = 1;
    bool hit = true;
    for (int d = g.spatial - 1; d >= 0; --d) {
      const int64_t q = DivIndex(kt, g.kernel[d]);
      const int64_t k = kt - q * g.kernel[d];
      kt = q;
      const int64_t num = p[d] + g.pad_begin[d] - k * g.dilations[d];
      const int64_t od = num >= 0 ? DivIndex(num, g.strides[d]) : -1;
      hit = hit && num >= 0 && od * g.strides[d] == num && od < g.out[d];
      o += od * o_stride;
      o_stride *= g.out[d];
    }
    if (hit) acc += IO::Load(col[(c * g.taps + t) * g.outs + o]);
  }
  y[i] = IO::Store(acc);
}

}  // namespace tpc::runtime::math
