// Launches of the row CUDA kernels (Softmax, norms, reductions): one block of kThreads
// threads per row; each thread folds a strided part of the row into f32 statistics, the
// block combines them in shared memory (BlockReduce), then the threads write the row.
// The statistics and element math are math/rows.h.
#include <cuda_runtime.h>

#include "block_reduce.cuh"
#include "grid.cuh"
#include "tpc/runtime/cuda/launch.h"

namespace tpc::runtime::cuda {
namespace {

using math::FloatIO;
using math::Moments;

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(rows); }

template <FloatKind K>
__global__ void SoftmaxKernel(const typename FloatIO<K>::Storage* x,
                              typename FloatIO<K>::Storage* y, RowLayout rl, bool log) {
  using IO = FloatIO<K>;
  const int64_t base = rl.Start(blockIdx.x);
  const int64_t stride = rl.stride();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
    mx = math::CombineMax(mx, IO::Load(x[base + j * stride]));
  }
  mx = BlockReduce(mx, [](float a, float b) { return math::CombineMax(a, b); });
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
    sum += math::SoftmaxTerm(IO::Load(x[base + j * stride]), mx);
  }
  sum = BlockReduce(sum, [](float a, float b) { return a + b; });
  for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
    const int64_t at = base + j * stride;
    y[at] = IO::Store(math::SoftmaxElement(IO::Load(x[at]), mx, sum, log));
  }
}

// One block per row of scores; like SoftmaxKernel, with the score of column j computed
// from the f32 product, the divisor and the mask each time it is read. probs may be
// scores (f32): the last loop reads and writes each element on the same thread, after
// the block's two reductions have read every element.
template <FloatKind K>
__global__ void AttentionSoftmaxKernel(const float* scores, typename FloatIO<K>::Storage* probs,
                                       int64_t len, float divisor,
                                       const typename FloatIO<K>::Storage* mask,
                                       StridedView mask_rows, int64_t first_row, int64_t mask_col) {
  using IO = FloatIO<K>;
  const int64_t row = blockIdx.x;
  const float* s = scores + row * len;
  const typename IO::Storage* m = mask != nullptr ? mask + mask_rows.At(first_row + row) : nullptr;
  auto score = [&](int64_t j) {
    return math::AttentionScore(s[j], divisor, m != nullptr ? IO::Load(m[j * mask_col]) : 0.0f);
  };
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < len; j += kThreads) mx = math::CombineMax(mx, score(j));
  mx = BlockReduce(mx, [](float a, float b) { return math::CombineMax(a, b); });
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < len; j += kThreads) sum += math::SoftmaxTerm(score(j), mx);
  sum = BlockReduce(sum, [](float a, float b) { return a + b; });
  for (int64_t j = threadIdx.x; j < len; j += kThreads) {
    probs[row * len + j] = IO::Store(math::SoftmaxElement(score(j), mx, sum, false));
  }
}

// Rows of at most 32·N keys: one warp per row, each lane holding the scores of keys lane,
// lane + 32, ... in registers: S and the mask are read once and P written once (the block
// kernel above reads them three times). The max and the sum are combined across the
// warp by xor shuffles. A warp whose row is past the end returns as a whole (row is the
// same for its 32 lanes), so every shuffle has its full warp. probs may be scores (f32):
// each element is read, then written, by one lane.
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 4;

template <FloatKind K, int N>
__global__ void AttentionSoftmaxWarpKernel(const float* scores, typename FloatIO<K>::Storage* probs,
                                           int64_t rows, int64_t len, float divisor,
                                           const typename FloatIO<K>::Storage* mask,
                                           StridedView mask_rows, int64_t first_row,
                                           int64_t mask_col) {
  using IO = FloatIO<K>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (row >= rows) return;
  const float* s = scores + row * len;
  const typename IO::Storage* m = mask != nullptr ? mask + mask_rows.At(first_row + row) : nullptr;
  float v[N];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int64_t j = lane + static_cast<int64_t>(i) * kWarp;
    v[i] = j < len ? math::AttentionScore(s[j], divisor,
                                          m != nullptr ? IO::Load(m[j * mask_col]) : 0.0f)
                   : -INFINITY;
    if (j < len) mx = math::CombineMax(mx, v[i]);
  }
  for (int off = kWarp / 2; off > 0; off >>= 1) {
    mx = math::CombineMax(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (lane + static_cast<int64_t>(i) * kWarp < len) sum += math::SoftmaxTerm(v[i], mx);
  }
  for (int off = kWarp / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int64_t j = lane + static_cast<int64_t>(i) * kWarp;
    if (j < len) probs[row * len + j] = IO::Store(math::SoftmaxElement(v[i], mx, sum, false));
  }
}

