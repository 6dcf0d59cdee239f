// The device math of the kernels that index by values (tpc/runtime/math/indexing.h:
// GatherElements, GatherND, the scatters without a reduction, MaxUnpool), run on the host
// element by element as indexing.cu's threads do, against the CPU kernels.
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "device_math_util.h"
#include "one_op.h"
#include "tpc/runtime/math/indexing.h"
#include "tpc/runtime/math/strided.h"

namespace tpc::runtime {
namespace {

using math::StridedView;
using testing::F32;
using testing::Floats;
using testing::I64;
using testing::OneOp;
using testing::Random;
using testing::RequireClose;

TEST_CASE("GatherElements element math equals the CPU kernel", "[runtime][device-math]") {
  const Tensor x = Random({3, 4, 5}, 12);
  for (int64_t axis : {0, 1, 2, -1}) {
    INFO("axis " << axis);
    const int64_t a = axis < 0 ? axis + 3 : axis;
    // Indices of shape [2, 3, 4] (each dim at most data's), negative ones among them.
    std::vector<int64_t> idx(24);
    for (size_t i = 0; i < idx.size(); ++i) {
      const int64_t len = x.shape()[static_cast<size_t>(a)];
      idx[i] = static_cast<int64_t>(i * 7 % static_cast<size_t>(len)) - (i % 3 == 0 ? len : 0);
    }
    OneOp o(13);
    o.Input("x", x);
    o.Input("i", testing::I64({2, 3, 4}, idx));
    const std::vector<float> want = Floats(o.Run("GatherElements", {{"axis", axis}})[0]);
    const std::vector<int64_t> strides = math::ContiguousStrides(x.shape());
    StridedView base = math::ViewOf({2, 3, 4}, strides), out = math::ContiguousView({2, 3, 4});
    base.strides[a] = 0;
    math::Simplify({&base, &out});
    std::vector<float> got(24);
    for (int64_t i = 0; i < 24; ++i) {
      REQUIRE(math::GatherElementsElement(x.data<float>(), base, idx.data(),
                                          x.shape()[static_cast<size_t>(a)],
                                          strides[static_cast<size_t>(a)], got.data(), i));
    }
    RequireClose(got, want, 0.0f);
    const int64_t bad = x.shape()[static_cast<size_t>(a)];
    CHECK(!math::GatherElementsElement(x.data<float>(), base, &bad, bad, 1, got.data(), 0));
    CHECK(got[0] == 0.0f);
  }
}

// GatherND (batch dims, negative indices, tuples shorter than data's rank), ScatterND and
// ScatterElements (no reduction, distinct targets) one element at a time as
// indexing.cu's threads do, against the CPU kernels.
TEST_CASE("GatherND and the scatters' element math equals the CPU kernels",
          "[runtime][device-math]") {
  const Tensor data = Random({2, 3, 4}, 81);
  const std::vector<int64_t> strides = {12, 4, 1};
  const auto nd_of = [&](int64_t first, int64_t last) {
    math::NdIndex nd;
    nd.last = static_cast<int>(last);
    for (int64_t k = 0; k < last; ++k) {
      nd.dims[k] = data.dim(first + k);
      nd.strides[k] = strides[static_cast<size_t>(first + k)];
    }
    return nd;
  };
  {
    INFO("GatherND, batch_dims 0");
    const Tensor idx = testing::I64({3, 2}, {1, -1, 0, 2, -2, 0});
    OneOp o;
    o.Input("data", data);
    o.Input("idx", idx);
    const Tensor want = o.Run("GatherND")[0];
    std::vector<float> got(static_cast<size_t>(want.num_elements()));
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      CHECK(math::GatherNdElement(data.data<float>(), nd_of(0, 2), idx.data<int64_t>(), 4, 3, 24,
                                  got.data(), i));
    }
    RequireClose(got, Floats(want), 0.0f);
  }
  {
    INFO("GatherND, batch_dims 1");
    const Tensor idx = testing::I64({2, 2, 1}, {2, 0, -1, 1});
    OneOp o;
    o.Input("data", data);
    o.Input("idx", idx);
    const Tensor want = o.Run("GatherND", {{"batch_dims", int64_t{1}}})[0];
    std::vector<float> got(static_cast<size_t>(want.num_elements()));
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      CHECK(math::GatherNdElement(data.data<float>(), nd_of(1, 1), idx.data<int64_t>(), 4, 2, 12,
                                  got.data(), i));
    }
    RequireClose(got, Floats(want), 0.0f);
    {  // indices whose batch dim differs from data's are refused (they would read past it)
      OneOp mismatch;
      mismatch.Input("data", data);
      mismatch.Input("idx", testing::I64({3, 1}, {0, 1, 2}));
      const auto r = mismatch.TryRun("GatherND", {{"batch_dims", int64_t{1}}});
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().message().find("batch dim 0") != std::string::npos);
    }
    std::vector<int64_t> bad = {2, 0, 3, 1};  // 3 is past dim 1
    std::vector<float> out(16, 1.0f);
    CHECK_FALSE(math::GatherNdElement(data.data<float>(), nd_of(1, 1), bad.data(), 4, 2, 12,
                                      out.data(), 8));
    CHECK(out[8] == 0.0f);
  }
  {
    INFO("ScatterND");
    const Tensor idx = testing::I64({2, 2}, {1, 2, 0, -1});
    const Tensor updates = Random({2, 4}, 82);
    OneOp o;
    o.Input("data", data);
    o.Input("idx", idx);
    o.Input("updates", updates);
    const Tensor want = o.Run("ScatterND")[0];
    std::vector<float> got(data.data<float>(), data.data<float>() + 24);
    for (int64_t i = 0; i < 8; ++i) {
      CHECK(math::ScatterNdElement(nd_of(0, 2), idx.data<int64_t>(), updates.data<float>(), 4,
                                   got.data(), i));
    }
    RequireClose(got, Floats(want), 0.0f);
  }
  {
    INFO("ScatterElements, axis 1");
    const Tensor idx = testing::I64({2, 2, 3}, {0, 2, 1, -1, 0, 2, 1, 1, 0, 2, -3, 1});
    const Tensor updates = Random({2, 2, 3}, 83);
    OneOp o;
    o.Input("data", data);
    o.Input("idx", idx);
    o.Input("updates", updates);
    const Tensor want = o.Run("ScatterElements", {{"axis", int64_t{1}}})[0];
    StridedView base = math::ViewOf({2, 2, 3}, strides);
    base.strides[1] = 0;
    std::vector<float> got(data.data<float>(), data.data<float>() + 24);
    for (int64_t i = 0; i < 12; ++i) {
      CHECK(math::ScatterElementsElement(base, idx.data<int64_t>(), 3, 4, updates.data<float>(),
                                         got.data(), i));
    }
    RequireClose(got, Floats(want), 0.0f);
  }
}

