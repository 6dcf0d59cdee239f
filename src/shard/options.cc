#include "tpc/shard/options.h"

namespace tpc::shard {

const char* ObjectiveName(Objective objective) {
  switch (objective) {
    case Objective::kBalanced:
      return "balanced";
    case Objective::kMemory:
      return "memory";
    case Objective::kTime:
      return "time";
  }
  return "?";
}

std::optional<Objective> ObjectiveFromName(const std::string& name) {
  for (Objective o : {Objective::kBalanced, Objective::kMemory, Objective::kTime}) {
    if (name == ObjectiveName(o)) return o;
  }
  return std::nullopt;
}

double DimSize(const ir::Dim& d, const ShardOptions& options) {
  if (d.is_unknown()) {
    return static_cast<double>(d.is_sized_by_data() ? options.data_sized_dim_size
                                                    : options.default_dim_size);
  }
  double total = 0;
  for (const ir::Dim::Term& t : d.terms()) {
    double term = static_cast<double>(t.coeff) / static_cast<double>(t.den);
    for (const std::string& s : t.symbols) {
      auto it = options.dim_sizes.find(s);
      term *= static_cast<double>(it != options.dim_sizes.end() ? it->second
                                                                : options.default_dim_size);
    }
    total += term;
  }
  return total;
}

}  // namespace tpc::shard
