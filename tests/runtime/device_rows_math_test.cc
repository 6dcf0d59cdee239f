// The row kernels' math (tpc/runtime/math/rows.h: softmax and norm statistics, channel
// norms, reductions and their passes, ArgMax/ArgMin, the reduction across ranks), folded
// as a thread block folds it, against the CPU backend's kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/pointwise.h"
#include "tpc/runtime/math/rows.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime {
namespace {

using math::FloatKind;
using testing::BlockFold;
using testing::F32;
using testing::Floats;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;

TEST_CASE("Softmax and norm row math, folded as a thread block does, equals the CPU kernels",
          "[runtime][device-math]") {
  const Tensor x = Random({3, 300}, 5);
  const int threads = 256;
  for (bool log : {false, true}) {
    OneOp o;
    o.Input("x", x);
    const std::vector<float> want = Floats(o.Run(log ? "LogSoftmax" : "Softmax")[0]);
    std::vector<float> got(want.size());
    const math::RowLayout rl{3, 300, 1};
    for (int64_t r = 0; r < rl.rows(); ++r) {
      const float* row = x.data<float>() + rl.Start(r);
      const float mx = BlockFold(
          300, threads, -INFINITY, [&](float m, int64_t j) { return math::CombineMax(m, row[j]); },
          [](float a, float b) { return math::CombineMax(a, b); });
      const float sum = BlockFold(
          300, threads, 0.0f, [&](float s, int64_t j) { return s + math::SoftmaxTerm(row[j], mx); },
          [](float a, float b) { return a + b; });
      for (int64_t j = 0; j < 300; ++j)
        got[static_cast<size_t>(r * 300 + j)] = math::SoftmaxElement(row[j], mx, sum, log);
    }
    RequireClose(got, want, 1e-5f);
  }
  const Tensor scale = Random({300}, 6), bias = Random({300}, 7);
  OneOp o;
  o.Input("x", x);
  o.Input("s", scale);
  o.Input("b", bias);
  const std::vector<float> want = Floats(o.Run("LayerNormalization", {{"epsilon", 1e-5f}})[0]);
  std::vector<float> got(want.size());
  for (int64_t r = 0; r < 3; ++r) {
    const float* row = x.data<float>() + r * 300;
    const math::Moments m = BlockFold(
        300, threads, math::Moments{},
        [&](math::Moments acc, int64_t j) {
          acc.Add(row[j]);
          return acc;
        },
        [](const math::Moments& a, const math::Moments& b) {
          return math::Moments::Combine(a, b);
        });
    const float inv = math::InvStd(m.Variance(), 1e-5f);
    for (int64_t j = 0; j < 300; ++j) {
      got[static_cast<size_t>(r * 300 + j)] =
          math::NormElement(row[j], m.mean, inv, scale.data<float>()[j], bias.data<float>()[j]);
    }
  }
  RequireClose(got, want, 1e-5f);
}

// GroupNormalization (scale per group at opset 18, per channel at 21) and
// InstanceNormalization as channel_norms.cu computes them (a block's moments of each
// math::ChannelGroups row, each element's scale and bias at Affine), and
// BatchNormalization's element, against the CPU kernels.
TEST_CASE("Channel norm row math equals the CPU kernels", "[runtime][device-math]") {
  const int64_t n = 2, c = 6, plane = 12;
  const Tensor x = Random({n, c, 3, 4}, 31);
  const auto rows = [&](const math::ChannelGroups& g, const Tensor& scale, const Tensor& bias) {
    std::vector<float> y(static_cast<size_t>(x.num_elements()));
    const int64_t len = g.len();
    for (int64_t r = 0; r < x.num_elements() / len; ++r) {
      const float* xr = x.data<float>() + r * len;
      const math::Moments m = BlockFold(
          len, 4, math::Moments{},
          [&](math::Moments acc, int64_t j) {
            acc.Add(xr[j]);
            return acc;
          },
          [](const math::Moments& a, const math::Moments& b) {
            return math::Moments::Combine(a, b);
          });
      const float inv = math::InvStd(m.Variance(), 1e-3f);
      for (int64_t j = 0; j < len; ++j) {
        const int64_t at = g.Affine(r, j);
        y[static_cast<size_t>(r * len + j)] =
            math::NormElement(xr[j], m.mean, inv, scale.data<float>()[at], bias.data<float>()[at]);
      }
    }
    return y;
  };
  for (const int64_t opset : {18, 21}) {
    INFO("GroupNormalization, opset " << opset);
    const bool per_channel = opset >= 21;
    const Tensor scale = Random({per_channel ? c : 3}, 32),
                 bias = Random({per_channel ? c : 3}, 33);
    OneOp o(opset);
    o.Input("x", x);
    o.Input("scale", scale);
    o.Input("bias", bias);
    const std::vector<float> want =
        Floats(o.Run("GroupNormalization", {{"num_groups", int64_t{3}}, {"epsilon", 1e-3f}})[0]);
    RequireClose(rows(math::ChannelGroups{3, 2, plane, per_channel}, scale, bias), want, 2e-5f);
  }
  const Tensor scale = Random({c}, 34), bias = Random({c}, 35);
  {
    INFO("InstanceNormalization");
    OneOp o;
    o.Input("x", x);
    o.Input("scale", scale);
    o.Input("bias", bias);
    const std::vector<float> want = Floats(o.Run("InstanceNormalization", {{"epsilon", 1e-3f}})[0]);
    RequireClose(rows(math::ChannelGroups{c, 1, plane, true}, scale, bias), want, 2e-5f);
  }
  {
    INFO("BatchNormalization");
    Tensor var = Random({c}, 36);
    for (int64_t i = 0; i < c; ++i) var.data<float>()[i] = std::abs(var.data<float>()[i]);
    const Tensor mean = Random({c}, 37);
    OneOp o;
    o.Input("x", x);
    o.Input("scale", scale);
    o.Input("bias", bias);
    o.Input("mean", mean);
    o.Input("var", var);
    const std::vector<float> want = Floats(o.Run("BatchNormalization", {{"epsilon", 1e-3f}})[0]);
    std::vector<float> got(want.size());
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const int64_t ch = (i / plane) % c;
      got[static_cast<size_t>(i)] = math::BatchNormElement(
          x.data<float>()[i], scale.data<float>()[ch], bias.data<float>()[ch],
          mean.data<float>()[ch], var.data<float>()[ch], 1e-3f);
    }
    RequireClose(got, want, 2e-5f);
  }
}

