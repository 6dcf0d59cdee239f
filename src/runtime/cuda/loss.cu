// Launch of the negative log-likelihood over log-probabilities (the device losses):
// without reduction one thread per target; reduced, one block of kThreads threads, thread
// j summing targets j, j + kThreads, ... in double, then a tree fold of the block's sums in
// shared memory (kThreads a power of two; every thread reaches each __syncthreads).
// The math is math/loss.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/loss.h"

namespace tpc::runtime::cuda {
namespace {

template <FloatKind K, typename Index>
__global__ void NllEachKernel(const typename math::FloatIO<K>::Storage* logp, const Index* labels,
                              const typename math::FloatIO<K>::Storage* weight, math::NllLayout l,
                              typename math::FloatIO<K>::Storage* out, int* flag, int code) {
  const int64_t n = l.targets();
  for (int64_t t = First(); t < n; t += Step()) {
    const math::NllTerm term = math::NllOf<K>(logp, labels, weight, l, t);
    if (!term.ok) atomicCAS(flag, 0, code);
    out[t] = math::FloatIO<K>::Store(static_cast<float>(term.loss));
  }
}

template <FloatKind K, typename Index>
__global__ void NllReducedKernel(const typename math::FloatIO<K>::Storage* logp,
                                 const Index* labels,
                                 const typename math::FloatIO<K>::Storage* weight,
                                 math::NllLayout l, bool mean,
                                 typename math::FloatIO<K>::Storage* out, int* flag, int code) {
  __shared__ double loss[kThreads];
  __shared__ double wsum[kThreads];
  double a = 0, w = 0;
  bool ok = true;
  for (int64_t t = threadIdx.x; t < l.targets(); t += kThreads) {
    const math::NllTerm term = math::NllOf<K>(logp, labels, weight, l, t);
    ok = ok && term.ok;
    a += term.loss;
    w += term.weight;
  }
  if (!ok) atomicCAS(flag, 0, code);
  loss[threadIdx.x] = a;
  wsum[threadIdx.x] = w;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      wsum[threadIdx.x] += wsum[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[0] = math::FloatIO<K>::Store(static_cast<float>(math::ReduceNll(loss[0], wsum[0], mean)));
  }
}

template <FloatKind K, typename Index>
cudaError_t Nll(const void* logp, const void* labels, const void* weight, const math::NllLayout& l,
                int reduction, void* out, int* flag, int code, cudaStream_t stream) {
  using S = typename math::FloatIO<K>::Storage;
  if (reduction == 0) {
    const int64_t n = l.targets();
    if (n == 0) return cudaSuccess;
    NllEachKernel<K, Index><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const S*>(logp), static_cast<const Index*>(labels),
        static_cast<const S*>(weight), l, static_cast<S*>(out), flag, code);
  } else {
    NllReducedKernel<K, Index><<<1, kThreads, 0, stream>>>(
        static_cast<const S*>(logp), static_cast<const Index*>(labels),
        static_cast<const S*>(weight), l, reduction == 2, static_cast<S*>(out), flag, code);
  }
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t NllOfKind(const void* logp, const void* labels, bool labels_i64, const void* weight,
                      const math::NllLayout& l, int reduction, void* out, int* flag, int code,
                      cudaStream_t stream) {
  return labels_i64 ? Nll<K, int64_t>(logp, labels, weight, l, reduction, out, flag, code, stream)
                    : Nll<K, int32_t>(logp, labels, weight, l, reduction, out, flag, code, stream);
}

}  // namespace

cudaError_t LaunchNllLoss(FloatKind k, const void* logp, const void* labels, bool labels_i64,
                          const void* weight, const math::NllLayout& l, int reduction, void* out,
                          int* flag, int code, cudaStream_t stream) {
  return ByKind(k, [&](auto kind) {
    return NllOfKind<decltype(kind)::value>(logp, labels, labels_i64, weight, l, reduction, out,
                                            flag, code, stream);
  });
}

}  // namespace tpc::runtime::cuda
