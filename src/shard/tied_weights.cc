#include "tpc/shard/tied_weights.h"

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace tpc::shard {
namespace {

bool SameBytes(const ir::Tensor& a, const ir::Tensor& b) {
  return std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// b[j][i] == a[i][j] for 2-D a [m, n] and b [n, m], element by element.
bool TransposedBytes(const ir::Tensor& a, const ir::Tensor& b) {
  const int64_t m = a.shape()[0];
  const int64_t n = a.shape()[1];
  const int64_t size = ir::DTypeSize(a.dtype());
  const uint8_t* pa = a.data();
  const uint8_t* pb = b.data();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (std::memcmp(pa + (i * n + j) * size, pb + (j * m + i) * size,
                      static_cast<size_t>(size)) != 0) {
        return false;
      }
    }
  }
  return true;
}

// Compile never reads a weight's bytes except to slice it: candidates are found by
// comparing a few sampled elements, and only pairs whose samples agree are compared
// whole. A 70B-parameter file of zeros is then touched at kSamples pages per matrix.
constexpr int64_t kSamples = 32;

// Element (i, j) of 2-D `t`.
const uint8_t* At(const ir::Tensor& t, int64_t i, int64_t j) {
  return t.data() + (i * t.shape()[1] + j) * ir::DTypeSize(t.dtype());
}

// kSamples positions spread over an [m, n] matrix (a fixed multiplicative hash of
// the sample index), the same for every matrix of that shape.
std::vector<std::pair<int64_t, int64_t>> SamplePositions(int64_t m, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const uint64_t total = static_cast<uint64_t>(m) * static_cast<uint64_t>(n);
  for (int64_t k = 0; k < kSamples; ++k) {
    const uint64_t e = (static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull + 12345) % total;
    out.emplace_back(static_cast<int64_t>(e / static_cast<uint64_t>(n)),
                     static_cast<int64_t>(e % static_cast<uint64_t>(n)));
  }
  return out;
}

// Whether the sampled elements of `b` equal those of `a` (or of aᵀ).
bool SamplesAgree(const ir::Tensor& a, const ir::Tensor& b, bool transposed) {
  const size_t size = static_cast<size_t>(ir::DTypeSize(a.dtype()));
  for (const auto& [i, j] : SamplePositions(a.shape()[0], a.shape()[1])) {
    if (std::memcmp(At(a, i, j), transposed ? At(b, j, i) : At(b, i, j), size) != 0) return false;
  }
  return true;
}

// A tensor whose sampled elements all have the same bytes (zeros, ones: fresh weights,
// masks) is not taken for a copy: equal to any other such tensor without being one
// parameter, and proving it uniform would mean reading it whole.
bool LooksUniform(const ir::Tensor& t) {
  const size_t size = static_cast<size_t>(ir::DTypeSize(t.dtype()));
  const auto positions = SamplePositions(t.shape()[0], t.shape()[1]);
  const uint8_t* first = At(t, positions[0].first, positions[0].second);
  for (const auto& [i, j] : positions) {
    if (std::memcmp(first, At(t, i, j), size) != 0) return false;
  }
  return true;
}

}  // namespace

std::vector<TiedPair> FindTiedWeights(const ir::Graph& graph, int64_t min_bytes) {
  // Matrices only (embeddings and heads are what exporters store twice), and not
  // uniform ones.
  std::vector<const ir::Node*> weights;
  for (ir::Node* n : graph.nodes()) {
    if (n->kind() != ir::NodeKind::kConstant) continue;
    const ir::Tensor& t = n->tensor();
    if (t.has_data() && ir::IsFloating(t.dtype()) && t.shape().size() == 2 &&
        static_cast<int64_t>(t.nbytes()) >= min_bytes && !LooksUniform(t)) {
      weights.push_back(n);
    }
  }
  // Each weight ties to the first earlier one it equals: copies form a star around the
  // original, not a clique, so the solver sees one link per copy.
  std::vector<TiedPair> out;
  for (size_t j = 0; j < weights.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      const ir::Tensor& a = weights[i]->tensor();
      const ir::Tensor& b = weights[j]->tensor();
      if (a.dtype() != b.dtype() || a.nbytes() != b.nbytes()) continue;
      if (a.shape() == b.shape() && SamplesAgree(a, b, false) && SameBytes(a, b)) {
        out.push_back({weights[i]->output(0), weights[j]->output(0), false});
        break;
      }
      if (a.shape()[0] == b.shape()[1] && a.shape()[1] == b.shape()[0] &&
          SamplesAgree(a, b, true) && TransposedBytes(a, b)) {
        out.push_back({weights[i]->output(0), weights[j]->output(0), true});
        break;
      }
    }
  }
  return out;
}

}  // namespace tpc::shard