// LRN as channel_norms.cu computes each element (its window of channels clipped at the
// edges; an odd and an even size), against the CPU kernel.
TEST_CASE("LRN element math equals the CPU kernel", "[runtime][device-math]") {
  const Tensor x = Random({2, 5, 3, 2}, 93);
  for (const int64_t size : {3, 4}) {
    INFO("size " << size);
    OneOp o;
    o.Input("x", x);
    const std::vector<float> want =
        Floats(o.Run("LRN", {{"size", size}, {"alpha", 0.3f}, {"beta", 0.6f}, {"bias", 1.5f}})[0]);
    std::vector<float> got(want.size());
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      got[static_cast<size_t>(i)] = math::LrnElement(5, 6, size, 0.3f, 0.6f, 1.5f, i,
                                                     [&](int64_t j) { return x.data<float>()[j]; });
    }
    RequireClose(got, want, 2e-6f);
  }
}

// MeanVarianceNormalization as row_ops.cc computes it: each group's mean in f32, then the
// sum of squared deviations (both here folded in order), then math::MvnElement per element
// with the statistics broadcast over x; default axes and other axes, data near zero and
// data far from it (where E[x²] − mean² in f32 would cancel), against the CPU kernel.
TEST_CASE("MeanVarianceNormalization element math equals the CPU kernel",
          "[runtime][device-math]") {
  for (const float offset : {1.5f, 10000.0f}) {
    Tensor x = Random({2, 3, 4, 5}, 95);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] += offset;
    for (const std::vector<int64_t>& axes :
         {std::vector<int64_t>{0, 2, 3}, std::vector<int64_t>{1}, std::vector<int64_t>{-1, 1}}) {
      INFO("offset " << offset << ", axes of size " << axes.size() << " starting " << axes[0]);
      OneOp o;
      o.Input("x", x);
      const std::vector<float> want =
          Floats(o.Run("MeanVarianceNormalization", {{"axes", axes}})[0]);
      std::vector<int64_t> kept = x.shape();
      for (int64_t a : axes) kept[static_cast<size_t>(a < 0 ? a + 4 : a)] = 1;
      const math::StridedView v = math::BroadcastView(kept, x.shape());
      int64_t groups = 1;
      for (int64_t d : kept) groups *= d;
      std::vector<float> sum(static_cast<size_t>(groups)), squares(sum.size()), mean(sum.size());
      const float count = static_cast<float>(x.num_elements() / groups);
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        sum[static_cast<size_t>(v.At(i))] += x.data<float>()[i];
      }
      for (size_t g = 0; g < sum.size(); ++g) mean[g] = sum[g] / count;
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        const auto g = static_cast<size_t>(v.At(i));
        const float d = x.data<float>()[i] - mean[g];
        squares[g] += d * d;
      }
      std::vector<float> got(want.size());
      for (int64_t i = 0; i < x.num_elements(); ++i) {
        const auto g = static_cast<size_t>(v.At(i));
        got[static_cast<size_t>(i)] =
            math::MvnElement(x.data<float>()[i], mean[g], squares[g], count);
      }
      RequireClose(got, want, offset > 100.0f ? 2e-3f : 2e-5f);
    }
  }
}

