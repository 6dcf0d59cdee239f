// The CPU backend and its kernel table: the one place that names operators.
#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kernels.h"
#include "tpc/runtime/backend.h"

namespace tpc::runtime {
namespace {

using namespace cpu;  // NOLINT(google-build-using-namespace): the kernel functions.

constexpr std::string_view kTpc = "tpc";
constexpr std::string_view kMicrosoft = "com.microsoft";

struct Entry {
  std::string_view domain;  // "" (ai.onnx), "tpc" or "com.microsoft"
  std::string_view op_type;
  Kernel kernel;
};

// `any` marks kernels that move f16/bf16 elements themselves (no f32 conversion).
constexpr bool any = true;

// Sorted by domain, then op type; one line per operator.
const Entry kKernels[] = {
    {"", "Abs", {Abs}},
    {"", "Acos", {Acos}},
    {"", "Acosh", {Acosh}},
    {"", "Add", {Add}},
    {"", "AffineGrid", {AffineGrid}},
    {"", "And", {And}},
    {"", "ArgMax", {ArgMax}},
    {"", "ArgMin", {ArgMin}},
    {"", "Asin", {Asin}},
    {"", "Asinh", {Asinh}},
    {"", "Atan", {Atan}},
    {"", "Atanh", {Atanh}},
    {"", "Attention", {Attention}},
    {"", "AveragePool", {AveragePool}},
    {"", "BatchNormalization", {BatchNormalization}},
    {"", "BitShift", {BitShift}},
    {"", "BitwiseAnd", {BitwiseAnd}},
    {"", "BitwiseNot", {BitwiseNot}},
    {"", "BitwiseOr", {BitwiseOr}},
    {"", "BitwiseXor", {BitwiseXor}},
    {"", "BlackmanWindow", {BlackmanWindow}},
    {"", "Cast", {Cast, any}},
    {"", "CastLike", {CastLike, any}},
    {"", "Ceil", {Ceil}},
    {"", "Celu", {Celu}},
    {"", "CenterCropPad", {CenterCropPad, any}},
    {"", "Clip", {Clip}},
    {"", "Col2Im", {Col2Im}},
    {"", "Compress", {Compress, any}},
    {"", "Concat", {Concat, any}},
    {"", "ConstantOfShape", {ConstantOfShape, any}},
    {"", "Conv", {Conv}},
    {"", "ConvInteger", {ConvInteger}},
    {"", "ConvTranspose", {ConvTranspose}},
    {"", "Cos", {Cos}},
    {"", "Cosh", {Cosh}},
    {"", "CumSum", {CumSum}},
    {"", "DFT", {DFT}},
    {"", "DeformConv", {DeformConv}},
    {"", "DepthToSpace", {DepthToSpace, any}},
    {"", "DequantizeLinear", {DequantizeLinear}},
    {"", "Det", {Det}},
    {"", "Div", {Div}},
    {"", "Dropout", {Dropout, any}},
    {"", "DynamicQuantizeLinear", {DynamicQuantizeLinear}},
    {"", "Einsum", {Einsum}},
    {"", "Elu", {Elu}},
    {"", "Equal", {Equal}},
    {"", "Erf", {Erf}},
    {"", "Exp", {Exp}},
    {"", "Expand", {Expand, any}},
    {"", "EyeLike", {EyeLike}},
    {"", "Flatten", {.fn = Flatten, .any_float = true, .view = true}},
    {"", "Floor", {Floor}},
    {"", "GRU", {GRU}},
    {"", "Gather", {Gather, any}},
    {"", "GatherElements", {GatherElements, any}},
    {"", "GatherND", {GatherND, any}},
    {"", "Gelu", {Gelu}},
    {"", "Gemm", {Gemm}},
    {"", "GlobalAveragePool", {GlobalAveragePool}},
    {"", "GlobalLpPool", {GlobalLpPool}},
    {"", "GlobalMaxPool", {GlobalMaxPool}},
    {"", "Greater", {Greater}},
    {"", "GreaterOrEqual", {GreaterOrEqual}},
    {"", "GridSample", {GridSample}},
    {"", "GroupNormalization", {GroupNormalization}},
    {"", "HammingWindow", {HammingWindow}},
    {"", "HannWindow", {HannWindow}},
    {"", "HardSigmoid", {HardSigmoid}},
    {"", "HardSwish", {HardSwish}},
    {"", "Hardmax", {Hardmax}},
    {"", "Identity", {.fn = Identity, .any_float = true, .view = true}},
    {"", "InstanceNormalization", {InstanceNormalization}},
    {"", "IsInf", {IsInf}},
    {"", "IsNaN", {IsNaN}},
    {"", "LRN", {LRN}},
    {"", "LSTM", {LSTM}},
    {"", "LayerNormalization", {LayerNormalization}},
    {"", "LeakyRelu", {LeakyRelu}},
    {"", "Less", {Less}},
    {"", "LessOrEqual", {LessOrEqual}},
    {"", "Log", {Log}},
    {"", "LogSoftmax", {LogSoftmax}},
    {"", "LpNormalization", {LpNormalization}},
    {"", "LpPool", {LpPool}},
    {"", "MatMul", {.fn = MatMul, .any_float = true}},
    {"", "MatMulInteger", {MatMulInteger}},
    {"", "Max", {Max}},
    {"", "MaxPool", {MaxPool}},
    {"", "MaxUnpool", {MaxUnpool}},
    {"", "Mean", {Mean}},
    {"", "MeanVarianceNormalization", {MeanVarianceNormalization}},
    {"", "MelWeightMatrix", {MelWeightMatrix}},
    {"", "Min", {Min}},
    {"", "Mish", {Mish}},
    {"", "Mod", {Mod}},
    {"", "Mul", {Mul}},
    {"", "Neg", {Neg}},
    {"", "NegativeLogLikelihoodLoss", {NegativeLogLikelihoodLoss}},
    {"", "NonMaxSuppression", {NonMaxSuppression}},
    {"", "NonZero", {NonZero}},
    {"", "Not", {Not}},
    {"", "OneHot", {OneHot}},
    {"", "Or", {Or}},
    {"", "PRelu", {PRelu}},
    {"", "Pad", {Pad, any}},
    {"", "Pow", {Pow}},
    {"", "QLinearConv", {QLinearConv}},
    {"", "QLinearMatMul", {QLinearMatMul}},
    {"", "QuantizeLinear", {QuantizeLinear}},
    {"", "RMSNormalization", {RMSNormalization}},
    {"", "RNN", {RNN}},
    {"", "Range", {Range}},
    {"", "Reciprocal", {Reciprocal}},
    {"", "ReduceL1", {Reduce}},
    {"", "ReduceL2", {Reduce}},
    {"", "ReduceLogSum", {Reduce}},
    {"", "ReduceLogSumExp", {Reduce}},
    {"", "ReduceMax", {Reduce}},
    {"", "ReduceMean", {Reduce}},
    {"", "ReduceMin", {Reduce}},
    {"", "ReduceProd", {Reduce}},
    {"", "ReduceSum", {Reduce}},
    {"", "ReduceSumSquare", {Reduce}},
    {"", "Relu", {Relu}},
    {"", "Reshape", {.fn = Reshape, .any_float = true, .view = true}},
    {"", "Resize", {Resize}},
    {"", "ReverseSequence", {ReverseSequence, any}},
    {"", "RoiAlign", {RoiAlign}},
    {"", "RotaryEmbedding", {RotaryEmbedding}},
    {"", "Round", {Round}},
    {"", "STFT", {STFT}},
    {"", "ScatterElements", {ScatterElements}},
    {"", "ScatterND", {ScatterND}},
    {"", "Selu", {Selu}},
    {"", "Shape", {.fn = Shape_, .any_float = true, .shape_only = true}},
    {"", "Shrink", {Shrink}},
    {"", "Sigmoid", {Sigmoid}},
    {"", "Sign", {Sign}},
    {"", "SimplifiedLayerNormalization", {RMSNormalization}},
    {"", "Sin", {Sin}},
    {"", "Sinh", {Sinh}},
    {"", "Size", {.fn = Size, .any_float = true, .shape_only = true}},
    {"", "Slice", {Slice, any}},
    {"", "Softmax", {Softmax}},
    {"", "SoftmaxCrossEntropyLoss", {SoftmaxCrossEntropyLoss}},
    {"", "Softplus", {Softplus}},
    {"", "Softsign", {Softsign}},
    {"", "SpaceToDepth", {SpaceToDepth, any}},
    {"", "Split", {Split, any}},
    {"", "Sqrt", {Sqrt}},
    {"", "Squeeze", {.fn = Squeeze, .any_float = true, .view = true}},
    {"", "Sub", {Sub}},
    {"", "Sum", {Sum}},
    {"", "Tan", {Tan}},
    {"", "Tanh", {Tanh}},
    {"", "TfIdfVectorizer", {TfIdfVectorizer}},
    {"", "ThresholdedRelu", {ThresholdedRelu}},
    {"", "Tile", {Tile, any}},
    {"", "TopK", {TopK}},
    {"", "Transpose", {Transpose, any}},
    {"", "Trilu", {Trilu, any}},
    {"", "Unique", {Unique}},
    {"", "Unsqueeze", {.fn = Unsqueeze, .any_float = true, .view = true}},
    {"", "Upsample", {Resize}},
    {"", "Where", {Where, any}},
    {"", "Xor", {Xor}},
    {kMicrosoft, "Attention", {MsAttention}},
    {kMicrosoft, "Gelu", {Gelu}},
    {kMicrosoft, "FastGelu", {FastGelu}},
    {kMicrosoft, "BiasGelu", {BiasGelu}},
    {kMicrosoft, "CausalConvWithState", {CausalConvWithState}},
    {kMicrosoft, "GatherBlockQuantized", {GatherBlockQuantized}},
    {kMicrosoft, "GatedAdd", {GatedAdd}},
    {kMicrosoft, "GatedRMSNorm", {GatedRMSNorm}},
    {kMicrosoft,
     "GroupQueryAttention",
     {.fn = GroupQueryAttention, .rows_from_start = true, .fixed_cache_rows = GqaCacheRows}},
    {kMicrosoft, "LinearAttention", {LinearAttention}},
    {kMicrosoft, "LinearAttentionGate", {LinearAttentionGate}},
    {kMicrosoft, "MRotaryEmbedding", {MRotaryEmbedding}},
    {kMicrosoft, "MatMulNBits", {.fn = MatMulNBits, .prepare = PrepareMatMulNBits}},
    {kMicrosoft, "MoE", {MoE}},
    {kMicrosoft, "MultiHeadAttention", {MultiHeadAttention}},
    {kMicrosoft, "QMoE", {QMoE}},
    {kMicrosoft, "QuickGelu", {QuickGelu}},
    {kMicrosoft, "RotaryEmbedding", {MsRotaryEmbedding}},
    {kMicrosoft, "SkipLayerNormalization", {SkipLayerNormalization}},
    {kMicrosoft, "SkipSimplifiedLayerNormalization", {SkipLayerNormalization}},
    {kMicrosoft, "SimplifiedLayerNormalization", {RMSNormalization}},
    {kTpc, "AllGather", {AllGather, any}},
    {kTpc, "AllReduce", {AllReduce, any}},
    {kTpc, "AllToAll", {AllToAll, any}},
    {kTpc, "AttentionCore", {AttentionCore}},
    {kTpc, "CheckIndices", {CheckIndices, any}},
    {kTpc, "FusedMatMul", {.fn = FusedMatMul, .any_float = true}},
    {kTpc, "Rank", {Rank, any}},
    {kTpc, "ReduceScatter", {ReduceScatter, any}},
    {kTpc, "RotaryHalf", {RotaryHalf}},
    {kTpc, "Shard", {Shard, any}},
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {
    // BLAS runs one thread per call: kernels split their GEMMs over the pool
    // (ParallelGemm2D), and OpenBLAS's own threads would spin between calls on the cores
    // the pool's threads need.
    openblas_set_num_threads(1);
  }

  std::string name() const override { return "cpu"; }
  KernelStates* kernel_states() override { return &states_; }

  const Kernel* FindKernel(std::string_view domain, std::string_view op_type) const override {
    if (domain == "ai.onnx") domain = "";
    for (const Entry& e : kKernels) {
      if (e.domain == domain && e.op_type == op_type) return &e.kernel;
    }
    return nullptr;
  }

  void* Allocate(size_t bytes) override {
    return std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  }
  void Free(void* p) override { std::free(p); }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void Copy(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  ThreadPool& pool() override { return pool_; }

 private:
  ThreadPool pool_;
  KernelStates states_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(int threads) {
  return std::make_unique<CpuBackend>(threads > 0 ? threads : DefaultThreadCount());
}

std::vector<std::string> CpuKernelOps() {
  std::vector<std::string> out;
  for (const Entry& e : kKernels) {
    out.push_back(e.domain.empty()
                      ? std::string(e.op_type)
                      : absl::StrCat(std::string(e.domain), "::", std::string(e.op_type)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tpc::runtime
