// The integer and generator kernels' math as their CUDA threads compute each element,
// against the CPU kernels: the bitwise ops and BitShift on the unsigned words of the
// elements (math::BitElement) with broadcasting, for signed and unsigned types of each
// size; EyeLike's diagonal and OneHot's hits (math/generators.h).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "catch2/catch.hpp"
#include "one_op.h"
#include "tpc/runtime/math/generators.h"
#include "tpc/runtime/math/logic.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime {
namespace {

using ir::DType;
using testing::OneOp;

template <typename T>
Tensor Pattern(DType t, const std::vector<int64_t>& shape, uint64_t seed, bool small) {
  Tensor out = Tensor::Allocate(t, shape);
  uint64_t s = seed;
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    out.data<T>()[i] = static_cast<T>(small ? (s >> 60) : (s >> 17));  // small: shifts 0..15
  }
  return out;
}

template <typename T>
void CheckBits(DType t) {
  using W = std::make_unsigned_t<T>;
  const std::vector<int64_t> as = {2, 3, 4}, bs = {3, 1};
  const std::vector<std::pair<std::string, math::BitOp>> ops = {
      {"BitwiseAnd", math::BitOp::kAnd},     {"BitwiseOr", math::BitOp::kOr},
      {"BitwiseXor", math::BitOp::kXor},     {"BitwiseNot", math::BitOp::kNot},
      {"BitShift", math::BitOp::kShiftLeft}, {"BitShift", math::BitOp::kShiftRight}};
  for (const auto& [op, bit] : ops) {
    const bool shift = bit == math::BitOp::kShiftLeft || bit == math::BitOp::kShiftRight;
    if (shift && std::is_signed_v<T>) continue;  // ONNX shifts unsigned integers only
    INFO(op << " on " << ir::DTypeName(t));
    const Tensor a = Pattern<T>(t, as, 3, false), b = Pattern<T>(t, bs, 5, shift);
    OneOp o;
    o.Input("a", a);
    if (bit != math::BitOp::kNot) o.Input("b", b);
    ir::Attributes attrs;
    if (shift) attrs["direction"] = std::string(bit == math::BitOp::kShiftLeft ? "LEFT" : "RIGHT");
    const Tensor want = o.Run(op, attrs)[0];
    const math::StridedView va = math::ContiguousView(as), vb = math::BroadcastView(bs, as);
    std::vector<W> got(static_cast<size_t>(a.num_elements()));
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      math::BitElement<W>(bit, reinterpret_cast<const W*>(a.data<T>()), va,
                          reinterpret_cast<const W*>(b.data<T>()), vb, got.data(), i);
    }
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      INFO("element " << i);
      REQUIRE(static_cast<T>(got[static_cast<size_t>(i)]) == want.data<T>()[i]);
    }
  }
}

TEST_CASE("Bitwise element math equals the CPU kernels", "[runtime][device-math]") {
  CheckBits<uint8_t>(DType::kU8);
  CheckBits<int8_t>(DType::kI8);
  CheckBits<uint16_t>(DType::kU16);
  CheckBits<int32_t>(DType::kI32);
  CheckBits<uint32_t>(DType::kU32);
  CheckBits<int64_t>(DType::kI64);
  CheckBits<uint64_t>(DType::kU64);
}

TEST_CASE("EyeLike and OneHot element math equal the CPU kernels", "[runtime][device-math]") {
  const Tensor x = testing::F32({3, 5}, std::vector<float>(15, 2.0f));
  for (const int64_t k : {int64_t{-1}, int64_t{0}, int64_t{2}, int64_t{7}}) {
    INFO("k " << k);
    OneOp o;
    o.Input("x", x);
    const Tensor want = o.Run("EyeLike", {{"k", k}})[0];
    for (int64_t i = 0; i < 15; ++i) {
      INFO("element " << i);
      REQUIRE((math::EyeLikeOne(i, 5, k) ? 1.0f : 0.0f) == want.data<float>()[i]);
    }
  }
  const std::vector<int64_t> idx = {0, -1, 3, 2, -4, 1};  // [2, 3], depth 4
  Tensor indices = Tensor::Allocate(DType::kI32, {2, 3});
  for (size_t i = 0; i < idx.size(); ++i) indices.data<int32_t>()[i] = static_cast<int32_t>(idx[i]);
  for (const int64_t axis : {int64_t{0}, int64_t{1}, int64_t{-1}}) {
    INFO("axis " << axis);
    OneOp o;
    o.Input("i", indices);
    o.Input("depth", testing::I64({}, {4}));
    o.Input("values", testing::F32({2}, {-1.0f, 5.0f}));
    const Tensor want = o.Run("OneHot", {{"axis", axis}})[0];
    const int64_t inner = axis == 0 ? 6 : (axis == 1 ? 3 : 1);
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      INFO("element " << i);
      const float got = math::OneHotHit(indices.data<int32_t>(), 4, inner, i) ? 5.0f : -1.0f;
      REQUIRE(got == want.data<float>()[i]);
    }
  }
}

}  // namespace
}  // namespace tpc::runtime
