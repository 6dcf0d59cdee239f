// MoE's device math (tpc/runtime/math/moe.h), composed on the host as moe.cu composes it
// (a route per token, each slot's FC1 and FC2 rows as warps of 32 lanes summed by a
// butterfly, the activation, the weighted combine), against the CPU backend's kernel.
// (cuda_host runs moe.cu's own text through the contrib node tests, in f32.)
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/floats.h"
#include "tpc/runtime/math/moe.h"

namespace tpc::runtime {
namespace {

using math::FloatKind;
using math::MoeLayout;

// MoE as moe.cu computes it, the operands loaded through IO (f32 or a half kind). The
// warp's 32 lane sums combine in a butterfly (the order of __shfl_xor_sync's).
template <typename IO, typename S>
std::vector<float> MoeByDeviceMath(const MoeLayout& l, const std::vector<S>& x,
                                   const std::vector<S>& router, const std::vector<S>& w1,
                                   const std::vector<S>& b1, const std::vector<S>& w2,
                                   const std::vector<S>& b2) {
  const int64_t slots = l.tokens * l.k, rows = l.fc1_rows();
  std::vector<int64_t> experts(static_cast<size_t>(slots));
  std::vector<float> weights(experts.size());
  for (int64_t t = 0; t < l.tokens; ++t) {
    math::MoeRoute(
        l, [&](int64_t e) { return IO::Load(router[static_cast<size_t>(t * l.experts + e)]); },
        experts.data() + t * l.k, weights.data() + t * l.k);
  }
  auto warp = [](auto lane_sum) {
    float lanes[32];
    for (int lane = 0; lane < 32; ++lane) lanes[lane] = lane_sum(lane);
    for (int off = 16; off > 0; off /= 2) {
      float next[32];
      for (int lane = 0; lane < 32; ++lane) next[lane] = lanes[lane] + lanes[lane ^ off];
      std::copy(next, next + 32, lanes);
    }
    return lanes[0];
  };
  std::vector<float> hidden(static_cast<size_t>(slots * rows)),
      act(static_cast<size_t>(slots * l.inter));
  std::vector<float> outs(static_cast<size_t>(slots * l.hidden));
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t e = experts[static_cast<size_t>(s)], t = s / l.k;
    for (int64_t r = 0; r < rows; ++r) {
      hidden[static_cast<size_t>(s * rows + r)] =
          warp([&](int lane) {
            return math::MoeDotLane(
                l.hidden, lane, 32,
                [&](int64_t c) {
                  return IO::Load(w1[static_cast<size_t>((e * rows + r) * l.hidden + c)]);
                },
                [&](int64_t c) { return IO::Load(x[static_cast<size_t>(t * l.hidden + c)]); });
          }) +
          IO::Load(b1[static_cast<size_t>(e * rows + r)]);
    }
    for (int64_t i = 0; i < l.inter; ++i) {
      act[static_cast<size_t>(s * l.inter + i)] = math::MoeActivate(l, hidden.data() + s * rows, i);
    }
    for (int64_t r = 0; r < l.hidden; ++r) {
      outs[static_cast<size_t>(s * l.hidden + r)] =
          warp([&](int lane) {
            return math::MoeDotLane(
                l.inter, lane, 32,
                [&](int64_t c) {
                  return IO::Load(w2[static_cast<size_t>((e * l.hidden + r) * l.inter + c)]);
                },
                [&](int64_t c) { return act[static_cast<size_t>(s * l.inter + c)]; });
          }) +
          IO::Load(b2[static_cast<size_t>(e * l.hidden + r)]);
    }
  }
  std::vector<float> y(static_cast<size_t>(l.tokens * l.hidden));
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) {
    y[static_cast<size_t>(i)] =
        math::MoeCombine(l, weights.data(), outs.data(), i / l.hidden, i % l.hidden);
  }
  return y;
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

TEST_CASE("MoE composed from the device math equals the CPU kernel", "[runtime][device-math]") {
  struct Case {
    const char* activation;
    int64_t k;
    bool normalize;
    int64_t hidden;  // above 32: several columns a lane
  };
  for (const Case& c :
       {Case{"swiglu", 2, true, 40}, Case{"gelu", 1, false, 24}, Case{"silu", 3, true, 70},
        Case{"relu", 2, false, 33}, Case{"geglu", 2, true, 24}}) {
    INFO(c.activation);
    MoeLayout l;
    l.tokens = 5;
    l.hidden = c.hidden;
    l.inter = 12;
    l.experts = 4;
    l.k = c.k;
    l.normalize = c.normalize;
    const std::string act = c.activation;
    l.activation = act == "swiglu"  ? math::MoeActivation::kSwiGlu
                   : act == "geglu" ? math::MoeActivation::kGeGlu
                   : act == "gelu"  ? math::MoeActivation::kGelu
                   : act == "silu"  ? math::MoeActivation::kSilu
                                    : math::MoeActivation::kRelu;
    l.alpha = 1.702f;
    l.beta = 1.0f;
    l.has_limit = true;
    l.limit = 1.5f;
    const Tensor x = testing::Random({l.tokens, l.hidden}, 90);
    const Tensor router = testing::Random({l.tokens, l.experts}, 91);
    const Tensor w1 = testing::Random({l.experts, l.fc1_rows(), l.hidden}, 92);
    const Tensor b1 = testing::Random({l.experts, l.fc1_rows()}, 93);
    const Tensor w2 = testing::Random({l.experts, l.hidden, l.inter}, 94);
    const Tensor b2 = testing::Random({l.experts, l.hidden}, 95);
    testing::OneOp o;
    o.Input("input", x);
    o.Input("router_probs", router);
    o.Input("fc1", w1);
    o.Input("fc1_bias", b1);
    o.Input("fc2", w2);
    o.Input("fc2_bias", b2);
    ir::Attributes attrs = {{"activation_type", act},
                            {"k", l.k},
                            {"normalize_routing_weights", int64_t{c.normalize ? 1 : 0}}};
    if (l.activation != math::MoeActivation::kGeGlu) {  // (GeGLU takes none of them)
      attrs["activation_alpha"] = l.alpha;
      attrs["activation_beta"] = l.beta;
      attrs["swiglu_limit"] = l.limit;
    }
    if (l.gated()) attrs["swiglu_fusion"] = int64_t{1};
    auto want = o.TryRun("MoE", attrs, 1, "com.microsoft");
    INFO(want.status().ToString());
    REQUIRE(want.ok());
    const std::vector<float> got = MoeByDeviceMath<math::FloatIO<FloatKind::kF32>>(
        l, Values(x), Values(router), Values(w1), Values(b1), Values(w2), Values(b2));
    testing::RequireClose(got, Values((*want)[0]), 2e-5f);
  }
}

}  // namespace
}  // namespace tpc::runtime
