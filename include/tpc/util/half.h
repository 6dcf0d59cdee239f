// IEEE half and bfloat16 conversions (round to nearest even), for constants and kernels.
#pragma once

#include <cstdint>

namespace tpc {

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

}  // namespace tpc
