// onnxruntime's MoE (mixture of experts: gpt-oss and Mixtral-style routers as
// onnxruntime-genai exports them; not Phi-MoE's sparse mixer), per token: the routing (a
// softmax over the router's logits, its top k experts, their weights normalized to sum 1
// when asked), the experts' activation between FC1 and FC2, their dot products and the
// weighted sum, as onnxruntime's CPU kernel computes them (checked against it by the
// contrib node tests). Host and device functions: the CPU kernel (cpu/moe.cc) and the
// CUDA kernels (cuda/moe.cu) use them.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class MoeActivation { kRelu, kGelu, kSilu, kIdentity, kSwiGlu, kGeGlu };

struct MoeLayout {
  int64_t tokens = 0, hidden = 0, inter = 0, experts = 0, k = 1;
  MoeActivation activation = MoeActivation::kRelu;
  bool normalize = false;  // normalize_routing_weights
  // SwiGLU (FC1's rows interleaved: gate 2i, linear 2i + 1): clamp(gate, max = limit) ·
  // sigmoid(alpha · that) · (clamp(linear, ±limit) + beta); no clamp without a limit.
  float alpha = 1.0f, beta = 0.0f;
  bool has_limit = false;
  float limit = 0.0f;
  // GeGLU (Gemma 4's experts, rows interleaved as SwiGLU's): gelu_tanh(gate) · linear.
  // Gated (SwiGLU, GeGLU): FC1's rows come in pairs.
  TPC_HOST_DEVICE bool gated() const {
    return activation == MoeActivation::kSwiGlu || activation == MoeActivation::kGeGlu;
  }
  // FC1's rows per expert: 2 · inter when gated, else inter.
  TPC_HOST_DEVICE int64_t fc1_rows() const { return gated() ? 2 * inter : inter; }
};

// Token t's top k experts (`experts[k]`, best first) and their weights (`weights[k]`:
// the softmax of its router logits, renormalized over the k when l.normalize), from its
// logits row [experts]. The experts are ranked by their probabilities, a tie going to the
// higher index, as onnxruntime's CPU kernel sorts (probability, index) pairs; always k
// distinct experts in [0, experts), NaN logits included.
template <typename Load>
TPC_HOST_DEVICE inline void MoeRoute(const MoeLayout& l, Load logit, int64_t* experts,
                                     float* weights) {
  float mx = -INFINITY;
  for (int64_t e = 0; e < l.experts; ++e) mx = logit(e) > mx ? logit(e) : mx;
  float sum = 0.0f;
  for (int64_t e = 0; e < l.experts; ++e) sum += expf(logit(e) - mx);
  for (int64_t j = 0; j < l.k; ++j) {
    int64_t best = -1;
    float best_p = 0.0f;
    for (int64_t e = 0; e < l.experts; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j; ++i) taken = taken || experts[i] == e;
      const float p = expf(logit(e) - mx) / sum;
      if (!taken && (best < 0 || p >= best_p)) {
        best = e;
        best_p = p;
      }
    }
    experts[j] = best;
    weights[j] = best_p;
  }
  if (!l.normalize) return;
  float total = 0.0f;
  for (int64_t j = 0; j < l.k; ++j) total += weights[j];
  for (int64_t j = 0; j < l.k; ++j) weights[j] /= total;
}

// GELU's tanh approximation (onnxruntime's MoE gelu; transformers' gelu_pytorch_tanh).
TPC_HOST_DEVICE inline float MoeGeluTanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

// Element i (< inter) of the activation of FC1's output row `h` (fc1_rows() elements).
TPC_HOST_DEVICE inline float MoeActivate(const MoeLayout& l, const float* h, int64_t i) {
  switch (l.activation) {
    case MoeActivation::kRelu:
      return h[i] > 0.0f ? h[i] : 0.0f;
    case MoeActivation::kGelu:  // onnxruntime's: the tanh approximation
      return MoeGeluTanh(h[i]);
    case MoeActivation::kSilu:
      return h[i] / (1.0f + expf(-h[i]));
    case MoeActivation::kIdentity:
      return h[i];
    case MoeActivation::kSwiGlu: {
      float gate = h[2 * i], linear = h[2 * i + 1];
      if (l.has_limit) {
        gate = gate < l.limit ? gate : l.limit;
        linear = linear < -l.limit ? -l.limit : linear > l.limit ? l.limit : linear;
      }
      return gate / (1.0f + expf(-l.alpha * gate)) * (linear + l.beta);
    }
    case MoeActivation::kGeGlu:
      return MoeGeluTanh(h[2 * i]) * h[2 * i + 1];
  }
  return 0.0f;
}

// The lane's part of an expert's dot product of a weight row with a token's vector over
// `cols` elements: lane `lane` of `lanes` takes c = lane, lane + lanes, ... (one lane: the
// whole product, in order).
template <typename LoadW, typename LoadV>
TPC_HOST_DEVICE inline float MoeDotLane(int64_t cols, int lane, int lanes, LoadW w, LoadV v) {
  float acc = 0.0f;
  for (int64_t c = lane; c < cols; c += lanes) acc += w(c) * v(c);
  return acc;
}

// QMoE's quantized expert weights (onnxruntime's integer quantization, weights_prepacked 0):
// row r of an expert is `cols` codes of `bits` (4 or 8) bits packed in bytes, low nibble
// first; weight c is (code - 2^(bits - 1)) · scale, the scale of c's block of `block`
// columns (block = cols: one scale per row).
struct MoeQuant {
  int bits = 4;
  int64_t block = 0;
  bool per_row = false;  // no block_size: one scale per row (block = the row's width)
  // Bytes of a row of `cols` codes.
  TPC_HOST_DEVICE int64_t row_bytes(int64_t cols) const { return cols * bits / 8; }
  // Scales of a row of `cols` codes.
  TPC_HOST_DEVICE int64_t row_scales(int64_t cols) const { return cols / block; }
};

// Whether QMoE rounds this FC's input rows to int8 per block of q.block (math/nbits.h's
// Int8Rounded) before multiplying: onnxruntime 1.32's CPU does for 8-bit codes in blocks
// (given them as constants; checked against it), whatever accuracy_level says; 4-bit codes
// and 8-bit ones with a scale per row it multiplies in f32.
TPC_HOST_DEVICE inline bool MoeInt8Activations(const MoeQuant& q) {
  return q.bits == 8 && !q.per_row;
}

// Weight c of a row: `codes` its packed bytes, `scale(b)` the scale of its block b.
template <typename LoadScale>
TPC_HOST_DEVICE inline float MoeQuantWeight(const MoeQuant& q, const uint8_t* codes,
                                            LoadScale scale, int64_t c) {
  int code;
  if (q.bits == 8) {
    code = codes[c];
  } else {
    const uint8_t byte = codes[c / 2];
    code = (c & 1) != 0 ? byte >> 4 : byte & 0x0F;
  }
  return static_cast<float>(code - (1 << (q.bits - 1))) * scale(c / q.block);
}

// Element c of token t's output: its k slots' FC2 outputs (`slots`: [tokens · k, hidden],
// biases included) weighted by their routing weights, in slot order.
TPC_HOST_DEVICE inline float MoeCombine(const MoeLayout& l, const float* weights,
                                        const float* slots, int64_t t, int64_t c) {
  float acc = 0.0f;
  for (int64_t j = 0; j < l.k; ++j)
    acc += weights[t * l.k + j] * slots[(t * l.k + j) * l.hidden + c];
  return acc;
}

}  // namespace tpc::runtime::math
