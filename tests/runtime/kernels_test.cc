// CPU kernels on small graphs: broadcasting, indexing, axes, norms and losses.
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"
#include "tpc/ir/graph.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/executor.h"

namespace tpc::runtime {
namespace {

using ir::Dim;
using ir::DType;
using testing::F32;
using testing::Floats;
using testing::I64;
using testing::OneOp;

TEST_CASE("Binary ops broadcast numpy-style", "[runtime][kernels]") {
  OneOp t;
  t.Input("a", F32({2, 1, 3}, {1, 2, 3, 4, 5, 6}));
  t.Input("b", F32({4, 1}, {10, 20, 30, 40}));
  auto y = t.Run("Add");
  REQUIRE(y[0].shape() == std::vector<int64_t>{2, 4, 3});
  REQUIRE(y[0].data<float>()[0] == 11);
  REQUIRE(y[0].data<float>()[5] == 23);   // a[0,0,2] + b[1]
  REQUIRE(y[0].data<float>()[23] == 46);  // a[1,0,2] + b[3]
}

TEST_CASE("Where broadcasts its three operands", "[runtime][kernels]") {
  OneOp t;
  Tensor c = Tensor::Allocate(DType::kBool, {1, 3});
  c.data<bool>()[0] = true;
  c.data<bool>()[2] = true;
  t.Input("c", c);
  t.Input("x", F32({2, 1}, {1, 2}));
  t.Input("y", F32({}, {-1}));
  auto y = t.Run("Where");
  REQUIRE(Floats(y[0]) == std::vector<float>{1, -1, 1, 2, -1, 2});
}

TEST_CASE("Gather takes negative indices", "[runtime][kernels]") {
  OneOp t;
  t.Input("data", F32({3, 2}, {0, 1, 10, 11, 20, 21}));
  t.Input("idx", I64({2, 2}, {-1, 0, 1, -3}));
  auto y = t.Run("Gather", {{"axis", int64_t{0}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{2, 2, 2});
  REQUIRE(Floats(y[0]) == std::vector<float>{20, 21, 0, 1, 10, 11, 0, 1});
}

TEST_CASE("Gather on axis 1", "[runtime][kernels]") {
  OneOp t;
  t.Input("data", F32({2, 3}, {0, 1, 2, 10, 11, 12}));
  t.Input("idx", I64({1}, {-1}));
  auto y = t.Run("Gather", {{"axis", int64_t{1}}});
  REQUIRE(Floats(y[0]) == std::vector<float>{2, 12});
}

TEST_CASE("Slice with negative steps and clamped bounds", "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  t.Ints({-1, 100});   // starts
  t.Ints({-100, -6});  // ends (clamped)
  t.Ints({1, 0});      // axes
  t.Ints({-2, -1});    // steps
  auto y = t.Run("Slice");
  // axis 1: 4, 2, 0; axis 0: rows 1, 0.
  REQUIRE(y[0].shape() == std::vector<int64_t>{2, 3});
  REQUIRE(Floats(y[0]) == std::vector<float>{9, 7, 5, 4, 2, 0});
}

TEST_CASE("Softmax on a middle axis", "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({2, 2}, {0, 1, 0, 3}));
  auto y = t.Run("Softmax", {{"axis", int64_t{0}}});
  const auto v = Floats(y[0]);
  REQUIRE(v[0] == Approx(0.5));
  REQUIRE(v[2] == Approx(0.5));
  REQUIRE(v[1] == Approx(1 / (1 + std::exp(2.0))));
  REQUIRE(v[3] == Approx(std::exp(2.0) / (1 + std::exp(2.0))));
}

TEST_CASE("LayerNormalization with scale, bias and statistics", "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({2, 2}, {1, 3, 2, 4}));
  t.Input("g", F32({2}, {2, 1}));
  t.Input("b", F32({2}, {0, 1}));
  auto y = t.Run("LayerNormalization", {{"epsilon", 0.0f}}, 3);
  const auto v = Floats(y[0]);
  REQUIRE(v[0] == Approx(-2));
  REQUIRE(v[1] == Approx(2));
  REQUIRE(v[2] == Approx(-2));
  REQUIRE(y[1].data<float>()[0] == Approx(2));
  REQUIRE(y[2].data<float>()[0] == Approx(1));
}

TEST_CASE("SoftmaxCrossEntropyLoss with ignore_index and reductions", "[runtime][kernels]") {
  const std::vector<float> logits = {0, 0, 0, 1, 2, 3};  // [N=2, C=3]
  const double lse1 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  for (std::string reduction : {"mean", "sum", "none"}) {
    OneOp t;
    t.Input("scores", F32({2, 3}, logits));
    t.Input("labels", I64({2}, {1, 2}));
    auto y = t.Run("SoftmaxCrossEntropyLoss", {{"reduction", reduction}}, 2);
    const double l0 = std::log(3.0), l1 = lse1 - 3;
    if (reduction == "mean") REQUIRE(y[0].data<float>()[0] == Approx((l0 + l1) / 2));
    if (reduction == "sum") REQUIRE(y[0].data<float>()[0] == Approx(l0 + l1));
    if (reduction == "none") {
      REQUIRE(y[0].data<float>()[0] == Approx(l0));
      REQUIRE(y[0].data<float>()[1] == Approx(l1));
    }
  }
  OneOp t;
  t.Input("scores", F32({2, 3}, logits));
  t.Input("labels", I64({2}, {-100, 2}));
  auto y = t.Run("SoftmaxCrossEntropyLoss", {{"ignore_index", int64_t{-100}}});
  REQUIRE(y[0].data<float>()[0] == Approx(lse1 - 3));  // mean over the one kept label
}

TEST_CASE("MatMul broadcasts batch dims and handles vectors", "[runtime][kernels]") {
  OneOp t;
  t.Input("a", F32({2, 1, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0}));
  t.Input("b", F32({3, 3, 1}, {1, 1, 1, 0, 1, 0, 1, 0, 0}));
  auto y = t.Run("MatMul");
  REQUIRE(y[0].shape() == std::vector<int64_t>{2, 3, 2, 1});
  REQUIRE(Floats(y[0]) == std::vector<float>{6, 15, 2, 5, 1, 4, 1, 1, 0, 1, 1, 0});
  OneOp v;
  v.Input("a", F32({3}, {1, 2, 3}));
  v.Input("b", F32({3}, {4, 5, 6}));
  auto d = v.Run("MatMul");
  REQUIRE(d[0].rank() == 0);
  REQUIRE(d[0].data<float>()[0] == 32);
}

TEST_CASE("Reshape with 0 and -1, Transpose, Concat and Split", "[runtime][kernels]") {
  OneOp r;
  r.Input("x", F32({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  r.Ints({0, -1});
  REQUIRE(r.Run("Reshape")[0].shape() == std::vector<int64_t>{2, 6});
  OneOp tr;
  tr.Input("x", F32({2, 3}, {0, 1, 2, 3, 4, 5}));
  REQUIRE(Floats(tr.Run("Transpose", {{"perm", std::vector<int64_t>{1, 0}}})[0]) ==
          std::vector<float>{0, 3, 1, 4, 2, 5});
  OneOp c;
  c.Input("a", F32({2, 1}, {0, 1}));
  c.Input("b", F32({2, 2}, {2, 3, 4, 5}));
  REQUIRE(Floats(c.Run("Concat", {{"axis", int64_t{-1}}})[0]) ==
          std::vector<float>{0, 2, 3, 1, 4, 5});
  OneOp s;
  s.Input("x", F32({1, 5}, {0, 1, 2, 3, 4}));
  s.Ints({2, 3});
  auto parts = s.Run("Split", {{"axis", int64_t{1}}}, 2);
  REQUIRE(Floats(parts[0]) == std::vector<float>{0, 1});
  REQUIRE(Floats(parts[1]) == std::vector<float>{2, 3, 4});
}

TEST_CASE("Axes, split sizes and pads read from graph inputs at run time", "[runtime][kernels]") {
  // x = [[0 1 2 3 4] [5 6 7 8 9]]: columns 1 to 3 every other one on axis 1.
  OneOp slice;
  slice.Input("x", F32({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  slice.Ints({1});
  slice.Ints({4});
  slice.Input("axes", I64({1}, {-1}));
  slice.Input("steps", I64({1}, {2}));
  auto sliced = slice.Run("Slice");
  REQUIRE(sliced[0].shape() == std::vector<int64_t>{2, 2});
  CHECK(Floats(sliced[0]) == std::vector<float>{1, 3, 6, 8});

  OneOp squeeze(13);
  squeeze.Input("x", F32({2, 1, 3}, {0, 1, 2, 3, 4, 5}));
  squeeze.Input("axes", I64({1}, {1}));
  CHECK(squeeze.Run("Squeeze")[0].shape() == std::vector<int64_t>{2, 3});
  // An empty list squeezes every 1, as no axes do.
  OneOp squeeze_all(13);
  squeeze_all.Input("x", F32({1, 3, 1}, {0, 1, 2}));
  squeeze_all.Input("axes", I64({0}, {}));
  CHECK(squeeze_all.Run("Squeeze")[0].shape() == std::vector<int64_t>{3});

  OneOp unsqueeze(13);
  unsqueeze.Input("x", F32({2, 3}, {0, 1, 2, 3, 4, 5}));
  unsqueeze.Input("axes", I64({2}, {3, 0}));
  auto unsqueezed = unsqueeze.Run("Unsqueeze");
  CHECK(unsqueezed[0].shape() == std::vector<int64_t>{1, 2, 3, 1});
  CHECK(Floats(unsqueezed[0]) == std::vector<float>{0, 1, 2, 3, 4, 5});

  OneOp split(13);
  split.Input("x", F32({1, 5}, {0, 1, 2, 3, 4}));
  split.Input("split", I64({3}, {3, 0, 2}));
  auto parts = split.Run("Split", {{"axis", int64_t{1}}}, 3);
  CHECK(Floats(parts[0]) == std::vector<float>{0, 1, 2});
  CHECK(parts[1].shape() == std::vector<int64_t>{1, 0});
  CHECK(Floats(parts[2]) == std::vector<float>{3, 4});
  // An empty list: equal parts, as no sizes give.
  OneOp halves(13);
  halves.Input("x", F32({4}, {0, 1, 2, 3}));
  halves.Input("split", I64({0}, {}));
  auto half = halves.Run("Split", {}, 2);
  CHECK(Floats(half[0]) == std::vector<float>{0, 1});
  CHECK(Floats(half[1]) == std::vector<float>{2, 3});

  // One column of 9s before and two after, on axis -1 only.
  OneOp pad(18);
  pad.Input("x", F32({2, 2}, {1, 2, 3, 4}));
  pad.Input("pads", I64({2}, {1, 2}));
  pad.Input("value", F32({}, {9}));
  pad.Input("axes", I64({1}, {-1}));
  auto padded = pad.Run("Pad");
  REQUIRE(padded[0].shape() == std::vector<int64_t>{2, 5});
  CHECK(Floats(padded[0]) == std::vector<float>{9, 1, 2, 9, 9, 9, 3, 4, 9, 9});
}

TEST_CASE("ReduceMean over an input axes list, keepdims off", "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({2, 3}, {0, 1, 2, 3, 4, 5}));
  t.Ints({0});
  auto y = t.Run("ReduceMean", {{"keepdims", int64_t{0}}});
  REQUIRE(Floats(y[0]) == std::vector<float>{1.5, 2.5, 3.5});
}

TEST_CASE("f16 inputs are computed in f32 and converted back", "[runtime][kernels]") {
  OneOp t;
  Tensor a = ConvertFloats(F32({3}, {1.5f, -2.0f, 0.25f}), DType::kF16);
  t.Input("a", a);
  t.Input("b", a);
  auto y = t.Run("Mul");
  REQUIRE(y[0].dtype() == DType::kF16);
  REQUIRE(Floats(ConvertFloats(y[0], DType::kF32)) == std::vector<float>{2.25f, 4.0f, 0.0625f});
}

TEST_CASE("Einsum with three operands and an implicit output", "[runtime][kernels]") {
  OneOp t;
  t.Input("a", F32({2, 2}, {1, 2, 3, 4}));
  t.Input("b", F32({2, 2}, {1, 0, 2, 1}));
  t.Input("c", F32({2}, {1, 10}));
  // j and k appear twice: summed; the output is i alone.
  auto y = t.Run("Einsum", {{"equation", std::string("ij, jk, k")}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{2});
  CHECK(Floats(y[0]) == std::vector<float>{25, 51});
}

TEST_CASE("Einsum broadcasts ellipsis dims and takes diagonals", "[runtime][kernels]") {
  OneOp t;
  t.Input("a", F32({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  t.Input("b", F32({3, 2}, {1, 1, 1, 0, 0, 1}));
  // a's diagonal (i = i) per batch, dotted with every row of b: [2, 1, 3] -> [2, 3] after
  // the size-1 dim broadcasts against b's 3 rows.
  auto y = t.Run("Einsum", {{"equation", std::string("...ii,...i->...")}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{2, 3});
  CHECK(Floats(y[0]) == std::vector<float>{5, 1, 4, 13, 5, 8});
}

TEST_CASE("Einsum broadcasts a dim of 1 against a dim of 0", "[runtime][kernels]") {
  OneOp t;
  t.Input("a", F32({1, 3}, {1, 2, 3}));
  t.Input("b", F32({0, 3}, {}));
  auto y = t.Run("Einsum", {{"equation", std::string("ij,ij->ij")}});
  CHECK(y[0].shape() == std::vector<int64_t>{0, 3});
}

// The bitwise ops and BitShift on values worked out by hand: signed operands, shifts by the
// width and more (0), and a broadcast.
TEST_CASE("Bitwise operators and BitShift", "[runtime][kernels]") {
  const auto i8 = [](std::vector<int64_t> shape, std::vector<int8_t> v) {
    Tensor t = Tensor::Allocate(DType::kI8, shape);
    for (size_t i = 0; i < v.size(); ++i) t.data<int8_t>()[i] = v[i];
    return t;
  };
  const auto bits = [&](const std::string& op, std::vector<int8_t> b) {
    OneOp t(18);
    t.Input("a", i8({3}, {0x0F, -1, -128}));
    if (!b.empty()) t.Input("b", i8({1}, b));
    const Tensor y = t.Run(op)[0];
    return std::vector<int>(y.data<int8_t>(), y.data<int8_t>() + 3);
  };
  CHECK(bits("BitwiseAnd", {0x3C}) == std::vector<int>{0x0C, 0x3C, 0});
  CHECK(bits("BitwiseOr", {0x30}) == std::vector<int>{0x3F, -1, -128 + 0x30});
  CHECK(bits("BitwiseXor", {-1}) == std::vector<int>{-16, 0, 127});
  CHECK(bits("BitwiseNot", {}) == std::vector<int>{-16, 0, 127});
  Tensor a = Tensor::Allocate(DType::kU8, {4}), b = Tensor::Allocate(DType::kU8, {4});
  const uint8_t av[] = {0x81, 0x81, 0x81, 0x81}, bv[] = {1, 7, 8, 200};
  for (int i = 0; i < 4; ++i) {
    a.data<uint8_t>()[i] = av[i];
    b.data<uint8_t>()[i] = bv[i];
  }
  for (const std::string dir : {"LEFT", "RIGHT"}) {
    OneOp t;
    t.Input("a", a);
    t.Input("b", b);
    const Tensor y = t.Run("BitShift", {{"direction", dir}})[0];
    const std::vector<int> got(y.data<uint8_t>(), y.data<uint8_t>() + 4);
    CHECK(got == (dir == "LEFT" ? std::vector<int>{0x02, 0x80, 0, 0}
                                : std::vector<int>{0x40, 0x01, 0, 0}));
  }
}

TEST_CASE("EyeLike's shifted diagonal and OneHot's negative indices", "[runtime][kernels]") {
  OneOp e;
  e.Input("x", F32({2, 4}, std::vector<float>(8, 7.0f)));
  CHECK(Floats(e.Run("EyeLike", {{"k", int64_t{2}}})[0]) ==
        std::vector<float>{0, 0, 1, 0, 0, 0, 0, 1});
  OneOp o;
  o.Input("i", I64({3}, {0, -1, 2}));
  o.Input("depth", I64({}, {3}));
  o.Input("values", F32({2}, {0.5f, 9}));
  const Tensor y = o.Run("OneHot", {{"axis", int64_t{0}}})[0];
  REQUIRE(y.shape() == std::vector<int64_t>{3, 3});
  // Column j is index j one-hot along axis 0: 0, 2 (-1 from the end), 2.
  CHECK(Floats(y) == std::vector<float>{9, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 9, 9});
}

TEST_CASE("Det pivots past a zero and gives 0 for a singular matrix", "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({2, 3, 3}, {0, 2, 1, 1, 1, 1, 2, 0, 3, 1, 2, 3, 2, 4, 6, 1, 0, 1}));
  auto y = t.Run("Det");
  REQUIRE(y[0].shape() == std::vector<int64_t>{2});
  // Expansion along row 0: -2 * (3 - 2) + 1 * (0 - 2) = -4; rows 0 and 1 are parallel.
  CHECK(Floats(y[0])[0] == Approx(-4));
  CHECK(Floats(y[0])[1] == Approx(0).margin(1e-6));
}

TEST_CASE("GroupNormalization: scale per group (opset 18) and per channel (21)",
          "[runtime][kernels]") {
  // Groups of two channels: {0, 2, 4, 6} (mean 3, variance 5), {1, 1, 3, 5} (2.5, 2.75).
  const std::vector<float> x = {0, 2, 4, 6, 1, 1, 3, 5};
  const ir::Attributes attrs = {{"num_groups", int64_t{2}}, {"epsilon", 0.0f}};
  {
    OneOp t(18);
    t.Input("x", F32({1, 4, 1, 2}, x));
    t.Input("scale", F32({2}, {2, 1}));
    t.Input("bias", F32({2}, {1, 0}));
    const std::vector<float> y = Floats(t.Run("GroupNormalization", attrs)[0]);
    const std::vector<double> want = {-1.6832816, 0.1055728,  1.8944272, 3.6832816,
                                      -0.9045340, -0.9045340, 0.3015113, 1.5075567};
    for (size_t i = 0; i < want.size(); ++i) CHECK(y[i] == Approx(want[i]).epsilon(1e-5));
  }
  {
    OneOp t(21);
    t.Input("x", F32({1, 4, 1, 2}, x));
    t.Input("scale", F32({4}, {1, 2, 3, 4}));
    t.Input("bias", F32({4}, {0, 0, 1, 1}));
    const std::vector<float> y = Floats(t.Run("GroupNormalization", attrs)[0]);
    const std::vector<double> want = {-1.3416408, -0.4472136, 0.8944272, 2.6832816,
                                      -1.7136021, -1.7136021, 2.2060454, 7.0302269};
    for (size_t i = 0; i < want.size(); ++i) CHECK(y[i] == Approx(want[i]).epsilon(1e-5));
  }
}

TEST_CASE("MeanVarianceNormalization over given axes and a constant line gives 0",
          "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({2, 2}, {1, 3, 5, 5}));
  auto y = t.Run("MeanVarianceNormalization", {{"axes", std::vector<int64_t>{1}}});
  CHECK(Floats(y[0])[0] == Approx(-1));
  CHECK(Floats(y[0])[1] == Approx(1));
  CHECK(Floats(y[0])[2] == 0);
  CHECK(Floats(y[0])[3] == 0);
}

TEST_CASE("ReverseSequence, time-major and batch-major", "[runtime][kernels]") {
  {
    OneOp t;
    t.Input("x", F32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}));  // [time, batch]
    t.Input("lens", I64({2}, {3, 1}));
    auto y = t.Run("ReverseSequence", {{"batch_axis", int64_t{1}}, {"time_axis", int64_t{0}}});
    CHECK(Floats(y[0]) == std::vector<float>{4, 1, 2, 3, 0, 5, 6, 7});
  }
  {
    OneOp t;
    t.Input("x", F32({2, 3}, {0, 1, 2, 3, 4, 5}));  // [batch, time]
    t.Input("lens", I64({2}, {2, 3}));
    auto y = t.Run("ReverseSequence", {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}});
    CHECK(Floats(y[0]) == std::vector<float>{1, 0, 2, 5, 4, 3});
  }
}

TEST_CASE("CenterCropPad crops and pads odd amounts with the extra element last",
          "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  t.Ints({2, 7});
  auto y = t.Run("CenterCropPad");
  REQUIRE(y[0].shape() == std::vector<int64_t>{2, 7});
  // Rows: 3 -> 2 drops the last; columns: 4 -> 7 pads one before, two after.
  CHECK(Floats(y[0]) == std::vector<float>{0, 0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 7, 0, 0});
}

}  // namespace
}  // namespace tpc::runtime

namespace tpc::runtime {

TEST_CASE("Integer arithmetic wraps around as onnxruntime's does", "[runtime][kernels]") {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto run = [](const std::string& op, std::vector<int64_t> a, std::vector<int64_t> b) {
    OneOp t;
    const int64_t n = static_cast<int64_t>(a.size());
    t.Input("a", I64({n}, a));
    if (!b.empty()) t.Input("b", I64({n}, b));
    Tensor y = t.Run(op)[0];
    return std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + y.num_elements());
  };
  // Two's complement: the results a signed overflow would give on every machine tpc runs on.
  // 2^62·4 = 2^64 wraps to 0; 3·(2^63 − 1) = 2^63 − 3 (mod 2^64) = kMax − 2.
  CHECK(run("Mul", {int64_t{1} << 62, 3}, {4, kMax}) == std::vector<int64_t>{0, kMax - 2});
  CHECK(run("Add", {kMax, kMin}, {1, -1}) == std::vector<int64_t>{kMin, kMax});
  CHECK(run("Sub", {kMin, kMax}, {1, -1}) == std::vector<int64_t>{kMax, kMin});
  CHECK(run("Div", {kMin, 7}, {-1, -1}) == std::vector<int64_t>{kMin, -7});
  CHECK(run("Mod", {kMin, 7}, {-1, 3}) == std::vector<int64_t>{0, 1});
  CHECK(run("Neg", {kMin, 5}, {}) == std::vector<int64_t>{kMin, -5});
  CHECK(run("Abs", {kMin, -5}, {}) == std::vector<int64_t>{kMin, 5});
}

TEST_CASE("tpc::CheckIndices: Gather's rule, class labels, i32 and i64", "[runtime][kernels]") {
  auto i32 = [](std::vector<int32_t> v) {
    Tensor t = Tensor::Allocate(DType::kI32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<int32_t>());
    return t;
  };
  const ir::Attributes gather = {
      {"dim", int64_t{10}}, {"wrap", int64_t{1}}, {"source", std::string("node 'emb' (Gather)")}};
  const ir::Attributes labels = {
      {"dim", int64_t{10}},
      {"wrap", int64_t{0}},
      {"ignore_index", int64_t{-100}},
      {"source", std::string("node 'loss' (NegativeLogLikelihoodLoss)")}};
  {
    OneOp t;
    t.Input("x", I64({4}, {-1, -10, 0, 9}));
    auto y = t.TryRun("CheckIndices", gather, 1, "tpc");
    REQUIRE(y.ok());
    const Tensor& out = (*y)[0];
    CHECK(std::vector<int64_t>(out.data<int64_t>(), out.data<int64_t>() + 4) ==
          std::vector<int64_t>{9, 0, 0, 9});
  }
  {
    OneOp t;
    t.Input("x", i32({-3, 7}));
    auto y = t.TryRun("CheckIndices", gather, 1, "tpc");
    REQUIRE(y.ok());
    CHECK((*y)[0].dtype() == DType::kI32);
    CHECK((*y)[0].data<int32_t>()[0] == 7);
    CHECK((*y)[0].data<int32_t>()[1] == 7);
  }
  for (int64_t bad : {int64_t{10}, int64_t{-11}}) {
    OneOp t;
    t.Input("x", I64({2}, {0, bad}));
    auto y = t.TryRun("CheckIndices", gather, 1, "tpc");
    REQUIRE_FALSE(y.ok());
    CHECK_THAT(std::string(y.status().message()),
               Catch::Contains("node 'emb' (Gather): index " + std::to_string(bad) +
                               " is out of range for a dim of 10"));
  }
  {
    // Labels: ignore_index passes through unchanged, negatives do not wrap.
    OneOp t;
    t.Input("x", I64({3}, {-100, 0, 9}));
    auto y = t.TryRun("CheckIndices", labels, 1, "tpc");
    REQUIRE(y.ok());
    CHECK((*y)[0].data<int64_t>()[0] == -100);
    OneOp u;
    u.Input("x", I64({1}, {-1}));
    auto z = u.TryRun("CheckIndices", labels, 1, "tpc");
    REQUIRE_FALSE(z.ok());
    CHECK_THAT(std::string(z.status().message()),
               Catch::Contains("node 'loss' (NegativeLogLikelihoodLoss): label -1 is out of "
                               "range for 10 classes"));
  }
}

}  // namespace tpc::runtime
