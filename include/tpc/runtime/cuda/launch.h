// The CUDA kernels' launches: thread-to-data mapping only; the math is in
// tpc/runtime/math (shared with the host tests). Every launch is asynchronous on
// `stream` and returns the launch error (cudaSuccess when queued).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tpc/runtime/math/causal_conv.h"
#include "tpc/runtime/math/conv.h"
#include "tpc/runtime/math/deform_conv.h"
#include "tpc/runtime/math/einsum.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/gqa.h"
#include "tpc/runtime/math/grid_sample.h"
#include "tpc/runtime/math/indexing.h"
#include "tpc/runtime/math/linear_attention.h"
#include "tpc/runtime/math/logic.h"
#include "tpc/runtime/math/loss.h"
#include "tpc/runtime/math/moe.h"
#include "tpc/runtime/math/nbits.h"
#include "tpc/runtime/math/pad.h"
#include "tpc/runtime/math/pointwise.h"
#include "tpc/runtime/math/pool.h"
#include "tpc/runtime/math/quantize.h"
#include "tpc/runtime/math/recurrent.h"
#include "tpc/runtime/math/resize.h"
#include "tpc/runtime/math/roi_align.h"
#include "tpc/runtime/math/rotary.h"
#include "tpc/runtime/math/rows.h"
#include "tpc/runtime/math/sdpa.h"
#include "tpc/runtime/math/spectral.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime::cuda {

using math::BinaryOp;
using math::FloatKind;
using math::ReduceKind;
using math::RowLayout;
using math::StridedView;
using math::UnaryOp;
using math::UnaryParams;

// out[i] = op(a[va(i)], b[vb(i)]), i < n.
cudaError_t LaunchBinary(FloatKind k, BinaryOp op, const void* a, const StridedView& va,
                         const void* b, const StridedView& vb, void* out, int64_t n,
                         cudaStream_t stream);
// y[i] = op(x[i]), i < n.
cudaError_t LaunchUnary(FloatKind k, UnaryOp op, UnaryParams alpha, const void* x, void* y,
                        int64_t n, cudaStream_t stream);
// y[i] = x[i] converted between float kinds.
cudaError_t LaunchCast(FloatKind from, FloatKind to, const void* x, void* y, int64_t n,
                       cudaStream_t stream);
// dst[vd(i)] = src[vs(i)] for i < n, elements of `elem_bytes` (1, 2, 4 or 8).
cudaError_t LaunchCopy(int elem_bytes, const void* src, const StridedView& vs, void* dst,
                       const StridedView& vd, int64_t n, cudaStream_t stream);
// out[i] = cond[vc(i)] ? x[vx(i)] : y[vy(i)].
cudaError_t LaunchWhere(int elem_bytes, const bool* cond, const StridedView& vc, const void* x,
                        const StridedView& vx, const void* y, const StridedView& vy, void* out,
                        int64_t n, cudaStream_t stream);
// Gather along an axis of data [outer, axis_len, inner] with n_indices indices (int64 or
// int32) into out [outer, n_indices, inner]. An index out of range sets *flag to `code`
// (when *flag is 0): the backend's check (CudaBackend::Expect) reports it.
cudaError_t LaunchGather(int elem_bytes, const void* data, const void* indices, bool indices_i64,
                         int64_t outer, int64_t axis_len, int64_t inner, int64_t n_indices,
                         void* out, int* flag, int code, cudaStream_t stream);
// GatherElements (math/indexing.h) of n output elements, indices int64 or int32; an
// index out of range sets *flag to `code` as LaunchGather does.
cudaError_t LaunchGatherElements(int elem_bytes, const void* data, const StridedView& base,
                                 const void* indices, bool indices_i64, int64_t axis_len,
                                 int64_t axis_stride, void* out, int64_t n, int* flag, int code,
                                 cudaStream_t stream);
// GatherND (math::GatherNdElement) of n output elements: tuples of `nd.last` indices,
// slices of `slice` elements, per_batch tuples per batch entry of data (batch_stride
// elements apart); an index out of range sets *flag to `code`.
cudaError_t LaunchGatherNd(int elem_bytes, const void* data, const math::NdIndex& nd,
                           const void* indices, bool indices_i64, int64_t slice, int64_t per_batch,
                           int64_t batch_stride, void* out, int64_t n, int* flag, int code,
                           cudaStream_t stream);