TEST_CASE("Reduction row math equals the CPU kernels", "[runtime][device-math]") {
  Tensor x = Random({4, 5, 6}, 8);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] += 2.5f;  // log-sum > 0
  const std::vector<std::pair<std::string, math::ReduceKind>> ops = {
      {"ReduceSum", math::ReduceKind::kSum},      {"ReduceMean", math::ReduceKind::kMean},
      {"ReduceMax", math::ReduceKind::kMax},      {"ReduceMin", math::ReduceKind::kMin},
      {"ReduceProd", math::ReduceKind::kProd},    {"ReduceSumSquare", math::ReduceKind::kSumSquare},
      {"ReduceL1", math::ReduceKind::kL1},        {"ReduceL2", math::ReduceKind::kL2},
      {"ReduceLogSum", math::ReduceKind::kLogSum}};
  // The device's passes (row_ops.cc's ReduceImpl): one per run of adjacent reduced axes,
  // the last run first, each a row fold as a block does it, partial totals in f32; only the
  // first takes terms, only the last (or a mean's every pass) finishes.
  const auto device = [](const Tensor& in, std::vector<int64_t> axes, math::ReduceKind kind) {
    std::vector<int64_t> cur = in.shape();
    std::vector<float> src(in.data<float>(), in.data<float>() + in.num_elements());
    std::sort(axes.rbegin(), axes.rend());
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (int64_t a : axes) {
      if (!runs.empty() && runs.back().first == a + 1) {
        runs.back().first = a;
      } else {
        runs.push_back({a, a});
      }
    }
    for (size_t t = 0; t < runs.size(); ++t) {
      const auto [first, last] = runs[t];
      math::RowLayout rl;
      for (int64_t i = 0; i < static_cast<int64_t>(cur.size()); ++i) {
        (i < first ? rl.outer : (i <= last ? rl.len : rl.inner)) *= cur[static_cast<size_t>(i)];
      }
      for (int64_t i = first; i <= last; ++i) cur[static_cast<size_t>(i)] = 1;
      const math::ReducePass pass(kind, t == 0, t + 1 == runs.size());
      std::vector<float> dst(static_cast<size_t>(rl.rows()));
      for (int64_t r = 0; r < rl.rows(); ++r) {
        const float* p = src.data() + rl.Start(r);
        const float acc = BlockFold(
            rl.len, 4, math::ReduceInit(kind),
            [&](float a, int64_t j) {
              return math::ReduceCombine(kind, a, math::ReducePassTerm(pass, p[j * rl.stride()]));
            },
            [&](float a, float b) { return math::ReduceCombine(kind, a, b); });
        dst[static_cast<size_t>(r)] = math::ReducePassFinish(pass, acc, rl.len);
      }
      src = dst;
    }
    return src;
  };
  // ReduceLogSumExp as row_ops.cc composes it: m = the max (kept dims), 0 where not
  // finite; log(Σ exp(x − m)) + m. A large value (the CPU sums exp(x) in double), and a
  // line of −inf (log 0 = −inf on both).
  {
    Tensor big = Random({4, 5, 6}, 9);
    big.data<float>()[7] = 100.0f;
    for (int64_t j = 0; j < 5; ++j) big.data<float>()[j * 6 + 2] = -INFINITY;  // [0, ·, 2]
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, {0, 2}}) {
      INFO("ReduceLogSumExp over " << axes.size() << " axes");
      OneOp o;
      o.Input("x", big);
      o.Ints(axes);
      const std::vector<float> want =
          Floats(o.Run("ReduceLogSumExp", {{"keepdims", int64_t{0}}})[0]);
      std::vector<float> m = device(big, axes, math::ReduceKind::kMax);
      for (float& v : m) v = math::ApplyUnary(math::UnaryOp::kFiniteOrZero, v, {});
      // The kept-dims index of element i of x.
      const std::vector<int64_t> dims = big.shape();
      const auto kept_index = [&](int64_t i) {
        int64_t idx = 0, stride = 1;
        for (int64_t d = 2; d >= 0; --d) {
          const int64_t c = i % dims[static_cast<size_t>(d)];
          i /= dims[static_cast<size_t>(d)];
          if (std::find(axes.begin(), axes.end(), d) != axes.end()) continue;
          idx += c * stride;
          stride *= dims[static_cast<size_t>(d)];
        }
        return idx;
      };
      Tensor t = Random({4, 5, 6}, 9);
      for (int64_t i = 0; i < 120; ++i) {
        t.data<float>()[i] =
            math::ApplyUnary(math::UnaryOp::kExp,
                             math::ApplyBinary(math::BinaryOp::kSub, big.data<float>()[i],
                                               m[static_cast<size_t>(kept_index(i))]),
                             {});
      }
      std::vector<float> got = device(t, axes, math::ReduceKind::kLogSum);
      for (size_t r = 0; r < got.size(); ++r) got[r] += m[r];
      RequireClose(got, want, 2e-5f);
    }
  }
  for (const auto& [name, kind] : ops) {
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, {0, 2}, {1, 2}, {0, 1, 2}}) {
      INFO(name << " over " << axes.size() << " axes");
      OneOp o;
      o.Input("x", x);
      o.Ints(axes);
      const std::vector<float> want = Floats(o.Run(name, {{"keepdims", int64_t{0}}})[0]);
      RequireClose(device(x, axes, kind), want, 2e-5f);
    }
  }
}

