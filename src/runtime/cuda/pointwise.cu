// Launches of the element-wise CUDA kernels: one thread per output element in a
// grid-stride loop (64-bit indices); the per-element math is math/pointwise.h.
#include <cuda_runtime.h>

#include <initializer_list>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void BinaryKernel(BinaryOp op, const typename FloatIO<K>::Storage* a, StridedView va,
                             const typename FloatIO<K>::Storage* b, StridedView vb,
                             typename FloatIO<K>::Storage* out, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::BinaryElement<K>(op, a, va, b, vb, out, i);
}

template <FloatKind K, int V>
__global__ void BinaryRowsKernel(BinaryOp op, const typename FloatIO<K>::Storage* a,
                                 const typename FloatIO<K>::Storage* b,
                                 typename FloatIO<K>::Storage* out, math::BinaryRows p, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::BinaryRowsElement<K, V>(op, a, b, out, p, i);
}

template <FloatKind K>
__global__ void UnaryKernel(UnaryOp op, UnaryParams alpha, const typename FloatIO<K>::Storage* x,
                            typename FloatIO<K>::Storage* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::UnaryElement<K>(op, alpha, x, y, i);
}

template <FloatKind K, int V>
__global__ void UnaryChunkKernel(UnaryOp op, UnaryParams alpha,
                                 const typename FloatIO<K>::Storage* x,
                                 typename FloatIO<K>::Storage* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::UnaryChunkElement<K, V>(op, alpha, x, y, i);
}

template <FloatKind K, int V>
__global__ void BiasActivationChunkKernel(UnaryOp op, const typename FloatIO<K>::Storage* bias,
                                          int64_t cols, typename FloatIO<K>::Storage* y,
                                          int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    math::BiasActivationChunkElement<K, V>(op, bias, cols, y, i);
  }
}

// Whether `count` elements of `bytes` each at these addresses are whole aligned chunks of
// 16 bytes (null pointers do not count).
bool Chunks16(int64_t count, int bytes, std::initializer_list<const void*> ptrs) {
  if ((count * bytes) % 16 != 0) return false;
  for (const void* p : ptrs) {
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

template <FloatKind K>
__global__ void BiasActivationKernel(UnaryOp op, const typename FloatIO<K>::Storage* bias,
                                     int64_t cols, typename FloatIO<K>::Storage* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step())
    math::BiasActivationElement<K>(op, bias, cols, y, i);
}

template <FloatKind K>
__global__ void RotaryHalfKernel(const typename FloatIO<K>::Storage* x,
                                 const typename FloatIO<K>::Storage* cos, StridedView vc,
                                 const typename FloatIO<K>::Storage* sin, StridedView vs, int64_t d,
                                 typename FloatIO<K>::Storage* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    math::RotaryHalfElement<K>(x, cos, vc, sin, vs, d, y, i);
  }
}

template <FloatKind From, FloatKind To>
__global__ void CastKernel(const typename FloatIO<From>::Storage* x,
                           typename FloatIO<To>::Storage* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::CastElement<From, To>(x, y, i);
}

template <typename Word>
__global__ void CopyKernel(const Word* src, StridedView vs, Word* dst, StridedView vd, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::CopyElement(src, vs, dst, vd, i);
}

template <typename C>
__global__ void CopyChunkKernel(const C* src, StridedView rows_src, C* dst, StridedView rows_dst,
                                int64_t chunks, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) {
    math::CopyChunkElement(src, rows_src, dst, rows_dst, chunks, i);
  }
}

template <typename Word>
__global__ void WhereKernel(const bool* cond, StridedView vc, const Word* x, StridedView vx,
                            const Word* y, StridedView vy, Word* out, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::WhereElement(cond, vc, x, vx, y, vy, out, i);
}

template <typename Word, typename Index>
__global__ void GatherKernel(const Word* data, const Index* indices, int64_t n_indices,
                             int64_t axis_len, int64_t inner, Word* out, int64_t n, int* flag,
                             int code) {
  for (int64_t i = First(); i < n; i += Step()) {
    if (!math::GatherElement(data, indices, n_indices, axis_len, inner, out, i)) {
      atomicCAS(flag, 0, code);  // the first bad launch of a run names its node
    }
  }
}

template <FloatKind K>
__global__ void ReduceRanksKernel(int op, bool average, math::RankPointers p, int64_t begin,
                                  int64_t end) {
  for (int64_t i = begin + First(); i < end; i += Step()) {
    math::ReduceRanksElement<K>(op, average, p, i);
  }
}

