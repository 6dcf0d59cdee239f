// Launches of MoE's kernels (the math is math/moe.h, shared with the CPU kernel), with no
// host synchronisation: the experts each token goes to stay on the device.
//  1. Route: one thread per token (grid-stride) writes its k experts and weights (slots
//     t · k .. t · k + k - 1), reading its row of logits only.
//  2. FC1 and FC2: one warp per (slot, output row) (warp w of block b: b · kMoeWarps + w, a
//     warp past slots · rows returns whole, before any shuffle); its lanes stride along
//     the row (math::MoeDotLane: lane l reads columns l, l + 32, ..., so a warp reads 32
//     contiguous weights; QMoE's, through QuantWeights: 16 or 32 contiguous bytes of codes,
//     and the row's block scales, each column's code and scale read by
//     math::MoeQuantWeight inside the row's row_bytes and row_scales, which the host
//     checked against the operands' shapes), a
//     butterfly of __shfl_xor_sync over the full warp sums them,
//     and lane 0 writes the one f32 output (bias added). The expert is the slot's, in
//     [0, experts) (math::MoeRoute picks among them, k ≤ experts checked on the host; a
//     NaN logit still picks one), so the reads stay inside its weights; the vector is the
//     slot's token row (FC1) or activation row (FC2).
//  3. Activation: one thread per (slot, inner element), reading its FC1 row.
//  4. Combine: one thread per output element, reading its token's k slot rows.
// Each thread or warp writes only its own element(s). Only the experts' rows that the
// tokens chose are read: a decode step reads k experts' weights, not all of them; a long
// prompt reads each chosen expert's rows once per token that chose it (not measured on a
// GPU yet).
#include <cuda_runtime.h>

#include <type_traits>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/moe.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;

constexpr int kMoeWarps = 8;

template <FloatKind K>
__global__ void MoeRouteKernel(math::MoeLayout l, const typename FloatIO<K>::Storage* logits,
                               int64_t* experts, float* weights) {
  using IO = FloatIO<K>;
  for (int64_t t = First(); t < l.tokens; t += Step()) {
    const typename IO::Storage* row = logits + t * l.experts;
    math::MoeRoute(
        l, [row](int64_t e) { return IO::Load(row[e]); }, experts + t * l.k, weights + t * l.k);
  }
}

// MoE's float weights [experts · rows, cols] of kind K: weight c of row `row`.
template <FloatKind K>
struct FloatWeights {
  const typename FloatIO<K>::Storage* w;
  int64_t cols;
  __device__ float operator()(int64_t row, int64_t c) const {
    return FloatIO<K>::Load(w[row * cols + c]);
  }
};

// QMoE's codes [experts · rows, q.row_bytes(cols)] and scales [experts · rows,
// q.row_scales(cols)] of kind K: weight c of row `row` (math::MoeQuantWeight).
template <FloatKind K>
struct QuantWeights {
  math::MoeQuant q;
  const uint8_t* codes;
  const typename FloatIO<K>::Storage* scales;
  int64_t cols;
  __device__ float operator()(int64_t row, int64_t c) const {
    const typename FloatIO<K>::Storage* s = scales + row * q.row_scales(cols);
    return math::MoeQuantWeight(
        q, codes + row * q.row_bytes(cols), [s](int64_t b) { return FloatIO<K>::Load(s[b]); }, c);
  }
};

// out[s, r] = Σ_c W[e_s][r, c] · v_s[c] + bias[e_s][r]: W's rows [experts · rows] of `cols`
// (`weights`), v_s row s / per_token of `vec` (V: K's storage or f32), bias [experts, rows]
// of kind K or null.
template <FloatKind K, typename V, typename W>
__global__ void MoeExpertGemvKernel(int64_t slots, int64_t rows, int64_t cols, int64_t per_token,
                                    const int64_t* experts, W weights, const V* vec,
                                    const typename FloatIO<K>::Storage* bias, float* out) {
  using IO = FloatIO<K>;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kMoeWarps + threadIdx.x / 32;
  if (item >= slots * rows) return;
  const int64_t s = item / rows, r = item % rows;
  const int64_t e = experts[s];
  const int64_t row = e * rows + r;
  const V* v = vec + (s / per_token) * cols;
  float acc = math::MoeDotLane(
      cols, lane, 32, [&weights, row](int64_t c) { return weights(row, c); },
      [v](int64_t c) {
        if constexpr (std::is_same_v<V, float>) {
          return v[c];
        } else {
          return IO::Load(v[c]);
        }
      });
  for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) out[item] = acc + (bias != nullptr ? IO::Load(bias[row]) : 0.0f);
}

