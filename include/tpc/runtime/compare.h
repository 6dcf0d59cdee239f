// Comparing tensors: element values as doubles, and numpy.allclose with the largest
// errors (tp-run --check-against, the equivalence and conformance tests).
#pragma once

#include <cstdint>
#include <string>

#include "tpc/runtime/tensor.h"

namespace tpc::runtime {

// Element i of any numeric tensor (f16/bf16 converted exactly).
double ElementAsDouble(const Tensor& t, int64_t i);

// A short summary for a person: `min -1.2, max 3.4, mean 0.0567; first [0.1, -0.2, ...]`
// (NaNs counted apart; `empty` for no elements).
std::string SummarizeTensor(const Tensor& t, int first = 4);

struct Comparison {
  bool pass = true;
  double max_abs = 0;
  double max_rel = 0;      // only where |expected| > atol, so zeros do not dominate
  int64_t first_bad = -1;  // first element out of tolerance
  std::string note;        // why the tensors cannot be compared (type or shape), or how many
                           // elements are NaN or infinite against another value (max_abs: inf)
};

// numpy.allclose(actual, expected, rtol, atol, equal_nan=True) and the largest errors.
Comparison CompareTensors(const Tensor& actual, const Tensor& expected, double rtol, double atol);

}  // namespace tpc::runtime
