// Launches of LinearAttention and LinearAttentionGate (math/linear_attention.h).
// LinearAttention: one thread per state column (batch entry b, value head h, column j) in
// a grid-stride loop over batch · Hv · dv; a thread keeps its column's dk entries in its
// own array (dk ≤ kLinearAttentionMaxKeyDim, checked by the caller), reads its past column,
// the tokens' q, k rows of its head (shared reads only) and v[j], decay and rate, and writes
// only its column's output elements (out head h, or each query head it serves: no other
// column writes them) and its present column. Threads of adjacent j touch adjacent state
// and output elements. LinearAttentionGate: one thread per element, each writing its own
// decay and beta elements.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/linear_attention.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K>
__global__ void LinearAttentionKernel(
    math::LinearAttentionLayout l, const typename FloatIO<K>::Storage* q,
    const typename FloatIO<K>::Storage* key, const typename FloatIO<K>::Storage* v,
    const typename FloatIO<K>::Storage* past, const typename FloatIO<K>::Storage* decay,
    const typename FloatIO<K>::Storage* rate, typename FloatIO<K>::Storage* out,
    typename FloatIO<K>::Storage* present) {
  using IO = FloatIO<K>;
  auto load = [](const typename IO::Storage* p) {
    return [p](int64_t i) { return IO::Load(p[i]); };
  };
  auto store = [](typename IO::Storage* p) {
    return [p](int64_t i, float f) { p[i] = IO::Store(f); };
  };
  const int64_t n = l.batch * l.v_heads * l.dv;
  for (int64_t c = First(); c < n; c += Step()) {
    const int64_t j = c % l.dv, bh = c / l.dv;
    math::LinearAttentionColumn(l, load(q), load(key), load(v), load(past), load(decay), load(rate),
                                store(out), store(present), bh / l.v_heads, bh % l.v_heads, j);
  }
}

template <FloatKind K, FloatKind V>
__global__ void LinearGateKernel(const typename FloatIO<K>::Storage* a,
                                 const typename FloatIO<V>::Storage* dt_bias,
                                 const typename FloatIO<V>::Storage* decay_scale,
                                 const typename FloatIO<K>::Storage* b,
                                 typename FloatIO<K>::Storage* decay,
                                 typename FloatIO<K>::Storage* beta, int64_t n, int64_t h) {
  using IO = FloatIO<K>;
  using VO = FloatIO<V>;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t head = i % h;
    decay[i] = IO::Store(math::LinearGateDecay(IO::Load(a[i]), VO::Load(dt_bias[head]),
                                               VO::Load(decay_scale[head])));
    if (beta != nullptr) beta[i] = IO::Store(math::LinearGateRate(IO::Load(b[i])));
  }
}

}  // namespace

cudaError_t LaunchLinearAttention(FloatKind k, const math::LinearAttentionLayout& l, const void* q,
                                  const void* key, const void* v, const void* past,
                                  const void* decay, const void* rate, void* out, void* present,
                                  cudaStream_t stream) {
  const int64_t n = l.batch * l.v_heads * l.dv;
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    LinearAttentionKernel<K><<<Blocks(n), kThreads, 0, stream>>>(
        l, static_cast<const S*>(q), static_cast<const S*>(key), static_cast<const S*>(v),
        static_cast<const S*>(past), static_cast<const S*>(decay), static_cast<const S*>(rate),
        static_cast<S*>(out), static_cast<S*>(present));
    return cudaGetLastError();
  });
}

cudaError_t LaunchLinearAttentionGate(FloatKind k, bool vectors_f32, const void* a,
                                      const void* dt_bias, const void* decay_scale, const void* b,
                                      void* decay, void* beta, int64_t n, int64_t h,
                                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    auto launch = [&](auto vkind) {
      constexpr FloatKind V = decltype(vkind)::value;
      using VS = typename FloatIO<V>::Storage;
      LinearGateKernel<K, V><<<Blocks(n), kThreads, 0, stream>>>(
          static_cast<const S*>(a), static_cast<const VS*>(dt_bias),
          static_cast<const VS*>(decay_scale), static_cast<const S*>(b), static_cast<S*>(decay),
          static_cast<S*>(beta), n, h);
      return cudaGetLastError();
    };
    if (vectors_f32) return launch(std::integral_constant<FloatKind, FloatKind::kF32>{});
    return launch(kind);
  });
}

}  // namespace tpc::runtime::cuda