// ScatterND without a reduction: the n update elements written into y (already a copy of
// data); an index out of range sets *flag to `code`.
cudaError_t LaunchScatterNd(int elem_bytes, const math::NdIndex& nd, const void* indices,
                            bool indices_i64, const void* updates, int64_t slice, void* y,
                            int64_t n, int* flag, int code, cudaStream_t stream);
// ScatterElements without a reduction, as LaunchScatterNd.
cudaError_t LaunchScatterElements(int elem_bytes, const StridedView& base, const void* indices,
                                  bool indices_i64, int64_t axis_len, int64_t axis_stride,
                                  const void* updates, void* y, int64_t n, int* flag, int code,
                                  cudaStream_t stream);
// MaxUnpool: the n elements of x written into y (zeroed before) at the offsets that `out`
// gives their indices (positions below `total`); an index out of range sets *flag to `code`.
cudaError_t LaunchMaxUnpool(int elem_bytes, const StridedView& out, const void* indices,
                            bool indices_i64, int64_t total, const void* x, void* y, int64_t n,
                            int* flag, int code, cudaStream_t stream);
// The negative log-likelihood (math/loss.h) of log-probabilities `logp` (kind k) for
// labels int64 or int32 and an optional class weight (kind k, may be null): `reduction` 0
// one loss per target into out [n, inner], 1 their sum, 2 their weighted mean, into
// out[0]. A label out of range (and not ignored) sets *flag to `code`.
cudaError_t LaunchNllLoss(FloatKind k, const void* logp, const void* labels, bool labels_i64,
                          const void* weight, const math::NllLayout& l, int reduction, void* out,
                          int* flag, int code, cudaStream_t stream);
// The im2col matrix (math/conv.h) of `channels` channels of one image x into col
// [channels · taps, outs], elements of 2, 4 or 8 bytes.
cudaError_t LaunchIm2Col(int elem_bytes, const math::ConvGeometry& g, int64_t channels,
                         const void* x, void* col, cudaStream_t stream);
// Pad (math/pad.h) of n output elements of `elem_bytes` (1, 2, 4 or 8); `fill` holds the
// constant's bits in its low bytes.
cudaError_t LaunchPad(int elem_bytes, const math::PadLayout& l, const void* x, uint64_t fill,
                      void* y, int64_t n, cudaStream_t stream);
// Trilu of n elements: matrices of rows × cols, the elements it drops zeroed.
cudaError_t LaunchTrilu(int elem_bytes, const void* x, void* y, int64_t rows, int64_t cols,
                        bool upper, int64_t k, int64_t n, cudaStream_t stream);
// CumSum along the middle dim of [outer, len, inner] (one thread per line).
cudaError_t LaunchCumSum(FloatKind k, const void* x, void* y, const RowLayout& lines,
                         bool exclusive, bool reverse, cudaStream_t stream);
// One axis of Resize (math::ResizeAxisElement): y [outer, a.out, inner] of kind `out` from
// x [outer, a.in, inner] of kind `in`.
cudaError_t LaunchResizeAxis(FloatKind in, FloatKind out, const math::ResizeOptions& opt,
                             const math::ResizeAxisGeometry& a, int64_t outer, int64_t inner,
                             const void* x, void* y, cudaStream_t stream);
// The windowed pools (math/pool.h) of `planes` planes of x into y [planes, outs...], and
// MaxPool's argmax into `index` when not null.
cudaError_t LaunchPool(FloatKind k, const math::ConvGeometry& g, const math::PoolParams& pp,
                       int64_t planes, const void* x, void* y, int64_t* index, cudaStream_t stream);
// The col2im of `channels` channels (math::Col2ImElement): y [channels, g.in...] from
// col [channels · taps, outs].
cudaError_t LaunchCol2Im(FloatKind k, const math::ConvGeometry& g, int64_t channels,
                         const void* col, void* y, cudaStream_t stream);