// ArgMax/ArgMin as a block folds and combines (math::ArgChoose) equal the CPU's in-order
// scan: ties (first or last index), NaN at index 0 (kept) and elsewhere (never taken).
TEST_CASE("ArgMax and ArgMin row math equals the CPU kernels", "[runtime][device-math]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Random({6, 9}, 21);
  float* p = x.data<float>();
  for (int64_t j : {2, 5, 7}) p[9 + j] = 3.0f;            // row 1: a three-way tie
  for (int64_t j : {1, 4}) p[18 + j] = -3.0f;             // row 2: a tie of minima
  p[27] = nan;                                            // row 3: NaN first
  p[36 + 4] = nan;                                        // row 4: NaN inside
  for (int64_t j = 0; j < 9; ++j) p[45 + j] = -INFINITY;  // row 5: all -inf
  for (bool max : {true, false}) {
    for (int64_t last : {0, 1}) {
      INFO((max ? "ArgMax" : "ArgMin") << " select_last_index " << last);
      OneOp o;
      o.Input("x", x);
      const Tensor want =
          o.Run(max ? "ArgMax" : "ArgMin", {{"axis", int64_t{1}}, {"select_last_index", last}})[0];
      for (int threads : {1, 4, 256}) {
        for (int64_t r = 0; r < 6; ++r) {
          const math::ArgBest best = BlockFold(
              9, threads, math::ArgBest{0.0f, -1},
              [&](math::ArgBest a, int64_t j) {
                return math::ArgChoose(a, math::ArgBest{p[r * 9 + j], j}, max, last != 0);
              },
              [&](math::ArgBest a, math::ArgBest b) {
                return math::ArgChoose(a, b, max, last != 0);
              });
          CHECK(best.index == want.data<int64_t>()[r]);
        }
      }
    }
  }
}

