// Internal to the CUDA backend: the kernel functions registry.cc puts in its table and
// the helpers they share. Shapes are worked out with the CPU backend's geometry helpers
// (cpu/kernels.h), so both backends accept and refuse the same inputs.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <optional>
#include <vector>

#include "../cpu/kernels.h"
#include "../cpu/window.h"
#include "cuda_backend.h"
#include "tpc/runtime/cuda/launch.h"
#include "tpc/runtime/kernel.h"
#include "tpc/runtime/math/gemm.h"

namespace tpc::runtime::cuda {

using cpu::Shape;

inline CudaBackend& BackendOf(const KernelContext& ctx) {
  return static_cast<CudaBackend&>(ctx.backend());
}
inline cudaStream_t StreamOf(const KernelContext& ctx) { return BackendOf(ctx).stream(); }

// The float kind of f32/f16/bf16; nullopt for other types.
std::optional<FloatKind> KindOf(ir::DType t);
// The same, or an error naming the node.
absl::StatusOr<FloatKind> FloatKindOf(const KernelContext& ctx, ir::DType t);
// An error naming the node when a launch failed.
absl::Status Check(const KernelContext& ctx, cudaError_t e);
// Device memory for a kernel's temporaries, given back when the holder goes.
absl::StatusOr<Tensor> Scratch(const KernelContext& ctx, ir::DType dtype, const Shape& shape);
// An error naming the node when `rank` is over the kernels' math::kMaxDims (movement_ops.cc).
absl::Status CheckRank(const KernelContext& ctx, size_t rank);

// One row-major product, batched by strides (math/gemm.h).
using math::Gemm2D;
// `g` through cuBLAS (or cuBLASLt, opt-in: RunLtGemm), f32 accumulation (no TF32): A and
// B of kind `kind`, Y of kind `out` (the same, or f32 where A and B are f16 or bf16).
absl::Status RunGemm(const KernelContext& ctx, FloatKind kind, FloatKind out, const Gemm2D& g,
                     const void* a, const void* b, void* c);
absl::Status RunGemm(const KernelContext& ctx, FloatKind kind, const Gemm2D& g, const void* a,
                     const void* b, void* c);
// cuBLAS's element type of a float kind.
cudaDataType_t CudaType(FloatKind k);
// `g` through cuBLASLt (lt_gemm.cc), with the bias (n values of the kind, may be null)
// and the activation applied by its epilogue where it has that one (bias, GELU: its
// tanh approximation) and `g` is one product of Y of the operands' kind. False when
// cuBLASLt is not for this call: another activation, a matrix shared by a batch, k = 0,
// no algorithm, a refused call; the caller then runs the cuBLAS GEMM (and its own
// epilogue kernel). RunGemm takes it when CublasLtWanted().
absl::StatusOr<bool> RunLtGemm(const KernelContext& ctx, FloatKind kind, FloatKind out,
                               const Gemm2D& g, const void* a, const void* b, void* c,
                               const void* bias, UnaryOp act);
// TPC_CUBLASLT=1, read once: the float GEMMs through cuBLASLt until a GPU has run it.
bool CublasLtWanted();
// `g` in f64 through cuBLAS (alpha and beta as doubles): the integer products, whose
// centered 8- and 16-bit operands multiply and sum exactly in f64.
absl::Status RunGemmF64(const KernelContext& ctx, const Gemm2D& g, const double* a, const double* b,
                        double* c);
// The product of `g` (elements of `bytes` each; K > 0) as one GEMM over A's rows where B is
// shared, one strided batch where each operand is a full batch or one matrix, else one GEMM
// per output matrix; `gemm` runs each with its operands' addresses.
absl::Status RunMatMul(
    const cpu::MatMulShape& g, size_t bytes, const void* a, const void* b, void* y,
    const std::function<absl::Status(const Gemm2D&, const void*, const void*, void*)>& gemm);

// pointwise_ops.cc
absl::Status Add(KernelContext& ctx);
absl::Status Sub(KernelContext& ctx);
absl::Status Mul(KernelContext& ctx);
// out = op over the inputs (broadcast), folded left to right into the output.
absl::Status RunBinary(KernelContext& ctx, BinaryOp op);
// y = op(x) element by element, x and y of one float type.
absl::Status RunUnary(KernelContext& ctx, UnaryOp op, UnaryParams params = {});
absl::Status Div(KernelContext& ctx);
// onnxruntime's GatedAdd (plain mode): Y · gate, then X + that, each rounded to the type.
absl::Status GatedAdd(KernelContext& ctx);
absl::Status Pow(KernelContext& ctx);
absl::Status Max(KernelContext& ctx);
absl::Status Min(KernelContext& ctx);
absl::Status Relu(KernelContext& ctx);
absl::Status Tanh(KernelContext& ctx);
absl::Status Erf(KernelContext& ctx);
absl::Status Exp(KernelContext& ctx);
absl::Status Log(KernelContext& ctx);
absl::Status Sqrt(KernelContext& ctx);
absl::Status Neg(KernelContext& ctx);
absl::Status Abs(KernelContext& ctx);
absl::Status Reciprocal(KernelContext& ctx);
absl::Status Sigmoid(KernelContext& ctx);
absl::Status Sin(KernelContext& ctx);
absl::Status Cos(KernelContext& ctx);
absl::Status Gelu(KernelContext& ctx);
absl::Status LeakyRelu(KernelContext& ctx);
absl::Status FastGelu(KernelContext& ctx);
absl::Status BiasGelu(KernelContext& ctx);
absl::Status QuickGelu(KernelContext& ctx);
absl::Status Where(KernelContext& ctx);
absl::Status Cast(KernelContext& ctx);

// conv_ops.cc: a convolution's or pool's window (cpu::MakeWindow) as a kernel argument;
// 1 to 3 spatial dims.
absl::StatusOr<math::ConvGeometry> WindowGeometry(const KernelContext& ctx, const cpu::Window& win);

// A convolution of elements of type `dt` (f32, f16, bf16, or f64 for the integer ones) as
// per image and group an im2col (skipped for a 1x1 window read once in order) and one GEMM
// Y[M/g, outs] = W[M/g, C/g · taps] · col, each run by `gemm`.
absl::Status RunConvGemms(
    const KernelContext& ctx, const cpu::ConvShape& shape, const math::ConvGeometry& g,
    ir::DType dt, const void* x, const void* w, void* y,
    const std::function<absl::Status(const Gemm2D&, const void*, const void*, void*)>& gemm);

// resize_ops.cc: Resize and Upsample (one kernel: cpu::ReadResize tells them apart).
absl::Status Resize(KernelContext& ctx);

// pool_ops.cc: MaxPool (and its Indices), AveragePool, LpPool.
absl::Status MaxPool(KernelContext& ctx);
absl::Status AveragePool(KernelContext& ctx);
absl::Status LpPool(KernelContext& ctx);

// channel_norm_ops.cc: the norms of images [N, C, ...].
absl::Status BatchNormalization(KernelContext& ctx);
absl::Status InstanceNormalization(KernelContext& ctx);
absl::Status GroupNormalization(KernelContext& ctx);
absl::Status LRN(KernelContext& ctx);

// recurrent_ops.cc
absl::Status RNN(KernelContext& ctx);
absl::Status GRU(KernelContext& ctx);
absl::Status LSTM(KernelContext& ctx);

// einsum_ops.cc
absl::Status Einsum(KernelContext& ctx);

// generator_ops.cc
absl::Status EyeLike(KernelContext& ctx);
absl::Status OneHot(KernelContext& ctx);

// sampling_ops.cc
absl::Status GridSample(KernelContext& ctx);
absl::Status AffineGrid(KernelContext& ctx);
absl::Status RoiAlign(KernelContext& ctx);
absl::Status DFT(KernelContext& ctx);
absl::Status STFT(KernelContext& ctx);

// quantize_ops.cc: linear quantization over u8 i8 u16 i16 i32.
absl::Status QuantizeLinear(KernelContext& ctx);
absl::Status DequantizeLinear(KernelContext& ctx);
absl::Status DynamicQuantizeLinear(KernelContext& ctx);
absl::Status MatMulInteger(KernelContext& ctx);
absl::Status QLinearMatMul(KernelContext& ctx);
absl::Status ConvInteger(KernelContext& ctx);
absl::Status QLinearConv(KernelContext& ctx);

// unary_ops.cc: the math functions and activations of ONNX with their attributes (and
// Clip's bounds), Mod, PRelu, Sum and Mean, through RunUnary and RunBinary.
absl::Status Tan(KernelContext& ctx);
absl::Status Asin(KernelContext& ctx);
absl::Status Acos(KernelContext& ctx);
absl::Status Atan(KernelContext& ctx);
absl::Status Sinh(KernelContext& ctx);
absl::Status Cosh(KernelContext& ctx);
absl::Status Asinh(KernelContext& ctx);
absl::Status Acosh(KernelContext& ctx);
absl::Status Atanh(KernelContext& ctx);
absl::Status Ceil(KernelContext& ctx);
absl::Status Floor(KernelContext& ctx);
absl::Status Round(KernelContext& ctx);
absl::Status Sign(KernelContext& ctx);
absl::Status Softplus(KernelContext& ctx);
absl::Status Mish(KernelContext& ctx);
absl::Status Softsign(KernelContext& ctx);
absl::Status Elu(KernelContext& ctx);
absl::Status Selu(KernelContext& ctx);
absl::Status Celu(KernelContext& ctx);
absl::Status ThresholdedRelu(KernelContext& ctx);
absl::Status HardSigmoid(KernelContext& ctx);
absl::Status HardSwish(KernelContext& ctx);
absl::Status Shrink(KernelContext& ctx);
absl::Status Clip(KernelContext& ctx);
absl::Status Mod(KernelContext& ctx);
absl::Status PRelu(KernelContext& ctx);
absl::Status Sum(KernelContext& ctx);
absl::Status Mean(KernelContext& ctx);

// logic_ops.cc: bool outputs (comparisons of floats, IsNaN/IsInf) and logic on bools.
absl::Status Equal(KernelContext& ctx);
absl::Status Less(KernelContext& ctx);
absl::Status LessOrEqual(KernelContext& ctx);
absl::Status Greater(KernelContext& ctx);
absl::Status GreaterOrEqual(KernelContext& ctx);
absl::Status And(KernelContext& ctx);
absl::Status Or(KernelContext& ctx);
absl::Status Xor(KernelContext& ctx);
absl::Status Not(KernelContext& ctx);
absl::Status BitwiseAnd(KernelContext& ctx);
absl::Status BitwiseOr(KernelContext& ctx);
absl::Status BitwiseXor(KernelContext& ctx);
absl::Status BitwiseNot(KernelContext& ctx);
absl::Status BitShift(KernelContext& ctx);
absl::Status IsNaN(KernelContext& ctx);
absl::Status IsInf(KernelContext& ctx);

// movement_ops.cc
absl::Status Transpose(KernelContext& ctx);
absl::Status Dropout(KernelContext& ctx);
absl::Status DepthToSpace(KernelContext& ctx);
absl::Status SpaceToDepth(KernelContext& ctx);
absl::Status Pad(KernelContext& ctx);
absl::Status Trilu(KernelContext& ctx);
absl::Status Expand(KernelContext& ctx);
absl::Status Slice(KernelContext& ctx);
absl::Status Tile(KernelContext& ctx);
absl::Status Concat(KernelContext& ctx);
absl::Status Split(KernelContext& ctx);
absl::Status CenterCropPad(KernelContext& ctx);
absl::Status ReverseSequence(KernelContext& ctx);

// indexing_ops.cc
absl::Status Gather(KernelContext& ctx);
absl::Status GatherElements(KernelContext& ctx);
absl::Status GatherND(KernelContext& ctx);
absl::Status ScatterND(KernelContext& ctx);
absl::Status ScatterElements(KernelContext& ctx);
absl::Status MaxUnpool(KernelContext& ctx);

// rotary_ops.cc: RotaryEmbedding, ONNX's and onnxruntime's.
absl::Status RotaryEmbedding(KernelContext& ctx);
absl::Status MsRotaryEmbedding(KernelContext& ctx);
absl::Status MRotaryEmbedding(KernelContext& ctx);
// linear_attention_ops.cc: Gated DeltaNet's operators.
absl::Status LinearAttention(KernelContext& ctx);
absl::Status LinearAttentionGate(KernelContext& ctx);
absl::Status GatedRMSNorm(KernelContext& ctx);
absl::Status LpNormalization(KernelContext& ctx);

// row_ops.cc
absl::Status Softmax(KernelContext& ctx);
absl::Status LogSoftmax(KernelContext& ctx);
absl::Status LayerNormalization(KernelContext& ctx);
absl::Status RMSNormalization(KernelContext& ctx);
// onnxruntime's SkipLayerNormalization and SkipSimplifiedLayerNormalization (by op type).
absl::Status SkipLayerNormalization(KernelContext& ctx);
absl::Status ReduceSum(KernelContext& ctx);
absl::Status ReduceMean(KernelContext& ctx);
absl::Status ReduceMax(KernelContext& ctx);
absl::Status ReduceMin(KernelContext& ctx);
absl::Status ReduceProd(KernelContext& ctx);
absl::Status ArgMax(KernelContext& ctx);
absl::Status CumSum(KernelContext& ctx);
absl::Status TopK(KernelContext& ctx);
absl::Status Hardmax(KernelContext& ctx);
absl::Status ArgMin(KernelContext& ctx);
absl::Status ReduceSumSquare(KernelContext& ctx);
absl::Status ReduceL1(KernelContext& ctx);
absl::Status ReduceL2(KernelContext& ctx);
absl::Status ReduceLogSum(KernelContext& ctx);
absl::Status ReduceLogSumExp(KernelContext& ctx);
absl::Status GlobalAveragePool(KernelContext& ctx);
absl::Status GlobalMaxPool(KernelContext& ctx);
absl::Status GlobalLpPool(KernelContext& ctx);
absl::Status MeanVarianceNormalization(KernelContext& ctx);

// attention_ops.cc: ONNX's Attention, onnxruntime's GroupQueryAttention,
// MultiHeadAttention and Attention (MsAttention).
absl::Status Attention(KernelContext& ctx);
absl::Status GroupQueryAttention(KernelContext& ctx);
absl::Status MultiHeadAttention(KernelContext& ctx);
absl::Status MsAttention(KernelContext& ctx);

// conv_ops.cc
absl::Status Conv(KernelContext& ctx);
absl::Status ConvTranspose(KernelContext& ctx);
absl::Status Col2Im(KernelContext& ctx);
absl::Status DeformConv(KernelContext& ctx);

// loss_ops.cc
absl::Status SoftmaxCrossEntropyLoss(KernelContext& ctx);
absl::Status NegativeLogLikelihoodLoss(KernelContext& ctx);

// collective_ops.cc (a communicator on device memory)
absl::Status AllReduce(KernelContext& ctx);
absl::Status AllGather(KernelContext& ctx);
absl::Status ReduceScatter(KernelContext& ctx);
absl::Status AllToAll(KernelContext& ctx);
absl::Status Shard(KernelContext& ctx);

// matmul_ops.cc
absl::Status MatMul(KernelContext& ctx);
absl::Status Gemm(KernelContext& ctx);
// onnxruntime's GatherBlockQuantized (rows of MatMulNBits' codes, dequantized).
absl::Status GatherBlockQuantized(KernelContext& ctx);
// onnxruntime's MatMulNBits (2/4/8-bit block-quantized weights).
absl::Status MatMulNBits(KernelContext& ctx);
// onnxruntime's CausalConvWithState (conv_ops.cc).
absl::Status CausalConvWithState(KernelContext& ctx);
// An optional operand's data, or null.
inline const void* RawOrNull(const Tensor* t) { return t != nullptr ? t->raw() : nullptr; }
// onnxruntime's MoE and QMoE (mixtures of experts; moe_ops.cc).
absl::Status MoE(KernelContext& ctx);
absl::Status QMoE(KernelContext& ctx);
absl::Status Det(KernelContext& ctx);

// fused_ops.cc: the fusion pass's operators (tpc/runtime/fusion.h)
absl::Status FusedMatMul(KernelContext& ctx);
absl::Status AttentionCore(KernelContext& ctx);
absl::Status RotaryHalf(KernelContext& ctx);

}  // namespace tpc::runtime::cuda
