// MappedFile::DropPages: the dropped pages leave this process's resident set and read
// back unchanged; bytes that are not a mapping of the file are never touched.
#include "tpc/util/mapped_file.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "test_util.h"

namespace {

// Whether the page holding `p` is mapped into this process now (/proc/self/pagemap's
// "present" bit, readable without privileges).
bool Resident(const void* p) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::FILE* f = std::fopen("/proc/self/pagemap", "rb");
  REQUIRE(f != nullptr);
  uint64_t entry = 0;
  const long offset = static_cast<long>(reinterpret_cast<uintptr_t>(p) / page * sizeof(entry));
  const bool read = std::fseek(f, offset, SEEK_SET) == 0 && std::fread(&entry, 8, 1, f) == 1;
  std::fclose(f);
  REQUIRE(read);
  return (entry >> 63) != 0;
}

std::string Pattern(size_t bytes) {
  std::string s(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<char>((i * 131 + i / 4096) % 251);
  return s;
}

}  // namespace

TEST_CASE("DropPages gives back a mapped file's pages, which read back unchanged",
          "[util][mapped_file]") {
  const size_t bytes = size_t{8} << 20;
  const std::string want = Pattern(bytes);
  const std::string path = tpc::testing::TempDir("mapped_file") + "/weights";
  std::ofstream(path, std::ios::binary).write(want.data(), static_cast<std::streamsize>(bytes));
  auto file = tpc::MappedFile::Open(path);
  REQUIRE(file.ok());
  const uint8_t* data = (*file)->data();
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes; i += 4096) sum += data[i];  // every page resident
  CHECK(sum > 0);
  const uint8_t* middle = data + bytes / 2;
  REQUIRE(Resident(middle));

  // [1 MiB + 100, 7 MiB): the pages wholly inside go (the kernel may take whole huge
  // pages around them too: they are read again from the file all the same).
  (*file)->DropPages(data + (1 << 20) + 100, (size_t{6} << 20) - 100);
  CHECK_FALSE(Resident(middle));
  CHECK_FALSE(Resident(data + (size_t{7} << 20) - 1));
  CHECK(std::string(reinterpret_cast<const char*>(data), bytes) == want);

  // Ranges outside the mapping are refused, not clipped.
  (*file)->DropPages(data + bytes - 4096, 8192);
  (*file)->DropPages(data - 4096, 8192);
  CHECK(Resident(data + bytes - 1));
  CHECK(Resident(data));
}

TEST_CASE("DropPages leaves bytes that are not a mapped file alone", "[util][mapped_file]") {
  // Owned bytes are anonymous memory: dropping their pages would zero them.
  const size_t bytes = size_t{4} << 20;
  const std::string want = Pattern(bytes);
  auto file = tpc::MappedFile::FromBytes(want, "in memory");
  file->DropPages(file->data(), bytes);
  CHECK(std::string(reinterpret_cast<const char*>(file->data()), bytes) == want);
}
