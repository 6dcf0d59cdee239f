// Index arithmetic shared by the CPU-side tests and the CUDA kernels: a linear index over
// an output shape mapped to the offset of an element in a strided view (broadcasting,
// transposes, slices, concatenation are all strided views).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tpc/util/host_device.h"

namespace tpc::runtime::math {

inline constexpr int kMaxDims = 8;

// a / b for a >= 0, b > 0: in 32 bits when both fit (a GPU divides 64-bit integers in
// software, several times slower).
TPC_HOST_DEVICE inline int64_t DivIndex(int64_t a, int64_t b) {
  if (((a | b) >> 32) == 0) return static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
  return a / b;
}

// A view: `dims` (of the iteration space) and the element stride of each dim in memory,
// plus a base offset. Passed by value to kernels.
struct StridedView {
  int rank = 0;
  int64_t offset = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  // Offset of element `linear` of the iteration space (row-major over `dims`). What is
  // left after the inner dims is the outermost index (no division): a view simplified
  // to one dim costs a multiply.
  TPC_HOST_DEVICE int64_t At(int64_t linear) const {
    int64_t off = offset;
    for (int d = rank - 1; d > 0; --d) {
      const int64_t q = DivIndex(linear, dims[d]);
      off += (linear - q * dims[d]) * strides[d];
      linear = q;
    }
    return rank > 0 ? off + linear * strides[0] : off;
  }
};

// Row-major strides of `shape`.
inline std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    s[static_cast<size_t>(d)] = s[static_cast<size_t>(d) + 1] * shape[static_cast<size_t>(d) + 1];
  }
  return s;
}

// A view over `out_shape` of a tensor of shape `in_shape` broadcast to it (numpy rules,
// `in_shape` aligned right; the caller checked that the shapes broadcast). Rank must be
// at most kMaxDims.
inline StridedView BroadcastView(const std::vector<int64_t>& in_shape,
                                 const std::vector<int64_t>& out_shape) {
  StridedView v;
  v.rank = static_cast<int>(out_shape.size());
  const std::vector<int64_t> in_strides = ContiguousStrides(in_shape);
  const size_t lead = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < out_shape.size(); ++d) {
    v.dims[d] = out_shape[d];
    const bool has = d >= lead && in_shape[d - lead] != 1;
    v.strides[d] = has ? in_strides[d - lead] : 0;
  }
  return v;
}

// A view over `dims` whose dim d steps `strides[d]` elements (the first dims.size() of
// them are read); rank at most kMaxDims. The attention core's mask rows: dims [batch..,
// s] with the mask's broadcast strides over them.
inline StridedView ViewOf(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  StridedView v;
  v.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    v.dims[d] = dims[d];
    v.strides[d] = strides[d];
  }
  return v;
}

// The contiguous view of `shape` itself.
inline StridedView ContiguousView(const std::vector<int64_t>& shape) {
  return BroadcastView(shape, shape);
}

// Drops dims of size 1 and merges neighbours that are contiguous in every view, so that
// kernels do fewer divisions (views share the same dims).
inline void Simplify(std::vector<StridedView*> views) {
  if (views.empty()) return;
  const int rank = views[0]->rank;
  int out = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t n = views[0]->dims[d];
    if (n == 1) continue;
    bool merge = out > 0;
    for (StridedView* v : views) {
      merge = merge && v->strides[out - 1] == v->strides[d] * n;
    }
    for (StridedView* v : views) {
      if (merge) {
        v->dims[out - 1] *= n;
        v->strides[out - 1] = v->strides[d];
      } else {
        v->dims[out] = n;
        v->strides[out] = v->strides[d];
      }
    }
    if (!merge) ++out;
  }
  for (StridedView* v : views) v->rank = out;
}

