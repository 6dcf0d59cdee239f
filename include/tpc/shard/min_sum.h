// Exact minimisation of a sum of cost tables over discrete variables (a min-sum
// problem), by variable elimination.
//
// The shard stage turns a graph into such a problem: one variable per sharding
// decision (a weight's placement, an op's strategy), a unary table per variable
// (weight bytes, the op's own collectives) and a pairwise table per edge (the
// collective that turns a producer's placement into what its consumer needs).
// Variable elimination is exact; its cost grows with the size of the largest table it
// builds, which the elimination order (smallest table first, ties by variable index,
// so the result is deterministic) keeps small on the graphs transformers make.
// Nothing recurses: a 100k-node graph uses no more stack than a 10-node one.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpc::shard {

// A cost compared lexicographically, component 0 first (what the objective puts
// first: weight bytes, or step time).
struct Cost {
  static constexpr int kComponents = 5;
  std::array<double, kComponents> v{};

  static Cost Zero() { return Cost{}; }
  static Cost Infinite() {
    Cost c;
    c.v[0] = std::numeric_limits<double>::infinity();
    return c;
  }
  static Cost Component(int i, double x) {
    Cost c;
    c.v[static_cast<size_t>(i)] = x;
    return c;
  }
  bool is_infinite() const { return v[0] == std::numeric_limits<double>::infinity(); }
  Cost& operator+=(const Cost& o) {
    for (int i = 0; i < kComponents; ++i) v[static_cast<size_t>(i)] += o.v[static_cast<size_t>(i)];
    return *this;
  }
  friend Cost operator+(Cost a, const Cost& b) { return a += b; }
  friend bool operator<(const Cost& a, const Cost& b) { return a.v < b.v; }
  friend bool operator==(const Cost& a, const Cost& b) { return a.v == b.v; }
  // Equal up to relative rounding in every component (sums taken in another order).
  bool ApproxEqual(const Cost& o, double rel = 1e-9) const;
  std::string ToString() const;
};

class MinSumProblem {
 public:
  int AddVariable(int domain_size);
  int num_variables() const { return static_cast<int>(domains_.size()); }
  int domain_size(int var) const { return domains_[static_cast<size_t>(var)]; }

  // costs[i]: cost of value i.
  void AddUnary(int var, std::vector<Cost> costs);
  // costs[i * domain(b) + j]: cost of a = i, b = j.
  void AddPairwise(int a, int b, std::vector<Cost> costs);
  // A table over `vars` (ascending), the last varying fastest.
  void AddFactor(std::vector<int> vars, std::vector<Cost> table);

  // A factor: its variables (ascending) and a table over them, the last variable
  // varying fastest.
  struct Factor {
    std::vector<int> vars;
    std::vector<Cost> table;
  };
  const std::vector<Factor>& factors() const { return factors_; }

  // The cost of a full assignment.
  Cost Evaluate(const std::vector<int>& assignment) const;

  // Replaces every table entry `c` by `f(c)`: the same decisions under other weights of
  // the objective (the balanced objective's price of a weight byte).
  template <typename F>
  void MapCosts(F f) {
    for (Factor& factor : factors_) {
      for (Cost& c : factor.table) c = f(c);
    }
  }

 private:
  std::vector<int> domains_;
  std::vector<Factor> factors_;
};

struct MinSumSolution {
  std::vector<int> assignment;
  Cost cost;
  int64_t largest_table = 0;  // entries of the largest table elimination built
  int fixed_hubs = 0;         // decisions fixed before solving (not a proven optimum)
};

// Exact minimum. ResourceExhausted when a table would exceed `max_table_entries`.
absl::StatusOr<MinSumSolution> SolveMinSum(const MinSumProblem& problem,
                                           int64_t max_table_entries = int64_t{1} << 24);

// When SolveMinSum runs out of room: fixes the most connected decision to its cheapest
// own value, again and again, until the rest solves exactly. The answer is a plan,
// not a proven optimum; `fixed` tells how many decisions were fixed that way.
absl::StatusOr<MinSumSolution> SolveMinSumFixingHubs(const MinSumProblem& problem, int* fixed,
                                                     int64_t max_table_entries = int64_t{1} << 24);

// Exhaustive search (tests: the answer SolveMinSum must match).
MinSumSolution SolveByEnumeration(const MinSumProblem& problem);

}  // namespace tpc::shard
