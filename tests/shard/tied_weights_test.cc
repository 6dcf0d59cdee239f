// Tied weights: copies of one matrix (or its transpose) are found, uniform tensors
// are not taken for copies, and each copy links to the original (a star, not a clique).
#include <catch2/catch.hpp>

#include <vector>

#include "tpc/ir/graph.h"
#include "tpc/shard/tied_weights.h"

namespace {

using tpc::ir::Graph;
using tpc::ir::Tensor;

std::vector<float> Ramp(int n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

}  // namespace

TEST_CASE("tied weights: equal and transposed copies, not uniform tensors", "[shard]") {
  Graph g;
  // a [32, 64] with distinct values; b = a; t = transpose(a).
  const std::vector<float> a = Ramp(32 * 64, 1.0f);
  std::vector<float> t(a.size());
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 64; ++j)
      t[static_cast<size_t>(j * 32 + i)] = a[static_cast<size_t>(i * 64 + j)];
  }
  g.AddConstant("a", Tensor::FromFloat({32, 64}, a));
  g.AddConstant("other", Tensor::FromFloat({32, 64}, Ramp(32 * 64, 5.0f)));
  g.AddConstant("b", Tensor::FromFloat({32, 64}, a));
  g.AddConstant("t", Tensor::FromFloat({64, 32}, t));
  g.AddConstant("c", Tensor::FromFloat({32, 64}, a));
  // Two zero matrices and two zero biases: equal bytes, yet not one parameter.
  g.AddConstant("z1", Tensor::FromFloat({32, 64}, std::vector<float>(32 * 64, 0.0f)));
  g.AddConstant("z2", Tensor::FromFloat({32, 64}, std::vector<float>(32 * 64, 0.0f)));
  g.AddConstant("bias1", Tensor::FromFloat({2048}, Ramp(2048, 0)));
  g.AddConstant("bias2", Tensor::FromFloat({2048}, Ramp(2048, 0)));

  const auto pairs = tpc::shard::FindTiedWeights(g);
  REQUIRE(pairs.size() == 3);
  // Every copy ties to the first one it equals (a star, not all pairs).
  CHECK(pairs[0].a->name() == "a");
  CHECK(pairs[0].b->name() == "b");
  CHECK_FALSE(pairs[0].transposed);
  CHECK(pairs[1].a->name() == "a");
  CHECK(pairs[1].b->name() == "t");
  CHECK(pairs[1].transposed);
  CHECK(pairs[2].a->name() == "a");
  CHECK(pairs[2].b->name() == "c");
}
