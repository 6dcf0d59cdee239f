// The fusion pass's operators on the GPU (tpc/runtime/fusion.h), f32, f16 and bf16, with
// the inputs the CPU kernels take (cpu::FusedActivation, AttentionInputs,
// RotaryHalfInputs):
// - tpc::FusedMatMul: the cuBLAS GEMM, then bias and activation in one pass over Y;
// - tpc::RotaryHalf: one element-wise kernel;
// - tpc::AttentionCore: per chunk of batch entries, S = Q·Kᵀ (· scale) into f32 scratch
//   by one strided batched GEMM, then one kernel per row for the scale, mask and softmax
//   (probabilities of the input type), then Y = P·V by a second GEMM. The scores are
//   written once in f32 (the chain wrote them, scaled, masked and normalized, four times
//   in its own type); chunks keep them under kScoreBytes.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "ops.h"
#include "tpc/runtime/math/attention_batches.h"

namespace tpc::runtime::cuda {
namespace {

// The scores of at most this many bytes exist at once (f32, a chunk of batch entries).
constexpr int64_t kScoreBytes = int64_t{256} << 20;

// TPC_FLASH_ATTENTION=1: f16 and bf16 attention cores take the tiled kernel
// (LaunchFlashAttention), read once.
bool FlashAttentionWanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("TPC_FLASH_ATTENTION");
    return v != nullptr && std::string_view(v) == "1";
  }();
  return wanted;
}

}  // namespace

absl::Status FusedMatMul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* bias = ctx.optional_input(2);
  if (a.dtype() != b.dtype() || b.rank() != 2 || a.rank() < 2) {
    return ctx.Error(absl::StrCat("takes [.., k] x [k, n] of one type, not ", a.TypeString(), " x ",
                                  b.TypeString()));
  }
  TPC_ASSIGN_OR_RETURN(const FloatKind kind, FloatKindOf(ctx, a.dtype()));
  TPC_ASSIGN_OR_RETURN(const UnaryOp act, cpu::FusedActivation(ctx));
  TPC_ASSIGN_OR_RETURN(const cpu::MatMulShape g, cpu::MatMulShapes(ctx, a, b));
  if (bias != nullptr && (bias->dtype() != a.dtype() || bias->num_elements() != g.n)) {
    return ctx.Error(absl::StrCat("bias ", bias->TypeString(), " is not ", g.n, " values of ",
                                  a.TypeString(), "'s type"));
  }
  if (ctx.output_dtype(0) != a.dtype()) {
    return ctx.Error(absl::StrCat("writes ", a.TypeString(), "'s type, not ",
                                  ir::DTypeName(ctx.output_dtype(0))));
  }
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out, a.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  if (g.k == 0) {
    TPC_RETURN_IF_ERROR(Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx))));
  } else {
    Gemm2D gm;  // every row of A against the one B
    gm.m = y->num_elements() / g.n;
    gm.n = g.n;
    gm.k = g.k;
    gm.lda = g.k;
    gm.ldb = g.n;
    gm.ldc = g.n;
    if (CublasLtWanted()) {  // bias and activation in cuBLASLt's epilogue where it can
      TPC_ASSIGN_OR_RETURN(const bool fused,
                           RunLtGemm(ctx, kind, kind, gm, a.raw(), b.raw(), y->raw(),
                                     bias != nullptr ? bias->raw() : nullptr, act));
      if (fused) return absl::OkStatus();
    }
    TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, kind, gm, a.raw(), b.raw(), y->raw()));
  }
  if (bias == nullptr && act == UnaryOp::kIdentity) return absl::OkStatus();
  return Check(ctx, LaunchBiasActivation(kind, act, bias != nullptr ? bias->raw() : nullptr, g.n,
                                         y->raw(), y->num_elements(), StreamOf(ctx)));
}

