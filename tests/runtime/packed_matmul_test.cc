// MatMul by a constant weight packed once (oneDNN, src/runtime/cpu/packed_matmul.cc):
// the same products as the plain loops, across runs of different row counts (a new
// primitive each, one packed weight), with a batch of rows folded into M.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/ir/graph.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/executor.h"

namespace tpc::runtime {
namespace {

using ir::Dim;
using ir::DType;

// x [batch, seq, k] · w [k, n] (a constant) -> y into `g`, shapes inferred.
void MatMulByConstant(ir::Graph& g, int64_t k, int64_t n, const std::vector<float>& w) {
  g.opsets()[""] = 18;
  ir::Value* x = g.AddPlaceholder(
      "x", ir::TensorType(DType::kF32, {Dim::Symbol("batch"), Dim::Symbol("seq"), Dim(k)}));
  ir::Value* wv = g.AddConstant("w", ir::Tensor::FromFloat({k, n}, w));
  g.SetOutputs({g.AddCall("", "MatMul", {x, wv}, {"y"})->output()});
  REQUIRE(onnx::InferShapes(g).ok());
}

// Runs `ex` on x [batch, seq, k] drawn from `phase`; the largest error of its output
// against the product in double.
double WorstError(Executor& ex, const std::vector<float>& w, int64_t batch, int64_t seq, int64_t k,
                  int64_t n, int64_t phase) {
  Tensor in = Tensor::Allocate(DType::kF32, {batch, seq, k});
  for (int64_t i = 0; i < in.num_elements(); ++i)
    in.data<float>()[i] = std::cos(0.11f * static_cast<float>(i + phase));
  auto out = ex.Run({{"x", in}});
  REQUIRE(out.ok());
  const Tensor& got = (*out)[0];
  REQUIRE(got.shape() == std::vector<int64_t>{batch, seq, n});
  double worst = 0;
  for (int64_t r = 0; r < batch * seq; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t p = 0; p < k; ++p) want += double(in.data<float>()[r * k + p]) * w[p * n + j];
      worst = std::max(worst, std::abs(got.data<float>()[r * n + j] - want));
    }
  }
  return worst;
}

TEST_CASE("MatMul by a packed constant weight equals the plain product", "[runtime][matmul]") {
  // Not multiples of any blocking. 45 columns are one panel; 203 are a panel per thread
  // (2 threads: 112 + 91 columns; 3: 80 + 80 + 43), each written into strided columns.
  constexpr int64_t k = 67;
  const auto [n, threads] =
      GENERATE(std::pair<int64_t, int>{45, 2}, std::pair<int64_t, int>{203, 2},
               std::pair<int64_t, int>{203, 3});
  INFO(n << " columns, " << threads << " threads");
  // Row counts of 2 equal blocks on 2 threads (one primitive run twice at once), of
  // unequal ones, and of one block; each run several times.
  std::vector<float> w(k * n);
  for (int64_t i = 0; i < k * n; ++i) w[i] = std::sin(0.37f * static_cast<float>(i));
  ir::Graph g;
  MatMulByConstant(g, k, n, w);
  auto backend = MakeCpuBackend(threads);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  std::vector<std::pair<int64_t, int64_t>> runs = {{1, 5}, {3, 17}};
  for (int rep = 0; rep < 30; ++rep) {  // a race shows in some runs only
    runs.emplace_back(2, 34);
    runs.emplace_back(4, 128);
  }
  runs.emplace_back(1, 5);
  for (const auto& [batch, seq] : runs) {
    const double worst = WorstError(**ex, w, batch, seq, k, n, batch);
    INFO("batch " << batch << " seq " << seq << ": worst error " << worst);
    CHECK(worst < 1e-4);
  }
#ifdef TPC_HAVE_DNNL
  CHECK(backend->kernel_states()->size() == 1);  // one packed weight for every run
#endif
  CHECK(backend->kernel_states() != nullptr);
}

// Up to 4 rows against a small B (SmallGemm, not BLAS): the same products, a batched A
// folded into rows; an empty inner dim gives zeros (the output comes from the arena).
TEST_CASE("MatMul of a few rows by a small weight equals the plain product", "[runtime][matmul]") {
  const int64_t k = GENERATE(int64_t{0}, int64_t{3}, int64_t{1024});
  constexpr int64_t n = 8;
  INFO("k " << k);
  std::vector<float> w(static_cast<size_t>(k * n));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.29f * static_cast<float>(i));
  ir::Graph g;
  MatMulByConstant(g, k, n, w);
  auto backend = MakeCpuBackend(2);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  for (const auto& [batch, seq] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 3}, {2, 2}, {1, 5}, {2, 2}, {1, 1}}) {
    const double worst = WorstError(**ex, w, batch, seq, k, n, seq);
    INFO("batch " << batch << " seq " << seq << ": worst error " << worst);
    CHECK(worst < 1e-4);
  }
}

}  // namespace
}  // namespace tpc::runtime
