// The attention operators' device math (tpc/runtime/math: gqa.h, sdpa.h, rotary.h),
// composed on the host as the CUDA kernels compose it (layout elements, the scores, the
// masked softmax of each row, P·V), against the CPU backend's kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/attention_batches.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/gqa.h"
#include "tpc/runtime/math/rotary.h"
#include "tpc/runtime/math/rows.h"
#include "tpc/runtime/math/sdpa.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime {
namespace {

using math::FloatKind;
using math::StridedView;
using testing::F32;
using testing::Floats;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;

// GroupQueryAttention as the CUDA kernel composes it (the layout elements, the scores of
// each group, the masked softmax of each row, P·V), in f32 on the host.
// With l.qk_norm, the query and key read are copies with their Q and K heads normalized
// by norms[0] and norms[1] (the CUDA op's first launches).
std::vector<Tensor> GqaByDeviceMath(const math::GqaLayout& l, Tensor query, const Tensor* key,
                                    const Tensor* value, const Tensor* past_k, const Tensor* past_v,
                                    const std::vector<int32_t>& lens, const Tensor* cos,
                                    const Tensor* sin, float scale, const Tensor* norms = nullptr) {
  const float* nul = nullptr;
  Tensor key_normed;
  if (l.qk_norm) {
    auto normed = [&](const Tensor& in, bool key_input) {
      Tensor out = Tensor::Allocate(ir::DType::kF32, in.shape());
      for (int64_t j = 0; j < in.num_elements() / l.hd; ++j) {
        math::GqaNormHead<math::FloatIO<FloatKind::kF32>>(
            l, in.data<float>(), key_input, norms[0].data<float>(), norms[1].data<float>(),
            out.data<float>(), j);
      }
      return out;
    };
    query = normed(query, false);
    if (key != nullptr) {
      key_normed = normed(*key, true);
      key = &key_normed;
    }
  }
  std::vector<float> q(static_cast<size_t>(l.batch * l.hq * l.seq * l.hd));
  std::vector<float> pk(static_cast<size_t>(l.batch * l.hkv * l.total * l.hd)), pv(pk.size());
  const int64_t* no_positions = nullptr;
  for (size_t i = 0; i < q.size(); ++i) {
    REQUIRE(math::GqaQueryElement<FloatKind::kF32>(
        l, query.data<float>(), key ? key->data<float>() : nul, value ? value->data<float>() : nul,
        lens.data(), no_positions, cos ? cos->data<float>() : nul, sin ? sin->data<float>() : nul,
        q.data(), static_cast<int64_t>(i)));
  }
  for (size_t i = 0; i < pk.size(); ++i) {
    REQUIRE(math::GqaPresentElement<FloatKind::kF32>(
        l, query.data<float>(), key ? key->data<float>() : nul, value ? value->data<float>() : nul,
        past_k ? past_k->data<float>() : nul, past_v ? past_v->data<float>() : nul, lens.data(),
        no_positions, cos ? cos->data<float>() : nul, sin ? sin->data<float>() : nul, pk.data(),
        pv.data(), static_cast<int64_t>(i)));
  }
  Tensor y = Tensor::Allocate(ir::DType::kF32, {l.batch, l.seq, l.hq * l.hd});
  const int64_t group = l.hq / l.hkv;
  std::vector<float> row(static_cast<size_t>(l.total));
  for (int64_t b = 0; b < l.batch; ++b) {
    int64_t keys = 0, own = 0;
    REQUIRE(math::GqaRowKeys(l, lens[static_cast<size_t>(b)], &keys, &own));
    for (int64_t h = 0; h < l.hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < l.seq; ++i) {
        float mx = l.smooth ? 0.0f : -INFINITY;
        for (int64_t j = 0; j < l.total; ++j) {
          float dot = 0;
          for (int64_t d = 0; d < l.hd; ++d) {
            dot += q[static_cast<size_t>(((b * l.hq + h) * l.seq + i) * l.hd + d)] *
                   pk[static_cast<size_t>(((b * l.hkv + g) * l.total + j) * l.hd + d)];
          }
          row[static_cast<size_t>(j)] =
              math::GqaOpen(l, keys, own, i, j) ? math::GqaSoftcap(l, scale * dot) : -INFINITY;
          mx = std::max(mx, row[static_cast<size_t>(j)]);
        }
        float sum = l.smooth ? std::exp(-mx) : 0.0f;
        for (float v : row) sum += math::SoftmaxTerm(v, mx);
        for (int64_t d = 0; d < l.hd; ++d) {
          float acc = 0;
          for (int64_t j = 0; j < l.total; ++j) {
            acc += math::SoftmaxElement(row[static_cast<size_t>(j)], mx, sum, false) *
                   pv[static_cast<size_t>(((b * l.hkv + g) * l.total + j) * l.hd + d)];
          }
          y.data<float>()[(b * l.seq + i) * l.hq * l.hd + h * l.hd + d] = acc;
        }
      }
    }
  }
  Tensor tk = Tensor::Allocate(ir::DType::kF32, {l.batch, l.hkv, l.total, l.hd});
  Tensor tv = Tensor::Allocate(ir::DType::kF32, {l.batch, l.hkv, l.total, l.hd});
  std::copy(pk.begin(), pk.end(), tk.data<float>());
  std::copy(pv.begin(), pv.end(), tv.data<float>());
  if (!l.windowed) return {y, tk, tv};
  // A windowed cache's presents keep the latest of the rows attention ran over.
  Tensor wk = Tensor::Allocate(ir::DType::kF32, {l.batch, l.hkv, l.past, l.hd});
  Tensor wv = Tensor::Allocate(ir::DType::kF32, {l.batch, l.hkv, l.past, l.hd});
  for (int64_t i = 0; i < wk.num_elements(); ++i) {
    REQUIRE(math::GqaWindowPresentElement(l, lens.data(), pk.data(), pv.data(), wk.data<float>(),
                                          wv.data<float>(), i));
  }
  return {y, wk, wv};
}

