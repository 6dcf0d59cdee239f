// Internal to the CPU backend: the sliding window of convolutions and pools (Conv,
// ConvTranspose, MaxPool, AveragePool, LpPool). The arithmetic is in plain functions, the
// same on every backend; MakeWindow reads the ONNX attributes.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels.h"
#include "tpc/runtime/math/deform_conv.h"

namespace tpc::runtime::cpu {

// The input coordinate that kernel tap `k` of output position `o` reads (may fall in the
// padding: < 0 or >= the input size).
inline int64_t WindowInputCoord(int64_t o, int64_t k, int64_t stride, int64_t dilation,
                                int64_t pad_begin) {
  return o * stride + k * dilation - pad_begin;
}

// Row-major position `index` of a box of `dims` as one index per dim.
inline void Unravel(int64_t index, const Shape& dims, Shape* out) {
  for (size_t d = dims.size(); d-- > 0;) {
    (*out)[d] = dims[d] == 0 ? 0 : index % dims[d];
    index = dims[d] == 0 ? 0 : index / dims[d];
  }
}

// Extent of a dilated kernel of `k` taps.
inline int64_t DilatedKernel(int64_t k, int64_t dilation) { return (k - 1) * dilation + 1; }

// Output length of a window over `in` elements padded by `pads` in all: floor (or, for
// pools with ceil_mode, ceil) division, and with ceil_mode no window that starts in the end
// padding.
inline int64_t WindowOutputSize(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                                int64_t pad_begin, int64_t pad_end, bool ceil_mode) {
  const int64_t span = in + pad_begin + pad_end - DilatedKernel(k, dilation);
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

// The spatial geometry of one convolution or pool (one entry per spatial dim).
struct Window {
  Shape in, kernel, strides, dilations, pad_begin, pad_end, out;
  int64_t spatial() const { return static_cast<int64_t>(in.size()); }
};

// Reads strides, dilations, pads and auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID) for
// an input of spatial dims `in` and a kernel of `kernel` taps; `ceil_mode` for pools.
absl::StatusOr<Window> MakeWindow(const KernelContext& ctx, const Shape& in, const Shape& kernel,
                                  bool ceil_mode);

// Conv's operands checked (X [N, C, in...], W [M, C / group, kernel...], B [M]) and its
// geometry: shared by the backends' Conv kernels.
struct ConvShape {
  int64_t n = 0, c = 0, m = 0, group = 1;
  Window win;
  Shape out;  // [N, M, out...]
};
absl::StatusOr<ConvShape> ReadConvShape(const KernelContext& ctx);
// ConvTranspose's (X [N, C, in...], W [C, M / group, kernel...], B [M]; strides,
// dilations, pads or auto_pad, output_padding, output_shape): `win` is the convolution it
// transposes, whose input is ConvTranspose's output (win.in) and whose output positions
// are X's (win.out); m the output channels, `out` [N, M, win.in...].
absl::StatusOr<ConvShape> ReadConvTransposeShape(const KernelContext& ctx);

// A windowed pool's operand and geometry (X [N, C, in...], kernel_shape, ceil_mode, the
// window attributes): shared by the backends' MaxPool, AveragePool and LpPool kernels.
struct PoolShape {
  int64_t planes = 0;  // N · C
  Window win;
  Shape out;  // [N, C, out...]
};
absl::StatusOr<PoolShape> ReadPoolShape(const KernelContext& ctx);

// Col2Im's operands (input [N, C · prod(block_shape), L], image_shape and block_shape as
// host values, the window attributes): the window of the blocks over the image (win.in the
// image, win.out the block positions), and Y [N, C, image...]; shared by the backends.
struct Col2ImShape {
  Window win;
  int64_t n = 0, c = 0;
  Shape out;
};
absl::StatusOr<Col2ImShape> ReadCol2Im(const KernelContext& ctx);

// MaxUnpool's operands (X [N, C, spatial...], I of its shape, kernel_shape, strides, pads,
// output_shape as a host value): the pool's inverse geometry `inferred`, which I indexes
// (flattened), and the output `out` (at least as large; `inferred` sits in its leading
// corner); shared by the backends.
struct UnpoolShape {
  Shape inferred, out;
};
absl::StatusOr<UnpoolShape> ReadMaxUnpool(const KernelContext& ctx);

// ConvInteger's (X, W, x_zero_point, w_zero_point) or, with `qlinear`, QLinearConv's
// operands checked (X [N, C, spatial...], W [M, C / group, kernel...], x's zero point one
// value, w's one or [M]; QLinearConv's scales, y's zero point and B [M]): the convolution
// as Conv's, shared by the backends.
using IntegerConvShape = ConvShape;
absl::StatusOr<IntegerConvShape> ReadIntegerConv(const KernelContext& ctx, bool qlinear);

// DeformConv's operands checked (2-D: X, W, offset, B and mask), for every backend's kernel.
struct DeformShape {
  int64_t n = 0, oc = 0, group = 1;
  math::DeformGeometry g;
};
absl::StatusOr<DeformShape> ReadDeformConv(const KernelContext& ctx);

}  // namespace tpc::runtime::cpu
