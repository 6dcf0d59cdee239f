#include "schema_extra.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tpc::onnx::internal {

namespace {

constexpr std::string_view kMs = "com.microsoft";
constexpr std::string_view kReduceGained = "noop_with_empty_axes:int";

// onnxruntime 1.32's schemas of the com.microsoft operators tpc has kernels for (their
// attributes all; `onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()`),
// the default domain's operators newer than libonnx 1.12 (ONNX 1.23's schemas at opset
// 23), and what the operators libonnx knows in an older version gained since.
constexpr ExtraSchema kExtra[] = {
    // com.microsoft (and onnxruntime's SimplifiedLayerNormalization, registered in the
    // default domain too).
    {kMs, "Attention",
     "do_rotary:int mask_filter_value:float num_heads:int past_present_share_buffer:int "
     "qkv_hidden_sizes:ints rotary_embedding_dim:int scale:float unidirectional:int",
     "do_rotary=0 past_present_share_buffer=0", 7, "6"},
    {kMs, "BiasGelu", "", "", 2},
    // Only the channels-first, one-dim, windowless form (onnxruntime's CPU form; the others
    // are its CUDA kernel's).
    {kMs, "CausalConvWithState",
     "activation:string channels_last:int dilation:int input_channel_offset:int "
     "input_channels:int ndim:int state_channels_last:int state_length:int "
     "state_update_capacity:int state_window:int",
     "channels_last=0 input_channel_offset=0 input_channels=0 ndim=1 state_channels_last=-1 "
     "state_length=0 state_update_capacity=0 state_window=0",
     4},
    {kMs, "FastGelu", "", "", 2},
    // The plain mode only (the projected one, gate_weight, is onnxruntime's CUDA bf16's).
    {kMs, "GatedAdd", "", "", 4, "3"},
    {kMs, "GatedRMSNorm", "activation:string epsilon:float", "", 3},
    // The builder's tied int4 embedding: a uint8 table gathered by rows.
    {kMs, "GatherBlockQuantized", "bits:int block_size:int gather_axis:int quantize_axis:int",
     "gather_axis=0", 4},
    {kMs, "Gelu", "", "", 1},
    {kMs, "GroupQueryAttention",
     "causal:int do_rotary:int k_norm_epsilon:float k_quant_type:string kv_cache_bit_width:int "
     "kv_num_heads:int local_window_size:int num_heads:int q_norm_epsilon:float "
     "qk_norm_epsilon:float qk_output:int rotary_interleaved:int scale:float "
     "sliding_window_cache:int smooth_softmax:int softcap:float v_quant_type:string",
     "causal=1 kv_cache_bit_width=0 k_quant_type=NONE v_quant_type=NONE qk_output=0", 17,
     "10 12 13 16"},
    // Gated DeltaNet's recurrence (Qwen 3.5); one state per call, not per token.
    {kMs, "LinearAttention",
     "chunk_size:int kv_num_heads:int q_num_heads:int scale:float state_window:int "
     "update_rule:string",
     "state_window=0", 6},
    {kMs, "LinearAttentionGate", "", "", 4},
    {kMs, "MRotaryEmbedding",
     "interleaved:int is_packed_batching:int mrope_layout:int mrope_section:ints num_heads:int "
     "rotary_embedding_dim:int scale:float",
     "is_packed_batching=0", 4},
    {kMs, "MatMulNBits",
     "K:int N:int accuracy_level:int bits:int block_size:int weight_prepacked:int",
     "weight_prepacked=0", 6, "4"},
    {kMs, "MoE",
     "activation_alpha:float activation_beta:float activation_type:string k:int "
     "normalize_routing_weights:int swiglu_fusion:int swiglu_limit:float "
     "swiglu_limit_after_activation:int use_sparse_mixer:int",
     "swiglu_limit_after_activation=0 use_sparse_mixer=0", 8},
    {kMs, "MultiHeadAttention",
     "mask_filter_value:float num_heads:int scale:float unidirectional:int", "", 10, "8 9"},
    // Integer quantization (4 or 8 bits, the default zero points), as onnxruntime-genai's
    // builder writes it; FC3, zero points, router_weights and the FP4/FP8 scales refused.
    {kMs, "QMoE",
     "accuracy_level:int activation_alpha:float activation_beta:float activation_type:string "
     "block_size:int expert_weight_bits:int fc1_expert_weight_bits:int "
     "fc2_expert_weight_bits:int fc3_expert_weight_bits:int k:int normalize_routing_weights:int "
     "quant_type:string swiglu_fusion:int swiglu_limit:float swiglu_limit_after_activation:int "
     "use_sparse_mixer:int weights_prepacked:int",
     "quant_type=int swiglu_limit_after_activation=0 use_sparse_mixer=0", 21,
     "8 9 10 11 12 13 14 15 16 17 18 19 20"},
    {kMs, "QuickGelu", "alpha:float", "", 1},
    // (onnxruntime reads RotaryEmbedding's scale and uses it nowhere.)
    {kMs, "RotaryEmbedding",
     "interleaved:int is_packed_batching:int num_heads:int rotary_embedding_dim:int scale:float",
     "is_packed_batching=0", 4},
    {kMs, "SimplifiedLayerNormalization", "axis:int epsilon:float stash_type:int", "", 2},
    {"", "SimplifiedLayerNormalization", "axis:int epsilon:float stash_type:int", "", 2},
    {kMs, "SkipLayerNormalization", "epsilon:float", "", 5},
    {kMs, "SkipSimplifiedLayerNormalization", "epsilon:float", "", 4},
    // The default domain's operators added after opset 17.
    {"", "AffineGrid", "align_corners:int", "", 2},
    {"", "Attention",
     "is_causal:int kv_num_heads:int q_num_heads:int qk_matmul_output_mode:int scale:float "
     "softcap:float softmax_precision:int",
     "", 6},
    {"", "BitwiseAnd", "", "", 2},
    {"", "BitwiseNot", "", "", 1},
    {"", "BitwiseOr", "", "", 2},
    {"", "BitwiseXor", "", "", 2},
    {"", "CenterCropPad", "axes:ints", "", 2},
    {"", "Col2Im", "dilations:ints pads:ints strides:ints", "", 3},
    {"", "DeformConv",
     "dilations:ints group:int kernel_shape:ints offset_group:int pads:ints strides:ints", "", 5},
    {"", "Gelu", "approximate:string", "", 1},
    {"", "GroupNormalization", "epsilon:float num_groups:int stash_type:int", "", 3},
    {"", "Mish", "", "", 1},
    {"", "RMSNormalization", "axis:int epsilon:float stash_type:int", "", 2},
    {"", "RotaryEmbedding", "interleaved:int num_heads:int rotary_embedding_dim:int", "", 4},
    // Attributes gained after opset 17 by operators libonnx has an older schema of.
    {"", "AveragePool", "dilations:ints"},
    {"", "Cast", "saturate:int"},
    {"", "CastLike", "saturate:int"},
    {"", "DequantizeLinear", "block_size:int output_dtype:int"},
    {"", "LpPool", "ceil_mode:int dilations:ints"},
    {"", "QuantizeLinear", "block_size:int output_dtype:int precision:int saturate:int"},
    {"", "ReduceL1", kReduceGained},
    {"", "ReduceL2", kReduceGained},
    {"", "ReduceLogSum", kReduceGained},
    {"", "ReduceLogSumExp", kReduceGained},
    {"", "ReduceMax", kReduceGained},
    {"", "ReduceMean", kReduceGained},
    {"", "ReduceMin", kReduceGained},
    {"", "ReduceProd", kReduceGained},
    {"", "ReduceSumSquare", kReduceGained},
    {"", "Resize", "antialias:int axes:ints keep_aspect_ratio_policy:string"},
    {"", "Split", "num_outputs:int"},
};

using Type = ::onnx::AttributeProto::AttributeType;

Type TypeNamed(std::string_view name) {
  static const std::pair<std::string_view, Type> kTypes[] = {
      {"int", ::onnx::AttributeProto::INT},       {"float", ::onnx::AttributeProto::FLOAT},
      {"string", ::onnx::AttributeProto::STRING}, {"ints", ::onnx::AttributeProto::INTS},
      {"floats", ::onnx::AttributeProto::FLOATS}, {"strings", ::onnx::AttributeProto::STRINGS},
      {"tensor", ::onnx::AttributeProto::TENSOR}};
  for (const auto& [n, t] : kTypes) {
    if (n == name) return t;
  }
  return ::onnx::AttributeProto::UNDEFINED;
}

// Debian's Abseil has a string_view of its own.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

struct Parsed {
  absl::flat_hash_map<std::string, Type> types;
  absl::flat_hash_map<std::string, std::string> only;
  std::vector<int> absent;
};

const Parsed& ParsedOf(const ExtraSchema& extra) {
  static const auto* kParsed = [] {
    auto* m = new absl::flat_hash_map<const ExtraSchema*, Parsed>();
    for (const ExtraSchema& e : kExtra) {
      Parsed& p = (*m)[&e];
      for (absl::string_view a : absl::StrSplit(Absl(e.attributes), ' ', absl::SkipEmpty())) {
        std::pair<std::string, std::string> nt = absl::StrSplit(a, ':');
        p.types[nt.first] = TypeNamed(nt.second);
      }
      for (absl::string_view a : absl::StrSplit(Absl(e.only_value), ' ', absl::SkipEmpty())) {
        std::pair<std::string, std::string> nv = absl::StrSplit(a, '=');
        p.only[nv.first] = nv.second;
      }
      for (absl::string_view i : absl::StrSplit(Absl(e.absent_inputs), ' ', absl::SkipEmpty())) {
        int index = 0;
        if (absl::SimpleAtoi(i, &index)) p.absent.push_back(index);
      }
    }
    return m;
  }();
  return kParsed->at(&extra);
}

// The attribute's value as the table writes it (an int or a float as a number, a string
// as itself), or "" for a list.
bool HasValue(const ::onnx::AttributeProto& a, const std::string& want) {
  switch (a.type()) {
    case ::onnx::AttributeProto::INT: {
      int64_t v = 0;
      return absl::SimpleAtoi(want, &v) && a.i() == v;
    }
    case ::onnx::AttributeProto::FLOAT: {
      float v = 0;
      return absl::SimpleAtof(want, &v) && a.f() == v;
    }
    case ::onnx::AttributeProto::STRING:
      return a.s() == want;
    default:
      return false;
  }
}

std::string ValueText(const ::onnx::AttributeProto& a) {
  switch (a.type()) {
    case ::onnx::AttributeProto::INT:
      return absl::StrCat(a.i());
    case ::onnx::AttributeProto::FLOAT:
      return absl::StrCat(a.f());
    case ::onnx::AttributeProto::STRING:
      return absl::StrCat("'", a.s(), "'");
    default:
      return "(a list)";
  }
}

}  // namespace

