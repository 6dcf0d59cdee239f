#include "reduce.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tpc/util/half.h"

namespace tpc::runtime {

namespace {

// out[i] = op over k of src(k)[i] for i in [begin, end), written to every `dsts`. In
// blocks through a local accumulator, one source at a time: the inner loops have no
// aliasing and no branch, so they vectorize, and every element is still combined in
// source order 0, 1, ..., n-1 (the same rounding as one element at a time).
template <typename T, typename Load, typename Store>
void ReduceRange(int n, const std::vector<const uint8_t*>& srcs, const std::vector<uint8_t*>& dsts,
                 int64_t begin, int64_t end, ReduceOp op, Load load, Store store) {
  constexpr int64_t kBlock = 1024;
  T acc[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t m = std::min(kBlock, end - b);
    for (int64_t i = 0; i < m; ++i) acc[i] = load(srcs[0], b + i);
    for (int k = 1; k < n; ++k) {
      const uint8_t* src = srcs[static_cast<size_t>(k)];
      switch (op) {
        case ReduceOp::kMax:
          for (int64_t i = 0; i < m; ++i) acc[i] = std::max(acc[i], load(src, b + i));
          break;
        case ReduceOp::kMin:
          for (int64_t i = 0; i < m; ++i) acc[i] = std::min(acc[i], load(src, b + i));
          break;
        default:
          for (int64_t i = 0; i < m; ++i) acc[i] = static_cast<T>(acc[i] + load(src, b + i));
      }
    }
    if (op == ReduceOp::kAvg) {
      for (int64_t i = 0; i < m; ++i) acc[i] = static_cast<T>(acc[i] / static_cast<T>(n));
    }
    for (uint8_t* d : dsts) {
      for (int64_t i = 0; i < m; ++i) store(d, b + i, acc[i]);
    }
  }
}

}  // namespace

bool IsReducible(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kF32:
    case ir::DType::kF64:
    case ir::DType::kI32:
    case ir::DType::kI64:
    case ir::DType::kF16:
    case ir::DType::kBF16:
      return true;
    default:
      return false;
  }
}

absl::Status Reduce(ir::DType dtype, int n, const std::vector<const uint8_t*>& srcs,
                    const std::vector<uint8_t*>& dsts, int64_t begin, int64_t end, ReduceOp op) {
  auto native = [&]<typename T>() {
    ReduceRange<T>(
        n, srcs, dsts, begin, end, op,
        [](const uint8_t* p, int64_t i) { return reinterpret_cast<const T*>(p)[i]; },
        [](uint8_t* p, int64_t i, T v) { reinterpret_cast<T*>(p)[i] = v; });
  };
  switch (dtype) {
    case ir::DType::kF32:
      native.operator()<float>();
      break;
    case ir::DType::kF64:
      native.operator()<double>();
      break;
    case ir::DType::kI32:
      native.operator()<int32_t>();
      break;
    case ir::DType::kI64:
      native.operator()<int64_t>();
      break;
    case ir::DType::kF16:
    case ir::DType::kBF16: {
      const bool half = dtype == ir::DType::kF16;
      ReduceRange<float>(
          n, srcs, dsts, begin, end, op,
          [half](const uint8_t* p, int64_t i) {
            uint16_t v = reinterpret_cast<const uint16_t*>(p)[i];
            return half ? HalfToFloat(v) : BFloat16ToFloat(v);
          },
          [half](uint8_t* p, int64_t i, float v) {
            reinterpret_cast<uint16_t*>(p)[i] = half ? FloatToHalf(v) : FloatToBFloat16(v);
          });
      break;
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("reductions over ", ir::DTypeName(dtype), " are not supported"));
  }
  return absl::OkStatus();
}

absl::Status CheckCollectiveArgs(int rank, const char* what, const void* in, const void* out,
                                 int64_t count, ir::DType dtype, bool reduce) {
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ", what, " of a negative count ", count));
  }
  if (ir::DTypeSize(dtype) <= 0 || (reduce && !IsReducible(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": ", what, " over ",
                                                   ir::DTypeName(dtype), " is not supported"));
  }
  if (count > 0 && (in == nullptr || out == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ", what, " of ", count, " elements on a null buffer"));
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime
