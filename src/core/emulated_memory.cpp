// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Emulated-GPU memory: plain host memory, or with KTEN_TRAP_HOST_ACCESS=1 one reserved mmap arena
// whose pages are readable only while an emulated-GPU kernel or copy runs. The arena is a
// first-fit free list over page-aligned ranges; opening and closing access is counted, so that
// nested and concurrent launches keep the blocks open until the last one ends.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include <kten/kokkos.hpp>  // EmulatedGpuAccess

#include "emulated_memory.hpp"
#include "fail.hpp"
#include "storage.hpp"

namespace kten::detail {
namespace {

bool trap_requested() {
  const char* env = std::getenv("KTEN_TRAP_HOST_ACCESS");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

void explain_faults(char* base);

// Opening and closing is one mprotect over the used part of the reserve: per-block calls (which
// would allow guard pages between blocks) made the emulated suite several times slower. Bounds
// within device memory are checked instead by the AddressSanitizer run, which leaves emulated
// memory to ASan (tests/main.cpp).
class Arena {
 public:
  static constexpr std::size_t kReserve = std::size_t(1) << 40;  // address space only (NORESERVE)

  Arena() : page_(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    void* p = ::mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(p);
    explain_faults(base_);
  }

  void* allocate(std::size_t bytes) {
    const std::size_t size = (bytes + page_ - 1) / page_ * page_ + (bytes == 0 ? page_ : 0);
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t offset = used_;
    auto it = free_.begin();
    for (; it != free_.end() && it->second < size; ++it) {}
    if (it != free_.end()) {
      offset = it->first;
      if (it->second > size) free_.emplace(it->first + size, it->second - size);
      free_.erase(it);
    } else {
      if (used_ + size > kReserve) throw std::bad_alloc();
      used_ += size;
    }
    blocks_[offset] = size;
    if (open_ > 0) protect(offset, size, PROT_READ | PROT_WRITE);
    return base_ + offset;
  }

  void release(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(static_cast<std::size_t>(static_cast<char*>(p) - base_));
    std::size_t start = it->first, size = it->second;
    blocks_.erase(it);
    protect(start, size, PROT_NONE);
    ::madvise(base_ + start, size, MADV_DONTNEED);  // give the pages back; contents are dead
    auto next = free_.find(start + size);
    if (next != free_.end()) {
      size += next->second;
      free_.erase(next);
    }
    auto prev = free_.lower_bound(start);
    if (prev != free_.begin() && std::prev(prev)->first + std::prev(prev)->second == start) {
      --prev;
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
    free_.emplace(start, size);
  }

  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_++ == 0) protect(0, used_, PROT_READ | PROT_WRITE);
  }

  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--open_ == 0) protect(0, used_, PROT_NONE);
  }

  const char* base() const { return base_; }

 private:
  void protect(std::size_t offset, std::size_t size, int prot) {
    if (size > 0 && ::mprotect(base_ + offset, size, prot) != 0) std::abort();  // cannot go on safely
  }

  const std::size_t page_;
  char* base_ = nullptr;
  std::mutex mutex_;
  std::size_t used_ = 0;                        // bytes of the reserve handed out so far
  int open_ = 0;                                // live EmulatedAccess scopes
  std::map<std::size_t, std::size_t> free_;     // offset -> size of free ranges
  std::map<std::size_t, std::size_t> blocks_;   // offset -> size of live blocks
};

// A fault inside the arena is host code reading emulated-GPU memory: say so before the process
// dies as it would have (the previous handler, else the default action, takes the fault again).
char* trapped_base = nullptr;
struct sigaction previous_segv;

