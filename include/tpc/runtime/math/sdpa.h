// Row math of the attention operators on the device, as the CPU kernels (cpu/attention.cc)
// compute it: ONNX's Attention (opset 23): the additive bias of each key (a bool or float
// mask broadcast to [batch, q heads, q, its columns], keys past its columns masked, causal
// at the end of the past), softcap, and which scores output 3 holds; onnxruntime's
// MultiHeadAttention and Attention: mask_filter_value added where a key is padded and
// again where (unidirectional) it follows the query, plus the attention bias (a float
// mask over all the keys).
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/runtime/math/floats.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

struct SdpaLayout {
  int64_t batch = 0, hq = 0, qs = 0, total = 0, past = 0;
  bool causal = false;
  float softcap = 0.0f;
  int mask = 0;  // 0: none, 1: bool, 2: of the scores' kind
  int64_t mask_cols = 0;
  int64_t mask_strides[4] = {};  // over [batch, q heads, q, columns] (0: broadcast)
  int qk_mode = -1;              // output 3's qk_matmul_output_mode; -1: not wanted
  // onnxruntime's masking: causal adds `filter` instead of masking; `pad` (int32) marks
  // padded keys: mode 1 [batch, total] (0: padded), mode 2 [batch] (the keys of each row;
  // the rest padded).
  bool ort = false;
  float filter = -10000.0f;
  int pad_mode = 0;
};

// The bias added to the score of key j for query i of (b, h): 0 without a mask, the float
// mask's value, or -inf where the key is masked.
template <FloatKind K>
TPC_HOST_DEVICE inline float SdpaBias(const SdpaLayout& l, const void* mask, const int32_t* pad,
                                      int64_t b, int64_t h, int64_t i, int64_t j) {
  if (l.ort) {
    float s = 0.0f;
    if ((l.pad_mode == 1 && pad[b * l.total + j] == 0) || (l.pad_mode == 2 && j >= pad[b])) {
      s += l.filter;
    }
    if (l.causal && j > i + l.past) s += l.filter;
    if (l.mask == 2) {
      s += FloatIO<K>::Load(static_cast<const typename FloatIO<K>::Storage*>(
          mask)[b * l.mask_strides[0] + h * l.mask_strides[1] + i * l.mask_strides[2] +
                j * l.mask_strides[3]]);
    }
    return s;
  }
  if (l.causal && j > i + l.past) return -INFINITY;
  if (l.mask == 0) return 0.0f;
  if (j >= l.mask_cols) return -INFINITY;
  const int64_t at =
      b * l.mask_strides[0] + h * l.mask_strides[1] + i * l.mask_strides[2] + j * l.mask_strides[3];
  if (l.mask == 1) return static_cast<const bool*>(mask)[at] ? 0.0f : -INFINITY;
  return FloatIO<K>::Load(static_cast<const typename FloatIO<K>::Storage*>(mask)[at]);
}

// softcap · tanh(x / softcap); 0 leaves x.
TPC_HOST_DEVICE inline float SdpaSoftcap(const SdpaLayout& l, float x) {
  return l.softcap > 0.0f ? l.softcap * tanhf(x / l.softcap) : x;
}

}  // namespace tpc::runtime::math
