// CPU kernels of RNN, GRU and LSTM on what the ONNX node tests leave out: both
// directions, sequence_lens, initial states, GRU's linear_before_reset, LSTM's peepholes,
// layout 1 and other activations. Expected values come from the equations of the ONNX
// spec, written out below one batch entry and one element at a time.
#include <cmath>
#include <functional>
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::Floats;
using testing::OneOp;

using Fn = std::function<float(float)>;
float Sigmoid(float x) { return 1 / (1 + std::exp(-x)); }
float Tanh(float x) { return std::tanh(x); }

// Deterministic values in [-1, 1).
std::vector<float> Values(int n, int seed) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i)
    v.push_back(static_cast<float>((i * 37 + seed * 11) % 23) / 11.5f - 1);
  return v;
}

Tensor I32(std::vector<int64_t> shape, std::vector<int32_t> v) {
  Tensor t = Tensor::Allocate(ir::DType::kI32, std::move(shape));
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

// sum_k m[row, k] * v[k] of a row-major matrix with `cols` columns.
float Dot(const std::vector<float>& m, int row, int cols, const float* v, int offset = 0) {
  float s = 0;
  for (int k = 0; k < cols; ++k) s += m[static_cast<size_t>(offset + row * cols + k)] * v[k];
  return s;
}

// A cell's sizes and per-direction weights ([gates * H, I], [gates * H, H], [2 * gates * H]).
struct Net {
  int seq, batch, in, hidden, dirs;
  std::vector<float> x, w, r, b;
};

// One direction's steps for batch entry `bi` of `len` steps: `step(t, h)` returns the new
// state; Y gets each step's state at its time t. Returns the last state.
template <typename Step>
std::vector<float> RunDirection(const Net& n, int d, int bi, int len, bool reverse,
                                std::vector<float> h, std::vector<float>* y, Step step) {
  for (int s = 0; s < len; ++s) {
    const int t = reverse ? len - 1 - s : s;
    h = step(t, h);
    for (int k = 0; k < n.hidden; ++k) {
      (*y)[static_cast<size_t>(((t * n.dirs + d) * n.batch + bi) * n.hidden + k)] =
          h[static_cast<size_t>(k)];
    }
  }
  return h;
}

TEST_CASE("RNN: bidirectional with sequence_lens, initial_h and a Relu / Tanh pair",
          "[runtime][kernels]") {
  Net n{3, 2, 2, 2, 2, Values(12, 1), Values(8, 2), Values(8, 3), Values(8, 4)};
  const std::vector<float> h0 = Values(8, 5);
  const std::vector<int> lens = {3, 2};
  OneOp t(22);
  t.Input("x", F32({3, 2, 2}, n.x));
  t.Input("w", F32({2, 2, 2}, n.w));
  t.Input("r", F32({2, 2, 2}, n.r));
  t.Input("b", F32({2, 4}, n.b));
  t.Input("lens", I32({2}, {3, 2}));
  t.Input("h0", F32({2, 2, 2}, h0));
  auto got = t.Run("RNN",
                   {{"hidden_size", int64_t{2}},
                    {"direction", std::string("bidirectional")},
                    {"activations", std::vector<std::string>{"Relu", "Tanh"}}},
                   2);

  std::vector<float> y(3 * 2 * 2 * 2, 0.0f), yh(2 * 2 * 2);
  for (int d = 0; d < 2; ++d) {
    Fn f = d == 0 ? Fn([](float v) { return v > 0 ? v : 0; }) : Fn(Tanh);
    for (int bi = 0; bi < 2; ++bi) {
      std::vector<float> h(h0.begin() + (d * 2 + bi) * 2, h0.begin() + (d * 2 + bi + 1) * 2);
      h = RunDirection(n, d, bi, lens[static_cast<size_t>(bi)], d == 1, h, &y,
                       [&](int time, const std::vector<float>& hp) {
                         std::vector<float> hn(2);
                         const float* xt = n.x.data() + (time * 2 + bi) * 2;
                         for (int k = 0; k < 2; ++k) {
                           hn[static_cast<size_t>(k)] =
                               f(Dot(n.w, k, 2, xt, d * 4) + Dot(n.r, k, 2, hp.data(), d * 4) +
                                 n.b[static_cast<size_t>(d * 4 + k)] +
                                 n.b[static_cast<size_t>(d * 4 + 2 + k)]);
                         }
                         return hn;
                       });
      for (int k = 0; k < 2; ++k)
        yh[static_cast<size_t>((d * 2 + bi) * 2 + k)] = h[static_cast<size_t>(k)];
    }
  }
  REQUIRE(got[0].shape() == std::vector<int64_t>{3, 2, 2, 2});
  CHECK_THAT(Floats(got[0]), Catch::Matchers::Approx(y).margin(1e-5));
  CHECK_THAT(Floats(got[1]), Catch::Matchers::Approx(yh).margin(1e-5));
  // Batch entry 1 ends after 2 steps: its outputs at t = 2 are zero.
  CHECK(Floats(got[0])[static_cast<size_t>(((2 * 2 + 0) * 2 + 1) * 2)] == 0.0f);
}

// GRU, forward, one batch entry; the reference of both linear_before_reset forms.
std::vector<float> GruReference(const Net& n, bool linear_before_reset, std::vector<float>* yh) {
  const int hs = n.hidden;
  std::vector<float> y(static_cast<size_t>(n.seq * n.batch * hs), 0.0f);
  for (int bi = 0; bi < n.batch; ++bi) {
    std::vector<float> h(static_cast<size_t>(hs), 0.0f);
    h = RunDirection(n, 0, bi, n.seq, false, h, &y, [&](int time, const std::vector<float>& hp) {
      const float* xt = n.x.data() + (time * n.batch + bi) * n.in;
      std::vector<float> z(static_cast<size_t>(hs)), r(static_cast<size_t>(hs)),
          hn(static_cast<size_t>(hs));
      auto wb = [&](int g, int k) { return n.b[static_cast<size_t>(g * hs + k)]; };
      auto rb = [&](int g, int k) { return n.b[static_cast<size_t>((3 + g) * hs + k)]; };
      for (int k = 0; k < hs; ++k) {
        z[static_cast<size_t>(k)] =
            Sigmoid(Dot(n.w, k, n.in, xt) + Dot(n.r, k, hs, hp.data()) + wb(0, k) + rb(0, k));
        r[static_cast<size_t>(k)] = Sigmoid(Dot(n.w, hs + k, n.in, xt) +
                                            Dot(n.r, hs + k, hs, hp.data()) + wb(1, k) + rb(1, k));
      }
      std::vector<float> rh(static_cast<size_t>(hs));
      for (int k = 0; k < hs; ++k)
        rh[static_cast<size_t>(k)] = r[static_cast<size_t>(k)] * hp[static_cast<size_t>(k)];
      for (int k = 0; k < hs; ++k) {
        const float xw = Dot(n.w, 2 * hs + k, n.in, xt) + wb(2, k);
        const float gate = linear_before_reset
                               ? Tanh(xw + r[static_cast<size_t>(k)] *
                                               (Dot(n.r, 2 * hs + k, hs, hp.data()) + rb(2, k)))
                               : Tanh(xw + Dot(n.r, 2 * hs + k, hs, rh.data()) + rb(2, k));
        const float zk = z[static_cast<size_t>(k)];
        hn[static_cast<size_t>(k)] = (1 - zk) * gate + zk * hp[static_cast<size_t>(k)];
      }
      return hn;
    });
    yh->insert(yh->end(), h.begin(), h.end());
  }
  return y;
}

TEST_CASE("GRU: linear_before_reset 0 and 1", "[runtime][kernels]") {
  Net n{3, 2, 2, 3, 1, Values(12, 6), Values(18, 7), Values(27, 8), Values(18, 9)};
  for (int64_t lbr : {0, 1}) {
    OneOp t(22);
    t.Input("x", F32({3, 2, 2}, n.x));
    t.Input("w", F32({1, 9, 2}, n.w));
    t.Input("r", F32({1, 9, 3}, n.r));
    t.Input("b", F32({1, 18}, n.b));
    auto got = t.Run("GRU", {{"hidden_size", int64_t{3}}, {"linear_before_reset", lbr}}, 2);
    std::vector<float> yh;
    const std::vector<float> y = GruReference(n, lbr != 0, &yh);
    CHECK_THAT(Floats(got[0]), Catch::Matchers::Approx(y).margin(1e-5));
    CHECK_THAT(Floats(got[1]), Catch::Matchers::Approx(yh).margin(1e-5));
  }
}

TEST_CASE("LSTM: reverse with peepholes, sequence_lens, initial states and Y_c",
          "[runtime][kernels]") {
  Net n{3, 2, 2, 2, 1, Values(12, 10), Values(16, 11), Values(16, 12), Values(16, 13)};
  const std::vector<float> h0 = Values(4, 14), c0 = Values(4, 15), p = Values(6, 16);
  const std::vector<int> lens = {2, 3};
  OneOp t(22);
  t.Input("x", F32({3, 2, 2}, n.x));
  t.Input("w", F32({1, 8, 2}, n.w));
  t.Input("r", F32({1, 8, 2}, n.r));
  t.Input("b", F32({1, 16}, n.b));
  t.Input("lens", I32({2}, {2, 3}));
  t.Input("h0", F32({1, 2, 2}, h0));
  t.Input("c0", F32({1, 2, 2}, c0));
  t.Input("p", F32({1, 6}, p));
  auto got = t.Run("LSTM", {{"hidden_size", int64_t{2}}, {"direction", std::string("reverse")}}, 3);

  const int hs = 2;
  std::vector<float> y(3 * 2 * 2, 0.0f), yh, yc;
  for (int bi = 0; bi < 2; ++bi) {
    std::vector<float> c(c0.begin() + bi * hs, c0.begin() + (bi + 1) * hs);
    std::vector<float> h(h0.begin() + bi * hs, h0.begin() + (bi + 1) * hs);
    h = RunDirection(n, 0, bi, lens[static_cast<size_t>(bi)], true, h, &y,
                     [&](int time, const std::vector<float>& hp) {
                       const float* xt = n.x.data() + (time * 2 + bi) * 2;
                       // Gate g (i, o, f, c) before its activation.
                       auto pre = [&](int g, int k) {
                         return Dot(n.w, g * hs + k, 2, xt) + Dot(n.r, g * hs + k, hs, hp.data()) +
                                n.b[static_cast<size_t>(g * hs + k)] +
                                n.b[static_cast<size_t>((4 + g) * hs + k)];
                       };
                       std::vector<float> hn(static_cast<size_t>(hs));
                       for (int k = 0; k < hs; ++k) {
                         const auto uk = static_cast<size_t>(k);
                         const float i = Sigmoid(pre(0, k) + p[uk] * c[uk]);
                         const float f = Sigmoid(pre(2, k) + p[4 + uk] * c[uk]);
                         const float cc = Tanh(pre(3, k));
                         c[uk] = f * c[uk] + i * cc;
                         const float o = Sigmoid(pre(1, k) + p[2 + uk] * c[uk]);
                         hn[uk] = o * Tanh(c[uk]);
                       }
                       return hn;
                     });
    yh.insert(yh.end(), h.begin(), h.end());
    yc.insert(yc.end(), c.begin(), c.end());
  }
  CHECK_THAT(Floats(got[0]), Catch::Matchers::Approx(y).margin(1e-5));
  CHECK_THAT(Floats(got[1]), Catch::Matchers::Approx(yh).margin(1e-5));
  CHECK_THAT(Floats(got[2]), Catch::Matchers::Approx(yc).margin(1e-5));
}

TEST_CASE("RNN layout 1 is layout 0 with batch and sequence swapped", "[runtime][kernels]") {
  const std::vector<float> x0 = Values(12, 17), w = Values(8, 18), r = Values(8, 19);
  // x0 is [seq 3, batch 2, in 2]; x1 the same values as [batch 2, seq 3, in 2].
  std::vector<float> x1(12);
  for (int s = 0; s < 3; ++s) {
    for (int b = 0; b < 2; ++b) {
      for (int k = 0; k < 2; ++k)
        x1[static_cast<size_t>((b * 3 + s) * 2 + k)] = x0[static_cast<size_t>((s * 2 + b) * 2 + k)];
    }
  }
  auto run = [&](int64_t layout, const std::vector<float>& x, std::vector<int64_t> shape) {
    OneOp t(22);
    t.Input("x", F32(std::move(shape), x));
    t.Input("w", F32({2, 2, 2}, w));
    t.Input("r", F32({2, 2, 2}, r));
    return t.Run("RNN",
                 {{"hidden_size", int64_t{2}},
                  {"layout", layout},
                  {"direction", std::string("bidirectional")}},
                 2);
  };
  auto a = run(0, x0, {3, 2, 2});
  auto b = run(1, x1, {2, 3, 2});
  REQUIRE(b[0].shape() == std::vector<int64_t>{2, 3, 2, 2});
  REQUIRE(b[1].shape() == std::vector<int64_t>{2, 2, 2});
  const std::vector<float> ya = Floats(a[0]), yb = Floats(b[0]);
  const std::vector<float> ha = Floats(a[1]), hb = Floats(b[1]);
  for (int s = 0; s < 3; ++s) {
    for (int d = 0; d < 2; ++d) {
      for (int bi = 0; bi < 2; ++bi) {
        for (int k = 0; k < 2; ++k) {
          CHECK(yb[static_cast<size_t>(((bi * 3 + s) * 2 + d) * 2 + k)] ==
                ya[static_cast<size_t>(((s * 2 + d) * 2 + bi) * 2 + k)]);
        }
      }
    }
  }
  for (int d = 0; d < 2; ++d) {
    for (int bi = 0; bi < 2; ++bi) {
      for (int k = 0; k < 2; ++k) {
        CHECK(hb[static_cast<size_t>((bi * 2 + d) * 2 + k)] ==
              ha[static_cast<size_t>((d * 2 + bi) * 2 + k)]);
      }
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