TEST_CASE("GroupQueryAttention composed from the device math equals the CPU kernel",
          "[runtime][device-math]") {
  struct Case {
    bool packed, interleaved, with_past, smooth;
    int64_t window;
    float softcap;
    std::vector<int32_t> lens;
    int64_t capacity;   // of a windowed cache (sliding_window_cache), else 0
    bool norm = false;  // the fused per-head Q/K norms
  };
  const std::vector<Case> cases = {
      {false, false, true, false, -1, 0.0f, {4, 3}, 0},   // decode rows of 5 and 4 keys
      {true, true, true, true, 2, 5.0f, {4, 4}, 0},       // packed, window, softcap, smooth
      {false, false, false, false, -1, 0.0f, {2, 1}, 0},  // a padded first prompt
      // Windowed caches of 4 rows (window 3) after 5 and 1 tokens (a staging step and a
      // drifting one), and of 3 rows (= window) after 4 and none (compacting).
      {false, false, true, false, 3, 0.0f, {7, 3}, 4},
      {true, false, true, false, 3, 0.0f, {6, 2}, 3},
      // A padded first prompt (a row of 2 keys for 3 new rows) beside a full one.
      {false, false, true, false, 2, 0.0f, {1, 2}, 3},
      // The fused Q/K norms: Q, K and V apart, and packed (V's heads left as they are).
      {false, false, true, false, -1, 0.0f, {4, 3}, 0, true},
      {true, true, true, false, -1, 0.0f, {4, 2}, 0, true},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    math::GqaLayout l;
    l.batch = 2;
    l.seq = 3;
    l.hq = 4;
    l.hkv = 2;
    l.hd = 8;
    l.past = c.capacity > 0 ? c.capacity : c.with_past ? 2 : 0;
    l.total = l.past + l.seq;
    l.windowed = c.capacity > 0;
    l.packed = c.packed;
    l.q_row = (c.packed ? l.hq + 2 * l.hkv : l.hq) * l.hd;
    l.rotary = true;
    l.interleaved = c.interleaved;
    l.half = 2;
    l.cache_rows = 16;
    l.window = c.window;
    l.softcap = c.softcap;
    l.smooth = c.smooth;
    l.qk_norm = c.norm;
    l.q_epsilon = 0.01f;
    l.k_epsilon = 0.3f;
    const Tensor norms[2] = {Random({l.hd}, 77), Random({l.hd}, 78)};
    const Tensor query = Random({l.batch, l.seq, l.q_row}, 70 + static_cast<uint32_t>(ci));
    const Tensor key = Random({l.batch, l.seq, l.hkv * l.hd}, 71);
    const Tensor value = Random({l.batch, l.seq, l.hkv * l.hd}, 72);
    const Tensor past_k = Random({l.batch, l.hkv, l.past, l.hd}, 73);
    const Tensor past_v = Random({l.batch, l.hkv, l.past, l.hd}, 74);
    const Tensor cos = Random({16, 2}, 75), sin = Random({16, 2}, 76);
    Tensor lens = Tensor::Allocate(ir::DType::kI32, {l.batch});
    std::copy(c.lens.begin(), c.lens.end(), lens.data<int32_t>());
    const float scale = 0.3f;
    OneOp o;
    o.Input("query", query);
    if (c.packed) {
      o.None();
      o.None();
    } else {
      o.Input("key", key);
      o.Input("value", value);
    }
    if (c.with_past) {
      o.Input("past_key", past_k);
      o.Input("past_value", past_v);
    } else {
      o.None();
      o.None();
    }
    o.Input("seqlens_k", lens);
    o.None();
    o.Input("cos", cos);
    o.Input("sin", sin);
    if (c.norm) {
      for (int i = 9; i < 14; ++i) o.None();
      o.Input("q_norm_weight", norms[0]);
      o.Input("k_norm_weight", norms[1]);
    }
    o.output_type = ir::TensorType(ir::DType::kF32, {});
    auto want = o.TryRun("GroupQueryAttention",
                         {{"num_heads", l.hq},
                          {"q_norm_epsilon", l.q_epsilon},
                          {"k_norm_epsilon", l.k_epsilon},
                          {"kv_num_heads", l.hkv},
                          {"scale", scale},
                          {"do_rotary", int64_t{1}},
                          {"rotary_interleaved", int64_t{c.interleaved ? 1 : 0}},
                          {"local_window_size", c.window},
                          {"softcap", c.softcap},
                          {"smooth_softmax", int64_t{c.smooth ? 1 : 0}},
                          {"sliding_window_cache", int64_t{l.windowed ? 1 : 0}}},
                         3, "com.microsoft");
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    const std::vector<Tensor> got =
        GqaByDeviceMath(l, query, c.packed ? nullptr : &key, c.packed ? nullptr : &value,
                        c.with_past ? &past_k : nullptr, c.with_past ? &past_v : nullptr, c.lens,
                        &cos, &sin, scale, norms);
    for (size_t k = 0; k < 3; ++k) {
      INFO("output " << k);
      REQUIRE(got[k].shape() == (*want)[k].shape());
      RequireClose(Floats(got[k]), Floats((*want)[k]), 2e-5f);
    }
  }
  // A row with more keys than past + seq, and a position past the caches, are refused.
  math::GqaLayout l;
  l.batch = 1;
  l.seq = 1;
  l.past = 2;
  l.total = 3;
  l.cache_rows = 2;
  int64_t keys = 0, own = 0, pos = 0;
  CHECK(!math::GqaRowKeys(l, 3, &keys, &own));
  REQUIRE(math::GqaRowKeys(l, 2, &keys, &own));
  const int64_t* none = nullptr;
  CHECK(!math::GqaPosition(l, none, own, 0, 0, &pos));  // own + 0 = 2, caches of 2
}

