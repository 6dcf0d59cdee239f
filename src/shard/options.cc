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

}  // namespace tpc::shard
