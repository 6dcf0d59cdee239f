// onnxruntime's MoE and QMoE on the device (moe.cu): the routing, each chosen expert's FC1
// and FC2 as GEMVs of the tokens that chose it (QMoE's codes dequantized as they are read),
// the activation and the weighted sum, with the intermediate rows in f32 scratch, a chunk
// of tokens at a time.
#include <algorithm>
#include <cstdint>

#include "ops.h"

namespace tpc::runtime::cuda {
namespace {

// The f32 scratch of one launch (a long prompt's tokens go in chunks): 64 MiB.
constexpr int64_t kMoeScratchBytes = int64_t{64} << 20;

// The MoE of `l` on the input and router (inputs 0 and 1) into output 0, the experts'
// weights and biases as `base` holds them (its scratch and chunk pointers filled here).
// fc1_round_block > 0: the input rows rounded to int8 per block of that many first
// (math::MoeInt8Activations).
absl::Status RunMoe(KernelContext& ctx, const math::MoeLayout& l, MoeOperands base,
                    int64_t fc1_round_block = 0) {
  const Tensor& x = ctx.input(0);
  TPC_ASSIGN_OR_RETURN(FloatKind kind, FloatKindOf(ctx, x.dtype()));
  TPC_ASSIGN_OR_RETURN(Tensor * y, ctx.Output(0, x.shape(), x.dtype()));
  if (l.tokens == 0) return absl::OkStatus();
  // The tokens a launch takes: its f32 scratch (a slot's FC1 row, activation and FC2
  // row, its expert and weight) within kMoeScratchBytes, at least one token.
  const int64_t slot_bytes = 4 * (l.fc1_rows() + l.inter + l.hidden) + 12;
  const int64_t chunk =
      std::min(l.tokens, std::max<int64_t>(1, kMoeScratchBytes / (slot_bytes * l.k)));
  const int64_t slots = chunk * l.k;
  TPC_ASSIGN_OR_RETURN(Tensor experts, Scratch(ctx, ir::DType::kI64, {slots}));
  TPC_ASSIGN_OR_RETURN(Tensor weights, Scratch(ctx, ir::DType::kF32, {slots}));
  TPC_ASSIGN_OR_RETURN(Tensor hidden, Scratch(ctx, ir::DType::kF32, {slots, l.fc1_rows()}));
  TPC_ASSIGN_OR_RETURN(Tensor act, Scratch(ctx, ir::DType::kF32, {slots, l.inter}));
  TPC_ASSIGN_OR_RETURN(Tensor outs, Scratch(ctx, ir::DType::kF32, {slots, l.hidden}));
  Tensor rounded;
  if (fc1_round_block > 0) {
    TPC_ASSIGN_OR_RETURN(rounded, Scratch(ctx, x.dtype(), {chunk, l.hidden}));
  }
  const size_t es = static_cast<size_t>(ir::DTypeSize(x.dtype()));
  for (int64_t first = 0; first < l.tokens; first += chunk) {
    math::MoeLayout part = l;
    part.tokens = std::min(chunk, l.tokens - first);
    MoeOperands o = base;
    o.input = static_cast<const uint8_t*>(x.raw()) + static_cast<size_t>(first * l.hidden) * es;
    if (fc1_round_block > 0) {
      TPC_RETURN_IF_ERROR(
          Check(ctx, LaunchInt8RoundRows(kind, part.tokens, l.hidden, fc1_round_block, o.input,
                                         rounded.raw(), StreamOf(ctx))));
      o.input = rounded.raw();
    }
    o.router = static_cast<const uint8_t*>(ctx.input(1).raw()) +
               static_cast<size_t>(first * l.experts) * es;
    o.output = static_cast<uint8_t*>(y->raw()) + static_cast<size_t>(first * l.hidden) * es;
    o.experts = experts.data<int64_t>();
    o.weights = weights.data<float>();
    o.hidden = hidden.data<float>();
    o.act = act.data<float>();
    o.slots = outs.data<float>();
    TPC_RETURN_IF_ERROR(Check(ctx, LaunchMoe(kind, part, o, StreamOf(ctx))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MoE(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const math::MoeLayout l, cpu::ReadMoeLayout(ctx));
  MoeOperands o;
  o.fc1 = ctx.input(2).raw();
  o.fc1_bias = RawOrNull(ctx.optional_input(3));
  o.fc2 = ctx.input(4).raw();
  o.fc2_bias = RawOrNull(ctx.optional_input(5));
  return RunMoe(ctx, l, o);
}

absl::Status QMoE(KernelContext& ctx) {
  TPC_ASSIGN_OR_RETURN(const cpu::QMoeLayout q, cpu::ReadQMoeLayout(ctx));
  MoeOperands o;
  o.quantized = true;
  o.fc1 = ctx.input(2).raw();
  o.fc1_scales = ctx.input(3).raw();
  o.fc1_bias = RawOrNull(ctx.optional_input(4));
  o.fc2 = ctx.input(5).raw();
  o.fc2_scales = ctx.input(6).raw();
  o.fc2_bias = RawOrNull(ctx.optional_input(7));
  o.fc1_quant = q.fc1;
  o.fc2_quant = q.fc2;
  // 8-bit codes in blocks: each FC's input rounded to int8 per block (as the CPU kernel).
  if (math::MoeInt8Activations(q.fc2)) o.fc2_round_block = q.fc2.block;
  return RunMoe(ctx, q.moe, o, math::MoeInt8Activations(q.fc1) ? q.fc1.block : 0);
}

}  // namespace tpc::runtime::cuda