// The fused Q/K norm of a head in half (the CUDA kernel's f16 and bf16): the f32 norm of the
// half values, rounded once (within one unit of the half's last place: the f32 sums may
// differ in order from the reference's double).
TEST_CASE("GroupQueryAttention's Q/K norm in f16 and bf16 is the f32 norm rounded once",
          "[runtime][device-math]") {
  math::GqaLayout l;
  l.hq = 2;
  l.hkv = 1;
  l.hd = 64;
  l.q_row = 4 * l.hd;  // packed: 2 Q heads, 1 K head, 1 V head
  l.packed = true;
  l.q_epsilon = 1e-6f;
  l.k_epsilon = 0.5f;
  const Tensor x = Random({4 * l.hd}, 80), w = Random({2 * l.hd}, 81);
  auto check = [&]<FloatKind K>(double ulp) {
    using IO = math::FloatIO<K>;
    std::vector<uint16_t> in(x.num_elements()), weights(w.num_elements()), out(in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = IO::Store(x.data<float>()[i]);
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = IO::Store(w.data<float>()[i]);
    for (int64_t j = 0; j < 4; ++j) {
      math::GqaNormHead<IO>(l, in.data(), false, weights.data(), weights.data() + l.hd, out.data(),
                            j);
    }
    for (int64_t j = 0; j < 4; ++j) {
      double sum = 0;
      for (int64_t d = 0; d < l.hd; ++d) sum += std::pow(IO::Load(in[j * l.hd + d]), 2);
      const double eps = j < 2 ? l.q_epsilon : l.k_epsilon;
      const double inv = 1 / std::sqrt(sum / static_cast<double>(l.hd) + eps);
      for (int64_t d = 0; d < l.hd; ++d) {
        const size_t at = static_cast<size_t>(j * l.hd + d);
        const double want =
            j == 3 ? IO::Load(in[at])
                   : IO::Load(in[at]) * inv * IO::Load(weights[(j < 2 ? 0 : l.hd) + d]);
        INFO("head " << j << " element " << d);
        CHECK(std::abs(IO::Load(out[at]) - want) <= ulp * std::max(std::abs(want), 1e-3));
      }
    }
  };
  check.operator()<FloatKind::kF16>(std::ldexp(1.0, -10));
  check.operator()<FloatKind::kBF16>(std::ldexp(1.0, -7));
}

TEST_CASE("ONNX Attention's row math, composed as the CUDA kernel does, equals the CPU kernel",
          "[runtime][device-math]") {
  // 4-D Q [B, Hq, qs, hd], K/V [B, Hkv, s, hd] after a past of 2; GQA heads.
  const int64_t b = 2, hq = 4, hkv = 2, qs = 3, s = 3, hd = 4, past = 2, total = past + s;
  const Tensor q = Random({b, hq, qs, hd}, 80), k = Random({b, hkv, s, hd}, 81),
               v = Random({b, hkv, s, hd}, 82), pk = Random({b, hkv, past, hd}, 83),
               pv = Random({b, hkv, past, hd}, 84);
  Tensor bool_mask = Tensor::Allocate(ir::DType::kBool, {qs, 4});  // 4 < total columns
  for (int64_t i = 0; i < qs * 4; ++i) bool_mask.data<bool>()[i] = (i * 5) % 3 != 0;
  const Tensor float_mask = Random({b, 1, qs, total}, 85);
  struct Case {
    const Tensor* mask;
    bool causal;
    float softcap;
    int64_t mode;
  };
  const std::vector<Case> cases = {
      {nullptr, true, 0.0f, 0}, {&bool_mask, false, 0.0f, 3}, {&float_mask, true, 2.0f, 2}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    OneOp o(23);
    o.Input("q", q);
    o.Input("k", k);
    o.Input("v", v);
    if (c.mask != nullptr) {
      o.Input("m", *c.mask);
    } else {
      o.None();
    }
    o.Input("pk", pk);
    o.Input("pv", pv);
    const float scale = 0.5f;
    const std::vector<Tensor> want = o.Run("Attention",
                                           {{"scale", scale},
                                            {"is_causal", int64_t{c.causal ? 1 : 0}},
                                            {"softcap", c.softcap},
                                            {"qk_matmul_output_mode", c.mode}},
                                           4);
    math::SdpaLayout l;
    l.batch = b;
    l.hq = hq;
    l.qs = qs;
    l.total = total;
    l.past = past;
    l.causal = c.causal;
    l.softcap = c.softcap;
    l.qk_mode = static_cast<int>(c.mode);
    if (c.mask != nullptr) {
      l.mask = c.mask->dtype() == ir::DType::kBool ? 1 : 2;
      l.mask_cols = c.mask->shape().back();
      const StridedView mv = math::BroadcastView(c.mask->shape(), {b, hq, qs, l.mask_cols});
      for (int d = 0; d < 4; ++d) l.mask_strides[d] = mv.strides[d];
    }
    std::vector<float> y(static_cast<size_t>(b * hq * qs * hd)),
        qk(static_cast<size_t>(b * hq * qs * total));
    for (int64_t bb = 0; bb < b; ++bb) {
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t g = h / (hq / hkv);
        auto key = [&](int64_t j, int64_t d) {
          return j < past ? pk.data<float>()[((bb * hkv + g) * past + j) * hd + d]
                          : k.data<float>()[((bb * hkv + g) * s + j - past) * hd + d];
        };
        auto val = [&](int64_t j, int64_t d) {
          return j < past ? pv.data<float>()[((bb * hkv + g) * past + j) * hd + d]
                          : v.data<float>()[((bb * hkv + g) * s + j - past) * hd + d];
        };
        for (int64_t i = 0; i < qs; ++i) {
          std::vector<float> raw(static_cast<size_t>(total)), sc(static_cast<size_t>(total));
          float mx = -INFINITY;
          for (int64_t j = 0; j < total; ++j) {
            float dot = 0;
            for (int64_t d = 0; d < hd; ++d) {
              dot += q.data<float>()[((bb * hq + h) * qs + i) * hd + d] * key(j, d);
            }
            raw[static_cast<size_t>(j)] = scale * dot;
            sc[static_cast<size_t>(j)] =
                math::SdpaSoftcap(l, scale * dot) +
                math::SdpaBias<FloatKind::kF32>(l, c.mask ? c.mask->raw() : nullptr, nullptr, bb, h,
                                                i, j);
            mx = std::max(mx, sc[static_cast<size_t>(j)]);
          }
          float sum = 0;
          for (float x : sc) sum += mx == -INFINITY ? 0.0f : math::SoftmaxTerm(x, mx);
          for (int64_t j = 0; j < total; ++j) {
            const float p = mx == -INFINITY
                                ? 0.0f
                                : math::SoftmaxElement(sc[static_cast<size_t>(j)], mx, sum, false);
            qk[static_cast<size_t>(((bb * hq + h) * qs + i) * total + j)] =
                l.qk_mode <= 1   ? math::SdpaSoftcap(l, raw[static_cast<size_t>(j)])
                : l.qk_mode == 2 ? sc[static_cast<size_t>(j)]
                                 : p;
            for (int64_t d = 0; d < hd; ++d) {
              y[static_cast<size_t>(((bb * hq + h) * qs + i) * hd + d)] += p * val(j, d);
            }
          }
        }
      }
    }
    RequireClose(y, Floats(want[0]), 2e-5f);
    // -inf where masked compares equal; RequireClose needs finite values.
    const std::vector<float> want_qk = Floats(want[3]);
    REQUIRE(want_qk.size() == qk.size());
    for (size_t i = 0; i < qk.size(); ++i) {
      INFO("qk " << i << ": " << qk[i] << " vs " << want_qk[i]);
      if (std::isinf(want_qk[i])) {
        CHECK(qk[i] == want_qk[i]);
      } else {
        CHECK(std::abs(qk[i] - want_qk[i]) <= 2e-5f * (1.0f + std::abs(want_qk[i])));
      }
    }
  }
}

