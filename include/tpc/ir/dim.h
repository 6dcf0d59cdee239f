// A tensor dimension: a known integer, a symbolic expression over named dims
// (`batch`, `seq*64`, `past+seq`), or unknown (`?`). An unknown dim may be known to be
// sized by the data (NonZero's count): still unknown, equal to any unknown and printed
// `?`, but the cost model prices it as a batch's rows, not as one dim.
//
// Symbolic dims are kept as polynomials with integer coefficients in a canonical
// form, so two dims are equal exactly when their printed forms are equal. That is
// enough for what shape computations of transformer exports do: products for
// flattening (`batch*seq`), sums for concatenation (`past+seq`), exact division for
// reshapes with -1 and for splitting a dim across ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpc::ir {

class Dim {
 public:
  // A monomial: coeff/den × product of symbols (sorted, repeated for powers). The
  // denominator is 1 except in per-rank dims (`seq/4`: a sequence split four ways).
  struct Term {
    int64_t coeff = 0;
    std::vector<std::string> symbols;
    int64_t den = 1;  // > 0, coprime with coeff
    bool operator==(const Term&) const = default;
  };

  // Unknown dim.
  Dim() = default;
  // Known integer dim.
  Dim(int64_t value);  // NOLINT(google-explicit-constructor): dims read as numbers.
  static Dim Unknown() { return Dim(); }
  // An unknown dim that the data decides (the count of NonZero, and dims computed from it).
  static Dim SizedByData();
  // The unknown that an operation on `a` and `b` gives when either is unknown: sized by
  // the data when either is.
  static Dim UnknownFrom(const Dim& a, const Dim& b);
  static Dim Symbol(std::string_view name);

  bool is_unknown() const { return !known_; }
  bool is_sized_by_data() const { return !known_ && by_data_; }
  // True when the dim is a plain integer.
  bool is_static() const;
  // The integer value; only valid when is_static().
  int64_t value() const;
  // True when the dim is a single symbol with coefficient 1 (`batch`).
  bool is_symbol() const;
  const std::vector<Term>& terms() const { return terms_; }

  // Arithmetic; any unknown operand gives unknown (UnknownFrom).
  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  // a / b when the division is exact in the polynomial ring (b a single monomial);
  // nullopt otherwise (also when either is unknown or b is zero).
  std::optional<Dim> DivExact(const Dim& b) const;
  // This dim split `n` ways: exact division, with a fractional coefficient where a
  // symbol is not a multiple of n (`seq/4`); the caller knows the result is whole.
  Dim DivideBy(int64_t n) const;

  // Equal values (or both unknown: whether the data sizes one is no part of its value).
  bool operator==(const Dim& other) const {
    return known_ == other.known_ && terms_ == other.terms_;
  }

  // Canonical text: `64`, `batch`, `batch*seq`, `2*seq+1`, `seq/4`, `?`. Symbols that are not
  // identifiers are quoted.
  std::string ToString() const;

 private:
  static Dim FromTerms(std::vector<Term> terms);
  bool known_ = false;
  bool by_data_ = false;     // unknown only: sized by the data
  std::vector<Term> terms_;  // canonical: sorted, merged, no zero coefficients
};

// `[batch, seq, 64]`
std::string DimsToString(const std::vector<Dim>& dims);

// Adds the symbols `dim` is made of (`batch`, `seq` of `batch*seq/2`) to `out`.
void CollectSymbols(const Dim& dim, std::set<std::string>* out);
// Product of all dims (1 for an empty list).
Dim Product(const std::vector<Dim>& dims);

// True when `name` can be printed without quotes ([A-Za-z_][A-Za-z0-9_]*).
bool IsPlainIdentifier(std::string_view name);

}  // namespace tpc::ir
