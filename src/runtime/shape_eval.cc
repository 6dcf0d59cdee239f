#include "tpc/runtime/shape_eval.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/runtime/tensor.h"
#include "tpc/util/checked_math.h"

namespace tpc::runtime {

namespace {

// `dim` under `bindings` as the fraction num/den (the per-rank `seq/4` has den 4); nullopt
// when it is unknown, uses an unbound symbol or does not fit in an int64.
std::optional<std::pair<int64_t, int64_t>> EvaluateFraction(const ir::Dim& dim,
                                                            const SymbolBindings& bindings) {
  if (dim.is_unknown()) return std::nullopt;
  // Σ coeff·Π symbols / den, summed over a common denominator so that the result is exact.
  int64_t num = 0;
  int64_t den = 1;
  for (const ir::Dim::Term& term : dim.terms()) {
    std::optional<int64_t> v = term.coeff;
    for (const std::string& s : term.symbols) {
      auto it = bindings.find(s);
      if (it == bindings.end()) return std::nullopt;
      v = CheckedMul(*v, it->second);
      if (!v) return std::nullopt;
    }
    const auto a = CheckedMul(num, term.den);
    const auto b = CheckedMul(*v, den);
    const auto sum = a && b ? CheckedAdd(*a, *b) : std::nullopt;
    const auto next_den = CheckedMul(den, term.den);
    if (!sum || !next_den) return std::nullopt;
    num = *sum;
    den = *next_den;
  }
  return std::make_pair(num, den);
}

}  // namespace

std::optional<int64_t> EvaluateDim(const ir::Dim& dim, const SymbolBindings& bindings) {
  if (dim.is_static()) return dim.value();
  auto f = EvaluateFraction(dim, bindings);
  if (!f || f->first % f->second != 0) return std::nullopt;
  return f->first / f->second;
}

bool IsFractional(const ir::Dim& dim) {
  if (dim.is_unknown()) return false;
  for (const ir::Dim::Term& t : dim.terms()) {
    if (t.den != 1) return true;
  }
  return false;
}

absl::Status CheckWholeDim(const std::string& name, const ir::TensorType& type, const ir::Dim& dim,
                           const SymbolBindings& bindings) {
  auto f = EvaluateFraction(dim, bindings);
  if (!f || f->first % f->second == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "with ", BindingsKey(bindings), ", value '", name, "' (", type.ToString(),
      ") would have a dim ", dim.ToString(), " = ", f->first, "/", f->second,
      ": the plan splits that dim across its ranks, so it must come out whole (the input dims "
      "it is made of must be multiples of ",
      f->second, ")"));
}

std::optional<std::vector<int64_t>> EvaluateShape(const ir::TensorType& type,
                                                  const SymbolBindings& bindings) {
  if (!type.shape) return std::nullopt;
  std::vector<int64_t> out;
  for (const ir::Dim& d : *type.shape) {
    auto v = EvaluateDim(d, bindings);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

absl::Status BindInput(const std::string& name, const ir::TensorType& type, ir::DType dtype,
                       const std::vector<int64_t>& shape, SymbolBindings& bindings) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "': expected ", type.ToString(),
                                                   ", got ", ir::DTypeName(dtype),
                                                   ShapeString(shape), ": ", why));
  };
  if (dtype != type.dtype) {
    return fail(
        absl::StrCat("element type ", ir::DTypeName(dtype), " is not ", ir::DTypeName(type.dtype)));
  }
  if (!type.shape) return absl::OkStatus();
  const auto& dims = *type.shape;
  if (dims.size() != shape.size()) {
    return fail(absl::StrCat("rank ", shape.size(), " is not ", dims.size()));
  }
  // Single symbols first, so polynomial dims (`seq+1`) can be checked afterwards.
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!dims[i].is_symbol()) continue;
    const std::string& sym = dims[i].terms()[0].symbols[0];
    auto [it, inserted] = bindings.emplace(sym, shape[i]);
    if (!inserted && it->second != shape[i]) {
      return fail(absl::StrCat("dim ", i, " is ", sym, " = ", shape[i], ", but ", sym, " = ",
                               it->second, " from an earlier input"));
    }
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].is_unknown() || dims[i].is_symbol()) continue;
    auto v = EvaluateDim(dims[i], bindings);
    if (v && *v != shape[i]) {
      return fail(absl::StrCat("dim ", i, " must be ", dims[i].ToString(),
                               dims[i].is_static() ? "" : absl::StrCat(" = ", *v), ", not ",
                               shape[i]));
    }
  }
  return absl::OkStatus();
}

std::string BindingsKey(const SymbolBindings& bindings) {
  return absl::StrJoin(bindings, ",", absl::PairFormatter("="));
}

}  // namespace tpc::runtime
