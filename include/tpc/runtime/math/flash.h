// The attention core by tiles of keys (flash attention's online softmax), as the device's
// tiled kernel computes it (cuda/flash_attention.cu): per query row, the running max of
// its scores and the running sum of exp(score - max) over the keys seen so far. Each tile
// of scores updates them and says by how much the row's accumulated P·V must be scaled
// before the tile's own P·V is added; at the end the row is divided by the sum. The host
// tests check the tiles' result against the whole row's softmax.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// Start each row at {-INFINITY, 0}. An aggregate (it sits in CUDA shared memory).
struct OnlineRow {
  float max, sum;
};

// A tile in three steps, so that several lanes can share a row's tile (each its part of
// the keys, the maxima and sums combined between the steps):
// 1. the row's new max: the running one and the tile's scores;
TPC_HOST_DEVICE inline float OnlineTileMax(float running, const float* s, int64_t n) {
  for (int64_t j = 0; j < n; ++j) running = s[j] > running ? s[j] : running;
  return running;
}
// 2. each score replaced by its term exp(s - max), 0 while every key seen is closed (the
//    max is -inf, so that a closed first tile does not poison the row); returns their sum;
TPC_HOST_DEVICE inline float OnlineTileTerms(float max, float* s, int64_t n) {
  const bool open = max != -INFINITY;
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = open ? expf(s[j] - max) : 0.0f;
    sum += s[j];
  }
  return sum;
}
// 3. the row updated with the tile's max and sum of terms; returns the factor
//    exp(old max - new max) of the row's accumulated output (1 while the max is -inf).
TPC_HOST_DEVICE inline float OnlineRowUpdate(OnlineRow& row, float max, float sum) {
  const bool open = max != -INFINITY;
  const float alpha = open && row.max != -INFINITY ? expf(row.max - max) : (open ? 0.0f : 1.0f);
  row.max = max;
  row.sum = row.sum * alpha + sum;
  return alpha;
}

// The three steps over a whole tile s[0..n) (math::AttentionScore's scores, -inf for a
// closed key), in one lane: the scores become their terms; returns the factor.
TPC_HOST_DEVICE inline float OnlineSoftmaxTile(OnlineRow& row, float* s, int64_t n) {
  const float max = OnlineTileMax(row.max, s, n);
  return OnlineRowUpdate(row, max, OnlineTileTerms(max, s, n));
}

// Where batch entry b's matrices start (elements), for the strided batch plan of
// math::PlanAttentionBatches: `fold` consecutive entries (GQA's query heads of one K and V
// head) share K and V and have their Q matrices one after another; Y is contiguous.
struct FlashEntry {
  int64_t q, k, v, y;
};
TPC_HOST_DEVICE inline FlashEntry FlashEntryOffsets(int64_t b, int64_t fold, int64_t s, int64_t d,
                                                    int64_t dv, int64_t q_stride, int64_t k_stride,
                                                    int64_t v_stride) {
  const int64_t e = b / fold;
  return {e * q_stride + (b - e * fold) * s * d, e * k_stride, e * v_stride, b * s * dv};
}

// Element (key, c) of K within its matrix: K [t, d], or Kᵀ [d, t].
TPC_HOST_DEVICE inline int64_t KeyElement(bool k_transposed, int64_t key, int64_t c, int64_t t,
                                          int64_t d) {
  return k_transposed ? c * t + key : key * d + c;
}

// The row's output element from its accumulated Σ p·v: divided by the sum. A row whose
// keys are all closed gets 0 / 0, NaN, as the softmax of such a row does.
TPC_HOST_DEVICE inline float OnlineSoftmaxFinish(float acc, const OnlineRow& row) {
  return acc / row.sum;
}

}  // namespace tpc::runtime::math
