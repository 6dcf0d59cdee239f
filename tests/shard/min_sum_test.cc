// The exact min-sum solver (variable elimination) against exhaustive search on
// hundreds of random problems, plus its limits: a table cap that reports
// ResourceExhausted, and a 100k-variable chain solved without recursion.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>
#include <vector>

#include "tpc/shard/min_sum.h"

namespace {

using tpc::shard::Cost;
using tpc::shard::MinSumProblem;
using tpc::shard::MinSumSolution;
using tpc::shard::SolveByEnumeration;
using tpc::shard::SolveMinSum;

// A random cost: a few small integer components (exact sums, many ties that the
// lexicographic order must break the same way), sometimes fractional, sometimes
// infinite.
Cost RandomCost(std::mt19937& rng, int infinite_per_mille) {
  std::uniform_int_distribution<int> per_mille(0, 999);
  if (per_mille(rng) < infinite_per_mille) {
    Cost c = Cost::Infinite();
    // An infinite entry may still carry finite lower components.
    c.v[1] = static_cast<double>(per_mille(rng) % 7);
    return c;
  }
  Cost c;
  std::uniform_int_distribution<int> small(0, 4);
  for (int i = 0; i < Cost::kComponents; ++i) {
    if (per_mille(rng) < 500) continue;  // many zero components
    double x = small(rng);
    if (per_mille(rng) < 100) x += 0.125 * small(rng);
    c.v[static_cast<size_t>(i)] = x;
  }
  return c;
}

std::vector<Cost> RandomTable(std::mt19937& rng, size_t size, int infinite_per_mille) {
  std::vector<Cost> t;
  for (size_t i = 0; i < size; ++i) t.push_back(RandomCost(rng, infinite_per_mille));
  return t;
}

struct Drawn {
  MinSumProblem problem;
  double assignments = 1;
};

// One random problem: 1..12 variables with domains 1..4 (product at most 2e5),
// random unary factors, random pairwise factors, and some dense structures (triangles
// and 4-cliques, where elimination builds tables over three variables, and repeated
// factors on one pair).
Drawn RandomProblem(std::mt19937& rng) {
  Drawn d;
  std::uniform_int_distribution<int> num_vars(1, 12);
  std::uniform_int_distribution<int> domain(1, 4);
  const int n = num_vars(rng);
  std::vector<int> domains;
  for (int v = 0; v < n; ++v) domains.push_back(domain(rng));
  auto product = [&] {
    double p = 1;
    for (int x : domains) p *= x;
    return p;
  };
  // Shrink the largest domains until the enumeration stays small.
  while (product() > 2e5) {
    auto it = std::max_element(domains.begin(), domains.end());
    --*it;
  }
  d.assignments = product();
  for (int x : domains) d.problem.AddVariable(x);
  std::uniform_int_distribution<int> per_mille(0, 999);
  const int infinite = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? 300 : 40;
  auto dom = [&](int v) { return static_cast<size_t>(domains[static_cast<size_t>(v)]); };
  for (int v = 0; v < n; ++v) {
    if (per_mille(rng) < 700) d.problem.AddUnary(v, RandomTable(rng, dom(v), infinite));
  }
  if (n < 2) return d;
  std::uniform_int_distribution<int> pick(0, n - 1);
  auto pair = [&](int a, int b) {
    d.problem.AddPairwise(a, b, RandomTable(rng, dom(a) * dom(b), infinite));
  };
  const int shape = std::uniform_int_distribution<int>(0, 3)(rng);
  if (shape == 0) {
    // A chain (what a transformer's residual stream looks like), a few skips.
    for (int v = 0; v + 1 < n; ++v) pair(v, v + 1);
    for (int k = 0; k < n / 3; ++k) {
      const int a = pick(rng);
      const int b = pick(rng);
      if (a != b) pair(a, b);
    }
  } else if (shape == 1) {
    // Triangles sharing edges: triple overlaps everywhere.
    for (int v = 0; v + 2 < n; ++v) {
      pair(v, v + 1);
      pair(v + 1, v + 2);
      pair(v, v + 2);
    }
    if (n == 2) pair(1, 0);
  } else if (shape == 2) {
    // 4-cliques over random variables, and repeated factors on one pair.
    for (int k = 0; k < 3; ++k) {
      std::vector<int> vs;
      for (int j = 0; j < 4; ++j) vs.push_back(pick(rng));
      std::sort(vs.begin(), vs.end());
      vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
      for (size_t i = 0; i < vs.size(); ++i) {
        for (size_t j = i + 1; j < vs.size(); ++j) pair(vs[j], vs[i]);  // descending: transposed
      }
    }
    pair(0, n - 1);
    pair(n - 1, 0);
  } else {
    // Random sparse-to-dense edges.
    const int edges = std::uniform_int_distribution<int>(0, 2 * n)(rng);
    for (int k = 0; k < edges; ++k) {
      const int a = pick(rng);
      const int b = pick(rng);
      if (a != b) pair(a, b);
    }
  }
  return d;
}

}  // namespace

