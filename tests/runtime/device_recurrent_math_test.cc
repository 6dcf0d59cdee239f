// RNN, GRU and LSTM as recurrent_ops.cc runs them on the GPU, emulated on the host in f32:
// X·Wᵀ for every step, then per step H·Rᵀ, GRU's r ⊙ H and its product with Rh, and each
// hidden unit's step in place (math::CellStep, as recurrent.cu's threads do it), Y at the
// step's row; the outputs read back through recurrent_ops.cc's layout strides. Against the
// CPU kernels: LSTM reverse with peepholes, initial states and sequence lengths; LSTM with
// clip and input_forget; GRU bidirectional with linear_before_reset 0 and 1, and in layout
// 1 with initial states and sequence lengths; RNN in layout 1.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/recurrent.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime {
namespace {

using math::CellKind;
using testing::Floats;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;

struct RecurrentCase {
  std::string op;
  CellKind cell;
  int64_t seq, batch, input, hidden, dirs;
  bool layout1 = false, reverse = false, lbr = false, peepholes = false, initial = false;
  std::vector<int32_t> lens;  // empty: all seq
  float clip = 0;             // 0: none
  bool input_forget = false;
};

// C [m, n] = A [m, k] · B[n, k]ᵀ, as cuBLAS with transposed B.
void GemmNT(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += a[i * k + q] * b[j * k + q];
      c[i * n + j] = acc;
    }
  }
}

