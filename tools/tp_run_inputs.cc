#include "tp_run_inputs.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tpc/util/sha256.h"

namespace tpc::tp_run {

namespace rt = tpc::runtime;

std::string InputsDigest(const std::map<std::string, rt::Tensor>& inputs) {
  std::string out;
  for (const auto& [name, t] : inputs) {
    tpc::Sha256 h;
    h.Update(reinterpret_cast<const char*>(t.raw()), t.nbytes());
    absl::StrAppend(&out, name, "\t", t.TypeString(), "\t", h.HexDigest(), "\n");
  }
  return out;
}

std::string DigestDifference(const std::string& a, const std::string& b, int rank) {
  if (a == b) return "";
  const std::vector<std::string> la = absl::StrSplit(a, '\n'), lb = absl::StrSplit(b, '\n');
  for (size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    const std::string x = i < la.size() ? la[i] : "", y = i < lb.size() ? lb[i] : "";
    if (x == y) continue;
    const std::vector<std::string> fx = absl::StrSplit(x, '\t'), fy = absl::StrSplit(y, '\t');
    if (i == 0 && fx.size() == 3 && fy.size() == 3 && fx[0] == kFlagsLine && fy[0] == kFlagsLine) {
      return absl::StrCat("the flags are '", fy[1], "' on rank ", rank, ", '", fx[1],
                          "' on rank 0");
    }
    if (fx.size() != 3 || fy.size() != 3 || fx[0] != fy[0]) {
      return absl::StrCat("input '", fx[0], "' on rank 0, '", fy[0], "' on rank ", rank);
    }
    if (fx[1] != fy[1]) {
      return absl::StrCat("input '", fx[0], "' is ", fy[1], " on rank ", rank, ", ", fx[1],
                          " on rank 0");
    }
    return absl::StrCat("input '", fx[0], "' (", fx[1], ") has other values");
  }
  return "they differ";
}

}  // namespace tpc::tp_run
