// Det's math: the determinant of one m × m matrix by LU decomposition with partial pivoting
// in double, in place; shared by the CPU kernel (cpu/det.cc) and the CUDA one (cuda/det.cu,
// one thread per matrix).
#pragma once

#include <cmath>
#include <cstdint>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

// The determinant of the row-major matrix `a` (overwritten by its elimination).
TPC_HOST_DEVICE inline double LuDeterminant(double* a, int64_t m) {
  double det = 1;
  for (int64_t col = 0; col < m && det != 0; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r) {
      if (fabs(a[r * m + col]) > fabs(a[pivot * m + col])) pivot = r;
    }
    const double p = a[pivot * m + col];
    if (p == 0) return 0;
    if (pivot != col) {
      for (int64_t j = 0; j < m; ++j) {
        const double t = a[pivot * m + j];
        a[pivot * m + j] = a[col * m + j];
        a[col * m + j] = t;
      }
      det = -det;
    }
    det *= p;
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r * m + col] / p;
      for (int64_t j = col; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
    }
  }
  return det;
}

}  // namespace tpc::runtime::math