absl::Status RotaryHalf(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cos = ctx.input(1);
  const Tensor& sin = ctx.input(2);
  if (cos.dtype() != x.dtype() || sin.dtype() != x.dtype()) {
    return ctx.Error(absl::StrCat("x ", x.TypeString(), ", cos ", cos.TypeString(), " and sin ",
                                  sin.TypeString(), " differ in type"));
  }
  TPC_ASSIGN_OR_RETURN(const FloatKind kind, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(const int64_t d, cpu::RotaryHalfInputs(ctx));
  if (x.rank() > math::kMaxDims) return ctx.Error("rank over 8");
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  StridedView vx = math::ContiguousView(x.shape());
  StridedView vc = math::BroadcastView(cos.shape(), x.shape());
  StridedView vs = math::BroadcastView(sin.shape(), x.shape());
  math::Simplify({&vx, &vc, &vs});
  return Check(ctx, LaunchRotaryHalf(kind, x.raw(), cos.raw(), vc, sin.raw(), vs, d, y->raw(),
                                     y->num_elements(), StreamOf(ctx)));
}

absl::Status AttentionCore(KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.optional_input(3);
  for (const Tensor* t : {&k, &v, mask}) {
    if (t != nullptr && t->dtype() != q.dtype()) {
      return ctx.Error(
          absl::StrCat("Q ", q.TypeString(), " and ", t->TypeString(), " differ in type"));
    }
  }
  TPC_ASSIGN_OR_RETURN(const FloatKind kind, FloatKindOf(ctx, q.dtype()));
  TPC_ASSIGN_OR_RETURN(const cpu::AttentionGeometry g, cpu::AttentionInputs(ctx));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, g.out(), q.dtype()));
  if (y->num_elements() == 0) return absl::OkStatus();
  if (g.t == 0) {  // no keys: the softmax of nothing times V of nothing is 0
    return Check(ctx, cudaMemsetAsync(y->raw(), 0, y->nbytes(), StreamOf(ctx)));
  }
  const Shape& batch = g.batch;
  const int64_t count = cpu::NumElements(batch);
  if (static_cast<int>(batch.size()) + 1 > math::kMaxDims)
    return ctx.Error("more than 7 batch dims");
  // The mask's row starts over [batch.., s] and its column step.
  StridedView mask_rows;
  int64_t mask_col = 0;
  if (mask != nullptr) {
    Shape rows = batch;
    rows.push_back(g.s);
    mask_rows = math::ViewOf(rows, g.mask_strides);
    mask_col = g.mask_strides.back();
    math::Simplify({&mask_rows});
  }
  // GEMM entries of `fold` batch entries each (GQA's query heads of one K and V head).
  const math::AttentionBatches plan =
      math::PlanAttentionBatches(batch, g.bq, g.bk, g.bv, g.s, g.t, g.d, g.dv);
  // The tiled kernel (no scores in global memory), while it is opt-in: it has not run on a
  // GPU yet (docs/cuda.md).
  // Not for a decode step's few query rows: a block of the tiled kernel takes 32 or 64.
  if (kind != FloatKind::kF32 && g.s >= 16 && FlashAttentionWanted() && plan.q && plan.k &&
      plan.v) {
    FlashAttention f;
    f.q = q.raw();
    f.k = k.raw();
    f.v = v.raw();
    f.mask = mask != nullptr ? mask->raw() : nullptr;
    f.y = y->raw();
    f.count = count;
    f.fold = plan.fold;
    f.s = g.s;
    f.t = g.t;
    f.d = g.d;
    f.dv = g.dv;
    f.q_stride = *plan.q;
    f.k_stride = *plan.k;
    f.v_stride = *plan.v;
    f.k_transposed = g.k_transposed;
    f.alpha = g.divide ? 1.0f : g.scale;
    f.divisor = g.divide ? g.scale : 1.0f;
    f.mask_rows = mask_rows;
    f.mask_col = mask_col;
    if (FlashAttentionFits(f)) return Check(ctx, LaunchFlashAttention(kind, f, StreamOf(ctx)));
  }
  const int64_t per_entry = g.s * g.t;
  // A group whose scores would pass kScoreBytes is not stacked: one GEMM per entry.
  const bool stack = plan.fold == 1 || plan.fold * per_entry * 4 <= kScoreBytes;
  const int64_t fold = stack ? plan.fold : 1;
  const bool strided = stack && plan.q && plan.k && plan.v;
  const size_t es = static_cast<size_t>(ir::DTypeSize(q.dtype()));
  // Whole GEMM entries per chunk: a multiple of fold.
  const int64_t chunk =
      fold * std::clamp<int64_t>(kScoreBytes / std::max<int64_t>(fold * per_entry * 4, 1), 1,
                                 count / fold);
  TPC_ASSIGN_OR_RETURN(Tensor scores, Scratch(ctx, ir::DType::kF32, {chunk, g.s, g.t}));
  Tensor probs_scratch;
  if (kind != FloatKind::kF32) {
    TPC_ASSIGN_OR_RETURN(probs_scratch, Scratch(ctx, q.dtype(), {chunk, g.s, g.t}));
  }
  void* probs = kind == FloatKind::kF32 ? scores.raw() : probs_scratch.raw();

  // S = Q·Kᵀ: row-major [fold·s, d]·[d, t] (Kᵀ given) or [fold·s, d]·[t, d]ᵀ (K given).
  Gemm2D qk;
  qk.tb = !g.k_transposed;
  qk.m = fold * g.s;
  qk.n = g.t;
  qk.k = g.d;
  qk.lda = g.d;
  qk.ldb = g.k_transposed ? g.t : g.d;
  qk.ldc = g.t;
  qk.stride_c = fold * per_entry;
  qk.alpha = g.divide ? 1.0f : g.scale;
  // Y = P·V: [fold·s, t]·[t, dv].
  Gemm2D pv;
  pv.m = fold * g.s;
  pv.n = g.dv;
  pv.k = g.t;
  pv.lda = g.t;
  pv.ldb = g.dv;
  pv.ldc = g.dv;
  pv.stride_a = fold * per_entry;
  pv.stride_c = fold * g.s * g.dv;
  const cpu::BroadcastOffsets<3> at(batch,
                                    {cpu::Scaled(cpu::BroadcastStrides(g.bq, batch), g.s * g.d),
                                     cpu::Scaled(cpu::BroadcastStrides(g.bk, batch), g.t * g.d),
                                     cpu::Scaled(cpu::BroadcastStrides(g.bv, batch), g.t * g.dv)});
  const uint8_t* pq = q.raw();
  const uint8_t* pk = k.raw();
  const uint8_t* pvv = v.raw();
  uint8_t* py = y->raw();
  uint8_t* ps = scores.raw();
  uint8_t* pp = static_cast<uint8_t*>(probs);
  const size_t ps_es =
      static_cast<size_t>(ir::DTypeSize(kind == FloatKind::kF32 ? ir::DType::kF32 : q.dtype()));
  const auto bytes = [](int64_t elements, size_t size) {
    return static_cast<size_t>(elements) * size;
  };
  for (int64_t b0 = 0; b0 < count; b0 += chunk) {
    const int64_t nb = std::min(chunk, count - b0);  // a multiple of fold
    const int64_t e0 = b0 / fold, ne = nb / fold;    // its GEMM entries
    if (g.d == 0) {  // empty rows of Q and K: every product is 0 (cuBLAS refuses lda = 0)
      TPC_RETURN_IF_ERROR(
          Check(ctx, cudaMemsetAsync(ps, 0, bytes(nb * per_entry, 4), StreamOf(ctx))));
    } else if (strided) {
      qk.count = ne;
      qk.stride_a = *plan.q;
      qk.stride_b = *plan.k;
      TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, FloatKind::kF32, qk, pq + bytes(e0 * *plan.q, es),
                                  pk + bytes(e0 * *plan.k, es), ps));
    } else {  // some operand broadcast along some batch dims only: one GEMM per entry
      qk.count = 1;
      for (int64_t e = 0; e < ne; ++e) {
        [[maybe_unused]] const auto [oq, ok, ov] = at.At((e0 + e) * fold);
        TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, FloatKind::kF32, qk, pq + bytes(oq, es),
                                    pk + bytes(ok, es), ps + bytes(e * fold * per_entry, 4)));
      }
    }
    TPC_RETURN_IF_ERROR(Check(
        ctx,
        LaunchAttentionSoftmax(kind, scores.data<float>(), probs, nb * g.s, g.t,
                               g.divide ? g.scale : 1.0f, mask != nullptr ? mask->raw() : nullptr,
                               mask_rows, b0 * g.s, mask_col, StreamOf(ctx))));
    uint8_t* yb = py + bytes(b0 * g.s * g.dv, es);
    if (strided) {
      pv.count = ne;
      pv.stride_b = *plan.v;
      TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, pv, pp, pvv + bytes(e0 * *plan.v, es), yb));
    } else {
      pv.count = 1;
      for (int64_t e = 0; e < ne; ++e) {
        [[maybe_unused]] const auto [oq, ok, ov] = at.At((e0 + e) * fold);
        TPC_RETURN_IF_ERROR(RunGemm(ctx, kind, pv, pp + bytes(e * fold * per_entry, ps_es),
                                    pvv + bytes(ov, es), yb + bytes(e * fold * g.s * g.dv, es)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime::cuda