// Hardmax as rows.cu computes it (ArgMax's winner, then the row written as one-hot), at
// opset 13 (one axis) and 11 (the input as 2-D at the axis), ties and NaN included.
TEST_CASE("Hardmax row math equals the CPU kernel", "[runtime][device-math]") {
  Tensor x = Random({3, 4, 5}, 92);
  float* p = x.data<float>();
  p[0] = std::numeric_limits<float>::quiet_NaN();  // first element of a line: it wins
  p[7] = p[17] = 9.0f;   // a tie along dim 1 (line (0, ·, 2)): the first wins
  p[23] = p[31] = 9.0f;  // and one in the 2-D row 1 of opset 11
  for (const auto& [opset, axis] : {std::pair{13, int64_t{1}}, std::pair{11, int64_t{1}}}) {
    INFO("opset " << opset);
    OneOp o(opset);
    o.Input("x", x);
    const std::vector<float> want = Floats(o.Run("Hardmax", {{"axis", axis}})[0]);
    // The lines: opset 13, [3, 4, 5] along dim 1; opset 11, [3, 20] rows.
    const math::RowLayout rl = opset >= 13 ? math::RowLayout{3, 4, 5} : math::RowLayout{3, 20, 1};
    std::vector<float> got(60, -1.0f);
    for (int64_t r = 0; r < rl.rows(); ++r) {
      const int64_t base = rl.Start(r);
      const math::ArgBest best = BlockFold(
          rl.len, 4, math::ArgBest{0.0f, -1},
          [&](math::ArgBest a, int64_t j) {
            return math::ArgChoose(a, math::ArgBest{p[base + j * rl.stride()], j}, true, false);
          },
          [](math::ArgBest a, math::ArgBest b) { return math::ArgChoose(a, b, true, false); });
      for (int64_t j = 0; j < rl.len; ++j) {
        got[static_cast<size_t>(base + j * rl.stride())] = j == best.index ? 1.0f : 0.0f;
      }
    }
    RequireClose(got, want, 0.0f);
  }
}

