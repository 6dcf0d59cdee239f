// MatMul by a constant f32 weight through oneDNN (Debian libdnnl-dev) with the weight
// packed once into the layout its GEMM kernels read (format "any", reordered at the
// first run and kept in the backend's kernel states): on a 2-core AVX-512 machine,
// 165-180 GFLOPS per core on GPT-2-small's cold weights against OpenBLAS's ~120 (which
// packs B again on every call). Without oneDNN, PackedMatMul declines and the caller
// uses BLAS.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>

#include "kernels.h"
#include "tpc/ir/tensor.h"
#include "tpc/runtime/backend.h"
#include "tpc/util/mapped_file.h"

#ifdef TPC_HAVE_DNNL
#include <dnnl.hpp>
extern "C" void omp_set_num_threads(int);
#endif

namespace tpc::runtime::cpu {

#ifdef TPC_HAVE_DNNL
namespace {

struct PackedWeight {
  const float* source = nullptr;
  int64_t k = 0, n = 0;
  // The source's bytes, kept alive as long as their packed copy: their address then
  // cannot come back with other bytes, so the address and the shape are enough to know
  // that a node's packed copy is still its weight's (constants never change).
  ir::Tensor source_tensor;
  std::shared_ptr<void> source_owner;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  // A primitive per M, with the scratchpad it needs.
  struct Primitive {
    dnnl::matmul matmul;
    dnnl::memory::desc scratchpad;
  };
  // The weight's columns [col, col + cols), packed on their own: one panel per thread
  // of the pool, so that each thread reads only its part of the weight (a row split
  // would stream the whole weight through every core).
  struct Panel {
    int64_t col = 0, cols = 0;
    dnnl::memory packed;
    std::map<int64_t, Primitive> by_rows;
  };
  std::vector<Panel> panels;
};

// Every primitive takes its scratchpad from the caller: oneDNN's own (a library-wide
// buffer in a build without DNNL_ENABLE_CONCURRENT_EXEC, as Debian's) would be shared by
// the blocks run at once and by ranks running as threads.
dnnl::primitive_attr UserScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A [rows, cols] f32 matrix whose rows are `ld` elements apart.
dnnl::memory::desc Plain(int64_t rows, int64_t cols, int64_t ld) {
  return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32, {ld, 1});
}

// Packs `b` [k, n] (the bytes of `tensor`, or a copy of them that `owner` keeps) into
// `panels` column panels, each in the layout the GEMM for `m` rows picks.
std::shared_ptr<PackedWeight> Pack(const float* b, const ir::Tensor& tensor,
                                   std::shared_ptr<void> owner, int64_t m, int64_t k, int64_t n,
                                   int64_t panels) {
  auto p = std::make_shared<PackedWeight>();
  p->source = b;
  p->k = k;
  p->n = n;
  p->source_tensor = tensor;
  p->source_owner = std::move(owner);
  dnnl::stream stream(p->engine);
  omp_set_num_threads(1);
  const int64_t width = (n / panels + 15) / 16 * 16;  // whole vectors per panel
  for (int64_t col = 0; col < n; col += width) {
    PackedWeight::Panel& panel = p->panels.emplace_back();
    panel.col = col;
    panel.cols = std::min(width, n - col);
    const dnnl::memory::desc any({k, panel.cols}, dnnl::memory::data_type::f32,
                                 dnnl::memory::format_tag::any);
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(Plain(m, k, k), any, Plain(m, panel.cols, n)), UserScratchpad(),
        p->engine);
    dnnl::memory src(Plain(k, panel.cols, n), p->engine, const_cast<float*>(b + col));
    panel.packed = dnnl::memory(pd.weights_desc(), p->engine);
    const dnnl::reorder::primitive_desc rpd(p->engine, src.get_desc(), p->engine,
                                            panel.packed.get_desc(), UserScratchpad());
    dnnl::memory scratch(rpd.scratchpad_desc(), p->engine);
    dnnl::reorder(rpd).execute(
        stream,
        {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, panel.packed}, {DNNL_ARG_SCRATCHPAD, scratch}});
  }
  stream.wait();
  // The GEMM reads only the packed copy from now on: the mapped original's pages need
  // not stay resident beside it (that doubled each rank's resident memory).
  if (tensor.is_mapped() && tensor.data() == reinterpret_cast<const uint8_t*>(b)) {
    tensor.mapped_file()->DropPages(b, static_cast<size_t>(k * n) * sizeof(float));
  }
  return p;
}

}  // namespace