template <FloatKind K>
cudaError_t ReduceRanks(int op, bool average, const math::RankPointers& p, int64_t begin,
                        int64_t end, cudaStream_t stream) {
  ReduceRanksKernel<K><<<Blocks(end - begin), kThreads, 0, stream>>>(op, average, p, begin, end);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t Binary(BinaryOp op, const void* a, const StridedView& va, const void* b,
                   const StridedView& vb, void* out, int64_t n, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  // Rows contiguous in the output (same-shape operands, a bias row, a per-row scale): 16
  // bytes a thread.
  constexpr int kV = 16 / static_cast<int>(sizeof(S));
  if (auto p = math::PlanBinaryRows(kV, sizeof(S), a, va, b, vb, out); p && p->rows * p->len == n) {
    const int64_t chunks = n / kV;
    BinaryRowsKernel<K, kV><<<Blocks(chunks), kThreads, 0, stream>>>(
        op, static_cast<const S*>(a), static_cast<const S*>(b), static_cast<S*>(out), *p, chunks);
    return cudaGetLastError();
  }
  BinaryKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
      op, static_cast<const S*>(a), va, static_cast<const S*>(b), vb, static_cast<S*>(out), n);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t Unary(UnaryOp op, UnaryParams alpha, const void* x, void* y, int64_t n,
                  cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  constexpr int kV = 16 / static_cast<int>(sizeof(S));
  if (Chunks16(n, sizeof(S), {x, y})) {
    UnaryChunkKernel<K, kV><<<Blocks(n / kV), kThreads, 0, stream>>>(
        op, alpha, static_cast<const S*>(x), static_cast<S*>(y), n / kV);
    return cudaGetLastError();
  }
  UnaryKernel<K><<<Blocks(n), kThreads, 0, stream>>>(op, alpha, static_cast<const S*>(x),
                                                     static_cast<S*>(y), n);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t BiasActivation(UnaryOp op, const void* bias, int64_t cols, void* y, int64_t n,
                           cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  constexpr int kV = 16 / static_cast<int>(sizeof(S));
  if (cols % kV == 0 && Chunks16(n, sizeof(S), {y, bias})) {
    BiasActivationChunkKernel<K, kV><<<Blocks(n / kV), kThreads, 0, stream>>>(
        op, static_cast<const S*>(bias), cols, static_cast<S*>(y), n / kV);
    return cudaGetLastError();
  }
  BiasActivationKernel<K><<<Blocks(n), kThreads, 0, stream>>>(op, static_cast<const S*>(bias), cols,
                                                              static_cast<S*>(y), n);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t RotaryHalf(const void* x, const void* cos, const StridedView& vc, const void* sin,
                       const StridedView& vs, int64_t d, void* y, int64_t n, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  RotaryHalfKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
      static_cast<const S*>(x), static_cast<const S*>(cos), vc, static_cast<const S*>(sin), vs, d,
      static_cast<S*>(y), n);
  return cudaGetLastError();
}

template <FloatKind From, FloatKind To>
cudaError_t Cast(const void* x, void* y, int64_t n, cudaStream_t stream) {
  CastKernel<From, To>
      <<<Blocks(n), kThreads, 0, stream>>>(static_cast<const typename FloatIO<From>::Storage*>(x),
                                           static_cast<typename FloatIO<To>::Storage*>(y), n);
  return cudaGetLastError();
}

template <FloatKind From>
cudaError_t CastFrom(FloatKind to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  return ByKind(to, [&](auto kind) { return Cast<From, decltype(kind)::value>(x, y, n, stream); });
}

template <typename Word>
cudaError_t Copy(const void* src, const StridedView& vs, void* dst, const StridedView& vd,
                 int64_t n, cudaStream_t stream) {
  CopyKernel<Word><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const Word*>(src), vs,
                                                       static_cast<Word*>(dst), vd, n);
  return cudaGetLastError();
}

template <int Bytes>
cudaError_t CopyChunks(const void* src, void* dst, const math::ChunkedCopy& c,
                       cudaStream_t stream) {
  using C = math::Chunk<Bytes>;
  const int64_t n = c.rows * c.chunks;
  CopyChunkKernel<C><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const C*>(src), c.src,
                                                         static_cast<C*>(dst), c.dst, c.chunks, n);
  return cudaGetLastError();
}

template <typename Word>
cudaError_t Where(const bool* cond, const StridedView& vc, const void* x, const StridedView& vx,
                  const void* y, const StridedView& vy, void* out, int64_t n, cudaStream_t stream) {
  WhereKernel<Word><<<Blocks(n), kThreads, 0, stream>>>(cond, vc, static_cast<const Word*>(x), vx,
                                                        static_cast<const Word*>(y), vy,
                                                        static_cast<Word*>(out), n);
  return cudaGetLastError();
}

