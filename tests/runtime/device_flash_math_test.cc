// The attention core by tiles of keys (math/flash.h), as the CUDA kernel composes it:
// scores of a tile, the online softmax's update, the accumulated P·V scaled by its
// factor, then divided by the sum, against each row's whole softmax (math/rows.h, as the
// untiled path computes it).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/runtime/math/attention_batches.h"
#include "tpc/runtime/math/flash.h"
#include "tpc/runtime/math/rows.h"

namespace tpc::runtime {
namespace {

struct Problem {
  int64_t s, t, d, dv;
  std::vector<float> q, k, v, mask;  // [s, d], [t, d], [t, dv], [s, t]
  float alpha = 1.0f, divisor = 1.0f;
};

float Score(const Problem& p, int64_t i, int64_t j) {
  float dot = 0.0f;
  for (int64_t c = 0; c < p.d; ++c) dot += p.q[i * p.d + c] * p.k[j * p.d + c];
  return math::AttentionScore(dot * p.alpha, p.divisor, p.mask[i * p.t + j]);
}

// Row i of softmax(scores)·V over the whole row at once.
std::vector<float> Whole(const Problem& p, int64_t i) {
  std::vector<float> sc(p.t), out(p.dv, 0.0f);
  float mx = -INFINITY, sum = 0.0f;
  for (int64_t j = 0; j < p.t; ++j) mx = math::CombineMax(mx, sc[j] = Score(p, i, j));
  for (int64_t j = 0; j < p.t; ++j) sum += math::SoftmaxTerm(sc[j], mx);
  for (int64_t j = 0; j < p.t; ++j) {
    const float w = math::SoftmaxElement(sc[j], mx, sum, false);
    for (int64_t c = 0; c < p.dv; ++c) out[c] += w * p.v[j * p.dv + c];
  }
  return out;
}

// Row i by tiles of `tile` keys, as the kernel: each tile's terms, the accumulator scaled
// by the tile's factor, then the tile's P·V added; divided by the sum at the end. With
// `halves`, two lanes share each tile as the kernel's do: each the max and the terms of
// its half of the keys, the maxima and the sums combined between the steps.
std::vector<float> Tiled(const Problem& p, int64_t i, int64_t tile, bool halves = false) {
  math::OnlineRow row{-INFINITY, 0.0f};
  std::vector<float> acc(p.dv, 0.0f), s(tile);
  for (int64_t j0 = 0; j0 < p.t; j0 += tile) {
    const int64_t n = std::min(tile, p.t - j0);
    for (int64_t j = 0; j < n; ++j) s[j] = Score(p, i, j0 + j);
    float a = 0.0f;
    if (halves) {
      const int64_t h = std::min((tile + 1) / 2, n);  // the first lane's keys
      const float max = std::max(math::OnlineTileMax(row.max, s.data(), h),
                                 math::OnlineTileMax(row.max, s.data() + h, n - h));
      const float sum =
          math::OnlineTileTerms(max, s.data(), h) + math::OnlineTileTerms(max, s.data() + h, n - h);
      a = math::OnlineRowUpdate(row, max, sum);
    } else {
      a = math::OnlineSoftmaxTile(row, s.data(), n);
    }
    for (int64_t c = 0; c < p.dv; ++c) {
      float add = 0.0f;
      for (int64_t j = 0; j < n; ++j) add += s[j] * p.v[(j0 + j) * p.dv + c];
      acc[c] = acc[c] * a + add;
    }
  }
  for (float& x : acc) x = math::OnlineSoftmaxFinish(x, row);
  return acc;
}

Problem Random(int64_t s, int64_t t, int64_t d, int64_t dv, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Problem p{s, t, d, dv, {}, {}, {}, {}};
  for (const auto& [vec, n] : {std::pair{&p.q, s * d}, {&p.k, t * d}, {&p.v, t * dv}}) {
    vec->resize(static_cast<size_t>(n));
    for (float& x : *vec) x = u(gen);
  }
  p.mask.assign(s * t, 0.0f);
  return p;
}

void RequireRowsAgree(const Problem& p, int64_t tile, bool halves = false) {
  for (int64_t i = 0; i < p.s; ++i) {
    const std::vector<float> want = Whole(p, i), got = Tiled(p, i, tile, halves);
    for (int64_t c = 0; c < p.dv; ++c) {
      INFO("tile " << tile << (halves ? " in halves" : "") << " row " << i << " column " << c);
      if (std::isnan(want[c])) {
        CHECK(std::isnan(got[c]));
        continue;
      }
      CHECK(std::abs(got[c] - want[c]) <= 1e-5f * (1.0f + std::abs(want[c])));
    }
  }
}

TEST_CASE("Attention by tiles of keys equals each row's whole softmax", "[runtime][device-math]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const auto& [tile, halves] : std::vector<std::pair<int64_t, bool>>{
           {1, false}, {5, false}, {32, false}, {64, false}, {2, true}, {5, true}, {32, true}}) {
    // Unmasked, scaled as a multiplying chain and as a dividing one.
    Problem p = Random(7, 45, 8, 5, 1);
    p.alpha = 0.35f;
    RequireRowsAgree(p, tile, halves);
    p.alpha = 1.0f;
    p.divisor = 2.8f;
    RequireRowsAgree(p, tile, halves);
    // Causal, with left padding: the first keys closed for every row (a closed first
    // tile), one row closed entirely (NaN, as the softmax's), the lowest finite value.
    Problem m = Random(9, 40, 6, 4, 2);
    for (int64_t i = 0; i < m.s; ++i) {
      for (int64_t j = 0; j < m.t; ++j) {
        const bool closed = j > i + 30 || j < 7 || i == 4;
        m.mask[i * m.t + j] = closed ? (i == 6 ? -3.40282347e38f : -inf) : 0.1f * (j % 3);
      }
    }
    RequireRowsAgree(m, tile, halves);
  }
}

