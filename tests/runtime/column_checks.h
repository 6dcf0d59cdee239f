// The check the int4 kernels' tests share: an output of rows × out_ld floats whose first
// `cols` columns a kernel wrote and whose others it must not touch.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"

namespace tpc::runtime::testing {

// The value the columns past `cols` were filled with before the kernel ran.
constexpr float kUntouched = 12345.0f;

// For every row r < rows: columns c < cols within 1e-6 of the sum's magnitude of want(r, c)
// (which returns {Σ terms, Σ |terms|} in double), columns cols .. out_ld - 1 kUntouched.
template <typename Want>
void RequireColumns(const std::vector<float>& out, int64_t rows, int64_t cols, int64_t out_ld,
                    Want want) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < out_ld; ++c) {
      const float got = out[static_cast<size_t>(r * out_ld + c)];
      INFO("row " << r << ", column " << c);
      if (c >= cols) {
        REQUIRE(got == kUntouched);  // past the columns: untouched
        continue;
      }
      const std::pair<double, double> sum = want(r, c);
      REQUIRE(std::abs(got - sum.first) <= 1e-6 * sum.second + 1e-7);
    }
  }
}

}  // namespace tpc::runtime::testing
