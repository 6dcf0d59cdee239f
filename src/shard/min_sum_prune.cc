#include "min_sum_prune.h"

#include <cstddef>

namespace tpc::shard::internal {
namespace {

// Mixed-radix digits of `index` over `vars` (last variable fastest).
void Digits(size_t index, const std::vector<int>& vars, const MinSumProblem& p,
            std::vector<int>* out) {
  out->assign(vars.size(), 0);
  for (size_t k = vars.size(); k-- > 0;) {
    const size_t d = static_cast<size_t>(p.domain_size(vars[k]));
    (*out)[k] = static_cast<int>(index % d);
    index /= d;
  }
}

}  // namespace

PrunedProblem Prune(const MinSumProblem& p) {
  PrunedProblem out;
  const int n = p.num_variables();
  std::vector<std::vector<char>> alive(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v)
    alive[static_cast<size_t>(v)].assign(static_cast<size_t>(p.domain_size(v)), 1);

  // Arc consistency: a value survives while every factor holds a finite entry for it
  // among values that survive.
  std::vector<int> digits;
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto& f : p.factors()) {
      std::vector<std::vector<char>> supported(f.vars.size());
      for (size_t k = 0; k < f.vars.size(); ++k) {
        supported[k].assign(static_cast<size_t>(p.domain_size(f.vars[k])), 0);
      }
      for (size_t e = 0; e < f.table.size(); ++e) {
        if (f.table[e].is_infinite()) continue;
        Digits(e, f.vars, p, &digits);
        bool ok = true;
        for (size_t k = 0; k < f.vars.size() && ok; ++k) {
          ok = alive[static_cast<size_t>(f.vars[k])][static_cast<size_t>(digits[k])] != 0;
        }
        if (!ok) continue;
        for (size_t k = 0; k < f.vars.size(); ++k) supported[k][static_cast<size_t>(digits[k])] = 1;
      }
      for (size_t k = 0; k < f.vars.size(); ++k) {
        auto& a = alive[static_cast<size_t>(f.vars[k])];
        for (size_t i = 0; i < a.size(); ++i) {
          if (a[i] && !supported[k][i]) {
            a[i] = 0;
            changed = true;
          }
        }
      }
    }
  }

  // The reduced problem: variables with two or more values left.
  out.reduced_var.assign(static_cast<size_t>(n), -1);
  out.values.resize(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) {
    for (size_t i = 0; i < alive[static_cast<size_t>(v)].size(); ++i) {
      if (alive[static_cast<size_t>(v)][i])
        out.values[static_cast<size_t>(v)].push_back(static_cast<int>(i));
    }
    const size_t left = out.values[static_cast<size_t>(v)].size();
    if (left == 0) {
      out.infeasible = true;
      return out;
    }
    if (left >= 2)
      out.reduced_var[static_cast<size_t>(v)] = out.reduced.AddVariable(static_cast<int>(left));
  }
  for (const auto& f : p.factors()) {
    std::vector<int> scope;  // original variables that stay
    for (int v : f.vars) {
      if (out.reduced_var[static_cast<size_t>(v)] >= 0) scope.push_back(v);
    }
    size_t entries = 1;
    for (int v : scope) entries *= out.values[static_cast<size_t>(v)].size();
    std::vector<Cost> table(entries);
    std::vector<int> pick(f.vars.size());
    for (size_t e = 0; e < entries; ++e) {
      // Reduced digits of e over `scope`, then the original index.
      size_t rest = e;
      std::vector<int> reduced_digit(scope.size());
      for (size_t k = scope.size(); k-- > 0;) {
        const size_t d = out.values[static_cast<size_t>(scope[k])].size();
        reduced_digit[k] = static_cast<int>(rest % d);
        rest /= d;
      }
      size_t index = 0;
      size_t s = 0;
      for (size_t k = 0; k < f.vars.size(); ++k) {
        const int v = f.vars[k];
        const auto& vals = out.values[static_cast<size_t>(v)];
        const int value = out.reduced_var[static_cast<size_t>(v)] >= 0
                              ? vals[static_cast<size_t>(reduced_digit[s++])]
                              : vals[0];
        index = index * static_cast<size_t>(p.domain_size(v)) + static_cast<size_t>(value);
      }
      table[e] = f.table[index];
    }
    if (scope.empty()) {
      out.constant += table[0];
    } else if (scope.size() == 1) {
      out.reduced.AddUnary(out.reduced_var[static_cast<size_t>(scope[0])], std::move(table));
    } else if (scope.size() == 2) {
      out.reduced.AddPairwise(out.reduced_var[static_cast<size_t>(scope[0])],
                              out.reduced_var[static_cast<size_t>(scope[1])], std::move(table));
    } else {
      std::vector<int> vars;
      for (int v : scope) vars.push_back(out.reduced_var[static_cast<size_t>(v)]);
      out.reduced.AddFactor(std::move(vars), std::move(table));
    }
  }
  return out;
}

}  // namespace tpc::shard::internal