template <FloatKind K>
__global__ void NormKernel(const typename FloatIO<K>::Storage* x,
                           const typename FloatIO<K>::Storage* scale,
                           const typename FloatIO<K>::Storage* bias,
                           typename FloatIO<K>::Storage* y, float* mean_out, float* inv_std_out,
                           int64_t len, float epsilon, bool rms) {
  using IO = FloatIO<K>;
  const int64_t row = blockIdx.x;
  const typename IO::Storage* xr = x + row * len;
  float mean = 0.0f, inv_std = 0.0f;
  if (rms) {
    float sq = 0.0f;
    for (int64_t j = threadIdx.x; j < len; j += kThreads) {
      const float v = IO::Load(xr[j]);
      sq += v * v;
    }
    sq = BlockReduce(sq, [](float a, float b) { return a + b; });
    inv_std = math::InvStd(sq / static_cast<float>(len), epsilon);
  } else {
    Moments m{};
    for (int64_t j = threadIdx.x; j < len; j += kThreads) m.Add(IO::Load(xr[j]));
    m = BlockReduce(m, [](const Moments& a, const Moments& b) { return Moments::Combine(a, b); });
    mean = m.mean;
    inv_std = math::InvStd(m.Variance(), epsilon);
  }
  for (int64_t j = threadIdx.x; j < len; j += kThreads) {
    const float s = scale ? IO::Load(scale[j]) : 1.0f;
    const float b = bias ? IO::Load(bias[j]) : 0.0f;
    y[row * len + j] = IO::Store(math::NormElement(IO::Load(xr[j]), mean, inv_std, s, b));
  }
  if (threadIdx.x == 0) {
    if (mean_out) mean_out[row] = mean;
    if (inv_std_out) inv_std_out[row] = inv_std;
  }
}

// x of kind In, y of kind Out: a multi-axis reduction keeps its partial totals in f32
// between passes (sums of squares and products would overflow a half type).
template <FloatKind In, FloatKind Out>
__global__ void ReduceKernel(math::ReducePass pass, const typename FloatIO<In>::Storage* x,
                             typename FloatIO<Out>::Storage* y, RowLayout rl) {
  const ReduceKind op = pass.kind;
  const int64_t base = rl.Start(blockIdx.x);
  float acc = math::ReduceInit(op);
  for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
    acc = math::ReduceCombine(
        op, acc, math::ReducePassTerm(pass, FloatIO<In>::Load(x[base + j * rl.stride()])));
  }
  acc = BlockReduce(acc, [op](float a, float b) { return math::ReduceCombine(op, a, b); });
  if (threadIdx.x == 0) {
    y[blockIdx.x] = FloatIO<Out>::Store(math::ReducePassFinish(pass, acc, rl.len));
  }
}

template <FloatKind K>
cudaError_t Softmax(const void* x, void* y, const RowLayout& rl, bool log, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  SoftmaxKernel<K><<<RowBlocks(rl.rows()), kThreads, 0, stream>>>(static_cast<const S*>(x),
                                                                  static_cast<S*>(y), rl, log);
  return cudaGetLastError();
}

