#include "tpc/shard/tied_weights.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

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

// The key a copy of `t` shares: its type, shape and sampled bytes. With `transposed`,
// the key of the matrix `t` is the transpose of (t read at the transposed positions),
// so that b = aᵀ has Key(b, true) == Key(a, false).
std::string Key(const ir::Tensor& t, bool transposed) {
  const int64_t rows = t.shape()[transposed ? 1 : 0];
  const int64_t cols = t.shape()[transposed ? 0 : 1];
  const size_t size = static_cast<size_t>(ir::DTypeSize(t.dtype()));
  std::string key = absl::StrCat(static_cast<int>(t.dtype()), ":", rows, "x", cols, ":");
  for (const auto& [i, j] : SamplePositions(rows, cols)) {
    key.append(reinterpret_cast<const char*>(transposed ? At(t, j, i) : At(t, i, j)), size);
  }
  return key;
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
  // original, not a clique, so the solver sees one link per copy. Candidates come from
  // the sampled keys (one pass over the weights), and only they are compared whole.
  std::vector<TiedPair> out;
  std::unordered_map<std::string, std::vector<size_t>> by_key;
  for (size_t j = 0; j < weights.size(); ++j) {
    const ir::Tensor& b = weights[j]->tensor();
    const std::string plain = Key(b, false);
    std::vector<std::pair<size_t, bool>> candidates;  // (earlier weight, transposed)
    if (auto it = by_key.find(plain); it != by_key.end()) {
      for (size_t i : it->second) candidates.emplace_back(i, false);
    }
    if (auto it = by_key.find(Key(b, true)); it != by_key.end()) {
      for (size_t i : it->second) candidates.emplace_back(i, true);
    }
    std::sort(candidates.begin(), candidates.end());
    for (const auto& [i, transposed] : candidates) {
      const ir::Tensor& a = weights[i]->tensor();
      if (transposed ? TransposedBytes(a, b) : SameBytes(a, b)) {
        out.push_back({weights[i]->output(0), weights[j]->output(0), transposed});
        break;
      }
    }
    by_key[plain].push_back(j);
  }
  return out;
}

}  // namespace tpc::shard
