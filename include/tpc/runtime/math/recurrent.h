// The cell arithmetic of the recurrent operators RNN, GRU and LSTM, shared by the CPU
// kernel (cpu/recurrent.cc) and the CUDA one (cuda/recurrent.cu): the activation functions
// ONNX names, and one hidden unit's step given the step's input projection `pre` (X·Wᵀ, its
// row of the batch entry), the hidden projection `hr` (H·Rᵀ) and the biases.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class RecurrentAct : int {
  kSigmoid,
  kTanh,
  kRelu,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct Activation {
  RecurrentAct kind = RecurrentAct::kTanh;
  float alpha = 0, beta = 0;
};

// exp, tanh, log1p and |x| in the precision of T (float: the f-suffixed functions, as
// std::exp(float) calls them).
TPC_HOST_DEVICE inline float RExp(float x) { return expf(x); }
TPC_HOST_DEVICE inline double RExp(double x) { return exp(x); }
TPC_HOST_DEVICE inline float RTanh(float x) { return tanhf(x); }
TPC_HOST_DEVICE inline double RTanh(double x) { return tanh(x); }
TPC_HOST_DEVICE inline float RLog1p(float x) { return log1pf(x); }
TPC_HOST_DEVICE inline double RLog1p(double x) { return log1p(x); }
TPC_HOST_DEVICE inline float RAbs(float x) { return fabsf(x); }
TPC_HOST_DEVICE inline double RAbs(double x) { return fabs(x); }

template <typename T>
TPC_HOST_DEVICE inline T Activate(const Activation& f, T x) {
  const T a = static_cast<T>(f.alpha), b = static_cast<T>(f.beta);
  switch (f.kind) {
    case RecurrentAct::kSigmoid:
      return T(1) / (T(1) + RExp(-x));
    case RecurrentAct::kTanh:
      return RTanh(x);
    case RecurrentAct::kRelu:
      return x < T(0) ? T(0) : x;  // std::max(x, 0): NaN stays
    case RecurrentAct::kAffine:
      return a * x + b;
    case RecurrentAct::kLeakyRelu:
      return x >= 0 ? x : a * x;
    case RecurrentAct::kThresholdedRelu:
      return x > a ? x : T(0);
    case RecurrentAct::kScaledTanh:
      return a * RTanh(b * x);
    case RecurrentAct::kHardSigmoid: {
      const T v = a * x + b;
      return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
    }
    case RecurrentAct::kElu:
      return x >= 0 ? x : a * (RExp(x) - T(1));
    case RecurrentAct::kSoftsign:
      return x / (T(1) + RAbs(x));
    case RecurrentAct::kSoftplus:
      return RLog1p(RExp(x));
  }
  return x;
}

enum class CellKind : int { kRnn, kGru, kLstm };

// One direction's cell: its functions f, g (GRU, LSTM) and h (LSTM), clip, and the GRU and
// LSTM options.
struct CellParams {
  CellKind cell = CellKind::kRnn;
  int64_t hidden = 0;
  Activation f, g, h;
  bool has_clip = false, linear_before_reset = false, input_forget = false;
  float clip = 0;
  TPC_HOST_DEVICE int64_t gates() const {
    return cell == CellKind::kRnn ? 1 : cell == CellKind::kGru ? 3 : 4;
  }
  template <typename T>
  TPC_HOST_DEVICE T Clipped(T v) const {
    if (!has_clip) return v;
    const T c = static_cast<T>(clip);
    return v < -c ? -c : (v > c ? c : v);
  }
};

// A gate's pre-activation j of a step: the input projection plus the biases Wb[j] + Rb[j]
// (`wb`, `rb` null: none); GRU with linear_before_reset leaves Rbh out (it goes inside the
// reset).
template <typename T>
TPC_HOST_DEVICE inline T GatePre(const CellParams& p, const T* pre, const T* wb, const T* rb,
                                 int64_t j) {
  if (wb == nullptr) return pre[j];
  const bool rb_inside = p.cell == CellKind::kGru && p.linear_before_reset && j >= 2 * p.hidden;
  return pre[j] + (wb[j] + (rb_inside ? T(0) : rb[j]));
}

// GRU's reset gate r_k, which the hidden projection (r ⊙ H)·Rhᵀ needs for every k before
// the step without linear_before_reset.
template <typename T>
TPC_HOST_DEVICE inline T GruReset(const CellParams& p, const T* pre, const T* hr, const T* wb,
                                  const T* rb, int64_t k) {
  const int64_t hs = p.hidden;
  return Activate(p.f, p.Clipped(GatePre(p, pre, wb, rb, hs + k) + hr[hs + k]));
}

// Hidden unit k's step: its new hidden state from `pre` and `hr` (rows of gates · hidden),
// the old state h_k, and for GRU without linear_before_reset `rh_k` = ((r ⊙ H)·Rhᵀ)_k; for
// LSTM the cell state `c` (updated in place) and the peepholes `peep` (P = [Pi, Po, Pf], or
// null).
template <typename T>
TPC_HOST_DEVICE inline T CellStep(const CellParams& p, const T* pre, const T* hr, const T* wb,
                                  const T* rb, T h_k, T rh_k, T* c, const T* peep, int64_t k) {
  const int64_t hs = p.hidden;
  switch (p.cell) {
    case CellKind::kRnn:
      return Activate(p.f, p.Clipped(GatePre(p, pre, wb, rb, k) + hr[k]));
    case CellKind::kGru: {
      const T z = Activate(p.f, p.Clipped(GatePre(p, pre, wb, rb, k) + hr[k]));
      T hbar;
      if (p.linear_before_reset) {
        const T r = GruReset(p, pre, hr, wb, rb, k);
        const T lin = hr[2 * hs + k] + (rb != nullptr ? rb[2 * hs + k] : T(0));
        hbar = Activate(p.g, p.Clipped(GatePre(p, pre, wb, rb, 2 * hs + k) + r * lin));
      } else {
        hbar = Activate(p.g, p.Clipped(GatePre(p, pre, wb, rb, 2 * hs + k) + rh_k));
      }
      return (T(1) - z) * hbar + z * h_k;
    }
    case CellKind::kLstm: {
      const T cb = *c;
      const T peep_i = peep != nullptr ? peep[k] * cb : T(0);
      const T peep_f = peep != nullptr ? peep[2 * hs + k] * cb : T(0);
      const T it = Activate(p.f, p.Clipped(GatePre(p, pre, wb, rb, k) + hr[k] + peep_i));
      const T ft = p.input_forget ? T(1) - it
                                  : Activate(p.f, p.Clipped(GatePre(p, pre, wb, rb, 2 * hs + k) +
                                                            hr[2 * hs + k] + peep_f));
      const T ct = Activate(p.g, p.Clipped(GatePre(p, pre, wb, rb, 3 * hs + k) + hr[3 * hs + k]));
      const T c_next = ft * cb + it * ct;
      const T peep_o = peep != nullptr ? peep[hs + k] * c_next : T(0);
      const T ot = Activate(p.f, p.Clipped(GatePre(p, pre, wb, rb, hs + k) + hr[hs + k] + peep_o));
      *c = c_next;
      return ot * Activate(p.h, c_next);
    }
  }
  return h_k;
}

}  // namespace tpc::runtime::math
