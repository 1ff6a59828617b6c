// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Reading and atomically writing kten's files with POSIX calls.
#include "io/files.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fail.hpp"

namespace kten::detail {

bool host_is_little_endian() {
  const std::uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

void swap_little_endian(void* data, std::size_t n, std::size_t width) {
  if (host_is_little_endian()) return;  // the bytes are in the file's order already
  auto* bytes = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) std::reverse(bytes + i * width, bytes + (i + 1) * width);
}

InputFile::InputFile(const std::string& path, std::string op) : op_(std::move(op)) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail<FormatError>(op_, "cannot open the file: ", std::strerror(errno));
  struct stat st;
  const bool stat_ok = ::fstat(fd_, &st) == 0;
  const int stat_errno = errno;
  if (!stat_ok || !S_ISREG(st.st_mode)) {
    ::close(fd_);  // the destructor does not run for a constructor that throws
    if (!stat_ok) fail<FormatError>(op_, "cannot read the file: ", std::strerror(stat_errno));
    fail<FormatError>(op_, "not a regular file (a directory or a device?)");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() { ::close(fd_); }

void InputFile::read(std::uint64_t offset, void* dst, std::size_t n) const {
  auto* out = static_cast<unsigned char*>(dst);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail<FormatError>(op_, "reading the file failed: ", std::strerror(errno));
    if (got == 0)
      fail<FormatError>(op_, "the file is truncated: it ends at byte ", offset + done, ", reading ", n,
                        " bytes from byte ", offset);
    done += static_cast<std::size_t>(got);
  }
}

// The temporary is new: the counter makes its name unique in this process (threads saving to one
// path each get their own), the pid between processes, and O_EXCL skips a name that a crashed
// process left behind. Its mode is 0666 less the umask, as for any new file (mkstemp would make it 0600).
AtomicFile::AtomicFile(const std::string& path, std::string op) : path_(path), op_(std::move(op)) {
  static std::atomic<std::uint64_t> counter{0};
  for (;;) {
    temporary_ = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) fail(op_, "cannot create '", temporary_, "': ", std::strerror(errno));
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;  // committed, or already cleaned up by failed()
  ::close(fd_);
  std::remove(temporary_.c_str());
}

void AtomicFile::failed(int error) {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  std::remove(temporary_.c_str());
  fail(op_, "writing failed (", std::strerror(error), "); the previous file, if any, is intact");
}

void AtomicFile::write(const void* data, std::size_t n) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t written = ::write(fd_, bytes + done, n - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) failed(written < 0 ? errno : EIO);
    done += static_cast<std::size_t>(written);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) failed(errno);
  if (::close(std::exchange(fd_, -1)) != 0) failed(errno);
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) failed(errno);
}

}  // namespace kten::detail