TEST_CASE("min-sum: variable elimination equals exhaustive search on random problems",
          "[shard][min_sum]") {
  std::mt19937 rng(20240611);
  int compared = 0;
  int with_infinite_optimum = 0;
  for (int draw = 0; draw < 500; ++draw) {
    Drawn d = RandomProblem(rng);
    const MinSumProblem& p = d.problem;
    INFO("draw " << draw << ": " << p.num_variables() << " variables, " << p.factors().size()
                 << " factors, " << d.assignments << " assignments");
    auto solved = SolveMinSum(p);
    REQUIRE(solved.ok());
    const MinSumSolution brute = SolveByEnumeration(p);
    INFO("elimination " << solved->cost.ToString() << " vs enumeration " << brute.cost.ToString());
    REQUIRE(static_cast<int>(solved->assignment.size()) == p.num_variables());
    for (int v = 0; v < p.num_variables(); ++v) {
      REQUIRE(solved->assignment[static_cast<size_t>(v)] >= 0);
      REQUIRE(solved->assignment[static_cast<size_t>(v)] < p.domain_size(v));
    }
    // The assignment really has the cost the solver reports.
    const Cost evaluated = p.Evaluate(solved->assignment);
    INFO("evaluated " << evaluated.ToString());
    CHECK(evaluated.ApproxEqual(solved->cost));
    REQUIRE(solved->cost.is_infinite() == brute.cost.is_infinite());
    if (!brute.cost.is_infinite()) {
      CHECK(solved->cost.ApproxEqual(brute.cost));
      CHECK(evaluated.ApproxEqual(brute.cost));
    }
    // When every assignment is infeasible the lower components of the (infinite)
    // minimum are not comparable: the lexicographic order is not monotone under
    // addition once component 0 is infinite ((5, 10) < (inf, 0), yet adding (inf, 0)
    // to both reverses them), so elimination need not find enumeration's
    // tie-break among infeasible plans. Infeasibility itself must agree (above); the
    // shard pass turns it into an error.
    // Tables elimination builds are never larger than the whole search space (pruning
    // may leave nothing to eliminate: 0).
    CHECK(solved->largest_table <= d.assignments);
    with_infinite_optimum += brute.cost.is_infinite() ? 1 : 0;
    ++compared;
  }
  CHECK(compared == 500);
  // The draws exercise both feasible and infeasible problems.
  CHECK(with_infinite_optimum > 0);
  CHECK(with_infinite_optimum < 250);
}

TEST_CASE("min-sum: Cost::ApproxEqual never equates an infinite and a finite cost",
          "[shard][min_sum]") {
  const Cost finite = Cost::Component(0, 5);
  CHECK_FALSE(Cost::Infinite().ApproxEqual(finite));
  CHECK_FALSE(finite.ApproxEqual(Cost::Infinite()));
  CHECK(Cost::Infinite().ApproxEqual(Cost::Infinite()));
  CHECK(Cost::Component(1, 1.0).ApproxEqual(Cost::Component(1, 1.0 + 1e-12)));
  CHECK_FALSE(Cost::Component(1, 1.0).ApproxEqual(Cost::Component(1, 1.001)));
}

TEST_CASE("min-sum: a table over the cap is ResourceExhausted", "[shard][min_sum]") {
  // A 10-clique of 4-valued variables: eliminating any variable first builds a table
  // over the 9 others (4^9 entries).
  MinSumProblem p;
  std::mt19937 rng(7);
  for (int v = 0; v < 10; ++v) p.AddVariable(4);
  for (int a = 0; a < 10; ++a) {
    for (int b = a + 1; b < 10; ++b) p.AddPairwise(a, b, RandomTable(rng, 16, 0));
  }
  auto small = SolveMinSum(p, /*max_table_entries=*/1000);
  REQUIRE_FALSE(small.ok());
  CHECK(small.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(small.status().message()), Catch::Contains("too entangled"));
  // With room it solves, exactly.
  auto big = SolveMinSum(p);
  REQUIRE(big.ok());
  CHECK(big->largest_table == 262144);
  CHECK(big->cost.ApproxEqual(SolveByEnumeration(p).cost));
}

