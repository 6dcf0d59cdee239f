// Launch of CausalConvWithState's kernel (math/causal_conv.h): one thread per element of
// the output, then of the present state, in a grid-stride loop; each thread writes only
// its element and reads its row's weights, bias, and at most k positions of its row of the
// past state and the input (math::CausalConvPadded: below the state's length from the
// past, else from the input at u - state < length, u < state + length).
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/causal_conv.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void CausalConvKernel(math::CausalConvLayout l, const typename FloatIO<K>::Storage* x,
                                 const typename FloatIO<K>::Storage* w,
                                 const typename FloatIO<K>::Storage* bias,
                                 const typename FloatIO<K>::Storage* past,
                                 typename FloatIO<K>::Storage* y,
                                 typename FloatIO<K>::Storage* present) {
  using IO = FloatIO<K>;
  auto load = [](const typename IO::Storage* p) {
    return [p](int64_t i) { return IO::Load(p[i]); };
  };
  const int64_t n = l.batch * l.channels * l.length;
  const int64_t ns = present != nullptr ? l.batch * l.channels * l.state() : 0;
  for (int64_t i = First(); i < n + ns; i += Step()) {
    if (i < n) {
      y[i] = IO::Store(math::CausalConvElement(l, load(x), load(past), past != nullptr, load(w),
                                               load(bias), bias != nullptr, i));
    } else {
      present[i - n] =
          IO::Store(math::CausalConvStateElement(l, load(x), load(past), past != nullptr, i - n));
    }
  }
}

}  // namespace

cudaError_t LaunchCausalConv(FloatKind k, const math::CausalConvLayout& l, const void* x,
                             const void* w, const void* bias, const void* past, void* y,
                             void* present, cudaStream_t stream) {
  const int64_t n = l.batch * l.channels * (l.length + (present != nullptr ? l.state() : 0));
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    CausalConvKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
        l, static_cast<const S*>(x), static_cast<const S*>(w), static_cast<const S*>(bias),
        static_cast<const S*>(past), static_cast<S*>(y), static_cast<S*>(present));
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
