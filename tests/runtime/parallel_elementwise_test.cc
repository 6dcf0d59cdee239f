// Element-wise kernels whose loops the pool splits into several chunks (ForEachBroadcast:
// the same-shape path, the innermost-run path, the general path) give each element its
// own operands: large tensors on 2 threads against a plain loop.
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

// Each output's count of wrong elements is 0.
void CheckNoneWrong(const int64_t (&wrong)[4]) {
  for (int k = 0; k < 4; ++k) {
    INFO("output " << k);
    CHECK(wrong[k] == 0);
  }
}

TEST_CASE("element-wise loops split across threads read each element's operands",
          "[runtime][elementwise]") {
  constexpr int64_t rows = 6, cols = 40000;  // 240000 elements: several chunks
  ir::Graph g;
  g.opsets()[""] = 18;
  ir::Value* x = g.AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(rows), Dim(cols)}));
  ir::Value* y = g.AddPlaceholder("y", ir::TensorType(DType::kF32, {Dim(rows), Dim(cols)}));
  ir::Value* row = g.AddPlaceholder("row", ir::TensorType(DType::kF32, {Dim(cols)}));
  ir::Value* col = g.AddPlaceholder("col", ir::TensorType(DType::kF32, {Dim(rows), Dim(1)}));
  ir::Value* same = g.AddCall("", "Add", {x, y}, {"same"})->output();
  ir::Value* bias = g.AddCall("", "Sub", {x, row}, {"bias"})->output();
  ir::Value* down = g.AddCall("", "Mul", {x, col}, {"down"})->output();
  ir::Value* gelu = g.AddCall("", "Sigmoid", {x}, {"sig"})->output();
  g.SetOutputs({same, bias, down, gelu});
  REQUIRE(onnx::InferShapes(g).ok());
  auto backend = MakeCpuBackend(2);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  auto fill = [](std::vector<int64_t> shape, float scale) {
    Tensor t = Tensor::Allocate(DType::kF32, std::move(shape));
    for (int64_t i = 0; i < t.num_elements(); ++i)
      t.data<float>()[i] = std::sin(scale * static_cast<float>(i));
    return t;
  };
  Tensor tx = fill({rows, cols}, 0.001f), ty = fill({rows, cols}, 0.0007f);
  Tensor trow = fill({cols}, 0.003f), tcol = fill({rows, 1}, 1.3f);
  auto out = (*ex)->Run({{"x", tx}, {"y", ty}, {"row", trow}, {"col", tcol}});
  REQUIRE(out.ok());
  int64_t wrong[4] = {};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const float xv = tx.data<float>()[i];
      wrong[0] += (*out)[0].data<float>()[i] != xv + ty.data<float>()[i];
      wrong[1] += (*out)[1].data<float>()[i] != xv - trow.data<float>()[c];
      wrong[2] += (*out)[2].data<float>()[i] != xv * tcol.data<float>()[r];
      wrong[3] += std::abs((*out)[3].data<float>()[i] - 1.0f / (1.0f + std::exp(-xv))) > 1e-6f;
    }
  }
  CheckNoneWrong(wrong);
}