template <FloatKind K, int N>
cudaError_t AttentionSoftmaxWarp(const float* scores, void* probs, int64_t rows, int64_t len,
                                 float divisor, const void* mask, const StridedView& mask_rows,
                                 int64_t first_row, int64_t mask_col, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  AttentionSoftmaxWarpKernel<K, N>
      <<<static_cast<unsigned>(blocks), kRowsPerBlock * kWarp, 0, stream>>>(
          scores, static_cast<S*>(probs), rows, len, divisor, static_cast<const S*>(mask),
          mask_rows, first_row, mask_col);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t AttentionSoftmax(const float* scores, void* probs, int64_t rows, int64_t len,
                             float divisor, const void* mask, const StridedView& mask_rows,
                             int64_t first_row, int64_t mask_col, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  // Registers for up to 1024 keys a row (32 a lane); longer rows take a block each.
  if (len <= kWarp * 32) {
    auto warp = len <= kWarp * 1    ? AttentionSoftmaxWarp<K, 1>
                : len <= kWarp * 2  ? AttentionSoftmaxWarp<K, 2>
                : len <= kWarp * 4  ? AttentionSoftmaxWarp<K, 4>
                : len <= kWarp * 8  ? AttentionSoftmaxWarp<K, 8>
                : len <= kWarp * 16 ? AttentionSoftmaxWarp<K, 16>
                                    : AttentionSoftmaxWarp<K, 32>;
    return warp(scores, probs, rows, len, divisor, mask, mask_rows, first_row, mask_col, stream);
  }
  AttentionSoftmaxKernel<K><<<RowBlocks(rows), kThreads, 0, stream>>>(
      scores, static_cast<S*>(probs), len, divisor, static_cast<const S*>(mask), mask_rows,
      first_row, mask_col);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t Norm(const void* x, const void* scale, const void* bias, void* y, float* mean,
                 float* inv_std, int64_t rows, int64_t len, float epsilon, bool rms,
                 cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  NormKernel<K><<<RowBlocks(rows), kThreads, 0, stream>>>(
      static_cast<const S*>(x), static_cast<const S*>(scale), static_cast<const S*>(bias),
      static_cast<S*>(y), mean, inv_std, len, epsilon, rms);
  return cudaGetLastError();
}

// ArgMax/ArgMin of each row: the index of the winner (math::ArgChoose), as int64.
template <FloatKind K>
__global__ void ArgReduceKernel(const typename FloatIO<K>::Storage* x, int64_t* y, RowLayout rl,
                                bool max, bool last) {
  using IO = FloatIO<K>;
  const int64_t base = rl.Start(blockIdx.x);
  math::ArgBest best{0.0f, -1};
  for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
    best = math::ArgChoose(best, math::ArgBest{IO::Load(x[base + j * rl.stride()]), j}, max, last);
  }
  best = BlockReduce(best, [max, last](const math::ArgBest& a, const math::ArgBest& b) {
    return math::ArgChoose(a, b, max, last);
  });
  if (threadIdx.x == 0) y[blockIdx.x] = best.index;
}

// TopK of each line: k rounds, each a block-wide choice of the first-ranked entry after the
// previous round's (math::TopKBefore); thread 0 writes round r's value and index.
template <FloatKind K>
__global__ void TopKKernel(const typename FloatIO<K>::Storage* x,
                           typename FloatIO<K>::Storage* values, int64_t* indices, RowLayout rl,
                           int64_t k, bool largest) {
  using IO = FloatIO<K>;
  const int64_t row = blockIdx.x;
  const int64_t base = rl.Start(row);
  const int64_t out0 = (row / rl.inner) * k * rl.inner + row % rl.inner;
  math::TopKEntry last{0.0f, -1};
  for (int64_t r = 0; r < k; ++r) {
    math::TopKEntry best{0.0f, -1};
    for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
      const math::TopKEntry e{IO::Load(x[base + j * rl.stride()]), j};
      if (last.index >= 0 && !math::TopKBefore(last, e, largest)) continue;  // taken
      if (math::TopKBefore(e, best, largest)) best = e;
    }
    best = BlockReduce(best, [largest](const math::TopKEntry& a, const math::TopKEntry& b) {
      return math::TopKBefore(a, b, largest) ? a : b;
    });
    if (threadIdx.x == 0) {
      values[out0 + r * rl.inner] = x[base + best.index * rl.stride()];
      indices[out0 + r * rl.inner] = best.index;
    }
    last = best;
  }
}

template <FloatKind K>
cudaError_t TopK(const void* x, void* values, int64_t* indices, const RowLayout& rl, int64_t k,
                 bool largest, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  TopKKernel<K><<<RowBlocks(rl.rows()), kThreads, 0, stream>>>(
      static_cast<const S*>(x), static_cast<S*>(values), indices, rl, k, largest);
  return cudaGetLastError();
}

