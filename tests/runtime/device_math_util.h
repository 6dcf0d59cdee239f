// Helpers of the device-math tests: random inputs and a relative comparison.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/runtime/tensor.h"

namespace tpc::runtime::testing {

// f32 values uniform in [-2, 2), reproducible by seed.
inline Tensor Random(std::vector<int64_t> shape, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Tensor t = Tensor::Allocate(ir::DType::kF32, std::move(shape));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(g);
  return t;
}

// |got - want| <= tol · (1 + |want|) element by element (equal infinities and NaN against
// NaN pass).
inline void RequireClose(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1.0f + std::abs(want[i])));
  }
}

}  // namespace tpc::runtime::testing
