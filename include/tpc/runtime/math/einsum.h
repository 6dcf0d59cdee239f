// Einsum's element on the device: output element o is the sum, over every combination of
// the summed labels, of the product of the operands at that element (the plan of
// cpu::ReadEinsum: per operand one element stride per output dim and per summed dim, 0
// where the operand lacks the label or broadcasts it). The summed indices run as an
// odometer (last dim fastest), the CPU kernel's order; the sum is in f32 (the CPU's in
// double: a long sum drifts by about √K float roundings).
#pragma once

#include <cstdint>

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

}  // namespace tpc::runtime::math
