// Launches of the element-wise CUDA kernels with bool outputs (comparisons of floats,
// IsNaN/IsInf, logic on bools) and the bitwise ops on integers (as unsigned words of the
// element's size): one thread per output element in a grid-stride loop,
// each writing only out[i]; inputs read through views built from their own shapes. The
// math is math/logic.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/logic.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void CompareKernel(math::CompareOp op, const typename FloatIO<K>::Storage* a,
                              StridedView va, const typename FloatIO<K>::Storage* b, StridedView vb,
                              bool* out, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::CompareElement<K>(op, a, va, b, vb, out, i);
}

template <FloatKind K>
__global__ void PredicateKernel(math::Predicate p, const typename FloatIO<K>::Storage* x, bool* y,
                                int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::PredicateElement<K>(p, x, y, i);
}

__global__ void LogicKernel(math::LogicOp op, const bool* a, StridedView va, const bool* b,
                            StridedView vb, bool* out, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::LogicElement(op, a, va, b, vb, out, i);
}

template <typename W>
__global__ void BitKernel(math::BitOp op, const W* a, StridedView va, const W* b, StridedView vb,
                          W* out, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::BitElement<W>(op, a, va, b, vb, out, i);
}

template <typename W>
cudaError_t Bits(math::BitOp op, const void* a, const StridedView& va, const void* b,
                 const StridedView& vb, void* out, int64_t n, cudaStream_t stream) {
  BitKernel<W><<<Blocks(n), kThreads, 0, stream>>>(
      op, static_cast<const W*>(a), va, static_cast<const W*>(b), vb, static_cast<W*>(out), n);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t Compare(math::CompareOp op, const void* a, const StridedView& va, const void* b,
                    const StridedView& vb, bool* out, int64_t n, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  CompareKernel<K><<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const S*>(a), va,
                                                       static_cast<const S*>(b), vb, out, n);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t Predicate(const math::Predicate& p, const void* x, bool* y, int64_t n,
                      cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  PredicateKernel<K><<<Blocks(n), kThreads, 0, stream>>>(p, static_cast<const S*>(x), y, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchCompare(FloatKind k, math::CompareOp op, const void* a, const StridedView& va,
                          const void* b, const StridedView& vb, bool* out, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return Compare<decltype(kind)::value>(op, a, va, b, vb, out, n, stream);
  });
}

cudaError_t LaunchPredicate(FloatKind k, const math::Predicate& p, const void* x, bool* y,
                            int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) { return Predicate<decltype(kind)::value>(p, x, y, n, stream); });
}

cudaError_t LaunchLogic(math::LogicOp op, const bool* a, const StridedView& va, const bool* b,
                        const StridedView& vb, bool* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  LogicKernel<<<Blocks(n), kThreads, 0, stream>>>(op, a, va, b, vb, out, n);
  return cudaGetLastError();
}

cudaError_t LaunchBits(int bytes, math::BitOp op, const void* a, const StridedView& va,
                       const void* b, const StridedView& vb, void* out, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByWord(bytes,
                [&](auto word) { return Bits<decltype(word)>(op, a, va, b, vb, out, n, stream); });
}

}  // namespace tpc::runtime::cuda