// Hardmax of each row: the winner as ArgMax picks it (math::ArgChoose, first index), then
// every thread writes its own elements of the row, 1 at the winner and 0 elsewhere.
template <FloatKind K>
__global__ void HardmaxKernel(const typename FloatIO<K>::Storage* x,
                              typename FloatIO<K>::Storage* y, RowLayout rl) {
  using IO = FloatIO<K>;
  const int64_t base = rl.Start(blockIdx.x);
  math::ArgBest best{0.0f, -1};
  for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
    best =
        math::ArgChoose(best, math::ArgBest{IO::Load(x[base + j * rl.stride()]), j}, true, false);
  }
  best = BlockReduce(best, [](const math::ArgBest& a, const math::ArgBest& b) {
    return math::ArgChoose(a, b, true, false);
  });
  for (int64_t j = threadIdx.x; j < rl.len; j += kThreads) {
    y[base + j * rl.stride()] = IO::Store(j == best.index ? 1.0f : 0.0f);
  }
}

template <FloatKind K>
cudaError_t Hardmax(const void* x, void* y, const RowLayout& rl, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  HardmaxKernel<K><<<RowBlocks(rl.rows()), kThreads, 0, stream>>>(static_cast<const S*>(x),
                                                                  static_cast<S*>(y), rl);
  return cudaGetLastError();
}

template <FloatKind K>
cudaError_t ArgReduce(const void* x, int64_t* y, const RowLayout& rl, bool max, bool last,
                      cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  ArgReduceKernel<K>
      <<<RowBlocks(rl.rows()), kThreads, 0, stream>>>(static_cast<const S*>(x), y, rl, max, last);
  return cudaGetLastError();
}

template <FloatKind In, FloatKind Out>
cudaError_t Reduce(math::ReducePass op, const void* x, void* y, const RowLayout& rl,
                   cudaStream_t stream) {
  ReduceKernel<In, Out><<<RowBlocks(rl.rows()), kThreads, 0, stream>>>(
      op, static_cast<const typename FloatIO<In>::Storage*>(x),
      static_cast<typename FloatIO<Out>::Storage*>(y), rl);
  return cudaGetLastError();
}

template <FloatKind In>
cudaError_t ReduceTo(FloatKind out, math::ReducePass op, const void* x, void* y,
                     const RowLayout& rl, cudaStream_t stream) {
  return ByKind(out,
                [&](auto kind) { return Reduce<In, decltype(kind)::value>(op, x, y, rl, stream); });
}

// Grid x is at most 2^31 - 1 blocks: one block per row.
// GroupQueryAttention's softmax: one block per row of f32 scores (rows (b, h, i) of
// [B, Hq, S, total]), as SoftmaxKernel, with a key the query does not see (math::GqaOpen,
// from row b's keys) at -inf and the others after softcap; a sink (head_sink, or
// smooth softmax's 0: math::GqaSinkScore of the row's head) adds a score to the max and
// the sum. A row with every key closed gets zeros (as the CPU kernel). probs may be scores (f32):
// the last loop reads and writes each element on one thread, after both reductions.
template <FloatKind K, typename L>
__global__ void GqaSoftmaxKernel(const float* scores, typename FloatIO<K>::Storage* probs,
                                 math::GqaLayout l, const L* lens,
                                 const typename FloatIO<K>::Storage* sink, int64_t first_batch) {
  using IO = FloatIO<K>;
  const int64_t row = blockIdx.x;  // of the chunk of batch entries from first_batch
  const int64_t i = row % l.seq;
  const int64_t b = first_batch + row / (l.hq * l.seq);
  int64_t keys = 0, own = 0;
  // A row whose keys do not fit is reported by the prepare kernels; here every key of it
  // is closed (zeros), never read out of range.
  const bool fits = math::GqaRowKeys(l, static_cast<int64_t>(lens[b]), &keys, &own);
  const float* s = scores + row * l.total;
  auto score = [&](int64_t j) {
    return fits && math::GqaOpen(l, keys, own, i, j) ? math::GqaSoftcap(l, s[j]) : -INFINITY;
  };
  const float extra = math::GqaSinkScore<IO>(l, sink, (row / l.seq) % l.hq);
  float mx = extra;
  for (int64_t j = threadIdx.x; j < l.total; j += kThreads) mx = math::CombineMax(mx, score(j));
  mx = BlockReduce(mx, [](float a, float c) { return math::CombineMax(a, c); });
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int64_t j = threadIdx.x; j < l.total; j += kThreads)
      sum += math::SoftmaxTerm(score(j), mx);
  }
  sum = BlockReduce(sum, [](float a, float c) { return a + c; });
  if (extra != -INFINITY) sum += expf(extra - mx);
  for (int64_t j = threadIdx.x; j < l.total; j += kThreads) {
    probs[row * l.total + j] =
        IO::Store(mx == -INFINITY ? 0.0f : math::SoftmaxElement(score(j), mx, sum, false));
  }
}

