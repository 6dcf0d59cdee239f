#include "tpc/plan/precision.h"

#include <catch2/catch.hpp>

#include <cstring>

#include "tpc/ir/parser.h"
#include "tpc/util/half.h"

namespace tpc::plan {
namespace {

std::unique_ptr<ir::Graph> ParsePlanGraph(const std::string& text) {
  auto g = ir::ParseGraph(text);
  INFO(text);
  REQUIRE(g.ok());
  return std::move(g).value();
}

const ir::Node* NodeNamed(const ir::Graph& g, const std::string& name) {
  for (const ir::Node* n : g.nodes()) {
    if (n->name() == name) return n;
  }
  return nullptr;
}

// ConstantOfShape without `value` makes f32 zeros by ONNX's default: a half plan that only
// retyped its output would declare f16 and compute f32 (DeepSeek V3's dynamo export, where
// a ScatterND then met an f32 input beside an f16 one).
TEST_CASE("half plans: an f32 attribute left at its default is written in the plan's type",
          "[precision]") {
  for (ir::DType to : {ir::DType::kF16, ir::DType::kBF16}) {
    auto g = ParsePlanGraph(R"(graph "g" opsets("": 17) {
  %shape: i64[2] = constant [2, 3]
  %x: f32[2, 3] = placeholder
  %z: f32[2, 3] = ConstantOfShape(%shape) name="zeros"
  %o: f32[2, 3] = ConstantOfShape(%shape) {value=tensor<f32[1]>[-3.4028235e38]} name="ones"
  %y: f32[2, 3] = Add(%x, %z) name="add"
  %w: f32[2, 3] = Add(%y, %o) name="add2"
  output(%w)
}
)");
    REQUIRE(ConvertFloatPrecision(*g, to).ok());
    for (const char* name : {"zeros", "ones"}) {
      const ir::Node* n = NodeNamed(*g, name);
      REQUIRE(n != nullptr);
      CHECK(n->output(0)->type().dtype == to);
      auto it = n->attrs().find("value");
      REQUIRE(it != n->attrs().end());
      const auto& t = std::get<ir::Tensor>(it->second);
      CHECK(t.dtype() == to);
      REQUIRE(t.num_elements() == 1);
      uint16_t bits;
      std::memcpy(&bits, t.data(), 2);
      const float v = to == ir::DType::kF16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
      // (finfo(float32).min saturates: as -inf it would make masks NaN)
      const float lowest = to == ir::DType::kF16 ? -65504.0f : -3.3895314e38f;
      CHECK(v == (std::string(name) == "zeros" ? 0.0f : lowest));
    }
  }
}

}  // namespace
}  // namespace tpc::plan
