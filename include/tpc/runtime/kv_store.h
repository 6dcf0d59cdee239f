// The key-value store the ranks of a multi-process run bootstrap through: rank 0 (or the
// tp-run launcher) hosts it, every rank connects (the model of torch's TCPStore). The
// communicators exchange their addresses through it (Gloo's rendezvous, NCCL's unique
// id), and tp-run uses it to agree on validated inputs, report a failed rank and collect
// each rank's statistics.
//
// Keys are written once or counted (Add); values are bytes. Every call that waits takes
// a timeout, and a lost connection is an error, never a hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpc::runtime {

// The key a failed rank writes (first writer wins) so that every other rank stops: its
// value is EncodeRankStatus(rank, reason), rank -1 for the launcher.
inline constexpr char kAbortKey[] = "abort";

// "RANK\nCODE\nmessage" and back. A value not in that form decodes to an Unknown error
// carrying the text, with rank -1.
std::string EncodeRankStatus(int rank, const absl::Status& status);
absl::Status DecodeRankStatus(const std::string& text, int* rank);
// "rank R failed: message" (or the bare message for rank -1), for reports.
std::string DescribeRankStatus(const std::string& text);
// `status` of rank `rank` as its peers report it: "rank R failed: message", its code
// kept. One wording whichever way a peer learns of it (the store's abort key, a step
// the ranks agree on).
absl::Status RankFailed(int rank, const absl::Status& status);

class KeyValueStore;

// Sets kAbortKey to EncodeRankStatus(rank, reason) unless a failure is already there (the
// first writer's reason stands: of ranks failing at once, one claim wins); true when this
// call set it. A store error is ignored (the caller is failing anyway).
bool SetAbortOnce(KeyValueStore& store, int rank, const absl::Status& reason);

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  // Sets `key` to `value` (replacing an earlier value) and wakes its waiters.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting up to `timeout` for it to be set. DeadlineExceeded
  // names the key.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          std::chrono::milliseconds timeout) = 0;
  // Waits up to `timeout` until every key is set. DeadlineExceeded names the keys
  // still missing.
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            std::chrono::milliseconds timeout) = 0;
  // Adds `delta` to the integer at `key` (0 when unset) and returns the new value.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // Whether `key` is set, without waiting.
  virtual absl::StatusOr<bool> Check(const std::string& key) = 0;
};

}  // namespace tpc::runtime
