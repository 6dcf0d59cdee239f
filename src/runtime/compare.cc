#include "tpc/runtime/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tpc/util/half.h"

namespace tpc::runtime {

double ElementAsDouble(const Tensor& t, int64_t i) {
  using ir::DType;
  switch (t.dtype()) {
    case DType::kF32:
      return t.data<float>()[i];
    case DType::kF64:
      return t.data<double>()[i];
    case DType::kI64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kI32:
      return t.data<int32_t>()[i];
    case DType::kI16:
      return t.data<int16_t>()[i];
    case DType::kI8:
      return t.data<int8_t>()[i];
    case DType::kU8:
      return t.data<uint8_t>()[i];
    case DType::kU16:
      return t.data<uint16_t>()[i];
    case DType::kU32:
      return t.data<uint32_t>()[i];
    case DType::kU64:
      return static_cast<double>(t.data<uint64_t>()[i]);
    case DType::kBool:
      return t.data<bool>()[i] ? 1.0 : 0.0;
    case DType::kF16:
      return HalfToFloat(t.data<uint16_t>()[i]);
    case DType::kBF16:
      return BFloat16ToFloat(t.data<uint16_t>()[i]);
    default:
      return 0;
  }
}

std::string SummarizeTensor(const Tensor& t, int first) {
  const int64_t n = t.num_elements();
  if (n == 0) return "empty";
  double lo = 0, hi = 0, sum = 0;
  int64_t finite = 0, nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = ElementAsDouble(t, i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    if (finite == 0 || v < lo) lo = v;
    if (finite == 0 || v > hi) hi = v;
    sum += v;
    ++finite;
  }
  std::string out;
  if (finite > 0) {
    out = absl::StrCat("min ", absl::StrFormat("%.6g", lo), ", max ", absl::StrFormat("%.6g", hi),
                       ", mean ", absl::StrFormat("%.6g", sum / static_cast<double>(finite)));
  }
  if (nans > 0) absl::StrAppend(&out, out.empty() ? "" : ", ", nans, " NaN");
  absl::StrAppend(&out, "; first [");
  for (int64_t i = 0; i < std::min<int64_t>(n, first); ++i)
    absl::StrAppend(&out, i > 0 ? ", " : "", absl::StrFormat("%.6g", ElementAsDouble(t, i)));
  absl::StrAppend(&out, n > first ? ", ...]" : "]");
  return out;
}

Comparison CompareTensors(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  Comparison c;
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape()) {
    c.pass = false;
    c.note = absl::StrCat(actual.TypeString(), " vs ", expected.TypeString());
    return c;
  }
  int64_t nonfinite = 0;  // NaN or an infinity against another value
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    const double a = ElementAsDouble(actual, i);
    const double e = ElementAsDouble(expected, i);
    bool ok;
    if (std::isnan(a) || std::isnan(e) || std::isinf(e) || std::isinf(a)) {
      ok = std::isnan(a) ? std::isnan(e) : a == e;
      if (!ok) {
        ++nonfinite;
        c.max_abs = std::numeric_limits<double>::infinity();
      }
    } else {
      const double err = std::abs(a - e);
      c.max_abs = std::max(c.max_abs, err);
      if (std::abs(e) > atol) c.max_rel = std::max(c.max_rel, err / std::abs(e));
      ok = err <= atol + rtol * std::abs(e);
    }
    if (!ok) {
      c.pass = false;
      if (c.first_bad < 0) c.first_bad = i;
    }
  }
  if (nonfinite > 0) {
    c.note = absl::StrCat(nonfinite, " of ", actual.num_elements(),
                          " NaN or infinite against another value");
  }
  return c;
}

}  // namespace tpc::runtime