void on_segv(int, siginfo_t* info, void*) {
  const char* at = static_cast<const char*>(info->si_addr);
  if (trapped_base != nullptr && at >= trapped_base && at < trapped_base + Arena::kReserve) {
    static const char message[] =
        "\n*** kten (KTEN_TRAP_HOST_ACCESS=1): host code touched an emulated GPU's memory outside a kten "
        "kernel or copy. On a real GPU this read of device memory would fault too: copy the tensor to "
        "cpu() first (t.to(kten::cpu())). An application's own Kokkos kernel on an emulated-GPU tensor's "
        "view() runs on host threads: run it inside a kten::EmulatedGpuAccess scope (<kten/kokkos.hpp>), "
        "or without KTEN_TRAP_HOST_ACCESS, a test mode ***\n";
    const ssize_t written = ::write(STDERR_FILENO, message, sizeof message - 1);
    static_cast<void>(written);
  }
  ::sigaction(SIGSEGV, &previous_segv, nullptr);  // returning re-runs the access under it
}

void explain_faults(char* base) {
  trapped_base = base;
  struct sigaction action {};
  action.sa_sigaction = on_segv;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGSEGV, &action, &previous_segv);
}

Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: blocks may be released during static destruction
  return *a;
}

}  // namespace

bool emulated_memory_trapped() {
  static const bool trapped = trap_requested();
  return trapped;
}

bool in_emulated_memory(const void* p) {
  if (!emulated_memory_trapped()) return false;
  const char* base = arena().base();
  const char* at = static_cast<const char*>(p);
  return at >= base && at < base + Arena::kReserve;
}

namespace {

// KTEN_EMULATED_GPU_MIB: the memory of the emulated GPUs, all together, in MiB (0 or unset: what
// the host gives). A real GPU's allocation fails at its capacity; with one, tests and the fuzzer
// meet that OutOfMemory before the host's memory (or a sanitizer's limit) runs out.
std::size_t emulated_capacity() {
  static const std::size_t bytes = [] {
    const char* env = std::getenv("KTEN_EMULATED_GPU_MIB");
    if (env == nullptr || *env == '\0') return std::size_t(0);
    char* end = nullptr;
    const unsigned long long mib = std::strtoull(env, &end, 10);
    if (*end != '\0' || *env == '-' || mib > (std::size_t(1) << 40))
      fail("", "KTEN_EMULATED_GPU_MIB must be a number of MiB from 0 to 2^40, got '", env, "'");
    return static_cast<std::size_t>(mib) << 20;
  }();
  return bytes;
}

std::atomic<std::size_t> emulated_live_bytes{0};

std::shared_ptr<void> allocate_uncapped(std::size_t bytes, void** data) {
  if (!emulated_memory_trapped()) return allocate_host(bytes, "kten::emulated_gpu", data);
  void* p = arena().allocate(bytes);
  *data = p;
  return std::shared_ptr<void>(p, [](void* q) { arena().release(q); });
}

}  // namespace

std::shared_ptr<void> allocate_emulated(std::size_t bytes, void** data) {
  const std::size_t capacity = emulated_capacity();
  if (capacity == 0) return allocate_uncapped(bytes, data);
  if (bytes > capacity) throw std::bad_alloc();
  if (emulated_live_bytes.fetch_add(bytes) + bytes > capacity) {
    emulated_live_bytes -= bytes;
    throw std::bad_alloc();
  }
  try {
    std::shared_ptr<void> block = allocate_uncapped(bytes, data);
    return std::shared_ptr<void>(*data, [block = std::move(block), bytes](void*) mutable {
      block.reset();
      emulated_live_bytes -= bytes;
    });
  } catch (...) {
    emulated_live_bytes -= bytes;
    throw;
  }
}

}  // namespace kten::detail

namespace kten {

EmulatedGpuAccess::EmulatedGpuAccess() {
  if (detail::emulated_memory_trapped()) detail::arena().open();
}

EmulatedGpuAccess::~EmulatedGpuAccess() {
  if (!detail::emulated_memory_trapped()) return;
  Kokkos::DefaultHostExecutionSpace().fence();  // nothing may still touch the memory once closed
  detail::arena().close();
}

}  // namespace kten
