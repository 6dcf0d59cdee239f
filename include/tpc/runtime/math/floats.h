// Float storage types of the device kernels (f32, f16, bf16 bits) and their loads and
// stores in f32, which is where every kernel computes.
#pragma once

#include <cstdint>

#include "tpc/util/half.h"
#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

enum class FloatKind : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

template <FloatKind K>
struct FloatIO;

template <>
struct FloatIO<FloatKind::kF32> {
  using Storage = float;
  static constexpr float kLowest = -3.40282347e38f;  // the type's lowest finite value
  TPC_HOST_DEVICE static float Load(Storage v) { return v; }
  TPC_HOST_DEVICE static Storage Store(float v) { return v; }
};

template <>
struct FloatIO<FloatKind::kF16> {
  using Storage = uint16_t;
  static constexpr float kLowest = -65504.0f;
  TPC_HOST_DEVICE static float Load(Storage v) { return HalfToFloat(v); }
  TPC_HOST_DEVICE static Storage Store(float v) { return FloatToHalf(v); }
};

template <>
struct FloatIO<FloatKind::kBF16> {
  using Storage = uint16_t;
  static constexpr float kLowest = -3.38953139e38f;
  TPC_HOST_DEVICE static float Load(Storage v) { return BFloat16ToFloat(v); }
  TPC_HOST_DEVICE static Storage Store(float v) { return FloatToBFloat16(v); }
};

// A type loaded and stored as itself, as FloatIO: the CPU kernels' f32 and f64 through the
// device math.
template <typename T>
struct PlainIO {
  using Storage = T;
  TPC_HOST_DEVICE static T Load(T v) { return v; }
  TPC_HOST_DEVICE static T Store(T v) { return v; }
};

}  // namespace tpc::runtime::math
