// Launches of linear quantization: QuantizeLinear, DequantizeLinear and
// DynamicQuantizeLinear, one thread per element in a grid-stride loop; each thread reads
// x[i] and its scale and zero point at q.At(i) (checked against x by cpu::ReadQuantIndex)
// and writes y[i]. The element steps of the integer products (MatMulInteger,
// QLinearMatMul) around their f64 GEMM: an operand centered on its zero point, the product
// wrapped to int32 or requantized; each thread writes element i, reading parameters
// through views built from their checked shapes. Math in math/quantize.h.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

// Calls f(T{}) with T the storage type that t names.
template <typename F>
cudaError_t ByQuantType(QuantType t, F&& f) {
  switch (t) {
    case QuantType::kU8:
      return f(uint8_t{});
    case QuantType::kI8:
      return f(int8_t{});
    case QuantType::kU16:
      return f(uint16_t{});
    case QuantType::kI16:
      return f(int16_t{});
    case QuantType::kI32:
      return f(int32_t{});
  }
  return cudaErrorInvalidValue;
}

template <typename T>
__global__ void QuantizeKernel(const float* x, const float* scale, const T* zero_point,
                               math::QuantIndex q, double lo, double hi, T* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t j = q.At(i);
    const double zp = zero_point != nullptr ? static_cast<double>(zero_point[j]) : 0.0;
    y[i] = static_cast<T>(math::QuantizeElement(x[i], scale[j], zp, lo, hi));
  }
}

template <FloatKind K, typename T>
__global__ void DequantizeKernel(const T* x, const typename FloatIO<K>::Storage* scale,
                                 const T* zero_point, math::QuantIndex q,
                                 typename FloatIO<K>::Storage* y, int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t j = q.At(i);
    const double zp = zero_point != nullptr ? static_cast<double>(zero_point[j]) : 0.0;
    y[i] = IO::Store(static_cast<float>(math::DequantizeElement(
        static_cast<double>(x[i]), zp, static_cast<double>(IO::Load(scale[j])))));
  }
}

// Every thread derives the parameters from the two extremes; thread 0 also writes them.
__global__ void DynamicQuantizeKernel(const float* x, const float* extremes, uint8_t* y,
                                      float* scale, uint8_t* zero_point, int64_t n) {
  const math::DynamicQuant p = math::DynamicQuantParams(extremes[0], extremes[1]);
  if (First() == 0) {
    if (scale != nullptr) *scale = p.scale;
    if (zero_point != nullptr) *zero_point = static_cast<uint8_t>(p.zero_point);
  }
  for (int64_t i = First(); i < n; i += Step()) {
    y[i] = static_cast<uint8_t>(math::QuantizeElement(x[i], p.scale, p.zero_point, 0.0, 255.0));
  }
}

template <typename T>
__global__ void CenterKernel(const T* x, const T* zero_point, StridedView vz, double* out,
                             int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    out[i] = static_cast<double>(x[i]) -
             (zero_point != nullptr ? static_cast<double>(zero_point[vz.At(i)]) : 0.0);
  }
}

__global__ void WrapInt32Kernel(const double* c, int32_t* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) y[i] = math::WrapInt32(c[i]);
}

template <typename T>
__global__ void RequantizeKernel(const double* c, QLinearParams p, const T* y_zero_point, double lo,
                                 double hi, T* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    const double acc =
        c[i] + (p.bias != nullptr ? static_cast<double>(p.bias[p.vbias.At(i)]) : 0.0);
    y[i] = static_cast<T>(math::RequantizeElement(
        acc, p.a_scale[p.va.At(i)], p.b_scale[p.vb.At(i)], p.y_scale[p.vy.At(i)],
        static_cast<double>(y_zero_point[p.vz.At(i)]), lo, hi));
  }
}

}  // namespace

cudaError_t LaunchCenter(QuantType t, const void* x, const void* zero_point, const StridedView& vz,
                         double* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByQuantType(t, [&](auto type) {
    using T = decltype(type);
    CenterKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(zero_point), vz, out, n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchWrapInt32(const double* c, int32_t* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  WrapInt32Kernel<<<Blocks(n), kThreads, 0, stream>>>(c, y, n);
  return cudaGetLastError();
}

cudaError_t LaunchRequantize(QuantType t, const double* c, const QLinearParams& p,
                             const void* y_zero_point, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByQuantType(t, [&](auto type) {
    using T = decltype(type);
    RequantizeKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
        c, p, static_cast<const T*>(y_zero_point),
        static_cast<double>(std::numeric_limits<T>::min()),
        static_cast<double>(std::numeric_limits<T>::max()), static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchQuantize(QuantType t, const float* x, const float* scale, const void* zero_point,
                           const math::QuantIndex& q, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByQuantType(t, [&](auto type) {
    using T = decltype(type);
    QuantizeKernel<T><<<Blocks(n), kThreads, 0, stream>>>(
        x, scale, static_cast<const T*>(zero_point), q,
        static_cast<double>(std::numeric_limits<T>::min()),
        static_cast<double>(std::numeric_limits<T>::max()), static_cast<T*>(y), n);
    return cudaGetLastError();
  });
}

cudaError_t LaunchDequantize(FloatKind k, QuantType t, const void* x, const void* scale,
                             const void* zero_point, const math::QuantIndex& q, void* y, int64_t n,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return ByQuantType(t, [&](auto type) {
      constexpr FloatKind K = decltype(kind)::value;
      using T = decltype(type);
      using S = typename FloatIO<K>::Storage;
      DequantizeKernel<K, T><<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const T*>(x), static_cast<const S*>(scale), static_cast<const T*>(zero_point),
          q, static_cast<S*>(y), n);
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchDynamicQuantize(const float* x, const float* extremes, uint8_t* y, float* scale,
                                  uint8_t* zero_point, int64_t n, cudaStream_t stream) {
  // One block at least, so that thread 0 writes the parameters of an empty x.
  DynamicQuantizeKernel<<<Blocks(n), kThreads, 0, stream>>>(x, extremes, y, scale, zero_point, n);
  return cudaGetLastError();
}

}  // namespace tpc::runtime::cuda