// GroupQueryAttention's device buffers (kind k): its inputs (key and value null when
// packed in the query; past, cos and sin may be null) and its laid-out Q and presents.
struct GqaOperands {
  const void *query = nullptr, *key = nullptr, *value = nullptr;
  const void *past_k = nullptr, *past_v = nullptr, *cos = nullptr, *sin = nullptr;
  void *q = nullptr, *present_k = nullptr, *present_v = nullptr;
};
// Q [B, Hq, S, hd] and the presents [B, Hkv, total, hd], rotated (math/gqa.h), with
// seqlens_k and position_ids (may be null without has_positions) on the device, int64 or
// int32. A row's keys or a position out of range set *flag to `code`.
cudaError_t LaunchGqaLayout(FloatKind k, const math::GqaLayout& l, const GqaOperands& o,
                            const void* lens, bool lens_i64, const void* positions,
                            bool positions_i64, int* flag, int code, cudaStream_t stream);
// The fused per-head Q/K norms (l.qk_norm; math::GqaNormHead): `in` (the query input, or
// with key_input the key input: `heads` heads of hd elements) into `out`, its Q and K heads
// normalized by q_weight and k_weight [hd], V's (packed) copied.
cudaError_t LaunchGqaNormHeads(FloatKind k, const math::GqaLayout& l, const void* in,
                               bool key_input, const void* q_weight, const void* k_weight,
                               void* out, int64_t heads, cudaStream_t stream);
// A windowed cache's presents [B, Hkv, past, hd] (pk, pv) from the rows attention ran over
// (sk, sv [B, Hkv, total, hd]; math::GqaWindowPresentElement), kind k's element size es.
// A row whose seqlens_k is negative sets *flag to `code`.
cudaError_t LaunchGqaWindowPresents(FloatKind k, const math::GqaLayout& l, const void* lens,
                                    bool lens_i64, const void* sk, const void* sv, void* pk,
                                    void* pv, int* flag, int code, cudaStream_t stream);
// GroupQueryAttention's softmax over f32 scores [batches, Hq, S, total] (batch entries
// first_batch on) into probs (kind k; may be scores when f32), masked by each row's keys
// (lens on the device).
cudaError_t LaunchGqaSoftmax(FloatKind k, const float* scores, void* probs,
                             const math::GqaLayout& l, const void* lens, bool lens_i64,
                             const void* sink, int64_t first_batch, int64_t batches,
                             cudaStream_t stream);
// out[i] = op(a[va(i)], b[vb(i)]) for floats of kind k (math/logic.h).
cudaError_t LaunchCompare(FloatKind k, math::CompareOp op, const void* a, const StridedView& va,
                          const void* b, const StridedView& vb, bool* out, int64_t n,
                          cudaStream_t stream);
// y[i] = IsNaN / IsInf of x[i] (kind k).
cudaError_t LaunchPredicate(FloatKind k, const math::Predicate& p, const void* x, bool* y,
                            int64_t n, cudaStream_t stream);
// out[i] = op(a[va(i)], b[vb(i)]) on bools (b unused by Not).
// out[i] = op(a[va(i)], b[vb(i)]) on the bits of integer elements of `bytes` bytes (1, 2, 4
// or 8; b unused by Not) (math::BitElement).
cudaError_t LaunchBits(int bytes, math::BitOp op, const void* a, const StridedView& va,
                       const void* b, const StridedView& vb, void* out, int64_t n,
                       cudaStream_t stream);
cudaError_t LaunchLogic(math::LogicOp op, const bool* a, const StridedView& va, const bool* b,
                        const StridedView& vb, bool* out, int64_t n, cudaStream_t stream);
// ONNX Attention's softmax over f32 scores [batches, Hq, qs, total] (batch entries
// first_batch on) into probs (kind k; may be scores when f32), with the mask
// (math/sdpa.h; null without one; onnxruntime's attention bias), the padding of
// onnxruntime's masking (`pad`, int32, null without it) and output 3 (qk of those entries,
// kind k, null when not wanted).
cudaError_t LaunchSdpaSoftmax(FloatKind k, const float* scores, void* probs,
                              const math::SdpaLayout& l, const void* mask, const int32_t* pad,
                              void* qk, int64_t first_batch, int64_t batches, cudaStream_t stream);
