// The vectorizable float math of the CPU kernels (src/runtime/cpu/vector_math.h)
// against <cmath>, over the whole range and at the edges.
#include <cmath>
#include <limits>
#include <random>

#include "catch2/catch.hpp"
#include "runtime/cpu/vector_math.h"

namespace {

using tpc::runtime::cpu::GeluErf;
using tpc::runtime::cpu::GeluTanh;
using tpc::runtime::cpu::Sigmoid;
using tpc::runtime::cpu::VExp;

double RelErr(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), std::numeric_limits<double>::min());
}

}  // namespace

TEST_CASE("vector math: exp is within 3e-7 relative over its range", "[runtime][vector_math]") {
  double worst = 0, at = 0;
  for (float x = -87.0f; x <= 88.7f; x += 0.00137f) {
    const double e = RelErr(VExp(x), std::exp(static_cast<double>(x)));
    if (e > worst) {
      worst = e;
      at = x;
    }
  }
  INFO("worst relative error " << worst << " at " << at);
  CHECK(worst < 3e-7);
  // Powers of two and small arguments exactly or nearly.
  CHECK(VExp(0.0f) == 1.0f);
  CHECK(RelErr(VExp(1e-8f), 1.0) < 1e-7);
  CHECK(RelErr(VExp(std::log(2.0f) * 10), 1024.0) < 3e-7);
}

TEST_CASE("vector math: exp at the edges", "[runtime][vector_math]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(VExp(-inf) == 0.0f);
  CHECK(VExp(-100.0f) == 0.0f);  // std::exp: a denormal or 0
  CHECK(VExp(inf) == inf);
  CHECK(VExp(89.0f) == inf);
  CHECK(std::isfinite(VExp(88.72f)));
  CHECK(RelErr(VExp(88.72f), std::exp(static_cast<double>(88.72f))) < 3e-7);
  CHECK(RelErr(VExp(-87.3f), std::exp(static_cast<double>(-87.3f))) < 3e-7);
  CHECK(std::isnan(VExp(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("vector math: sigmoid and the GELUs against the cmath forms", "[runtime][vector_math]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-12.0f, 12.0f);
  double sig = 0, erf = 0, tanh = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = d(rng);
    const double xd = x;
    sig = std::max(sig, std::abs(Sigmoid(x) - 1.0 / (1.0 + std::exp(-xd))));
    erf = std::max(erf, std::abs(GeluErf(x) - 0.5 * xd * (1.0 + std::erf(xd / std::sqrt(2.0)))));
    const double u = std::sqrt(2.0 / M_PI) * (xd + 0.044715 * xd * xd * xd);
    tanh = std::max(tanh, std::abs(GeluTanh(x) - 0.5 * xd * (1.0 + std::tanh(u))));
  }
  INFO("sigmoid " << sig << ", gelu erf " << erf << ", gelu tanh " << tanh);
  CHECK(sig < 2e-7);
  // Absolute, on values up to 12: 3e-7 relative to the largest.
  CHECK(erf < 4e-6);
  CHECK(tanh < 4e-6);
  // Near 0 the exact GELU is x/2 + x²/√(2π): relative error stays small there too.
  for (float x : {1e-3f, -1e-3f, 1e-5f, 0.25f, -0.25f}) {
    const double want = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    CHECK(RelErr(GeluErf(x), want) < 3e-4);
  }
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(Sigmoid(-inf) == 0.0f);
  CHECK(Sigmoid(inf) == 1.0f);
  CHECK(GeluErf(inf) == inf);
  CHECK(GeluTanh(-50.0f) == 0.0f);
  CHECK(std::isnan(GeluErf(std::numeric_limits<float>::quiet_NaN())));
}
