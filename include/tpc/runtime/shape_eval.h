// Symbolic dims at run time: binding symbols (`batch`, `seq`) from the shapes of the
// actual inputs and evaluating dim polynomials with those bindings.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tpc/ir/dim.h"
#include "tpc/ir/tensor_type.h"

namespace tpc::runtime {

using SymbolBindings = std::map<std::string, int64_t>;

// The value of `dim` under `bindings`; nullopt when it is unknown, uses an unbound
// symbol or does not fit in an int64.
std::optional<int64_t> EvaluateDim(const ir::Dim& dim, const SymbolBindings& bindings);
// True for a per-rank dim with a fractional term (`seq/2`).
bool IsFractional(const ir::Dim& dim);
// An error when `dim`, a dim of value `name` of type `type`, is not whole under `bindings`:
// an input dim the plan splits across ranks is not a multiple of the rank count. Checked
// before a run, so the error comes before any rank reaches the collective that would fail.
absl::Status CheckWholeDim(const std::string& name, const ir::TensorType& type, const ir::Dim& dim,
                           const SymbolBindings& bindings);
// Every dim evaluated; nullopt when the rank or one dim is not known.
std::optional<std::vector<int64_t>> EvaluateShape(const ir::TensorType& type,
                                                  const SymbolBindings& bindings);

// Matches the concrete `shape` of input `name` against its declared `type`: binds the
// symbols that are single dims, then checks static dims and the polynomial ones. The
// error reads `input 'input_ids': expected i64[batch, seq], got f32[2, 8]` with the
// reason appended.
absl::Status BindInput(const std::string& name, const ir::TensorType& type, ir::DType dtype,
                       const std::vector<int64_t>& shape, SymbolBindings& bindings);

// `batch=2,seq=8` (the key of a cached memory plan).
std::string BindingsKey(const SymbolBindings& bindings);

}  // namespace tpc::runtime
