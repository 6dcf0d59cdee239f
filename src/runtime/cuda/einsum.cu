// Launch of Einsum: one thread per output element in a grid-stride loop; it reads each
// operand only at offsets of the plan's strides within the operand's own dims (checked by
// cpu::ReadEinsum against each operand's shape) and writes y[i]. Math in math/einsum.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::EinsumPlan;
using math::FloatIO;

template <FloatKind K>
struct Operands {
  const typename FloatIO<K>::Storage* at[EinsumPlan::kMaxOperands];
};

template <FloatKind K>
__global__ void EinsumKernel(EinsumPlan plan, Operands<K> in, typename FloatIO<K>::Storage* y,
                             int64_t n) {
  using IO = FloatIO<K>;
  for (int64_t i = First(); i < n; i += Step()) {
    y[i] = IO::Store(
        math::EinsumElement(plan, i, [&](int k, int64_t off) { return IO::Load(in.at[k][off]); }));
  }
}

}  // namespace

cudaError_t LaunchEinsum(FloatKind k, const EinsumPlan& plan, const void* const* operands, void* y,
                         int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (plan.operands < 1 || plan.operands > EinsumPlan::kMaxOperands) return cudaErrorInvalidValue;
  return ByKind(k, [&](auto kind) {
    constexpr FloatKind K = decltype(kind)::value;
    using S = typename FloatIO<K>::Storage;
    Operands<K> in = {};
    for (int i = 0; i < plan.operands; ++i) in.at[i] = static_cast<const S*>(operands[i]);
    EinsumKernel<K><<<Blocks(n), kThreads, 0, stream>>>(plan, in, static_cast<S*>(y), n);
    return cudaGetLastError();
  });
}

}  // namespace tpc::runtime::cuda
