#include "huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "tpc/ir/tensor.h"
#include "tpc/runtime/backend.h"
#include "tpc/util/mapped_file.h"

namespace tpc::runtime::cpu {
namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;

constexpr size_t kChunkBytes = size_t{64} << 20;

// What a kernel reads for a constant input: the constant's bytes, in the type the kernel
// reads them (the executor hands a kernel without half-precision support f32 copies of f16
// constants, made afresh at every call: their addresses say nothing).
using ConstantKey = std::pair<const void*, ir::DType>;

// The backend's forms, by the constants of their inputs, the form's name and its size
// (StreamedConstant's copies are the form kCopyForm), and the chunk they are cut from
// while it has room. Each form keeps its constants alive: their bytes then cannot come
// back at that address as another's.
struct Copies {
  struct Form {
    std::vector<ir::Tensor> sources;
    const void* data = nullptr;
  };
  std::map<std::tuple<std::vector<ConstantKey>, std::vector<int64_t>, int64_t>, Form> forms;
  std::vector<std::shared_ptr<void>> chunks;
  uint8_t* next = nullptr;
  size_t left = 0;
};

// StreamedConstant's form: the bytes as they are (other kernels' forms are named by
// positive numbers).
constexpr int64_t kCopyForm = -1;

bool IsCopy(const std::vector<int64_t>& form) { return form.size() == 1 && form[0] == kCopyForm; }

// The constant behind input `input` of ctx's node; null when the input is not a constant.
const ir::Tensor* ConstantOf(const KernelContext& ctx, int input) {
  const ir::Value* value = ctx.node().input(input);
  if (value == nullptr || value->producer() == nullptr ||
      value->producer()->kind() != ir::NodeKind::kConstant) {
    return nullptr;
  }
  return &value->producer()->tensor();
}

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
  const size_t bytes = static_cast<size_t>(t.nbytes());
  if (bytes < static_cast<size_t>(kHugePageCopyBytes)) return t.raw();
  const ir::Tensor* constant = ConstantOf(ctx, input);
  const auto* from = static_cast<const uint8_t*>(t.raw());
  const bool mapped = constant != nullptr && constant->is_mapped() && constant->data() == from;
  // The pool's threads copy a part each (2 MiB at a time), the mapped source pages of each
  // part read in one call rather than a fault each (MADV_POPULATE_READ, Linux 5.14;
  // advice): the first run of the bench model (84 MiB) took 30 ms more than the next.
  const void* copy =
      ConstantForm(ctx, {input}, {kCopyForm}, static_cast<int64_t>(bytes), [&](uint8_t* data) {
        const int64_t parts = static_cast<int64_t>((bytes + kHugePageBytes - 1) / kHugePageBytes);
        ctx.pool().ParallelFor(parts, 1, [&](int64_t lo, int64_t hi) {
          const size_t begin = static_cast<size_t>(lo) * kHugePageBytes;
          const size_t end = std::min(bytes, static_cast<size_t>(hi) * kHugePageBytes);
#ifdef MADV_POPULATE_READ
          if (mapped) {
            const auto page = static_cast<uintptr_t>(4096);
            const auto first = reinterpret_cast<uintptr_t>(from + begin) / page * page;
            (void)madvise(reinterpret_cast<void*>(first),
                          reinterpret_cast<uintptr_t>(from + end) - first, MADV_POPULATE_READ);
          }
#endif
          std::memcpy(data + begin, from + begin, end - begin);
        });
      });
  return copy != nullptr ? copy : t.raw();
}

const void* ConstantForm(KernelContext& ctx, std::initializer_list<int> inputs,
                         std::initializer_list<int64_t> form, int64_t bytes,
                         absl::FunctionRef<void(uint8_t* out)> make) {
  // (the size too: a form of the same constants in another layout is another form)
  std::tuple<std::vector<ConstantKey>, std::vector<int64_t>, int64_t> key{{}, form, bytes};
  std::vector<const ir::Tensor*> constants;
  for (int input : inputs) {
    const ir::Tensor* constant = ConstantOf(ctx, input);
    if (constant == nullptr) return nullptr;
    std::get<0>(key).emplace_back(constant->data(), ctx.input(input).dtype());
    constants.push_back(constant);
  }
  Copies* copies = CopiesOf(ctx.backend());
  if (copies == nullptr) return nullptr;
  auto found = copies->forms.find(key);
  if (found != copies->forms.end()) return found->second.data;  // (every call but the first)
  uint8_t* data = Carve(*copies, static_cast<size_t>(bytes));
  if (data == nullptr) return nullptr;
  make(data);
  Copies::Form made;
  made.data = data;
  size_t i = 0;
  for (int input : inputs) {  // the constants kept; the mapped pages the kernel would have read
    const ir::Tensor& source = *constants[i++];
    const Tensor& read = ctx.input(input);
    if (source.is_mapped() && source.data() == read.raw()) {
      source.mapped_file()->DropPages(read.raw(), static_cast<size_t>(read.nbytes()));
    }
    made.sources.push_back(source);
  }
  copies->forms.emplace(std::move(key), std::move(made));
  return data;
}

// The backend's forms that are copies (or, `copies` false, that are not).
size_t CountForms(Backend& backend, bool copies) {
  Copies* all = CopiesOf(backend);
  if (all == nullptr) return 0;
  size_t count = 0;
  for (const auto& [key, form] : all->forms) count += IsCopy(std::get<1>(key)) == copies;
  return count;
}

size_t StreamedConstantCopies(Backend& backend) { return CountForms(backend, true); }

size_t ConstantForms(Backend& backend) { return CountForms(backend, false); }

}  // namespace tpc::runtime::cpu
