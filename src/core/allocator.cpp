// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Device allocations through a cache of freed blocks, per device and size. A fresh allocation costs
// page faults on the host (the kernel zeroes every page on first touch) and a synchronising
// cudaMalloc on a GPU; reusing a block costs neither. Reuse is safe because work on a device is
// ordered: a GPU's runs in order on one execution-space instance (the default one, or while
// StreamGuards live the application's, which the guards fence when they start and end), and a
// host launch (OpenMP or Serial, cpu() and emulated GPUs) has finished when it returns. The cache is emptied on demand
// (kten::empty_cache), before an allocation that would otherwise fail, and when Kokkos finalises.
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include <kten/kokkos.hpp>  // own_view
#include <kten/runtime.hpp>

#include "backend_glue.hpp"
#include "checked.hpp"
#include "backends.hpp"
#include "emulated_memory.hpp"
#include "fail.hpp"
#include "kokkos_lifetime.hpp"
#include "pool.hpp"
#include "runtime_internal.hpp"
#include "storage.hpp"

namespace kten {
namespace detail {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = bytes;
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

namespace {

// Sizes are rounded up so that tensors of nearly equal size share blocks; nothing when the rounded
// size does not fit in 64 bits.
std::optional<std::size_t> block_size(std::size_t bytes) {
  const int grain_bits = bytes < (std::size_t(1) << 20) ? 9 : 21;  // 512 B, else 2 MiB; a shift, not a division
  // +1: never empty, so every storage has an address.
  return checked_mul((bytes >> grain_bits) + 1, std::size_t(1) << grain_bits);
}

OutOfMemory out_of_memory(const Device& device, std::size_t bytes, const char* what, const std::string& why) {
  return OutOfMemory(error_message("", "out of memory on ", device, ": could not allocate ",
                                   human_bytes(static_cast<double>(bytes)), " (", bytes, " bytes) for ", what,
                                   ". Free tensors you no longer need or use smaller batches. (", why, ")"));
}

struct Block {
  void* data;
  std::shared_ptr<void> view;  // the Kokkos::View that owns it
};

// A spin lock for the cache's short critical sections (a map lookup, a vector push or pop): an
// uncontended std::mutex costs an atomic read-modify-write to lock and another to unlock, where
// this unlocks with a plain release store; the mutex pair per tensor was a tenth of a small
// operation's time.
class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) std::this_thread::yield();
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

class BlockCache {
 public:
  using Key = std::tuple<int, int, std::size_t>;  // device kind, index, block size

  // Free blocks per key in a vector that only grows: taking and giving one back allocates
  // nothing (a multimap paid a node malloc and free per tensor, a tenth of a small operation).
  bool take(const Key& key, Block& out) {
    std::lock_guard<SpinLock> lock(lock_);
    auto it = free_.find(key);
    if (it == free_.end() || it->second.empty()) return false;
    out = std::move(it->second.back());
    it->second.pop_back();
    cached_ -= std::get<2>(key);
    return true;
  }

  void give(const Key& key, Block block) {
    std::lock_guard<SpinLock> lock(lock_);
    if (!Kokkos::is_initialized()) return;  // too late to keep anything: let the View go
    free_[key].push_back(std::move(block));
    cached_ += std::get<2>(key);
  }

  // Drops cached blocks (of one device, or all when device is null); they are freed here.
  void clear(const Device* device) {
    std::vector<Block> dropped;
    {
      std::lock_guard<SpinLock> lock(lock_);
      for (auto& [key, blocks] : free_) {
        const bool match = !device || (std::get<0>(key) == static_cast<int>(device->kind()) &&
                                        std::get<1>(key) == device->index());
        if (!match) continue;
        cached_ -= std::get<2>(key) * blocks.size();
        for (auto& block : blocks) dropped.push_back(std::move(block));
        blocks.clear();
      }
    }
  }

  std::size_t cached() {
    std::lock_guard<SpinLock> lock(lock_);
    return cached_;
  }

  void register_finalize_hook() {
    std::call_once(hook_once_, [this] { Kokkos::push_finalize_hook([this] { clear(nullptr); }); });
  }

