// Launches of the copies that fill (Pad, Trilu): one thread per output element in a
// grid-stride loop, elements moved by size (zero bits are a float's zero); each thread
// reads the one input element its coordinates name (math/pad.h) and writes only y[i].
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/pad.h"

namespace tpc::runtime::cuda {
namespace {

template <typename Word>
__global__ void PadKernel(math::PadLayout l, const Word* x, Word fill, Word* y, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::PadElement(l, x, fill, y, i);
}

template <typename Word>
__global__ void TriluKernel(const Word* x, Word* y, int64_t rows, int64_t cols, bool upper,
                            int64_t k, int64_t n) {
  for (int64_t i = First(); i < n; i += Step()) math::TriluElement(x, y, rows, cols, upper, k, i);
}

template <typename Word>
cudaError_t Pad(const math::PadLayout& l, const void* x, uint64_t fill, void* y, int64_t n,
                cudaStream_t stream) {
  PadKernel<Word><<<Blocks(n), kThreads, 0, stream>>>(
      l, static_cast<const Word*>(x), static_cast<Word>(fill), static_cast<Word*>(y), n);
  return cudaGetLastError();
}

template <typename Word>
cudaError_t Trilu(const void* x, void* y, int64_t rows, int64_t cols, bool upper, int64_t k,
                  int64_t n, cudaStream_t stream) {
  TriluKernel<Word><<<Blocks(n), kThreads, 0, stream>>>(
      static_cast<const Word*>(x), static_cast<Word*>(y), rows, cols, upper, k, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPad(int elem_bytes, const math::PadLayout& l, const void* x, uint64_t fill,
                      void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Pad<uint8_t>(l, x, fill, y, n, stream);
    case 2:
      return Pad<uint16_t>(l, x, fill, y, n, stream);
    case 4:
      return Pad<uint32_t>(l, x, fill, y, n, stream);
    case 8:
      return Pad<uint64_t>(l, x, fill, y, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchTrilu(int elem_bytes, const void* x, void* y, int64_t rows, int64_t cols,
                        bool upper, int64_t k, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  switch (elem_bytes) {
    case 1:
      return Trilu<uint8_t>(x, y, rows, cols, upper, k, n, stream);
    case 2:
      return Trilu<uint16_t>(x, y, rows, cols, upper, k, n, stream);
    case 4:
      return Trilu<uint32_t>(x, y, rows, cols, upper, k, n, stream);
    case 8:
      return Trilu<uint64_t>(x, y, rows, cols, upper, k, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpc::runtime::cuda
