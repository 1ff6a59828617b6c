// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the files kten reads and writes (its parameter format, safetensors). Reads go through
// POSIX calls, so every failure (a missing file, a directory, an I/O error) is a FormatError rather
// than an iostream exception; writes are atomic.

#include <cstddef>
#include <cstdint>
#include <string>

namespace kten::detail {

/// \brief True on a little-endian host (the byte order of kten's files).
bool host_is_little_endian();

/// \brief Reverses each of the n `width`-byte elements at `data` on a big-endian host, so that
/// host-order elements become little-endian (the order of every file kten reads and writes) and
/// back; nothing on a little-endian host.
void swap_little_endian(void* data, std::size_t n, std::size_t width);

/// \brief FNV-1a (64 bits), the checksum of kten's own files, fed in pieces.
struct Fnv1a {
  std::uint64_t value = 0xcbf29ce484222325ull;
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) value = (value ^ p[i]) * 0x100000001b3ull;
  }
  /// \brief The checksum of n bytes at `data`.
  static std::uint64_t of(const void* data, std::size_t n) {
    Fnv1a h;
    h.add(data, n);
    return h.value;
  }
};

/// \brief A regular file open for reading; every failure is a FormatError from `op`.
class InputFile {
 public:
  InputFile(const std::string& path, std::string op);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  /// \brief The file's size in bytes when it was opened.
  std::uint64_t size() const { return size_; }
  /// \brief Reads `n` bytes at `offset` into `dst`; a file that ends before (it shrank) is a
  /// FormatError saying it is truncated.
  void read(std::uint64_t offset, void* dst, std::size_t n) const;

 private:
  int fd_;
  std::uint64_t size_ = 0;
  std::string op_;
};

/// \brief A file written atomically: the bytes go to a new temporary beside `path`
/// (PATH.tmp.<pid>.<n>), and commit() flushes it to disk and renames it over `path`, so a crash
/// leaves either the old file or the new one. Failures throw kten::Error from `op`;
/// destroyed without commit() (an exception), the temporary is removed and `path` is untouched.
class AtomicFile {
 public:
  AtomicFile(const std::string& path, std::string op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// \brief Appends `n` bytes.
  void write(const void* data, std::size_t n);
  /// \brief Flushes the file to disk and renames it over the target.
  void commit();

 private:
  [[noreturn]] void failed(int error);
  std::string path_, op_, temporary_;
  int fd_;
};

}  // namespace kten::detail
