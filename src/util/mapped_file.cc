#include "tpc/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tpc {

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; fstat below
  // then refuses anything but a regular file. It has no effect on a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    return err == ENOENT ? absl::NotFoundError(absl::StrCat(path, ": no such file"))
                         : absl::InvalidArgumentError(
                               absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (only regular files are read as models or data)"));
  }
  size_t size = static_cast<size_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": mmap failed: ", std::strerror(err)));
    }
    data = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

std::shared_ptr<const MappedFile> MappedFile::FromBytes(std::string bytes, std::string name) {
  std::shared_ptr<MappedFile> f(new MappedFile(std::move(name), nullptr, 0));
  f->owned_ = std::move(bytes);
  f->data_ = reinterpret_cast<const uint8_t*>(f->owned_.data());
  f->size_ = f->owned_.size();
  f->mapped_ = false;
  return f;
}

absl::Status MappedFile::CheckIntact() const {
  if (!mapped_) return absl::OkStatus();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": the file vanished while tpc was reading it"));
  }
  if (static_cast<size_t>(st.st_size) < size_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": the file shrank from ", size_,
                                                      " to ", st.st_size,
                                                      " bytes while tpc was reading it"));
  }
  return absl::OkStatus();
}

void MappedFile::DropPages(const void* p, size_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const auto base = reinterpret_cast<uintptr_t>(data_);
  if (!mapped_ || data_ == nullptr || begin < base || bytes > size_ ||
      begin - base > size_ - bytes) {
    return;
  }
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + bytes) / page * page;
  // Advice only: an error (an old kernel) leaves the pages resident, nothing else.
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (mapped_ && data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace tpc
