#include "tpc/runtime/cpus.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tpc::runtime {

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view list) {
  std::vector<int> cpus;
  const std::string text(list);
  for (const std::string& item : std::vector<std::string>(absl::StrSplit(text, ','))) {
    std::vector<std::string> ends = absl::StrSplit(item, absl::MaxSplits('-', 1));
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo) || !absl::SimpleAtoi(ends.back(), &hi) || lo < 0 ||
        hi < lo || hi >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cpus ", std::string(list), ": '", std::string(item),
                       "' is not a CPU number or an ascending range (0-3) below ", CPU_SETSIZE));
    }
    for (int c = lo; c <= hi; ++c) {
      if (!cpus.empty() && c <= cpus.back()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--cpus ", text, ": CPU ", c, " is repeated or out of order"));
      }
      cpus.push_back(c);
    }
  }
  return cpus;
}

absl::StatusOr<std::vector<int>> CpuShare(const std::vector<int>& cpus, int local_rank,
                                          int local_size) {
  const int n = static_cast<int>(cpus.size());
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("local rank ", local_rank, " of ", local_size, " has no CPU share"));
  }
  if (n < local_size) {
    return absl::InvalidArgumentError(absl::StrCat("--cpus lists ", n, " CPU(s) for ", local_size,
                                                   " ranks on this machine: give each one"));
  }
  const int base = n / local_size, extra = n % local_size;
  const int first = local_rank * base + std::min(local_rank, extra);
  const int count = base + (local_rank < extra ? 1 : 0);
  return std::vector<int>(cpus.begin() + first, cpus.begin() + first + count);
}

absl::Status PinToCpus(const std::vector<int>& cpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return absl::InternalError(absl::StrCat("sched_getaffinity: ", std::strerror(errno)));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (!CPU_ISSET(c, &allowed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cpus: CPU ", c, " is not one this process may run on (see taskset -p or nproc)"));
    }
    CPU_SET(c, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot pin to CPUs ", absl::StrJoin(cpus, ","), ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace tpc::runtime
