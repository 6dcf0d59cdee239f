#include "tpc/shard/tied_weights.h"

#include <cstring>

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

// A tensor whose elements all have the same bytes (zeros, ones: fresh biases, masks):
// equal to any other such tensor without being one parameter.
bool Uniform(const ir::Tensor& t) {
  const size_t size = static_cast<size_t>(ir::DTypeSize(t.dtype()));
  const uint8_t* p = t.data();
  for (size_t i = size; i < t.nbytes(); i += size) {
    if (std::memcmp(p, p + i, size) != 0) return false;
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
        static_cast<int64_t>(t.nbytes()) >= min_bytes && !Uniform(t)) {
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
      if (a.shape() == b.shape() && SameBytes(a, b)) {
        out.push_back({weights[i]->output(0), weights[j]->output(0), false});
        break;
      }
      if (a.shape()[0] == b.shape()[1] && a.shape()[1] == b.shape()[0] && TransposedBytes(a, b)) {
        out.push_back({weights[i]->output(0), weights[j]->output(0), true});
        break;
      }
    }
  }
  return out;
}

}  // namespace tpc::shard
