// The CUDA backend's kernel table: the one place of the backend that names operators.
// Operators not in it, and nodes whose element types a device kernel does not take,
// run the CPU backend's kernel on host copies (Kernel::host).
#include <cctype>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "ops.h"
#include "tpc/runtime/cuda/cuda.h"

namespace tpc::runtime::cuda {
namespace {

constexpr std::string_view kMicrosoft = "com.microsoft";
constexpr std::string_view kTpc = "tpc";

bool IsDeviceFloat(ir::DType t) { return KindOf(t).has_value(); }

// Which nodes a device kernel takes, by element type.
enum class Takes {
  kFloats,          // every input and output f32, f16 or bf16
  kFloatData,       // input 0 and the outputs float (axes inputs may be integers)
  kAnyData,         // elements moved by size (movement ops): 1, 2, 4 or 8 bytes
  kFloatIns,        // every input float, the outputs any type (comparisons: bool)
  kBools,           // every input and output bool
  kFloatFirst,      // input 0 float, the other inputs and the outputs any type (TopK)
  kQuantize,        // inputs 0 (and 1) f32, input 2 quantized, output 0 quantized, others f32 too
  kDequantize,      // input 0 quantized (input 2 too), input 1 float, output 0 of input 1's type
  kIntegerProduct,  // inputs 8- or 16-bit integers or f32 (input 0 an integer), outputs
                    // quantized
  kIntegers,        // every input and output an integer of one type (not bool)
  kCodeTable,       // input 0 uint8 codes, input 2 float scales, output 0 of input 2's type
};

// The integer types of linear quantization that the kernels take.
bool IsQuantized(const ir::Value* v) {
  if (v == nullptr) return false;
  switch (v->type().dtype) {
    case ir::DType::kU8:
    case ir::DType::kI8:
    case ir::DType::kU16:
    case ir::DType::kI16:
    case ir::DType::kI32:
      return true;
    default:
      return false;
  }
}

bool Accepts(Takes takes, const ir::Node& node) {
  auto float_value = [](const ir::Value* v) {
    return v == nullptr || IsDeviceFloat(v->type().dtype);
  };
  switch (takes) {
    case Takes::kFloats:
      for (const ir::Value* v : node.inputs()) {
        if (!float_value(v)) return false;
      }
      for (const ir::Value* v : node.outputs()) {
        if (!float_value(v)) return false;
      }
      return true;
    case Takes::kFloatData:
      if (node.inputs().empty() || !float_value(node.inputs()[0])) return false;
      for (const ir::Value* v : node.outputs()) {
        if (!float_value(v)) return false;
      }
      return true;
    case Takes::kFloatIns:
      for (const ir::Value* v : node.inputs()) {
        if (!float_value(v)) return false;
      }
      return !node.inputs().empty();
    case Takes::kBools:
      for (const ir::Value* v : node.inputs()) {
        if (v == nullptr || v->type().dtype != ir::DType::kBool) return false;
      }
      for (const ir::Value* v : node.outputs()) {
        if (v->type().dtype != ir::DType::kBool) return false;
      }
      return true;
    case Takes::kFloatFirst:
      return !node.inputs().empty() && float_value(node.inputs()[0]) && node.inputs()[0] != nullptr;
    case Takes::kQuantize: {
      const auto& in = node.inputs();
      const auto is_f32 = [](const ir::Value* v) {
        return v != nullptr && v->type().dtype == ir::DType::kF32;
      };
      if (in.empty() || !is_f32(in[0]) || (in.size() > 1 && !is_f32(in[1]))) return false;
      if (in.size() > 2 && in[2] != nullptr && !IsQuantized(in[2])) return false;
      for (const ir::Value* v : node.outputs()) {
        if (!IsQuantized(v) && !is_f32(v)) return false;
      }
      return !node.outputs().empty() && IsQuantized(node.outputs()[0]);
    }
    case Takes::kDequantize: {
      const auto& in = node.inputs();
      if (in.size() < 2 || !IsQuantized(in[0]) || in[1] == nullptr ||
          !IsDeviceFloat(in[1]->type().dtype) || node.outputs().size() != 1 ||
          node.outputs()[0]->type().dtype != in[1]->type().dtype) {
        return false;
      }
      return in.size() < 3 || in[2] == nullptr || in[2]->type().dtype == in[0]->type().dtype;
    }
    case Takes::kIntegerProduct: {
      const auto small = [](const ir::Value* v) {
        return IsQuantized(v) && v->type().dtype != ir::DType::kI32;
      };
      if (node.inputs().empty() || !small(node.inputs()[0])) return false;
      for (const ir::Value* v : node.inputs()) {
        if (v != nullptr && !small(v) && v->type().dtype != ir::DType::kF32) return false;
      }
      for (const ir::Value* v : node.outputs()) {
        if (!IsQuantized(v)) return false;
      }
      return true;
    }
    case Takes::kCodeTable: {
      const auto& in = node.inputs();
      return in.size() >= 3 && in[0] != nullptr && in[0]->type().dtype == ir::DType::kU8 &&
             in[2] != nullptr && IsDeviceFloat(in[2]->type().dtype) && node.outputs().size() == 1 &&
             node.outputs()[0]->type().dtype == in[2]->type().dtype;
    }
    case Takes::kIntegers: {
      if (node.inputs().empty() || node.inputs()[0] == nullptr) return false;
      const ir::DType t = node.inputs()[0]->type().dtype;
      if (!ir::IsInteger(t)) return false;
      for (const ir::Value* v : node.inputs()) {
        if (v == nullptr || v->type().dtype != t) return false;
      }
      for (const ir::Value* v : node.outputs()) {
        if (v->type().dtype != t) return false;
      }
      return true;
    }
    case Takes::kAnyData:
      for (const ir::Value* v : node.outputs()) {
        const int64_t size = ir::DTypeSize(v->type().dtype);
        if (v->type().dtype == ir::DType::kString ||
            (size != 1 && size != 2 && size != 4 && size != 8)) {
          return false;
        }
      }
      return true;
  }
  return false;
}

struct Entry {
  std::string_view domain;  // "" (ai.onnx), "com.microsoft" or "tpc"
  std::string_view op_type;
  Kernel kernel;
  Takes takes;
  bool collective = false;  // a tpc collective: on the device with a device communicator only
  // Also required of the node (its attributes), where the kernel covers part of the op.
  bool (*also)(const ir::Node&) = nullptr;
};

// BatchNormalization's kernel is for inference (the running statistics).
bool Inference(const ir::Node& n) { return n.attr_int("training_mode", 0) == 0; }
// The scatters' kernels write without a reduction.
bool NoReduction(const ir::Node& n) { return n.attr_string("reduction", "none") == "none"; }

// GridSample's kernel reads X and the grid in one float type (ONNX lets them differ).
bool SameInputTypes(const ir::Node& n) {
  return n.inputs().size() >= 2 && n.inputs()[0] != nullptr && n.inputs()[1] != nullptr &&
         n.inputs()[0]->type().dtype == n.inputs()[1]->type().dtype;
}

// GlobalLpPool's kernel: p = 1 or 2 (reduction rows), or 1 to 3 spatial dims (a window).
bool GlobalLpFits(const ir::Node& n) {
  const int64_t p = n.attr_int("p", 2);
  const int64_t rank =
      n.inputs().empty() || n.inputs()[0] == nullptr ? -1 : n.inputs()[0]->type().rank();
  return p == 1 || p == 2 || (rank >= 3 && rank <= 5);
}

// The window kernels (convolutions and pools) take 1 to 3 spatial dims (math::kMaxSpatial);
// more run on the host (a rank not known until the run: the kernel checks it).
bool SpatialFits(const ir::Node& n) {
  const int64_t rank =
      n.inputs().empty() || n.inputs()[0] == nullptr ? -1 : n.inputs()[0]->type().rank();
  return rank < 0 || (rank >= 3 && rank <= 2 + math::kMaxSpatial);  // unknown: the kernel checks
}

// Every input of input 0's element type (DeformConv: X, W, offset, B, mask).
bool InputsOfOneType(const ir::Node& n) {
  const auto& in = n.inputs();
  if (in.empty() || in[0] == nullptr) return false;
  for (const ir::Value* v : in) {
    if (v != nullptr && v->type().dtype != in[0]->type().dtype) return false;
  }
  return true;
}

// The integer convolutions' kernels: X and W (ConvInteger's input 1, QLinearConv's 3) of
// 8 or 16 bits, each zero point of its operand's type, QLinearConv's scales f32, its y zero
// point quantized and its B int32; the output quantized.
bool IntegerConvFits(const ir::Node& n) {
  const bool qlinear = n.op_type() == "QLinearConv";
  const auto& in = n.inputs();
  const auto type = [&](size_t i) {
    return i < in.size() && in[i] != nullptr ? in[i]->type().dtype : ir::DType::kUndefined;
  };
  const auto small = [](ir::DType t) {
    return t == ir::DType::kU8 || t == ir::DType::kI8 || t == ir::DType::kU16 ||
           t == ir::DType::kI16;
  };
  const size_t w = qlinear ? 3 : 1, x_zp = 2, w_zp = qlinear ? 5 : 3;
  if (!SpatialFits(n) || !small(type(0)) || !small(type(w))) return false;
  if (type(x_zp) != ir::DType::kUndefined && type(x_zp) != type(0)) return false;
  if (type(w_zp) != ir::DType::kUndefined && type(w_zp) != type(w)) return false;
  if (n.outputs().size() != 1 || !IsQuantized(n.outputs()[0])) return false;
  if (!qlinear) return true;
  for (const size_t i : {size_t{1}, size_t{4}, size_t{6}}) {
    if (type(i) != ir::DType::kF32) return false;
  }
  return IsQuantized(in.size() > 7 ? in[7] : nullptr) &&
         (type(8) == ir::DType::kUndefined || type(8) == ir::DType::kI32);
}

// STFT's kernel reads the window in the signal's type.
bool WindowOfSignalType(const ir::Node& n) {
  const auto& in = n.inputs();
  return in.size() < 3 || in[2] == nullptr ||
         (in[0] != nullptr && in[2]->type().dtype == in[0]->type().dtype);
}

// The recurrent kernels: every float input of X's type, sequence_lens int32.
bool RecurrentFits(const ir::Node& n) {
  const auto& in = n.inputs();
  if (in.empty() || in[0] == nullptr) return false;
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i] == nullptr) continue;
    const ir::DType want = i == 4 ? ir::DType::kI32 : in[0]->type().dtype;
    if (in[i]->type().dtype != want) return false;
  }
  return true;
}

