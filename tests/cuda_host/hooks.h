// What cuda_host's launches and its CUDA runtime (runtime.cc, compiled against the CUDA
// toolkit's own headers) share, in types both sides have: where launches go, and the
// launches' last error.
#pragma once

#include <functional>
#include <string>

struct CUstream_st;

namespace cuda_host {

// Where launches go: `submit(stream, work)` runs `work` now or later, in stream order. By
// default, now; runtime.cc installs its streams (a stream being captured records it).
using Submitter = void (*)(CUstream_st* stream, std::function<void()> work);
void SetSubmitter(Submitter submit);
// The last launch's error as the runtime's number (0: none), cleared; and in words.
int TakeLastErrorCode();
const std::string& LastError();
// What the kernels' cudaGetLastError() returns: by default TakeLastErrorCode(); runtime.cc
// installs its own, which also returns the runtime calls' errors, as the real one does.
using ErrorSource = int (*)();
void SetErrorSource(ErrorSource source);
int LastErrorForKernels();

}  // namespace cuda_host
