// Launches of the recurrent operators' per-step kernels (RNN, GRU, LSTM), all in f32: one
// thread per hidden unit of each batch entry, (bi, k) < batch · hidden, in a grid-stride
// loop. A step thread reads its entry's rows of the input and hidden projections, its own
// old state h[bi, k] (and c[bi, k]) and writes them in place, and Y at its step's row;
// the GEMMs that read the old states are queued before it. GRU's reset thread writes
// (r ⊙ H)[bi, k] for the GEMM with Rh. An entry past its sequence length does nothing; a
// length outside [0, seq] sets the check flag. Math in math/recurrent.h.
#include <cuda_runtime.h>

#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/math/recurrent.h"

namespace tpc::runtime::cuda {
namespace {

// The time step that step s reads for entry bi, or -1 when the entry has ended or its
// length is out of range (which sets the check flag to `code`: the first failing launch's
// wins).
__device__ inline int64_t StepOf(const RecurrentStep& a, int64_t bi, int* flag, int code) {
  int64_t len = a.seq;
  if (a.lens != nullptr) {
    len = a.lens[bi];
    if (len < 0 || len > a.seq) {
      atomicCAS(flag, 0, code);
      return -1;
    }
  }
  if (a.s >= len) return -1;
  return a.reverse ? len - 1 - a.s : a.s;
}

__global__ void GruResetKernel(math::CellParams p, RecurrentStep a, float* reset, int64_t n,
                               int* flag, int code) {
  const int64_t hs = p.hidden, gh = p.gates() * hs;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t bi = i / hs, k = i - bi * hs;
    const int64_t t = StepOf(a, bi, flag, code);
    reset[i] =
        t < 0 ? 0.0f
              : math::GruReset(p, a.xw + (t * a.batch + bi) * gh, a.hr + bi * gh, a.wb, a.rb, k) *
                    a.h[i];
  }
}

__global__ void RecurrentStepKernel(math::CellParams p, RecurrentStep a, int64_t n, int* flag,
                                    int code) {
  const int64_t hs = p.hidden, gh = p.gates() * hs;
  for (int64_t i = First(); i < n; i += Step()) {
    const int64_t bi = i / hs, k = i - bi * hs;
    const int64_t t = StepOf(a, bi, flag, code);
    if (t < 0) continue;
    const float hn = math::CellStep(p, a.xw + (t * a.batch + bi) * gh, a.hr + bi * gh, a.wb, a.rb,
                                    a.h[i], a.rh != nullptr ? a.rh[i] : 0.0f,
                                    a.c != nullptr ? a.c + i : nullptr, a.peep, k);
    a.h[i] = hn;
    a.y[((t * a.dirs + a.d) * a.batch + bi) * hs + k] = hn;
  }
}

__global__ void CheckLengthsKernel(const int32_t* lens, int64_t batch, int64_t seq, int* flag,
                                   int code) {
  for (int64_t i = First(); i < batch; i += Step()) {
    if (lens[i] < 0 || lens[i] > seq) atomicCAS(flag, 0, code);
  }
}

}  // namespace

cudaError_t LaunchCheckLengths(const int32_t* lens, int64_t batch, int64_t seq, int* flag, int code,
                               cudaStream_t stream) {
  if (batch == 0) return cudaSuccess;
  CheckLengthsKernel<<<Blocks(batch), kThreads, 0, stream>>>(lens, batch, seq, flag, code);
  return cudaGetLastError();
}

cudaError_t LaunchGruReset(const math::CellParams& p, const RecurrentStep& a, float* reset,
                           int* flag, int code, cudaStream_t stream) {
  const int64_t n = a.batch * p.hidden;
  if (n == 0) return cudaSuccess;
  GruResetKernel<<<Blocks(n), kThreads, 0, stream>>>(p, a, reset, n, flag, code);
  return cudaGetLastError();
}

cudaError_t LaunchRecurrentStep(const math::CellParams& p, const RecurrentStep& a, int* flag,
                                int code, cudaStream_t stream) {
  const int64_t n = a.batch * p.hidden;
  if (n == 0) return cudaSuccess;
  RecurrentStepKernel<<<Blocks(n), kThreads, 0, stream>>>(p, a, n, flag, code);
  return cudaGetLastError();
}

}  // namespace tpc::runtime::cuda