// OneHot's kernel reads int64 or int32 indices.
bool IntIndices(const ir::Node& n) {
  const ir::Value* v = n.inputs().empty() ? nullptr : n.inputs()[0];
  return v != nullptr && (v->type().dtype == ir::DType::kI64 || v->type().dtype == ir::DType::kI32);
}

// Einsum's kernel takes at most 4 operands, each of rank 8 at most, with at most 8 letters
// in the equation (its output and summed dims fit the plan; an ellipsis that still
// overflows it fails the run naming the node).
bool EinsumFits(const ir::Node& n) {
  if (n.inputs().size() > 4) return false;
  for (const ir::Value* v : n.inputs()) {
    if (v == nullptr || v->type().rank() > 8) return false;
  }
  std::string letters;
  for (const char c : n.attr_string("equation", "")) {
    if (std::isalpha(static_cast<unsigned char>(c)) != 0 && letters.find(c) == std::string::npos) {
      letters += c;
    }
  }
  return letters.size() <= 8;
}

constexpr uint32_t In(int i) { return 1u << i; }
// Device kernels all handle f16 and bf16 themselves.
constexpr Kernel K(KernelFn fn, uint32_t host_inputs = 0) {
  return Kernel{.fn = fn, .any_float = true, .host = false, .host_inputs = host_inputs};
}
// `k` for an operator whose batch rows are padded at their ends (Kernel::rows_from_start).
constexpr Kernel RowsFromStart(Kernel k) {
  k.rows_from_start = true;
  return k;
}
// `k` for an operator that may keep a cache at a fixed capacity (Kernel::fixed_cache_rows).
constexpr Kernel FixedCache(Kernel k, CacheRowsFn rows) {
  k.fixed_cache_rows = rows;
  return k;
}

