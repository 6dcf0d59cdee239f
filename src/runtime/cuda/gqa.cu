// Launches of GroupQueryAttention's layout kernels: Q [B, Hq, S, hd] and the presents
// [B, Hkv, total, hd] (the past, the new keys and values, zeros), rotated, one thread per
// element of the output in a grid-stride loop; before them, with the fused per-head Q/K
// norms, a copy of the query (and key) input with those heads normalized, one thread per
// head (its hd elements read twice and written once, by that thread only; the head index
// is below the input's heads, so the reads and writes stay inside both buffers). Each thread writes
// only its element(s) (pk[i] and pv[i] for the presents); the reads stay inside the inputs because
// the host checked the shapes and each element checks its row's keys and its position (a bad one
// sets the backend's check flag to `code`). The math is math/gqa.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/gqa.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

template <FloatKind K, typename L, typename P>
__global__ void GqaQueryKernel(math::GqaLayout l, const typename FloatIO<K>::Storage* query,
                               const typename FloatIO<K>::Storage* key,
                               const typename FloatIO<K>::Storage* value, const L* lens,
                               const P* positions, const typename FloatIO<K>::Storage* cos,
                               const typename FloatIO<K>::Storage* sin,
                               typename FloatIO<K>::Storage* q, int64_t n, int* flag, int code) {
  for (int64_t i = First(); i < n; i += Step()) {
    if (!math::GqaQueryElement<K>(l, query, key, value, lens, positions, cos, sin, q, i)) {
      atomicCAS(flag, 0, code);
    }
  }
}

template <FloatKind K, typename L, typename P>
__global__ void GqaPresentKernel(math::GqaLayout l, const typename FloatIO<K>::Storage* query,
                                 const typename FloatIO<K>::Storage* key,
                                 const typename FloatIO<K>::Storage* value,
                                 const typename FloatIO<K>::Storage* past_k,
                                 const typename FloatIO<K>::Storage* past_v, const L* lens,
                                 const P* positions, const typename FloatIO<K>::Storage* cos,
                                 const typename FloatIO<K>::Storage* sin,
                                 typename FloatIO<K>::Storage* pk, typename FloatIO<K>::Storage* pv,
                                 int64_t n, int* flag, int code) {
  for (int64_t i = First(); i < n; i += Step()) {
    if (!math::GqaPresentElement<K>(l, query, key, value, past_k, past_v, lens, positions, cos, sin,
                                    pk, pv, i)) {
      atomicCAS(flag, 0, code);
    }
  }
}

// One thread per element of the windowed presents; each writes only pk[i] and pv[i] and
// reads one row of the rows attention ran over, inside them (math::GqaWindowSource is in
// [0, total) for a row whose keys fit, which the element checks).
template <typename S, typename L>
__global__ void GqaWindowPresentKernel(math::GqaLayout l, const L* lens, const S* sk, const S* sv,
                                       S* pk, S* pv, int64_t n, int* flag, int code) {
  for (int64_t i = First(); i < n; i += Step()) {
    if (!math::GqaWindowPresentElement(l, lens, sk, sv, pk, pv, i)) atomicCAS(flag, 0, code);
  }
}

template <FloatKind K>
__global__ void GqaNormHeadsKernel(math::GqaLayout l, const typename FloatIO<K>::Storage* in,
                                   bool key_input, const typename FloatIO<K>::Storage* q_weight,
                                   const typename FloatIO<K>::Storage* k_weight,
                                   typename FloatIO<K>::Storage* out, int64_t heads) {
  for (int64_t j = First(); j < heads; j += Step()) {
    math::GqaNormHead<FloatIO<K>>(l, in, key_input, q_weight, k_weight, out, j);
  }
}

