#include "huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "tpc/ir/tensor.h"
#include "tpc/runtime/backend.h"
#include "tpc/util/mapped_file.h"

namespace tpc::runtime::cpu {
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;

constexpr size_t kChunkBytes = size_t{64} << 20;

// The backend's copies, by the address of the bytes copied (a constant read by several
// nodes is copied once), and the chunk they are cut from while it has room. Each copy keeps
// its constant alive: its bytes then cannot come back at that address as another's.
struct Copies {
  struct Copy {
    Tensor read;        // the bytes copied as the kernel read them (an owned copy kept too)
    ir::Tensor source;  // their constant (a mapped file kept mapped)
    size_t bytes = 0;
    const void* data = nullptr;
  };
  std::map<const void*, Copy> by_source;
  // ConstantForm's forms, by the bytes of their inputs and the form.
  struct Form {
    std::vector<Tensor> read;
    std::vector<ir::Tensor> sources;
    const void* data = nullptr;
  };
  std::map<std::pair<std::vector<const void*>, int>, Form> forms;
  std::vector<std::shared_ptr<void>> chunks;
  uint8_t* next = nullptr;
  size_t left = 0;
};

// `bytes` of anonymous memory on 2 MiB boundaries, advised onto huge pages; null when it
// cannot be allocated.
std::shared_ptr<void> HugeBuffer(size_t bytes) {
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = nullptr;
  if (posix_memalign(&p, kHugePageBytes, rounded) != 0) return nullptr;
  // Advice only: without transparent huge pages the copy is on 4 KiB pages, as the
  // original was.
  (void)madvise(p, rounded, MADV_HUGEPAGE);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

// Room for `bytes` on a cache line: in the last chunk, or a new one; null when none can be
// allocated.
uint8_t* Carve(Copies& copies, size_t bytes) {
  const size_t lines = (bytes + 63) / 64 * 64;
  if (copies.left < lines) {
    const size_t size =
        std::max(kChunkBytes, (lines + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
    std::shared_ptr<void> fresh = HugeBuffer(size);
    if (fresh == nullptr) return nullptr;
    copies.next = static_cast<uint8_t*>(fresh.get());
    copies.left = size;
    copies.chunks.push_back(std::move(fresh));
  }
  uint8_t* p = copies.next;
  copies.next += lines;
  copies.left -= lines;
  return p;
}

// The backend's copies (its kernel states' entry under the null node); null without states.
Copies* CopiesOf(Backend& backend) {
  Backend::KernelStates* states = backend.kernel_states();
  if (states == nullptr) return nullptr;
  std::shared_ptr<void>& slot = (*states)[nullptr];
  if (!slot) slot = std::make_shared<Copies>();
  return static_cast<Copies*>(slot.get());
}

}  // namespace

const void* StreamedConstant(KernelContext& ctx, int input) {
  const Tensor& t = ctx.input(input);
  const void* own = t.raw();
  const ir::Value* value = ctx.node().input(input);
  const size_t bytes = static_cast<size_t>(t.nbytes());
  if (value == nullptr || value->producer() == nullptr ||
      value->producer()->kind() != ir::NodeKind::kConstant ||
      bytes < static_cast<size_t>(kHugePageCopyBytes)) {
    return own;
  }
  Copies* copies = CopiesOf(ctx.backend());
  if (copies == nullptr) return own;
  auto found = copies->by_source.find(own);
  if (found != copies->by_source.end() && found->second.bytes == bytes) return found->second.data;
  uint8_t* data = Carve(*copies, bytes);
  if (data == nullptr) return own;
  const ir::Tensor& source = value->producer()->tensor();
  const bool mapped = source.is_mapped() && source.data() == own;
  // The pool's threads copy a part each (2 MiB at a time), the mapped source pages of each
  // part read in one call rather than a fault each (MADV_POPULATE_READ, Linux 5.14;
  // advice): the first run of the bench model (84 MiB) took 30 ms more than the next.
  const auto* from = static_cast<const uint8_t*>(own);
  const int64_t parts = static_cast<int64_t>((bytes + kHugePageBytes - 1) / kHugePageBytes);
  ctx.pool().ParallelFor(parts, 1, [&](int64_t lo, int64_t hi) {
    const size_t begin = static_cast<size_t>(lo) * kHugePageBytes;
    const size_t end = std::min(bytes, static_cast<size_t>(hi) * kHugePageBytes);
#ifdef MADV_POPULATE_READ
    if (mapped) {
      const auto page = static_cast<uintptr_t>(4096);
      const auto first = reinterpret_cast<uintptr_t>(from + begin) / page * page;
      (void)madvise(reinterpret_cast<void*>(first), reinterpret_cast<uintptr_t>(from + end) - first,
                    MADV_POPULATE_READ);
    }
#endif
    std::memcpy(data + begin, from + begin, end - begin);
  });
  if (mapped) source.mapped_file()->DropPages(own, bytes);
  copies->by_source[own] = {t, source, bytes, data};
  return data;
}

const void* ConstantForm(KernelContext& ctx, std::initializer_list<int> inputs, int form,
                         int64_t bytes, absl::FunctionRef<void(uint8_t* out)> make) {
  std::pair<std::vector<const void*>, int> key{{}, form};
  Copies::Form made;
  for (int input : inputs) {
    const ir::Value* value = ctx.node().input(input);
    if (value == nullptr || value->producer() == nullptr ||
        value->producer()->kind() != ir::NodeKind::kConstant) {
      return nullptr;
    }
    key.first.push_back(ctx.input(input).raw());
    made.read.push_back(ctx.input(input));
    made.sources.push_back(value->producer()->tensor());
  }
  Copies* copies = CopiesOf(ctx.backend());
  if (copies == nullptr) return nullptr;
  auto found = copies->forms.find(key);
  if (found != copies->forms.end()) return found->second.data;
  uint8_t* data = Carve(*copies, static_cast<size_t>(bytes));
  if (data == nullptr) return nullptr;
  make(data);
  made.data = data;
  for (size_t i = 0; i < made.read.size(); ++i) {
    const ir::Tensor& source = made.sources[i];
    if (source.is_mapped() && source.data() == made.read[i].raw()) {
      source.mapped_file()->DropPages(made.read[i].raw(),
                                      static_cast<size_t>(made.read[i].nbytes()));
    }
  }
  copies->forms.emplace(std::move(key), std::move(made));
  return data;
}

size_t StreamedConstantCopies(Backend& backend) {
  Copies* copies = CopiesOf(backend);
  return copies != nullptr ? copies->by_source.size() : 0;
}

size_t ConstantForms(Backend& backend) {
  Copies* copies = CopiesOf(backend);
  return copies != nullptr ? copies->forms.size() : 0;
}

}  // namespace tpc::runtime::cpu
