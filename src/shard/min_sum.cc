#include "tpc/shard/min_sum.h"

#include "min_sum_prune.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tpc/util/status_macros.h"

namespace tpc::shard {

bool Cost::ApproxEqual(const Cost& o, double rel) const {
  for (int i = 0; i < kComponents; ++i) {
    const double a = v[static_cast<size_t>(i)];
    const double b = o.v[static_cast<size_t>(i)];
    if (a == b) continue;
    if (std::isinf(a) || std::isinf(b)) return false;  // inf − x is inf, and so is rel · inf
    if (std::abs(a - b) > rel * std::max({std::abs(a), std::abs(b), 1e-30})) return false;
  }
  return true;
}

std::string Cost::ToString() const {
  return absl::StrFormat("(%g, %g, %g, %g, %g)", v[0], v[1], v[2], v[3], v[4]);
}

int MinSumProblem::AddVariable(int domain_size) {
  TPC_CHECK(domain_size >= 1);
  domains_.push_back(domain_size);
  return num_variables() - 1;
}

void MinSumProblem::AddUnary(int var, std::vector<Cost> costs) {
  TPC_CHECK(static_cast<int>(costs.size()) == domain_size(var));
  factors_.push_back({{var}, std::move(costs)});
}

void MinSumProblem::AddPairwise(int a, int b, std::vector<Cost> costs) {
  TPC_CHECK(a != b);
  TPC_CHECK(static_cast<int64_t>(costs.size()) ==
            static_cast<int64_t>(domain_size(a)) * domain_size(b));
  if (a < b) {
    factors_.push_back({{a, b}, std::move(costs)});
    return;
  }
  // Store with ascending variables: transpose.
  const int da = domain_size(a);
  const int db = domain_size(b);
  std::vector<Cost> t(costs.size());
  for (int i = 0; i < da; ++i) {
    for (int j = 0; j < db; ++j)
      t[static_cast<size_t>(j * da + i)] = costs[static_cast<size_t>(i * db + j)];
  }
  factors_.push_back({{b, a}, std::move(t)});
}

void MinSumProblem::AddFactor(std::vector<int> vars, std::vector<Cost> table) {
  size_t entries = 1;
  for (size_t k = 0; k < vars.size(); ++k) {
    TPC_CHECK(k == 0 || vars[k - 1] < vars[k]);
    entries *= static_cast<size_t>(domain_size(vars[k]));
  }
  TPC_CHECK(table.size() == entries);
  factors_.push_back({std::move(vars), std::move(table)});
}

Cost MinSumProblem::Evaluate(const std::vector<int>& assignment) const {
  Cost total;
  for (const Factor& f : factors_) {
    size_t index = 0;
    for (int var : f.vars) {
      index = index * static_cast<size_t>(domains_[static_cast<size_t>(var)]) +
              static_cast<size_t>(assignment[static_cast<size_t>(var)]);
    }
    total += f.table[index];
  }
  return total;
}

namespace {

struct Elimination {
  int var;
  std::vector<int> scope;        // the other variables of the merged factor, ascending
  std::vector<uint16_t> argmin;  // best value of `var` per assignment of `scope`
};

// Row-major strides of a factor's variables.
std::vector<size_t> Strides(const std::vector<int>& vars, const std::vector<int>& domains) {
  std::vector<size_t> s(vars.size());
  size_t stride = 1;
  for (size_t k = vars.size(); k-- > 0;) {
    s[k] = stride;
    stride *= static_cast<size_t>(domains[static_cast<size_t>(vars[k])]);
  }
  return s;
}

class Eliminator {
 public:
  Eliminator(const MinSumProblem& p, int64_t cap)
      : domains_(static_cast<size_t>(p.num_variables())), cap_(cap) {
    for (int v = 0; v < p.num_variables(); ++v) domains_[static_cast<size_t>(v)] = p.domain_size(v);
    var_factors_.resize(domains_.size());
    neighbors_.resize(domains_.size());
    log_score_.assign(domains_.size(), 0.0);
    for (const auto& f : p.factors()) AddFactor(f.vars, f.table);
    eliminated_.assign(domains_.size(), false);
  }

  absl::StatusOr<MinSumSolution> Run() {
    MinSumSolution sol;
    using Entry = std::pair<double, int>;  // (table size, variable): smallest first
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    std::vector<double> queued(domains_.size());
    for (int v = 0; v < static_cast<int>(domains_.size()); ++v) {
      queued[static_cast<size_t>(v)] = Score(v);
      queue.push({queued[static_cast<size_t>(v)], v});
    }
    std::vector<Elimination> order;
    order.reserve(domains_.size());
    while (!queue.empty()) {
      auto [score, x] = queue.top();
      queue.pop();
      if (eliminated_[static_cast<size_t>(x)] || score != queued[static_cast<size_t>(x)]) continue;
      TPC_ASSIGN_OR_RETURN(Elimination e, Eliminate(x, &sol.largest_table));
      const std::vector<int> scope = e.scope;
      order.push_back(std::move(e));
      for (int u : scope) {
        double s = Score(u);
        if (s != queued[static_cast<size_t>(u)]) {
          queued[static_cast<size_t>(u)] = s;
          queue.push({s, u});
        }
      }
    }
    sol.assignment.assign(domains_.size(), 0);
    for (size_t k = order.size(); k-- > 0;) {
      const Elimination& e = order[k];
      size_t index = 0;
      for (int u : e.scope) {
        index = index * static_cast<size_t>(domains_[static_cast<size_t>(u)]) +
                static_cast<size_t>(sol.assignment[static_cast<size_t>(u)]);
      }
      sol.assignment[static_cast<size_t>(e.var)] = e.argmin[index];
    }
    sol.cost = constant_;
    return sol;
  }

