// Upsample (deprecated at opset 10) runs on Resize's kernel with Resize-10's semantics:
// asymmetric coordinates, nearest rounding down; scales as an input (opset 9) or an
// attribute (opset 7). The importer reads opsets 11 and up, so the ONNX node test of
// Upsample (opset 9) is refused there; these run the kernel on a one-op graph. Expected
// values worked out by hand.
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"

namespace tpc::runtime {
namespace {

using testing::F32;
using testing::Floats;
using testing::OneOp;

TEST_CASE("Upsample nearest (scales input) and linear (scales attribute)", "[runtime][kernels]") {
  // The node test's case: [[1, 2], [3, 4]] by (2, 3) repeats each element.
  OneOp t(9);
  t.Input("x", F32({1, 1, 2, 2}, {1, 2, 3, 4}));
  t.Input("scales", F32({4}, {1, 1, 2, 3}));
  auto y = t.Run("Upsample", {{"mode", std::string("nearest")}});
  REQUIRE(y[0].shape() == std::vector<int64_t>{1, 1, 4, 6});
  CHECK(Floats(y[0]) ==
        std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // Linear by 2 along the last dim: output x reads x / 2, the last one clamped.
  OneOp l(7);
  l.Input("x", F32({1, 2}, {1, 3}));
  auto z =
      l.Run("Upsample", {{"mode", std::string("linear")}, {"scales", std::vector<float>{1, 2}}});
  REQUIRE(z[0].shape() == std::vector<int64_t>{1, 4});
  CHECK(Floats(z[0]) == std::vector<float>{1, 2, 3, 3});
}

}  // namespace
}  // namespace tpc::runtime