// The general walk (detail::BroadcastWalk): a last dim under 4 in f32, and every shape in
// i16 (a type without vectorized runs); the chunks of 256 elements and the pool's splits
// start mid-row.
TEST_CASE("element-wise loops through the general walk read each element's operands",
          "[runtime][elementwise]") {
  constexpr int64_t rows = 40001, cols = 3;  // 120003 elements: several splits, odd ends
  ir::Graph g;
  g.opsets()[""] = 18;
  auto add = [&](const char* name, DType t, std::vector<Dim> dims) {
    return g.AddPlaceholder(name, ir::TensorType(t, std::move(dims)));
  };
  ir::Value* x = add("x", DType::kF32, {Dim(rows), Dim(cols)});
  ir::Value* row = add("row", DType::kF32, {Dim(cols)});
  ir::Value* col = add("col", DType::kF32, {Dim(rows), Dim(1)});
  ir::Value* a = add("a", DType::kI16, {Dim(rows), Dim(cols)});
  ir::Value* b = add("b", DType::kI16, {Dim(rows), Dim(cols)});
  ir::Value* brow = add("brow", DType::kI16, {Dim(1), Dim(cols)});
  ir::Value* bias = g.AddCall("", "Sub", {x, row}, {"bias"})->output();
  ir::Value* down = g.AddCall("", "Mul", {x, col}, {"down"})->output();
  ir::Value* same16 = g.AddCall("", "Add", {a, b}, {"same16"})->output();
  ir::Value* less16 = g.AddCall("", "Less", {a, brow}, {"less16"})->output();
  g.SetOutputs({bias, down, same16, less16});
  REQUIRE(onnx::InferShapes(g).ok());
  auto backend = MakeCpuBackend(2);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  auto fill = [](DType t, std::vector<int64_t> shape, int64_t seed) {
    Tensor v = Tensor::Allocate(t, std::move(shape));
    for (int64_t i = 0; i < v.num_elements(); ++i) {
      const int64_t k = (i * 7919 + seed) % 1009 - 504;
      if (t == DType::kF32)
        v.data<float>()[i] = static_cast<float>(k) / 64.0f;
      else
        v.data<int16_t>()[i] = static_cast<int16_t>(k);
    }
    return v;
  };
  Tensor tx = fill(DType::kF32, {rows, cols}, 1), trow = fill(DType::kF32, {cols}, 2);
  Tensor tcol = fill(DType::kF32, {rows, 1}, 3), ta = fill(DType::kI16, {rows, cols}, 4);
  Tensor tb = fill(DType::kI16, {rows, cols}, 5), tbrow = fill(DType::kI16, {1, cols}, 6);
  auto out =
      (*ex)->Run({{"x", tx}, {"row", trow}, {"col", tcol}, {"a", ta}, {"b", tb}, {"brow", tbrow}});
  REQUIRE(out.ok());
  int64_t wrong[4] = {};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const float xv = tx.data<float>()[i];
      const int16_t av = ta.data<int16_t>()[i];
      wrong[0] += (*out)[0].data<float>()[i] != xv - trow.data<float>()[c];
      wrong[1] += (*out)[1].data<float>()[i] != xv * tcol.data<float>()[r];
      wrong[2] += (*out)[2].data<int16_t>()[i] != static_cast<int16_t>(av + tb.data<int16_t>()[i]);
      wrong[3] += (*out)[3].data<bool>()[i] != (av < tbrow.data<int16_t>()[c]);
    }
  }
  CheckNoneWrong(wrong);
}

}  // namespace
}  // namespace tpc::runtime

namespace tpc::runtime {
namespace {

TEST_CASE("Split over threads puts each row's pieces in their outputs", "[runtime][movement]") {
  constexpr int64_t rows = 96, cols = 3 * 700;  // rows split over 2 threads
  ir::Graph g;
  g.opsets()[""] = 18;
  ir::Value* x = g.AddPlaceholder("x", ir::TensorType(DType::kF32, {Dim(rows), Dim(cols)}));
  ir::Value* sizes = g.AddConstant("sizes", ir::Tensor::FromInt64({3}, {700, 600, 800}));
  ir::Node* split = g.AddCall("", "Split", {x, sizes}, {"a", "b", "c"}, {{"axis", int64_t{1}}});
  g.SetOutputs(split->outputs());
  REQUIRE(onnx::InferShapes(g).ok());
  auto backend = MakeCpuBackend(2);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  Tensor tx = Tensor::Allocate(DType::kF32, {rows, cols});
  for (int64_t i = 0; i < tx.num_elements(); ++i) tx.data<float>()[i] = static_cast<float>(i);
  auto out = (*ex)->Run({{"x", tx}});
  REQUIRE(out.ok());
  const int64_t widths[3] = {700, 600, 800};
  int64_t wrong = 0, start = 0;
  for (int k = 0; k < 3; ++k) {
    REQUIRE((*out)[k].shape() == std::vector<int64_t>{rows, widths[k]});
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < widths[k]; ++c) {
        wrong +=
            (*out)[k].data<float>()[r * widths[k] + c] != tx.data<float>()[r * cols + start + c];
      }
    }
    start += widths[k];
  }
  CHECK(wrong == 0);
}

}  // namespace
}  // namespace tpc::runtime