template <typename Word>
cudaError_t Gather(const void* data, const void* indices, bool i64, int64_t outer, int64_t axis_len,
                   int64_t inner, int64_t n_indices, void* out, int* flag, int code,
                   cudaStream_t stream) {
  const int64_t n = outer * n_indices * inner;
  if (i64) {
    GatherKernel<Word, int64_t><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const Word*>(data), static_cast<const int64_t*>(indices), n_indices, axis_len,
        inner, static_cast<Word*>(out), n, flag, code);
  } else {
    GatherKernel<Word, int32_t><<<Blocks(n), kThreads, 0, stream>>>(
        static_cast<const Word*>(data), static_cast<const int32_t*>(indices), n_indices, axis_len,
        inner, static_cast<Word*>(out), n, flag, code);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchBinary(FloatKind k, BinaryOp op, const void* a, const StridedView& va,
                         const void* b, const StridedView& vb, void* out, int64_t n,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return Binary<decltype(kind)::value>(op, a, va, b, vb, out, n, stream);
  });
}

cudaError_t LaunchReduceRanks(FloatKind k, int op, bool average, const math::RankPointers& p,
                              int64_t begin, int64_t end, cudaStream_t stream) {
  if (end <= begin) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    return ReduceRanks<decltype(kind)::value>(op, average, p, begin, end, stream);
  });
}

cudaError_t LaunchUnary(FloatKind k, UnaryOp op, UnaryParams alpha, const void* x, void* y,
                        int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(
      k, [&](auto kind) { return Unary<decltype(kind)::value>(op, alpha, x, y, n, stream); });
}

cudaError_t LaunchBiasActivation(FloatKind k, UnaryOp op, const void* bias, int64_t n, void* y,
                                 int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (n <= 0) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    return BiasActivation<decltype(kind)::value>(op, bias, n, y, count, stream);
  });
}

cudaError_t LaunchRotaryHalf(FloatKind k, const void* x, const void* cos, const StridedView& vc,
                             const void* sin, const StridedView& vs, int64_t d, void* y,
                             int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (d <= 0 || d % 2 != 0) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    return RotaryHalf<decltype(kind)::value>(x, cos, vc, sin, vs, d, y, count, stream);
  });
}

cudaError_t LaunchCast(FloatKind from, FloatKind to, const void* x, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(from,
                [&](auto kind) { return CastFrom<decltype(kind)::value>(to, x, y, n, stream); });
}

cudaError_t LaunchCopy(int elem_bytes, const void* src, const StridedView& vs, void* dst,
                       const StridedView& vd, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  // Rows contiguous in both views (Transpose keeping the last dim, Expand, Slice, Concat):
  // the widest chunks they allow.
  StridedView s = vs, d = vd;
  math::Simplify({&s, &d});
  auto whole = [&](const std::optional<math::ChunkedCopy>& c, int bytes) {
    return c && c->rows * c->chunks * (bytes / elem_bytes) == n;
  };
  if (auto c = math::ChunkRows(elem_bytes, 16, src, s, dst, d); whole(c, 16)) {
    return CopyChunks<16>(src, dst, *c, stream);
  }
  if (auto c = math::ChunkRows(elem_bytes, 8, src, s, dst, d); whole(c, 8)) {
    return CopyChunks<8>(src, dst, *c, stream);
  }
  if (auto c = math::ChunkRows(elem_bytes, 4, src, s, dst, d); whole(c, 4)) {
    return CopyChunks<4>(src, dst, *c, stream);
  }
  switch (elem_bytes) {
    case 1:
      return Copy<uint8_t>(src, vs, dst, vd, n, stream);
    case 2:
      return Copy<uint16_t>(src, vs, dst, vd, n, stream);
    case 4:
      return Copy<uint32_t>(src, vs, dst, vd, n, stream);
    case 8:
      return Copy<uint64_t>(src, vs, dst, vd, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchWhere(int elem_bytes, const bool* cond, const StridedView& vc, const void* x,
                        const StridedView& vx, const void* y, const StridedView& vy, void* out,
                        int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Where<uint8_t>(cond, vc, x, vx, y, vy, out, n, stream);
    case 2:
      return Where<uint16_t>(cond, vc, x, vx, y, vy, out, n, stream);
    case 4:
      return Where<uint32_t>(cond, vc, x, vx, y, vy, out, n, stream);
    case 8:
      return Where<uint64_t>(cond, vc, x, vx, y, vy, out, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchGather(int elem_bytes, const void* data, const void* indices, bool indices_i64,
                         int64_t outer, int64_t axis_len, int64_t inner, int64_t n_indices,
                         void* out, int* flag, int code, cudaStream_t stream) {
  if (outer * n_indices * inner == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Gather<uint8_t>(data, indices, indices_i64, outer, axis_len, inner, n_indices, out,
                             flag, code, stream);
    case 2:
      return Gather<uint16_t>(data, indices, indices_i64, outer, axis_len, inner, n_indices, out,
                              flag, code, stream);
    case 4:
      return Gather<uint32_t>(data, indices, indices_i64, outer, axis_len, inner, n_indices, out,
                              flag, code, stream);
    case 8:
      return Gather<uint64_t>(data, indices, indices_i64, outer, axis_len, inner, n_indices, out,
                              flag, code, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