// RotaryEmbedding (math/rotary.h) of the n elements of x into y (not x), positions int64
// or int32 on the device (null in mode 0); a cache row outside the caches sets *flag.
cudaError_t LaunchRotaryEmbedding(FloatKind k, const math::RotaryLayout& l, const void* x,
                                  const void* positions, bool positions_i64, const void* cos,
                                  const void* sin, void* y, int64_t n, int* flag, int code,
                                  cudaStream_t stream);
// M-RoPE (MRotaryEmbedding)'s token-by-token caches cos_out, sin_out [tokens, half] (times
// scale) from cos, sin [cache_rows, half] at the positions [3, tokens] (int64 or int32) of
// each angle's stream; a position outside the caches sets *flag.
cudaError_t LaunchMRopeCaches(FloatKind k, const math::MRopeSections& s, const void* positions,
                              bool positions_i64, const void* cos, const void* sin,
                              int64_t cache_rows, float scale, void* cos_out, void* sin_out,
                              int64_t tokens, int64_t half, int* flag, int code,
                              cudaStream_t stream);
// LinearAttention (math/linear_attention.h): output and present state (not null: scratch
// when the node does not want it); past, decay and rate null when absent.
cudaError_t LaunchLinearAttention(FloatKind k, const math::LinearAttentionLayout& l, const void* q,
                                  const void* key, const void* v, const void* past,
                                  const void* decay, const void* rate, void* out, void* present,
                                  cudaStream_t stream);
// LinearAttentionGate over the n elements of a [.., h]: dt_bias and decay_scale f32 or of
// kind k; b and beta null when beta is not wanted.
cudaError_t LaunchLinearAttentionGate(FloatKind k, bool vectors_f32, const void* a,
                                      const void* dt_bias, const void* decay_scale, const void* b,
                                      void* decay, void* beta, int64_t n, int64_t h,
                                      cudaStream_t stream);
// GatedRMSNorm (math/vector_norms.h) of `groups` groups of c elements.
cudaError_t LaunchGatedRmsNorm(FloatKind k, const void* x, const void* scale, const void* gate,
                               void* y, int64_t groups, int64_t c, float epsilon, bool silu,
                               cudaStream_t stream);
// LpNormalization of `lines` lines of `count` elements `inner` apart.
cudaError_t LaunchLpNormalize(FloatKind k, const void* x, void* y, int64_t lines, int64_t count,
                              int64_t inner, int p, cudaStream_t stream);
// For i in [begin, end): every out[j][i] = the ranks' in[k][i] combined (op 0 sum, 1 max,
// 2 min; `average` divides the sum by n).
cudaError_t LaunchReduceRanks(FloatKind k, int op, bool average, const math::RankPointers& p,
                              int64_t begin, int64_t end, cudaStream_t stream);
// CausalConvWithState (math/causal_conv.h): y [B, C, L] and, when present is not null,
// the present state [B, C, S], all of kind k (bias and past may be null).
cudaError_t LaunchCausalConv(FloatKind k, const math::CausalConvLayout& l, const void* x,
                             const void* w, const void* bias, const void* past, void* y,
                             void* present, cudaStream_t stream);
// MoE (math/moe.h) on the device: `router`, `input`, the experts' weights and biases
// (biases may be null) and `output` of kind k; scratch: experts (int64) and weights (f32)
// [tokens · k], hidden (f32) [tokens · k, fc1_rows], act (f32) [tokens · k, inter], slots
// (f32) [tokens · k, hidden]. QMoE (`quantized`): fc1 and fc2 are uint8 codes with scales
// of kind k, dequantized as math::MoeQuantWeight reads them.
struct MoeOperands {
  const void *input = nullptr, *router = nullptr, *fc1 = nullptr, *fc1_bias = nullptr;
  // FC2's input rows (the activations) rounded to int8 per block of this many first
  // (math::MoeInt8Activations; 0: not). FC1's the caller rounds (RunMoe).
  int64_t fc2_round_block = 0;
  const void *fc2 = nullptr, *fc2_bias = nullptr;
  void* output = nullptr;
  int64_t* experts = nullptr;
  float *weights = nullptr, *hidden = nullptr, *act = nullptr, *slots = nullptr;
  bool quantized = false;
  const void *fc1_scales = nullptr, *fc2_scales = nullptr;
  math::MoeQuant fc1_quant, fc2_quant;
};
cudaError_t LaunchMoe(FloatKind k, const math::MoeLayout& l, const MoeOperands& o,
                      cudaStream_t stream);
