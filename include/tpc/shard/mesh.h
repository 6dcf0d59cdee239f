// The device mesh: named axes with sizes. tpc shards over one axis, `tp`; the types
// carry a list so that more axes can come later.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpc::shard {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

struct Mesh {
  std::vector<MeshAxis> axes;

  static Mesh Tp(int64_t n) { return Mesh{{MeshAxis{"tp", n}}}; }
  // Size of the (single) tensor-parallel axis.
  int64_t tp() const { return axes.empty() ? 1 : axes[0].size; }
};

}  // namespace tpc::shard
