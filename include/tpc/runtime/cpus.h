// Pinning rank processes to cores (tp-run --cpus): a list of CPUs is shared out among
// the ranks of a machine, each rank's threads pinned to its share, so that N ranks on N
// cores do not migrate onto each other's cores.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpc::runtime {

// "0-3,8,10-11" → {0, 1, 2, 3, 8, 10, 11}: ascending ranges, no repeats; errors name the
// bad item.
absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view list);

// Local rank `local_rank`'s share of `cpus` among `local_size` ranks: equal contiguous
// parts (the remainder to the first ranks). Fails when there are fewer CPUs than ranks.
absl::StatusOr<std::vector<int>> CpuShare(const std::vector<int>& cpus, int local_rank,
                                          int local_size);

// Restricts the calling thread (and the threads it starts afterwards) to `cpus`; fails
// naming a CPU this process may not run on.
absl::Status PinToCpus(const std::vector<int>& cpus);

}  // namespace tpc::runtime
