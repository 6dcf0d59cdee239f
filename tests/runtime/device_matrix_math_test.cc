// The matrix kernels' math, against the CPU kernels: Det (math/det.h) as det.cu's threads
// compute it, from half-precision storage; Einsum's element math (math/einsum.h) as
// einsum.cu's threads compute it, with
// plans built here from the equation's letters (an independent reading: one stride per
// label per operand, summed over a repeated label, 0 where a dim of 1 broadcasts), against
// the CPU kernel: batched products, a transposed output, a diagonal, a trace, three
// operands, broadcasting and an outer product.
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/det.h"
#include "tpc/runtime/math/einsum.h"
#include "tpc/runtime/math/floats.h"

namespace tpc::runtime {
namespace {

using testing::Floats;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;

// The plan of `inputs->output` (letters only, every output letter in some input).
math::EinsumPlan Plan(const std::vector<std::string>& inputs, const std::string& output,
                      const std::vector<std::vector<int64_t>>& shapes) {
  std::map<char, int64_t> size;
  for (size_t k = 0; k < inputs.size(); ++k) {
    for (size_t d = 0; d < inputs[k].size(); ++d) {
      size[inputs[k][d]] = std::max(size[inputs[k][d]], shapes[k][d]);
    }
  }
  std::string summed;
  for (const auto& [letter, n] : size) {
    if (output.find(letter) == std::string::npos) summed += letter;
  }
  math::EinsumPlan p;
  p.operands = static_cast<int>(inputs.size());
  p.out_rank = static_cast<int>(output.size());
  p.sum_rank = static_cast<int>(summed.size());
  for (int d = 0; d < p.out_rank; ++d) p.out_dims[d] = size[output[static_cast<size_t>(d)]];
  for (int d = 0; d < p.sum_rank; ++d) {
    p.sum_dims[d] = size[summed[static_cast<size_t>(d)]];
    p.sums *= p.sum_dims[d];
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    int64_t stride = 1;
    for (size_t d = inputs[k].size(); d-- > 0;) {
      const char letter = inputs[k][d];
      if (shapes[k][d] != 1) {
        const size_t o = output.find(letter), s = summed.find(letter);
        if (o != std::string::npos) p.out_strides[k][o] += stride;
        if (s != std::string::npos) p.sum_strides[k][s] += stride;
      }
      stride *= shapes[k][d];
    }
  }
  return p;
}

// An equation's random operands (seeded from `seed`) and the CPU kernel's output.
struct CpuEinsum {
  std::vector<Tensor> xs;
  std::vector<float> want;
};
CpuEinsum RunCpuEinsum(const std::vector<std::string>& inputs, const std::string& output,
                       const std::vector<std::vector<int64_t>>& shapes, uint32_t seed) {
  std::string eq;
  for (const std::string& in : inputs) eq += (eq.empty() ? "" : ",") + in;
  eq += "->" + output;
  INFO(eq);
  OneOp o(12);
  CpuEinsum r;
  for (size_t k = 0; k < inputs.size(); ++k) {
    r.xs.push_back(Random(shapes[k], seed + static_cast<uint32_t>(k)));
    o.Input("x" + std::to_string(k), r.xs.back());
  }
  r.want = Floats(o.Run("Einsum", {{"equation", eq}})[0]);
  return r;
}

TEST_CASE("Einsum element math equals the CPU kernel", "[runtime][device-math]") {
  struct Case {
    std::vector<std::string> inputs;
    std::string output;
    std::vector<std::vector<int64_t>> shapes;
  };
  const std::vector<Case> cases = {
      {{"bij", "bjk"}, "bik", {{2, 3, 4}, {2, 4, 5}}},
      {{"bhqd", "bhkd"}, "bhqk", {{1, 2, 3, 4}, {1, 2, 5, 4}}},
      {{"ij", "jk"}, "ki", {{3, 4}, {4, 2}}},
      {{"ii"}, "i", {{4, 4}}},
      {{"ii"}, "", {{5, 5}}},
      {{"ij", "jk", "kl"}, "il", {{2, 3}, {3, 4}, {4, 2}}},
      {{"bij", "bjk"}, "bik", {{1, 3, 4}, {3, 4, 2}}},
      {{"i", "j"}, "ij", {{3}, {4}}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& tc = cases[c];
    INFO("case " << c << ": -> " << tc.output);
    const auto [xs, want] =
        RunCpuEinsum(tc.inputs, tc.output, tc.shapes, 70 + static_cast<uint32_t>(c * 5));
    const math::EinsumPlan p = Plan(tc.inputs, tc.output, tc.shapes);
    std::vector<float> got(want.size());
    for (int64_t i = 0; i < static_cast<int64_t>(got.size()); ++i) {
      got[static_cast<size_t>(i)] = math::EinsumElement(
          p, i, [&](int k, int64_t off) { return xs[static_cast<size_t>(k)].data<float>()[off]; });
    }
    RequireClose(got, want, 1e-5f);
  }
}

// Two-operand Einsums by their batched-GEMM form as einsum_ops.cc runs them: each operand
// gathered through its view (math::PlanEinsumGemm) into [batch, M, K] and [batch, K, N],
// the product, then scattered through the output view; batch labels in any place,
// transposed outputs, several labels of a kind, a broadcast operand; and equations with no
// GEMM form (a label summed in one operand only, three operands). Against the CPU kernel.
TEST_CASE("Einsum by one batched GEMM equals the CPU kernel", "[runtime][device-math]") {
  struct Case {
    std::vector<std::string> inputs;
    std::string output;
    std::vector<std::vector<int64_t>> shapes;
    bool gemm;
  };
  const std::vector<Case> cases = {
      {{"bhqd", "bhkd"}, "bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}, true},
      {{"qbd", "dbk"}, "kbq", {{4, 2, 5}, {5, 2, 3}}, true},
      {{"ij", "jk"}, "ki", {{3, 4}, {4, 2}}, true},
      {{"abij", "jkab"}, "bika", {{2, 3, 4, 5}, {5, 2, 2, 3}}, true},
      {{"bij", "bjk"}, "bik", {{1, 3, 4}, {3, 4, 2}}, true},
      {{"i", "j"}, "ij", {{3}, {4}}, true},  // no summed label: a GEMM with k = 1
      {{"ij", "jk"}, "i", {{3, 4}, {4, 2}}, false},
      {{"ij", "jk", "kl"}, "il", {{2, 3}, {3, 4}, {4, 2}}, false},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& tc = cases[c];
    INFO("case " << c << ": -> " << tc.output);
    const auto [xs, want] =
        RunCpuEinsum(tc.inputs, tc.output, tc.shapes, 90 + static_cast<uint32_t>(c * 5));
    const auto g = math::PlanEinsumGemm(Plan(tc.inputs, tc.output, tc.shapes));
    CHECK(g.has_value() == tc.gemm);
    if (!g.has_value()) continue;
    const auto gather = [](const Tensor& t, const math::StridedView& v) {
      int64_t n = 1;
      for (int d = 0; d < v.rank; ++d) n *= v.dims[d];
      std::vector<float> out(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = t.data<float>()[v.At(i)];
      return out;
    };
    const std::vector<float> a = gather(xs[0], g->a), b = gather(xs[1], g->b);
    std::vector<float> got(want.size());
    for (int64_t bi = 0; bi < g->batch; ++bi) {
      for (int64_t i = 0; i < g->m; ++i) {
        for (int64_t j = 0; j < g->n; ++j) {
          double acc = 0;
          for (int64_t q = 0; q < g->k; ++q) {
            acc += static_cast<double>(a[static_cast<size_t>((bi * g->m + i) * g->k + q)]) *
                   b[static_cast<size_t>((bi * g->k + q) * g->n + j)];
          }
          got[static_cast<size_t>(g->c.At((bi * g->m + i) * g->n + j))] = static_cast<float>(acc);
        }
      }
    }
    RequireClose(got, want, 1e-5f);
  }
}

// Det from f16 storage, each matrix loaded into f64 and eliminated by one thread, stored
// back as f16: the CPU kernel's result bit for bit (a pivot past a zero, a singular matrix,
// 1 × 1 and 4 × 4 matrices).
TEST_CASE("Det per-matrix math from f16 equals the CPU kernel", "[runtime][device-math]") {
  using IO = math::FloatIO<math::FloatKind::kF16>;
  for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{4}}) {
    INFO(m << " x " << m);
    Tensor x32 = Random({5, m, m}, 88);
    if (m == 3) {
      x32.data<float>()[0] = 0.0f;  // matrix 0 pivots past a zero
      for (int64_t j = 0; j < 3; ++j) x32.data<float>()[9 + 3 + j] = x32.data<float>()[9 + j];
    }
    Tensor x = Tensor::Allocate(ir::DType::kF16, {5, m, m});
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      x.data<uint16_t>()[i] = IO::Store(x32.data<float>()[i]);
    }
    OneOp o;
    o.Input("x", x);
    const Tensor want = o.Run("Det")[0];
    REQUIRE(want.dtype() == ir::DType::kF16);
    for (int64_t k = 0; k < 5; ++k) {
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t i = 0; i < m * m; ++i) {
        a[static_cast<size_t>(i)] =
            static_cast<double>(IO::Load(x.data<uint16_t>()[k * m * m + i]));
      }
      INFO("matrix " << k);
      CHECK(IO::Store(static_cast<float>(math::LuDeterminant(a.data(), m))) ==
            want.data<uint16_t>()[k]);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
