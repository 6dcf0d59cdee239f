// The channel norms of images [N, C, ...]: GroupNormalization and InstanceNormalization
// (one block of kThreads threads per row of math::ChannelGroups: the row's moments by
// BlockReduce, then each thread writes the elements it read), BatchNormalization in
// inference and LRN (one thread per element: its channel's running statistics; its
// window of channels at its own spatial position). Math in math/rows.h.
#include <cuda_runtime.h>

#include "block_reduce.cuh"
#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::ChannelGroups;
using math::FloatIO;
using math::Moments;

template <FloatKind K>
__global__ void GroupNormKernel(const typename FloatIO<K>::Storage* x,
                                const typename FloatIO<K>::Storage* scale,
                                const typename FloatIO<K>::Storage* bias,
                                typename FloatIO<K>::Storage* y, ChannelGroups g, float epsilon) {
  using IO = FloatIO<K>;
  const int64_t row = blockIdx.x, len = g.len();
  const typename IO::Storage* xr = x + row * len;
  Moments m{};
  for (int64_t j = threadIdx.x; j < len; j += kThreads) m.Add(IO::Load(xr[j]));
  m = BlockReduce(m, [](const Moments& a, const Moments& b) { return Moments::Combine(a, b); });
  const float inv_std = math::InvStd(m.Variance(), epsilon);
  for (int64_t j = threadIdx.x; j < len; j += kThreads) {
    const int64_t at = g.Affine(row, j);  // < the scale's and bias's length (checked)
    y[row * len + j] = IO::Store(math::NormElement(IO::Load(xr[j]), m.mean, inv_std,
                                                   IO::Load(scale[at]), IO::Load(bias[at])));
  }
}

template <FloatKind K>
__global__ void BatchNormKernel(const typename FloatIO<K>::Storage* x,
                                const typename FloatIO<K>::Storage* scale,
                                const typename FloatIO<K>::Storage* bias,
                                const typename FloatIO<K>::Storage* mean,
                                const typename FloatIO<K>::Storage* var,
                                typename FloatIO<K>::Storage* y, int64_t channels, int64_t plane,
                                float epsilon, int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t c = (i / plane) % channels;
    y[i] = IO::Store(math::BatchNormElement(IO::Load(x[i]), IO::Load(scale[c]), IO::Load(bias[c]),
                                            IO::Load(mean[c]), IO::Load(var[c]), epsilon));
  }
}

template <FloatKind K>
__global__ void LrnKernel(const typename FloatIO<K>::Storage* x, typename FloatIO<K>::Storage* y,
                          int64_t channels, int64_t plane, int64_t size, float alpha, float beta,
                          float bias, int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    y[i] = IO::Store(math::LrnElement(channels, plane, size, alpha, beta, bias, i,
                                      [&](int64_t j) { return IO::Load(x[j]); }));
  }
}

template <FloatKind K>
cudaError_t Lrn(const void* x, void* y, int64_t channels, int64_t plane, int64_t size, float alpha,
                float beta, float bias, int64_t n, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  LrnKernel<K><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(y),
                                                   channels, plane, size, alpha, beta, bias, n);
  return cudaGetLastError();
}

template <FloatKind K>
__global__ void MvnKernel(const typename FloatIO<K>::Storage* x, const float* mean,
                          const float* sum_squares, StridedView stats, float count,
                          typename FloatIO<K>::Storage* y, int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t s = stats.At(i);
    y[i] = IO::Store(math::MvnElement(IO::Load(x[i]), mean[s], sum_squares[s], count));
  }
}

template <FloatKind K>
cudaError_t Mvn(const void* x, const float* mean, const float* sum_squares,
                const StridedView& stats, float count, void* y, int64_t n, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  MvnKernel<K><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const S*>(x), mean, sum_squares,
                                                   stats, count, static_cast<S*>(y), n);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t GroupNorm(const void* x, const void* scale, const void* bias, void* y, int64_t rows,
                      const ChannelGroups& g, float epsilon, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  GroupNormKernel<K><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      static_cast<const S*>(x), static_cast<const S*>(scale), static_cast<const S*>(bias),
      static_cast<S*>(y), g, epsilon);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t BatchNorm(const void* x, const void* scale, const void* bias, const void* mean,
                      const void* var, void* y, int64_t channels, int64_t plane, float epsilon,
                      int64_t n, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  BatchNormKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
      static_cast<const S*>(x), static_cast<const S*>(scale), static_cast<const S*>(bias),
      static_cast<const S*>(mean), static_cast<const S*>(var), static_cast<S*>(y), channels, plane,
      epsilon, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGroupNorm(FloatKind k, const void* x, const void* scale, const void* bias,
                            void* y, int64_t rows, const ChannelGroups& g, float epsilon,
                            cudaStream_t stream) {
  if (rows == 0 || g.len() == 0) return cudaSuccess;
  if (rows > 2147483647 || g.groups < 1 || g.plane < 1) return cudaErrorInvalidConfiguration;
  return ByKind(k, [&](auto kind) {
    return GroupNorm<decltype(kind)::value>(x, scale, bias, y, rows, g, epsilon, stream);
  });
}

cudaError_t LaunchLrn(FloatKind k, const void* x, void* y, int64_t channels, int64_t plane,
                      int64_t size, float alpha, float beta, float bias, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (channels < 1 || plane < 1 || size < 1) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    return Lrn<decltype(kind)::value>(x, y, channels, plane, size, alpha, beta, bias, n, stream);
  });
}

cudaError_t LaunchMvn(FloatKind k, const void* x, const float* mean, const float* sum_squares,
                      const StridedView& stats, float count, void* y, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (count < 1.0f) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    return Mvn<decltype(kind)::value>(x, mean, sum_squares, stats, count, y, n, stream);
  });
}

cudaError_t LaunchBatchNorm(FloatKind k, const void* x, const void* scale, const void* bias,
                            const void* mean, const void* var, void* y, int64_t channels,
                            int64_t plane, float epsilon, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (channels < 1 || plane < 1) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    return BatchNorm<decltype(kind)::value>(x, scale, bias, mean, var, y, channels, plane, epsilon,
                                            n, stream);
  });
}

}  // namespace tpc::runtime::cuda