TEST_CASE("RotaryEmbedding element math equals the CPU kernels", "[runtime][device-math]") {
  struct Case {
    std::string domain;
    bool four_d, interleaved;
    int pos_mode;  // 0 none, 1 [batch, seq], 2 onnxruntime's [1] offset
    int64_t rd;    // rotary_embedding_dim (0: the head)
  };
  const std::vector<Case> cases = {{"", false, false, 1, 0},
                                   {"", true, true, 0, 4},
                                   {"", false, true, 1, 6},
                                   {"com.microsoft", false, false, 2, 0},
                                   {"com.microsoft", true, true, 1, 0}};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    INFO("case " << ci);
    math::RotaryLayout l;
    l.batch = 2;
    l.heads = 3;
    l.seq = 4;
    l.hd = 8;
    l.four_d = c.four_d;
    l.interleaved = c.interleaved;
    l.pos_mode = c.pos_mode;
    const int64_t rd = c.rd == 0 ? l.hd : c.rd;
    l.half = rd / 2;
    l.cache_rows = c.pos_mode == 0 ? l.batch * l.seq : 12;
    const Tensor x = c.four_d ? Random({l.batch, l.heads, l.seq, l.hd}, 90)
                              : Random({l.batch, l.seq, l.heads * l.hd}, 90);
    const std::vector<int64_t> cache_shape = c.pos_mode == 0
                                                 ? std::vector<int64_t>{l.batch, l.seq, l.half}
                                                 : std::vector<int64_t>{l.cache_rows, l.half};
    const Tensor cos = Random(cache_shape, 91), sin = Random(cache_shape, 92);
    std::vector<int64_t> ids;
    if (c.pos_mode == 1) {
      for (int64_t i = 0; i < l.batch * l.seq; ++i) ids.push_back((i * 5) % 12);
    } else if (c.pos_mode == 2) {
      ids = {3};
    }
    const Tensor pos = c.pos_mode == 1
                           ? testing::I64({l.batch, l.seq}, ids)
                           : testing::I64({1}, ids.empty() ? std::vector<int64_t>{0} : ids);
    OneOp o(23);
    o.Input("x", x);
    ir::Attributes attrs = {{"interleaved", int64_t{c.interleaved ? 1 : 0}}};
    if (c.rd != 0) attrs["rotary_embedding_dim"] = c.rd;
    if (!c.four_d) attrs["num_heads"] = l.heads;
    if (c.domain.empty()) {
      o.Input("cos", cos);
      o.Input("sin", sin);
      if (c.pos_mode == 1) o.Input("pos", pos);
    } else {
      o.Input("pos", pos);
      o.Input("cos", cos);
      o.Input("sin", sin);
      o.output_type = ir::TensorType(ir::DType::kF32, {});
    }
    auto want = o.TryRun("RotaryEmbedding", attrs, 1, c.domain);
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    std::vector<float> got(static_cast<size_t>(x.num_elements()));
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      REQUIRE(math::RotaryEmbeddingElement<FloatKind::kF32>(l, x.data<float>(), pos.data<int64_t>(),
                                                            cos.data<float>(), sin.data<float>(),
                                                            got.data(), i));
    }
    RequireClose(got, Floats((*want)[0]), 1e-6f);
  }
}

