// A read-only memory map of a whole file. Weights are views on these, so importing a
// large model touches pages only when a later stage reads them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tpc {

class MappedFile {
 public:
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& path);
  // Bytes already in memory (a model handed over from Python), owned by the result and
  // named `name` in errors; always intact.
  static std::shared_ptr<const MappedFile> FromBytes(std::string bytes, std::string name);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // OK while the file is still where it was, at least as large as when mapped; an
  // error naming it once it was deleted or truncated (its pages may be gone).
  absl::Status CheckIntact() const;
  // Gives back the resident pages wholly inside [p, p + bytes) of the mapping (a weight
  // a kernel has copied into its own layout): they stop counting in this process's
  // resident memory and are read again from the file if touched. The bytes never
  // change (the mapping is private and read-only). Nothing for bytes outside the
  // mapping or not mapped (FromBytes).
  void DropPages(const void* p, size_t bytes) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  std::string owned_;  // FromBytes: the bytes (data_ points into it; nothing mapped)
  bool mapped_ = true;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace tpc
