// Vectors on cache lines for the CPU kernels' scratch: a 16-float vector load that
// straddles two lines costs two (RowColumnDots ran at 45 against 75 GMAC/s a core on the
// Xeon, K = 2048, until its operands were aligned).
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace tpc::runtime::cpu {

template <typename T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <typename U>
  explicit LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kLine)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kLine); }
  // Elements default-initialized (not zeroed): every such buffer is written before it is
  // read, and a tile's 256 KiB of zeros per pass showed in MatMulNBits' profile.
  template <typename U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  bool operator==(const LineAligned&) const = default;
  static constexpr std::align_val_t kLine{64};
};

// A vector whose data starts on a cache line, its elements not zeroed by resize().
template <typename T>
using AlignedVector = std::vector<T, LineAligned<T>>;

}  // namespace tpc::runtime::cpu
