// The boundary between the libraries tpc uses, some of which throw (the standard library's
// filesystem and allocation, libonnx, protobuf's parsers), and tpc, whose errors are
// absl::Status: each stage's entry point runs its work through CatchExceptions so that an
// exception becomes an error naming the stage, never an abort.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpc {

// f() (returning absl::Status or absl::StatusOr<T>), with any exception it throws turned
// into an error: out of memory as ResourceExhausted, anything else as Internal.
template <typename F>
auto CatchExceptions(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": out of memory"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, ": ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(where, ": unknown exception"));
  }
}

}  // namespace tpc