absl::StatusOr<bool> PackedMatMul(KernelContext& ctx, const Tensor& a, const Tensor& b, Tensor* y,
                                  const ColumnsEpilogue* epilogue) {
  Backend::KernelStates* states = ctx.backend().kernel_states();
  const ir::Value* weight = ctx.node().input(1);
  if (states == nullptr || a.dtype() != ir::DType::kF32 || b.dtype() != ir::DType::kF32 ||
      b.rank() != 2 || a.rank() < 2 || weight == nullptr ||
      weight->producer()->kind() != ir::NodeKind::kConstant) {
    return false;
  }
  const int64_t k = b.dim(0), n = b.dim(1);
  if (a.shape().back() != k || k == 0 || n == 0) return false;
  const int64_t m = a.num_elements() / k;
  if (m == 0) return false;
  const float* pb = b.data<float>();
  const ir::Tensor& source = weight->producer()->tensor();
  // The packed copy must keep its source alive (PackedWeight): the constant's own bytes,
  // or a copy the executor owns.
  if (reinterpret_cast<const uint8_t*>(pb) != source.data() && b.owner() == nullptr) return false;
  const int64_t threads = ctx.pool().size();
  // One panel per thread where each gets a few vectors of columns.
  const int64_t panels = n >= 64 * threads ? threads : 1;
  // Below ~2^18 multiply-adds (as ParallelGemm2D) the panels run on this thread: a
  // hand-off would cost more than it saves.
  const bool split = m * n * k >= (int64_t{1} << 18);
  try {
    std::shared_ptr<void>& slot = (*states)[&ctx.node()];
    auto packed = std::static_pointer_cast<PackedWeight>(slot);
    if (!packed || packed->source != pb || packed->k != k || packed->n != n ||
        static_cast<int64_t>(packed->panels.size()) > panels) {
      packed = Pack(pb, source, b.owner(), m, k, n, panels);
      slot = packed;
    }
    // The primitives for m rows, made here (one thread) before the parallel part.
    std::vector<const PackedWeight::Primitive*> primitives;
    for (PackedWeight::Panel& panel : packed->panels) {
      auto it = panel.by_rows.find(m);
      if (it == panel.by_rows.end()) {
        const dnnl::matmul::primitive_desc pd(
            dnnl::matmul::desc(Plain(m, k, k), panel.packed.get_desc(), Plain(m, panel.cols, n)),
            UserScratchpad(), packed->engine);
        it = panel.by_rows
                 .emplace(m, PackedWeight::Primitive{dnnl::matmul(pd), pd.scratchpad_desc()})
                 .first;
      }
      primitives.push_back(&it->second);
    }
    // Each panel a single-threaded oneDNN call on a thread of the pool: oneDNN's OpenMP
    // team is never started, so no spinning OpenMP thread competes with the pool's for
    // the cores.
    const float* pa = a.data<float>();
    float* py = y->data<float>();
    std::atomic<bool> failed{false};
    const std::function<void(int64_t)> run_panel = [&](int64_t part) {
      omp_set_num_threads(1);
      const PackedWeight::Panel& panel = packed->panels[static_cast<size_t>(part)];
      const PackedWeight::Primitive& p = *primitives[static_cast<size_t>(part)];
      try {
        dnnl::stream stream(packed->engine);
        dnnl::memory am(Plain(m, k, k), packed->engine, const_cast<float*>(pa));
        dnnl::memory cm(Plain(m, panel.cols, n), packed->engine, py + panel.col);
        dnnl::memory scratch(p.scratchpad, packed->engine);  // this block's own
        p.matmul.execute(stream, {{DNNL_ARG_SRC, am},
                                  {DNNL_ARG_WEIGHTS, panel.packed},
                                  {DNNL_ARG_DST, cm},
                                  {DNNL_ARG_SCRATCHPAD, scratch}});
        stream.wait();
        if (epilogue != nullptr) (*epilogue)(panel.col, panel.cols);
      } catch (const dnnl::error&) {
        failed = true;
      }
    };
    const auto count = static_cast<int64_t>(packed->panels.size());
    if (split) {
      ctx.pool().ParallelParts(count, run_panel);
    } else {
      for (int64_t part = 0; part < count; ++part) run_panel(part);
    }
    if (failed) return false;
    return true;
  } catch (const dnnl::error&) {
    // A shape or layout oneDNN declines: BLAS does it.
    return false;
  }
}

#else

absl::StatusOr<bool> PackedMatMul(KernelContext&, const Tensor&, const Tensor&, Tensor*,
                                  const ColumnsEpilogue*) {
  return false;
}

#endif

}  // namespace tpc::runtime::cpu
