// tp-run --check-against's comparison: numpy.allclose with equal NaNs, and a note that
// counts the elements NaN or infinite against a number (their error is no number).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "tpc/runtime/compare.h"

namespace tpc::runtime {
namespace {

Tensor ComparedFloats(const std::vector<float>& values) {
  Tensor t = Tensor::Allocate(ir::DType::kF32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = values[i];
  return t;
}

TEST_CASE("a comparison counts NaN and infinities against numbers apart", "[compare]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor want = ComparedFloats({1.0f, 2.0f, nan, inf, 5.0f});

  const Comparison same =
      CompareTensors(ComparedFloats({1.0f, 2.00001f, nan, inf, 5.0f}), want, 1e-4, 1e-5);
  CHECK(same.pass);
  CHECK(same.note.empty());
  CHECK(same.max_abs < 1e-4);

  // All NaN (a half plan whose mask overflowed): no finite error to show.
  const Comparison nans =
      CompareTensors(ComparedFloats({nan, nan, nan, inf, nan}), want, 1e-4, 1e-5);
  CHECK_FALSE(nans.pass);
  CHECK(nans.first_bad == 0);
  CHECK(std::isinf(nans.max_abs));
  CHECK(nans.note == "3 of 5 NaN or infinite against another value");

  const Comparison off =
      CompareTensors(ComparedFloats({1.0f, 2.5f, nan, -inf, 5.0f}), want, 1e-4, 1e-5);
  CHECK_FALSE(off.pass);
  CHECK(off.first_bad == 1);
  CHECK(off.note == "1 of 5 NaN or infinite against another value");
}

}  // namespace
}  // namespace tpc::runtime