template <FloatKind K, typename L, typename P>
cudaError_t GqaLayoutTyped(const math::GqaLayout& l, const GqaOperands& o, const void* lens,
                           const void* positions, int* flag, int code, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t nq = l.batch * l.hq * l.seq * l.hd;
  const int64_t np = l.batch * l.hkv * l.total * l.hd;
  if (nq > 0) {
    GqaQueryKernel<K, L, P><<<Blocks(nq), kThreads, 0, stream>>>(
        l, static_cast<const S*>(o.query), static_cast<const S*>(o.key),
        static_cast<const S*>(o.value), static_cast<const L*>(lens),
        static_cast<const P*>(positions), static_cast<const S*>(o.cos),
        static_cast<const S*>(o.sin), static_cast<S*>(o.q), nq, flag, code);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (np > 0) {
    GqaPresentKernel<K, L, P><<<Blocks(np), kThreads, 0, stream>>>(
        l, static_cast<const S*>(o.query), static_cast<const S*>(o.key),
        static_cast<const S*>(o.value), static_cast<const S*>(o.past_k),
        static_cast<const S*>(o.past_v), static_cast<const L*>(lens),
        static_cast<const P*>(positions), static_cast<const S*>(o.cos),
        static_cast<const S*>(o.sin), static_cast<S*>(o.present_k), static_cast<S*>(o.present_v),
        np, flag, code);
  }
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t GqaLayoutOfKind(const math::GqaLayout& l, const GqaOperands& o, const void* lens,
                            bool lens_i64, const void* positions, bool positions_i64, int* flag,
                            int code, cudaStream_t stream) {
  if (lens_i64) {
    return positions_i64
               ? GqaLayoutTyped<K, int64_t, int64_t>(l, o, lens, positions, flag, code, stream)
               : GqaLayoutTyped<K, int64_t, int32_t>(l, o, lens, positions, flag, code, stream);
  }
  return positions_i64
             ? GqaLayoutTyped<K, int32_t, int64_t>(l, o, lens, positions, flag, code, stream)
             : GqaLayoutTyped<K, int32_t, int32_t>(l, o, lens, positions, flag, code, stream);
}

template <typename S>
cudaError_t GqaWindowPresentsOf(const math::GqaLayout& l, const void* lens, bool lens_i64,
                                const void* sk, const void* sv, void* pk, void* pv, int* flag,
                                int code, cudaStream_t stream) {
  const int64_t n = l.batch * l.hkv * l.past * l.hd;
  if (n == 0) return cudaSuccess;
  if (lens_i64) {
    GqaWindowPresentKernel<S, int64_t><<<Blocks(n), kThreads, 0, stream>>>(
        l, static_cast<const int64_t*>(lens), static_cast<const S*>(sk), static_cast<const S*>(sv),
        static_cast<S*>(pk), static_cast<S*>(pv), n, flag, code);
  } else {
    GqaWindowPresentKernel<S, int32_t><<<Blocks(n), kThreads, 0, stream>>>(
        l, static_cast<const int32_t*>(lens), static_cast<const S*>(sk), static_cast<const S*>(sv),
        static_cast<S*>(pk), static_cast<S*>(pv), n, flag, code);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGqaWindowPresents(FloatKind k, const math::GqaLayout& l, const void* lens,
                                    bool lens_i64, const void* sk, const void* sv, void* pk,
                                    void* pv, int* flag, int code, cudaStream_t stream) {
  return ByKind(k, [&](auto kind) {
    using S = typename FloatIO<decltype(kind)::value>::Storage;
    return GqaWindowPresentsOf<S>(l, lens, lens_i64, sk, sv, pk, pv, flag, code, stream);
  });
}

cudaError_t LaunchGqaNormHeads(FloatKind k, const math::GqaLayout& l, const void* in,
                               bool key_input, const void* q_weight, const void* k_weight,
                               void* out, int64_t heads, cudaStream_t stream) {
  if (heads == 0) return cudaSuccess;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    GqaNormHeadsKernel<K><<<Blocks(heads), kThreads, 0, stream>>>(
        l, static_cast<const S*>(in), key_input, static_cast<const S*>(q_weight),
        static_cast<const S*>(k_weight), static_cast<S*>(out), heads);
    return cudaGetLastError();
  });
}

cudaError_t LaunchGqaLayout(FloatKind k, const math::GqaLayout& l, const GqaOperands& o,
                            const void* lens, bool lens_i64, const void* positions,
                            bool positions_i64, int* flag, int code, cudaStream_t stream) {
  return ByKind(k, [&](auto kind) {
    return GqaLayoutOfKind<decltype(kind)::value>(l, o, lens, lens_i64, positions, positions_i64,
                                                  flag, code, stream);
  });
}

}  // namespace tpc::runtime::cuda