template <FloatKind K>
cudaError_t GqaSoftmax(const float* scores, void* probs, const math::GqaLayout& l, const void* lens,
                       bool lens_i64, const void* sink, int64_t first_batch, int64_t rows,
                       cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  if (lens_i64) {
    GqaSoftmaxKernel<K, int64_t><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        scores, static_cast<S*>(probs), l, static_cast<const int64_t*>(lens),
        static_cast<const S*>(sink), first_batch);
  } else {
    GqaSoftmaxKernel<K, int32_t><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        scores, static_cast<S*>(probs), l, static_cast<const int32_t*>(lens),
        static_cast<const S*>(sink), first_batch);
  }
  return cudaGetLastError();
}

// ONNX Attention's softmax: one block per row (b, h, i) of f32 scores [B, Hq, qs, total],
// as GqaSoftmaxKernel, the score of key j being softcap(s) + math::SdpaBias; output 3 (qk,
// kind K, may be null) gets the softcapped scores (modes 0, 1), the biased ones (2) or
// the probabilities (3), each element by the thread that owns it. A row whose every key
// is masked gets zeros.
template <FloatKind K>
__global__ void SdpaSoftmaxKernel(const float* scores, typename FloatIO<K>::Storage* probs,
                                  math::SdpaLayout l, const void* mask, const int32_t* pad,
                                  typename FloatIO<K>::Storage* qk, int64_t first_batch) {
  using IO = FloatIO<K>;
  const int64_t row = blockIdx.x;  // of the chunk of batch entries from first_batch
  const int64_t i = row % l.qs;
  const int64_t h = (row / l.qs) % l.hq;
  const int64_t b = first_batch + row / (l.qs * l.hq);
  const float* s = scores + row * l.total;
  auto score = [&](int64_t j) {
    return math::SdpaSoftcap(l, s[j]) + math::SdpaBias<K>(l, mask, pad, b, h, i, j);
  };
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < l.total; j += kThreads) mx = math::CombineMax(mx, score(j));
  mx = BlockReduce(mx, [](float a, float c) { return math::CombineMax(a, c); });
  float sum = 0.0f;
  if (mx != -INFINITY) {
    for (int64_t j = threadIdx.x; j < l.total; j += kThreads)
      sum += math::SoftmaxTerm(score(j), mx);
  }
  sum = BlockReduce(sum, [](float a, float c) { return a + c; });
  for (int64_t j = threadIdx.x; j < l.total; j += kThreads) {
    const int64_t at = row * l.total + j;
    const float p = mx == -INFINITY ? 0.0f : math::SoftmaxElement(score(j), mx, sum, false);
    if (qk != nullptr) {
      qk[at] = IO::Store(l.qk_mode <= 1   ? math::SdpaSoftcap(l, s[j])
                         : l.qk_mode == 2 ? score(j)
                                          : p);
    }
    probs[at] = IO::Store(p);
  }
}

template <FloatKind K>
cudaError_t SdpaSoftmax(const float* scores, void* probs, const math::SdpaLayout& l,
                        const void* mask, const int32_t* pad, void* qk, int64_t first_batch,
                        int64_t rows, cudaStream_t stream) {
  using S = typename FloatIO<K>::Storage;
  SdpaSoftmaxKernel<K><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      scores, static_cast<S*>(probs), l, mask, pad, static_cast<S*>(qk), first_batch);
  return cudaGetLastError();
}

bool TooManyRows(int64_t rows) { return rows > 2147483647LL; }

}  // namespace

cudaError_t LaunchSoftmax(FloatKind k, const void* x, void* y, const RowLayout& rows, bool log,
                          cudaStream_t stream) {
  if (rows.rows() == 0 || rows.len == 0) return cudaSuccess;
  if (TooManyRows(rows.rows())) return cudaErrorInvalidConfiguration;
  return ByKind(k,
                [&](auto kind) { return Softmax<decltype(kind)::value>(x, y, rows, log, stream); });
}

cudaError_t LaunchAttentionSoftmax(FloatKind k, const float* scores, void* probs, int64_t rows,
                                   int64_t len, float divisor, const void* mask,
                                   const StridedView& mask_rows, int64_t first_row,
                                   int64_t mask_col, cudaStream_t stream) {
  if (rows == 0 || len == 0) return cudaSuccess;
  if (TooManyRows(rows)) return cudaErrorInvalidConfiguration;
  return ByKind(k, [&](auto kind) {
    return AttentionSoftmax<decltype(kind)::value>(scores, probs, rows, len, divisor, mask,
                                                   mask_rows, first_row, mask_col, stream);
  });
}

