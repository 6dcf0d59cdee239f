// CPU kernels of NonMaxSuppression and RoiAlign on cases worked out by hand: the greedy
// order with ties, the strict score threshold, the output limit, an absent limit; RoiAlign's
// sample positions on a linear image (where bilinear sampling is exact) in both modes.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::Floats;
using testing::I64;
using testing::OneOp;

std::vector<int64_t> Ints(const Tensor& t) {
  return {t.data<int64_t>(), t.data<int64_t>() + t.num_elements()};
}

// Boxes b0 = b1 (IoU 1), b2 overlapping them by 1/3, b3 apart; class 0 scores
// (0.5, 0.9, 0.8, 0.5), class 1 (0.7, 0.1, 0.1, 0.7).
absl::StatusOr<std::vector<Tensor>> Nms(std::vector<Tensor> limits) {
  OneOp t(11);
  t.Input("boxes", F32({1, 4, 4}, {0, 0, 1, 1, 0, 0, 1, 1, 0, 0.5f, 1, 1.5f, 2, 2, 3, 3}));
  t.Input("scores", F32({1, 2, 4}, {0.5f, 0.9f, 0.8f, 0.5f, 0.7f, 0.1f, 0.1f, 0.7f}));
  for (size_t i = 0; i < limits.size(); ++i) t.Input("limit" + std::to_string(i), limits[i]);
  return t.TryRun("NonMaxSuppression");
}

TEST_CASE("NonMaxSuppression: greedy by score, ties by index, limits", "[runtime][kernels]") {
  // iou 0.5: class 0 keeps b1, b2 (IoU 1/3), drops b0 (IoU 1 with b1), keeps b3; class 1
  // keeps b0 then b3 (tie: lower index first), drops b1, keeps b2.
  auto all = Nms({I64({1}, {3}), F32({1}, {0.5f})});
  REQUIRE(all.ok());
  REQUIRE((*all)[0].shape() == std::vector<int64_t>{6, 3});
  CHECK(Ints((*all)[0]) ==
        std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 1, 0, 0, 1, 3, 0, 1, 2});
  // At most 2 per class.
  auto two = Nms({I64({1}, {2}), F32({1}, {0.5f})});
  REQUIRE(two.ok());
  CHECK(Ints((*two)[0]) == std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 0, 0, 1, 3});
  // Scores must exceed the threshold: 0.5 drops b0 and b3 of class 0, all but b0, b3 of 1.
  auto scored = Nms({I64({1}, {3}), F32({1}, {0.5f}), F32({1}, {0.5f})});
  REQUIRE(scored.ok());
  CHECK(Ints((*scored)[0]) == std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 0, 0, 1, 3});
  // No limit given: nothing is selected.
  auto none = Nms({});
  REQUIRE(none.ok());
  CHECK((*none)[0].shape() == std::vector<int64_t>{0, 3});
}

// X[y, x] = 4y + x on 4 x 4: bilinear samples inside give 4y + x exactly.
std::vector<float> Roi(ir::Attributes attrs, std::vector<float> box) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  OneOp t(16);
  t.Input("x", F32({1, 1, 4, 4}, x));
  t.Input("rois", F32({1, 4}, std::move(box)));
  t.Input("batch", I64({1}, {0}));
  attrs["output_height"] = int64_t{2};
  attrs["output_width"] = int64_t{2};
  return Floats(t.Run("RoiAlign", std::move(attrs))[0]);
}

TEST_CASE("RoiAlign: sample positions under half_pixel, spatial_scale, max mode",
          "[runtime][kernels]") {
  // half_pixel, region (0, 0)-(4, 4): bins of 2 starting at -0.5; one sample per bin at its
  // centre, (0.5 + 2i, 0.5 + 2j) -> 4y + x.
  CHECK_THAT(Roi({{"sampling_ratio", int64_t{1}}}, {0, 0, 4, 4}),
             Catch::Matchers::Approx(std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
  // The same region given at twice the scale; 2 x 2 samples average to the same values.
  CHECK_THAT(Roi({{"sampling_ratio", int64_t{2}}, {"spatial_scale", 0.5f}}, {0, 0, 8, 8}),
             Catch::Matchers::Approx(std::vector<float>{2.5f, 4.5f, 10.5f, 12.5f}));
  // output_half_pixel: no shift, samples at (0.5 + 2i, 0.5 + 2j) + 0.5.
  CHECK_THAT(Roi({{"sampling_ratio", int64_t{1}},
                  {"coordinate_transformation_mode", std::string("output_half_pixel")}},
                 {0, 0, 4, 4}),
             Catch::Matchers::Approx(std::vector<float>{5, 7, 13, 15}));
  // max over 2 x 2 samples at whole pixels (output_half_pixel): the largest pixel of each bin.
  CHECK_THAT(Roi({{"sampling_ratio", int64_t{2}},
                  {"mode", std::string("max")},
                  {"coordinate_transformation_mode", std::string("output_half_pixel")}},
                 {-0.5f, -0.5f, 3.5f, 3.5f}),
             Catch::Matchers::Approx(std::vector<float>{5, 7, 13, 15}));
}

TEST_CASE("RoiAlign refuses an image with no pixel, naming the node", "[runtime][kernels]") {
  OneOp o(16);
  o.Input("x", F32({1, 1, 0, 5}, {}));
  o.Input("rois", F32({1, 4}, {0, 0, 1, 1}));
  o.Input("batch", I64({1}, {0}));
  const auto out = o.TryRun("RoiAlign");
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message().find("no pixel to sample") != std::string::npos);
  CHECK(out.status().message().find("the_op") != std::string::npos);
}

}  // namespace
}  // namespace tpc::runtime
