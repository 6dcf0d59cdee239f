// CausalConvWithState on the CPU against math/causal_conv.h's per-element form (the
// GPU's): the row loop (chunks of rows, SiLU through vector_math.h) for prompts, decode
// steps, inputs shorter than the state and dilations; and a sequence too long to lay out
// per task (a dilation of 2^20), computed element by element.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tpc/ir/graph.h"
#include "tpc/onnx/shape_inference.h"
#include "tpc/runtime/backend.h"
#include "tpc/runtime/executor.h"
#include "tpc/runtime/math/causal_conv.h"

namespace tpc::runtime {
namespace {

using ir::Dim;
using ir::DType;

struct ConvCase {
  int64_t batch, channels, length, k, dilation;
  bool silu, past, bias;
};

std::vector<float> Wave(int64_t n, float f, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * std::sin(f * float(i) + 0.3f);
  return v;
}

TEST_CASE("CausalConvWithState's CPU kernel equals the per-element math",
          "[runtime][causal_conv]") {
  const ConvCase c = GENERATE(ConvCase{2, 40, 32, 4, 1, true, true, true},  // a prompt
                              ConvCase{3, 33, 1, 4, 1, true, true, false},  // a decode step
                              ConvCase{1, 17, 2, 3, 3, false, true, true},  // shorter than state
                              ConvCase{2, 8, 5, 3, 2, true, false, true},   // no past
                              ConvCase{1, 2, 2, 2, 1 << 20, true, true, true});  // element path
  INFO("batch " << c.batch << " channels " << c.channels << " length " << c.length << " k " << c.k
                << " dilation " << c.dilation);
  math::CausalConvLayout l{c.batch, c.channels, c.length, c.k, c.dilation, c.silu};
  const std::vector<float> x = Wave(c.batch * c.channels * c.length, 0.7f, 1.5f);
  const std::vector<float> w = Wave(c.channels * c.k, 1.3f, 0.8f);
  const std::vector<float> bias = Wave(c.channels, 2.1f, 0.2f);
  const std::vector<float> past = Wave(c.batch * c.channels * l.state(), 0.31f, 1.0f);
  ir::Graph g;
  g.opsets()[""] = 18;
  g.opsets()["com.microsoft"] = 1;
  std::vector<ir::Value*> inputs = {
      g.AddPlaceholder("x",
                       ir::TensorType(DType::kF32, {Dim(c.batch), Dim(c.channels), Dim(c.length)})),
      g.AddConstant("w", ir::Tensor::FromFloat({c.channels, 1, c.k}, w)), nullptr, nullptr};
  if (c.bias) inputs[2] = g.AddConstant("bias", ir::Tensor::FromFloat({c.channels}, bias));
  if (c.past) {
    inputs[3] = g.AddPlaceholder(
        "past", ir::TensorType(DType::kF32, {Dim(c.batch), Dim(c.channels), Dim(l.state())}));
  }
  ir::Attributes attrs = {{"dilation", c.dilation}};
  if (c.silu) attrs["activation"] = std::string("silu");
  ir::Node* conv =
      g.AddCall("com.microsoft", "CausalConvWithState", inputs, {"y", "present"}, std::move(attrs));
  g.SetOutputs({conv->output(0), conv->output(1)});
  REQUIRE(onnx::InferShapes(g).ok());
  auto backend = MakeCpuBackend(2);
  auto ex = Executor::Create(g, *backend, nullptr);
  REQUIRE(ex.ok());
  std::map<std::string, Tensor> feeds;
  Tensor tx = Tensor::Allocate(DType::kF32, {c.batch, c.channels, c.length});
  std::copy(x.begin(), x.end(), tx.data<float>());
  feeds["x"] = tx;
  if (c.past) {
    Tensor tp = Tensor::Allocate(DType::kF32, {c.batch, c.channels, l.state()});
    std::copy(past.begin(), past.end(), tp.data<float>());
    feeds["past"] = tp;
  }
  auto out = (*ex)->Run(feeds);
  REQUIRE(out.ok());
  auto load = [](const std::vector<float>& v) {
    const float* p = v.data();
    return [p](int64_t i) { return p[i]; };
  };
  const auto lx = load(x), lw = load(w), lb = load(bias), lp = load(past);
  const float* y = (*out)[0].data<float>();
  double worst = 0;
  for (int64_t i = 0; i < c.batch * c.channels * c.length; ++i) {
    const float want = math::CausalConvElement(l, lx, lp, c.past, lw, lb, c.bias, i);
    worst = std::max(worst, double(std::abs(y[i] - want)) / (1.0 + std::abs(want)));
  }
  CHECK(worst < 1e-6);  // the SiLU's exp is vector_math.h's, within an ulp or two of expf
  const float* present = (*out)[1].data<float>();
  int64_t differ = 0;  // (bit for bit: the state's elements are copies)
  for (int64_t i = 0; i < c.batch * c.channels * l.state(); ++i) {
    differ += present[i] == math::CausalConvStateElement(l, lx, lp, c.past, i) ? 0 : 1;
  }
  CHECK(differ == 0);
}

}  // namespace
}  // namespace tpc::runtime
