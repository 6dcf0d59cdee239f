// Per-target math of the device losses (NegativeLogLikelihoodLoss, and
// SoftmaxCrossEntropyLoss after its log-softmax): the CPU kernels (cpu/loss.cc) compute the
// same terms in double; the host tests compare.
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/strided.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// The targets' layout: log-probabilities [n, c, inner], labels [n, inner], an optional
// class weight [c], an optional ignored label.
struct NllLayout {
  int64_t n = 0, c = 0, inner = 1;
  bool has_ignore = false;
  int64_t ignore = 0;
  TPC_HOST_DEVICE int64_t targets() const { return n * inner; }
};

struct NllTerm {
  double loss = 0;    // -weight · logp[label]
  double weight = 0;  // the label's weight (0 when ignored)
  bool ok = true;     // false: the label is out of range
};

// Target t (= b · inner + i): its loss and weight.
template <FloatKind K, typename Index>
TPC_HOST_DEVICE inline NllTerm NllOf(const typename FloatIO<K>::Storage* logp, const Index* labels,
                                     const typename FloatIO<K>::Storage* weight, const NllLayout& l,
                                     int64_t t) {
  using IO = FloatIO<K>;
  const int64_t label = static_cast<int64_t>(labels[t]);
  NllTerm term;
  if (l.has_ignore && label == l.ignore) return term;
  if (label < 0 || label >= l.c) {
    term.ok = false;
    return term;
  }
  const int64_t b = DivIndex(t, l.inner);
  const int64_t i = t - b * l.inner;
  term.weight = weight != nullptr ? static_cast<double>(IO::Load(weight[label])) : 1.0;
  term.loss = -term.weight * static_cast<double>(IO::Load(logp[(b * l.c + label) * l.inner + i]));
  return term;
}

// The reduced loss from the sums: the sum, or the weighted mean (NaN when every target
// was ignored, as the CPU kernel gives).
TPC_HOST_DEVICE inline double ReduceNll(double loss_sum, double weight_sum, bool mean) {
  if (!mean) return loss_sum;
  return weight_sum == 0 ? static_cast<double>(NAN) : loss_sum / weight_sum;
}

}  // namespace tpc::runtime::math