 private:
  struct LiveFactor {
    std::vector<int> vars;
    std::vector<Cost> table;
    bool alive = true;
  };

  void AddFactor(std::vector<int> vars, std::vector<Cost> table) {
    if (vars.empty()) {
      constant_ += table[0];
      return;
    }
    const int id = static_cast<int>(factors_.size());
    for (int v : vars) var_factors_[static_cast<size_t>(v)].push_back(id);
    // Neighbour sets and scores are kept up to date as factors come and go, so a
    // decision shared by every layer costs nothing extra per elimination.
    for (int a : vars) {
      for (int b : vars) {
        if (a != b && neighbors_[static_cast<size_t>(a)].insert(b).second) {
          log_score_[static_cast<size_t>(a)] +=
              std::log(static_cast<double>(domains_[static_cast<size_t>(b)]));
        }
      }
    }
    factors_.push_back({std::move(vars), std::move(table), true});
  }

  // Variables sharing a live factor with x (ascending, without x).
  std::vector<int> Neighbors(int x) const {
    const auto& set = neighbors_[static_cast<size_t>(x)];
    std::vector<int> out(set.begin(), set.end());
    std::sort(out.begin(), out.end());
    return out;
  }

  // Log of the size of the table eliminating x would build.
  double Score(int x) const { return log_score_[static_cast<size_t>(x)]; }

  absl::StatusOr<Elimination> Eliminate(int x, int64_t* largest) {
    Elimination e;
    e.var = x;
    e.scope = Neighbors(x);
    std::vector<int> ids;
    for (int id : var_factors_[static_cast<size_t>(x)]) {
      if (factors_[static_cast<size_t>(id)].alive) ids.push_back(id);
    }
    double entries = 1;
    for (int v : e.scope) entries *= domains_[static_cast<size_t>(v)];
    if (entries > static_cast<double>(cap_)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the sharding problem is too entangled to solve exactly here (a table of ",
                       entries, " entries over ", e.scope.size(), " decisions)"));
    }
    const size_t n = static_cast<size_t>(entries);
    *largest = std::max<int64_t>(*largest, static_cast<int64_t>(n));
    const int dx = domains_[static_cast<size_t>(x)];

    // For each merged factor: the stride of x and, per scope position, its stride.
    struct View {
      const LiveFactor* f;
      size_t x_stride = 0;
      std::vector<size_t> scope_stride;
    };
    std::vector<View> views;
    for (int id : ids) {
      const LiveFactor& f = factors_[static_cast<size_t>(id)];
      View view{&f, 0, std::vector<size_t>(e.scope.size(), 0)};
      std::vector<size_t> strides = Strides(f.vars, domains_);
      for (size_t k = 0; k < f.vars.size(); ++k) {
        if (f.vars[k] == x) {
          view.x_stride = strides[k];
        } else {
          auto pos = std::lower_bound(e.scope.begin(), e.scope.end(), f.vars[k]) - e.scope.begin();
          view.scope_stride[static_cast<size_t>(pos)] = strides[k];
        }
      }
      views.push_back(std::move(view));
    }

    std::vector<Cost> table(n);
    e.argmin.assign(n, 0);
    std::vector<int> digit(e.scope.size(), 0);
    std::vector<size_t> base(views.size(), 0);
    for (size_t a = 0; a < n; ++a) {
      for (size_t k = 0; k < views.size(); ++k) {
        size_t b = 0;
        for (size_t p = 0; p < digit.size(); ++p) {
          b += views[k].scope_stride[p] * static_cast<size_t>(digit[p]);
        }
        base[k] = b;
      }
      Cost best = Cost::Infinite();
      int best_x = 0;
      bool first = true;
      for (int xv = 0; xv < dx; ++xv) {
        Cost c;
        for (size_t k = 0; k < views.size(); ++k) {
          c += views[k].f->table[base[k] + views[k].x_stride * static_cast<size_t>(xv)];
        }
        if (first || c < best) {
          best = c;
          best_x = xv;
          first = false;
        }
      }
      table[a] = best;
      e.argmin[a] = static_cast<uint16_t>(best_x);
      // Next assignment of the scope (last variable fastest).
      for (size_t p = digit.size(); p-- > 0;) {
        if (++digit[p] < domains_[static_cast<size_t>(e.scope[p])]) break;
        digit[p] = 0;
      }
    }
    for (int id : ids) {
      factors_[static_cast<size_t>(id)].alive = false;
      factors_[static_cast<size_t>(id)].table.clear();
      factors_[static_cast<size_t>(id)].table.shrink_to_fit();
    }
    var_factors_[static_cast<size_t>(x)].clear();
    const double log_dx = std::log(static_cast<double>(dx));
    for (int u : e.scope) {
      neighbors_[static_cast<size_t>(u)].erase(x);
      log_score_[static_cast<size_t>(u)] -= log_dx;
    }
    neighbors_[static_cast<size_t>(x)].clear();
    eliminated_[static_cast<size_t>(x)] = true;
    AddFactor(e.scope, std::move(table));
    return e;
  }

