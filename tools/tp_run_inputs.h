// Every rank of tp-run reads or draws the full inputs itself; they must be the same on
// every rank (the same files, --dim and --seed). Each rank posts a digest of them, and
// rank r's first difference from rank 0's names the input and how it differs.
#pragma once

#include <map>
#include <string>

#include "tpc/runtime/tensor.h"

namespace tpc::tp_run {

// One line per input: name, type and the SHA-256 of its bytes.
std::string InputsDigest(const std::map<std::string, tpc::runtime::Tensor>& inputs);

// The first difference between rank 0's digest `a` and rank `rank`'s `b` ("" when none),
// for a message.
std::string DigestDifference(const std::string& a, const std::string& b, int rank);

}  // namespace tpc::tp_run