// Sorted by domain, then op type; one line per operator.
const Entry kKernels[] = {
    {"", "Abs", K(Abs), Takes::kFloats},
    {"", "Acos", K(Acos), Takes::kFloats},
    {"", "Acosh", K(Acosh), Takes::kFloats},
    {"", "Add", K(Add), Takes::kFloats},
    {"", "AffineGrid", K(AffineGrid, In(1)), Takes::kFloatData},
    {"", "And", K(And), Takes::kBools},
    {"", "ArgMax", K(ArgMax), Takes::kFloatIns},
    {"", "ArgMin", K(ArgMin), Takes::kFloatIns},
    {"", "Asin", K(Asin), Takes::kFloats},
    {"", "Asinh", K(Asinh), Takes::kFloats},
    {"", "Atan", K(Atan), Takes::kFloats},
    {"", "Atanh", K(Atanh), Takes::kFloats},
    {"", "Attention", K(Attention), Takes::kFloatData},
    {"", "AveragePool", K(AveragePool), Takes::kFloats, false, SpatialFits},
    {"", "BatchNormalization", K(BatchNormalization), Takes::kFloats, false, Inference},
    {"", "BitShift", K(BitShift), Takes::kIntegers},
    {"", "BitwiseAnd", K(BitwiseAnd), Takes::kIntegers},
    {"", "BitwiseNot", K(BitwiseNot), Takes::kIntegers},
    {"", "BitwiseOr", K(BitwiseOr), Takes::kIntegers},
    {"", "BitwiseXor", K(BitwiseXor), Takes::kIntegers},
    {"", "Cast", K(Cast), Takes::kFloats},
    {"", "CastLike", K(Cast), Takes::kFloats},
    {"", "Ceil", K(Ceil), Takes::kFloats},
    {"", "Celu", K(Celu), Takes::kFloats},
    {"", "CenterCropPad", K(CenterCropPad, In(1)), Takes::kAnyData},
    {"", "Clip", K(Clip, In(1) | In(2)), Takes::kFloats},
    {"", "Col2Im", K(Col2Im, In(1) | In(2)), Takes::kFloatData},
    {"", "Concat", K(Concat), Takes::kAnyData},
    {"", "Conv", K(Conv), Takes::kFloats, false, SpatialFits},
    {"", "ConvInteger", K(ConvInteger), Takes::kAnyData, false, IntegerConvFits},
    {"", "ConvTranspose", K(ConvTranspose), Takes::kFloats, false, SpatialFits},
    {"", "Cos", K(Cos), Takes::kFloats},
    {"", "Cosh", K(Cosh), Takes::kFloats},
    {"", "CumSum", K(CumSum, In(1)), Takes::kFloatData},
    {"", "DFT", K(DFT, In(1) | In(2)), Takes::kFloatData},
    {"", "DeformConv", K(DeformConv), Takes::kFloats, false, InputsOfOneType},
    {"", "DepthToSpace", K(DepthToSpace), Takes::kAnyData},
    {"", "DequantizeLinear", K(DequantizeLinear), Takes::kDequantize},
    {"", "Det", K(Det), Takes::kFloats},
    {"", "Div", K(Div), Takes::kFloats},
    {"", "Dropout", K(Dropout), Takes::kAnyData},
    {"", "DynamicQuantizeLinear", K(DynamicQuantizeLinear), Takes::kQuantize},
    {"", "Einsum", K(Einsum), Takes::kFloats, false, EinsumFits},
    {"", "Elu", K(Elu), Takes::kFloats},
    {"", "Equal", K(Equal), Takes::kFloatIns},
    {"", "Erf", K(Erf), Takes::kFloats},
    {"", "Exp", K(Exp), Takes::kFloats},
    {"", "Expand", K(Expand, In(1)), Takes::kAnyData},
    {"", "EyeLike", K(EyeLike), Takes::kAnyData},
    {"", "Flatten", K(cpu::Flatten), Takes::kAnyData},
    {"", "Floor", K(Floor), Takes::kFloats},
    {"", "GRU", K(GRU), Takes::kFloatData, false, RecurrentFits},
    {"", "Gather", K(Gather), Takes::kAnyData},
    {"", "GatherElements", K(GatherElements), Takes::kAnyData},
    {"", "GatherND", K(GatherND), Takes::kAnyData},
    {"", "Gelu", K(Gelu), Takes::kFloats},
    {"", "Gemm", K(Gemm), Takes::kFloats},
    {"", "GlobalAveragePool", K(GlobalAveragePool), Takes::kFloats},
    {"", "GlobalLpPool", K(GlobalLpPool), Takes::kFloats, false, GlobalLpFits},
    {"", "GlobalMaxPool", K(GlobalMaxPool), Takes::kFloats},
    {"", "Greater", K(Greater), Takes::kFloatIns},
    {"", "GreaterOrEqual", K(GreaterOrEqual), Takes::kFloatIns},
    {"", "GridSample", K(GridSample), Takes::kFloats, false, SameInputTypes},
    {"", "GroupNormalization", K(GroupNormalization), Takes::kFloats},
    {"", "HardSigmoid", K(HardSigmoid), Takes::kFloats},
    {"", "HardSwish", K(HardSwish), Takes::kFloats},
    {"", "Hardmax", K(Hardmax), Takes::kFloats},
    {"", "Identity", K(cpu::Identity), Takes::kAnyData},
    {"", "InstanceNormalization", K(InstanceNormalization), Takes::kFloats},
    {"", "IsInf", K(IsInf), Takes::kFloatIns},
    {"", "IsNaN", K(IsNaN), Takes::kFloatIns},
    {"", "LRN", K(LRN), Takes::kFloats},
    {"", "LSTM", K(LSTM), Takes::kFloatData, false, RecurrentFits},
    {"", "LayerNormalization", K(LayerNormalization), Takes::kFloats},
    {"", "LeakyRelu", K(LeakyRelu), Takes::kFloats},
    {"", "Less", K(Less), Takes::kFloatIns},
    {"", "LessOrEqual", K(LessOrEqual), Takes::kFloatIns},
    {"", "Log", K(Log), Takes::kFloats},
    {"", "LogSoftmax", K(LogSoftmax), Takes::kFloats},
    {"", "LpNormalization", K(LpNormalization), Takes::kFloats},
    {"", "LpPool", K(LpPool), Takes::kFloats, false, SpatialFits},
    {"", "MatMul", K(MatMul), Takes::kFloats},
    {"", "MatMulInteger", K(MatMulInteger), Takes::kIntegerProduct},
    {"", "Max", K(Max), Takes::kFloats},
    {"", "MaxPool", K(MaxPool), Takes::kFloatIns, false, SpatialFits},
    {"", "MaxUnpool", K(MaxUnpool, In(2)), Takes::kAnyData},
    {"", "Mean", K(Mean), Takes::kFloats},
    {"", "MeanVarianceNormalization", K(MeanVarianceNormalization), Takes::kFloats},
    {"", "Min", K(Min), Takes::kFloats},
    {"", "Mish", K(Mish), Takes::kFloats},
    {"", "Mod", K(Mod), Takes::kFloats},
    {"", "Mul", K(Mul), Takes::kFloats},
    {"", "Neg", K(Neg), Takes::kFloats},
    {"", "NegativeLogLikelihoodLoss", K(NegativeLogLikelihoodLoss), Takes::kFloatData},
    {"", "Not", K(Not), Takes::kBools},
    {"", "OneHot", K(OneHot, In(1)), Takes::kAnyData, false, IntIndices},
    {"", "Or", K(Or), Takes::kBools},
    {"", "PRelu", K(PRelu), Takes::kFloats},
    {"", "Pad", K(Pad, In(1) | In(2) | In(3)), Takes::kAnyData},
    {"", "Pow", K(Pow), Takes::kFloats},
    {"", "QLinearConv", K(QLinearConv), Takes::kAnyData, false, IntegerConvFits},
    {"", "QLinearMatMul", K(QLinearMatMul), Takes::kIntegerProduct},
    {"", "QuantizeLinear", K(QuantizeLinear), Takes::kQuantize},
    {"", "RMSNormalization", K(RMSNormalization), Takes::kFloats},
    {"", "RNN", K(RNN), Takes::kFloatData, false, RecurrentFits},
    {"", "Reciprocal", K(Reciprocal), Takes::kFloats},
    {"", "ReduceL1", K(ReduceL1, In(1)), Takes::kFloatData},
    {"", "ReduceL2", K(ReduceL2, In(1)), Takes::kFloatData},
    {"", "ReduceLogSum", K(ReduceLogSum, In(1)), Takes::kFloatData},
    {"", "ReduceLogSumExp", K(ReduceLogSumExp, In(1)), Takes::kFloatData},
    {"", "ReduceMax", K(ReduceMax, In(1)), Takes::kFloatData},
    {"", "ReduceMean", K(ReduceMean, In(1)), Takes::kFloatData},
    {"", "ReduceMin", K(ReduceMin, In(1)), Takes::kFloatData},
    {"", "ReduceProd", K(ReduceProd, In(1)), Takes::kFloatData},
    {"", "ReduceSum", K(ReduceSum, In(1)), Takes::kFloatData},
    {"", "ReduceSumSquare", K(ReduceSumSquare, In(1)), Takes::kFloatData},
    {"", "Relu", K(Relu), Takes::kFloats},
    {"", "Reshape", K(cpu::Reshape, In(1)), Takes::kAnyData},
    {"", "Resize", K(Resize, In(1) | In(2) | In(3)), Takes::kFloatData},
    {"", "ReverseSequence", K(ReverseSequence, In(1)), Takes::kAnyData},
    {"", "RoiAlign", K(RoiAlign), Takes::kFloatData, false, SameInputTypes},
    {"", "RotaryEmbedding", K(RotaryEmbedding), Takes::kFloatData},
    {"", "Round", K(Round), Takes::kFloats},
    {"", "STFT", K(STFT, In(1) | In(3)), Takes::kFloatData, false, WindowOfSignalType},
    {"", "ScatterElements", K(ScatterElements), Takes::kAnyData, false, NoReduction},
    {"", "ScatterND", K(ScatterND), Takes::kAnyData, false, NoReduction},
    {"", "Selu", K(Selu), Takes::kFloats},
    {"", "Shrink", K(Shrink), Takes::kFloats},
    {"", "Sigmoid", K(Sigmoid), Takes::kFloats},
    {"", "Sign", K(Sign), Takes::kFloats},
    {"", "SimplifiedLayerNormalization", K(RMSNormalization), Takes::kFloats},
    {"", "Sin", K(Sin), Takes::kFloats},
    {"", "Sinh", K(Sinh), Takes::kFloats},
    {"", "Slice", K(Slice, In(1) | In(2) | In(3) | In(4)), Takes::kAnyData},
    {"", "Softmax", K(Softmax), Takes::kFloats},
    {"", "SoftmaxCrossEntropyLoss", K(SoftmaxCrossEntropyLoss), Takes::kFloatData},
    {"", "Softplus", K(Softplus), Takes::kFloats},
    {"", "Softsign", K(Softsign), Takes::kFloats},
    {"", "SpaceToDepth", K(SpaceToDepth), Takes::kAnyData},
    {"", "Split", K(Split, In(1)), Takes::kAnyData},
    {"", "Sqrt", K(Sqrt), Takes::kFloats},
    {"", "Squeeze", K(cpu::Squeeze, In(1)), Takes::kAnyData},
    {"", "Sub", K(Sub), Takes::kFloats},
    {"", "Sum", K(Sum), Takes::kFloats},
    {"", "Tan", K(Tan), Takes::kFloats},
    {"", "Tanh", K(Tanh), Takes::kFloats},
    {"", "ThresholdedRelu", K(ThresholdedRelu), Takes::kFloats},
    {"", "Tile", K(Tile, In(1)), Takes::kAnyData},
    {"", "TopK", K(TopK, In(1)), Takes::kFloatFirst},
    {"", "Transpose", K(Transpose), Takes::kAnyData},
    {"", "Trilu", K(Trilu, In(1)), Takes::kAnyData},
    {"", "Unsqueeze", K(cpu::Unsqueeze, In(1)), Takes::kAnyData},
    {"", "Upsample", K(Resize, In(1)), Takes::kFloatData},
    {"", "Where", K(Where), Takes::kAnyData},
    {"", "Xor", K(Xor), Takes::kBools},
    {kMicrosoft, "Attention", K(MsAttention), Takes::kFloatData},
    {kMicrosoft, "BiasGelu", K(BiasGelu), Takes::kFloats},
    {kMicrosoft, "CausalConvWithState", K(CausalConvWithState), Takes::kFloats},
    {kMicrosoft, "FastGelu", K(FastGelu), Takes::kFloats},
    {kMicrosoft, "GatedAdd", K(GatedAdd), Takes::kFloats},
    {kMicrosoft, "GatedRMSNorm", K(GatedRMSNorm), Takes::kFloats},
    {kMicrosoft, "GatherBlockQuantized", K(GatherBlockQuantized), Takes::kCodeTable},
    {kMicrosoft, "Gelu", K(Gelu), Takes::kFloats},
    {kMicrosoft, "GroupQueryAttention",
     FixedCache(RowsFromStart(K(GroupQueryAttention, In(6))), cpu::GqaCacheRows),
     Takes::kFloatData},
    {kMicrosoft, "LinearAttention", K(LinearAttention), Takes::kFloats},
    {kMicrosoft, "LinearAttentionGate", K(LinearAttentionGate), Takes::kFloats},
    {kMicrosoft, "MRotaryEmbedding", K(MRotaryEmbedding), Takes::kFloatData},
    {kMicrosoft, "MatMulNBits", K(MatMulNBits), Takes::kFloatData},
    {kMicrosoft, "MoE", K(MoE), Takes::kFloats},
    {kMicrosoft, "MultiHeadAttention", K(MultiHeadAttention), Takes::kFloatData},
    {kMicrosoft, "QMoE", K(QMoE), Takes::kFloatData},
    {kMicrosoft, "QuickGelu", K(QuickGelu), Takes::kFloats},
    {kMicrosoft, "RotaryEmbedding", K(MsRotaryEmbedding), Takes::kFloatData},
    {kMicrosoft, "SimplifiedLayerNormalization", K(RMSNormalization), Takes::kFloats},
    {kMicrosoft, "SkipLayerNormalization", K(SkipLayerNormalization), Takes::kFloats},
    {kMicrosoft, "SkipSimplifiedLayerNormalization", K(SkipLayerNormalization), Takes::kFloats},
    // The fusion pass's operators, and the collectives, which run on the device with a
    // communicator on device memory only (CudaBackend::device_collectives).
    {kTpc, "AllGather", K(AllGather), Takes::kAnyData, true},
    {kTpc, "AllReduce", K(AllReduce), Takes::kFloats, true},
    {kTpc, "AllToAll", K(AllToAll), Takes::kAnyData, true},
    {kTpc, "AttentionCore", K(AttentionCore), Takes::kFloats},
    {kTpc, "FusedMatMul", K(FusedMatMul), Takes::kFloats},
    {kTpc, "ReduceScatter", K(ReduceScatter), Takes::kFloats, true},
    {kTpc, "RotaryHalf", K(RotaryHalf), Takes::kFloats},
    {kTpc, "Shard", K(Shard), Takes::kAnyData, true},
};