// MatMulNBits for `rows` rows of A (1 to kGemvRows; a decode step): y [rows, N] = A [rows,
// K] · Wᵀ (+ bias [N], may be null), all of kind k but the codes, the codes read once (no
// dequantized copy). Scales and zero points as LaunchDequantNBits takes them.
constexpr int64_t kGemvRows = 8;
cudaError_t LaunchNBitsGemv(FloatKind k, int64_t rows, const math::NBitsLayout& l, const void* a,
                            const uint8_t* b, const void* scales, const uint8_t* zp_packed,
                            const void* zp_float, const void* bias, void* y, cudaStream_t stream);
// Activations rounded to int8 per block (MatMulNBits at accuracy_level 4, QMoE's 8-bit
// block codes): rounded [rows, cols] (kind k) = a [rows, cols] rounded per block of `block`
// along cols (the last may be partial), times the block's scale (math::Int8Rounded), for
// the GEMV or the GEMM to take in A's place. `rounded` may be `a`.
cudaError_t LaunchInt8RoundRows(FloatKind k, int64_t rows, int64_t cols, int64_t block,
                                const void* a, void* rounded, cudaStream_t stream);
// MatMulNBits' weight dequantized: w [N, K] (kind k) = (code - zero point) · scale; the
// scales (and float zero points, when `zp_float`) of kind k, one per (n, block); packed
// uint8 zero points in `zp_packed` (either may be null).
cudaError_t LaunchDequantNBits(FloatKind k, const math::NBitsLayout& l, const uint8_t* b,
                               const void* scales, const uint8_t* zp_packed, const void* zp_float,
                               void* w, cudaStream_t stream);
// GatherBlockQuantized: y [n_indices, K] (kind k) = the table's rows (MatMulNBits' layout
// l: uint8 codes, scales of kind k, packed zero points or null) at `indices` (int64 or
// int32), dequantized; an index out of range sets *flag to `code` as LaunchGather does.
cudaError_t LaunchNBitsGatherRows(FloatKind k, const math::NBitsLayout& l, const uint8_t* table,
                                  const void* indices, bool indices_i64, int64_t n_indices,
                                  const void* scales, const uint8_t* zp_packed, void* y, int* flag,
                                  int code, cudaStream_t stream);
// y[i] = op(y[i] + bias[i % n]) in place over rows of n (bias of kind k, may be null): a
// GEMM's epilogue.
cudaError_t LaunchBiasActivation(FloatKind k, UnaryOp op, const void* bias, int64_t n, void* y,
                                 int64_t count, cudaStream_t stream);
// Llama's rotate_half embedding over contiguous rows of d of x (count elements): y = x·cos
// + rotate_half(x)·sin, cos and sin read through views over x's dims.
cudaError_t LaunchRotaryHalf(FloatKind k, const void* x, const void* cos, const StridedView& vc,
                             const void* sin, const StridedView& vs, int64_t d, void* y,
                             int64_t count, cudaStream_t stream);
// The attention core's softmax: `rows` contiguous rows of `len` f32 scores (products
// already multiplied by the scale when it multiplies) → probabilities of kind k in
// `probs` (may be `scores` when k is f32): softmax(score / divisor + mask). Row r's mask
// values (kind k; mask may be null) start at mask + mask_rows.At(first_row + r) and step
// `mask_col`.
cudaError_t LaunchAttentionSoftmax(FloatKind k, const float* scores, void* probs, int64_t rows,
                                   int64_t len, float divisor, const void* mask,
                                   const StridedView& mask_rows, int64_t first_row,
                                   int64_t mask_col, cudaStream_t stream);