  std::vector<int> domains_;
  int64_t cap_;
  std::vector<LiveFactor> factors_;
  std::vector<std::vector<int>> var_factors_;
  std::vector<absl::flat_hash_set<int>> neighbors_;
  std::vector<double> log_score_;
  std::vector<bool> eliminated_;
  Cost constant_;
};

}  // namespace

absl::StatusOr<MinSumSolution> SolveMinSum(const MinSumProblem& problem,
                                           int64_t max_table_entries) {
  for (int v = 0; v < problem.num_variables(); ++v) {
    if (problem.domain_size(v) > 65535) {
      return absl::InvalidArgumentError("a decision has too many alternatives");
    }
  }
  // Values no finite plan can take go first; decisions left with one value drop out.
  internal::PrunedProblem pruned = internal::Prune(problem);
  const int n = problem.num_variables();
  MinSumSolution sol;
  if (pruned.infeasible) {
    sol.assignment.assign(static_cast<size_t>(n), 0);
    sol.cost = problem.Evaluate(sol.assignment);
    return sol;
  }
  Eliminator eliminator(pruned.reduced, max_table_entries);
  TPC_ASSIGN_OR_RETURN(MinSumSolution reduced, eliminator.Run());
  sol.largest_table = reduced.largest_table;
  sol.assignment.resize(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) {
    const int rv = pruned.reduced_var[static_cast<size_t>(v)];
    const auto& values = pruned.values[static_cast<size_t>(v)];
    sol.assignment[static_cast<size_t>(v)] =
        rv < 0 ? values[0]
               : values[static_cast<size_t>(reduced.assignment[static_cast<size_t>(rv)])];
  }
  sol.cost = reduced.cost + pruned.constant;
  return sol;
}

absl::StatusOr<MinSumSolution> SolveMinSumFixingHubs(const MinSumProblem& problem, int* fixed,
                                                     int64_t max_table_entries) {
  MinSumProblem p = problem;
  std::vector<bool> clamped(static_cast<size_t>(p.num_variables()), false);
  *fixed = 0;
  while (true) {
    auto sol = SolveMinSum(p, max_table_entries);
    if (sol.ok() || sol.status().code() != absl::StatusCode::kResourceExhausted) return sol;
    // The decision in the most tables, not fixed yet.
    std::vector<int> degree(static_cast<size_t>(p.num_variables()), 0);
    for (const auto& f : problem.factors()) {
      if (f.vars.size() < 2) continue;
      for (int v : f.vars) ++degree[static_cast<size_t>(v)];
    }
    int hub = -1;
    for (int v = 0; v < p.num_variables(); ++v) {
      if (clamped[static_cast<size_t>(v)] || p.domain_size(v) < 2) continue;
      if (hub < 0 || degree[static_cast<size_t>(v)] > degree[static_cast<size_t>(hub)]) hub = v;
    }
    if (hub < 0) return sol.status();
    // Its cheapest value by its own (unary) costs.
    std::vector<Cost> own(static_cast<size_t>(p.domain_size(hub)));
    for (const auto& f : problem.factors()) {
      if (f.vars.size() != 1 || f.vars[0] != hub) continue;
      for (size_t i = 0; i < own.size(); ++i) own[i] += f.table[i];
    }
    const size_t best = static_cast<size_t>(std::min_element(own.begin(), own.end()) - own.begin());
    std::vector<Cost> clamp(own.size(), Cost::Infinite());
    clamp[best] = Cost::Zero();
    p.AddUnary(hub, std::move(clamp));
    clamped[static_cast<size_t>(hub)] = true;
    ++*fixed;
  }
}

MinSumSolution SolveByEnumeration(const MinSumProblem& problem) {
  MinSumSolution best;
  best.cost = Cost::Infinite();
  const int n = problem.num_variables();
  std::vector<int> a(static_cast<size_t>(n), 0);
  bool first = true;
  while (true) {
    Cost c = problem.Evaluate(a);
    if (first || c < best.cost) {
      best.cost = c;
      best.assignment = a;
      first = false;
    }
    int p = n - 1;
    for (; p >= 0; --p) {
      if (++a[static_cast<size_t>(p)] < problem.domain_size(p)) break;
      a[static_cast<size_t>(p)] = 0;
    }
    if (p < 0) break;
  }
  return best;
}

}  // namespace tpc::shard
