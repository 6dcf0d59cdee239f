// Einsum's element on the device: output element o is the sum, over every combination of
// the summed labels, of the product of the operands at that element (the plan of
// cpu::ReadEinsum: per operand one element stride per output dim and per summed dim, 0
// where the operand lacks the label or broadcasts it). The summed indices run as an
// odometer (last dim fastest), the CPU kernel's order; the sum is in f32 (the CPU's in
// double: a long sum drifts by about √K float roundings).
#pragma once

#include <cstdint>
#include <optional>

#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct EinsumPlan {
  static constexpr int kMaxOperands = 4;
  int operands = 0, out_rank = 0, sum_rank = 0;
  int64_t out_dims[kMaxDims] = {}, sum_dims[kMaxDims] = {};
  int64_t out_strides[kMaxOperands][kMaxDims] = {}, sum_strides[kMaxOperands][kMaxDims] = {};
  int64_t sums = 1;  // the product of sum_dims
};

// `load(k, offset)` reads operand k's element at `offset` as f32.
template <typename Load>
TPC_HOST_DEVICE inline float EinsumElement(const EinsumPlan& p, int64_t o, Load load) {
  int64_t off[EinsumPlan::kMaxOperands] = {};
  for (int d = p.out_rank - 1; d >= 0; --d) {
    const int64_t q = DivIndex(o, p.out_dims[d]);
    const int64_t i = o - q * p.out_dims[d];
    o = q;
    for (int k = 0; k < p.operands; ++k) off[k] += i * p.out_strides[k][d];
  }
  int64_t idx[kMaxDims] = {};
  float acc = 0.0f;
  for (int64_t s = 0; s < p.sums; ++s) {
    float prod = 1.0f;
    for (int k = 0; k < p.operands; ++k) prod *= load(k, off[k]);
    acc += prod;
    for (int d = p.sum_rank - 1; d >= 0; --d) {  // the next combination
      for (int k = 0; k < p.operands; ++k) off[k] += p.sum_strides[k][d];
      if (++idx[d] < p.sum_dims[d]) break;
      for (int k = 0; k < p.operands; ++k) off[k] -= idx[d] * p.sum_strides[k][d];
      idx[d] = 0;
    }
  }
  return acc;
}

// A two-operand Einsum as one batched GEMM C[batch, M, N] = A[batch, M, K] · B[batch, K, N]:
// each output label is a batch label (in both operands), an M label (in A only) or an N
// label (in B only); each summed label is in both (a K label). `a` and `b` view the
// operands over [batch..., M..., K...] and [batch..., K..., N...], which copies make
// contiguous for the GEMM; `c` views the output over [batch..., M..., N...] (where the
// contiguous product goes). Labels of size 1 drop out.
struct EinsumGemm {
  StridedView a, b, c;
  int64_t batch = 1, m = 1, n = 1, k = 1;
};

// The GEMM form of `p`, or nullopt where it has none (not two operands, a label summed in
// one operand only, more than kMaxDims dims in a view).
inline std::optional<EinsumGemm> PlanEinsumGemm(const EinsumPlan& p) {
  if (p.operands != 2) return std::nullopt;
  int64_t bd[kMaxDims * 2], md[kMaxDims * 2], nd[kMaxDims * 2], kd[kMaxDims * 2];
  int64_t ba[kMaxDims * 2], bb[kMaxDims * 2], bc[kMaxDims * 2];  // batch strides of A, B, y
  int64_t ma[kMaxDims * 2], mc[kMaxDims * 2], nb[kMaxDims * 2], nc[kMaxDims * 2];
  int64_t ka[kMaxDims * 2], kb[kMaxDims * 2];
  int nbatch = 0, nm = 0, nn = 0, nk = 0;
  int64_t out_stride[kMaxDims] = {}, stride = 1;
  for (int d = p.out_rank - 1; d >= 0; --d) {  // y is contiguous over the output labels
    out_stride[d] = stride;
    stride *= p.out_dims[d];
  }
  EinsumGemm g;
  for (int d = 0; d < p.out_rank; ++d) {
    const int64_t sa = p.out_strides[0][d], sb = p.out_strides[1][d], size = p.out_dims[d];
    if (size == 1) continue;
    if (sa != 0 && sb != 0) {
      bd[nbatch] = size, ba[nbatch] = sa, bb[nbatch] = sb, bc[nbatch] = out_stride[d];
      ++nbatch;
      g.batch *= size;
    } else if (sa != 0) {
      md[nm] = size, ma[nm] = sa, mc[nm] = out_stride[d];
      ++nm;
      g.m *= size;
    } else if (sb != 0) {
      nd[nn] = size, nb[nn] = sb, nc[nn] = out_stride[d];
      ++nn;
      g.n *= size;
    } else {
      return std::nullopt;  // a label of neither operand: not from this plan
    }
  }
  for (int d = 0; d < p.sum_rank; ++d) {
    const int64_t sa = p.sum_strides[0][d], sb = p.sum_strides[1][d], size = p.sum_dims[d];
    if (size == 1) continue;
    if (sa == 0 || sb == 0) return std::nullopt;  // summed in one operand only
    kd[nk] = size, ka[nk] = sa, kb[nk] = sb;
    ++nk;
    g.k *= size;
  }
  if (nbatch + nm + nk > kMaxDims || nbatch + nk + nn > kMaxDims || nbatch + nm + nn > kMaxDims) {
    return std::nullopt;
  }
  const auto add = [](StridedView* v, const int64_t* dims, const int64_t* strides, int count) {
    for (int i = 0; i < count; ++i) {
      v->dims[v->rank] = dims[i];
      v->strides[v->rank] = strides[i];
      ++v->rank;
    }
  };
  add(&g.a, bd, ba, nbatch);
  add(&g.a, md, ma, nm);
  add(&g.a, kd, ka, nk);
  add(&g.b, bd, bb, nbatch);
  add(&g.b, kd, kb, nk);
  add(&g.b, nd, nb, nn);
  add(&g.c, bd, bc, nbatch);
  add(&g.c, md, mc, nm);
  add(&g.c, nd, nc, nn);
  return g;
}

}  // namespace tpc::runtime::math