// The attention core by tiles of keys on the tensor cores (flash_attention.cu), f16 and
// bf16: Y [count, s, dv] = softmax(Q·Kᵀ · alpha / divisor + mask)·V without the scores
// in global memory. Batch entry b reads Q at (b / fold)·q_stride + (b % fold)·s·d (GQA:
// `fold` query heads against one K and V), K and V at (b / fold) times their strides
// (0: one for all); K is [t, d], or [d, t] when k_transposed; the mask (may be null,
// of the inputs' type) of row i at mask_rows.At(b·s + i), its keys mask_col apart.
struct FlashAttention {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* mask = nullptr;
  void* y = nullptr;
  int64_t count = 0, fold = 1, s = 0, t = 0, d = 0, dv = 0;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0;
  bool k_transposed = false;
  float alpha = 1.0f, divisor = 1.0f;
  StridedView mask_rows;
  int64_t mask_col = 0;
};
// Whether the tiled kernel takes `p`: d and dv at most 128, at most 65535 batch entries,
// nothing empty.
bool FlashAttentionFits(const FlashAttention& p);
cudaError_t LaunchFlashAttention(FloatKind k, const FlashAttention& p, cudaStream_t stream);
// Softmax (or LogSoftmax) of each row.
cudaError_t LaunchSoftmax(FloatKind k, const void* x, void* y, const RowLayout& rows, bool log,
                          cudaStream_t stream);
// Normalizes contiguous rows of `len`: (x - mean) · inv_std · scale + bias, or the RMS
// norm (`rms`: no mean, no bias). scale and bias (may be null) have `len` elements of
// kind `k`. mean and inv_std (f32, may be null) get one value per row.
cudaError_t LaunchNorm(FloatKind k, const void* x, const void* scale, const void* bias, void* y,
                       float* mean, float* inv_std, int64_t rows, int64_t len, float epsilon,
                       bool rms, cudaStream_t stream);
// GroupNormalization and InstanceNormalization: `rows` rows of g.len() elements, each
// normalized by its moments, then scaled and shifted by its elements' math::ChannelGroups
// entries of scale and bias.
cudaError_t LaunchGroupNorm(FloatKind k, const void* x, const void* scale, const void* bias,
                            void* y, int64_t rows, const math::ChannelGroups& g, float epsilon,
                            cudaStream_t stream);
// LRN over n elements of [N, channels, plane] (math::LrnElement).
cudaError_t LaunchLrn(FloatKind k, const void* x, void* y, int64_t channels, int64_t plane,
                      int64_t size, float alpha, float beta, float bias, int64_t n,
                      cudaStream_t stream);
// MeanVarianceNormalization over n elements of x: element i normalized by the f32 mean
// and sum of squared deviations (over `count` elements) at `stats.At(i)`
// (math::MvnElement).
cudaError_t LaunchMvn(FloatKind k, const void* x, const float* mean, const float* sum_squares,
                      const StridedView& stats, float count, void* y, int64_t n,
                      cudaStream_t stream);
// BatchNormalization in inference over n elements of [N, channels, plane]: each element
// normalized by its channel's running mean and variance, then scaled and shifted.
cudaError_t LaunchBatchNorm(FloatKind k, const void* x, const void* scale, const void* bias,
                            const void* mean, const void* var, void* y, int64_t channels,
                            int64_t plane, float epsilon, int64_t n, cudaStream_t stream);
// y[r] = reduce of row r, one value per row; x of kind `in`, y of kind `out` (a
// multi-axis reduction's partial totals in f32).
cudaError_t LaunchReduce(FloatKind in, FloatKind out, math::ReducePass op, const void* x, void* y,
                         const RowLayout& rows, cudaStream_t stream);
// y[r] = reduce of row r, one value per row.
cudaError_t LaunchReduce(FloatKind k, math::ReducePass op, const void* x, void* y,
                         const RowLayout& rows, cudaStream_t stream);
// TopK along the middle dim of [outer, len, inner]: values (kind k) and int64 indices
// [outer, top, inner], ranked by math::TopKBefore; top ≤ len.
cudaError_t LaunchTopK(FloatKind k, const void* x, void* values, int64_t* indices,
                       const RowLayout& lines, int64_t top, bool largest, cudaStream_t stream);