const Entry* Find(std::string_view domain, std::string_view op_type) {
  if (domain == "ai.onnx") domain = "";
  for (const Entry& e : kKernels) {
    if (e.domain == domain && e.op_type == op_type) return &e;
  }
  return nullptr;
}

std::string_view TakesText(Takes t) {
  switch (t) {
    case Takes::kFloats:
    case Takes::kFloatData:
      return "f32,f16,bf16";
    case Takes::kFloatIns:
    case Takes::kFloatFirst:
      return "f32,f16,bf16";
    case Takes::kBools:
      return "bool";
    case Takes::kQuantize:
      return "f32>u8,i8,u16,i16,i32";
    case Takes::kDequantize:
      return "u8,i8,u16,i16,i32>f32,f16,bf16";
    case Takes::kIntegerProduct:
      return "u8,i8,u16,i16>u8,i8,u16,i16,i32";
    case Takes::kIntegers:
      return "integers";
    case Takes::kCodeTable:
      return "u8>f32,f16,bf16";
    case Takes::kAnyData:
      return "any";
  }
  return "";
}

}  // namespace

bool CudaBackend::IsDeviceCollective(std::string_view domain, std::string_view op_type) const {
  const Entry* e = Find(domain, op_type);
  return device_collectives_ && e != nullptr && e->collective;
}