TEST_CASE(
    "onnxruntime's MultiHeadAttention masking, composed as the CUDA kernel does, equals "
    "the CPU kernel",
    "[runtime][device-math]") {
  // query [B, qs, H·hd], key/value [B, kv, H·hd] with a projection bias, a past of 2, the
  // padding mask [B, total], an attention bias [1, H, qs, total], unidirectional.
  const int64_t b = 2, heads = 2, qs = 3, kv = 3, hd = 4, past = 2, total = past + kv;
  const Tensor query = Random({b, qs, heads * hd}, 100), key = Random({b, kv, heads * hd}, 101),
               value = Random({b, kv, heads * hd}, 102), bias = Random({3 * heads * hd}, 103),
               pk = Random({b, heads, past, hd}, 104), pv = Random({b, heads, past, hd}, 105),
               attn_bias = Random({1, heads, qs, total}, 106);
  Tensor pad = Tensor::Allocate(ir::DType::kI32, {b, total});
  const int32_t pad_values[10] = {1, 1, 0, 1, 1, 1, 1, 1, 1, 0};
  std::copy(pad_values, pad_values + 10, pad.data<int32_t>());
  for (bool causal : {false, true}) {
    INFO("unidirectional " << causal);
    OneOp o;
    o.Input("q", query);
    o.Input("k", key);
    o.Input("v", value);
    o.Input("bias", bias);
    o.Input("pad", pad);
    o.Input("ab", attn_bias);
    o.Input("pk", pk);
    o.Input("pv", pv);
    o.output_type = ir::TensorType(ir::DType::kF32, {});
    auto want = o.TryRun("MultiHeadAttention",
                         {{"num_heads", heads}, {"unidirectional", int64_t{causal ? 1 : 0}}}, 3,
                         "com.microsoft");
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    math::SdpaLayout l;
    l.batch = b;
    l.hq = heads;
    l.qs = qs;
    l.total = total;
    l.past = past;
    l.causal = causal;
    l.ort = true;
    l.pad_mode = 1;
    l.mask = 2;
    l.mask_cols = total;
    const StridedView bv = math::BroadcastView({1, heads, qs, total}, {b, heads, qs, total});
    for (int d = 0; d < 4; ++d) l.mask_strides[d] = bv.strides[d];
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> y(static_cast<size_t>(b * qs * heads * hd));
    for (int64_t bb = 0; bb < b; ++bb) {
      for (int64_t h = 0; h < heads; ++h) {
        auto qv = [&](int64_t i, int64_t d) {
          return query.data<float>()[(bb * qs + i) * heads * hd + h * hd + d] +
                 bias.data<float>()[h * hd + d];
        };
        auto kvv = [&](const Tensor& past_t, const Tensor& new_t, int64_t off, int64_t j,
                       int64_t d) {
          return j < past ? past_t.data<float>()[((bb * heads + h) * past + j) * hd + d]
                          : new_t.data<float>()[(bb * kv + j - past) * heads * hd + h * hd + d] +
                                bias.data<float>()[off + h * hd + d];
        };
        for (int64_t i = 0; i < qs; ++i) {
          std::vector<float> sc(static_cast<size_t>(total));
          float mx = -INFINITY;
          for (int64_t j = 0; j < total; ++j) {
            float dot = 0;
            for (int64_t d = 0; d < hd; ++d) dot += qv(i, d) * kvv(pk, key, heads * hd, j, d);
            sc[static_cast<size_t>(j)] =
                scale * dot + math::SdpaBias<FloatKind::kF32>(l, attn_bias.raw(),
                                                              pad.data<int32_t>(), bb, h, i, j);
            mx = std::max(mx, sc[static_cast<size_t>(j)]);
          }
          float sum = 0;
          for (float x : sc) sum += math::SoftmaxTerm(x, mx);
          for (int64_t j = 0; j < total; ++j) {
            const float p = math::SoftmaxElement(sc[static_cast<size_t>(j)], mx, sum, false);
            for (int64_t d = 0; d < hd; ++d) {
              y[static_cast<size_t>((bb * qs + i) * heads * hd + h * hd + d)] +=
                  p * kvv(pv, value, 2 * heads * hd, j, d);
            }
          }
        }
      }
    }
    RequireClose(y, Floats((*want)[0]), 2e-5f);
  }
}