__global__ void MoeActivateKernel(math::MoeLayout l, int64_t slots, const float* hidden,
                                  float* act) {
  const int64_t n = slots * l.inter, rows = l.fc1_rows();
  for (int64_t i = First(); i < n; i += Step()) {
    act[i] = math::MoeActivate(l, hidden + (i / l.inter) * rows, i % l.inter);
  }
}

template <FloatKind K>
__global__ void MoeCombineKernel(math::MoeLayout l, const float* weights, const float* slots,
                                 typename FloatIO<K>::Storage* out) {
  const int64_t n = l.tokens * l.hidden;
  for (int64_t i = First(); i < n; i += Step()) {
    out[i] = FloatIO<K>::Store(math::MoeCombine(l, weights, slots, i / l.hidden, i % l.hidden));
  }
}

// One FC of the slots: float weights `w`, or (quant non-null) codes `w` with `scales`.
template <FloatKind K, typename V>
cudaError_t ExpertGemv(int64_t slots, int64_t rows, int64_t cols, int64_t per_token,
                       const int64_t* experts, const void* w, const math::MoeQuant* quant,
                       const void* scales, const V* vec, const void* bias, float* out,
                       cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t warps = slots * rows;
  if (warps == 0) return cudaSuccess;
  const int64_t blocks = (warps + kMoeWarps - 1) / kMoeWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const auto grid = static_cast<unsigned>(blocks);
  const auto* b = static_cast<const S*>(bias);
  if (quant != nullptr) {
    const QuantWeights<K> q{*quant, static_cast<const uint8_t*>(w), static_cast<const S*>(scales),
                            cols};
    MoeExpertGemvKernel<K, V, QuantWeights<K>><<<grid, kMoeWarps * 32, 0, stream>>>(
        slots, rows, cols, per_token, experts, q, vec, b, out);
  } else {
    const FloatWeights<K> f{static_cast<const S*>(w), cols};
    MoeExpertGemvKernel<K, V, FloatWeights<K>><<<grid, kMoeWarps * 32, 0, stream>>>(
        slots, rows, cols, per_token, experts, f, vec, b, out);
  }
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t Moe(const math::MoeLayout& l, const MoeOperands& o, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t slots = l.tokens * l.k;
  if (slots == 0) return cudaSuccess;
  MoeRouteKernel<K><<<Blocks(l.tokens), kThreads, 0, stream>>>(l, static_cast<const S*>(o.router),
                                                               o.experts, o.weights);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (cudaError_t e =
          ExpertGemv<K, S>(slots, l.fc1_rows(), l.hidden, l.k, o.experts, o.fc1,
                           o.quantized ? &o.fc1_quant : nullptr, o.fc1_scales,
                           static_cast<const S*>(o.input), o.fc1_bias, o.hidden, stream);
      e != cudaSuccess) {
    return e;
  }
  MoeActivateKernel<<<Blocks(slots * l.inter), kThreads, 0, stream>>>(l, slots, o.hidden, o.act);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (o.fc2_round_block > 0) {  // in place: each thread reads its block before it writes it
    if (cudaError_t e = LaunchInt8RoundRows(FloatKind::kF32, slots, l.inter, o.fc2_round_block,
                                            o.act, o.act, stream);
        e != cudaSuccess) {
      return e;
    }
  }
  if (cudaError_t e = ExpertGemv<K, float>(slots, l.hidden, l.inter, 1, o.experts, o.fc2,
                                           o.quantized ? &o.fc2_quant : nullptr, o.fc2_scales,
                                           o.act, o.fc2_bias, o.slots, stream);
      e != cudaSuccess) {
    return e;
  }
  MoeCombineKernel<K><<<Blocks(l.tokens * l.hidden), kThreads, 0, stream>>>(
      l, o.weights, o.slots, static_cast<S*>(o.output));
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchMoe(FloatKind k, const math::MoeLayout& l, const MoeOperands& o,
                      cudaStream_t stream) {
  return ByKind(k, [&](auto kind) { return Moe<decltype(kind)::value>(l, o, stream); });
}

}  // namespace tpc::runtime::cuda