const Kernel* CudaBackend::FindKernel(std::string_view domain, std::string_view op_type) const {
  const Entry* e = Find(domain, op_type);
  if (e != nullptr && (!e->collective || device_collectives_)) return &e->kernel;
  return FindHostKernel(domain, op_type);
}

const Kernel* CudaBackend::FindKernelFor(const ir::Node& node) const {
  if (PlaceOnDevice(node, device_collectives_).device) {
    return &Find(node.domain(), node.op_type())->kernel;
  }
  return FindHostKernel(node.domain(), node.op_type());
}

DevicePlacement PlaceOnDevice(const ir::Node& node, bool device_collectives) {
  const Entry* e = Find(node.domain(), node.op_type());
  if (e == nullptr) return {};
  // With a communicator on device memory a collective runs on the device whatever its
  // element type (a host kernel would hand it host pointers): NCCL reduces integers too,
  // and the in-process GPU group refuses them with an error. Without one, on the host.
  if (e->collective ? device_collectives
                    : Accepts(e->takes, node) && (e->also == nullptr || e->also(node))) {
    return {.device = true, .host_inputs = e->kernel.host_inputs};
  }
  return {};
}

std::vector<std::string> CudaKernelListing() {
  std::vector<std::string> lines;
  for (const std::string& op : CpuKernelOps()) {
    const size_t sep = op.find("::");
    const std::string domain = sep == std::string::npos ? "" : op.substr(0, sep);
    const std::string type = sep == std::string::npos ? op : op.substr(sep + 2);
    const Entry* e = Find(domain, type);
    lines.push_back(
        absl::StrCat(domain.empty() ? "ai.onnx" : domain, "::", type, " ",
                     e != nullptr ? std::string(TakesText(e->takes)) : std::string("host")));
  }
  return lines;
}

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device, int host_threads,
                                                         bool device_collectives,
                                                         int64_t memory_limit) {
  return CudaBackend::Create(device, host_threads, device_collectives, memory_limit);
}

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

absl::StatusOr<std::string> CudaBusId(int device) {
  char id[32] = {};
  const cudaError_t e = cudaDeviceGetPCIBusId(id, sizeof(id), device);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return absl::UnavailableError(
        absl::StrCat("GPU ", device, ": no PCI bus id (", cudaGetErrorString(e), ")"));
  }
  return std::string(id);
}

}  // namespace tpc::runtime::cuda