// Hardmax of each row: 1 at the row's maximum (its first index, math::ArgChoose), else 0.
cudaError_t LaunchHardmax(FloatKind k, const void* x, void* y, const RowLayout& rows,
                          cudaStream_t stream);
// y[r] = the index in row r of its maximum (`max`) or minimum (math::ArgChoose); rows of at
// least one element.
cudaError_t LaunchArgReduce(FloatKind k, const void* x, int64_t* y, const RowLayout& rows, bool max,
                            bool last, cudaStream_t stream);

// Einsum: n output elements, each the plan's sum of products of the operands (kind k, as
// many as plan.operands) (math::EinsumElement).
cudaError_t LaunchEinsum(FloatKind k, const math::EinsumPlan& plan, const void* const* operands,
                         void* y, int64_t n, cudaStream_t stream);
// The integer types of linear quantization (the storage of QuantizeLinear's output and
// DequantizeLinear's input).
enum class QuantType : int { kU8, kI8, kU16, kI16, kI32 };
// QuantizeLinear of n f32 elements: y[i] = saturate(rint(x[i] / scale[q(i)]) +
// zero_point[q(i)]) (math::QuantizeElement); no zero point: 0.
cudaError_t LaunchQuantize(QuantType t, const float* x, const float* scale, const void* zero_point,
                           const math::QuantIndex& q, void* y, int64_t n, cudaStream_t stream);
// DequantizeLinear of n elements: y[i] = (x[i] − zero_point[q(i)]) · scale[q(i)], the scale
// and y of kind k (math::DequantizeElement).
cudaError_t LaunchDequantize(FloatKind k, QuantType t, const void* x, const void* scale,
                             const void* zero_point, const math::QuantIndex& q, void* y, int64_t n,
                             cudaStream_t stream);
// DynamicQuantizeLinear of n f32 elements given `extremes` = {min x, max x} on the device:
// y as uint8, and the scale and zero point (math::DynamicQuantParams) written once.
cudaError_t LaunchDynamicQuantize(const float* x, const float* extremes, uint8_t* y, float* scale,
                                  uint8_t* zero_point, int64_t n, cudaStream_t stream);

// An integer operand of n elements as f64, minus its zero point at vz(i) (none: 0).
cudaError_t LaunchCenter(QuantType t, const void* x, const void* zero_point, const StridedView& vz,
                         double* out, int64_t n, cudaStream_t stream);
// y[i] = the exact product c[i] wrapped to int32 (math::WrapInt32).
cudaError_t LaunchWrapInt32(const double* c, int32_t* y, int64_t n, cudaStream_t stream);
// QLinearMatMul's and QLinearConv's f32 scales, the output's zero point and
// QLinearConv's bias, each through its broadcast view over the product ([batch..., M, N],
// or [N, M, outs]).
struct QLinearParams {
  const float *a_scale, *b_scale, *y_scale;
  const int32_t* bias;  // QLinearConv's B [M] (added to the product), or null
  StridedView va, vb, vy, vz, vbias;
};
// y[i] = saturate(rint(c[i] · a_scale · b_scale / y_scale + y_zero_point)) of type t
// (math::RequantizeElement).
cudaError_t LaunchRequantize(QuantType t, const double* c, const QLinearParams& p,
                             const void* y_zero_point, void* y, int64_t n, cudaStream_t stream);

// GridSample: n elements of Y [N, C, out points] (math::GridSampleElement).
cudaError_t LaunchGridSample(FloatKind k, const math::GridSampleGeometry& g, const void* x,
                             const void* grid, void* y, int64_t n, cudaStream_t stream);
// AffineGrid's spatial dims (2 or 3) and their product.
struct AffineDims {
  int64_t dims[3] = {};
  int64_t points = 0;
};
// AffineGrid: n elements of grid [N, S1..Sr, r] from theta [N, r, r + 1]
// (math::AffineGridElement).
cudaError_t LaunchAffineGrid(FloatKind k, int r, const AffineDims& dims, bool align_corners,
                             const void* theta, void* grid, int64_t n, cudaStream_t stream);

