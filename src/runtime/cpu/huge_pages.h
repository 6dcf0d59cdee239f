// Constant inputs a kernel streams whole on every call (a decode step's int4 codes and
// their scales), copied once into anonymous memory on 2 MiB pages. A mapped weights file
// sits on 4 KiB pages: reading 80 MiB of int4 codes from them took 10.4 ms a call on one
// core of the 2-vCPU EPYC, from huge pages 8.0 (bench/nbits_bench.cc --huge: fewer TLB
// misses, prefetchers not stopped at every 4 KiB); a plain sum read 17 GB/s from the file's
// pages and 30 from a huge-page copy.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "absl/functional/function_ref.h"
#include "tpc/runtime/kernel.h"

namespace tpc::runtime::cpu {

// Constants under this size are read where they are.
constexpr int64_t kHugePageCopyBytes = int64_t{256} << 10;

// The bytes a kernel should read for its input `input`: when it is a constant of at least
// kHugePageCopyBytes and the backend keeps kernel states, a copy on huge pages (madvise
// MADV_HUGEPAGE; transparent huge pages in their "madvise" or "always" mode), made at the
// first call that reads that constant in that type (from any node: the executor hands a
// kernel without half-precision loops f32 copies of f16 constants, made at every call)
// and kept by the backend (its kernel states, under the null node: ConstantForm's form of
// the bytes as they are); otherwise, or when the copy cannot be made, the input's own
// bytes. The copy equals the input byte for byte. Copies are cut one after the other (on
// cache lines) from chunks of 64 MiB; a chunk's pages are touched only where a copy lies.
// The mapped original's pages are given back: the process's resident memory holds the copy
// instead.
const void* StreamedConstant(KernelContext& ctx, int input);
// A form of constant inputs that a kernel makes once and reads on every call (MatMulNBits'
// int4 codes rearranged into panels): `bytes` on huge pages (cut as the copies are, on a
// cache line), written by make(out) at the first call of any node reading the same
// constants for `inputs`, in the same types, with the same `form` (which form, and the
// numbers of its layout, positive; make may use ctx's pool), and kept by the backend with
// the copies; the inputs' mapped pages are given back. Null when one of `inputs` is not a
// constant, the backend keeps no kernel states or the memory cannot be had: the caller
// then makes the form itself.
const void* ConstantForm(KernelContext& ctx, std::initializer_list<int> inputs,
                         std::initializer_list<int64_t> form, int64_t bytes,
                         absl::FunctionRef<void(uint8_t* out)> make);
// How many constants `backend` holds copies of (ConstantForm's forms not counted), and how
// many forms.
size_t StreamedConstantCopies(Backend& backend);
size_t ConstantForms(Backend& backend);

}  // namespace tpc::runtime::cpu