absl::Status UnknownAttributeError(const std::string& label, const std::string& name,
                                   std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return absl::InvalidArgumentError(
      absl::StrCat(label, ": attribute '", name, "' is not one tpc knows the operator to have (",
                   names.empty() ? std::string("it has none") : absl::StrJoin(names, ", "),
                   "): running the node without it could give a wrong result"));
}

absl::Status AttributeTypeError(const std::string& label, const ::onnx::AttributeProto& attribute,
                                ::onnx::AttributeProto::AttributeType want) {
  return absl::InvalidArgumentError(absl::StrCat(
      label, ": attribute '", attribute.name(), "' is ",
      ::onnx::AttributeProto::AttributeType_Name(attribute.type()),
      ", the operator's schema wants ", ::onnx::AttributeProto::AttributeType_Name(want)));
}

const ExtraSchema* FindExtraSchema(std::string_view domain, std::string_view op_type) {
  for (const ExtraSchema& e : kExtra) {
    if (e.domain == domain && e.op_type == op_type) return &e;
  }
  return nullptr;
}

absl::Status CheckExtraAttribute(const ExtraSchema& extra, const ::onnx::AttributeProto& attribute,
                                 bool known_elsewhere, const std::string& label) {
  const Parsed& p = ParsedOf(extra);
  auto type = p.types.find(attribute.name());
  if (type == p.types.end() && !known_elsewhere) {
    std::vector<std::string> names;
    for (const auto& [n, t] : p.types) names.push_back(n);
    return UnknownAttributeError(label, attribute.name(), std::move(names));
  }
  if (type != p.types.end() && type->second != attribute.type()) {
    return AttributeTypeError(label, attribute, type->second);
  }
  auto only = p.only.find(attribute.name());
  if (only != p.only.end() && !HasValue(attribute, only->second)) {
    return absl::UnimplementedError(
        absl::StrCat(label, ": attribute '", attribute.name(), "' = ", ValueText(attribute),
                     " is not supported (tpc implements only ", only->second, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckExtraInputs(const ExtraSchema& extra, const ::onnx::NodeProto& node,
                              const std::string& label) {
  if (extra.max_inputs >= 0 && node.input_size() > extra.max_inputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": ", node.input_size(), " inputs, the operator takes at most ", extra.max_inputs));
  }
  for (int i : ParsedOf(extra).absent) {
    if (i < node.input_size() && !node.input(i).empty()) {
      return absl::UnimplementedError(
          absl::StrCat(label, ": input ", i, " ('", node.input(i), "') is not supported"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpc::onnx::internal