TEST_CASE("The online softmax's factor and terms", "[runtime][device-math]") {
  math::OnlineRow row{-INFINITY, 0.0f};
  const float inf = std::numeric_limits<float>::infinity();
  // A closed tile first: terms 0, factor 1, the row still empty.
  std::vector<float> closed = {-inf, -inf};
  CHECK(math::OnlineSoftmaxTile(row, closed.data(), 2) == 1.0f);
  CHECK(closed == std::vector<float>{0.0f, 0.0f});
  CHECK(row.sum == 0.0f);
  // Then scores 1 and 3: the accumulator (still 0) is scaled by 0.
  std::vector<float> s = {1.0f, 3.0f};
  CHECK(math::OnlineSoftmaxTile(row, s.data(), 2) == 0.0f);
  CHECK(row.max == 3.0f);
  CHECK(s[1] == 1.0f);
  CHECK(row.sum == Approx(1.0f + std::exp(-2.0f)));
  // A larger score: what came before is scaled by exp(3 - 5).
  std::vector<float> more = {5.0f};
  CHECK(math::OnlineSoftmaxTile(row, more.data(), 1) == Approx(std::exp(-2.0f)));
  CHECK(row.sum == Approx((1.0f + std::exp(-2.0f)) * std::exp(-2.0f) + 1.0f));
}

// The element offset of an operand's matrix for batch entry i, broadcast right-aligned
// over `batch` (its dims 1 where it repeats): what the CPU kernel reads.
int64_t Broadcast(const std::vector<int64_t>& batch, const std::vector<int64_t>& own, int64_t i,
                  int64_t matrix) {
  int64_t off = 0, stride = matrix;
  const size_t lead = batch.size() - own.size();
  for (size_t a = batch.size(); a > 0; --a) {
    const int64_t idx = i % batch[a - 1];
    i /= batch[a - 1];
    if (a - 1 < lead) continue;
    if (own[a - 1 - lead] != 1) off += idx * stride;
    stride *= own[a - 1 - lead];
  }
  return off;
}

TEST_CASE("The tiled kernel's batch entries read the matrices the broadcast names",
          "[runtime][device-math]") {
  struct BatchCase {
    std::vector<int64_t> batch, bq, bk, bv;
  };
  const int64_t s = 3, t = 5, d = 4, dv = 2;
  for (const BatchCase& c : std::vector<BatchCase>{
           {{2, 3}, {2, 3}, {2, 3}, {2, 3}},              // every operand full
           {{2, 2, 3}, {2, 2, 3}, {2, 2, 1}, {2, 2, 1}},  // GQA: 2 K heads, groups of 3
           {{2, 4}, {2, 4}, {2, 1}, {2, 1}},              // MQA
           {{2, 4}, {2, 4}, {}, {1}},                     // one K and V for all
       }) {
    const math::AttentionBatches plan =
        math::PlanAttentionBatches(c.batch, c.bq, c.bk, c.bv, s, t, d, dv);
    REQUIRE((plan.q && plan.k && plan.v));
    int64_t count = 1;
    for (int64_t x : c.batch) count *= x;
    for (int64_t b = 0; b < count; ++b) {
      INFO("fold " << plan.fold << ", entry " << b);
      const math::FlashEntry at =
          math::FlashEntryOffsets(b, plan.fold, s, d, dv, *plan.q, *plan.k, *plan.v);
      CHECK(at.q == Broadcast(c.batch, c.bq, b, s * d));
      CHECK(at.k == Broadcast(c.batch, c.bk, b, t * d));
      CHECK(at.v == Broadcast(c.batch, c.bv, b, t * dv));
      CHECK(at.y == b * s * dv);
    }
  }
  // K's element (key, c) in either layout: K [t, d] as given, and its transpose.
  std::vector<float> keys(static_cast<size_t>(t * d)), transposed(keys.size());
  for (int64_t i = 0; i < t * d; ++i) keys[static_cast<size_t>(i)] = static_cast<float>(i);
  for (int64_t key = 0; key < t; ++key) {
    for (int64_t c = 0; c < d; ++c) transposed[c * t + key] = keys[key * d + c];
  }
  for (int64_t key = 0; key < t; ++key) {
    for (int64_t c = 0; c < d; ++c) {
      const float want = keys[key * d + c];
      CHECK(keys[math::KeyElement(false, key, c, t, d)] == want);
      CHECK(transposed[math::KeyElement(true, key, c, t, d)] == want);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