// The GEMM batches of the CUDA attention core (math/attention_batches.h), run on the
// host as cuBLAS would run them (fold·s query rows per GEMM entry, operands at their
// strides or at the offsets of entry e·fold), equal S = Q·Kᵀ, Y = S·V computed batch entry
// by batch entry with each operand's own broadcast index. The softmax between is per row
// and the rows keep their order, so the products alone check the indexing.
TEST_CASE("The attention core's GEMM batches, GQA's query rows stacked, equal each entry's",
          "[runtime][device-math]") {
  struct BatchCase {
    std::vector<int64_t> batch, bq, bk, bv;
    int64_t fold;
    bool strided;
  };
  const std::vector<BatchCase> cases = {
      {{2, 3}, {2, 3}, {2, 3}, {2, 3}, 1, true},               // every operand full
      {{2, 2, 3}, {2, 2, 3}, {2, 2, 1}, {2, 2, 1}, 3, true},   // GQA: 2 K heads, groups of 3
      {{2, 4}, {2, 4}, {2, 1}, {2, 1}, 4, true},               // MQA
      {{2, 4}, {2, 4}, {}, {1}, 8, true},                      // one K and V for all
      {{2, 3}, {2, 3}, {1, 3}, {2, 3}, 1, false},              // K over the batch only
      {{2, 3}, {1, 3}, {2, 3}, {2, 3}, 1, false},              // Q broadcast
      {{2, 3, 4}, {2, 3, 4}, {2, 1, 1}, {2, 3, 1}, 4, false},  // folded, K broadcast too
      {{3, 2}, {3, 2}, {1, 2}, {1, 2}, 1, false},  // K and V per head, shared by the batch
  };
  const int64_t s = 3, t = 5, d = 4, dv = 2;
  for (size_t c = 0; c < cases.size(); ++c) {
    const BatchCase& bc = cases[c];
    INFO("case " << c);
    const math::AttentionBatches plan =
        math::PlanAttentionBatches(bc.batch, bc.bq, bc.bk, bc.bv, s, t, d, dv);
    CHECK(plan.fold == bc.fold);
    CHECK((plan.q && plan.k && plan.v) == bc.strided);
    const auto with = [](std::vector<int64_t> b, std::initializer_list<int64_t> m) {
      b.insert(b.end(), m);
      return b;
    };
    const Tensor q = Random(with(bc.bq, {s, d}), 1), k = Random(with(bc.bk, {t, d}), 2),
                 v = Random(with(bc.bv, {t, dv}), 3);
    int64_t count = 1;
    for (int64_t x : bc.batch) count *= x;
    // The element offset of an operand's matrix for batch entry i (right-aligned broadcast).
    const auto offset = [&](const std::vector<int64_t>& own, int64_t i, int64_t matrix) {
      int64_t off = 0, stride = matrix;
      for (size_t a = bc.batch.size(); a > 0; --a) {
        const int64_t idx = i % bc.batch[a - 1];
        i /= bc.batch[a - 1];
        const size_t lead = bc.batch.size() - own.size();
        if (a - 1 < lead) continue;
        const int64_t n = own[a - 1 - lead];
        if (n != 1) off += idx * stride;
        stride *= n;
      }
      return off;
    };
    std::vector<float> want(static_cast<size_t>(count * s * dv)), got(want.size(), -1.0f);
    // Y rows [r0, r0 + rows) from Q at qo, K at ko, V at vo (Q's rows consecutive).
    const auto product = [&](int64_t qo, int64_t ko, int64_t vo, int64_t rows, float* y) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c2 = 0; c2 < dv; ++c2) {
          float acc = 0;
          for (int64_t j = 0; j < t; ++j) {
            float sc = 0;
            for (int64_t x = 0; x < d; ++x) {
              sc += q.data<float>()[qo + r * d + x] * k.data<float>()[ko + j * d + x];
            }
            acc += sc * v.data<float>()[vo + j * dv + c2];
          }
          y[r * dv + c2] = acc;
        }
      }
    };
    for (int64_t i = 0; i < count; ++i) {
      product(offset(bc.bq, i, s * d), offset(bc.bk, i, t * d), offset(bc.bv, i, t * dv), s,
              want.data() + i * s * dv);
    }
    const int64_t entries = count / plan.fold;
    REQUIRE(entries * plan.fold == count);
    const bool strided = plan.q && plan.k && plan.v;
    for (int64_t e = 0; e < entries; ++e) {
      const int64_t first = e * plan.fold;
      product(strided ? e * *plan.q : offset(bc.bq, first, s * d),
              strided ? e * *plan.k : offset(bc.bk, first, t * d),
              strided ? e * *plan.v : offset(bc.bv, first, t * dv), plan.fold * s,
              got.data() + first * s * dv);
    }
    CHECK(got == want);
  }
}

}  // namespace
}  // namespace tpc::runtime
