// cuda_host's stand-in for the CUDA toolkit's WMMA header (tests/cuda_host): a fragment
// holds its whole tile in every lane, in f32 (the products of f16/bf16 are exact in f32;
// the sums are f32, as the tensor cores' accumulation). Each *_sync call is a warp
// collective: every lane must reach it (a warp barrier). It orders no memory: a load
// reads the tile before the barrier (before the other lanes may have arrived), and a store
// writes only the calling lane's share of the tile (elements lane, lane + 32, ...) after it
// (the other lanes may have gone on), so that a missing __syncwarp between a WMMA load or
// store and other lanes' plain accesses shows, as CUDA requires one there.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../cuda_host.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "tpc/util/half.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
inline float ToFloat(float v) { return v; }
inline float ToFloat(__half v) { return tpc::HalfToFloat(v.x); }
inline float ToFloat(__nv_bfloat16 v) { return tpc::BFloat16ToFloat(v.x); }

template <typename Use, int M, int N, int K>
struct Shape;
template <int M, int N, int K>
struct Shape<matrix_a, M, N, K> {
  static constexpr int kRows = M, kCols = K;
};
template <int M, int N, int K>
struct Shape<matrix_b, M, N, K> {
  static constexpr int kRows = K, kCols = N;
};
template <int M, int N, int K>
struct Shape<accumulator, M, N, K> {
  static constexpr int kRows = M, kCols = N;
};
// What load_matrix_sync and store_matrix_sync require: a 256-bit aligned pointer and a
// leading dimension of a multiple of 16 bytes.
template <typename T>
void CheckOperand(const T* p, unsigned ldm, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) ::cuda_host::Invalid(what);
  if (ldm * sizeof(T) % 16 != 0) ::cuda_host::Invalid(what);
}
}  // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int kRows = detail::Shape<Use, M, N, K>::kRows;
  static constexpr int kCols = detail::Shape<Use, M, N, K>::kCols;
  float v[kRows][kCols];
};

template <typename Use, int M, int N, int K, typename T, typename L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f, float value) {
  for (auto& row : f.v)
    for (float& e : row) e = value;
}

// A matrix_a or matrix_b tile from memory in the fragment's layout.
template <typename Use, int M, int N, int K, typename T, typename L>
void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const T* p, unsigned ldm) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator load names its layout");
  static_assert(std::is_same_v<L, row_major> || std::is_same_v<L, col_major>,
                "a matrix_a or matrix_b fragment names its layout");
  detail::CheckOperand(p, ldm, "wmma::load_matrix_sync of a misaligned tile or leading dimension");
  using F = fragment<Use, M, N, K, T, L>;
  for (int r = 0; r < F::kRows; ++r)
    for (int c = 0; c < F::kCols; ++c)
      f.v[r][c] = detail::ToFloat(std::is_same_v<L, row_major> ? p[r * ldm + c] : p[c * ldm + r]);
  ::cuda_host::WarpBarrier("wmma::load_matrix_sync");
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm,
                      layout_t layout) {
  detail::CheckOperand(p, ldm, "wmma::load_matrix_sync of a misaligned tile or leading dimension");
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      f.v[r][c] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
  ::cuda_host::WarpBarrier("wmma::load_matrix_sync");
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm,
                       layout_t layout) {
  detail::CheckOperand(p, ldm, "wmma::store_matrix_sync of a misaligned tile or leading dimension");
  ::cuda_host::WarpBarrier("wmma::store_matrix_sync");
  for (int i = ::cuda_host::Lane(); i < M * N; i += 32) {
    const int r = i / N, c = i % N;
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.v[r][c];
  }
}

template <int M, int N, int K, typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b,
              const fragment<accumulator, M, N, K, float>& c) {
  ::cuda_host::WarpBarrier("wmma::mma_sync");
  float out[M][N];
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float s = c.v[i][j];
      for (int k = 0; k < K; ++k) s += a.v[i][k] * b.v[k][j];
      out[i][j] = s;
    }
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) d.v[i][j] = out[i][j];
}

}  // namespace nvcuda::wmma