// The device's Y, Y_h (and Y_c) from X, W, R, B, P, initial states (layout 0 inputs only
// but X, which follows the case's layout).
std::vector<std::vector<float>> DeviceRun(const RecurrentCase& c, const Tensor& x, const Tensor& w,
                                          const Tensor& r, const Tensor& b, const Tensor& p,
                                          const Tensor& h0, const Tensor& c0) {
  math::CellParams cp;
  cp.cell = c.cell;
  cp.hidden = c.hidden;
  cp.f.kind = c.cell == CellKind::kRnn ? math::RecurrentAct::kTanh : math::RecurrentAct::kSigmoid;
  cp.g.kind = math::RecurrentAct::kTanh;
  cp.h.kind = math::RecurrentAct::kTanh;
  cp.linear_before_reset = c.lbr;
  cp.has_clip = c.clip > 0;
  cp.clip = c.clip;
  cp.input_forget = c.input_forget;
  const int64_t hs = c.hidden, gh = cp.gates() * hs, rows = c.seq * c.batch;
  std::vector<float> x0(static_cast<size_t>(rows * c.input));
  for (int64_t t = 0; t < c.seq; ++t) {
    for (int64_t bi = 0; bi < c.batch; ++bi) {
      for (int64_t q = 0; q < c.input; ++q) {
        const int64_t from =
            c.layout1 ? (bi * c.seq + t) * c.input + q : (t * c.batch + bi) * c.input + q;
        x0[static_cast<size_t>((t * c.batch + bi) * c.input + q)] = x.data<float>()[from];
      }
    }
  }
  // Initial states in layout 0 [dirs, batch, hidden] (layout 1 gives [batch, dirs, hidden]).
  const auto state = [&](const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(c.dirs * c.batch * hs), 0.0f);
    if (!c.initial) return out;
    for (int64_t d = 0; d < c.dirs; ++d) {
      for (int64_t bi = 0; bi < c.batch; ++bi) {
        for (int64_t k = 0; k < hs; ++k) {
          const int64_t from = c.layout1 ? (bi * c.dirs + d) * hs + k : (d * c.batch + bi) * hs + k;
          out[static_cast<size_t>((d * c.batch + bi) * hs + k)] = t.data<float>()[from];
        }
      }
    }
    return out;
  };
  std::vector<float> h_all = state(h0), c_all = state(c0);
  std::vector<float> y0(static_cast<size_t>(c.seq * c.dirs * c.batch * hs), 0.0f);
  std::vector<float> xw(static_cast<size_t>(rows * gh)), hr(static_cast<size_t>(c.batch * gh));
  std::vector<float> reset(static_cast<size_t>(c.batch * hs)), rh(reset.size());
  for (int64_t d = 0; d < c.dirs; ++d) {
    GemmNT(x0.data(), w.data<float>() + d * gh * c.input, xw.data(), rows, gh, c.input);
    const float* wb = b.data<float>() + d * 2 * gh;
    const float* rb = wb + gh;
    const float* rd = r.data<float>() + d * gh * hs;
    const float* peep = c.peepholes ? p.data<float>() + d * 3 * hs : nullptr;
    float* h = h_all.data() + d * c.batch * hs;
    float* cs = c_all.data() + d * c.batch * hs;
    const bool reverse = c.reverse || d == 1;
    for (int64_t s = 0; s < c.seq; ++s) {
      GemmNT(h, rd, hr.data(), c.batch, gh, hs);
      const auto step_of = [&](int64_t bi) -> int64_t {
        const int64_t len = c.lens.empty() ? c.seq : c.lens[static_cast<size_t>(bi)];
        if (s >= len) return -1;
        return reverse ? len - 1 - s : s;
      };
      const bool gru_reset = c.cell == CellKind::kGru && !c.lbr;
      if (gru_reset) {
        for (int64_t i = 0; i < c.batch * hs; ++i) {  // GruResetKernel
          const int64_t bi = i / hs, k = i % hs, t = step_of(bi);
          reset[static_cast<size_t>(i)] =
              t < 0 ? 0.0f
                    : math::GruReset(cp, xw.data() + (t * c.batch + bi) * gh, hr.data() + bi * gh,
                                     wb, rb, k) *
                          h[i];
        }
        GemmNT(reset.data(), rd + 2 * hs * hs, rh.data(), c.batch, hs, hs);
      }
      for (int64_t i = 0; i < c.batch * hs; ++i) {  // RecurrentStepKernel
        const int64_t bi = i / hs, k = i % hs, t = step_of(bi);
        if (t < 0) continue;
        const float hn =
            math::CellStep(cp, xw.data() + (t * c.batch + bi) * gh, hr.data() + bi * gh, wb, rb,
                           h[i], gru_reset ? rh[static_cast<size_t>(i)] : 0.0f,
                           c.cell == CellKind::kLstm ? cs + i : nullptr, peep, k);
        h[i] = hn;
        y0[static_cast<size_t>(((t * c.dirs + d) * c.batch + bi) * hs + k)] = hn;
      }
    }
  }
  // Y through recurrent_ops.cc's output strides.
  const std::vector<int64_t> y_shape = c.layout1 ? std::vector<int64_t>{c.batch, c.seq, c.dirs, hs}
                                                 : std::vector<int64_t>{c.seq, c.dirs, c.batch, hs};
  const std::vector<int64_t> y_strides =
      c.layout1 ? std::vector<int64_t>{hs, c.dirs * c.batch * hs, c.batch * hs, 1}
                : math::ContiguousStrides(y_shape);
  const math::StridedView v = math::ViewOf(y_shape, y_strides);
  std::vector<float> y(y0.size());
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) {
    y[static_cast<size_t>(i)] = y0[static_cast<size_t>(v.At(i))];
  }
  // Y_h and Y_c through the state strides ([batch, dirs, hidden] in layout 1).
  const std::vector<int64_t> s_shape = c.layout1 ? std::vector<int64_t>{c.batch, c.dirs, hs}
                                                 : std::vector<int64_t>{c.dirs, c.batch, hs};
  const std::vector<int64_t> s_strides =
      c.layout1 ? std::vector<int64_t>{hs, c.batch * hs, 1} : math::ContiguousStrides(s_shape);
  const math::StridedView vs = math::ViewOf(s_shape, s_strides);
  std::vector<float> yh(h_all.size()), yc(c_all.size());
  for (int64_t i = 0; i < static_cast<int64_t>(yh.size()); ++i) {
    yh[static_cast<size_t>(i)] = h_all[static_cast<size_t>(vs.At(i))];
    yc[static_cast<size_t>(i)] = c_all[static_cast<size_t>(vs.At(i))];
  }
  return {y, yh, yc};
}