// DepthToSpace and SpaceToDepth as one strided copy between the space side [n, cs, hd·b,
// wd·b] and the depth side [n, cs·b·b, hd, wd]: both viewed over the dims [n, cs, hd, b,
// wd, b] (the space side's order, contiguous there). A depth channel is (bi·b + bj)·cs + c
// (DCR, and SpaceToDepth), or (c·b + bi)·b + bj (DepthToSpace's CRD).
inline void BlockMoveViews(int64_t n, int64_t cs, int64_t hd, int64_t wd, int64_t b, bool crd,
                           StridedView* space, StridedView* depth) {
  const int64_t dims[6] = {n, cs, hd, b, wd, b};
  const int64_t plane = hd * wd;  // one depth channel
  const int64_t space_strides[6] = {
      cs * hd * b * wd * b, hd * b * wd * b, b * wd * b, wd * b, b, 1};
  const int64_t depth_strides[6] = {
      cs * b * b * plane,      crd ? b * b * plane : plane, wd, crd ? b * plane : b * cs * plane, 1,
      crd ? plane : cs * plane};
  *space = StridedView();
  *depth = StridedView();
  space->rank = depth->rank = 6;
  for (int d = 0; d < 6; ++d) {
    space->dims[d] = depth->dims[d] = dims[d];
    space->strides[d] = space_strides[d];
    depth->strides[d] = depth_strides[d];
  }
}

// Tile as one strided copy: input dim d of size n repeated r times is two dims, [r, n],
// read with strides [0, its stride] and written with [n · the output's stride, the
// output's stride] (the output contiguous, dims n · r). Dims of size 1 are left out; false
// when more than kMaxDims remain.
inline bool TileViews(const std::vector<int64_t>& in, const std::vector<int64_t>& repeats,
                      StridedView* src, StridedView* dst) {
  std::vector<int64_t> dims, s_strides, d_strides;
  int64_t in_stride = 1, out_stride = 1;
  for (size_t d = in.size(); d-- > 0;) {  // innermost first, reversed below
    if (in[d] != 1) {
      dims.push_back(in[d]);
      s_strides.push_back(in_stride);
      d_strides.push_back(out_stride);
    }
    if (repeats[d] != 1) {
      dims.push_back(repeats[d]);
      s_strides.push_back(0);
      d_strides.push_back(out_stride * in[d]);
    }
    in_stride *= in[d];
    out_stride *= in[d] * repeats[d];
  }
  if (dims.size() > static_cast<size_t>(kMaxDims)) return false;
  *src = StridedView();
  *dst = StridedView();
  src->rank = dst->rank = static_cast<int>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    const size_t from = dims.size() - 1 - k;
    src->dims[k] = dst->dims[k] = dims[from];
    src->strides[k] = s_strides[from];
    dst->strides[k] = d_strides[from];
  }
  return true;
}

// CenterCropPad as one copy: y (dims `out`) reads x (dims `in`) at y's coordinates plus
// `shift` per dim (a crop shifts forward, a pad backward); the part of y that lands inside
// x, as views of x and y over its dims (rank ≤ kMaxDims; the rest of y is zero). False
// when no element lands inside.
inline bool CropPadViews(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                         const std::vector<int64_t>& shift, StridedView* src, StridedView* dst) {
  const std::vector<int64_t> si = ContiguousStrides(in), so = ContiguousStrides(out);
  *src = StridedView();
  *dst = StridedView();
  src->rank = dst->rank = static_cast<int>(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    const int64_t lo = shift[d] < 0 ? -shift[d] : 0;
    const int64_t hi = out[d] < in[d] - shift[d] ? out[d] : in[d] - shift[d];
    if (hi <= lo) return false;
    src->dims[d] = dst->dims[d] = hi - lo;
    src->strides[d] = si[d];
    dst->strides[d] = so[d];
    src->offset += (lo + shift[d]) * si[d];
    dst->offset += lo * so[d];
  }
  return true;
}

