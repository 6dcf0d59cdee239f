// Every rank of tp-run reads or draws the full inputs itself; they must be the same on
// every rank (the same files, --dim and --seed), and so must the flags that shape the run.
// Each rank posts a digest of them, and rank r's first difference from rank 0's names the
// input (or the flags) and how it differs.
#pragma once

#include <map>
#include <string>

#include "tpc/runtime/tensor.h"

namespace tpc::tp_run {

// One line per input: name, type and the SHA-256 of its bytes.
std::string InputsDigest(const std::map<std::string, tpc::runtime::Tensor>& inputs);

// The first line of a rank's digest, before its inputs' ("<kFlagsLine>\t<flags>\t"): the
// flags every rank must be given alike too.
inline constexpr char kFlagsLine[] = "run flags";

// The first difference between rank 0's digest `a` and rank `rank`'s `b` ("" when none),
// for a message.
std::string DigestDifference(const std::string& a, const std::string& b, int rank);

}  // namespace tpc::tp_run