// MaxUnpool: each element of X written at its index's position in the pool's inverse
// geometry, held in the leading corner of a larger output_shape (the output view with y's
// strides), against the CPU kernel; an index past the geometry is refused.
TEST_CASE("MaxUnpool element math equals the CPU kernel", "[runtime][device-math]") {
  const Tensor x = Random({1, 2, 2, 2}, 81);
  // kernel 2, stride 2: the inverse geometry [1, 2, 4, 4] (16 positions a plane).
  const std::vector<int64_t> idx = {0, 3, 9, 14, 16 + 5, 16 + 2, 16 + 12, 16 + 15};
  const std::vector<int64_t> inferred = {1, 2, 4, 4}, out = {1, 2, 5, 6};
  OneOp o(11);
  o.Input("x", x);
  o.Input("i", I64({1, 2, 2, 2}, idx));
  o.Ints(out);
  const Tensor want = o.Run("MaxUnpool", {{"kernel_shape", std::vector<int64_t>{2, 2}},
                                          {"strides", std::vector<int64_t>{2, 2}}})[0];
  const StridedView v = math::ViewOf(inferred, math::ContiguousStrides(out));
  std::vector<float> got(static_cast<size_t>(want.num_elements()), 0.0f);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    CHECK(math::UnpoolElement(v, idx.data(), 32, x.data<float>(), got.data(), i));
  }
  RequireClose(got, Floats(want), 0.0f);
  const int64_t bad = 32;
  CHECK_FALSE(math::UnpoolElement(v, &bad, 32, x.data<float>(), got.data(), 0));
}

}  // namespace
}  // namespace tpc::runtime
