// Views (Kernel::view): Reshape, Identity, Squeeze, Unsqueeze and Flatten give their
// output their input's memory; the input then lives until the view's last reader, even
// when the arena would otherwise hand its bytes to later values.
#include <cmath>
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

TEST_CASE("A view's input outlives it in the arena", "[runtime][views]") {
  // a = Relu(x); v = Squeeze(Unsqueeze(Reshape(a))) (a chain of views of a); then a row
  // of temporaries the size of a, each dead after the next: without the lifetime of a
  // extended to v's last use, the arena gives a's bytes to one of them.
  ir::Graph g;
  g.opsets()[""] = 18;
  ir::Value* x = g.AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(64), Dim(32)}));
  ir::Value* a = g.AddCall("", "Relu", {x}, {"a"})->output();
  ir::Value* shape = g.AddConstant("shape", ir::Tensor::FromInt64({2}, {32, 64}));
  ir::Value* axes = g.AddConstant("axes", ir::Tensor::FromInt64({1}, {0}));
  ir::Value* r = g.AddCall("", "Reshape", {a, shape}, {"r"})->output();
  ir::Value* u = g.AddCall("", "Unsqueeze", {r, axes}, {"u"})->output();
  ir::Value* v = g.AddCall("", "Squeeze", {u, axes}, {"v"})->output();
  ir::Value* t = x;
  for (int i = 0; i < 6; ++i) t = g.AddCall("", "Neg", {t}, {"t" + std::to_string(i)})->output();
  ir::Value* t2 = g.AddCall("", "Reshape", {t, shape}, {"t_r"})->output();
  ir::Value* y = g.AddCall("", "Add", {v, t2}, {"y"})->output();
  ir::Value* w = g.AddCall("", "Identity", {v}, {"w"})->output();  // a view as an output
  g.SetOutputs({y, w});
  REQUIRE(onnx::InferShapes(g).ok());
  auto backend = MakeCpuBackend(1);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  Tensor in = Tensor::Allocate(DType::kF32, {64, 32});
  for (int64_t i = 0; i < in.num_elements(); ++i)
    in.data<float>()[i] = std::sin(0.3f * static_cast<float>(i));
  for (int run = 0; run < 2; ++run) {
    auto out = (*ex)->Run({{"x", in}});
    REQUIRE(out.ok());
    const Tensor& sum = (*out)[0];
    const Tensor& view = (*out)[1];
    REQUIRE(sum.shape() == std::vector<int64_t>{32, 64});
    REQUIRE(view.shape() == std::vector<int64_t>{32, 64});
    int64_t wrong = 0;
    for (int64_t i = 0; i < in.num_elements(); ++i) {
      const float xi = in.data<float>()[i];
      const float relu = xi > 0 ? xi : 0.0f;
      wrong += view.data<float>()[i] != relu;
      wrong += sum.data<float>()[i] != relu + xi;  // six negations: +x
    }
    CHECK(wrong == 0);
  }
  // Reshape, Unsqueeze, Squeeze and Identity took no memory of their own: the arena holds
  // a and the temporaries only (no more than three of a's size live at once).
  const RunStats& stats = (*ex)->last_stats();
  CHECK(stats.arena_bytes <= 3 * 64 * 32 * 4);
}

}  // namespace
}  // namespace tpc::runtime