cudaError_t LaunchNorm(FloatKind k, const void* x, const void* scale, const void* bias, void* y,
                       float* mean, float* inv_std, int64_t rows, int64_t len, float epsilon,
                       bool rms, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (TooManyRows(rows)) return cudaErrorInvalidConfiguration;
  return ByKind(k, [&](auto kind) {
    return Norm<decltype(kind)::value>(x, scale, bias, y, mean, inv_std, rows, len, epsilon, rms,
                                       stream);
  });
}

cudaError_t LaunchTopK(FloatKind k, const void* x, void* values, int64_t* indices,
                       const RowLayout& lines, int64_t top, bool largest, cudaStream_t stream) {
  if (lines.rows() == 0 || top == 0) return cudaSuccess;
  if (TooManyRows(lines.rows()) || top < 0 || top > lines.len) {
    return cudaErrorInvalidConfiguration;
  }
  return ByKind(k, [&](auto kind) {
    return TopK<decltype(kind)::value>(x, values, indices, lines, top, largest, stream);
  });
}

cudaError_t LaunchHardmax(FloatKind k, const void* x, void* y, const RowLayout& rows,
                          cudaStream_t stream) {
  if (rows.rows() == 0 || rows.len == 0) return cudaSuccess;
  if (TooManyRows(rows.rows())) return cudaErrorInvalidConfiguration;
  return ByKind(k, [&](auto kind) { return Hardmax<decltype(kind)::value>(x, y, rows, stream); });
}

cudaError_t LaunchArgReduce(FloatKind k, const void* x, int64_t* y, const RowLayout& rows, bool max,
                            bool last, cudaStream_t stream) {
  if (rows.rows() == 0) return cudaSuccess;
  if (TooManyRows(rows.rows()) || rows.len == 0) return cudaErrorInvalidConfiguration;
  return ByKind(k, [&](auto kind) {
    return ArgReduce<decltype(kind)::value>(x, y, rows, max, last, stream);
  });
}

cudaError_t LaunchReduce(FloatKind in, FloatKind out, math::ReducePass op, const void* x, void* y,
                         const RowLayout& rows, cudaStream_t stream) {
  if (rows.rows() == 0) return cudaSuccess;
  if (TooManyRows(rows.rows())) return cudaErrorInvalidConfiguration;
  return ByKind(
      in, [&](auto kind) { return ReduceTo<decltype(kind)::value>(out, op, x, y, rows, stream); });
}

cudaError_t LaunchReduce(FloatKind k, math::ReducePass op, const void* x, void* y,
                         const RowLayout& rows, cudaStream_t stream) {
  return LaunchReduce(k, k, op, x, y, rows, stream);
}

cudaError_t LaunchGqaSoftmax(FloatKind k, const float* scores, void* probs,
                             const math::GqaLayout& l, const void* lens, bool lens_i64,
                             const void* sink, int64_t first_batch, int64_t batches,
                             cudaStream_t stream) {
  const int64_t rows = batches * l.hq * l.seq;
  if (rows == 0 || l.total == 0) return cudaSuccess;
  if (TooManyRows(rows)) return cudaErrorInvalidConfiguration;
  return ByKind(k, [&](auto kind) {
    return GqaSoftmax<decltype(kind)::value>(scores, probs, l, lens, lens_i64, sink, first_batch,
                                             rows, stream);
  });
}

cudaError_t LaunchSdpaSoftmax(FloatKind k, const float* scores, void* probs,
                              const math::SdpaLayout& l, const void* mask, const int32_t* pad,
                              void* qk, int64_t first_batch, int64_t batches, cudaStream_t stream) {
  const int64_t rows = batches * l.hq * l.qs;
  if (rows == 0 || l.total == 0) return cudaSuccess;
  if (TooManyRows(rows)) return cudaErrorInvalidConfiguration;
  return ByKind(k, [&](auto kind) {
    return SdpaSoftmax<decltype(kind)::value>(scores, probs, l, mask, pad, qk, first_batch, rows,
                                              stream);
  });
}

}  // namespace tpc::runtime::cuda
