// Rows of attention scores on the CPU: softcap, the softmax and onnxruntime's smooth
// softmax of one row, for attention.cc's kernels and GroupQueryAttention's (gqa.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tpc::runtime::cpu {

// softcap * tanh(x / softcap); softcap 0 leaves x.
inline double Softcap(double x, double softcap) {
  return softcap > 0 ? softcap * std::tanh(x / softcap) : x;
}

// Softmax of `n` scores in place; a row whose every score is -inf becomes zeros.
template <typename T>
void SoftmaxRow(T* row, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(row[j]));
  if (std::isinf(mx) && mx < 0) {
    for (int64_t j = 0; j < n; ++j) row[j] = T(0);
    return;
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double e = std::exp(static_cast<double>(row[j]) - mx);
    row[j] = static_cast<T>(e);
    sum += e;
  }
  for (int64_t j = 0; j < n; ++j) row[j] = static_cast<T>(row[j] / sum);
}

// onnxruntime's smooth softmax and attention sinks: the softmax of the row with one more
// score, `sink`, that is then dropped (a row can attend to "nothing"):
// exp(x_j - m) / (exp(sink - m) + Σ exp(x_k - m)), m = max(sink, max x). Smooth softmax is
// a sink of 0.
template <typename T>
void SinkSoftmaxRow(T* row, int64_t n, double sink) {
  double mx = sink;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(row[j]));
  if (mx == -std::numeric_limits<double>::infinity()) {  // nothing open (as SoftmaxRow)
    std::fill(row, row + n, T(0));
    return;
  }
  double sum = std::exp(sink - mx);
  for (int64_t j = 0; j < n; ++j) {
    const double e = std::exp(static_cast<double>(row[j]) - mx);
    row[j] = static_cast<T>(e);
    sum += e;
  }
  for (int64_t j = 0; j < n; ++j) row[j] = static_cast<T>(row[j] / sum);
}

}  // namespace tpc::runtime::cpu