// ReverseSequence's reversed steps of one batch entry: the first `len` time steps of entry
// b of x (dims `shape`; batch and time axes 0 and 1, either way) read last to first into
// y's first `len` steps, as views over [len, inner] (inner: the dims after the first two).
inline void ReversedStepsViews(const std::vector<int64_t>& shape, int batch_axis, int64_t b,
                               int64_t len, StridedView* src, StridedView* dst) {
  const std::vector<int64_t> st = ContiguousStrides(shape);
  const int64_t sb = st[static_cast<size_t>(batch_axis)], stime = st[1 - batch_axis];
  const int64_t inner = st[1];
  *src = StridedView();
  *dst = StridedView();
  src->rank = dst->rank = 2;
  src->dims[0] = dst->dims[0] = len;
  src->dims[1] = dst->dims[1] = inner;
  src->strides[0] = -stime;
  dst->strides[0] = stime;
  src->strides[1] = dst->strides[1] = 1;
  src->offset = b * sb + (len - 1) * stime;
  dst->offset = b * sb;
}

// A strided copy whose innermost dim is contiguous in both views, moved in chunks of
// `chunk` bytes (one 16-, 8- or 4-byte load and store per thread instead of one per
// element, and the index arithmetic once per chunk): element i of the chunked copy is
// chunk i % chunks of row i / chunks, the rows addressed by views over the outer dims in
// units of chunks. Made by ChunkRows.
struct ChunkedCopy {
  StridedView src, dst;  // the rows: the outer dims, strides and offsets in chunks
  int64_t chunks = 0;    // per row
  int64_t rows = 0;
};

// `vs` → `vd` (views over the same dims, elements of `elem_bytes`) in chunks of `chunk`
// bytes from `src` to `dst`, when each view's innermost stride is 1, a row's bytes are
// whole chunks, and every row starts on a chunk boundary (pointer, offset and outer
// strides); else nothing.
inline std::optional<ChunkedCopy> ChunkRows(int elem_bytes, int chunk, const void* src,
                                            const StridedView& vs, const void* dst,
                                            const StridedView& vd) {
  const int r = vs.rank;
  if (r < 1 || vd.rank != r || chunk <= elem_bytes || chunk % elem_bytes != 0 ||
      vs.strides[r - 1] != 1 || vd.strides[r - 1] != 1 || vs.dims[r - 1] != vd.dims[r - 1]) {
    return std::nullopt;
  }
  const int64_t eb = elem_bytes, per = chunk / elem_bytes;
  auto aligned = [&](int64_t elements) { return (elements * eb) % chunk == 0; };
  if (!aligned(vs.dims[r - 1]) || !aligned(vs.offset) || !aligned(vd.offset) ||
      reinterpret_cast<uintptr_t>(src) % static_cast<uintptr_t>(chunk) != 0 ||
      reinterpret_cast<uintptr_t>(dst) % static_cast<uintptr_t>(chunk) != 0) {
    return std::nullopt;
  }
  ChunkedCopy c;
  c.chunks = vs.dims[r - 1] / per;
  c.rows = 1;
  c.src.rank = c.dst.rank = r - 1;
  c.src.offset = vs.offset / per;
  c.dst.offset = vd.offset / per;
  for (int d = 0; d + 1 < r; ++d) {
    if (vs.dims[d] != vd.dims[d] || !aligned(vs.strides[d]) || !aligned(vd.strides[d])) {
      return std::nullopt;
    }
    c.src.dims[d] = c.dst.dims[d] = vs.dims[d];
    c.src.strides[d] = vs.strides[d] / per;
    c.dst.strides[d] = vd.strides[d] / per;
    c.rows *= vs.dims[d];
  }
  return c;
}

// `chunk` bytes moved as one value (a 16-byte one is one vector load and store).
template <int Bytes>
struct alignas(Bytes) Chunk {
  uint32_t words[Bytes / 4];
};

// Element i of a chunked copy: chunk i % chunks of row i / chunks.
template <typename C>
TPC_HOST_DEVICE inline void CopyChunkElement(const C* src, const StridedView& rows_src, C* dst,
                                             const StridedView& rows_dst, int64_t chunks,
                                             int64_t i) {
  const int64_t r = DivIndex(i, chunks);
  const int64_t k = i - r * chunks;
  dst[rows_dst.At(r) + k] = src[rows_src.At(r) + k];
}

}  // namespace tpc::runtime::math
