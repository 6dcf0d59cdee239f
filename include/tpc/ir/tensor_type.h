// The type of an IR value: element type and shape (dims may be symbolic or unknown;
// the rank itself may be unknown before shape inference).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tpc/ir/dim.h"
#include "tpc/ir/dtype.h"

namespace tpc::ir {

struct TensorType {
  DType dtype = DType::kUndefined;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown

  TensorType() = default;
  TensorType(DType t, std::vector<Dim> dims) : dtype(t), shape(std::move(dims)) {}

  bool has_rank() const { return shape.has_value(); }
  int64_t rank() const { return shape ? static_cast<int64_t>(shape->size()) : -1; }
  // Every dim known (integers or symbols) and the rank known.
  bool is_fully_known() const;
  bool operator==(const TensorType&) const = default;

  // `f32[batch, seq, 64]`, `i64[]` for a scalar, `f32[*]` for unknown rank.
  std::string ToString() const;
};

}  // namespace tpc::ir