// TopK as rows.cu's blocks take it: k rounds, each the block's first-ranked entry among
// those after the previous round's (math::TopKBefore), against the CPU's stable sort:
// ties in index order, largest and smallest, along an inner and the last axis.
TEST_CASE("TopK rounds equal the CPU kernel", "[runtime][device-math]") {
  Tensor x = Random({3, 7, 4}, 91);
  float* p = x.data<float>();
  for (int64_t j : {1, 3, 5}) p[j * 4 + 2] = 1.5f;  // ties along axis 1
  for (int64_t j : {0, 2, 6}) p[28 + j * 4] = -1.5f;
  for (int64_t axis : {1, 2}) {
    for (int64_t largest : {0, 1}) {
      const int64_t k = axis == 1 ? 4 : 3;
      INFO("axis " << axis << " largest " << largest);
      OneOp o;
      o.Input("x", x);
      o.Input("k", testing::I64({1}, {k}));
      const std::vector<Tensor> want = o.Run("TopK", {{"axis", axis}, {"largest", largest}}, 2);
      math::RowLayout rl;
      for (int64_t i = 0; i < 3; ++i)
        (i < axis ? rl.outer : (i == axis ? rl.len : rl.inner)) *= x.dim(i);
      for (int threads : {1, 4, 256}) {
        std::vector<float> values(static_cast<size_t>(want[0].num_elements()));
        std::vector<int64_t> indices(values.size());
        for (int64_t row = 0; row < rl.rows(); ++row) {
          const int64_t base = rl.Start(row);
          const int64_t out0 = (row / rl.inner) * k * rl.inner + row % rl.inner;
          math::TopKEntry last{0.0f, -1};
          for (int64_t r = 0; r < k; ++r) {
            const math::TopKEntry best = BlockFold(
                rl.len, threads, math::TopKEntry{0.0f, -1},
                [&](math::TopKEntry b, int64_t j) {
                  const math::TopKEntry e{p[base + j * rl.stride()], j};
                  if (last.index >= 0 && !math::TopKBefore(last, e, largest != 0)) return b;
                  return math::TopKBefore(e, b, largest != 0) ? e : b;
                },
                [&](math::TopKEntry a, math::TopKEntry b) {
                  return math::TopKBefore(a, b, largest != 0) ? a : b;
                });
            REQUIRE(best.index >= 0);
            values[static_cast<size_t>(out0 + r * rl.inner)] = p[base + best.index * rl.stride()];
            indices[static_cast<size_t>(out0 + r * rl.inner)] = best.index;
            last = best;
          }
        }
        RequireClose(values, Floats(want[0]), 0.0f);
        CHECK(indices == std::vector<int64_t>(want[1].data<int64_t>(),
                                              want[1].data<int64_t>() + want[1].num_elements()));
      }
    }
  }
}

TEST_CASE("The reduction across ranks of a collective on one GPU combines in rank order",
          "[runtime][device-math]") {
  const int n = 3;
  std::vector<Tensor> ins;
  for (int k = 0; k < n; ++k) ins.push_back(Random({40}, 20 + static_cast<uint32_t>(k)));
  for (int op = 0; op < 4; ++op) {  // sum, max, min, avg
    std::vector<std::vector<float>> outs(2, std::vector<float>(40));
    math::RankPointers p;
    p.n = n;
    for (int k = 0; k < n; ++k) p.in[k] = ins[static_cast<size_t>(k)].data<float>();
    p.n_out = 2;
    p.out[0] = outs[0].data();
    p.out[1] = outs[1].data();
    for (int64_t i = 0; i < 40; ++i) {
      math::ReduceRanksElement<FloatKind::kF32>(op == 3 ? 0 : op, op == 3, p, i);
    }
    for (int64_t i = 0; i < 40; ++i) {
      float want = ins[0].data<float>()[i];
      for (int k = 1; k < n; ++k) {
        const float v = ins[static_cast<size_t>(k)].data<float>()[i];
        want = op == 1 ? std::max(want, v) : op == 2 ? std::min(want, v) : want + v;
      }
      if (op == 3) want /= n;
      REQUIRE(outs[0][static_cast<size_t>(i)] == want);
      REQUIRE(outs[1][static_cast<size_t>(i)] == want);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
