// CPU kernels of the sliding-window operators (Conv, ConvTranspose, pools) on cases the
// ONNX node tests leave out: groups with dilations and asymmetric padding, 1-D windows.
// Expected values are onnxruntime's.
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::Floats;
using testing::OneOp;

std::vector<float> Iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}

TEST_CASE("Conv 1-D with groups, dilation, stride, asymmetric pads and bias",
          "[runtime][kernels]") {
  OneOp t(17);
  t.Input("x", F32({1, 4, 5}, Iota(20)));
  t.Input("w", F32({2, 2, 2}, {1, -1, 2, 0.5, 0, 1, -2, 1}));
  t.Input("b", F32({2}, {0.5, -1}));
  auto y = t.Run("Conv", {{"group", int64_t{2}},
                          {"dilations", std::vector<int64_t>{2}},
                          {"pads", std::vector<int64_t>{1, 0}},
                          {"strides", std::vector<int64_t>{2}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 2, 2});
  CHECK(Floats(y[0]) == std::vector<float>{2.5, 14.5, 26, -2});
}

TEST_CASE("ConvTranspose 1-D with groups, stride and output_padding", "[runtime][kernels]") {
  OneOp t(17);
  t.Input("x", F32({1, 4, 5}, Iota(20)));
  t.Input("w", F32({4, 1, 2}, {1, -1, 2, 0.5, 0, 1, -2, 1}));
  auto y = t.Run("ConvTranspose", {{"group", int64_t{2}},
                                   {"strides", std::vector<int64_t>{2}},
                                   {"output_padding", std::vector<int64_t>{1}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 2, 11});
  CHECK(Floats(y[0]) == std::vector<float>{10,  2.5, 13,  2,  16,  1.5, 19,  1,  22,  0.5, 0,
                                           -30, 25,  -32, 27, -34, 29,  -36, 31, -38, 33,  0});
}

TEST_CASE("MaxPool indices in row- and column-major order", "[runtime][kernels]") {
  for (int64_t order : {0, 1}) {
    OneOp t(17);
    t.Input("x", F32({1, 1, 2, 3}, {1, 9, 2, 8, 3, 7}));
    auto y = t.Run("MaxPool",
                   {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"storage_order", order}}, 2);
    REQUIRE(y[0].shape() == std::vector<int64_t>{1, 1, 1, 2});
    CHECK(Floats(y[0]) == std::vector<float>{9, 9});
    // 9 is at row 0, column 1: 1 row-major, 2 column-major (1 * 2 rows + 0).
    const int64_t want = order == 0 ? 1 : 2;
    CHECK(y[1].data<int64_t>()[0] == want);
    CHECK(y[1].data<int64_t>()[1] == want);
  }
}

TEST_CASE("Col2Im with strides, padding and dilations sums overlapping blocks",
          "[runtime][kernels]") {
  // 2 channels of a 5 x 4 image; 2 x 2 blocks, strides (2, 1), dilations (1, 2), pads
  // (1, 0, 0, 1): positions along H (5 + 1 - 2) / 2 + 1 = 3, along W (4 + 1 - 3) + 1 = 3.
  const int64_t c = 2, h = 5, w = 4, kh = 2, kw = 2, oh = 3, ow = 3;
  std::vector<float> cols(static_cast<size_t>(c * kh * kw * oh * ow));
  for (size_t i = 0; i < cols.size(); ++i) cols[i] = static_cast<float>(i % 7) - 2;
  OneOp t;
  t.Input("cols", F32({1, c * kh * kw, oh * ow}, cols));
  t.Ints({h, w});
  t.Ints({kh, kw});
  auto y = t.Run("Col2Im", {{"strides", std::vector<int64_t>{2, 1}},
                            {"dilations", std::vector<int64_t>{1, 2}},
                            {"pads", std::vector<int64_t>{1, 0, 0, 1}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, c, h, w});
  std::vector<float> want(static_cast<size_t>(c * h * w), 0);
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t a = 0; a < kh; ++a) {
      for (int64_t b = 0; b < kw; ++b) {
        for (int64_t i = 0; i < oh; ++i) {
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t r = i * 2 + a - 1, q = j + b * 2;
            if (r < 0 || r >= h || q >= w) continue;
            want[static_cast<size_t>((ch * h + r) * w + q)] +=
                cols[static_cast<size_t>(((ch * kh + a) * kw + b) * oh * ow + i * ow + j)];
          }
        }
      }
    }
  }
  CHECK(Floats(y[0]) == want);
}

TEST_CASE("MaxUnpool with padding puts values at their indices", "[runtime][kernels]") {
  OneOp t;
  t.Input("x", F32({1, 1, 2, 2}, {1, 2, 3, 4}));
  t.Input("i", testing::I64({1, 1, 2, 2}, {0, 3, 5, 8}));
  // (2 - 1) * 2 - 1 + 2 = 3 per dim.
  auto y = t.Run("MaxUnpool", {{"kernel_shape", std::vector<int64_t>{2, 2}},
                               {"strides", std::vector<int64_t>{2, 2}},
                               {"pads", std::vector<int64_t>{1, 1, 0, 0}}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 1, 3, 3});
  CHECK(Floats(y[0]) == std::vector<float>{1, 0, 0, 2, 0, 3, 0, 0, 4});
}

}  // namespace
}  // namespace tpc::runtime
