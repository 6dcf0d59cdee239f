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

// Folds a tile's scores s[0..n) (math::AttentionScore's, -inf for a closed key) into `row`
// and replaces each by its term exp(s - new max): 0 while every key seen is closed (the
// max is -inf), so that a closed first tile does not poison the row. Returns the factor
// exp(old max - new max) of the row's accumulated output (1 while the max is -inf).
TPC_HOST_DEVICE inline float OnlineSoftmaxTile(OnlineRow& row, float* s, int64_t n) {
  float mx = row.max;
  for (int64_t j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
  const bool open = mx != -INFINITY;
  const float alpha = open && row.max != -INFINITY ? expf(row.max - mx) : (open ? 0.0f : 1.0f);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = open ? expf(s[j] - mx) : 0.0f;
    sum += s[j];
  }
  row.max = mx;
  row.sum = row.sum * alpha + sum;
  return alpha;
}

// The row's output element from its accumulated Σ p·v: divided by the sum. A row whose
// keys are all closed gets 0 / 0, NaN, as the softmax of such a row does.
TPC_HOST_DEVICE inline float OnlineSoftmaxFinish(float acc, const OnlineRow& row) {
  return acc / row.sum;
}

}  // namespace tpc::runtime::math