TEST_CASE("min-sum: a 100k-variable chain solves fast, without recursion", "[shard][min_sum]") {
  constexpr int kVars = 100000;
  constexpr int kDomain = 3;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> cost(0, 9);
  MinSumProblem p;
  std::vector<std::vector<double>> unary(kVars);
  std::vector<std::vector<double>> pairwise(kVars - 1);
  for (int v = 0; v < kVars; ++v) {
    p.AddVariable(kDomain);
    std::vector<Cost> t;
    for (int i = 0; i < kDomain; ++i) {
      unary[static_cast<size_t>(v)].push_back(cost(rng));
      t.push_back(Cost::Component(0, unary[static_cast<size_t>(v)].back()));
    }
    p.AddUnary(v, std::move(t));
  }
  for (int v = 0; v + 1 < kVars; ++v) {
    std::vector<Cost> t;
    for (int i = 0; i < kDomain * kDomain; ++i) {
      pairwise[static_cast<size_t>(v)].push_back(cost(rng));
      t.push_back(Cost::Component(0, pairwise[static_cast<size_t>(v)].back()));
    }
    // Alternate the argument order: half the factors are stored transposed.
    if (v % 2 == 0) {
      p.AddPairwise(v, v + 1, std::move(t));
    } else {
      std::vector<Cost> tt(t.size());
      for (int i = 0; i < kDomain; ++i) {
        for (int j = 0; j < kDomain; ++j)
          tt[static_cast<size_t>(j * kDomain + i)] = t[static_cast<size_t>(i * kDomain + j)];
      }
      p.AddPairwise(v + 1, v, std::move(tt));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto solved = SolveMinSum(p);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(solved.ok());
  CHECK(seconds < 5.0);
  CHECK(solved->largest_table <= kDomain);
  // Viterbi, independently.
  std::vector<double> best(unary[0]);
  for (int v = 1; v < kVars; ++v) {
    std::vector<double> next(kDomain);
    for (int j = 0; j < kDomain; ++j) {
      double m = 1e300;
      for (int i = 0; i < kDomain; ++i) {
        m = std::min(
            m, best[static_cast<size_t>(i)] +
                   pairwise[static_cast<size_t>(v - 1)][static_cast<size_t>(i * kDomain + j)]);
      }
      next[static_cast<size_t>(j)] = m + unary[static_cast<size_t>(v)][static_cast<size_t>(j)];
    }
    best = std::move(next);
  }
  const double optimum = *std::min_element(best.begin(), best.end());
  CHECK(solved->cost.v[0] == optimum);
  CHECK(p.Evaluate(solved->assignment).v[0] == optimum);
}

TEST_CASE("min-sum: fixing hubs gives a plan when exact elimination has no room", "[shard]") {
  // A star: one hub linked to 12 leaves, each leaf also linked to the next; with a cap of
  // 4 entries, elimination cannot keep the hub in its tables.
  MinSumProblem p;
  const int hub = p.AddVariable(3);
  std::vector<int> leaves;
  for (int i = 0; i < 12; ++i) leaves.push_back(p.AddVariable(3));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 10);
  auto table = [&](size_t n) {
    std::vector<Cost> t(n);
    for (auto& c : t) c = Cost::Component(0, std::round(u(rng)));
    return t;
  };
  p.AddUnary(hub, table(3));
  for (size_t i = 0; i < leaves.size(); ++i) {
    p.AddPairwise(hub, leaves[i], table(9));
    if (i + 1 < leaves.size()) p.AddPairwise(leaves[i], leaves[i + 1], table(9));
  }
  auto exact = SolveMinSum(p, /*max_table_entries=*/4);
  REQUIRE_FALSE(exact.ok());
  CHECK(exact.status().code() == absl::StatusCode::kResourceExhausted);
  int fixed = 0;
  auto approx = SolveMinSumFixingHubs(p, &fixed, /*max_table_entries=*/4);
  REQUIRE(approx.ok());
  CHECK(fixed >= 1);
  CHECK(p.Evaluate(approx->assignment).ApproxEqual(approx->cost));
  // Not better than the true optimum (and finite).
  const MinSumSolution brute = SolveByEnumeration(p);
  CHECK_FALSE(approx->cost < brute.cost);
  CHECK_FALSE(approx->cost.is_infinite());
}