 private:
  SpinLock lock_;
  std::map<Key, std::vector<Block>> free_;
  std::size_t cached_ = 0;
  std::once_flag hook_once_;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: tensors may outlive static destruction
  return *c;
}

// Uninitialised memory in `Space` owned by a Kokkos View (double words: 8-byte aligned, rounded up).
template <class Space>
std::shared_ptr<void> allocate_words(std::size_t bytes, const std::string& label, void** data) {
  using Words = Kokkos::View<double*, Space>;
  Words view(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), bytes / sizeof(double) + 1);
  *data = view.data();
  return own_view(std::move(view));
}

Block fresh_block(const Device& device, std::size_t size, const char* what) {
  return with_backend(device, [&](auto backend) {
    Block block{nullptr, nullptr};
    if constexpr (decltype(backend)::emulated)
      block.view = allocate_emulated(size, &block.data);
    else
      block.view = allocate_words<typename decltype(backend)::memory_space>(size, std::string("kten::") + what,
                                                                          &block.data);
    return block;
  });
}

}  // namespace

// An implicit host synchronisation like any other: counted, and reported by the sync debug mode.
void wait_for_pending_reader(const Storage& storage) {
  const int gpu_index = storage.pending_reader.exchange(-1);
  if (gpu_index < 0) return;
  note_host_sync(gpu(gpu_index), "reusing a pinned buffer a copy may still read", /*implicit=*/true);
  fence(gpu(gpu_index));
}

namespace {
// Bytes of the blocks live storages hold (every device): one atomic add per allocation and per
// release, beside the cache's lock.
std::atomic<std::size_t> live_bytes{0};
}  // namespace

std::size_t live_block_bytes() { return live_bytes; }

Storage::~Storage() {
  if (cache_block) {  // device memory: reuse is ordered on its device
    live_bytes -= cache_block;
    return_to_cache(*this);
    return;
  }
  const int gpu_index = pending_reader.exchange(-1);
  if (gpu_index < 0 || !Kokkos::is_initialized()) return;
  // The DMA must finish before the pinned buffer is freed. Counted, never thrown from here.
  note_host_sync(gpu(gpu_index), "freeing a pinned buffer a copy may still read", /*implicit=*/false);
  fence(gpu(gpu_index));
}

std::shared_ptr<void> allocate_host(std::size_t bytes, const char* label, void** data) {
  return allocate_words<Kokkos::HostSpace>(bytes, label, data);
}

std::shared_ptr<Storage> allocate(const Device& device, std::size_t bytes, const char* what) {
  ensure_kokkos();  // before the cache: a use after Kokkos::finalize is that error, not out of memory
  require_available(device);
  const auto rounded = block_size(bytes);
  if (!rounded) throw out_of_memory(device, bytes, what, "more than a 64-bit size can address");
  const std::size_t size = *rounded;
  const BlockCache::Key key{static_cast<int>(device.kind()), device.index(), size};
  Block block;
  if (!cache().take(key, block)) {
    try {
      block = fresh_block(device, size, what);
    } catch (const std::exception&) {
      cache().clear(&device);  // give the cached blocks back, then try once more
      try {
        block = fresh_block(device, size, what);
      } catch (const std::exception& e) {
        throw out_of_memory(device, bytes, what, std::string("Kokkos: ") + e.what());
      }
    }
    cache().register_finalize_hook();
  }
  auto storage = make_pooled<Storage>();
  storage->data = block.data;
  storage->bytes = bytes;
  storage->device = device;
  storage->owner = std::move(block.view);
  storage->cache_block = size;  // when the last tensor lets go, the block returns to the cache
  live_bytes += size;
  return storage;
}

void return_to_cache(Storage& storage) {
  const BlockCache::Key key{static_cast<int>(storage.device.kind()), storage.device.index(), storage.cache_block};
  try {
    cache().give(key, Block{storage.data, std::move(storage.owner)});
  } catch (...) {  // no room to remember the block (bad_alloc): its View frees it instead
  }
}

std::shared_ptr<Storage> allocate_pinned(std::size_t bytes) {
  auto storage = std::make_shared<Storage>();
  try {
    if (gpus_are_emulated()) {  // emulated GPUs copy from pinned memory like real ones (tested so)
      storage->owner = allocate_host(bytes, "kten::pinned", &storage->data);
    } else {
      storage->owner = allocate_pinned_host(bytes, &storage->data);
    }
  } catch (const std::exception& e) {
    fail<OutOfMemory>("", "out of pinned host memory: could not allocate ", human_bytes(bytes), " (", bytes,
                      " bytes) (Kokkos: ", e.what(), ")");
  }
  if (!storage->owner) return nullptr;
  storage->bytes = bytes;
  storage->device = cpu();
  storage->pinned = true;
  return storage;
}

}  // namespace detail

void empty_cache() { detail::cache().clear(nullptr); }
std::size_t cached_bytes() { return detail::cache().cached(); }

}  // namespace kten
