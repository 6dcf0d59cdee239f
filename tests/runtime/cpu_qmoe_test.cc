// The CPU QMoE kernel's product paths (a decode step's few tokens straight from the
// 4-bit codes, more tokens against dequantized tiles in passes of 64 rows, 8-bit codes
// through the BLAS) against MoE's kernel on the same weights dequantized here by
// math::MoeQuantWeight, and the same bits on 1 and 4 threads (each output column is one
// work item's, whatever thread runs it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/math/moe.h"

namespace tpc::runtime {
namespace {

struct Fc {
  Tensor codes, scales, dequantized;
};

// Random codes of `bits` for [experts, rows, cols] weights, scales per block of `block`
// (0: one per row), and the weights they stand for.
Fc QuantizedFc(int64_t experts, int64_t rows, int64_t cols, int bits, int64_t block,
               uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.01f, 0.2f);
  math::MoeQuant q;
  q.bits = bits;
  q.block = block > 0 ? block : cols;
  Fc fc;
  fc.codes = Tensor::Allocate(ir::DType::kU8, {experts, rows, q.row_bytes(cols)});
  for (int64_t i = 0; i < fc.codes.num_elements(); ++i) fc.codes.data<uint8_t>()[i] = rng() & 255;
  const int64_t per_row = q.row_scales(cols);
  fc.scales = block > 0 ? Tensor::Allocate(ir::DType::kF32, {experts, rows, per_row})
                        : Tensor::Allocate(ir::DType::kF32, {experts, rows});
  for (int64_t i = 0; i < fc.scales.num_elements(); ++i) fc.scales.data<float>()[i] = u(rng);
  fc.dequantized = Tensor::Allocate(ir::DType::kF32, {experts, rows, cols});
  for (int64_t r = 0; r < experts * rows; ++r) {
    const uint8_t* codes = fc.codes.data<uint8_t>() + r * q.row_bytes(cols);
    const float* scales = fc.scales.data<float>() + r * per_row;
    for (int64_t c = 0; c < cols; ++c) {
      fc.dequantized.data<float>()[r * cols + c] = math::MoeQuantWeight(
          q, codes, [&](int64_t b) { return scales[b]; }, c);
    }
  }
  return fc;
}

TEST_CASE("QMoE's CPU kernel equals MoE's on the weights its codes stand for",
          "[runtime][cpu][int4]") {
  struct Case {
    int bits;
    int64_t block;  // 0: a scale per row
    const char* activation;
    int64_t tokens, k;
  };
  // Tokens an expert: a few (the codes read directly), many (tiles; 130 with k = 4 of 6
  // experts: more than 64 an expert, two passes of rows); per-row scales of a multiple of
  // 32 take the int4 loops too; 8 bits go through the BLAS. (8-bit codes in blocks round
  // their inputs to int8, as onnxruntime does: the node tests check those against it.)
  for (const Case& c :
       {Case{4, 32, "swiglu", 1, 4}, Case{4, 64, "silu", 3, 2}, Case{4, 32, "swiglu", 130, 4},
        Case{4, 0, "gelu", 20, 2}, Case{8, 0, "swiglu", 2, 2}, Case{8, 0, "relu", 40, 3},
        Case{4, 32, "geglu", 9, 2}}) {
    INFO(c.bits << " bits, block " << c.block << ", " << c.activation << ", " << c.tokens
                << " tokens, k " << c.k);
    const std::string act = c.activation;
    const int64_t experts = 6, hidden = 128, inter = 64;
    const int64_t rows = act == "swiglu" || act == "geglu" ? 2 * inter : inter;
    const Tensor x = testing::Random({c.tokens, hidden}, 1);
    const Tensor router = testing::Random({c.tokens, experts}, 2);
    const Tensor b1 = testing::Random({experts, rows}, 3);
    const Tensor b2 = testing::Random({experts, hidden}, 4);
    const Fc fc1 = QuantizedFc(experts, rows, hidden, c.bits, c.block, 5);
    const Fc fc2 = QuantizedFc(experts, hidden, inter, c.bits, c.block, 6);
    ir::Attributes attrs = {
        {"activation_type", act}, {"k", c.k}, {"normalize_routing_weights", int64_t{1}}};
    if (act == "swiglu") {  // gpt-oss's
      attrs["activation_alpha"] = 1.702f;
      attrs["activation_beta"] = 1.0f;
      attrs["swiglu_limit"] = 7.0f;
    }
    if (act == "swiglu" || act == "geglu") attrs["swiglu_fusion"] = int64_t{1};
    testing::OneOp moe;
    moe.Input("input", x);
    moe.Input("router_probs", router);
    moe.Input("fc1", fc1.dequantized);
    moe.Input("fc1_bias", b1);
    moe.Input("fc2", fc2.dequantized);
    moe.Input("fc2_bias", b2);
    auto want = moe.TryRun("MoE", attrs, 1, "com.microsoft");
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    attrs["expert_weight_bits"] = int64_t{c.bits};
    if (c.block > 0) attrs["block_size"] = c.block;
    std::vector<std::vector<float>> got;
    for (int threads : {1, 4}) {
      auto backend = MakeCpuBackend(threads);
      testing::OneOp qmoe;
      qmoe.Input("input", x);
      qmoe.Input("router_probs", router);
      qmoe.Input("fc1", fc1.codes);
      qmoe.Input("fc1_scales", fc1.scales);
      qmoe.Input("fc1_bias", b1);
      qmoe.Input("fc2", fc2.codes);
      qmoe.Input("fc2_scales", fc2.scales);
      qmoe.Input("fc2_bias", b2);
      auto y = qmoe.TryRun("QMoE", attrs, 1, "com.microsoft", backend.get());
      INFO(y.status().ToString());
      REQUIRE(y.ok());
      got.push_back(testing::Floats((*y)[0]));
    }
    // Sums of 64 to 128 products of a few units, one order of accumulation against
    // another: within 1e-5 of the largest output.
    const std::vector<float> ref = testing::Floats((*want)[0]);
    float largest = 0.0f;
    for (const float v : ref) largest = std::max(largest, std::abs(v));
    REQUIRE(got[0].size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("element " << i << ": " << got[0][i] << " vs " << ref[i]);
      REQUIRE(std::abs(got[0][i] - ref[i]) <= 1e-5f * largest);
    }
    REQUIRE(got[0] == got[1]);
  }
}

TEST_CASE("MoE refuses GeGLU with SwiGLU's parameters, naming the node", "[runtime][cpu]") {
  testing::OneOp o;
  o.Input("input", testing::Random({2, 16}, 1));
  o.Input("router_probs", testing::Random({2, 4}, 2));
  o.Input("fc1", testing::Random({4, 16, 16}, 3));
  o.None();
  o.Input("fc2", testing::Random({4, 16, 8}, 4));
  auto y = o.TryRun("MoE",
                    {{"activation_type", std::string("geglu")},
                     {"swiglu_fusion", int64_t{1}},
                     {"k", int64_t{2}},
                     {"activation_alpha", 1.702f}},
                    1, "com.microsoft");
  REQUIRE_FALSE(y.ok());
  CHECK_THAT(std::string(y.status().message()), Catch::Contains("the_op") &&
                                                    Catch::Contains("geglu") &&
                                                    Catch::Contains("activation_alpha 1.702"));
}

}  // namespace
}  // namespace tpc::runtime