// EyeLike: n elements of [rows, cols] of `bytes` bytes each, `one_bits` on diagonal k and
// zero elsewhere (math::EyeLikeOne).
cudaError_t LaunchEyeLike(int bytes, uint64_t one_bits, int64_t cols, int64_t k, void* y, int64_t n,
                          cudaStream_t stream);
// OneHot: n elements of y [outer, depth, inner], each values[1] where its index (int64 or
// int32) hits, else values[0] (math::OneHotHit).
cudaError_t LaunchOneHot(int bytes, const void* indices, bool indices_i64, const void* values,
                         int64_t depth, int64_t inner, void* y, int64_t n, cudaStream_t stream);

// RoiAlign: n cells of y [R, C, out_h, out_w] from x [images, C, H, W], rois [R, 4] (kind
// k) and batch_indices [R] (int64 or int32, on the device); a batch index out of range sets
// *flag to `code` (math::RoiAlignCell).
cudaError_t LaunchRoiAlign(FloatKind k, const math::RoiAlignParams& p, const void* x,
                           int64_t images, const void* rois, const void* batch, bool batch_i64,
                           void* y, int64_t n, int* flag, int code, cudaStream_t stream);

// Det: the determinants of `count` m × m matrices of x into y (kind k), each eliminated in
// its slice of `scratch` (count · m² doubles) (math::LuDeterminant).
cudaError_t LaunchDet(FloatKind k, const void* x, double* scratch, int64_t m, void* y,
                      int64_t count, cudaStream_t stream);

// DeformConv's columns of one image: col [C · taps, oh · ow] (kind k) from its X [C, H, W],
// offsets and mask (may be null) (math::DeformColElement).
cudaError_t LaunchDeformCol(FloatKind k, const math::DeformGeometry& g, const void* x,
                            const void* offset, const void* mask, void* col, cudaStream_t stream);

// DFT: n elements of y [outer, bins, inner, 2], n / 2 bins (math::DftOutputBin).
cudaError_t LaunchDft(FloatKind k, const math::DftLayout& l, const void* x, void* y, int64_t n,
                      cudaStream_t stream);
// STFT: n elements of y [batch, frames, bins, 2], n / 2 bins; the window (kind k) may be
// null (math::StftOutputBin).
cudaError_t LaunchStft(FloatKind k, const math::StftLayout& l, const void* x, const void* window,
                       void* y, int64_t n, cudaStream_t stream);

// One step s of one direction d of a recurrent operator, every buffer f32 on the device:
// the input projection xw [seq, batch, gates · hidden] (X·Wᵀ, layout 0), the step's hidden
// projection hr [batch, gates · hidden], the biases wb and rb (gates · hidden each, or
// null), GRU's rh [batch, hidden] ((r ⊙ H)·Rhᵀ; null otherwise), LSTM's peepholes
// (3 · hidden, or null), the states h and c [batch, hidden] (updated in place; c null but
// for LSTM), Y [seq, dirs, batch, hidden], and the int32 sequence lengths (null: all seq).
struct RecurrentStep {
  int64_t s = 0, seq = 0, batch = 0, dirs = 1, d = 0;
  bool reverse = false;
  const float *xw = nullptr, *hr = nullptr, *wb = nullptr, *rb = nullptr, *rh = nullptr,
              *peep = nullptr;
  const int32_t* lens = nullptr;
  float *h = nullptr, *c = nullptr, *y = nullptr;
};
// Sets *flag to `code` if a sequence length is outside [0, seq] (where no step kernel runs
// to check them: no step, or no hidden unit).
cudaError_t LaunchCheckLengths(const int32_t* lens, int64_t batch, int64_t seq, int* flag, int code,
                               cudaStream_t stream);
// GRU without linear_before_reset: reset [batch, hidden] = r ⊙ H of the step (0 for an
// entry that has ended) (math::GruReset). A length out of range sets *flag to `code`.
cudaError_t LaunchGruReset(const math::CellParams& p, const RecurrentStep& a, float* reset,
                           int* flag, int code, cudaStream_t stream);
// The step's new states and Y row (math::CellStep).
cudaError_t LaunchRecurrentStep(const math::CellParams& p, const RecurrentStep& a, int* flag,
                                int code, cudaStream_t stream);

}  // namespace tpc::runtime::cuda