TEST_CASE("Recurrent steps as the CUDA kernels run them equal the CPU kernels",
          "[runtime][device-math]") {
  const std::vector<RecurrentCase> cases = {
      {"LSTM", CellKind::kLstm, 5, 3, 4, 6, 1, false, true, false, true, true, {5, 2, 0}},
      {"GRU", CellKind::kGru, 4, 2, 3, 5, 2, false, false, false, false, true, {}},
      {"GRU", CellKind::kGru, 4, 2, 3, 5, 2, false, false, true, false, false, {3, 4}},
      {"RNN", CellKind::kRnn, 6, 3, 2, 4, 1, true, false, false, false, false, {}},
      {"GRU", CellKind::kGru, 3, 4, 2, 3, 2, true, false, false, false, true, {2, 3, 1, 0}},
      {"LSTM", CellKind::kLstm, 4, 2, 3, 4, 1, false, false, false, false, true, {}, 0.6f, true},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const RecurrentCase& c = cases[ci];
    INFO("case " << ci << ": " << c.op);
    const int64_t gates = c.cell == CellKind::kRnn ? 1 : c.cell == CellKind::kGru ? 3 : 4;
    const int64_t gh = gates * c.hidden;
    const auto u = static_cast<uint32_t>(ci * 10);
    const Tensor x = Random(c.layout1 ? std::vector<int64_t>{c.batch, c.seq, c.input}
                                      : std::vector<int64_t>{c.seq, c.batch, c.input},
                            300 + u);
    const Tensor w = Random({c.dirs, gh, c.input}, 301 + u);
    const Tensor r = Random({c.dirs, gh, c.hidden}, 302 + u);
    const Tensor b = Random({c.dirs, 2 * gh}, 303 + u);
    const std::vector<int64_t> state_shape = c.layout1
                                                 ? std::vector<int64_t>{c.batch, c.dirs, c.hidden}
                                                 : std::vector<int64_t>{c.dirs, c.batch, c.hidden};
    const Tensor h0 = Random(state_shape, 304 + u);
    const Tensor c0 = Random(state_shape, 305 + u);
    const Tensor p = Random({c.dirs, 3 * c.hidden}, 306 + u);
    OneOp o(14);
    o.Input("x", x);
    o.Input("w", w);
    o.Input("r", r);
    o.Input("b", b);
    if (!c.lens.empty()) {
      Tensor lens = Tensor::Allocate(ir::DType::kI32, {c.batch});
      for (size_t i = 0; i < c.lens.size(); ++i) lens.data<int32_t>()[i] = c.lens[i];
      o.Input("lens", lens);
    } else {
      o.None();
    }
    if (c.initial) {
      o.Input("h0", h0);
      if (c.cell == CellKind::kLstm) o.Input("c0", c0);
    } else {
      o.None();
      if (c.cell == CellKind::kLstm) o.None();
    }
    if (c.peepholes) o.Input("p", p);
    ir::Attributes attrs = {{"hidden_size", c.hidden}};
    if (c.dirs == 2) attrs["direction"] = std::string("bidirectional");
    if (c.reverse) attrs["direction"] = std::string("reverse");
    if (c.layout1) attrs["layout"] = int64_t{1};
    if (c.cell == CellKind::kGru) attrs["linear_before_reset"] = int64_t{c.lbr ? 1 : 0};
    if (c.clip > 0) attrs["clip"] = c.clip;
    if (c.input_forget) attrs["input_forget"] = int64_t{1};
    const int outputs = c.cell == CellKind::kLstm ? 3 : 2;
    const std::vector<Tensor> want = o.Run(c.op, attrs, outputs);
    const auto got = DeviceRun(c, x, w, r, b, p, h0, c0);
    RequireClose(got[0], Floats(want[0]), 2e-5f);
    RequireClose(got[1], Floats(want[1]), 2e-5f);
    if (c.cell == CellKind::kLstm) RequireClose(got[2], Floats(want[2]), 2e-5f);
  }
}

}  // namespace
}  // namespace tpc::runtime
