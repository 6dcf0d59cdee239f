// Return-if-error helpers for absl::Status / absl::StatusOr, as XLA and Abseil users write them.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TPC_CONCAT_INNER_(a, b) a##b
#define TPC_CONCAT_(a, b) TPC_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the current function if it is not OK.
#define TPC_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status tpc_status_ = (expr);       \
    if (!tpc_status_.ok()) return tpc_status_; \
  } while (false)

// `TPC_ASSIGN_OR_RETURN(auto x, MakeX());` — declares/assigns from a StatusOr or returns its error.
#define TPC_ASSIGN_OR_RETURN(lhs, expr) \
  TPC_ASSIGN_OR_RETURN_IMPL_(TPC_CONCAT_(tpc_statusor_, __LINE__), lhs, expr)
#define TPC_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)    \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

// Internal invariant; a failure is a bug in tpc, not in the user's input.
#define TPC_CHECK(cond)                                                   \
  do {                                                                    \
    if (!(cond)) ::tpc::internal::CheckFailed(__FILE__, __LINE__, #cond); \
  } while (false)

namespace tpc::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}  // namespace tpc::internal
