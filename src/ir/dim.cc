#include "tpc/ir/dim.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tpc/ir/text_escape.h"
#include "tpc/util/checked_math.h"

namespace tpc::ir {
namespace {

// Terms are ordered by degree (highest first), then by symbols, so `batch*seq+seq+1`.
bool TermLess(const Dim::Term& a, const Dim::Term& b) {
  if (a.symbols.size() != b.symbols.size()) return a.symbols.size() > b.symbols.size();
  return a.symbols < b.symbols;
}

}  // namespace

Dim::Dim(int64_t value) : known_(true) {
  if (value != 0) terms_.push_back({value, {}});
}

Dim Dim::SizedByData() {
  Dim d;
  d.by_data_ = true;
  return d;
}

Dim Dim::UnknownFrom(const Dim& a, const Dim& b) {
  return a.is_sized_by_data() || b.is_sized_by_data() ? SizedByData() : Dim();
}

Dim Dim::Symbol(std::string_view name) {
  Dim d;
  d.known_ = true;
  d.terms_.push_back({1, {std::string(name)}});
  return d;
}

// Dims a model computes can be anything (a Reshape to 2^62): a coefficient that would
// not fit in an int64 makes the dim unknown instead of wrapping (util/checked_math.h).
Dim Dim::FromTerms(std::vector<Term> terms) {
  // Sum the fractions of equal monomials: a/b + c/d = (ad + cb) / bd, then reduce.
  std::map<std::vector<std::string>, std::pair<int64_t, int64_t>> merged;
  for (auto& t : terms) {
    if (t.den <= 0 || t.coeff == std::numeric_limits<int64_t>::min()) return Dim();
    std::sort(t.symbols.begin(), t.symbols.end());
    auto [it, fresh] = merged.try_emplace(t.symbols, t.coeff, t.den);
    if (!fresh) {
      auto& [num, den] = it->second;
      const auto ad = CheckedMul(num, t.den);
      const auto cb = CheckedMul(t.coeff, den);
      const auto sum = ad && cb ? CheckedAdd(*ad, *cb) : std::nullopt;
      const auto bd = CheckedMul(den, t.den);
      if (!sum || !bd || *sum == std::numeric_limits<int64_t>::min()) return Dim();
      num = *sum;
      den = *bd;
      const int64_t g = std::gcd(num, den);
      if (g > 1) {
        num /= g;
        den /= g;
      }
    }
  }
  Dim d;
  d.known_ = true;
  for (auto& [symbols, frac] : merged) {
    int64_t num = frac.first;
    int64_t den = frac.second;
    if (num == 0) continue;
    const int64_t g = std::gcd(num, den);
    d.terms_.push_back({num / g, symbols, den / g});
  }
  std::sort(d.terms_.begin(), d.terms_.end(), TermLess);
  return d;
}

Dim Dim::DivideBy(int64_t n) const {
  if (!known_) return *this;
  std::vector<Term> out = terms_;
  for (Term& t : out) {
    const auto den = CheckedMul(t.den, n);
    if (!den) return Dim();
    t.den = *den;
  }
  return FromTerms(std::move(out));
}

bool Dim::is_static() const {
  return known_ && (terms_.empty() ||
                    (terms_.size() == 1 && terms_[0].symbols.empty() && terms_[0].den == 1));
}

int64_t Dim::value() const { return terms_.empty() ? 0 : terms_[0].coeff; }

bool Dim::is_symbol() const {
  return known_ && terms_.size() == 1 && terms_[0].coeff == 1 && terms_[0].den == 1 &&
         terms_[0].symbols.size() == 1;
}

Dim operator+(const Dim& a, const Dim& b) {
  if (!a.known_ || !b.known_) return Dim::UnknownFrom(a, b);
  std::vector<Dim::Term> terms = a.terms_;
  terms.insert(terms.end(), b.terms_.begin(), b.terms_.end());
  return Dim::FromTerms(std::move(terms));
}

Dim operator-(const Dim& a, const Dim& b) {
  if (!a.known_ || !b.known_) return Dim::UnknownFrom(a, b);
  std::vector<Dim::Term> terms = a.terms_;
  for (Dim::Term t : b.terms_) {
    if (t.coeff == std::numeric_limits<int64_t>::min()) return Dim();
    t.coeff = -t.coeff;
    terms.push_back(std::move(t));
  }
  return Dim::FromTerms(std::move(terms));
}

Dim operator*(const Dim& a, const Dim& b) {
  if (!a.known_ || !b.known_) return Dim::UnknownFrom(a, b);
  std::vector<Dim::Term> terms;
  for (const Dim::Term& x : a.terms_) {
    for (const Dim::Term& y : b.terms_) {
      const auto coeff = CheckedMul(x.coeff, y.coeff);
      const auto den = CheckedMul(x.den, y.den);
      if (!coeff || !den) return Dim();
      Dim::Term t{*coeff, x.symbols, *den};
      t.symbols.insert(t.symbols.end(), y.symbols.begin(), y.symbols.end());
      terms.push_back(std::move(t));
    }
  }
  return Dim::FromTerms(std::move(terms));
}

std::optional<Dim> Dim::DivExact(const Dim& b) const {
  if (!known_ || !b.known_ || b.terms_.size() != 1) return std::nullopt;
  const Term& divisor = b.terms_[0];
  std::vector<Term> out;
  for (const Term& t : terms_) {
    // (a/b) / (c/d) = ad / bc must come out whole.
    const auto num_or = CheckedMul(t.coeff, divisor.den);
    const auto den_or = CheckedMul(t.den, divisor.coeff);
    if (!num_or || !den_or || *den_or == 0 ||
        (*den_or == -1 && *num_or == std::numeric_limits<int64_t>::min()))
      return std::nullopt;
    const int64_t num = *num_or, den = *den_or;
    if (num % den != 0) return std::nullopt;
    // Remove each symbol of the divisor once from the (sorted) term.
    std::vector<std::string> rest = t.symbols;
    for (const std::string& s : divisor.symbols) {
      auto it = std::find(rest.begin(), rest.end(), s);
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    out.push_back({num / den, std::move(rest)});
  }
  return FromTerms(std::move(out));
}

std::string Dim::ToString() const {
  if (!known_) return "?";
  if (terms_.empty()) return "0";
  std::string out;
  for (size_t i = 0; i < terms_.size(); ++i) {
    const Term& t = terms_[i];
    int64_t c = t.coeff;
    if (i > 0) {
      out += c < 0 ? "-" : "+";
      if (c < 0) c = -c;
    } else if (c < 0 && !t.symbols.empty()) {
      out += "-";
      c = -c;
    }
    std::vector<std::string> factors;
    if (c != 1 || t.symbols.empty()) factors.push_back(absl::StrCat(c));
    for (const std::string& s : t.symbols) factors.push_back(QuoteIfNeeded(s));
    out += absl::StrJoin(factors, "*");
    if (t.den != 1) absl::StrAppend(&out, "/", t.den);
  }
  return out;
}

void CollectSymbols(const Dim& dim, std::set<std::string>* out) {
  for (const Dim::Term& t : dim.terms()) out->insert(t.symbols.begin(), t.symbols.end());
}

std::string DimsToString(const std::vector<Dim>& dims) {
  return absl::StrCat(
      "[",
      absl::StrJoin(dims, ", ", [](std::string* out, const Dim& d) { out->append(d.ToString()); }),
      "]");
}

Dim Product(const std::vector<Dim>& dims) {
  Dim p(1);
  for (const Dim& d : dims) p = p * d;
  return p;
}

bool IsPlainIdentifier(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name[0])) return false;
  for (char c : name) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

}  // namespace tpc::ir
